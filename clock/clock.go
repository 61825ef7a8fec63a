package clock

import "time"

// Clock is the only source of the current time in quire. Production code
// receives one through Options; tests and sim pass a [clocktest.Clock].
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// NewTimer returns a Timer that fires once, when the clock reaches
	// Now()+d. A d <= 0 fires as soon as possible.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a [Clock].
type Timer interface {
	// C returns the channel on which the fire instant is delivered. It has
	// a buffer of one, so a fire never blocks the clock.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false if it had already fired or been stopped).
	Stop() bool
	// Reset re-arms the timer to fire after d. It reports whether the timer
	// was active before the call. Callers drain C when Reset follows a fire
	// they did not receive.
	Reset(d time.Duration) bool
}

// AtClock is a [Clock] that can arm a timer for an absolute instant in one
// step. NewTimer(at.Sub(Now())) takes two readings of the clock: if the
// clock moves between them, the timer is armed late by that much, which on
// a manual clock moved by another goroutine can be any amount. Callers that
// wait for an instant use [NewTimerAt], which takes this path when the
// clock offers it.
type AtClock interface {
	Clock
	// NewTimerAt returns a Timer that fires once, when the clock reaches
	// at. An at not after Now() fires as soon as possible.
	NewTimerAt(at time.Time) Timer
}

// NewTimerAt returns a Timer of c that fires once c reaches at: in one step
// if c is an [AtClock], else as c.NewTimer(at.Sub(c.Now())).
func NewTimerAt(c Clock, at time.Time) Timer {
	if a, ok := c.(AtClock); ok {
		return a.NewTimerAt(at)
	}
	return c.NewTimer(at.Sub(c.Now()))
}

// System returns the wall clock. Only api calls it (DESIGN §1.3).
func System() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return &systemTimer{t: time.NewTimer(d)} }

func (c systemClock) NewTimerAt(at time.Time) Timer { return c.NewTimer(time.Until(at)) }

type systemTimer struct{ t *time.Timer }

func (s *systemTimer) C() <-chan time.Time        { return s.t.C }
func (s *systemTimer) Stop() bool                 { return s.t.Stop() }
func (s *systemTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
