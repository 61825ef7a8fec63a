package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// started returns the attempt_started record of job id and the number of
// the append that carried it, or fails the test.
func (a *timedAppender) started(t *testing.T, id string) (*record.AttemptStarted, int) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, recs := range a.appends {
		for _, r := range recs {
			if s, ok := r.Body.(*record.AttemptStarted); ok && s.JobID == id {
				return s, i
			}
		}
	}
	t.Fatalf("no attempt_started of %s in %d appends", id, len(a.appends))
	return nil, 0
}

func (a *timedAppender) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.appends)
}

// wakeBundle is a dispatching Runner on a fake clock over a timedAppender
// whose appends take no time.
// Each attempt runs until release receives.
type wakeBundle struct {
	clk     *clocktest.Clock
	app     *timedAppender
	r       *Runner
	release chan struct{}
}

func newWakeBundle(t *testing.T, workers int) *wakeBundle {
	t.Helper()
	b := &wakeBundle{clk: clocktest.New(t0), release: make(chan struct{})}
	b.app = &timedAppender{clk: b.clk}
	m := NewMachine(Config{
		Workers: workers, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: seqIDs(),
	}, replay.New())
	b.r = NewRunner(RunnerConfig{
		Clock: b.clk, Appender: b.app,
		Execute: func(ctx context.Context, _ *Attempt) Result {
			select {
			case <-b.release:
			case <-ctx.Done():
			}
			return Result{}
		},
	}, m)
	startRecovered(t, b.r)
	t.Cleanup(b.app.open) // before Stop, which waits for the append in flight
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *wakeBundle) enqueue(t *testing.T, delay time.Duration) string {
	t.Helper()
	var id string
	if err := b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
		d, jid := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: delay, Retry: defaultRetry, Payload: []byte{0x80}})
		id = jid
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// armedAt reports whether a clock timer is armed for exactly at, once the
// loop has finished the pass it is in.
func (b *wakeBundle) armedAt(t *testing.T, at time.Time) bool {
	t.Helper()
	if err := b.r.call(context.Background(), func(time.Time) {}); err != nil {
		t.Fatal(err)
	}
	next, ok := b.clk.Next()
	return ok && next.Equal(at)
}

// JB-1, RL-9: a delayed job that comes due while every worker slot is
// taken could not start, so the runner arms no timer for it: the
// settlement that frees a slot starts it, with S the instant of that
// settlement (DL-7).
func TestRL9_NoWakeForADelayedJobWhileNoSlotIsFree(t *testing.T) {
	b := newWakeBundle(t, 1)
	delayed := b.enqueue(t, time.Second)
	if !b.armedAt(t, ts(time.Second)) {
		t.Fatal("precondition: with a slot free, the runner arms a timer at the delayed job's instant")
	}
	first := b.enqueue(t, 0)
	if err := b.r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.app.started(t, first)
	if b.armedAt(t, ts(time.Second)) {
		t.Fatal("a timer is armed for a job that could not start: the only slot is taken")
	}

	b.clk.Set(ts(2 * time.Second))
	b.release <- struct{}{} // the first job returns, and its settlement frees the slot
	b.release <- struct{}{} // received only once the delayed job runs
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ := b.app.started(t, delayed)
	if got := time.Unix(0, s.StartAt); !got.Equal(ts(2 * time.Second)) {
		t.Fatalf("delayed job started with S %v, want the settlement's instant %v", got, ts(2*time.Second))
	}
}

// RL-1, DL-7: what comes due while an append is in flight waits for that
// append either way, so the runner does not wake for it: it decides the
// start when the append is acknowledged, and the start goes in the very
// next append.
func TestDL7_StartDueDuringAnAppendIsDecidedAtItsAcknowledgement(t *testing.T) {
	b := newWakeBundle(t, 4)
	id := b.enqueue(t, time.Second)
	if !b.armedAt(t, ts(time.Second)) {
		t.Fatal("precondition: with no append in flight, the runner arms a timer at the delayed job's instant")
	}

	b.app.close()
	enqueued := make(chan error, 1)
	go func() {
		enqueued <- b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
			d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: time.Hour, Retry: defaultRetry, Payload: []byte{0x80}})
			return d, nil
		})
	}()
	<-b.app.waiting
	held := b.app.count()
	if b.armedAt(t, ts(time.Second)) {
		t.Fatal("a timer is armed for a start while an append is in flight")
	}

	b.clk.Set(ts(1500 * time.Millisecond))
	b.app.open()
	if err := <-enqueued; err != nil {
		t.Fatal(err)
	}
	// The start was decided before the note's caller was answered; Sync
	// returns once it is acknowledged.
	if err := b.r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, n := b.app.started(t, id)
	if n != held+1 {
		t.Fatalf("attempt_started in append %d, want %d: the one right after the append in flight", n, held+1)
	}
	if got := time.Unix(0, s.StartAt); !got.Equal(ts(1500 * time.Millisecond)) {
		t.Fatalf("S = %v, want the acknowledgement's instant %v", got, ts(1500*time.Millisecond))
	}
	b.release <- struct{}{}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// RL-9: the runner's one clock timer is armed at the earliest instant of
