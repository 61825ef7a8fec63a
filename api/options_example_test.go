package api_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/quire-dev/quire/api"
)

func ExampleDelay() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "remind", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("reminder for", in.Name, "at", clk.Now().Format(time.TimeOnly))
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "remind", greeting{Name: "Ada"}, api.Delay(30*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	job, err := eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, "until", job.AvailableAt.UTC().Format(time.TimeOnly))

	clk.Advance(30 * time.Minute)
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ = eng.Status(ctx, id)
	fmt.Println(job.Status)
	// Output:
	// pending until 10:30:00
	// reminder for Ada at 10:30:00
	// completed
}

func ExampleMaxAttempts() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "notify", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("attempt", d.Attempt())
		return errors.New("push service down")
	}, api.MaxAttempts(2)); err != nil { // one retry, then the job is buried
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "notify", greeting{Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	clk.Advance(time.Second) // the default backoff before the first retry
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, "after", job.Attempts, "attempts:", job.LastError)
	// Output:
	// attempt 1
	// attempt 2
	// buried after 2 attempts: push service down
}

func ExampleBackoff() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "webhook", func(ctx context.Context, d *api.Delivery, in greeting) error {
		return errors.New("connection refused")
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	// Linear: the n-th retry waits n×Base (capped at Max).
	id, err := eng.Enqueue(ctx, "webhook", greeting{Name: "order.paid"}, api.MaxAttempts(3),
		api.Backoff(api.BackoffPolicy{Kind: api.BackoffLinear, Base: 10 * time.Second}))
	if err != nil {
		log.Fatal(err)
	}
	for {
		if err := eng.WaitIdle(ctx); err != nil {
			log.Fatal(err)
		}
		job, _ := eng.Status(ctx, id)
		if job.Status != api.JobPending {
			fmt.Println(job.Status, "after", job.Attempts, "attempts")
			break
		}
		wait := job.AvailableAt.Sub(clk.Now())
		fmt.Println("attempt", job.Attempts, "failed, retry in", wait)
		clk.Advance(wait)
	}
	// Output:
	// attempt 1 failed, retry in 10s
	// attempt 2 failed, retry in 20s
	// buried after 3 attempts
}

func ExampleUnique() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "reindex", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	first, err := eng.Enqueue(ctx, "reindex", greeting{Name: "products"}, api.Unique())
	if err != nil {
		log.Fatal(err)
	}
	// While the job is pending or processing, the same handler and payload
	// return its id, without error, and append nothing.
	second, err := eng.Enqueue(ctx, "reindex", greeting{Name: "products"}, api.Unique())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same job:", second == first)
	// Another payload is another job.
	other, err := eng.Enqueue(ctx, "reindex", greeting{Name: "users"}, api.Unique())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("other payload, same job:", other == first)

	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Once the job has finished, the same payload enqueues a new job.
	again, err := eng.Enqueue(ctx, "reindex", greeting{Name: "products"}, api.Unique())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after completion, same job:", again == first)
	// Output:
	// same job: true
	// other payload, same job: false
	// after completion, same job: false
}

// IdempotencyKey is a [api.DispatchOption]: it makes a workflow dispatch
// safe to repeat, for example when a request is retried by its client. A
// key used before returns the original workflow, even after it completed.
func ExampleIdempotencyKey() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	ship := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("shipping order", st["order"])
		return api.State{"shipped": true}, nil
	}
	if err := eng.Register(api.NewWorkflow("fulfil").Then("ship", ship)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Dispatch(ctx, "fulfil", api.State{"order": 42}, api.IdempotencyKey("order-42"))
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	again, err := eng.Dispatch(ctx, "fulfil", api.State{"order": 42}, api.IdempotencyKey("order-42"))
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	info, err := eng.Workflow(ctx, again)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again == id, info.Status)
	// Output:
	// shipping order 42
	// true completed
}

func ExampleOnQueue() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Workers = 1
	opts.Queues = []string{"payments"} // served before the other queues
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "work", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println(in.Name, "on queue", d.Queue())
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "work", greeting{Name: "thumbnail"}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "work", greeting{Name: "refund"}, api.OnQueue("payments")); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// refund on queue payments
	// thumbnail on queue default
}

func ExampleWithPriority() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Workers = 1 // one attempt at a time, so the start order shows
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "email", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println(in.Name)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	jobs := []struct {
		name string
		prio api.Priority
	}{
		{"newsletter", api.Low},
		{"receipt", api.Normal},
		{"password reset", api.Urgent},
		{"invoice", api.High},
		{"digest", api.Low},
	}
	for _, j := range jobs {
		if _, err := eng.Enqueue(ctx, "email", greeting{Name: j.name}, api.WithPriority(j.prio)); err != nil {
			log.Fatal(err)
		}
	}
	// Higher priorities start first; equal ones in enqueue order.
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// password reset
	// invoice
	// receipt
	// newsletter
	// digest
}

func ExampleDeliveryTimeout() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.DeliveryTimeout = 30 * time.Second // the engine's default budget
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "export", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println(in.Name, "export must return by", d.Deadline().At().UTC().Format(time.TimeOnly))
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "export", greeting{Name: "small"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// A job that needs longer gets its own budget.
	if _, err := eng.Enqueue(ctx, "export", greeting{Name: "large"}, api.DeliveryTimeout(5*time.Minute)); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// small export must return by 10:00:29
	// large export must return by 10:04:59
}
