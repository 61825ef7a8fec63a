package sim

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
)

// Enqueue enqueues a job and returns its id. An acknowledged enqueue is
// recorded by the oracle: it must survive every later crash. An enqueue
// the engine refuses (an unknown handler, a shutdown in progress, an
// invalid option) fails the whole world; a scenario that expects a
// refusal makes the call through [World.Do], which returns the error.
func (w *World) Enqueue(handler string, payload any, opts ...api.JobOption) string {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Enqueue") {
		return ""
	}
	var id string
	w.step(fmt.Sprintf("enqueue %s", handler), func() {
		var err error
		id, err = w.eng.Enqueue(w.ctx, handler, payload, opts...)
		if err != nil {
			w.fail("enqueue %s: %w", handler, err)
			return
		}
		w.orc.ackJob(id)
	})
	return id
}

// Dispatch starts a workflow and returns its id; the oracle records the
// acknowledged dispatch. A dispatch the engine refuses fails the whole
// world, as [World.Enqueue]'s does; expect a refusal through [World.Do].
func (w *World) Dispatch(name string, state api.State, opts ...api.DispatchOption) string {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Dispatch") {
		return ""
	}
	var id string
	w.step(fmt.Sprintf("dispatch %s", name), func() {
		var err error
		id, err = w.eng.Dispatch(w.ctx, name, state, opts...)
		if err != nil {
			w.fail("dispatch %s: %w", name, err)
			return
		}
		w.orc.ackWorkflow(id)
	})
	return id
}

// Signal sends a signal to a workflow and returns the engine's answer
// ([api.Engine.Signal], WF-19): the signal is stored whatever the
// workflow's status, so one sent before its wait is reached satisfies it
// later; an unknown, completed or cancelled workflow refuses it. A refusal
// is not a failure of the world. A signal the world does not send (after
// [World.Finish], once the world has failed, from a handler) returns the
// world's failure, as [World.Do] does.
func (w *World) Signal(id, name string, payload api.State) error {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Signal") {
		return w.notRun("Signal")
	}
	var err error
	ran := false
	w.step(fmt.Sprintf("signal %s %s", id, name), func() {
		ran = true
		err = w.eng.Signal(w.ctx, id, name, payload)
	})
	if !ran {
		return w.notRun("Signal")
	}
	return err
}

// Do runs f against the engine as one step, for API calls the world has no
// method for (cancel, pause, retry), or for calls the scenario expects the
// engine to refuse: f's error is returned, not a failure of the world.
// what names the step in the trace.
//
// When the world does not run f (after [World.Finish], once the world has
// failed, or called from a handler), Do returns the world's failure
// ([World.Err]), which says why, never nil. A nil f fails the world, and
// so does an f that shuts the engine down or closes it (Engine.Shutdown,
// Close, Run), with [ErrMisuse], which Do then returns: shut
// down through the world's steps ([World.Shutdown], [World.ForceShutdown],
// [World.BeginShutdown], [World.Restart]), which follow the shutdown and
// check its report. f must not block on what only a later step could
// bring (Engine.Run, which returns only at a shutdown, or a call that
// waits for work parked in [World.Take]): the clock does not move while f
// runs. One that is still running after 60 s of real time fails the
// world (a watchdog, naming the Do), and its ctx is cancelled, so that a
// call that honours ctx returns and Do returns the failure.
func (w *World) Do(what string, f func(ctx context.Context, e *api.Engine) error) error {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Do") {
		return w.notRun("Do")
	}
	if f == nil {
		w.misuse("Do(%q, nil): the function to run is nil", what)
		return w.notRun("Do")
	}
	var err error
	ran, closed := false, false
	w.step(what, func() {
		ran = true
		eng := w.eng
		ours := w.shut == nil && !shutdownStarted(eng)
		ctx, stop := w.watchDo(what)
		err = f(ctx, eng)
		stop()
		if closed = ours && (shutdownStarted(eng) || eng.Lifecycle() == api.Stopped); closed {
			w.misuseAt(len(w.steps), "Do(%q) shut the engine down or closed it (Engine.Shutdown, Close or Run; it returned %v): "+
				"the world runs its engine and must see every shutdown to follow and check it; use World.Shutdown, "+
				"World.ForceShutdown, World.BeginShutdown with World.Force, or World.Restart, after which the next step reopens the engine", what, err)
		}
	})
	if !ran || closed {
		return w.notRun("Do")
	}
	return err
}

// doWatchdog bounds, in real time, how long the function of one
// [World.Do] may run; a variable so that a test can shorten it.
var doWatchdog = idleTimeout

