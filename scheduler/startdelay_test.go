package scheduler

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// The buckets: ascending, four to a doubling, none more than a quarter
// wider than its lower bound, and a duration on a bound counted in that
// bound's bucket.
func TestStartDelayBuckets(t *testing.T) {
	bounds := StartDelayBounds
	if len(bounds)+1 != startDelayBuckets {
		t.Fatalf("%d bounds for %d buckets", len(bounds), startDelayBuckets)
	}
	if bounds[0] != 20*time.Microsecond || bounds[len(bounds)-1] != 16*time.Microsecond<<startDelayOctaves {
		t.Fatalf("bounds run from %v to %v, want 20µs to %v", bounds[0], bounds[len(bounds)-1], 16*time.Microsecond<<startDelayOctaves)
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] <= bounds[i-1] || bounds[i]-bounds[i-1] > bounds[i-1]/4 {
			t.Fatalf("bucket %d is (%v, %v]", i, bounds[i-1], bounds[i])
		}
		if i >= 4 && bounds[i] != 2*bounds[i-4] {
			t.Fatalf("bound %d is %v, want twice %v", i, bounds[i], bounds[i-4])
		}
	}
	var h delayHistogram
	h.add(0)
	h.add(bounds[0])
	h.add(bounds[0] + 1)
	h.add(bounds[7])
	h.add(bounds[len(bounds)-1] + 1)
	want := make([]uint64, startDelayBuckets)
	want[0], want[1], want[7], want[len(bounds)] = 2, 1, 1, 1
	if got := h.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// An execution's start delay runs from the return of the append that
// acknowledged its attempt_started (DL-7: the handler runs only after it)
// to the execution's start. Here the loop is held while that append
// returns and the clock moves 3 ms: each of the four attempts it started
// waited those 3 ms, and nothing else is counted.
func TestStartDelaysCountFromTheAcknowledgement(t *testing.T) {
	const n = 4
	b := newResultsBundle(t, false, n, n)
	b.app.close()
	b.dispatch(t)
	<-b.app.waiting // the append of the four starts waits at the gate

	release := b.holdLoop(t)
	b.app.open()
	for len(b.r.acks) == 0 { // the committer stamped the return and sent the ack
		runtime.Gosched()
	}
	const waited = 3 * time.Millisecond
	b.clk.Advance(waited)
	// The settlements' appends, which move the clock, wait until every
	// execution has started.
	b.app.close()
	release()
	started := func() (n uint64) {
		for _, c := range b.r.StartDelays() {
			n += c
		}
		return n
	}
	for i := 0; i < 100_000 && started() < n; i++ {
		runtime.Gosched()
	}
	b.app.open()
	b.waitFor(t, "drain", b.drained)

	want := make([]uint64, startDelayBuckets)
	i, _ := slices.BinarySearch(StartDelayBounds, waited)
	want[i] = n
	if got := b.r.StartDelays(); !slices.Equal(got, want) {
		t.Fatalf("start delays %v, want all %d in the bucket up to %v", got, n, StartDelayBounds[i])
	}
}
