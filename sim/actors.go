package sim

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Mode says what work that takes simulated time ([World.Take]) does when
// its context ends before its duration has passed.
type Mode uint8

// Modes.
const (
	// Cooperate ends the work as soon as its context ends: Take returns
	// context.Cause(ctx) at the instant the engine cancelled it.
	Cooperate Mode = iota
	// Ignore runs the work to the end of its duration whatever its
	// context says, as a handler that never checks it would.
	Ignore
)

func (m Mode) String() string {
	if m == Ignore {
		return "ignore"
	}
	return "cooperate"
}

// Work is one call of [World.Take] that has ended: which work, when it
// began, when it ended on the simulated clock and whether its context
// ended it.
type Work struct {
	Key       string
	Start     time.Time
	End       time.Time
	Mode      Mode
	Cancelled bool // Cooperate work whose context ended first
	Killed    bool // the instance it ran on crashed first
}

// actor is one Take call parked until the world wakes it.
type actor struct {
	key   string
	epoch int
	start time.Time
	until time.Time
	mode  Mode
	ctx   context.Context
	wake  chan wakeKind
	// turn marks an on-deadline handler waiting for its turn to run
	// ([World.turn]), not a Take: it is no [Work].
	turn bool
}

type wakeKind uint8

const (
	wakeElapsed wakeKind = iota + 1
	wakeCancelled
	wakeKilled
)

// actors is the world's table of parked work. Handlers park in it from
// their own goroutines; only the world's goroutine wakes them, one at a
// time and only at quiescent points, so that what a handler does after
// its simulated duration happens at a reproducible instant.
type actors struct {
	mu     sync.Mutex
	epoch  int
	parked map[string]*actor
	// refused holds the Take calls refused for a key already parked:
	// they never return, and end as parked work does when their
	// instance ends.
	refused []*actor
	parks   chan struct{} // receives (without blocking) whenever work parks
	done    []Work
	used    atomic.Bool // some work was ever parked
}

func newActors() *actors {
	return &actors{parked: map[string]*actor{}, parks: make(chan struct{}, 1)}
}

// Take makes the calling handler, guard, middleware or termination hook
// "take" d of simulated time: it blocks until the world's clock has moved
// d past the instant of the call, and returns nil. With [Cooperate] it
// returns earlier, with context.Cause(ctx), once ctx ends (the engine
// cancels an attempt's context at its notification instant, a hook's at
// its fair-share deadline); with [Ignore] it runs to its end regardless,
// and the engine may abandon it meanwhile (DL-26).
//
// key names the work in the trace and orders wake-ups at one instant: it
// must be unique among works parked at the same time and derived from the
// seed, e.g. the job id and attempt ("job/attempt"), never a pointer: an
// attempt the engine abandoned (DL-26) may still be parked with [Ignore]
// when the next attempt of its job runs. A key already parked fails the
// world at the step the call ran in, and the call never returns: it
// blocks until its instance ends, then its goroutine exits as a parked
// work's does at a crash, so the handler settles with no outcome the
// world did not decide (no panic, which the engine would bury the job
// with, or which would end the test binary on a handler's own
// goroutine).
//
// The world moves its clock to the end of every parked work, so each one
// ends at its own instant; the engine is quiescent (see "Step mode" in the
// package documentation) before and after each wake-up. If the engine
// instance crashes while the work is parked, the calling goroutine exits
// (runtime.Goexit), as a killed process's would.
//
// Parking is also what lets a crash interrupt a handler: crashes land
// only at quiescent points, where every handler has returned or is
// parked here ([World.Crash]). A handler that makes its side effect and
// then takes the time the real call would take (the response of a
// payment provider, say) can be crashed between the two, and its next
// attempt shows whether the side effect is idempotent.
//
// Take is only meaningful on a goroutine the engine runs while a step is
// in progress: called while no step runs (from the scenario's goroutine,
// say), it fails the world and returns the failure, since nothing could
// ever wake it. A zero d returns nil at once and is not recorded in
// [World.Works]; a negative d fails the world at the step it ran in and
// returns the failure.
func (w *World) Take(ctx context.Context, key string, d time.Duration, mode Mode) error {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	s := w.cur.Load()
	if s == nil {
		w.misuse("Take(%q) called while no step runs: Take is for handlers, guards, middleware and hooks, which the engine runs during "+
			"a step; the scenario moves time with Advance", key)
		return w.Err()
	}
	start := w.clk.Now()
	if d < 0 {
		w.misuseAt(s.n, "Take(%q) with a negative duration %v (during step %d, %q)", key, d, s.n, s.what)
		return w.Err()
	}
	if d == 0 {
		return nil
	}
	if mode == Cooperate && ctx.Err() != nil {
		w.act.note(Work{Key: key, Start: start, End: start, Mode: mode, Cancelled: true})
		return context.Cause(ctx)
	}
	a := &actor{key: key, start: start, until: start.Add(d), mode: mode, ctx: ctx, wake: make(chan wakeKind, 1)}
	switch w.park(a, func() {
		w.misuseAt(s.n, "Take(%q) during step %d (%q): a work with this key is already parked; keys must be unique "+
			"among the works parked at one time (e.g. the job id and attempt, as an abandoned attempt may still be parked "+
			"when the next one runs); the call never returns", key, s.n, s.what)
	}) {
	case wakeCancelled:
		return context.Cause(ctx)
	case wakeKilled:
		runtime.Goexit()
	}
	return nil
}

