package clocktest_test

import (
	"testing"

	"github.com/quire-dev/quire/clock"
)

// TestSystemClock covers package clock's System here, next to the clock that
// stands in for it; it asserts no timing.
func TestSystemClock(t *testing.T) {
	t.Parallel()
	c := clock.System()
	if c.Now().IsZero() {
		t.Fatal("System().Now() is the zero time")
	}
	tm := c.NewTimer(0)
	if (<-tm.C()).IsZero() {
		t.Fatal("System timer delivered the zero time")
	}
	if tm.Stop() {
		t.Fatal("Stop after the fire = true, want false")
	}
}
