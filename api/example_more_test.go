package api_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
)

// Quantile reads a percentile off the histogram: the upper bound of the
// bucket that holds it.
func ExampleStartDelays_Quantile() {
	d := api.StartDelays{
		Bounds: []time.Duration{20 * time.Microsecond, 25 * time.Microsecond, 30 * time.Microsecond},
		Counts: []uint64{90, 9, 1, 0}, // the last count is for delays past 30µs
	}
	fmt.Println("p50 at most:", d.Quantile(0.5))
	fmt.Println("p99 at most:", d.Quantile(0.99))
	fmt.Println("max at most:", d.Quantile(1))
	fmt.Println("empty:", api.StartDelays{}.Quantile(0.99))
	// Output:
	// p50 at most: 20µs
	// p99 at most: 25µs
	// max at most: 30µs
	// empty: 0s
}

// Sub turns two cumulative readings of one engine into the delays of the
// interval between them.
func ExampleStartDelays_Sub() {
	bounds := []time.Duration{20 * time.Microsecond, 25 * time.Microsecond}
	earlier := api.StartDelays{Bounds: bounds, Counts: []uint64{10, 0, 0}}
	now := api.StartDelays{Bounds: bounds, Counts: []uint64{15, 3, 0}}
	interval := now.Sub(earlier)
	fmt.Println(interval.Counts, interval.Total())
	// Output: [5 3 0] 8
}

// Total counts the delays a histogram holds, every bucket included.
func ExampleStartDelays_Total() {
	d := api.StartDelays{Bounds: []time.Duration{20 * time.Microsecond}, Counts: []uint64{4, 1}}
	fmt.Println(d.Total())
	// Output: 5
}

// A Priority prints as its name, and a value out of range as its number.
func ExamplePriority_String() {
	fmt.Println(api.Low, api.Normal, api.High, api.Urgent, api.Priority(7))
	// Output: low normal high urgent priority(7)
}

// A Lifecycle prints as its name, for logs and health endpoints.
func ExampleLifecycle_String() {
	fmt.Println(api.Starting, api.Ready, api.Draining, api.Stopped, api.Failed)
	// Output: starting ready draining stopped failed
}

// An *OptionError names the option or argument and the value refused, and
// matches ErrInvalidOption.
func ExampleOptionError() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "send", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		fmt.Println(err)
		return
	}
	_, err = eng.Enqueue(ctx, "send", greeting{Name: "Ada"}, api.MaxAttempts(101))
	var oe *api.OptionError
	if errors.As(err, &oe) {
		fmt.Println(oe.Field, oe.Value, errors.Is(err, api.ErrInvalidOption))
	}
	fmt.Println(err)
	// Output:
	// MaxAttempts 101 true
	// quire: MaxAttempts = 101: must be 1..100
}
