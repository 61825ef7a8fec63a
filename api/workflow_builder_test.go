package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// builderStep is a step that returns nothing.
func builderStep(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
	return nil, nil
}

// builderGuard is a guard that lets every attempt run.
func builderGuard(ctx context.Context, d *api.Delivery) error { return nil }

// registerOn registers def on a fresh engine and returns Register's error.
func registerOn(t *testing.T, def *api.Workflow) error {
	t.Helper()
	eng, err := api.Open(t.Context(), memOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(t.Context())
	return eng.Register(def)
}

// WF-2: the builder refuses each bad definition with a *WorkflowError
// naming the step and the option, stating why (a nil middleware or guard
// by its index among all the workflow's, every call counted), and matching
// ErrInvalidOption, and Register returns it.
func TestWF2_BuilderRefusalsNameStepAndOption(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name         string
		def          *api.Workflow
		step, option string
		reason       string
	}{
		{"WaitForWorkflowsIn private key", api.NewWorkflow("w").Then("a", builderStep).WaitForWorkflowsIn(api.All(), "_ids"),
			"1", "WaitForWorkflowsIn", `state key must be a public key, got "_ids"`},
		{"Into after a Then step", api.NewWorkflow("w").Then("a", builderStep).Into("r"),
			"a", "Into", "applies only to a wait step"},
		{"nil middleware of a second call", api.NewWorkflow("w").Then("a", builderStep).
			WithMiddleware(api.MiddlewareFuncs{Label: "first"}).WithMiddleware(api.MiddlewareFuncs{Label: "second"}, nil),
			"", "WithMiddleware", "middleware 2 is nil"},
		{"nil guard of a second call", api.NewWorkflow("w").Then("a", builderStep).
			WithGuards(builderGuard).WithGuards(nil),
			"", "WithGuards", "guard 1 is nil"},
		{"Delay past DelayMax", api.NewWorkflow("w").Delay(api.DelayMax + 1),
			"delay_0", "Delay", "at most DelayMax"},
	} {
		err := registerOn(t, c.def)
		var we *api.WorkflowError
		if !errors.As(err, &we) || !errors.Is(err, api.ErrInvalidOption) {
			t.Fatalf("%s: err %v, want a *WorkflowError", c.name, err)
		}
		if we.Workflow != "w" || we.Step != c.step || we.Option != c.option || !strings.Contains(we.Reason, c.reason) {
			t.Fatalf("%s: err %v (step %q, option %q), want step %q, option %q, reason with %q",
				c.name, err, we.Step, we.Option, c.step, c.option, c.reason)
		}
	}
}

// WF-5, WD-1: a Delay step and a deadline of exactly DelayMax (100
// years) are within their bounds.
func TestWF5_WD1_DelayMaxIsAccepted(t *testing.T) {
	t.Parallel()
	def := api.NewWorkflow("w").Delay(api.DelayMax).Then("a", builderStep).MustCompleteWithin(api.DelayMax)
	if err := registerOn(t, def); err != nil {
		t.Fatalf("Delay(DelayMax) and MustCompleteWithin(DelayMax): %v", err)
	}
}

// WF-7: a quorum of every workflow waited for is a valid quorum, as is
// one of a single workflow; one past the count is not.
func TestWF7_QuorumOfEveryWorkflowIsAccepted(t *testing.T) {
	t.Parallel()
	if err := registerOn(t, api.NewWorkflow("w").WaitForWorkflows(api.Quorum(2), "wf_a", "wf_b")); err != nil {
		t.Fatalf("Quorum(2) of 2 workflows: %v", err)
	}
	if err := registerOn(t, api.NewWorkflow("w").WaitForWorkflows(api.Quorum(1), "wf_a")); err != nil {
		t.Fatalf("Quorum(1) of 1 workflow: %v", err)
	}
	err := registerOn(t, api.NewWorkflow("w").WaitForWorkflows(api.Quorum(3), "wf_a", "wf_b"))
	var we *api.WorkflowError
	if !errors.As(err, &we) || we.Option != "Quorum" || !strings.Contains(we.Reason, "must be 1..2, got 3") {
		t.Fatalf("Quorum(3) of 2 workflows: err %v, want the Quorum refused", err)
	}
}

// Named may give the last step the name it already has, such as a
// definition that names each of its steps explicitly, its delays as the
// builder does ("delay_0"): only another step's name is a duplicate.
func TestWF2_NamedWithTheStepsOwnName(t *testing.T) {
	t.Parallel()
	def := api.NewWorkflow("w").Delay(time.Hour).Named("delay_0").Then("a", builderStep).Named("a")
	if err := registerOn(t, def); err != nil {
		t.Fatalf("renaming steps to their own names: %v", err)
	}
	err := registerOn(t, api.NewWorkflow("w").Then("a", builderStep).Then("b", builderStep).Named("a"))
	var we *api.WorkflowError
	if !errors.As(err, &we) || we.Option != "Named" || we.Reason != "duplicate step name" {
		t.Fatalf("renaming a step to another's name: err %v, want it refused", err)
	}
}

// WF-2: of several invalid calls, Register reports the first, which is
// where a definition went wrong.
func TestWF2_RegisterReportsTheFirstInvalidCall(t *testing.T) {
	t.Parallel()
	err := registerOn(t, api.NewWorkflow("w").Then("a", nil).Parallel("b").Delay(-time.Second))
	var we *api.WorkflowError
	if !errors.As(err, &we) || we.Step != "a" || we.Option != "Then" || we.Reason != "step func is nil" {
		t.Fatalf("err %v, want the first refusal: step \"a\" Then: step func is nil", err)
	}
}
