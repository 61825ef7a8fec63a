package api_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
)

// optExTrace returns a middleware that prints when its Before and After
// run, and with what result.
func optExTrace(label string) api.Middleware {
	return api.MiddlewareFuncs{
		Label: label,
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			fmt.Println("before", label)
			return nil
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			fmt.Println("after", label, "err:", err)
			return nil
		},
	}
}

// WithMiddleware gives one handler its own middleware, innermost of the
// plan (DL-27): the global middleware's Before runs first, then the
// handler's in the order given; their Afters unwind in reverse, with the
// handler's result.
func ExampleWithMiddleware() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{optExTrace("global")}
	eng, err := api.Open(ctx, opts)
	wfMust(err)
	defer eng.Close(ctx)
	wfMust(api.Handle(eng, "export", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("export for", in.Name)
		return errors.New("disk full")
	}, api.WithMiddleware(optExTrace("metrics"), optExTrace("tracing")), api.MaxAttempts(1)))
	wfMust(eng.Start(ctx))

	_, err = eng.Enqueue(ctx, "export", greeting{Name: "Ada"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	// Output:
	// before global
	// before metrics
	// before tracing
	// export for Ada
	// after tracing err: disk full
	// after metrics err: disk full
	// after global err: disk full
}

// WithGuards gives one handler its own guards, run after the global and
// queue guards and before the handler (DL-27). A guard that refuses with
// [api.Retryable] fails the attempt without running the handler, and the
// job waits for its retry; here the retry finds the guard open.
func ExampleWithGuards() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	maintenance := true
	open := func(ctx context.Context, d *api.Delivery) error {
		if maintenance {
			return api.Retryable("MAINTENANCE", errors.New("billing is in maintenance"))
		}
		return nil
	}
	wfMust(api.Handle(eng, "invoice", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("invoice for", in.Name, "on attempt", d.Attempt())
		return nil
	}, api.WithGuards(open)))
	wfMust(eng.Start(ctx))

	id, err := eng.Enqueue(ctx, "invoice", greeting{Name: "Ada"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	job, err := eng.Status(ctx, id)
	wfMust(err)
	fmt.Println(job.Status, job.Attempts, job.LastCode)

	maintenance = false // read by the retry, which starts only after Advance
	clk.Advance(time.Second)
	wfMust(eng.WaitIdle(ctx))
	job, err = eng.Status(ctx, id)
	wfMust(err)
	fmt.Println(job.Status, job.Attempts)
	// Output:
	// pending 1 MAINTENANCE
	// invoice for Ada on attempt 2
	// completed 2
}