// watchDo returns the context for the function of the Do step what, and
// the stop to call when it returns. A function still running after
// doWatchdog of real time waits for something no step can bring while it
// runs (the clock does not move): the watchdog fails the world, naming
// the step and listing the goroutines that are not waiting, and cancels
// the context, so that a call that honours it (Engine.Run, a Shutdown or
// Signal waiting for the engine) returns and the step reports the
// failure instead of hanging until go test's timeout.
func (w *World) watchDo(what string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	n := len(w.steps)
	go func() {
		t := time.NewTimer(doWatchdog)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
		buf := make([]byte, 64<<10)
		running := busy(&buf)
		if running == "" {
			running = "none: every goroutine of the process waits for another, the function's included"
		}
		w.failAt(n, "watchdog: the function of Do(%q) has not returned after %v of real time: it waits for something "+
			"no step can bring while it runs, since the clock does not move (Engine.Run, which returns only at a shutdown, "+
			"or a call that waits for work parked in World.Take); its context is cancelled now. The goroutines not waiting:\n%s",
			what, doWatchdog, running)
		cancel()
	}()
	return ctx, func() {
		close(done)
		cancel()
	}
}

// shutdownStarted reports whether a shutdown of e was initiated.
func shutdownStarted(e *api.Engine) bool {
	select {
	case <-e.ShutdownStarted():
		return true
	default:
		return false
	}
}

// notRun is what a step that returns an error returns when it did not
// run: the world's failure, which says why (with [WithT] the scenario's
// goroutine has already ended in most such cases).
func (w *World) notRun(op string) error {
	if err := w.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s did not run", ErrMisuse, op) // not reached: a step runs unless the world failed
}

// Job returns a job's status; a job the engine no longer knows fails the
// world.
func (w *World) Job(id string) api.Job {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Job") {
		return api.Job{}
	}
	w.ensureOpen()
	if w.Failed() {
		return api.Job{}
	}
	j, err := w.eng.Status(w.ctx, id)
	if err != nil {
		w.fail("status %s: %w", id, err)
	}
	return j
}

// Workflow returns a workflow's status; a workflow the engine no longer
// knows fails the world.
func (w *World) Workflow(id string) api.WorkflowInfo {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Workflow") {
		return api.WorkflowInfo{}
	}
	w.ensureOpen()
	if w.Failed() {
		return api.WorkflowInfo{}
	}
	info, err := w.eng.Workflow(w.ctx, id)
	if err != nil {
		w.fail("workflow %s: %w", id, err)
	}
	return info
}

// At schedules f to run as a step when the clock reaches T0+offset (or at
// once, at the next Advance or Run, if that instant has passed). Events at
// the same instant run in the order they were scheduled. A nil f fails
// the world at once.
func (w *World) At(offset time.Duration, what string, f func(w *World)) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("At") {
		return
	}
	if f == nil {
		w.misuse("At(%v, %q, nil): the event's function is nil", offset, what)
		return
	}
	w.evSeq++
	heap.Push(&w.events, &event{at: t0.Add(offset), seq: w.evSeq, what: what, f: f})
}

// Run advances the clock through every scheduled event, in (instant,
// scheduling order) order, and returns when none is left.
func (w *World) Run() {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Run") {
		return
	}
	for w.events.Len() > 0 && !w.Failed() {
		w.AdvanceTo(w.events[0].at)
	}
}

// Advance moves the clock forward by d, stopping at every instant at which
// an engine timer, the end of a parked work ([World.Take]) or a scheduled
// event is due, so that each fires at its own instant; the engine is
// quiescent and checked at each stop. A negative d fails the world, and
// so does an advance that needs more stops than [AdvanceStopsMax]: it
// never jumps.
func (w *World) Advance(d time.Duration) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Advance") {
		return
	}
	if d < 0 {
		w.misuse("advance by %v: negative", d)
		return
	}
	w.AdvanceTo(w.clk.Now().Add(d))
}

// AdvanceTo is [World.Advance] to an instant. A target before the current
// instant does nothing.
func (w *World) AdvanceTo(target time.Time) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("AdvanceTo") {
		return
	}
	w.ensureOpen()
	for stops := 0; !w.Failed(); stops++ {
		now := w.clk.Now()
		if !now.Before(target) && (w.events.Len() == 0 || w.events[0].at.After(now)) {
			return
		}
		if stops >= w.cfg.stopsMax {
			w.fail("advance to T0+%v: still at T0+%v after %d stops (the AdvanceStopsMax bound): "+
				"the clock stops at every timer, so it never jumps to the target; raise the bound with sim.AdvanceStopsMax, "+
				"or Jump if firing timers late is what the test means", target.Sub(t0), now.Sub(t0), stops)
			return
		}
		next := target
		if t, ok := w.clk.Next(); ok && t.Before(next) {
			next = t
		}
		if t, ok := w.act.next(now); ok && t.Before(next) {
			next = t
		}
		if w.events.Len() > 0 && w.events[0].at.Before(next) {
			next = w.events[0].at
		}
		if next.After(now) {
			w.step(fmt.Sprintf("clock %s", next.Sub(t0)), func() { w.clk.Advance(next.Sub(now)) })
		}
		for !w.Failed() && w.events.Len() > 0 && !w.events[0].at.After(w.clk.Now()) {
			ev := heap.Pop(&w.events).(*event)
			w.step("event "+ev.what, func() {})
			ev.f(w)
		}
	}
}

