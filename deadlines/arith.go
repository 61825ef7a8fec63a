package deadlines

import (
	"math"
	"time"
)

// Limits built into the budget formulas of spec/delivery.md and
// spec/shutdown.md. They are not options.
const (
	// AttemptReserveMax caps the reserve R = min((H−S)/4, 1 s) of one
	// attempt (DL-9).
	AttemptReserveMax = time.Second
	// OwnerWindowMax caps how long a non-timeout owner cutoff F(at) lies
	// after at (DL-21).
	OwnerWindowMax = time.Second
	// CooperativeWindowMax caps the cooperative window from at to C (DL-22).
	CooperativeWindowMax = 250 * time.Millisecond
	// ScopeReserveMax caps the part of the cleanup budget kept for closing
	// the attempt scope after the termination hooks (DL-31).
	ScopeReserveMax = 250 * time.Millisecond
	// FinalCleanupWindow is the bounded reconciliation window granted when
	// an attempt's owner is torn down with cleanup unfinished (DL-30).
	FinalCleanupWindow = 100 * time.Millisecond
	// RootReserveMax caps the root reserve min(total/4, 2 s) between G and
	// Hr (SD-4).
	RootReserveMax = 2 * time.Second
	// CloseReserveMax caps the time kept after the dispatcher's stop
	// acknowledgement for closing queues and syncing the journal (SD-9).
	CloseReserveMax = 250 * time.Millisecond
)

// Expired reports whether the instant x has expired at now, that is
// now >= x (DL-1). See [WorkflowExpired] for deadlines that may be absent.
func Expired(x, now time.Time) bool { return !now.Before(x) }

// Remaining returns how much of the budget up to deadline is left at now:
// deadline − now, saturated at zero (DL-1, DL-12).
func Remaining(deadline, now time.Time) time.Duration { return since(deadline, now) }

// Bounds of the instants records hold, in Unix nanoseconds.
var (
	instantMax = time.Unix(0, math.MaxInt64)
	instantMin = time.Unix(0, math.MinInt64)
)

// InstantAfter returns now + d in Unix nanoseconds, the form in which
// records keep instants (available_at, fire_at, deadline_at), saturated at
// the bounds of int64: 2262-04-11T23:47:16.854775807Z at the latest. Unlike
// now.Add(d).UnixNano(), it never wraps round, which turned a delay past
// 2262 into an instant in the past, so a timer fired at once (RL-9).
// [DelayMax] keeps every instant below the bound until the clock passes
// the year 2162.
func InstantAfter(now time.Time, d time.Duration) int64 {
	t := now.Add(d)
	switch {
	case t.After(instantMax):
		return math.MaxInt64
	case t.Before(instantMin):
		return math.MinInt64
	}
	return t.UnixNano()
}

// Earliest returns the earlier of a and b. Deadlines only ever shrink, so
// a deadline is lowered with Earliest(old, new) (DL-10, DL-30).
func Earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Latest returns the later of a and b.
func Latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// since returns x − y saturated at zero. time.Time.Sub already saturates at
// the bounds of time.Duration, so the result is always in [0, MaxInt64].
func since(x, y time.Time) time.Duration {
	if d := x.Sub(y); d > 0 {
		return d
	}
	return 0
}

// quarter returns d/4, truncating (DL-1).
func quarter(d time.Duration) time.Duration { return d / 4 }

// threeQuarters returns d*3/4 for d >= 0 without overflowing: with
// d = 4q + r, d*3/4 = 3q + (3r)/4.
func threeQuarters(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/4*3 + (d%4)*3/4
}

// minDuration returns the smaller of a and b.
func minDuration(a, b time.Duration) time.Duration {
	if b < a {
		return b
	}
	return a
}

// addDuration returns a + b saturated at the bounds of time.Duration.
func addDuration(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case b > 0 && s < a:
		return maxDuration
	case b < 0 && s > a:
		return minDurationValue
	}
	return s
}

// subDuration returns a − b saturated at the bounds of time.Duration.
func subDuration(a, b time.Duration) time.Duration {
	s := a - b
	switch {
	case b > 0 && s > a:
		return minDurationValue
	case b < 0 && s < a:
		return maxDuration
	}
	return s
}

const (
	maxDuration      = time.Duration(1<<63 - 1)
	minDurationValue = time.Duration(-1 << 63)
)
