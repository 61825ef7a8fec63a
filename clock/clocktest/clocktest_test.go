package clocktest_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/clock/clocktest"
)

var start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// firing records, in order, which AfterFunc callbacks ran and the clock's
// Now inside each.
type firing struct {
	name string
	now  time.Time
}

type recorder struct {
	clk *clocktest.Clock
	got []firing
}

func (r *recorder) after(d time.Duration, name string) clock.Timer {
	return r.clk.AfterFunc(d, func() { r.got = append(r.got, firing{name, r.clk.Now()}) })
}

func (r *recorder) names() []string {
	var out []string
	for _, f := range r.got {
		out = append(out, f.name)
	}
	return out
}

func at(d time.Duration) time.Time { return start.Add(d) }

// recv returns the value waiting in t's channel, failing if there is none.
func recv(t *testing.T, tm clock.Timer) time.Time {
	t.Helper()
	select {
	case v := <-tm.C():
		return v
	default:
		t.Fatal("timer channel is empty, want a fire")
		return time.Time{}
	}
}

func empty(t *testing.T, tm clock.Timer) {
	t.Helper()
	select {
	case v := <-tm.C():
		t.Fatalf("timer channel holds %v, want empty", v)
	default:
	}
}

func TestFireOrderIsInstantThenArming(t *testing.T) {
	t.Parallel()
	r := &recorder{clk: clocktest.New(start)}
	r.after(3*time.Second, "c")
	r.after(time.Second, "a1")
	r.after(2*time.Second, "b")
	r.after(time.Second, "a2") // same instant as a1, armed later
	r.after(time.Second, "a3")

	r.clk.Advance(10 * time.Second) // one jump over every instant

	want := []firing{
		{"a1", at(time.Second)},
		{"a2", at(time.Second)},
		{"a3", at(time.Second)},
		{"b", at(2 * time.Second)},
		{"c", at(3 * time.Second)},
	}
	if !slices.Equal(r.got, want) {
		t.Fatalf("fired %v, want %v", r.got, want)
	}
	if got := r.clk.Now(); !got.Equal(at(10 * time.Second)) {
		t.Fatalf("Now after Advance = %v, want %v", got, at(10*time.Second))
	}
}

func TestChannelTimersDeliverTheirOwnInstant(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	ds := []time.Duration{5 * time.Second, time.Second, 3 * time.Second, time.Second}
	var timers []clock.Timer
	for _, d := range ds {
		timers = append(timers, clk.NewTimer(d))
	}
	late := clk.NewTimer(time.Minute)

	clk.Advance(30 * time.Second)

	for i, tm := range timers {
		if got := recv(t, tm); !got.Equal(at(ds[i])) {
			t.Errorf("timer %d delivered %v, want %v", i, got, at(ds[i]))
		}
	}
	empty(t, late)
	if n := clk.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1 (the 1m timer)", n)
	}
}

func TestAdvanceFiresOnlyWhatIsDue(t *testing.T) {
	t.Parallel()
	r := &recorder{clk: clocktest.New(start)}
	r.after(time.Second, "a")
	r.after(2*time.Second, "b")

	r.clk.Advance(999 * time.Millisecond)
	if len(r.got) != 0 {
		t.Fatalf("fired %v before any instant was reached", r.got)
	}
	r.clk.Advance(time.Millisecond) // exactly a's instant: due
	if !slices.Equal(r.names(), []string{"a"}) {
		t.Fatalf("fired %v, want [a]", r.names())
	}
	if next, ok := r.clk.Next(); !ok || !next.Equal(at(2*time.Second)) {
		t.Fatalf("Next = %v, %v; want %v, true", next, ok, at(2*time.Second))
	}
}

