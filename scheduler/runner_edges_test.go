package scheduler

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// submitNotHeld submits fn and waits for it, failing the test if the
// runner holds its batch for a start (holdFor) on the way.
func (b *holdBundle) submitNotHeld(t *testing.T, fn func(m *Machine, now time.Time) (Decision, error)) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- b.r.Submit(context.Background(), fn) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		default:
		}
		held := false
		if err := b.r.call(context.Background(), func(time.Time) {
			held = len(b.r.pending) > 0 && !b.r.pending[0].holdUntil.IsZero()
		}); err != nil {
			t.Fatal(err)
		}
		if held {
			t.Fatalf("the batch was held for a start; appends %v", b.app.kinds())
		}
		runtime.Gosched()
	}
}

func enqueueNow(m *Machine, now time.Time) (Decision, error) {
	d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
	return d, nil
}

// DL-7: a batch that carries a start of its own is never held for a later
// one: its attempt_started goes to the committer at once, whatever comes
// due within the commit estimate.
func TestDL7_BatchWithAStartIsNotHeldForTheNextStart(t *testing.T) {
	b := newHoldBundle(t)
	b.clk.Set(b.due.Add(-commitTook / 4)) // A comes due within an append
	n := len(b.app.kinds())
	b.submitNotHeld(t, enqueueNow) // B is ready: it starts in the same batch
	if kinds := b.app.kinds(); !slices.Equal(kinds[n], []string{"job_enqueued", "attempt_started"}) {
		t.Fatalf("appends %v, want job_enqueued with B's attempt_started alone first", kinds[n:])
	}
}

// A batch is held for a start only while a worker slot is free: with
// every slot taken, the start due within the commit estimate cannot come,
// and the batch goes at once.
func TestNoHoldForAStartWithNoSlotFree(t *testing.T) {
	b := newHoldBundle(t)
	for range 4 { // Workers: each attempt runs until the runner stops
		b.enqueue(t, 0)
	}
	if err := b.r.call(context.Background(), func(time.Time) {
		if n := len(b.r.attempts); n != 4 || b.r.m.SlotFree() {
			t.Errorf("%d attempts running, slot free %v; want every slot taken", n, b.r.m.SlotFree())
		}
	}); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(b.due.Add(-commitTook / 4))
	n := len(b.app.kinds())
	b.submitNotHeld(t, func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: time.Hour, Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	})
	if kinds := b.app.kinds(); len(kinds) != n+1 || !slices.Equal(kinds[n], []string{"job_enqueued"}) {
		t.Fatalf("appends after the enqueue %v, want one more holding job_enqueued alone", kinds[n:])
	}
}

