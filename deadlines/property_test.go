package deadlines

import (
	"math"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Instants and durations at the edges of their ranges (T13): the
// arithmetic must neither overflow nor panic near 0, 1 ns, MaxInt64/2 and
// MaxInt64, nor at the zero time.Time.
var (
	edgeInstants = []time.Time{
		{},
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(0, math.MaxInt64/2),
		time.Unix(0, math.MaxInt64),
		time.Unix(1<<40, 0),
		t0,
	}
	edgeDurations = []time.Duration{
		0, 1, time.Millisecond, 250 * time.Millisecond, time.Second, 30 * time.Second,
		math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64,
	}
)

// drawDuration returns an edge value, a small value or any int64.
func drawDuration(t *rapid.T, label string) time.Duration {
	switch rapid.IntRange(0, 3).Draw(t, label+".kind") {
	case 0:
		return rapid.SampledFrom(edgeDurations).Draw(t, label)
	case 1:
		return time.Duration(rapid.Int64Range(0, int64(2*time.Minute)).Draw(t, label))
	case 2:
		return time.Duration(rapid.Int64Range(-int64(time.Minute), int64(time.Minute)).Draw(t, label))
	default:
		return time.Duration(rapid.Int64().Draw(t, label))
	}
}

// drawInstant returns an edge instant moved by up to a minute either way.
func drawInstant(t *rapid.T, label string) time.Time {
	base := rapid.SampledFrom(edgeInstants).Draw(t, label+".base")
	return near(t, base, label)
}

// near returns base moved by up to a minute either way, or by an edge
// duration.
func near(t *rapid.T, base time.Time, label string) time.Time {
	if rapid.Bool().Draw(t, label+".edge") {
		d := rapid.SampledFrom(edgeDurations).Draw(t, label+".offset")
		if rapid.Bool().Draw(t, label+".neg") {
			d = -d
		}
		return base.Add(d)
	}
	return base.Add(time.Duration(rapid.Int64Range(-int64(time.Minute), int64(time.Minute)).Draw(t, label+".offset")))
}

var drawReason = rapid.SampledFrom([]Reason{
	ReasonNone, ReasonDeliveryTimeout, ReasonShutdownDeadline, ReasonForcedShutdown,
	ReasonRuntimeFailure, ReasonRuntimeCancellation,
})

// drawRootChange returns root with one more root installed or a shortening,
// each at or after the first initiation when root is installed.
func drawRootChange(t *rapid.T, root Root, around time.Time, label string) Root {
	anchor := around
	if root.Installed() {
		anchor = root.Start()
	}
	start := near(t, anchor, label+".start")
	if root.Installed() && start.Before(anchor) {
		start = anchor
	}
	if root.Installed() && rapid.Bool().Draw(t, label+".shorten") {
		return root.Shorten(Latest(near(t, anchor, label+".hard"), anchor))
	}
	return root.Install(NewRoot(start, drawDuration(t, label+".total")))
}

func checkBudget(t *rapid.T, what string, b Budget) {
	if b.P.After(b.H) {
		t.Fatalf("%s: P after H: %+v", what, b)
	}
	if r := b.H.Sub(b.P); r < 0 || r > AttemptReserveMax {
		t.Fatalf("%s: R = %v", what, r)
	}
	if !b.H.Before(b.S) && b.P.Before(b.S) {
		t.Fatalf("%s: S <= H but P before S: %+v", what, b)
	}
	if !b.H.After(b.S) && !b.P.Equal(b.H) {
		t.Fatalf("%s: H <= S but P != H: %+v", what, b)
	}
}

func notAfter(t *rapid.T, what string, got, bound time.Time) {
	if got.After(bound) {
		t.Fatalf("%s: %v after %v", what, got, bound)
	}
}

// TestT13_BudgetOrder: S <= P <= H (P == H once H <= S) and R <= 1 s, for
// new budgets and after any caps.
func TestT13_BudgetOrder(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := drawInstant(t, "S")
		var root Root
		if rapid.Bool().Draw(t, "rooted") {
			root = drawRootChange(t, root, s, "root")
		}
		b := NewBudget(s, drawDuration(t, "T"), root)
		checkBudget(t, "NewBudget", b)
		for i := range rapid.IntRange(0, 5).Draw(t, "caps") {
			_ = i
			b = b.Cap(near(t, s, "h"))
			checkBudget(t, "Cap", b)
		}
	})
}

