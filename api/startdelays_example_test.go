package api_test

import (
	"context"
	"fmt"
	"log"

	"github.com/quire-dev/quire/api"
)

func ExampleEngine_StartDelays() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	before := eng.StartDelays()
	for _, name := range []string{"Ada", "Bob", "Cy"} {
		if _, err := eng.Enqueue(ctx, "greet", greeting{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	d := eng.StartDelays().Sub(before)
	// A monitoring loop would export d.Quantile(0.99) and compare it with
	// the journal's commit times. The example's clock never moves, so every
	// start counts in the first bucket.
	fmt.Println("attempts started:", d.Total())
	fmt.Println("p99 at most:", d.Quantile(0.99))
	// Output:
	// attempts started: 3
	// p99 at most: 20µs
}
