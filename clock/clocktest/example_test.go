package clocktest_test

import (
	"fmt"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
)

func Example() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(start)

	fired := make(chan time.Time)
	go func() {
		t := clk.NewTimer(time.Minute)
		fired <- <-t.C()
	}()

	clk.BlockUntil(1) // wait until the goroutine has armed its timer
	clk.Advance(time.Minute)
	fmt.Println(<-fired)
	// Output: 2025-01-01 00:01:00 +0000 UTC
}

func ExampleClock_AfterFunc() {
	clk := clocktest.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		clk.AfterFunc(d, func() {
			fmt.Println("fired", d, "at", clk.Now().Format(time.TimeOnly))
		})
	}
	clk.Advance(time.Hour) // one jump: the callbacks run in instant order
	fmt.Println("now", clk.Now().Format(time.TimeOnly))
	// Output:
	// fired 1s at 00:00:01
	// fired 2s at 00:00:02
	// fired 3s at 00:00:03
	// now 01:00:00
}

func ExampleClock_Set() {
	clk := clocktest.New(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	t := clk.NewTimer(time.Hour) // fires at 13:00

	clk.Set(time.Date(2025, 1, 1, 11, 0, 0, 0, time.UTC)) // back: nothing fires
	fmt.Println(clk.Now().Format(time.TimeOnly), clk.Pending())

	clk.Set(time.Date(2025, 1, 1, 13, 0, 0, 0, time.UTC))
	fmt.Println((<-t.C()).Format(time.TimeOnly), clk.Pending())
	// Output:
	// 11:00:00 1
	// 13:00:00 0
}
