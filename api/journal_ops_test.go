package api_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/shutdown"
)

// walFaults wraps a crashable in-memory filesystem so that every write to
// a WAL fails while failing is set.
func walFaults() (mem *vfs.MemFS, fs vfs.FS, failing *atomic.Bool) {
	mem, failing = vfs.NewCrashableMem(), new(atomic.Bool)
	fs = errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	}))
	return mem, fs, failing
}

// wantStoppedByJournal checks that a journal failure met off the runner's
// loop stopped an idle engine as a failed append does: not live (SD-34),
// a runtime_failure shutdown with JOURNAL_COMMIT_FAILED (SD-23), and every
// enqueue acknowledged before it present after a reopen on the synced
// image (RL-2).
func wantStoppedByJournal(t *testing.T, b *testBundle, mem *vfs.MemFS, acked []string) {
	t.Helper()
	// The failure is found on another goroutine: wait for its outcome,
	// bounded by iterations rather than time.
	for i := 0; i < 1_000_000 && b.eng.Live(); i++ {
		runtime.Gosched()
	}
	if b.eng.Live() || b.eng.Lifecycle() != api.Failed {
		t.Fatalf("RL-2, SD-34: engine %v and live after its journal fail-stopped", b.eng.Lifecycle())
	}
	<-b.eng.ShutdownStarted()
	if err := b.eng.Shutdown(b.ctx); !errors.Is(err, api.ErrFailStop) {
		t.Fatalf("shutdown after the journal fail-stopped: %v, want ErrFailStop", err)
	}
	if rep := b.eng.ShutdownReport(); rep == nil || rep.Trigger != shutdown.TriggerRuntimeFailure || rep.FailureCode != api.CodeJournalCommitFailed {
		t.Fatalf("SD-23: report %+v", rep)
	}
	if _, err := b.eng.Enqueue(b.ctx, "noop", msg{}); !errors.Is(err, api.ErrFailStop) && !errors.Is(err, api.ErrShuttingDown) {
		t.Fatalf("enqueue after the fail-stop: %v", err)
	}
	o := b.opts
	o.FS = mem.CrashClone(vfs.CrashCloneCfg{})
	e, err := api.Open(b.ctx, o)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer e.Close(b.ctx)
	for _, id := range acked {
		if j, err := e.Status(b.ctx, id); err != nil || j.Status != api.JobPending {
			t.Fatalf("RL-2: acknowledged job %s after reopen: %+v, %v", id, j, err)
		}
	}
	b.eng = nil // abandoned: its directory lock stays held (spec §2.3)
}

// RL-2, SD-23, SD-34: a snapshot whose commit fails fail-stops the journal
// as a failed append does, and stops the engine at once, even an idle one
// that appends nothing more. It used to be counted as a failed snapshot
// only: the engine stayed live and ready on a journal that accepts
// nothing until some later append failed.
func TestRL2_SnapshotCommitFailureStopsAnIdleEngine(t *testing.T) {
	mem, fs, failing := walFaults()
	api.SetSnapshotWriteHook(func(uint64) { failing.Store(true) })
	t.Cleanup(func() { api.SetSnapshotWriteHook(nil) })
	b := setup(t, func(o *api.Options) { o.FS = fs; o.SnapshotEvery = api.SnapshotEveryMin })
	if err := api.Handle(b.eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var acked []string
	for b.lastSeq() < api.SnapshotEveryMin {
		acked = append(acked, b.enqueue("noop", msg{N: len(acked)}, api.Delay(time.Hour)))
	}
	eng := b.eng
	wantStoppedByJournal(t, b, mem, acked)
	if s := eng.SnapshotStats(); s.Failed != 1 || s.Written != 0 || !errors.Is(s.LastError, api.ErrFailStop) {
		t.Fatalf("snapshot stats %+v, want one failed with ErrFailStop", s)
	}
}

// RL-2, SD-23, SD-34: a checkpoint whose WAL flush fails fail-stops the
// journal, and the engine stops with it.
func TestRL2_CheckpointCommitFailureStopsTheEngine(t *testing.T) {
	mem, fs, failing := walFaults()
	b := setup(t, func(o *api.Options) { o.FS = fs })
	if err := api.Handle(b.eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	acked := []string{b.enqueue("noop", msg{}, api.Delay(time.Hour))}
	failing.Store(true)
	if err := b.eng.Checkpoint("ck"); !errors.Is(err, api.ErrFailStop) {
		t.Fatalf("checkpoint on a failing WAL: %v, want ErrFailStop", err)
	}
	wantStoppedByJournal(t, b, mem, acked)
}

// RL-11: a job enqueued under a higher PayloadBytesMax is buried undecoded
// by an engine that runs with a lower one, and its payload stays in the
// journal: with the limit raised back, Retry runs it with that payload.
func TestRL11_PayloadBuriedOverALoweredLimitRunsAfterRetry(t *testing.T) {
	b := setup(t, nil)
	var got atomic.Int64
	register := func(e *api.Engine) {
		if err := api.Handle(e, "blob", func(_ context.Context, _ *api.Delivery, s string) error {
			got.Store(int64(len(s)))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	payload := strings.Repeat("x", 2*api.PayloadBytesMin)
	id := b.enqueue("blob", payload)
	b.opts.PayloadBytesMax = api.PayloadBytesMin
	b.reopen(register)
	b.start()
	b.idle()
	if j := b.wantStatus(id, api.JobBuried); j.LastCode != api.CodePayloadDecodeFailed || got.Load() != 0 {
		t.Fatalf("over the lowered limit: code %q, handler saw %d bytes", j.LastCode, got.Load())
	}
	b.opts.PayloadBytesMax = 0
	b.reopen(register)
	b.start()
	if err := b.eng.Retry(b.ctx, id); err != nil {
		t.Fatalf("retry: %v", err)
	}
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	if got.Load() != int64(len(payload)) {
		t.Fatalf("the retried job ran with %d bytes of payload, want %d", got.Load(), len(payload))
	}
}
