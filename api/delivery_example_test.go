package api_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
)

// exampleEngine opens an engine on an in-memory filesystem and a manual
// clock, so that examples are reproducible.
func exampleEngine(mod func(*api.Options)) *api.Engine {
	opts := api.Options{Dir: "db", FS: vfs.NewMem(), Clock: clocktest.New(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))}
	if mod != nil {
		mod(&opts)
	}
	e, err := api.Open(context.Background(), opts)
	if err != nil {
		panic(err)
	}
	return e
}

// Middleware runs around every attempt: Before outermost first, guards,
// the handler, then After in reverse. A guard refuses work with a typed
// error.
func ExampleMiddleware() {
	logging := api.MiddlewareFuncs{
		Label: "logging",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			fmt.Println("start", d.Handler(), "attempt", d.Attempt())
			return nil
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			fmt.Println("end", d.Handler(), "failed:", err != nil)
			return nil
		},
	}
	business := func(ctx context.Context, d *api.Delivery) error {
		if d.Queue() == "closed" {
			return api.Permanent("QUEUE_CLOSED", nil)
		}
		return nil
	}
	e := exampleEngine(func(o *api.Options) {
		o.Middleware = []api.Middleware{logging}
		o.Guards = []api.Guard{business}
	})
	api.Handle(e, "greet", func(ctx context.Context, d *api.Delivery, name string) error {
		fmt.Println("hello,", name)
		return nil
	})
	e.Enqueue(context.Background(), "greet", "quire")
	e.RunOnce(context.Background())
	// Output:
	// start greet attempt 1
	// hello, quire
	// end greet failed: false
}

// A termination hook cleans up after a middleware whose After could not
// run: here the handler ignores its context and is abandoned at its
// cooperative deadline. The engine runs the hook with its own deadline.
func ExampleTerminationHook() {
	clk := clocktest.New(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	lock := api.MiddlewareFuncs{
		Label:      "lock",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error { return nil },
		AfterFunc:  func(ctx context.Context, d *api.Delivery, err error) error { return nil },
		OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
			reason, at, _ := t.Reason()
			fmt.Println("release lock:", t.Cause(), reason, at.Format("15:04:05.000"), "exit", t.Exit())
			return nil
		},
	}
	e := exampleEngine(func(o *api.Options) {
		o.Clock = clk
		o.DeliveryTimeout = 2 * time.Second
		o.MaxAttempts = 1
	})
	started := make(chan struct{})
	stuck := make(chan struct{})
	api.Handle(e, "stuck", func(ctx context.Context, d *api.Delivery, n int) error {
		close(started)
		<-stuck // ignores ctx
		return nil
	}, api.WithMiddleware(lock))
	id, _ := e.Enqueue(context.Background(), "stuck", 1)
	e.Start(context.Background())
	<-started
	// Past P = 1.5 s (notified) and C = 1.625 s: abandoned, the hook runs.
	clk.Advance(1625 * time.Millisecond)
	e.WaitIdle(context.Background())
	j, _ := e.Status(context.Background(), id)
	fmt.Println(j.Status, j.LastCode)
	close(stuck)
	e.Close(context.Background())
	// Output:
	// release lock: execution_cancelled delivery_timeout 10:00:01.500 exit not_started
	// buried DELIVERY_TIMEOUT
}

// Resources registered on the attempt scope are closed once, after the
// attempt, before its settlement.
func ExampleDelivery_Scope() {
	e := exampleEngine(nil)
	api.Handle(e, "report", func(ctx context.Context, d *api.Delivery, n int) error {
		return d.Scope().Register("tmpfile", closer(func() error {
			fmt.Println("tmpfile closed")
			return nil
		}))
	})
	e.Enqueue(context.Background(), "report", 1)
	e.RunOnce(context.Background())
	// Output:
	// tmpfile closed
}

// QueueOptions override the engine-wide delivery options for one queue;
// job and handler options still win.
func ExampleQueueOptions() {
	e := exampleEngine(func(o *api.Options) {
		o.QueueOptions = map[string]api.QueueOptions{
			"mail": {MaxAttempts: 10, DeliveryTimeout: 5 * time.Second},
		}
	})
	api.Handle(e, "send", func(ctx context.Context, d *api.Delivery, to string) error {
		fmt.Println("deadline in", d.Deadline().Remaining())
		return nil
	}, api.OnQueue("mail"))
	id, _ := e.Enqueue(context.Background(), "send", "ops@example.com")
	j, _ := e.Status(context.Background(), id)
	fmt.Println("max attempts", j.MaxAttempts)
	e.RunOnce(context.Background())
	// Output:
	// max attempts 10
	// deadline in 4s
}
