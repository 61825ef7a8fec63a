package api_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/quire-dev/quire/api"
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
