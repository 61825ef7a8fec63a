package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// failingHandler starts a runner whose one workflow expires at 1 s and
// whose on-deadline handler fails once its context ends. It returns once
// the handler runs.
func failingHandler(t *testing.T) (*Runner, *clocktest.Clock, *memAppender) {
	t.Helper()
	clk := clocktest.New(t0)
	m := flowMachine("on_deadline")
	app := &memAppender{}
	running := make(chan struct{}, 1)
	r := NewRunner(RunnerConfig{
		Clock: inertClock{clk}, Appender: app,
		Execute:               func(ctx context.Context, a *Attempt) Result { return Result{} },
		HandlerTimeout:        10 * time.Second,
		DeadlineCheckInterval: time.Second,
		DeadlineFunc: func(ctx context.Context, run DeadlineRun) (string, string) {
			running <- struct{}{}
			<-ctx.Done()
			return HandlerFailed, "gave up"
		},
	}, m)
	startRecovered(t, r)
	ctx := context.Background()
	startFlow(t, r)
	dispatchWithChecks(t, r)
	clk.Set(ts(time.Second))
	if err := r.Do(ctx, func(time.Time) {}); err != nil { // a pass at 1 s runs the check
		t.Fatal(err)
	}
	<-running
	return r, clk, app
}

// handlerKinds returns how many deadline_handler_finished records and
// DEADLINE_HANDLER_INTERRUPTED debug records were appended.
func handlerKinds(app *memAppender) (finished, interrupted int) {
	app.mu.Lock()
	defer app.mu.Unlock()
	for _, rec := range app.recs {
		switch b := rec.Body.(type) {
		case *record.DeadlineHandlerFinished:
			finished++
		case *record.Debug:
			if b.Code == CodeDeadlineHandlerInterrupted {
				interrupted++
			}
		}
	}
	return finished, interrupted
}

// WD-10: a handler that fails after a shutdown cancelled its context is
// unfinished: no deadline_handler_finished, a debug record instead, and
// the obligation stays outstanding.
func TestWD10_HandlerFailingAfterForceIsInterrupted(t *testing.T) {
	r, _, app := failingHandler(t)
	ctx := context.Background()
	if err := r.Force(ctx, deadlines.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if f, i := handlerKinds(app); f != 0 || i != 1 {
		t.Fatalf("%d deadline_handler_finished, %d interrupted notes; want 0 and 1", f, i)
	}
}

// WD-10: a handler that fails at its own timeout (DeliveryTimeout) has
// finished, failed: its obligation is done.
func TestWD10_HandlerFailingAtItsTimeoutIsFinished(t *testing.T) {
	r, clk, app := failingHandler(t)
	ctx := context.Background()
	clk.Set(ts(11 * time.Second)) // launched at 1 s: its timeout
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if f, i := handlerKinds(app); f != 1 || i != 0 {
		t.Fatalf("%d deadline_handler_finished, %d interrupted notes; want 1 and 0", f, i)
	}
}