// TestT13_CapsNeverRaise: caps and root installs never raise H, P, D, N,
// O, C or E, and the root's cutoffs never grow (DL-10, DL-12, DL-25, SD-5).
func TestT13_CapsNeverRaise(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := drawInstant(t, "S")
		b := NewBudget(s, drawDuration(t, "T"), Root{})
		reason := drawReason.Draw(t, "reason")
		at := near(t, s, "at")
		var root Root
		type cut struct{ h, p, d, n, o, c, e time.Time }
		snapshot := func() cut {
			n, _ := b.Notification(root)
			o := b.OwnerCutoff(reason, at, root)
			return cut{b.H, b.P, b.HandlerDeadline(root), n, o, CooperativeDeadline(at, o, root), b.CleanupCutoff(reason, at, root)}
		}
		prev, prevRoot := snapshot(), root
		for range rapid.IntRange(1, 6).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "install") {
				root = drawRootChange(t, root, s, "root")
			} else {
				b = b.Cap(near(t, s, "h"))
			}
			b = b.CapRoot(root)
			next := snapshot()
			for _, c := range []struct {
				name       string
				next, prev time.Time
			}{
				{"H", next.h, prev.h}, {"P", next.p, prev.p}, {"D", next.d, prev.d}, {"N", next.n, prev.n},
				{"O", next.o, prev.o}, {"C", next.c, prev.c}, {"E", next.e, prev.e},
			} {
				notAfter(t, c.name+" grew", c.next, c.prev)
			}
			if prevRoot.Installed() {
				notAfter(t, "G grew", root.G(), prevRoot.G())
				notAfter(t, "Hr grew", root.Hr(), prevRoot.Hr())
				if root.Reserve() > prevRoot.Reserve() {
					t.Fatalf("reserve grew")
				}
			}
			prev, prevRoot = next, root
		}
	})
}

// TestT13_CooperativeBounds: C <= at + 250 ms, C <= O <= H, and with a
// root every cutoff is within Hr (DL-21, DL-22, DL-30).
func TestT13_CooperativeBounds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := drawInstant(t, "S")
		var root Root
		if rapid.Bool().Draw(t, "rooted") {
			root = drawRootChange(t, root, s, "root")
		}
		b := NewBudget(s, drawDuration(t, "T"), root)
		reason := drawReason.Draw(t, "reason")
		at := near(t, s, "at")
		o := b.OwnerCutoff(reason, at, root)
		c := CooperativeDeadline(at, o, root)
		e := b.CleanupCutoff(reason, at, root)
		notAfter(t, "C vs at+250ms", c, at.Add(CooperativeWindowMax))
		notAfter(t, "C vs O", c, o)
		notAfter(t, "O vs H", o, b.H)
		notAfter(t, "E vs O", e, o)
		if reason != ReasonNone && reason != ReasonDeliveryTimeout {
			notAfter(t, "O vs at+1s", o, at.Add(OwnerWindowMax))
		}
		if root.Installed() {
			notAfter(t, "C vs Hr", c, root.Hr())
			notAfter(t, "E vs Hr", e, root.Hr())
			notAfter(t, "D vs G", b.HandlerDeadline(root), root.G())
			f := root.OwnerCutoff(at)
			notAfter(t, "F vs Hr", f, root.Hr())
		}
		final := b.FinalCleanupCutoff(root, near(t, at, "now"))
		notAfter(t, "final E vs H", final, b.H)
	})
}

// TestT13_HookChain: Hk <= E' <= E, and every hook deadline lies in
// [now, Hk] (DL-31, DL-33).
func TestT13_HookChain(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		e := drawInstant(t, "E")
		var root Root
		if rapid.Bool().Draw(t, "rooted") {
			root = drawRootChange(t, root, e, "root")
		}
		now := near(t, e, "u")
		hooks, scope := HookChain(e, root, now)
		notAfter(t, "Hk vs E'", hooks, scope)
		notAfter(t, "E' vs E", scope, e)
		if d := scope.Sub(hooks); d > ScopeReserveMax {
			t.Fatalf("scope reserve %v", d)
		}
		for k := rapid.IntRange(-1, 5).Draw(t, "k"); k >= 0; k-- {
			d, ok := HookDeadline(hooks, k, now)
			if !ok {
				if now.Before(hooks) {
					t.Fatalf("hook refused before Hk")
				}
				break
			}
			notAfter(t, "hook deadline vs Hk", d, hooks)
			notAfter(t, "now vs hook deadline", now, d)
			now = d
		}
	})
}

