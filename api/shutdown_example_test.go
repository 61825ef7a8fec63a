package api_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/shutdown"
)

// namedCloser is a resource the application built for the engine alone.
type namedCloser string

func (c namedCloser) Close() error {
	fmt.Println("closed", string(c))
	return nil
}

// Resources handed over with the options are the engine's: its shutdown
// closes them once each, in reverse order, after every attempt and engine
// goroutine that may use them is done, then flushes and closes owned
// telemetry. Resources the application keeps using are not listed.
func ExampleOwnedResource() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.OwnedResources = []api.OwnedResource{
		{Name: "db", Closer: namedCloser("db")},
		{Name: "cache", CloseFunc: func(ctx context.Context) error {
			fmt.Println("closed cache") // ctx ends with the close's share of the budget
			return nil
		}},
	}
	opts.Telemetry = &api.OwnedTelemetry{
		FlushFunc: func(context.Context) error { fmt.Println("flushed telemetry"); return nil },
	}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	rep := eng.ShutdownReport()
	fmt.Println(rep.Completion, rep.Dependencies.OwnedResources.Succeeded)
	// Output:
	// closed cache
	// closed db
	// flushed telemetry
	// graceful_completed true
}

// A startup that fails after the options were accepted rolls back as a
// shutdown with trigger startup_failure, which disposes the owned
// resources; its report comes with the error. Here Open's context has
// already ended.
func ExampleStartupError() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts, _ := exampleOptions()
	opts.OwnedResources = []api.OwnedResource{{Name: "db", Closer: namedCloser("db")}}
	_, err := api.Open(ctx, opts)
	var se *api.StartupError
	if errors.As(err, &se) {
		fmt.Println("failed at", se.Step, "-", errors.Is(err, context.Canceled))
		fmt.Println(se.Report.Trigger, se.Report.Completion, se.Report.FailureCode)
	}
	// Output:
	// closed db
	// failed at open - true
	// startup_failure failed STARTUP_FAILED
}

// Shutdown closes admission, lets running attempts finish, then closes the
// journal; it returns nil when the report is a success.
func ExampleEngine_Shutdown() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := api.Handle(eng, "upload", func(ctx context.Context, d *api.Delivery, in greeting) error {
		close(started)
		<-release
		fmt.Println("upload finished")
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "upload", greeting{Name: "report.pdf"}); err != nil {
		log.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- eng.Shutdown(ctx) }()
	<-eng.ShutdownStarted()
	close(release) // the running attempt is drained, not cut off
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	rep := eng.ShutdownReport()
	fmt.Println(eng.Lifecycle(), rep.Completion, "drained:", rep.Drained)
	// Output:
	// upload finished
	// stopped graceful_completed drained: 1
}

// Force cuts a shutdown short: running attempts are cancelled with
// ReasonForcedShutdown and released, to be delivered again at the next
// Open.
func ExampleEngine_Force() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	started := make(chan struct{})
	if err := api.Handle(eng, "crawl", func(ctx context.Context, d *api.Delivery, in greeting) error {
		close(started)
		<-ctx.Done()
		reason, _, _ := d.Cancellation().Reason()
		fmt.Println("cancelled:", reason)
		return ctx.Err()
	}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(errors.Is(eng.Force(), shutdown.ErrNotInitiated)) // nothing to force yet
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "crawl", greeting{Name: "example.com"}); err != nil {
		log.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- eng.Shutdown(ctx) }()
	<-eng.ShutdownStarted()
	if err := eng.Force(); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	rep := eng.ShutdownReport()
	fmt.Println(rep.Completion, "forced:", rep.Forced, "released:", rep.Released)
	// Output:
	// true
	// cancelled: forced_shutdown
	// forced_completed forced: true released: 1
}

// The report of a graceful shutdown. It is nil until the shutdown is over;
// afterwards every call returns a copy of the same report.
func ExampleEngine_ShutdownReport() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.ShutdownTimeout = 10 * time.Second
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.ShutdownReport() == nil)
	if err := eng.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	rep := eng.ShutdownReport()
	fmt.Println(rep.Completion, rep.IsSuccess(), rep.Trigger, rep.Budget, rep.FailureCode == "")
	for _, a := range rep.Actions {
		fmt.Printf("phase %d %s: %s\n", a.Phase, a.Component, a.Graceful)
	}
	// Output:
	// true
	// graceful_completed true api 10s true
	// phase 1 admission: completed
	// phase 2 drain: completed
	// phase 4 close: completed
}

// ShutdownStarted lets a process report itself not ready as soon as a
// shutdown begins: from then on new work is refused.
func ExampleEngine_ShutdownStarted() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := api.Handle(eng, "bake", func(ctx context.Context, d *api.Delivery, in greeting) error {
		close(started)
		<-release
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "bake", greeting{Name: "bread"}); err != nil {
		log.Fatal(err)
	}
	<-started
	done := make(chan error, 1)
	go func() { done <- eng.Shutdown(ctx) }()

	<-eng.ShutdownStarted() // e.g. make the readiness probe fail
	fmt.Println("ready:", eng.Ready(), eng.Lifecycle())
	_, err = eng.Enqueue(ctx, "bake", greeting{Name: "cake"})
	fmt.Println(errors.Is(err, api.ErrShuttingDown))
	close(release)
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// ready: false draining
	// true
}

// Snapshot reads the lifecycle and the shutdown status in one call, for a
// health endpoint.
func ExampleEngine_Snapshot() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	s := eng.Snapshot()
	fmt.Println(s.Lifecycle, s.Live, s.Ready, s.Shutdown.Initiated, s.Shutdown.Completed, s.Shutdown.Report == nil)
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	s = eng.Snapshot()
	fmt.Println(s.Lifecycle, s.Live, s.Ready)
	if err := eng.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	s = eng.Snapshot()
	fmt.Println(s.Lifecycle, s.Live, s.Ready, s.Shutdown.Initiated, s.Shutdown.Completed, s.Shutdown.Report.Completion)
	// Output:
	// ready true false false false true
	// ready true true
	// stopped false false true true graceful_completed
}

// Live and Ready are what a process's health probes report (SD-34): live
// until the engine stops or fails, ready only while it admits work and
// starts attempts.
func ExampleEngine_Ready() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux() // served by the process's admin listener
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		if !eng.Live() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !eng.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	fmt.Println("opened:", eng.Live(), eng.Ready())
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("started:", eng.Live(), eng.Ready())
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("closed:", eng.Live(), eng.Ready())
	// Output:
	// opened: true false
	// started: true true
	// closed: false false
}

// Live is false once the engine stopped or failed: a process that finds
// its engine not live should exit, and its next start replays the journal.
func ExampleEngine_Live() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Live(), eng.Lifecycle())
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Live(), eng.Lifecycle(), eng.Lifecycle().Live())
	// Output:
	// true ready
	// false stopped false
}
