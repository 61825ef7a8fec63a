package scheduler

import (
	"slices"
	"sync/atomic"
	"time"
)

// StartDelayBounds are the upper bounds of the buckets of
// [Runner.StartDelays], ascending: four to each doubling, from 20 µs
// (the first bucket counts everything up to it) to 16 µs·2¹³, about
// 131 ms, so that each bucket is at most a quarter wider than its lower
// bound. One more bucket counts the delays over the last bound.
var StartDelayBounds = func() []time.Duration {
	b := make([]time.Duration, 0, startDelayOctaves*4)
	base := 16 * time.Microsecond
	for range startDelayOctaves {
		for q := range 4 {
			b = append(b, base+base*time.Duration(q+1)/4)
		}
		base *= 2
	}
	return b
}()

// startDelayOctaves is how many doublings StartDelayBounds spans.
const startDelayOctaves = 13

// delayHistogram counts durations into the buckets of StartDelayBounds.
// Any goroutine may add to it and read it.
type delayHistogram struct {
	counts [startDelayBuckets]atomic.Uint64
}

// startDelayBuckets is len(StartDelayBounds)+1.
const startDelayBuckets = startDelayOctaves*4 + 1

// add counts d in the first bucket whose bound is at or above it.
func (h *delayHistogram) add(d time.Duration) {
	i, _ := slices.BinarySearch(StartDelayBounds, d)
	h.counts[i].Add(1)
}

// snapshot returns the counts, one per bucket.
func (h *delayHistogram) snapshot() []uint64 {
	out := make([]uint64, len(h.counts))
	for i := range h.counts {
		out[i] = h.counts[i].Load()
	}
	return out
}