func TestTimersArmedInCallbackFireInSameAdvance(t *testing.T) {
	t.Parallel()
	r := &recorder{clk: clocktest.New(start)}
	var ch clock.Timer
	r.clk.AfterFunc(time.Second, func() {
		r.got = append(r.got, firing{"first", r.clk.Now()})
		r.after(0, "zero")              // due now, after "second"
		r.after(-time.Hour, "negative") // also due now, armed after "zero"
		r.after(time.Second, "plus1s")  // due at 2s, within the jump
		ch = r.clk.NewTimer(1500 * time.Millisecond)
		r.after(time.Hour, "beyond") // past the jump: stays armed
	})
	r.after(time.Second, "second")
	r.after(2*time.Second, "preexisting2s") // armed before plus1s

	r.clk.Advance(5 * time.Second)

	want := []firing{
		{"first", at(time.Second)},
		{"second", at(time.Second)},
		{"zero", at(time.Second)},
		{"negative", at(time.Second)},
		{"preexisting2s", at(2 * time.Second)},
		{"plus1s", at(2 * time.Second)},
	}
	if !slices.Equal(r.got, want) {
		t.Fatalf("fired %v, want %v", r.got, want)
	}
	if got := recv(t, ch); !got.Equal(at(2500 * time.Millisecond)) {
		t.Fatalf("timer armed in callback delivered %v, want %v", got, at(2500*time.Millisecond))
	}
	if n := r.clk.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1 (beyond)", n)
	}
}

// A timer a callback arms or resets for the current instant fires after the
// callback returns, never inside it: callbacks run one at a time, in fire
// order, on the goroutine moving the clock.
func TestCallbacksDoNotNest(t *testing.T) {
	t.Parallel()
	r := &recorder{clk: clocktest.New(start)}
	x := r.after(time.Hour, "x")
	var ch clock.Timer
	r.clk.AfterFunc(time.Second, func() {
		r.got = append(r.got, firing{"first-begins", r.clk.Now()})
		r.after(0, "zero")
		x.Reset(0) // due now, after "zero"
		ch = r.clk.NewTimer(0)
		select {
		case v := <-ch.C():
			t.Errorf("NewTimer(0) in a callback delivered %v before the callback returned", v)
		default:
		}
		r.got = append(r.got, firing{"first-ends", r.clk.Now()})
	})
	r.after(time.Second, "second")

	r.clk.Advance(time.Second)

	want := []firing{
		{"first-begins", at(time.Second)},
		{"first-ends", at(time.Second)},
		{"second", at(time.Second)},
		{"zero", at(time.Second)},
		{"x", at(time.Second)},
	}
	if !slices.Equal(r.got, want) {
		t.Fatalf("fired %v, want %v", r.got, want)
	}
	if got := recv(t, ch); !got.Equal(at(time.Second)) {
		t.Fatalf("NewTimer(0) in a callback delivered %v, want %v", got, at(time.Second))
	}
}

// While one Advance waits in a callback, another carries the clock further.
// The first then fires what came due on the way, including a timer armed
// for the current instant while it was still moving, and leaves the clock
// where the second took it.
func TestAdvanceFinishesWhatAConcurrentAdvanceReached(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	clk.AfterFunc(time.Second, func() {
		close(entered)
		<-release
	})
	go func() {
		defer close(done)
		clk.Advance(time.Second)
	}()
	<-entered

	clk.Advance(5 * time.Second)
	if got := clk.Now(); !got.Equal(at(6 * time.Second)) {
		t.Fatalf("Now = %v, want %v", got, at(6*time.Second))
	}
	tm := clk.NewTimer(0) // the first Advance is still moving: left to it
	empty(t, tm)

	close(release)
	<-done
	if got := recv(t, tm); !got.Equal(at(6 * time.Second)) {
		t.Fatalf("delivered %v, want %v", got, at(6*time.Second))
	}
	if got := clk.Now(); !got.Equal(at(6 * time.Second)) {
		t.Fatalf("Now = %v after both Advance calls, want %v", got, at(6*time.Second))
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("Pending = %d, want 0", n)
	}
}

