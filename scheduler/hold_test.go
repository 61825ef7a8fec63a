package scheduler

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// commitTook is how long each append of a timedAppender takes.
const commitTook = 200 * time.Microsecond

// timedAppender acknowledges every append after moving its clock by took,
// as a synced commit takes time, and keeps the records of each append
// apart. While its gate is closed, each append waits for it to open.
type timedAppender struct {
	clk  *clocktest.Clock
	took time.Duration

	mu      sync.Mutex
	appends [][]record.Record
	gate    chan struct{} // not nil while closed
	waiting chan struct{} // receives once per append that waits at the gate
}

func (a *timedAppender) Append(_ context.Context, index []IndexEntry, recs []record.Record, units []Unit) ([]uint64, error) {
	if err := checkUnits(recs, index, units); err != nil {
		return nil, err
	}
	a.mu.Lock()
	gate := a.gate
	a.mu.Unlock()
	if gate != nil {
		a.waiting <- struct{}{}
		<-gate
	}
	a.clk.Advance(a.took)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.appends = append(a.appends, slices.Clone(recs))
	return seqsOf(recs), nil
}

// close closes the gate: appends from now on wait. waiting receives once
// for each.
func (a *timedAppender) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gate = make(chan struct{})
	if a.waiting == nil {
		a.waiting = make(chan struct{}, 16)
	}
}

// open lets held appends and later ones through; it does nothing while
// the gate is open.
func (a *timedAppender) open() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gate != nil {
		close(a.gate)
		a.gate = nil
	}
}

// kinds returns the record kinds of each append, in order.
func (a *timedAppender) kinds() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([][]string, len(a.appends))
	for i, recs := range a.appends {
		for _, r := range recs {
			out[i] = append(out[i], r.Kind().String())
		}
	}
	return out
}

// holdBundle is a dispatching Runner over a timedAppender whose attempts
// run until the runner stops, with one job, "A", delayed by a second. Its
// commit estimate is commitTook once the setup's appends are acknowledged.
type holdBundle struct {
	clk *clocktest.Clock
	app *timedAppender
	r   *Runner
	due time.Time // A's available instant
}

func newHoldBundle(t *testing.T) *holdBundle {
	t.Helper()
	b := &holdBundle{clk: clocktest.New(t0)}
	b.app = &timedAppender{clk: b.clk, took: commitTook}
	m := NewMachine(Config{
		Workers: 4, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: seqIDs(),
	}, replay.New())
	b.r = NewRunner(RunnerConfig{
		Clock: b.clk, Appender: b.app,
		Execute: func(ctx context.Context, _ *Attempt) Result { <-ctx.Done(); return Result{} },
	}, m)
	startRecovered(t, b.r)
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, time.Second)
	if err := b.r.call(ctx, func(time.Time) {
		if b.r.commitEst != commitTook {
			t.Errorf("commit estimate %v after appends of %v each", b.r.commitEst, commitTook)
		}
		b.due, _ = b.r.m.NextTimer()
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *holdBundle) enqueue(t *testing.T, delay time.Duration) {
	t.Helper()
	if err := b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: delay, Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// submitHeld submits fn from another goroutine and returns once the runner
// holds its batch. It fails the test if the batch is appended first.
func (b *holdBundle) submitHeld(t *testing.T, fn func(m *Machine, now time.Time) (Decision, error)) (done chan error) {
	t.Helper()
	done = make(chan error, 1)
	go func() { done <- b.r.Submit(context.Background(), fn) }()
	for {
		held := false
		if err := b.r.call(context.Background(), func(time.Time) {
			held = len(b.r.pending) > 0 && !b.r.pending[0].holdUntil.IsZero()
		}); err != nil {
			t.Fatal(err)
		}
		if held {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("the batch was appended at once (err %v); appends %v", err, b.app.kinds())
		default:
		}
		runtime.Gosched()
	}
}

// A batch decided shortly before a start comes due, sooner than an append
// takes, waits for the start and goes in the same append: the start's
// attempt_started (DL-7) does not wait for a commit of other work first.
func TestHoldBatchForStartDueWithinACommit(t *testing.T) {
	b := newHoldBundle(t)
	b.clk.Set(b.due.Add(-commitTook / 4))
	done := b.submitHeld(t, func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: time.Hour, Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	})
	b.clk.Advance(commitTook / 4) // A comes due
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	kinds := b.app.kinds()
	last := kinds[len(kinds)-1]
	if !slices.Equal(last, []string{"job_enqueued", "attempt_started"}) {
		t.Fatalf("last append %v, want the held job_enqueued with A's attempt_started; appends %v", last, kinds)
	}
}

// A start due later than an append takes does not hold anything: the batch
// is appended at once, alone.
func TestNoHoldForStartDueBeyondACommit(t *testing.T) {
	b := newHoldBundle(t)
	b.clk.Set(b.due.Add(-2 * commitTook))
	n := len(b.app.kinds())
	b.enqueue(t, time.Hour) // returns: it was not held
	kinds := b.app.kinds()
	if len(kinds) != n+1 || !slices.Equal(kinds[n], []string{"job_enqueued"}) {
		t.Fatalf("appends after the enqueue %v, want one more holding job_enqueued alone", kinds)
	}
}

// A held batch goes when the start's instant passes even if no start
// comes: here the batch pauses A's queue, so A does not start.
func TestHeldBatchGoesWhenTheStartDoesNotCome(t *testing.T) {
	b := newHoldBundle(t)
	b.clk.Set(b.due.Add(-commitTook / 4))
	done := b.submitHeld(t, func(m *Machine, now time.Time) (Decision, error) {
		return m.PauseQueue("default"), nil
	})
	b.clk.Advance(commitTook / 4)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	kinds := b.app.kinds()
	if last := kinds[len(kinds)-1]; !slices.Equal(last, []string{"queue_paused"}) {
		t.Fatalf("last append %v, want queue_paused alone; appends %v", last, kinds)
	}
	for _, k := range kinds {
		if slices.Contains(k, "attempt_started") {
			t.Fatalf("an attempt started on the paused queue: appends %v", kinds)
		}
	}
}

// An acknowledged batch is kept for the next one with its slices' room,
// but without what they held: a recycled batch must not keep records,
// starts or reply channels of work that is done alive.
func TestRecycledBatchHoldsNothing(t *testing.T) {
	b := newHoldBundle(t) // its setup's appends were acknowledged
	var problem string
	if err := b.r.call(context.Background(), func(time.Time) {
		spare := b.r.spare
		switch {
		case spare == nil:
			problem = "no batch was kept after appends were acknowledged"
		case cap(spare.d.Records) == 0 || cap(spare.replies) == 0:
			problem = "the kept batch has no room: nothing to reuse"
		}
		if problem != "" {
			return
		}
		for _, r := range spare.d.Records[:cap(spare.d.Records)] {
			if r.Body != nil || r.Stream != "" {
				problem = "the kept batch still holds a record: " + r.Stream
			}
		}
		for _, c := range spare.replies[:cap(spare.replies)] {
			if c != nil {
				problem = "the kept batch still holds a reply channel"
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if problem != "" {
		t.Fatal(problem)
	}
}
