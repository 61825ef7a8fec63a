package api

import (
	"math"
	"slices"
	"time"

	"github.com/quire-dev/quire/scheduler"
)

// StartDelays is a histogram of how long acknowledged attempts waited to
// start running: from the return of the synced append that recorded their
// attempt_started (no handler runs before it, DL-7) to the start of their
// execution. That is the time the engine took to launch them and the time
// they waited for a goroutine and a CPU; a job's lateness is this delay on
// top of the commits before it. The counts are cumulative since [Open]:
// subtract an earlier reading ([StartDelays.Sub]) to look at an interval.
type StartDelays struct {
	// Bounds are the upper bounds of the buckets, ascending: four to each
	// doubling, from 20 µs to about 131 ms, each bucket at most a quarter
	// wider than its lower bound.
	Bounds []time.Duration
	// Counts has one entry per bucket of Bounds and one more, last, for
	// the delays over the last bound.
	Counts []uint64
}

// StartDelays returns the engine's start delays so far (see
// [StartDelays]). It may be called at any time, from any goroutine.
func (e *Engine) StartDelays() StartDelays {
	return StartDelays{Bounds: slices.Clone(scheduler.StartDelayBounds), Counts: e.r.StartDelays()}
}

// Total returns how many delays s counts.
func (s StartDelays) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Sub returns the delays counted in s and not in earlier, an earlier
// reading of the same engine. A bucket earlier counts more of than s (the
// readings swapped) counts 0, rather than wrapping around.
func (s StartDelays) Sub(earlier StartDelays) StartDelays {
	out := StartDelays{Bounds: s.Bounds, Counts: slices.Clone(s.Counts)}
	for i := range out.Counts {
		if i < len(earlier.Counts) {
			out.Counts[i] -= min(earlier.Counts[i], out.Counts[i])
		}
	}
	return out
}

// Quantile returns the upper bound of the bucket that holds the q-quantile
// of the delays (0 < q ≤ 1; q = 0.99 for the 99th percentile): the delay
// at that rank is at most the value returned and, past the first bucket
// (up to 20 µs), more than four fifths of it. If that delay is over the
// last bound, Quantile returns the last bound, which it then exceeds. It
// returns 0 when s counts nothing.
func (s StartDelays) Quantile(q float64) time.Duration {
	total := s.Total()
	if total == 0 || len(s.Bounds) == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := max(uint64(math.Ceil(q*float64(total))), 1) // 1-based
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen >= rank {
			return s.Bounds[min(i, len(s.Bounds)-1)]
		}
	}
	return s.Bounds[len(s.Bounds)-1]
}
