package deadlines_test

import (
	"fmt"
	"time"

	"github.com/quire-dev/quire/deadlines"
)

// The SD-10 timeline: a 30 s shutdown initiated at t = 0 reaches an attempt
// that started at t = 0 with DeliveryTimeout 30 s.
func Example() {
	t0 := time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)
	at := func(x time.Time) time.Duration { return x.Sub(t0) }

	b := deadlines.NewBudget(t0, 30*time.Second, deadlines.Root{})
	fmt.Println("P:", at(b.P))

	root := deadlines.Root{}.Install(deadlines.NewRoot(t0, 30*time.Second))
	b = b.CapRoot(root)
	fmt.Println("handler deadline:", at(b.HandlerDeadline(root)))

	n, reason := b.Notification(root)
	o := b.OwnerCutoff(reason, n, root)
	c := deadlines.CooperativeDeadline(n, o, root)
	e := b.CleanupCutoff(reason, n, root)
	hooks, scope := deadlines.HookChain(e, root, c)
	fmt.Println(reason, "at", at(n), "C:", at(c), "O:", at(o))
	fmt.Println("hooks by", at(hooks), "scope by", at(scope))
	fmt.Println("drain force deadline:", at(root.DrainForceDeadline(n, o)))
	// Output:
	// P: 29s
	// handler deadline: 28s
	// shutdown_deadline at 28s C: 28.25s O: 29s
	// hooks by 28.8125s scope by 29s
	// drain force deadline: 30s
}

// Retry delays are drawn from the engine's seeded source; the chosen delay
// is recorded, so replay never draws again (DL-5).
func ExampleBackoff_Delay() {
	p := deadlines.Backoff{Base: time.Second, Max: 5 * time.Second, JitterRatio: 0.2}
	for n := 1; n <= 4; n++ {
		fmt.Println(n, p.Candidates(n))
	}
	last := func(k int) int { return k - 1 } // stands in for rng.IntN
	fmt.Println(p.Delay(2, last))
	// Output:
	// 1 [1s 1.2s]
	// 2 [1.6s 2s 2.4s]
	// 3 [3.2s 4s 4.8s]
	// 4 [4s 5s]
	// 2.4s
}
