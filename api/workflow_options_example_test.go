package api_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
)

// Named renames the last step. Waits and delays get generated names
// (0, 1, ... and delay_0, delay_1, ...); Named gives them one that status
// readers and operators can recognise.
func ExampleWorkflow_Named() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("run", d.Handler())
		return nil, nil
	}
	wfMust(eng.Register(api.NewWorkflow("order").
		Then("reserve", step).
		Delay(time.Hour).Named("cooling_off").
		Then("charge", step)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "order", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.StepName, "until", info.DelayUntil.UTC().Format(time.TimeOnly))

	clk.Advance(time.Hour)
	wfMust(eng.WaitIdle(ctx))
	info, err = eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status)
	// Output:
	// run order/reserve
	// running cooling_off until 11:00:00
	// run order/charge
	// completed
}

// OnQueue sets the queue of every step job of the workflow (WF-22). A
// step's own OnQueue, passed to Then, wins over the workflow's.
func ExampleWorkflow_OnQueue() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println(d.Handler(), "on queue", d.Queue())
		return nil, nil
	}
	wfMust(eng.Register(api.NewWorkflow("checkout").
		Then("charge", step).
		Then("receipt", step, api.OnQueue("mail")).
		OnQueue("billing")))
	wfMust(eng.Start(ctx))

	_, err := eng.Dispatch(ctx, "checkout", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	// Output:
	// checkout/charge on queue billing
	// checkout/receipt on queue mail
}

// MaxAttempts sets the attempts of every step job of the workflow (default
// 3; WF-22). Once a step has used them all, the workflow fails with the
// step's last error.
func ExampleWorkflow_MaxAttempts() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	charge := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("charge attempt", d.Attempt())
		return nil, errors.New("card declined")
	}
	wfMust(eng.Register(api.NewWorkflow("checkout").Then("charge", charge).MaxAttempts(2)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "checkout", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	clk.Advance(time.Second) // the default backoff before the first retry
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.StepName, "after", info.Attempts, "attempts:", info.Error)
	// Output:
	// charge attempt 1
	// charge attempt 2
	// failed charge after 2 attempts: card declined
}

// WithPriority sets the priority of every step job of the workflow
// (default Low; WF-22). Among the eligible jobs of a queue, higher
// priorities start first (JB-2): here the step of an urgent workflow
// starts before a job enqueued earlier.
func ExampleWorkflow_WithPriority() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Workers = 1 // one attempt at a time, so the start order shows
	eng, err := api.Open(ctx, opts)
	wfMust(err)
	defer eng.Close(ctx)
	wfMust(api.Handle(eng, "newsletter", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("newsletter for", in.Name)
		return nil
	}))
	reset := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("password reset for", st["user"])
		return nil, nil
	}
	wfMust(eng.Register(api.NewWorkflow("password_reset").Then("send", reset).WithPriority(api.Urgent)))

	_, err = eng.Enqueue(ctx, "newsletter", greeting{Name: "Ada"})
	wfMust(err)
	_, err = eng.Dispatch(ctx, "password_reset", api.State{"user": "Bo"})
	wfMust(err)
	wfMust(eng.Start(ctx))
	wfMust(eng.WaitIdle(ctx))
	// Output:
	// password reset for Bo
	// newsletter for Ada
}

// MustCompleteWithin fixes the workflow's deadline at dispatch (WD-1,
// WD-3). Delays count against it (WD-12): a running workflow still short
// of its last step at the deadline fails with "Deadline exceeded" (WD-8),
// and its later steps never run.
func ExampleWorkflow_MustCompleteWithin() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("run", d.Handler())
		return nil, nil
	}
	wfMust(eng.Register(api.NewWorkflow("trial").
		Then("start", step).Delay(2*time.Hour).Then("convert", step).
		MustCompleteWithin(time.Hour)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "trial", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.StepName, "deadline", info.DeadlineAt.UTC().Format(time.TimeOnly))

	clk.Advance(time.Hour)
	wfMust(eng.WaitIdle(ctx))
	info, err = eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.StepName, info.Error, "at", info.FailedAt.UTC().Format(time.TimeOnly))
	// Output:
	// run trial/start
	// running delay_0 deadline 11:00:00
	// failed delay_0 Deadline exceeded at 11:00:00
}

// OnDeadline names the deadline handler, registered with
// [api.HandleDeadline], that runs once an expired workflow's failure is
// durable (WD-2, WD-10). It receives the public state as of the expiry,
// so it can undo what the finished steps did.
func ExampleWorkflow_OnDeadline() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	reserve := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"seat": "12A"}, nil
	}
	wfMust(api.HandleDeadline(eng, "release_seat", func(ctx context.Context, st api.State) error {
		fmt.Println("releasing seat", st["seat"], "for", st["passenger"])
		return nil
	}))
	wfMust(eng.Register(api.NewWorkflow("booking").
		Then("reserve", reserve).WaitForSignal("paid").
		MustCompleteWithin(15 * time.Minute).OnDeadline("release_seat")))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "booking", api.State{"passenger": "Ada"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	clk.Advance(15 * time.Minute)
	wfMust(eng.Signal(ctx, id, "paid", nil)) // too late: settles at the deadline (WD-7)
	wfMust(eng.WaitIdle(ctx))                // waits for the handler too
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.Error)
	// Output:
	// releasing seat 12A for Ada
	// failed Deadline exceeded
}
