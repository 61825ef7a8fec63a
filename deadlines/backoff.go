package deadlines

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// BackoffKind selects how the nominal retry delay grows (DL-4, DL-5). The
// zero value is [BackoffExponential], the default.
type BackoffKind uint8

// Backoff kinds of DL-4.
const (
	// BackoffExponential gives min(Base·2^(n−1), Max).
	BackoffExponential BackoffKind = iota
	// BackoffFixed gives Base.
	BackoffFixed
	// BackoffLinear gives min(n·Base, Max).
	BackoffLinear
	// BackoffList gives List[min(n−1, len(List)−1)], verbatim.
	BackoffList
)

var backoffKindNames = [...]string{
	BackoffExponential: "exponential",
	BackoffFixed:       "fixed",
	BackoffLinear:      "linear",
	BackoffList:        "list",
}

// String returns the config value of k ("exponential", "fixed", "linear"
// or "list"), or "BackoffKind(n)" for a value that is not defined.
func (k BackoffKind) String() string {
	if int(k) < len(backoffKindNames) {
		return backoffKindNames[k]
	}
	return "BackoffKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseBackoffKind returns the kind whose [BackoffKind.String] is s (the
// retry_backoff config value), and false if there is none.
func ParseBackoffKind(s string) (BackoffKind, bool) {
	for i, name := range backoffKindNames {
		if name == s {
			return BackoffKind(i), true
		}
	}
	return BackoffExponential, false
}

// Backoff is a retry delay policy (DL-4, DL-5). Call [Backoff.WithDefaults]
// and then [Backoff.Validate] once at the boundary; the schedule methods
// never fail and never panic on any policy, but their results are only
// meaningful for a valid one.
type Backoff struct {
	// Kind selects the growth. The zero value is exponential.
	Kind BackoffKind
	// Base is BackoffBase: 100 ms..300 s. Zero means 1 s.
	Base time.Duration
	// Max is MaxBackoff, the cap: Base..900 s. Zero means 60 s, or Base
	// when Base is longer.
	Max time.Duration
	// JitterRatio r spreads each delay over {nominal − spread, nominal,
	// nominal + spread} with spread = round(nominal·r) to the millisecond.
	// Finite, 0..0.5; zero, the default, means no jitter. Ignored for
	// [BackoffList].
	JitterRatio float64
	// List holds the explicit delays of [BackoffList]: 1..100 entries, each
	// 100 ms..900 s, used verbatim (no cap, no jitter). Ignored by the
	// other kinds.
	List []time.Duration
}

// WithDefaults returns p with a zero Base replaced by [BackoffBaseDefault]
// and a zero Max by [MaxBackoffDefault], or by Base when Base is longer:
// MaxBackoff is valid from BackoffBase up (DL-4), so a Base of 2 minutes
// alone is a valid policy. The zero Kind is already the default,
// exponential, and a zero JitterRatio means no jitter.
func (p Backoff) WithDefaults() Backoff {
	if p.Base == 0 {
		p.Base = BackoffBaseDefault
	}
	if p.Max == 0 {
		p.Max = max(MaxBackoffDefault, p.Base)
	}
	return p
}

// Validate checks every field of p (DL-4) and returns the first
// [*RangeError]: Kind, then BackoffBase, MaxBackoff, JitterRatio, and the
// list when Kind is [BackoffList] or List is not empty.
func (p Backoff) Validate() error {
	if int(p.Kind) >= len(backoffKindNames) {
		return &RangeError{Field: "Backoff", Value: p.Kind}
	}
	if err := ValidateBackoffBase(p.Base); err != nil {
		return err
	}
	if err := ValidateMaxBackoff(p.Max, p.Base); err != nil {
		return err
	}
	if err := ValidateJitterRatio(p.JitterRatio); err != nil {
		return err
	}
	if p.Kind == BackoffList || len(p.List) > 0 {
		return ValidateBackoffList(p.List)
	}
	return nil
}

// Nominal returns the nominal delay after n consumed attempts (DL-5),
// n >= 1; a smaller n counts as 1. Fixed gives Base; linear
// min(n·Base, Max); exponential min(Base·2^(n−1), Max), without overflow
// for any n; list List[min(n−1, len(List)−1)], or zero for an empty list.
func (p Backoff) Nominal(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	switch p.Kind {
	case BackoffFixed:
		return p.Base
	case BackoffLinear:
		if p.Base <= 0 {
			return minDuration(p.Base, p.Max)
		}
		if int64(n) > int64(p.Max/p.Base) {
			return p.Max
		}
		return minDuration(time.Duration(n)*p.Base, p.Max)
	case BackoffList:
		if len(p.List) == 0 {
			return 0
		}
		return p.List[min(n-1, len(p.List)-1)]
	default: // BackoffExponential
		if p.Base <= 0 {
			return minDuration(p.Base, p.Max)
		}
		shift := n - 1
		if shift >= 63 || p.Base > p.Max>>shift {
			return p.Max
		}
		return p.Base << shift
	}
}

// Candidates returns the delays one of which is chosen after n consumed
// attempts (DL-5), ascending and without duplicates. For [BackoffList], or
// with no jitter, it is the nominal delay alone. Otherwise, with
// spread = round(nominal·JitterRatio) to the millisecond, it is
// {nominal − spread, nominal, nominal + spread}, each clamped to
// [Base, Max], de-duplicated.
func (p Backoff) Candidates(n int) []time.Duration {
	nominal := p.Nominal(n)
	if p.Kind == BackoffList {
		return []time.Duration{nominal}
	}
	clamp := func(d time.Duration) time.Duration { return minDuration(max(d, p.Base), p.Max) }
	spread := p.spread(nominal)
	if spread == 0 {
		return []time.Duration{clamp(nominal)}
	}
	out := []time.Duration{
		clamp(subDuration(nominal, spread)),
		clamp(nominal),
		clamp(addDuration(nominal, spread)),
	}
	slices.Sort(out) // already ascending for a valid policy; cheap insurance
	return slices.Compact(out)
}

// spread returns round(nominal·JitterRatio) to the millisecond, or zero
// when there is no jitter. It saturates instead of overflowing.
func (p Backoff) spread(nominal time.Duration) time.Duration {
	r := p.JitterRatio
	if !(r > 0) || !isFinite(r) || nominal <= 0 {
		return 0
	}
	ms := math.Round(float64(nominal) / float64(time.Millisecond) * r)
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return maxDuration
	}
	return time.Duration(ms) * time.Millisecond
}

// Delay returns the delay chosen after n consumed attempts (DL-5):
// c[pick(len(c))] with c = p.Candidates(n). pick must return an index in
// [0, k) drawn uniformly from the engine's injected, seeded source, e.g.
// (*math/rand/v2.Rand).IntN; it is not called when there is one candidate,
// and Delay panics if it returns an index out of range. The chosen delay
// is recorded in the settlement, so replay never calls Delay again.
func (p Backoff) Delay(n int, pick func(k int) int) time.Duration {
	c := p.Candidates(n)
	if len(c) == 1 {
		return c[0]
	}
	i := pick(len(c))
	if i < 0 || i >= len(c) {
		panic("deadlines: Backoff.Delay: pick(" + strconv.Itoa(len(c)) + ") returned " + strconv.Itoa(i))
	}
	return c[i]
}
