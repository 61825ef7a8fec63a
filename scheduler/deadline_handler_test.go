package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/replay"
)

// handlerAt starts a runner over an inertClock whose one workflow, with a
// 1 s deadline and an on-deadline handler, is still in its hour-long delay
// step at 1 s, when the periodic check expires it. It returns once the
// handler runs; its context is sent on the channel returned, and it
// returns once the context ends. HandlerTimeout is 10 s. roots are
// installed before the check.
func handlerAt(t *testing.T, roots ...deadlines.Root) (*Runner, chan context.Context) {
	t.Helper()
	clk := clocktest.New(t0)
	m := flowMachine("on_deadline")
	ctxs := make(chan context.Context, 1)
	r := NewRunner(RunnerConfig{
		Clock: inertClock{clk}, Appender: &memAppender{},
		Execute:               func(ctx context.Context, a *Attempt) Result { return Result{} },
		HandlerTimeout:        10 * time.Second,
		DeadlineCheckInterval: time.Second,
		DeadlineFunc: func(ctx context.Context, run DeadlineRun) (string, string) {
			ctxs <- ctx
			<-ctx.Done()
			return HandlerOK, ""
		},
	}, m)
	startRecovered(t, r)
	ctx := context.Background()
	startFlow(t, r)
	dispatchWithChecks(t, r)
	for _, root := range roots {
		if err := r.InstallRoot(ctx, root); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(ts(time.Second))
	if err := r.Do(ctx, func(time.Time) {}); err != nil { // a pass at 1 s runs the check
		t.Fatal(err)
	}
	return r, ctxs
}

// WD-10: the on-deadline handler's context is bounded by DeliveryTimeout
// (the runner's HandlerTimeout) from the instant it is launched.
func TestWD10_HandlerContextEndsAtHandlerTimeout(t *testing.T) {
	r, ctxs := handlerAt(t)
	ctx := <-ctxs
	if d, ok := ctx.Deadline(); !ok || !d.Equal(ts(11*time.Second)) {
		t.Fatalf("handler deadline %v, %v; want launch + HandlerTimeout = 11 s", d.Sub(t0), ok)
	}
	if err := r.Force(context.Background(), deadlines.ReasonForcedShutdown); err != nil { // ends the handler
		t.Fatal(err)
	}
}

// WD-10, SD-5: a shutdown root installed when its G has come cancels a
// running on-deadline handler at once, with the shutdown deadline, before
// InstallRoot returns.
func TestWD10_RootAtItsGCancelsTheHandlerAtOnce(t *testing.T) {
	r, ctxs := handlerAt(t)
	ctx := <-ctxs
	root := deadlines.NewRoot(ts(250*time.Millisecond), time.Second) // G = 1 s: now
	if err := r.InstallRoot(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	var cr *CancelReason
	if ctx.Err() == nil || !errors.As(context.Cause(ctx), &cr) || cr.Reason != deadlines.ReasonShutdownDeadline {
		t.Fatalf("handler context %v, cause %v; want cancelled at G with the shutdown deadline", ctx.Err(), context.Cause(ctx))
	}
}

// WD-10: a handler launched under a shutdown root is bounded by its G
// from the start, when G comes before DeliveryTimeout does.
func TestWD10_HandlerLaunchedUnderARootEndsAtG(t *testing.T) {
	root := deadlines.NewRoot(t0, 8*time.Second)
	r, ctxs := handlerAt(t, root)
	ctx := <-ctxs
	if d, ok := ctx.Deadline(); !ok || !d.Equal(root.G()) || !d.Before(ts(11*time.Second)) {
		t.Fatalf("handler deadline %v, %v; want G = %v", d.Sub(t0), ok, root.G().Sub(t0))
	}
	if err := r.Force(context.Background(), deadlines.ReasonForcedShutdown); err != nil { // ends the handler
		t.Fatal(err)
	}
}

// WD-10, DL-18: when a shutdown's G falls on the instant the handler's
// DeliveryTimeout ends, the tie goes to shutdown, as DL-18 gives it for
// attempts: the context ends with the shutdown deadline, so a handler that
// fails on it is unfinished at shutdown and runs again after the next
// start, rather than being recorded as failed.
func TestWD10_DL18_TimeoutAtGEndsTheHandlerAsShutdown(t *testing.T) {
	r, ctxs := handlerAt(t)
	ctx := <-ctxs // launched at 1 s: DeliveryTimeout ends at 11 s
	root := deadlines.NewRoot(ts(time.Second), 12*time.Second)
	if !root.G().Equal(ts(11 * time.Second)) {
		t.Fatalf("G = %v, want 11 s", root.G().Sub(t0))
	}
	if err := r.InstallRoot(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	r.cfg.Clock.(inertClock).Set(ts(11 * time.Second))
	if err := r.Sync(context.Background()); err != nil { // acts on the deadline due at 11 s
		t.Fatal(err)
	}
	var cr *CancelReason
	if !errors.As(context.Cause(ctx), &cr) || cr.Reason != deadlines.ReasonShutdownDeadline || !cr.At.Equal(root.G()) {
		t.Fatalf("handler context cause %v; want the shutdown deadline at G = 11 s", context.Cause(ctx))
	}
}

// startFlow starts a workflow of the definition "flow" through r.
func startFlow(t *testing.T, r *Runner) {
	t.Helper()
	if err := r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
		d, _, err := m.StartWorkflow(now, DispatchRequest{Name: "flow"})
		return d, err
	}); err != nil {
		t.Fatal(err)
	}
}

// flowMachine is a one-worker machine whose only definition, "flow", is a
// step delayed an hour then a step, with a deadline of a second and
// onDeadline as its deadline handler ("" for none).
func flowMachine(onDeadline string) *Machine {
	def := delayThen("flow", time.Hour)
	def.Deadline, def.OnDeadline = time.Second, onDeadline
	return NewMachine(Config{
		Workers: 1, DeliveryTimeout: deliveryTimeout, NewIDFunc: seqIDs(),
		WorkflowFunc: func(string) *WorkflowDef { return def },
	}, replay.New())
}
