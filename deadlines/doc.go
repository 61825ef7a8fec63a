// Package deadlines owns quire's pure budget arithmetic: the budget of one
// delivery attempt (S, H, R, P, N, O, C, E, Hk of spec/delivery.md), the
// shutdown root (start, G, Hr of spec/shutdown.md), the retry backoff
// schedule (DL-5), the workflow deadline predicate (WD-5) and the range
// checks of the options that feed them.
//
// Every function is a pure function of its arguments. The package never
// reads a clock: the current instant is always a parameter named now, and
// deadlines derived from it are absolute instants that callers store and
// only ever lower (DL-1, DL-10). It starts no goroutines, draws no random
// numbers (jitter takes a caller-supplied, seeded pick function) and never
// iterates a map. Time arithmetic follows DL-1: durations are integer
// nanoseconds, d/4 truncates, three quarters is d*3/4 computed without
// overflow, the difference of two instants saturates at zero, and an
// instant x has expired when now >= x. No input, however extreme, makes a
// function overflow or panic, except [Backoff.Delay] given a pick function
// that returns an index out of range.
//
// A zero [Root] means that no shutdown is in progress; cap_root(x) of the
// spec is [Root.Cap].
//
// It must not import anything but the standard library.
//
// # Usage
//
//	root := deadlines.Root{} // no shutdown yet
//	b := deadlines.NewBudget(start, 30*time.Second, root)
//	deadline := b.HandlerDeadline(root) // P while no shutdown, DL-12
//
//	// SIGTERM: install the root and cap every running attempt (SD-8).
//	root = root.Install(deadlines.NewRoot(now, 30*time.Second))
//	b = b.CapRoot(root)
//	n, reason := b.Notification(root) // min(P, G) and who fires, DL-18
//
//	// The first reason is recorded at n: bound the cooperative stop.
//	o := b.OwnerCutoff(reason, n, root)              // DL-21
//	c := deadlines.CooperativeDeadline(n, o, root)   // DL-22
//	e := b.CleanupCutoff(reason, n, root)            // DL-30
//	hooks, scope := deadlines.HookChain(e, root, c)  // DL-31, cleanup starts at C
//	first, ok := deadlines.HookDeadline(hooks, 2, c) // DL-33, two eligible hooks
//
//	// Retries (DL-5) draw from the engine's seeded source.
//	p := deadlines.Backoff{}.WithDefaults()
//	delay := p.Delay(consumed, rng.IntN) // rng: the engine's seeded *rand.Rand
package deadlines
