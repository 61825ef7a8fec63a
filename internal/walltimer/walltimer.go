// Package walltimer provides one-shot timers on the wall clock that fire
// within tens of microseconds of their instant.
//
// The Go runtime's timers are serviced by its network poller, which on
// Linux waits in whole milliseconds (epoll_wait's timeout): an idle process
// sees a timer fire up to about 1 ms late, 0.5 ms at the median. A job
// delayed to an instant, or an attempt's deadline, would inherit that
// lateness. A Timer here lets a runtime timer cover all but the last
// [Window] before its instant, then sleeps the rest in the kernel
// (nanosleep on Linux), which wakes with microsecond precision. The final
// stretch blocks one OS thread; the Go scheduler runs other goroutines on
// the others, and no CPU is spent spinning.
//
// On systems without a precise sleep the final stretch is a runtime timer
// too, so the timer behaves as the runtime's does.
//
// The kernel sleep is real time, outside the fake clock of a
// testing/synctest bubble, which moves only once every goroutine in the
// bubble is blocked: a Timer there would sleep slice after slice while the
// bubble's time stood still. Code under synctest takes a clocktest clock.
//
// api wraps [clock.System] with it; nothing else should need it.
package walltimer

import (
	"sync"
	"time"
)

// Window is the stretch before a timer's instant that is slept in the
// kernel rather than on a runtime timer. It covers the runtime timer's
// worst lateness of about 1 ms with room to spare: a runtime timer that
// wakes later than Window before the instant leaves less to sleep, or
// none.
const Window = 2 * time.Millisecond

// slice bounds one kernel sleep of the final stretch. A timer stopped or
// re-armed during the final stretch lets its thread go within a slice: a
// runner that re-arms its one timer often would otherwise keep a thread
// asleep for each stopped timer until that timer's instant.
const slice = 250 * time.Microsecond

// testHookFineDone, when set by a test, is called as each fine sleep's
// goroutine ends, delivered or dropped.
var testHookFineDone func()

// Timer is a one-shot timer. Its methods are those of clock.Timer.
type Timer struct {
	c chan time.Time

	mu     sync.Mutex
	gen    uint64 // counts arms and stops; a wake for an older gen is dropped
	active bool
	coarse *time.Timer
}

// New returns a Timer that fires once, d from now. A d <= 0 fires as soon
// as possible.
func New(d time.Duration) *Timer { return At(time.Now().Add(d)) }

// At returns a Timer that fires once, at the wall-clock instant at (its
// monotonic reading, if it has one). An at already passed fires as soon as
// possible.
func At(at time.Time) *Timer {
	t := &Timer{c: make(chan time.Time, 1)}
	t.mu.Lock()
	t.arm(at)
	t.mu.Unlock()
	return t
}

// C returns the channel on which the fire instant is delivered. It has a
// buffer of one, so a fire never blocks.
func (t *Timer) C() <-chan time.Time { return t.c }

// Stop prevents the timer from firing. It reports whether the call stopped
// the timer (false if it had already fired or been stopped). A fire
// delivered before Stop stays in C.
func (t *Timer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stop()
}

// Reset re-arms the timer to fire d from now. It reports whether the timer
// was active before the call. Callers drain C when Reset follows a fire
// they did not receive.
func (t *Timer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.stop()
	t.arm(time.Now().Add(d))
	return was
}

func (t *Timer) stop() bool {
	was := t.active
	t.active = false
	t.gen++
	if t.coarse != nil {
		t.coarse.Stop()
		t.coarse = nil
	}
	return was
}

// arm schedules the fire at due: a runtime timer until Window before it,
// then the fine sleep on its own goroutine. Called with mu held.
func (t *Timer) arm(due time.Time) {
	t.gen++
	t.active = true
	gen := t.gen
	if coarse := time.Until(due) - Window; coarse > 0 {
		t.coarse = time.AfterFunc(coarse, func() { t.fine(gen, due) })
		return
	}
	go t.fine(gen, due)
}

// fine sleeps until due unless the timer was stopped or re-armed since gen,
// then delivers the fire.
func (t *Timer) fine(gen uint64, due time.Time) {
	if testHookFineDone != nil {
		defer testHookFineDone()
	}
	t.mu.Lock()
	live := t.gen == gen
	t.mu.Unlock()
	if !live {
		return
	}
	for {
		d := time.Until(due)
		if d <= 0 {
			break
		}
		sleep(min(d, slice))
		t.mu.Lock()
		live = t.gen == gen
		t.mu.Unlock()
		if !live {
			return
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen != gen || !t.active {
		return
	}
	t.active = false
	t.coarse = nil
	select {
	case t.c <- time.Now():
	default:
	}
}
