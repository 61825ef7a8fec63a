package api_test

import (
	"context"
	"fmt"

	"github.com/quire-dev/quire/api"
)

// Workflow middleware wraps every step attempt of its workflow, after the
// global middleware and the queue's (DL-27). Here an audit middleware
// brackets each step of a two-step workflow.
func ExampleWorkflow_WithMiddleware() {
	ctx := context.Background()
	e := exampleEngine(nil)
	audit := api.MiddlewareFuncs{
		Label: "audit",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			fmt.Println("begin", d.Handler())
			return nil
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			fmt.Println("end", d.Handler(), "failed:", err != nil)
			return nil
		},
	}
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("run", d.Handler(), "for", st["user"])
		return nil, nil
	}
	err := e.Register(api.NewWorkflow("signup").WithMiddleware(audit).Then("create", step).Then("welcome", step))
	if err != nil {
		panic(err)
	}
	if _, err := e.Dispatch(ctx, "signup", api.State{"user": "ann"}); err != nil {
		panic(err)
	}
	if err := e.RunOnce(ctx); err != nil {
		panic(err)
	}
	// Output:
	// begin signup/create
	// run signup/create for ann
	// end signup/create failed: false
	// begin signup/welcome
	// run signup/welcome for ann
	// end signup/welcome failed: false
}

// Workflow guards run for every step attempt of their workflow, after the
// global and queue guards (DL-27). A permanent refusal fails the step, and
// with it the workflow.
func ExampleWorkflow_WithGuards() {
	ctx := context.Background()
	e := exampleEngine(nil)
	defer e.Close(ctx)
	maintenance := func(ctx context.Context, d *api.Delivery) error {
		return api.Permanent("MAINTENANCE", nil)
	}
	build := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("never runs")
		return nil, nil
	}
	if err := e.Register(api.NewWorkflow("report").WithGuards(maintenance).Then("build", build)); err != nil {
		panic(err)
	}
	if err := e.Start(ctx); err != nil {
		panic(err)
	}
	id, err := e.Dispatch(ctx, "report", api.State{})
	if err != nil {
		panic(err)
	}
	if err := e.WaitIdle(ctx); err != nil {
		panic(err)
	}
	info, err := e.Workflow(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Status, info.StepName, info.Error)
	// Output:
	// failed build permanent MAINTENANCE
}