// Jump moves the clock forward by d in one move, as a clock jump does:
// every timer due fires at the new instant (late, never early). A
// negative d fails the world (use [World.JumpBack]).
func (w *World) Jump(d time.Duration) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Jump") {
		return
	}
	if d < 0 {
		w.misuse("jump by %v: negative (JumpBack sets the clock back)", d)
		return
	}
	w.step(fmt.Sprintf("jump +%s", d), func() { w.clk.Advance(d) })
}

// JumpBack sets the clock back by d. Nothing fires; the journal keeps its
// instants monotone (RL-9). A negative d fails the world (use
// [World.Jump]).
func (w *World) JumpBack(d time.Duration) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("JumpBack") {
		return
	}
	if d < 0 {
		w.misuse("jump back by %v: negative (Jump moves the clock forward)", d)
		return
	}
	w.step(fmt.Sprintf("jump -%s", d), func() { w.clk.Set(w.clk.Now().Add(-d)) })
}

// Crash kills the engine at the current (quiescent) point and reopens it
// on a crash image of the filesystem, with a share of unsynced data drawn
// from the seed: 0, 100 or 1..99 percent (see [World.CrashWith]).
//
// A crash lands only between steps, at a quiescent point: every handler
// has either returned (and its settlement is durable) or is parked in
// [World.Take]. So a crash interrupts only handlers parked in Take; a
// handler that makes a side effect and returns at once is never cut off
// between the two, and a crash never exposes its lack of idempotence. To
// test that, make the handler take time after the side effect
// (side effect, then w.Take(...)) and crash while it is parked: the
// attempt dies unsettled and runs again after the reopen (see the
// example of [World.Take]).
func (w *World) Crash() {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Crash") {
		return
	}
	pct := []int{0, 100, 1 + w.crashes.IntN(99)}[w.crashes.IntN(3)]
	w.CrashWith(pct)
}

// CrashWith is [World.Crash] with a chosen share, 0..100 percent, of the
// filesystem's unsynced data kept in the crash image (any other share
// fails the world).
//
// At a quiescent point the journal has nothing unsynced: it commits
// every group with fsync before it acknowledges it, and a quiescent point
// is one where every record decided is acknowledged. So the images of
// every share hold the same records, and today the share changes nothing
// the engine reopens on (runs with CrashWith(0), (37) and (100) give the
// same journal). It only decides what happens to data written and not
// synced, should the engine or Pebble ever leave some at a quiescent
// point; a "maybe" record would come from there.
func (w *World) CrashWith(pct int) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("CrashWith") {
		return
	}
	if pct < 0 || pct > 100 {
		w.misuse("crash with %d%% of the unsynced data kept: the share must be in 0..100", pct)
		return
	}
	w.step(fmt.Sprintf("crash %d%%", pct), func() {
		w.crashN++
		img := w.crashImage(pct)
		w.kill()
		w.reopenOn(img)
		w.orc.crashed()
		w.open()
	})
}

// Finish ends the scenario: it runs the remaining events, checks the
// final state once more, shuts the engine down (moving the clock while the
// shutdown waits for parked work, see [World.Take]) and audits the journal
// it leaves. Work still parked then is ended as a process exit would end
// it, and so is the engine of a world that has failed. [WithT] worlds
// call Finish when the test ends. The engine instances a [World.DiskFault]
// fail-stopped keep their Pebble goroutines after Finish (see there).
//
// Finish may be called more than once; later calls return the world's
// first failure, or nil. Every other step and engine accessor fails the
// world once Finish has run.
func (w *World) Finish() error {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if w.done.Load() {
		return w.Err()
	}
	if s := w.cur.Load(); s != nil {
		w.enter("Finish") // a handler's call: recorded for the step to report
		return w.Err()
	}
	if w.cfg.tb != nil {
		w.failedIn = !w.failedBefore && w.testFailed()
	}
	w.Run()
	w.step("finish", func() {})
	if !w.Failed() && w.eng != nil {
		if w.shut == nil {
			w.step("shutdown begin", w.beginShutdown)
		}
		w.awaitShutdown()
	}
	w.closeEngine() // a failed world's, which no shutdown ended
	if !w.Failed() {
		if !w.orc.audit(w.fs, w.clk.Now()) {
			w.violation("final audit: %s", w.orc.first())
		}
	}
	w.done.Store(true)
	if tb := w.cfg.tb; tb != nil && !w.Failed() {
		tb.Logf("sim: seed 0x%x: %d steps, trace hash %016x, digest %x", w.seed, len(w.steps), w.trace, w.lastDig[:8])
	}
	w.raise()
	return w.Err()
}

type event struct {
	at   time.Time
	seq  uint64
	what string
	f    func(*World)
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
