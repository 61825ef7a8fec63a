package api_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/quire-dev/quire/api"
)

// WF-21: a Parallel step's attempt counts sum the jobs of its latest
// entry that have not completed. A branch that succeeded leaves the sum,
// as it leaves the work a retry redoes (WF-18).
func TestWF21_ParallelCountsLeaveSucceededBranches(t *testing.T) {
	// One worker: branch 0 succeeds before branch 1 fails.
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	var failed atomic.Bool
	ok := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"a": 1}, nil
	}
	once := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if failed.CompareAndSwap(false, true) {
			return nil, api.Permanent("NOPE", errors.New("no"))
		}
		return api.State{"b": 1}, nil
	}
	wfRegister(t, b.eng, api.NewWorkflow("par").Parallel("p", ok, once))
	id := wfDispatch(b, "par", nil)
	b.start()
	w, err := b.eng.AwaitWorkflow(b.ctx, id)
	if err != nil || w.Status != api.WorkflowFailed || w.Attempts != 1 || w.Consumed != 1 {
		t.Fatalf("after the failure: %s attempts %d consumed %d (%v); want failed, 1 and 1 (the buried branch)", w.Status, w.Attempts, w.Consumed, err)
	}
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	w, err = b.eng.AwaitWorkflow(b.ctx, id)
	if err != nil || w.Status != api.WorkflowCompleted || w.State["a"] == nil || w.State["b"] == nil {
		t.Fatalf("after the retry: %+v, %v", w, err)
	}
}

// WF-21: while a SubWorkflow step runs, the parent's status names its
// child, so that a caller can signal or await a child it did not dispatch.
func TestWF21_StatusNamesTheRunningChild(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("approval").WaitForSignal("approved"))
	wfRegister(t, b.eng, api.NewWorkflow("order").SubWorkflow("approve", "approval").
		Then("ship", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return api.State{"shipped": true}, nil
		}))
	id := wfDispatch(b, "order", nil)
	b.start()
	b.idle()
	p, err := b.eng.Workflow(b.ctx, id)
	if err != nil || p.Child == "" || p.Child != wfChild(b, id, 0) {
		t.Fatalf("parent at its SubWorkflow step: Child %q (%v), want %q", p.Child, err, wfChild(b, id, 0))
	}
	if err := b.eng.Signal(b.ctx, p.Child, "approved", nil); err != nil {
		t.Fatal(err)
	}
	p, err = b.eng.AwaitWorkflow(b.ctx, id)
	if err != nil || p.Status != api.WorkflowCompleted || p.Child != "" {
		t.Fatalf("parent after its child completed: %s, Child %q (%v)", p.Status, p.Child, err)
	}
}