// the machine's timers and the attempts' deadlines together: a running
// attempt's notification instant comes first although a delayed job's
// instant, later, is armed too.
func TestRL9_OneTimerAtTheEarliestOfJobsAndDeadlines(t *testing.T) {
	b := newWakeBundle(t, 4)
	b.enqueue(t, time.Hour)
	id := b.enqueue(t, 0)
	if err := b.r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ := b.app.started(t, id)
	n := time.Unix(0, s.NormalAt)
	if !n.Before(ts(time.Hour)) {
		t.Fatalf("precondition: notification instant %v before the delayed job's", n.Sub(t0))
	}
	if !b.armedAt(t, n) {
		next, _ := b.clk.Next()
		t.Fatalf("timer armed at %v, want the attempt's notification instant %v", next.Sub(t0), n.Sub(t0))
	}
	b.release <- struct{}{}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// RL-9: deadlines that come due together are acted on in order of their
// instant, then of the seq of the record that armed them: two attempts
// started at one instant reach their timeout together, and after a jump
// past it their settlements are decided in token order.
func TestRL9_DeadlinesDueTogetherSettleInTokenOrder(t *testing.T) {
	b := newWakeBundle(t, 4)
	first, second := b.enqueue(t, 0), b.enqueue(t, 0)
	if err := b.r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s1, _ := b.app.started(t, first)
	s2, _ := b.app.started(t, second)
	if s1.NormalAt != s2.NormalAt {
		t.Fatalf("precondition: one notification instant, got %v and %v", s1.NormalAt, s2.NormalAt)
	}
	b.clk.Set(ts(time.Hour))
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	var order []string
	b.app.mu.Lock()
	for _, recs := range b.app.appends {
		for _, r := range recs {
			if s, ok := r.Body.(*record.AttemptRetryScheduled); ok {
				order = append(order, s.JobID)
			}
		}
	}
	b.app.mu.Unlock()
	if len(order) != 2 || order[0] != first || order[1] != second {
		t.Fatalf("timed-out attempts settled in order %v, want [%s %s]", order, first, second)
	}
}

// RL-11, RL-1: the summary a finished workflow leaves behind for lookups
// before its append is acknowledged goes once the append is: memory does
// not grow with the workflows that ever finished.
func TestRL11_FinishedWorkflowsLeaveNothingOnceAcknowledged(t *testing.T) {
	clk := clocktest.New(t0)
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Steps: []StepDef{{Kind: StepDelay, Name: "delay_0", Delay: time.Second}}}
	m := NewMachine(Config{
		Workers: 1, DeliveryTimeout: deliveryTimeout,
		NewIDFunc:    seqIDs(),
		WorkflowFunc: func(string) *WorkflowDef { return def },
	}, replay.New())
	r := NewRunner(RunnerConfig{Clock: clk, Appender: &timedAppender{clk: clk},
		Execute: func(ctx context.Context, a *Attempt) Result { return Result{} }}, m)
	startRecovered(t, r)
	ctx := context.Background()
	var id string
	if err := r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		d, wid, err := m.StartWorkflow(now, DispatchRequest{Name: "flow"})
		id = wid
		return d, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	clk.Set(ts(time.Second)) // the delay fires: the workflow completes
	if err := r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var inState bool
	var recent int
	if err := r.Do(ctx, func(time.Time) { _, inState = m.State().Workflows[id]; recent = len(m.recent) }); err != nil {
		t.Fatal(err)
	}
	if inState {
		t.Fatalf("precondition: workflow %s finished and left the state", id)
	}
	if recent != 0 {
		t.Fatalf("%d finished workflows kept after their append was acknowledged", recent)
	}
}
