package deadlines

import (
	"math"
	"testing"
	"time"
)

// TestDL1_RemainingCountsEveryNanosecond: time arithmetic is in integer
// nanoseconds (DL-1): a deadline one nanosecond ahead still leaves one
// nanosecond, and it has expired only once now reaches it.
func TestDL1_RemainingCountsEveryNanosecond(t *testing.T) {
	t.Parallel()
	deadline := t0.Add(time.Nanosecond)
	wantDur(t, "Remaining 1ns before", Remaining(deadline, t0), time.Nanosecond)
	wantDur(t, "Remaining 999ns before", Remaining(t0.Add(999), t0), 999)
	wantDur(t, "Remaining at the deadline", Remaining(deadline, deadline), 0)
	if Expired(deadline, t0) {
		t.Fatalf("Expired 1ns before the deadline")
	}

	// The same nanosecond reaches the budget of an attempt: with no root the
	// handler sees P, and one nanosecond before P one nanosecond is left.
	b := NewBudget(t0, 30*time.Second, Root{})
	wantDur(t, "handler Remaining 1ns before P", b.Remaining(Root{}, b.P.Add(-time.Nanosecond)), time.Nanosecond)
}

// TestRL9_InstantAfterExactBelowTheBound: InstantAfter saturates only past
// the last representable instant; the instants just below it are kept
// exactly, so a timer due then is not moved to the bound (RL-9).
func TestRL9_InstantAfterExactBelowTheBound(t *testing.T) {
	t.Parallel()
	last := time.Unix(0, math.MaxInt64)
	tests := []struct {
		name string
		now  time.Time
		d    time.Duration
		want int64
	}{
		{"two before the bound", last.Add(-2), 0, math.MaxInt64 - 2},
		{"one before the bound", last.Add(-3), 2, math.MaxInt64 - 1},
		{"at the bound", last.Add(-1), 1, math.MaxInt64},
		{"one past the bound", last, 1, math.MaxInt64},
		{"two after the first instant", time.Unix(0, math.MinInt64), 2, math.MinInt64 + 2},
	}
	for _, tt := range tests {
		if got := InstantAfter(tt.now, tt.d); got != tt.want {
			t.Errorf("%s: InstantAfter = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestSD9_DispatcherStopDeadlineWithoutRoot: with no shutdown in progress
// the dispatcher's stop is due at now, as documented, never at the zero
// time, which would read as long past.
func TestSD9_DispatcherStopDeadlineWithoutRoot(t *testing.T) {
	t.Parallel()
	wantTime(t, "no root", Root{}.DispatcherStopDeadline(ts("3s")), ts("3s"))
}