// turn parks the calling goroutine, due at once, until the world wakes it
// at a quiescent point, one at a time in key order among the parked work.
// An on-deadline handler (WD-10) calls it before it runs (the engine's
// [api.SimDeadlineTurn] hook), and so does every attempt, in the world's
// middleware, when the engine has more than one worker. The engine starts
// such code beside whatever else the same event made runnable; parked, it
// runs only once that has settled or parked, so their records come in the
// same order on every run of a seed (RL-8). Each turn is a step of the
// trace ("turn deadline/<workflow>/<expiry>", "turn attempt/<job>/<n>"),
// not a [Work]. If the instance crashes first, the goroutine exits and the
// code never runs, as in a killed process; the next instance runs the
// obligation or the job again (WD-10, DL-44).
func (w *World) turn(ctx context.Context, key string) {
	now := w.clk.Now()
	a := &actor{key: key, start: now, until: now, mode: Ignore, ctx: ctx, wake: make(chan wakeKind, 1), turn: true}
	if w.park(a, func() {
		w.fail("%s waits for a turn twice in one instance", key)
	}) == wakeKilled {
		runtime.Goexit()
	}
}

// park adds a to the parked work, or, when its key is parked already, to
// the refused calls after calling dup, and blocks until the world wakes
// it.
func (w *World) park(a *actor, dup func()) wakeKind {
	w.act.used.Store(true)
	w.act.mu.Lock()
	a.epoch = w.act.epoch
	if _, ok := w.act.parked[a.key]; ok {
		w.act.refused = append(w.act.refused, a)
		w.act.mu.Unlock()
		dup()
	} else {
		w.act.parked[a.key] = a
		w.act.mu.Unlock()
	}
	select {
	case w.act.parks <- struct{}{}:
	default:
	}
	return <-a.wake
}

// Works returns every [World.Take] that has ended so far, in the order the
// world ended them.
func (w *World) Works() []Work {
	w.act.mu.Lock()
	defer w.act.mu.Unlock()
	return append([]Work(nil), w.act.done...)
}

func (t *actors) note(wk Work) {
	t.mu.Lock()
	t.done = append(t.done, wk)
	t.mu.Unlock()
}

// count returns how many works are parked.
func (t *actors) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.parked)
}

// next returns the earliest end of a parked work after now.
func (t *actors) next(now time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var at time.Time
	ok := false
	for _, a := range t.parked {
		if a.until.After(now) && (!ok || a.until.Before(at)) {
			at, ok = a.until, true
		}
	}
	return at, ok
}

// wakeOne wakes the first parked work, in key order, whose duration has
// passed at now or which cooperates and whose context has ended; it
// returns a description for the trace, or "" if none is due.
func (t *actors) wakeOne(now time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(t.parked)) {
		a := t.parked[k]
		kind := wakeKind(0)
		switch {
		case !now.Before(a.until):
			kind = wakeElapsed
		case a.mode == Cooperate && a.ctx.Err() != nil:
			kind = wakeCancelled
		default:
			continue
		}
		delete(t.parked, k)
		if a.turn {
			a.wake <- kind
			return "turn " + k
		}
		t.done = append(t.done, Work{Key: k, Start: a.start, End: now, Mode: a.mode, Cancelled: kind == wakeCancelled})
		a.wake <- kind
		if kind == wakeCancelled {
			return "cancel " + k
		}
		return "end " + k
	}
	return ""
}

// kill ends every work parked on the instance of epoch (every instance's
// if epoch < 0): its goroutine exits without returning, as a crash or a
// process exit ends it. It returns how many it ended.
func (t *actors) kill(epoch int, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, k := range slices.Sorted(maps.Keys(t.parked)) {
		a := t.parked[k]
		if epoch >= 0 && a.epoch != epoch {
			continue
		}
		delete(t.parked, k)
		if !a.turn {
			t.done = append(t.done, Work{Key: k, Start: a.start, End: now, Mode: a.mode, Killed: true})
		}
		a.wake <- wakeKilled
		n++
	}
	kept := t.refused[:0]
	for _, a := range t.refused {
		if epoch >= 0 && a.epoch != epoch {
			kept = append(kept, a)
			continue
		}
		a.wake <- wakeKilled
	}
	clear(t.refused[len(kept):])
	t.refused = kept
	return n
}

// setEpoch makes later parks belong to the instance of epoch.
func (t *actors) setEpoch(epoch int) {
	t.mu.Lock()
	t.epoch = epoch
	t.mu.Unlock()
}