func TestZeroDurationFiresOnArming(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)

	tm := clk.NewTimer(0)
	if got := recv(t, tm); !got.Equal(start) {
		t.Fatalf("NewTimer(0) delivered %v, want %v", got, start)
	}
	neg := clk.NewTimer(-time.Minute) // never in the past
	if got := recv(t, neg); !got.Equal(start) {
		t.Fatalf("NewTimer(-1m) delivered %v, want %v", got, start)
	}
	ran := false
	clk.AfterFunc(0, func() { ran = true })
	if !ran {
		t.Fatal("AfterFunc(0) returned before running f")
	}
	// Reset follows the same rule as arming.
	reset := clk.NewTimer(time.Hour)
	reset.Reset(0)
	if got := recv(t, reset); !got.Equal(start) {
		t.Fatalf("Reset(0) delivered %v, want %v", got, start)
	}
	ran = false
	clk.AfterFunc(time.Hour, func() { ran = true }).Reset(-time.Second)
	if !ran {
		t.Fatal("Reset(-1s) of an AfterFunc returned before running f")
	}
	if n := clk.Pending(); n != 0 {
		t.Fatalf("Pending = %d, want 0", n)
	}
}

func TestStopReportsWhetherArmed(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	tm := clk.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer = false, want true")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true, want false")
	}
	clk.Advance(time.Hour)
	empty(t, tm)

	fired := clk.NewTimer(time.Second)
	clk.Advance(time.Second)
	if fired.Stop() {
		t.Fatal("Stop after the fire = true, want false")
	}
	recv(t, fired) // Stop does not drain C

	ran := false
	f := clk.AfterFunc(time.Second, func() { ran = true })
	if !f.Stop() {
		t.Fatal("Stop of an armed AfterFunc = false, want true")
	}
	clk.Advance(time.Hour)
	if ran {
		t.Fatal("stopped AfterFunc ran")
	}
	if f.C() != nil {
		t.Fatal("AfterFunc timer has a non-nil C")
	}
}

func TestResetReportsWhetherArmedAndRearms(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	tm := clk.NewTimer(time.Second)

	if !tm.Reset(3 * time.Second) {
		t.Fatal("Reset of an armed timer = false, want true")
	}
	clk.Advance(2 * time.Second)
	empty(t, tm) // the old instant no longer fires
	clk.Advance(time.Second)
	if got := recv(t, tm); !got.Equal(at(3 * time.Second)) {
		t.Fatalf("delivered %v, want %v", got, at(3*time.Second))
	}

	if tm.Reset(time.Second) {
		t.Fatal("Reset after the fire = true, want false")
	}
	clk.Advance(time.Second)
	if got := recv(t, tm); !got.Equal(at(4 * time.Second)) {
		t.Fatalf("delivered %v after Reset, want %v", got, at(4*time.Second))
	}

	tm.Stop()
	if tm.Reset(time.Second) {
		t.Fatal("Reset after Stop = true, want false")
	}
	if n := clk.Pending(); n != 1 {
		t.Fatalf("Pending = %d after Reset, want 1", n)
	}
}

func TestResetKeepsUnreceivedFireAndDropsOverflow(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	tm := clk.NewTimer(time.Second)
	clk.Advance(time.Second) // fires; nobody receives
	tm.Reset(time.Second)
	clk.Advance(time.Second) // fires into a full buffer: dropped, never blocks
	if got := recv(t, tm); !got.Equal(at(time.Second)) {
		t.Fatalf("delivered %v, want the first fire %v", got, at(time.Second))
	}
	empty(t, tm)
}

func TestResetCountsAsNewArming(t *testing.T) {
	t.Parallel()
	r := &recorder{clk: clocktest.New(start)}
	a := r.after(time.Second, "a")
	r.after(time.Second, "b")
	a.Reset(time.Second) // same instant, now armed after b

	r.clk.Advance(time.Second)
	if !slices.Equal(r.names(), []string{"b", "a"}) {
		t.Fatalf("fired %v, want [b a]", r.names())
	}
}