// TestT13_Root: start <= G <= Hr, installs and shortenings that are not
// earlier than the first initiation keep it so, and every force deadline
// is within Hr (SD-4..SD-8).
func TestT13_Root(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		start := drawInstant(t, "start")
		root := NewRoot(start, drawDuration(t, "total"))
		for range rapid.IntRange(0, 5).Draw(t, "installs") {
			notAfter(t, "start vs G", root.Start(), root.G())
			notAfter(t, "G vs Hr", root.G(), root.Hr())
			if r := root.Reserve(); r < 0 || r > RootReserveMax {
				t.Fatalf("reserve %v", r)
			}
			now := near(t, start, "now")
			f := root.ForceDeadline(now)
			notAfter(t, "force deadline vs Hr", f, root.Hr())
			o := near(t, now, "owner")
			drain := root.DrainForceDeadline(now, o)
			notAfter(t, "drain vs Hr", drain, root.Hr())
			notAfter(t, "coordinator vs drain", f, drain)
			if w := root.SettlementWait(drawDuration(t, "timeout"), now); w < 0 || w > root.Hr().Sub(now) && w > 0 {
				t.Fatalf("settlement wait %v", w)
			}
			notAfter(t, "dispatcher stop vs Hr", root.DispatcherStopDeadline(now), root.Hr())
			root = drawRootChange(t, root, start, "next")
		}
	})
}

// drawValidBackoff returns a valid exponential, fixed or linear policy.
func drawValidBackoff(t *rapid.T) Backoff {
	base := time.Duration(rapid.Int64Range(int64(BackoffBaseMin), int64(BackoffBaseMax)).Draw(t, "base"))
	p := Backoff{
		Kind:        rapid.SampledFrom([]BackoffKind{BackoffExponential, BackoffFixed, BackoffLinear}).Draw(t, "kind"),
		Base:        base,
		Max:         time.Duration(rapid.Int64Range(int64(base), int64(MaxBackoffMax)).Draw(t, "max")),
		JitterRatio: rapid.Float64Range(0, JitterRatioMax).Draw(t, "r"),
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("generator made an invalid policy: %v", err)
	}
	return p
}

var drawAttempts = rapid.OneOf(rapid.IntRange(1, 200), rapid.SampledFrom([]int{62, 63, 64, 65, math.MaxInt32, math.MaxInt - 1, math.MaxInt}))

// TestT13_BackoffDelay: Delay is one of the candidates and within
// [Base, Max]; candidates are ascending, distinct, at most three; the same
// inputs give the same delay (DL-5).
func TestT13_BackoffDelay(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := drawValidBackoff(t)
		n := drawAttempts.Draw(t, "n")
		c := p.Candidates(n)
		if len(c) < 1 || len(c) > 3 {
			t.Fatalf("candidates %v", c)
		}
		for i := 1; i < len(c); i++ {
			if c[i] <= c[i-1] {
				t.Fatalf("candidates not strictly ascending: %v", c)
			}
		}
		if !slices.Contains(c, p.Nominal(n)) {
			t.Fatalf("nominal %v not among candidates %v", p.Nominal(n), c)
		}
		idx := rapid.IntRange(0, len(c)-1).Draw(t, "pick")
		pick := func(k int) int {
			if k != len(c) {
				t.Fatalf("pick(%d) with %d candidates", k, len(c))
			}
			return idx
		}
		d := p.Delay(n, pick)
		if !slices.Contains(c, d) || d < p.Base || d > p.Max {
			t.Fatalf("delay %v: candidates %v, range [%v, %v]", d, c, p.Base, p.Max)
		}
		if again := p.Delay(n, pick); again != d || !slices.Equal(p.Candidates(n), c) {
			t.Fatalf("not deterministic")
		}
		if n > 1 && p.Kind != BackoffFixed && p.Nominal(n) < p.Nominal(n-1) {
			t.Fatalf("nominal shrank from n-1 to n")
		}
	})
}

// TestT13_BackoffList: a list policy returns List[min(n−1, len−1)]
// verbatim, with no cap and no jitter.
func TestT13_BackoffList(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		list := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) time.Duration {
			return time.Duration(rapid.Int64Range(int64(BackoffListEntryMin), int64(BackoffListEntryMax)).Draw(t, "entry"))
		}), BackoffListLenMin, BackoffListLenMax).Draw(t, "list")
		p := Backoff{Kind: BackoffList, Base: time.Second, Max: time.Second, JitterRatio: 0.5, List: list}
		if err := p.Validate(); err != nil {
			t.Fatalf("valid list rejected: %v", err)
		}
		n := drawAttempts.Draw(t, "n")
		want := list[min(n-1, len(list)-1)]
		if d := p.Delay(n, func(int) int { t.Fatalf("pick called for a list"); return 0 }); d != want {
			t.Fatalf("Delay(%d) = %v, want %v", n, d, want)
		}
	})
}

