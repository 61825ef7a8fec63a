package scheduler

import (
	"context"
	"errors"
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
// which decide no record, are taken throughout. A batch is full when it
// holds batchRecordsMax records, or when a second one had to be opened
// behind it for records it had no room for.
func TestRunner_IntakeStopsWhileBatchesWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sizes   []int // the notes of each op submitted behind the append in flight
		pending int   // the batches they make
	}{
		{"one batch of batchRecordsMax", []int{batchRecordsMax - 1, 1}, 1},
		{"a second batch opened", []int{batchRecordsMax / 2, batchRecordsMax/2 + 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) { intakeStopsWhileBatchesWait(t, tc.sizes, tc.pending) })
	}
}

func intakeStopsWhileBatchesWait(t *testing.T, sizes []int, batches int) {
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
		queued := 0
		for _, n := range sizes { // a full batch waits
			submit(func(m *Machine) Decision { return notes(m, n) })
			queued += n
		}
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
		if pending != batches {
			t.Fatalf("%d batches pending, want %d", pending, batches)
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
		if got, want := len(app.recs), 1+queued+1+1; got != want { // and Recover's record
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

// A Submit whose ctx has ended before the call returns ctx.Err() and never
// runs its fn, however ready the loop is to take it: a ctx.Err() from
// Submit always means nothing was appended (RL-1).
func TestRL1_SubmitWithAnEndedCtxRunsNothing(t *testing.T) {
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result { return Result{} })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := 0
	for range 64 {
		err := b.r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
			ran++
			return m.Note(&record.Debug{Code: "TEST"}), nil
		})
		if err != context.Canceled {
			t.Fatalf("Submit with an ended ctx returned %v, want %v", err, context.Canceled)
		}
	}
	b.sync()
	if ran != 0 {
		t.Fatalf("%d of 64 submits with an ended ctx ran their fn", ran)
	}
}

// WD-6: a periodic deadline check that finds nothing decides an empty
// decision, which no caller waits for. Decided while an append is in
// flight, it leaves nothing behind for the acknowledgement to answer: the
// loop goes on taking ops after it.
func TestWD6_EmptyCheckDuringAnAppendLeavesNothingToAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result { return Result{} },
			func(c *RunnerConfig) { c.DeadlineCheckInterval = time.Second })
		ctx := context.Background()
		if err := b.r.SetDispatch(ctx, true); err != nil {
			t.Fatal(err)
		}
		if err := b.r.EnableDeadlineChecks(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.r.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		b.app.mu.Lock()
		b.app.holdAll = true
		b.app.mu.Unlock()
		noted := make(chan error, 1)
		go func() { noted <- b.r.Note(ctx, &record.Debug{Code: "TEST"}) }()
		synctest.Wait() // the note's append is in flight
		b.clk.Set(ts(time.Second))
		// A pass of the loop decides the check due at 1 s; it finds nothing.
		if err := b.r.Do(ctx, func(time.Time) {}); err != nil {
			t.Fatal(err)
		}
		b.app.mu.Lock()
		b.app.holdAll = false
		b.app.mu.Unlock()
		b.app.release <- struct{}{}
		if err := <-noted; err != nil {
			t.Fatal(err)
		}
		b.sync() // blocked on a reply to no one, the loop would deadlock the bubble
	})
}

// errAppend is the failure of a failingAppender.
var errAppend = errors.New("append failed")

// failingAppender is a memAppender whose appends, once failing is set,
// wait for release to be closed and fail.
type failingAppender struct {
	memAppender
	failing atomic.Bool
}

func (a *failingAppender) Append(ctx context.Context, index []IndexEntry, recs []record.Record, units []Unit) ([]uint64, error) {
	if a.failing.Load() {
		<-a.release
		return nil, errAppend
	}
	return a.memAppender.Append(ctx, index, recs, units)
}

// RL-2: a failed append stops the runner, and every caller waiting on a
// decision, the one being committed and those behind it alike, gets the
// append's error; none is left waiting.
func TestRL2_FailedAppendAnswersEveryWaitingCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		app := &failingAppender{memAppender: memAppender{release: make(chan struct{})}}
		m := NewMachine(Config{Workers: 1, DeliveryTimeout: deliveryTimeout}, replay.New())
		var fatal atomic.Value
		r := NewRunner(RunnerConfig{Clock: clocktest.New(t0), Appender: app,
			Execute: func(ctx context.Context, a *Attempt) Result { return Result{} },
			OnFatal: func(err error) { fatal.Store(err) }}, m)
		startRecovered(t, r)
		app.failing.Store(true)
		errs := make(chan error, 2)
		for range 2 { // the first is committed, the second waits behind it
			go func() { errs <- r.Note(context.Background(), &record.Debug{Code: "TEST"}) }()
			synctest.Wait()
		}
		close(app.release)
		for range 2 {
			if err := <-errs; !errors.Is(err, errAppend) {
				t.Fatalf("a caller got %v, want the append's error", err)
			}
		}
		if err, _ := fatal.Load().(error); !errors.Is(err, errAppend) {
			t.Fatalf("OnFatal got %v", err)
		}
	})
}
