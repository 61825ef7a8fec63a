package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// RL-9, RL-8: after a forward jump, what became due fires in order of its
// instant. An attempt whose deadlines (P at 75 ms, C about 81 ms) fell
// before a workflow's deadline (1 s) is settled before the periodic check
// expires the workflow, even when the pass that first sees the new instant
// was woken by a call rather than by the loop's timer: which channel the
// loop takes first must not decide the journal's order.
func TestRL9_AttemptDeadlinesComeBeforeTheDeadlineCheckAfterAJump(t *testing.T) {
	clk := clocktest.New(t0)
	def := delayThen("flow", time.Hour)
	def.Deadline = time.Second
	m := NewMachine(Config{
		Workers: 2, DeliveryTimeout: 100 * time.Millisecond,
		NewIDFunc:    seqIDs(),
		WorkflowFunc: func(string) *WorkflowDef { return def },
	}, replay.New())
	app := &memAppender{}
	started, block := make(chan struct{}, 1), make(chan struct{})
	r := NewRunner(RunnerConfig{
		// Timers never fire: only the call below wakes the loop after the jump.
		Clock: inertClock{clk}, Appender: app,
		Execute: func(ctx context.Context, a *Attempt) Result {
			started <- struct{}{}
			<-block // ignores its context: abandoned at C
			return Result{}
		},
		DeadlineCheckInterval: time.Second,
	}, m)
	startRecovered(t, r)
	t.Cleanup(func() { close(block) }) // before the runner stops (cleanups run last first)
	ctx := context.Background()
	if err := r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		d, _, err := m.StartWorkflow(now, DispatchRequest{Name: "flow"})
		if err != nil {
			return d, err
		}
		e, _ := m.Enqueue(now, EnqueueRequest{Handler: "slow", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
		d.merge(e)
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	dispatchWithChecks(t, r)
	<-started

	clk.Set(ts(2 * time.Second)) // past the attempt's H and the workflow's deadline
	if err := r.Do(ctx, func(time.Time) {}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	app.mu.Lock()
	defer app.mu.Unlock()
	settled, failed := -1, -1
	for i, rec := range app.recs {
		switch rec.Body.(type) {
		case *record.AttemptRetryScheduled:
			settled = i
		case *record.WorkflowFailed:
			failed = i
		}
	}
	if settled < 0 || failed < 0 || settled > failed {
		var kinds []string
		for _, rec := range app.recs {
			kinds = append(kinds, rec.Kind().String())
		}
		t.Fatalf("journal %v: want the attempt's retry settled before the workflow fails", kinds)
	}
}