func TestSetBackwardFiresNothing(t *testing.T) {
	t.Parallel()
	r := &recorder{clk: clocktest.New(start)}
	r.after(time.Hour, "old") // at start+1h, absolute

	r.clk.Set(start.Add(-time.Hour))
	if got := r.clk.Now(); !got.Equal(start.Add(-time.Hour)) {
		t.Fatalf("Now = %v after Set backward, want %v", got, start.Add(-time.Hour))
	}
	if len(r.got) != 0 {
		t.Fatalf("Set backward fired %v", r.names())
	}
	if next, _ := r.clk.Next(); !next.Equal(at(time.Hour)) {
		t.Fatalf("Next = %v, want the timer's instant kept at %v", next, at(time.Hour))
	}

	r.after(time.Hour, "new") // counts from the new time: fires at start
	r.clk.Set(start.Add(time.Hour))
	want := []firing{{"new", start}, {"old", at(time.Hour)}}
	if !slices.Equal(r.got, want) {
		t.Fatalf("fired %v, want %v", r.got, want)
	}
}

func TestAdvanceNegativePanics(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1s) did not panic")
		}
		if !clk.Now().Equal(start) {
			t.Fatalf("Now moved to %v", clk.Now())
		}
	}()
	clk.Advance(-time.Second)
}

func TestAdvanceNegativeByOneNanosecondPanics(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	defer func() {
		if recover() == nil {
			t.Fatal("Advance(-1ns) did not panic")
		}
	}()
	clk.Advance(-time.Nanosecond)
}

func TestPanickingCallbackLeavesClockUsable(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	clk.AfterFunc(time.Second, func() { panic("boom") })
	later := clk.NewTimer(2 * time.Second)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the callback's panic did not propagate")
			}
		}()
		clk.Advance(time.Minute)
	}()

	// The clock is unlocked and not stuck in an Advance: a zero timer
	// still fires on arming, and the rest of the jump can be replayed.
	recv(t, clk.NewTimer(0))
	clk.Advance(time.Minute)
	if got := recv(t, later); !got.Equal(at(2 * time.Second)) {
		t.Fatalf("later timer delivered %v, want %v", got, at(2*time.Second))
	}
}

func TestPendingAndNext(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	if _, ok := clk.Next(); ok || clk.Pending() != 0 {
		t.Fatal("a new clock has armed timers")
	}
	clk.NewTimer(2 * time.Second)
	s := clk.NewTimer(time.Second)
	if next, ok := clk.Next(); !ok || !next.Equal(at(time.Second)) || clk.Pending() != 2 {
		t.Fatalf("Next = %v, %v; Pending = %d", next, ok, clk.Pending())
	}
	s.Stop()
	if next, _ := clk.Next(); !next.Equal(at(2*time.Second)) || clk.Pending() != 1 {
		t.Fatalf("after Stop: Next = %v, Pending = %d", next, clk.Pending())
	}
}

func TestBlockUntil(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		clk := clocktest.New(start)
		clk.BlockUntil(0) // already satisfied: returns

		done := make(chan struct{})
		go func() {
			clk.BlockUntil(2)
			close(done)
		}()
		returned := func() bool {
			synctest.Wait() // the waiter is blocked or has returned
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		if returned() {
			t.Fatal("BlockUntil(2) returned with no timer armed")
		}
		first := clk.NewTimer(time.Second)
		first.Stop()
		clk.NewTimer(time.Second)
		if returned() {
			t.Fatal("BlockUntil(2) returned with one timer armed")
		}
		clk.AfterFunc(time.Second, func() {})
		if !returned() {
			t.Fatal("BlockUntil(2) still blocked with two timers armed")
		}
	})
}