// WD-6: the periodic workflow deadline check runs at the instant it is
// due, not only once the clock is past it: the first one at once when the
// checks are enabled. The workflow's deadline passed at 1 s; the checks
// are enabled at 1 s, on a clock that fires no timer.
func TestWD6_FirstCheckRunsAtTheInstantChecksAreEnabled(t *testing.T) {
	clk := clocktest.New(t0)
	m := flowMachine("")
	app := &memAppender{}
	r := NewRunner(RunnerConfig{
		Clock: inertClock{clk}, Appender: app,
		Execute:               func(ctx context.Context, a *Attempt) Result { return Result{} },
		DeadlineCheckInterval: time.Minute,
	}, m)
	startRecovered(t, r)
	ctx := context.Background()
	startFlow(t, r)
	clk.Set(ts(time.Second))
	dispatchWithChecks(t, r)
	if err := r.Sync(ctx); err != nil { // answered once the check's records are acknowledged
		t.Fatal(err)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	for _, rec := range app.recs {
		if rec.Kind() == record.KindWorkflowDeadlineExceeded {
			return
		}
	}
	t.Fatal("no workflow_deadline_exceeded after the check enabled at the deadline")
}

// RL-12: a snapshot, encoded when its records are decided, is written only
// once its LastSeq is acknowledged: here the append holding it waits at a
// closed gate while the snapshot is due.
func TestRL12_SnapshotWrittenOnlyOnceItsSeqIsAcknowledged(t *testing.T) {
	clk := clocktest.New(t0)
	app := &timedAppender{clk: clk, took: commitTook}
	appended := func() uint64 {
		app.mu.Lock()
		defer app.mu.Unlock()
		var last uint64
		for _, recs := range app.appends {
			if n := len(recs); n > 0 {
				last = recs[n-1].Seq
			}
		}
		return last
	}
	var (
		mu    sync.Mutex
		wrote [][2]uint64 // the snapshot's seq and the last appended seq at its write
	)
	m := NewMachine(Config{Workers: 1, DeliveryTimeout: deliveryTimeout, NewIDFunc: seqIDs()}, replay.New())
	r := NewRunner(RunnerConfig{
		Clock: clk, Appender: app,
		Execute:       func(ctx context.Context, a *Attempt) Result { return Result{} },
		SnapshotEvery: 1,
		SnapshotFunc: func(st *replay.State) func(func(bool)) {
			seq := st.LastSeq
			return func(stored func(bool)) {
				mu.Lock()
				wrote = append(wrote, [2]uint64{seq, appended()})
				mu.Unlock()
				stored(true)
			}
		},
	}, m)
	startRecovered(t, r)
	app.close()
	done := make(chan error, 1)
	go func() { done <- r.Submit(context.Background(), enqueueNow) }()
	<-app.waiting // the job_enqueued is with the committer, and its snapshot due
	var decided uint64
	if err := r.call(context.Background(), func(time.Time) { decided = r.m.NextSeq() - 1 }); err != nil {
		t.Fatal(err)
	}
	app.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, w := range wrote {
		if w[1] < w[0] {
			t.Fatalf("snapshot at seq %d written with seq %d the last appended", w[0], w[1])
		}
		found = found || w[0] == decided
	}
	if !found {
		t.Fatalf("no snapshot at seq %d written; wrote %v", decided, wrote)
	}
}

// An on-deadline handler still running keeps the runner from being idle:
// WaitIdle waits for it (WD-10).
func TestWaitIdleWaitsForARunningDeadlineHandler(t *testing.T) {
	r, ctxs := handlerAt(t)
	<-ctxs // the handler runs until its context ends
	ctx := context.Background()
	idle := make(chan error, 1)
	go func() { idle <- r.WaitIdle(ctx) }()
	for registered := false; !registered; {
		select {
		case err := <-idle:
			t.Fatalf("WaitIdle returned (%v) while an on-deadline handler ran", err)
		default:
		}
		// A pass of the loop checked idleness after the registration
		// whenever it is seen here.
		if err := r.call(ctx, func(time.Time) { registered = len(r.idleWait) == 1 }); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	if err := r.Force(ctx, deadlines.ReasonForcedShutdown); err != nil { // ends the handler
		t.Fatal(err)
	}
	if err := <-idle; err != nil {
		t.Fatal(err)
	}
}

// A start due exactly one commit estimate away holds nothing: a batch
// waits only for a start due sooner than an append takes.
func TestNoHoldForAStartDueExactlyACommitAway(t *testing.T) {
	b := newHoldBundle(t)
	b.clk.Set(b.due.Add(-commitTook))
	n := len(b.app.kinds())
	b.submitNotHeld(t, func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: time.Hour, Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	})
	if kinds := b.app.kinds(); len(kinds) <= n || !slices.Equal(kinds[n], []string{"job_enqueued"}) {
		t.Fatalf("appends after the enqueue %v, want job_enqueued alone first", kinds[n:])
	}
}

// WD-6, RL-12: a deadline check with more expiries than one batch decides
// a batch's worth, and decides the rest only once that is acknowledged:
// while its append waits, no pass of the loop decides more of it.
func TestWD6_CheckLargerThanABatchGoesOnOnlyOnceAcknowledged(t *testing.T) {
	const flows = 3 * batchRecordsMax / 2
	clk := clocktest.New(t0)
	m := flowMachine("")
	app := &timedAppender{clk: clk, took: commitTook}
	r := NewRunner(RunnerConfig{
		Clock: inertClock{clk}, Appender: app,
		Execute:               func(ctx context.Context, a *Attempt) Result { return Result{} },
		DeadlineCheckInterval: time.Hour,
	}, m)
	startRecovered(t, r)
	ctx := context.Background()
	for range flows {
		startFlow(t, r)
	}
	clk.Set(ts(time.Minute)) // every workflow's deadline has passed (appends move the clock)
	app.close()
	dispatchWithChecks(t, r)
	<-app.waiting // the check's first batch is with the committer
	var first, later uint64
	if err := r.call(ctx, func(time.Time) { first = r.m.NextSeq() - 1 }); err != nil {
		t.Fatal(err)
	}
	for range 3 { // passes of the loop while the append waits
		if err := r.call(ctx, func(time.Time) { later = r.m.NextSeq() - 1 }); err != nil {
			t.Fatal(err)
		}
	}
	if later != first {
		t.Fatalf("decided up to seq %d while the check's first batch (to %d) waited for its append", later, first)
	}
	app.open()
	if err := r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	exceeded := 0
	for _, k := range app.kinds() {
		exceeded += count(k, record.KindWorkflowDeadlineExceeded.String())
	}
	if exceeded != flows {
		t.Fatalf("%d workflows expired, want %d", exceeded, flows)
	}
}
