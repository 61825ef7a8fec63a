package api_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// SD-12: once a shutdown has closed admission, every call that would
// create runnable work is refused with ErrShuttingDown and appends
// nothing: dispatch, signal, resume, retry, retry of buried jobs, handler
// and workflow registration, and start. Each call here would succeed on
// an engine that is not shutting down (the targets are in a state that
// allows it), so only the shutdown can refuse them.
func TestSD12_AdmissionCallsRefusedDuringShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := b.ctx
	step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
	fail := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
		return nil, api.Permanent("NO", nil)
	}
	if err := api.Handle(b.eng, "bad", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("NO", nil)
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go").Then("a", step))
	wfRegister(t, b.eng, api.NewWorkflow("fail").Then("a", fail))
	wfRegister(t, b.eng, api.NewWorkflow("run").Then("a", step))
	buried := b.enqueue("bad", msg{})
	waiting, err := b.eng.Dispatch(ctx, "wait", nil)
	if err != nil {
		t.Fatal(err)
	}
	paused, err := b.eng.Dispatch(ctx, "run", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseWorkflow(ctx, paused); err != nil {
		t.Fatal(err)
	}
	failed, err := b.eng.Dispatch(ctx, "fail", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.idle()
	b.wantStatus(buried, api.JobBuried)
	for id, want := range map[string]api.WorkflowStatus{waiting: api.WorkflowWaitingSignal, paused: api.WorkflowPaused, failed: api.WorkflowFailed} {
		if got := wfInfo(b, id).Status; got != want {
			t.Fatalf("workflow %s: status %s, want %s", id, got, want)
		}
	}
	_, release, res := shutdownBlocked(b)
	awaitInitiated(b.eng)
	kinds := []record.Kind{record.KindWorkflowStarted, record.KindSignalReceived, record.KindJobRequeued,
		record.KindQueueResumed, record.KindWorkflowResumed, record.KindWorkflowRetried}
	counts := func() []int {
		recs := b.records()
		n := make([]int, len(kinds))
		for i, k := range kinds {
			n[i] = countKind(recs, k)
		}
		return n
	}
	before := counts()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Dispatch", func() error { _, err := b.eng.Dispatch(ctx, "run", nil); return err }},
		{"Signal", func() error { return b.eng.Signal(ctx, waiting, "go", nil) }},
		{"Retry", func() error { return b.eng.Retry(ctx, buried) }},
		{"RetryBuried", func() error { _, err := b.eng.RetryBuried(ctx, api.QueueDefault); return err }},
		{"ResumeQueue", func() error { return b.eng.ResumeQueue(ctx, "q") }},
		{"ResumeWorkflow", func() error { return b.eng.ResumeWorkflow(ctx, paused) }},
		{"RetryWorkflow", func() error { return b.eng.RetryWorkflow(ctx, failed) }},
		{"Handle", func() error {
			return api.Handle(b.eng, "late", func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
		}},
		{"HandleDeadline", func() error {
			return api.HandleDeadline(b.eng, "late", func(ctx context.Context, s api.State) error { return nil })
		}},
		{"Register", func() error { return b.eng.Register(api.NewWorkflow("late").Then("a", step)) }},
		{"Start", func() error { return b.eng.Start(ctx) }},
	} {
		if err := c.call(); !errors.Is(err, api.ErrShuttingDown) {
			t.Errorf("SD-12: %s during a shutdown: err = %v, want one matching ErrShuttingDown", c.name, err)
		}
	}
	if after := counts(); !slices.Equal(before, after) {
		t.Errorf("SD-12: refused calls appended: counts of %v went %v -> %v", kinds, before, after)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