// TestConcurrentUse runs arming, stopping, resetting and advancing from many
// goroutines; -race checks the locking, and the end state checks that every
// timer fired exactly once, unless stopped, with a plausible instant.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(start)
	const (
		armers   = 8
		movers   = 4
		perArmer = 200
	)
	var callbacks, wantCallbacks atomic.Int64
	type armed struct {
		tm            clock.Timer
		lo, hi        time.Time // bounds of the fire instant
		stopped       bool
		isFunc        bool
		stopWasActive bool
	}
	results := make([][]armed, armers)

	var wg sync.WaitGroup
	for g := range armers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range perArmer {
				d := time.Duration(rng.IntN(100)) * time.Millisecond
				var a armed
				before := clk.Now()
				if i%3 == 0 {
					a.isFunc = true
					a.tm = clk.AfterFunc(d, func() {
						callbacks.Add(1)
						clk.Now()
						clk.Pending()
					})
				} else {
					a.tm = clk.NewTimer(d)
				}
				a.lo, a.hi = before.Add(d), clk.Now().Add(d)
				switch rng.IntN(4) {
				case 0:
					a.stopped = true
					a.stopWasActive = a.tm.Stop()
				case 1:
					// The idiom for re-arming: stop, drain a fire that
					// came first, then Reset.
					if !a.tm.Stop() {
						if a.isFunc {
							wantCallbacks.Add(1)
						} else {
							<-a.tm.C()
						}
					}
					if a.tm.Reset(d) {
						t.Errorf("Reset after Stop = true, want false")
					}
					a.hi = clk.Now().Add(d)
				}
				if a.isFunc && !(a.stopped && a.stopWasActive) {
					wantCallbacks.Add(1)
				}
				results[g] = append(results[g], a)
			}
		})
	}
	for g := range movers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			last := clk.Now()
			for range perArmer {
				// Only Advance: a Set computed from Now could race
				// another mover and legitimately move the clock back.
				clk.Advance(time.Duration(rng.IntN(10)) * time.Millisecond)
				clk.Next()
				now := clk.Now()
				if now.Before(last) {
					t.Errorf("Now went back from %v to %v", last, now)
				}
				last = now
			}
		})
	}
	wg.Wait()

	clk.Advance(time.Hour)
	if n := clk.Pending(); n != 0 {
		t.Fatalf("Pending = %d after advancing past every timer", n)
	}
	if got, want := callbacks.Load(), wantCallbacks.Load(); got != want {
		t.Fatalf("%d callbacks ran, want %d", got, want)
	}
	for g, rs := range results {
		for i, a := range rs {
			if a.isFunc {
				continue
			}
			if a.stopped && a.stopWasActive {
				empty(t, a.tm)
				continue
			}
			v := recv(t, a.tm)
			if v.Before(a.lo) || v.After(a.hi) {
				t.Errorf("armer %d timer %d delivered %v, want within [%v, %v]", g, i, v, a.lo, a.hi)
			}
			empty(t, a.tm)
		}
	}
}

// NewTimerAt arms at the instant itself: a clock moved between the caller's
// reading and the arming does not make the timer late, as
// NewTimer(at.Sub(earlier reading)) would be.
func TestNewTimerAtIgnoresMovesBeforeArming(t *testing.T) {
	start := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	c := clocktest.New(start)
	at := c.Now().Add(time.Second)    // the caller reads the clock...
	c.Advance(500 * time.Millisecond) // ...another goroutine moves it...
	tm := clock.NewTimerAt(c, at)     // ...and then the caller arms
	c.Set(at)
	select {
	case got := <-tm.C():
		if !got.Equal(at) {
			t.Fatalf("fired at %v, want %v", got, at)
		}
	default:
		t.Fatal("the timer did not fire at its instant")
	}
	// An instant already passed fires at once.
	past := clock.NewTimerAt(c, start)
	select {
	case <-past.C():
	default:
		t.Fatal("a timer armed for a passed instant did not fire at once")
	}
}

// plainClock hides clocktest's NewTimerAt, to exercise clock.NewTimerAt's
// fallback for clocks that are not AtClocks.
type plainClock struct{ c *clocktest.Clock }

func (p plainClock) Now() time.Time                       { return p.c.Now() }
func (p plainClock) NewTimer(d time.Duration) clock.Timer { return p.c.NewTimer(d) }

func TestNewTimerAtFallsBackToNewTimer(t *testing.T) {
	start := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	c := clocktest.New(start)
	tm := clock.NewTimerAt(plainClock{c}, start.Add(time.Second))
	c.Advance(999 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-tm.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("fired at %v", got)
	}
}
