package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// notes returns a decision of n engine-stream debug records.
func notes(m *Machine, n int) Decision {
	var d Decision
	for range n {
		d.merge(m.Note(&record.Debug{Code: "TEST"}))
	}
	return d
}

// While a full batch waits behind the append being committed, the loop
// takes no new op: a start or settlement decided meanwhile waits behind
// at most that batch, however many callers are submitting. Once an
// acknowledgement sends the batch to the committer, the op is taken. Calls,
// which decide no record, are taken throughout.
func TestRunner_IntakeStopsWhileBatchesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		app := &memAppender{release: make(chan struct{})}
		m := NewMachine(Config{Workers: 1, DeliveryTimeout: deliveryTimeout}, replay.New())
		r := NewRunner(RunnerConfig{Clock: clocktest.New(t0), Appender: app,
			Execute: func(ctx context.Context, a *Attempt) Result { return Result{} }}, m)
		startRecovered(t, r)
		// Before the runner's Stop: a failed test leaves no append held.
		t.Cleanup(func() {
			app.mu.Lock()
			app.holdAll = false
			app.mu.Unlock()
			close(app.release)
		})
		app.mu.Lock()
		app.holdAll = true
		app.mu.Unlock()

		var wg sync.WaitGroup
		submit := func(fn func(m *Machine) Decision) {
			wg.Go(func() {
				if err := r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
					return fn(m), nil
				}); err != nil {
					t.Error(err)
				}
			})
			synctest.Wait()
		}
		submit(func(m *Machine) Decision { return notes(m, 1) }) // committing, held
		submit(func(m *Machine) Decision { return notes(m, batchRecordsMax-1) })
		submit(func(m *Machine) Decision { return notes(m, 1) }) // a full batch waits
		var taken atomic.Bool
		submit(func(m *Machine) Decision {
			taken.Store(true)
			return notes(m, 1)
		})
		if taken.Load() {
			t.Fatal("the loop took an op while a full batch waited behind the append in flight")
		}
		// A call decides no record: it is taken all the same (a shutdown
		// cancels attempts through one). Blocked, the bubble deadlocks.
		var pending int
		if err := r.Do(context.Background(), func(time.Time) { pending = len(r.pending) }); err != nil {
			t.Fatal(err)
		}
		if pending != 1 {
			t.Fatalf("%d batches pending, want the full one", pending)
		}
		app.release <- struct{}{} // the first append is acknowledged; the full batch goes
		synctest.Wait()
		if !taken.Load() {
			t.Fatal("the op was not taken once an acknowledgement made room")
		}
		app.mu.Lock()
		app.holdAll = false
		app.mu.Unlock()
		app.release <- struct{}{} // the full batch's append
		wg.Wait()
		app.mu.Lock()
		defer app.mu.Unlock()
		if got, want := len(app.recs), 1+batchRecordsMax+1+1; got != want { // and Recover's record
			t.Fatalf("%d records appended, want %d", got, want)
		}
	})
}

// Events whose subject is gone (the settlement cap of a settlement that
// was acknowledged, the supervision instants of an attempt that settled)
// arm no timer: fire would drop them unseen, and waking the loop for them
// costs a pass (and, under sim, a stop of Advance) for nothing.
func TestRunner_NoTimerForEventsWhoseSubjectIsGone(t *testing.T) {
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result { return Result{} })
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(b.app.settlements()); n != 1 {
		t.Fatalf("%d settlements, want the job's one", n)
	}
	b.sync() // a pass of the loop after the settlement's acknowledgement
	if at, ok := b.clk.Next(); ok {
		t.Fatalf("a timer is armed for t0%+v with nothing left to do", at.Sub(t0))
	}
}