// TestT13_ExtremeInputs: no overflow or panic for any policy, instant or
// duration, and the results are a function of the inputs alone.
func TestT13_ExtremeInputs(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		p := Backoff{
			Kind:        BackoffKind(rapid.IntRange(0, 5).Draw(t, "kind")),
			Base:        drawDuration(t, "base"),
			Max:         drawDuration(t, "max"),
			JitterRatio: rapid.SampledFrom([]float64{0, 0.2, 0.5, 1, 3, math.NaN(), math.Inf(1), -1, math.MaxFloat64}).Draw(t, "r"),
			List:        rapid.SliceOfN(rapid.Custom(func(t *rapid.T) time.Duration { return drawDuration(t, "entry") }), 0, 3).Draw(t, "list"),
		}
		n := rapid.OneOf(rapid.IntRange(math.MinInt, math.MaxInt), drawAttempts).Draw(t, "n")
		first := p.Delay(n, func(int) int { return 0 })
		if again := p.Delay(n, func(int) int { return 0 }); again != first {
			t.Fatalf("Delay not deterministic")
		}
		_ = p.Validate()

		s := drawInstant(t, "S")
		tt := drawDuration(t, "T")
		root := drawRootChange(t, Root{}, s, "root")
		at := near(t, s, "at")
		now := near(t, s, "now")
		reason := drawReason.Draw(t, "reason")
		run := func() []time.Time {
			b := NewBudget(s, tt, root)
			n, _ := b.Notification(root)
			o := b.OwnerCutoff(reason, at, root)
			e := b.CleanupCutoff(reason, at, root)
			hk, scope := HookChain(e, root, now)
			hd, _ := HookDeadline(hk, 2, now)
			return []time.Time{
				b.H, b.P, b.HandlerDeadline(root), n, o, CooperativeDeadline(at, o, root), e,
				b.FinalCleanupCutoff(root, now), hk, scope, hd,
				root.G(), root.Hr(), root.ForceDeadline(now), root.DrainForceDeadline(now, o),
				root.OwnerCutoff(at), root.DispatcherStopDeadline(now),
			}
		}
		a, b := run(), run()
		for i := range a {
			if !a[i].Equal(b[i]) {
				t.Fatalf("output %d differs between identical runs", i)
			}
		}
		checkBudget(t, "extreme budget", NewBudget(s, tt, root))
		_ = root.SettlementWait(tt, now)
		_ = WorkflowExpired(at, now)
	})
}

// RL-9, T13: an instant set ahead of now is never recorded behind it. It is
// now + d exactly when that fits in Unix nanoseconds, and the last instant
// they hold when it does not; a wrapped sum would be in the past, and its
// timer would fire at once.
func TestT13_InstantAfterNeverWraps(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := drawInstant(t, "now")
		d := drawDuration(t, "d")
		switch {
		case d == math.MinInt64:
			d = math.MaxInt64 // its negation overflows back to itself
		case d < 0:
			d = -d
		}
		got := InstantAfter(now, d)
		want := now.Add(d)
		switch {
		case want.After(time.Unix(0, math.MaxInt64)):
			if got != math.MaxInt64 {
				t.Fatalf("InstantAfter(%v, %v) = %d, want the last instant %d", now, d, got, int64(math.MaxInt64))
			}
		case want.Before(time.Unix(0, math.MinInt64)):
			if got != math.MinInt64 {
				t.Fatalf("InstantAfter(%v, %v) = %d, want the first instant %d", now, d, got, int64(math.MinInt64))
			}
		default:
			if !time.Unix(0, got).Equal(want) {
				t.Fatalf("InstantAfter(%v, %v) = %v, want %v", now, d, time.Unix(0, got).UTC(), want.UTC())
			}
		}
		if now.After(time.Unix(0, math.MinInt64)) && now.Before(time.Unix(0, math.MaxInt64)) && got < now.UnixNano() {
			t.Fatalf("InstantAfter(%v, %v) = %d is before now (%d)", now, d, got, now.UnixNano())
		}
	})
}
