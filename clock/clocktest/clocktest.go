package clocktest

import (
	"container/heap"
	"sync"
	"time"

	"github.com/quire-dev/quire/clock"
)

var _ clock.AtClock = (*Clock)(nil)

// Clock is a manual [clock.Clock]: its time changes only when [Clock.Advance]
// or [Clock.Set] is called. Create one with [New].
//
// It is safe for concurrent use. The fire order is exact when one goroutine
// at a time moves the clock, as sim's driver does; Advance calls from several
// goroutines at once still fire every due timer exactly once, but their
// callbacks may interleave.
type Clock struct {
	mu  sync.Mutex
	now time.Time
	// timers holds the armed timers, ordered by (at, seq).
	timers timerHeap
	// seq numbers arms of timers, so that equal instants fire in arming
	// order. A Reset re-arms, and takes a new number.
	seq uint64
	// moving counts the Advance and Set calls in progress. While it is
	// non-zero, a timer armed at an instant already reached is left for the
	// moving goroutine to fire in order rather than fired on the spot.
	moving int
	// waiters are the BlockUntil calls in progress.
	waiters []waiter
}

type waiter struct {
	n    int
	done chan struct{}
}

// New returns a Clock whose current time is start.
func New(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the clock's current time. Inside an [Clock.AfterFunc]
// callback run by Advance or Set, that is the callback's fire instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that delivers its fire instant, Now()+d, on C
// once the clock reaches it. C has a buffer of one and the clock never
// blocks on it: a fire that finds the buffer full is dropped, as with
// [time.Timer].
//
// A d <= 0 fires at the current time. Outside Advance and Set, it fires
// before NewTimer returns; during them (from an [Clock.AfterFunc] callback,
// say), it fires later in the same call, after every timer armed earlier for
// the same instant.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1), index: -1}
	c.arm(t, d)
	return t
}

// NewTimerAt returns a timer that fires once the clock reaches at, armed
// in one step (clock.AtClock): a clock moved by another goroutine while the
// caller computed at does not make it late. An at not after Now() follows
// the rule of [Clock.NewTimer] for d <= 0.
func (c *Clock) NewTimerAt(at time.Time) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1), index: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armDueLocked(t, at.Sub(c.now))
	return t
}

// AfterFunc returns a timer that calls f once the clock reaches Now()+d.
// The returned timer's C is nil.
//
// f runs on the goroutine that moves the clock (the caller of Advance or
// Set), synchronously and in fire order, with Now equal to the fire instant,
// so a simulator sees every callback in one deterministic sequence. A d <= 0
// follows the rule of [Clock.NewTimer]: outside Advance and Set, f runs on
// the caller's goroutine before AfterFunc returns. f may create, stop and
// reset timers; a timer it arms at an instant the current Advance or Set
// reaches fires in that same call.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, f: f, index: -1}
	c.arm(t, d)
	return t
}

// Advance moves the clock forward by d, firing in order every timer whose
// instant it reaches. It panics if d is negative; use Set to move the clock
// back.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("clocktest: Advance with a negative duration " + d.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(c.now.Add(d))
}

// Set moves the clock to t.
//
// Moving forward behaves like Advance: the clock steps through the fire
// instants up to t in order, firing each due timer, and ends at t.
//
// Moving backward changes only what Now returns. Nothing fires, and armed
// timers keep their absolute instants: time never runs backwards for a
// timer, so a timer fires once, when the clock next reaches its instant.
// Timers armed afterwards count from the new, earlier time.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(t)
}

// Pending returns the number of armed timers: created or reset, and neither
// fired nor stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns the earliest instant at which an armed timer fires, and false
// if no timer is armed.
func (c *Clock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// BlockUntil blocks until at least n timers are armed, so that a test can
// wait for the code under test to arm its timers before advancing the clock
// without sleeping. It does not poll: arming a timer wakes it. It blocks
// forever if the code under test never arms n timers; the test's timeout
// reports that.
func (c *Clock) BlockUntil(n int) {
	c.mu.Lock()
	if len(c.timers) >= n {
		c.mu.Unlock()
		return
	}
	w := waiter{n: n, done: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	<-w.done
}

// arm schedules t to fire d after now (at now when d <= 0), as a new arm
// for ordering, and fires it at once if it is already due and no Advance or
// Set is in progress to do so.
func (c *Clock) arm(t *timer, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armDueLocked(t, d)
}

// armDueLocked is arm with c.mu held.
func (c *Clock) armDueLocked(t *timer, d time.Duration) {
	c.armLocked(t, d)
	if d <= 0 && c.moving == 0 {
		c.moveLocked(c.now)
	}
}

func (c *Clock) armLocked(t *timer, d time.Duration) {
	t.at = c.now.Add(max(d, 0))
	t.seq = c.seq
	c.seq++
	heap.Push(&c.timers, t)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if len(c.timers) >= w.n {
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// moveLocked moves the clock to target, firing due timers in (at, seq)
// order. It is called and returns with c.mu held; it releases the lock only
// around AfterFunc callbacks. Channel sends happen under the lock, which is
// safe because they never block, and means that once Stop or Reset reports
// a timer inactive its fire is already in C.
func (c *Clock) moveLocked(target time.Time) {
	if target.Before(c.now) {
		c.now = target
		return
	}
	c.moving++
	defer func() { c.moving-- }()
	for len(c.timers) > 0 {
		t := c.timers[0]
		// Another goroutine's Advance may have carried the clock past
		// target while a callback ran unlocked; what it reached is due too.
		if t.at.After(target) && t.at.After(c.now) {
			break
		}
		heap.Pop(&c.timers)
		if t.at.After(c.now) {
			c.now = t.at
		}
		if t.f == nil {
			select {
			case t.ch <- t.at:
			default:
			}
			continue
		}
		c.callUnlocked(t.f)
	}
	if target.After(c.now) {
		c.now = target
	}
}

// callUnlocked runs f without c.mu, and takes the lock back even if f
// panics, so that the clock stays usable after a failed test callback.
func (c *Clock) callUnlocked(f func()) {
	c.mu.Unlock()
	defer c.mu.Lock()
	f()
}

// timer is a [clock.Timer] of a [Clock], fired by channel (ch) or by
// callback (f).
type timer struct {
	c     *Clock
	ch    chan time.Time
	f     func()
	at    time.Time
	seq   uint64
	index int // position in c.timers; -1 when not armed
}

func (t *timer) C() <-chan time.Time { return t.ch }

// Stop disarms t. It reports whether t was armed; false means it had
// already fired or been stopped.
func (t *timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&c.timers, t.index)
	return true
}

// Reset re-arms t to fire d after the clock's current time, ordered after
// every timer already armed for the same instant. It reports whether t was
// armed before the call. It does not drain C.
func (t *timer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	active := t.index >= 0
	if active {
		heap.Remove(&c.timers, t.index)
	}
	c.armDueLocked(t, d)
	return active
}

// timerHeap is a min-heap of armed timers by (at, seq).
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}
