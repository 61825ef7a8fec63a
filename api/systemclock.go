package api

import (
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/internal/walltimer"
)

// systemClock is the engine's default clock: the wall clock, with timers
// that fire within tens of microseconds of their instant. The runtime's own
// timers can be up to about 1 ms late on Linux (walltimer's doc says why),
// and every delayed job and attempt deadline would start that late.
type systemClock struct{ clock.Clock }

func (systemClock) NewTimer(d time.Duration) clock.Timer { return walltimer.New(d) }

func (systemClock) NewTimerAt(at time.Time) clock.Timer { return walltimer.At(at) }
