package api_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
)

// RL-2, SD-23: the first journal failure is the one the engine keeps. A
// second fail-stop met later off the runner's loop (a snapshot or
// checkpoint commit failing after an append did) neither replaces the
// first one's error nor starts the shutdown again.
func TestRL2_FirstJournalFailureIsTheOneKept(t *testing.T) {
	b := setup(t, nil)
	b.start()
	first := fmt.Errorf("%w: first write failed", journal.ErrFailStop)
	second := fmt.Errorf("%w: second write failed", journal.ErrFailStop)
	api.JournalFailure(b.eng, first)
	api.JournalFailure(b.eng, second)
	if b.eng.Live() || b.eng.Lifecycle() != api.Failed {
		t.Fatalf("engine %v and live after its journal fail-stopped", b.eng.Lifecycle())
	}
	<-b.eng.ShutdownStarted()
	err := b.eng.Shutdown(b.ctx)
	if !errors.Is(err, api.ErrFailStop) || !strings.Contains(err.Error(), "first write failed") || strings.Contains(err.Error(), "second write failed") {
		t.Fatalf("shutdown after two journal failures: %v, want ErrFailStop with the first failure only", err)
	}
	if _, err := b.eng.Enqueue(b.ctx, "noop", msg{}); err == nil || strings.Contains(err.Error(), "second write failed") {
		t.Fatalf("enqueue after the fail-stop: %v, want refused with the first failure", err)
	}
}

// RL-2: only a fail-stop of the journal stops the engine: another error of
// a commit made off the runner's loop leaves it live.
func TestRL2_JournalErrorThatIsNotAFailStopLeavesTheEngineLive(t *testing.T) {
	b := setup(t, nil)
	b.start()
	api.JournalFailure(b.eng, errors.New("checkpoint dir exists"))
	if !b.eng.Live() || b.eng.Lifecycle() == api.Failed {
		t.Fatalf("engine %v, live %t after a journal error that is not a fail-stop", b.eng.Lifecycle(), b.eng.Live())
	}
}

// JB-9: RunOnce on a closed engine is refused as any call is, with
// ErrClosed, and leaves the engine as it was: a second RunOnce is refused
// the same way, not as if the first had claimed the engine (ErrState).
func TestJB9_RunOnceOnAClosedEngineClaimsNothing(t *testing.T) {
	b := setup(t, nil)
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.eng.RunOnce(b.ctx); !errors.Is(err, api.ErrClosed) || errors.Is(err, api.ErrState) {
			t.Fatalf("RunOnce %d on a closed engine: %v, want ErrClosed", i+1, err)
		}
	}
}

// JB-7, RL-12, SD-12: RetryBuried requeues a large queue in appends of
// RetryBuriedBatch jobs, and once a shutdown has begun between two of them
// it stops: the jobs after the appended batches stay buried, the count
// says how many were requeued, and the error is ErrShuttingDown.
func TestJB7_RetryBuriedStopsBetweenBatchesOnceAShutdownBegan(t *testing.T) {
	arm, holding, hold := holdAfterAppend(t)
	b := setup(t, nil)
	if err := api.Handle(b.eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	const n = api.RetryBuriedBatch + 1
	ids := make([]string, n)
	for i := range ids { // not started: nothing is dispatched
		ids[i] = b.enqueue("noop", msg{N: i})
		if err := b.eng.Bury(b.ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		k   int
		err error
	}
	done := make(chan result, 1)
	arm()
	go func() {
		k, err := b.eng.RetryBuried(b.ctx, api.QueueDefault)
		done <- result{k, err}
	}()
	<-holding // the first batch is appended, not yet acknowledged
	go b.eng.Shutdown(b.ctx)
	for i := 0; i < 1_000_000 && b.eng.Lifecycle() != api.Draining; i++ {
		runtime.Gosched()
	}
	if l := b.eng.Lifecycle(); l != api.Draining {
		t.Fatalf("lifecycle %v, want draining once the shutdown began", l)
	}
	close(hold)
	r := <-done
	if r.k != api.RetryBuriedBatch || !errors.Is(r.err, api.ErrShuttingDown) {
		t.Fatalf("RetryBuried = %d, %v; want %d, ErrShuttingDown", r.k, r.err, api.RetryBuriedBatch)
	}
	if st, err := b.eng.Status(b.ctx, ids[n-1]); err != nil || st.Status != api.JobBuried {
		t.Fatalf("the job after the first batch: %+v, %v; want still buried", st, err)
	}
}

// RL-2, SD-23, SD-34: a snapshot written whole whose older snapshot's
// deletion then fails the journal stops the engine as a failed append
// does, even an idle one that appends nothing more. Once the snapshot's
// commit is synced (the first WAL sync after its write began), every
// later WAL write fails: the deletion's.
func TestRL2_SnapshotDeletionFailureStopsAnIdleEngine(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var armed, synced atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || !strings.HasSuffix(op.Path, ".log") || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		if synced.Load() {
			return errorfs.ErrInjected
		}
		if op.Kind != errorfs.OpFileWrite && op.Kind != errorfs.OpFileWriteAt {
			synced.Store(true) // the snapshot's own sync passes
		}
		return nil
	}))
	var writes atomic.Int32
	api.SetSnapshotWriteHook(func(uint64) {
		if writes.Add(1) == 2 { // the second snapshot deletes the first
			armed.Store(true)
		}
	})
	t.Cleanup(func() { api.SetSnapshotWriteHook(nil) })
	b := setup(t, func(o *api.Options) { o.FS = fs; o.SnapshotEvery = api.SnapshotEveryMin })
	if err := api.Handle(b.eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var acked []string
	for b.lastSeq() < 2*api.SnapshotEveryMin {
		acked = append(acked, b.enqueue("noop", msg{N: len(acked)}, api.Delay(time.Hour)))
	}
	eng := b.eng
	// The snapshot is written on a goroutine of its own: wait for it,
	// bounded by iterations rather than time.
	for i := 0; i < 1_000_000 && eng.SnapshotStats().Written < 2 && eng.SnapshotStats().Failed == 0; i++ {
		runtime.Gosched()
	}
	wantStoppedByJournal(t, b, mem, acked)
	if s := eng.SnapshotStats(); s.Written != 2 || s.Failed != 0 {
		t.Fatalf("snapshot stats %+v, want the snapshot written and its deletion failing", s)
	}
}
