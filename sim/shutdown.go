package sim

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/shutdown"
)

// shutdownRun is a shutdown in progress: Engine.Shutdown runs on a
// goroutine of its own while the world moves the clock.
type shutdownRun struct {
	eng  *api.Engine
	done chan error
}

// ShutdownResult is how the last shutdown of a world ended: the error
// Engine.Shutdown returned and the report it published.
type ShutdownResult struct {
	Err    error
	Report shutdown.Report
}

// LastShutdown returns the result of the world's last finished shutdown,
// or nil if none finished yet.
func (w *World) LastShutdown() *ShutdownResult {
	if w.last == nil {
		return nil
	}
	r := *w.last
	return &r
}

// ShuttingDown reports whether a shutdown is in progress.
func (w *World) ShuttingDown() bool { return w.shut != nil }

// kill abandons the current instance as a crash would: its parked work
// ends without returning and the engine is closed with an ended context
// (errors ignored). A shutdown in progress dies with it.
func (w *World) kill() {
	// The engine goes first: once it is closed it launches nothing more,
	// so no handler of it can park after its parked work has ended.
	dead, cancel := context.WithCancel(w.ctx)
	cancel()
	w.eng.Close(dead)
	w.act.kill(w.epoch, w.clk.Now())
	w.eng = nil
	w.shut = nil
}

// BeginShutdown initiates a graceful shutdown (trigger api) at the current
// instant and returns once it is initiated (SD-3, SD-12): admission is
// closed and the root installed. The shutdown then runs while later steps
// move the clock ([World.Advance], [World.Force]); the first quiescent
// point after it is over ends the instance, checks the report (see
// [World.LastShutdown]) and audits the journal it wrote; the next step
// after that reopens the engine.
func (w *World) BeginShutdown() {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("BeginShutdown") {
		return
	}
	w.step("shutdown begin", func() {
		if w.shut != nil {
			w.misuse("BeginShutdown: a shutdown is already in progress")
			return
		}
		w.beginShutdown()
	})
}

func (w *World) beginShutdown() {
	eng := w.eng
	run := &shutdownRun{eng: eng, done: make(chan error, 1)}
	go func() { run.done <- eng.Shutdown(context.Background()) }()
	<-eng.ShutdownStarted()
	w.shut = run
}

// Force requests force for the shutdown in progress (SD-22): running
// attempts get ReasonForcedShutdown and every remaining action takes its
// force path.
func (w *World) Force() {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Force") {
		return
	}
	w.step("shutdown force", func() {
		if w.shut == nil {
			w.misuse("Force: no shutdown in progress")
			return
		}
		if err := w.shut.eng.Force(); err != nil {
			w.fail("force: %w", err)
		}
	})
}

// ForceShutdown forces a shutdown and lets it finish: the one in progress
// (graceful, then force), or a new one initiated and forced at the same
// instant (force directly: initiation and force are two steps, so the
// force lands where the initiation's consequences have settled; a
// shutdown with nothing to wait for is over before it). It returns the
// shutdown's error; a classification such as [shutdown.Incomplete] is an
// outcome, not a failure of the world. If the world fails before the
// shutdown is over, or does not run it (after [World.Finish], from a
// handler), it returns the world's failure ([World.Err]).
func (w *World) ForceShutdown() error {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("ForceShutdown") {
		return w.notRun("ForceShutdown")
	}
	if w.shut == nil {
		w.step("shutdown begin", w.beginShutdown)
	}
	if w.shut != nil {
		w.step("shutdown force", func() {
			if err := w.shut.eng.Force(); err != nil {
				w.fail("force: %w", err)
			}
		})
	}
	w.awaitShutdown()
	return w.shutdownErr()
}

// Shutdown shuts the engine down gracefully and lets the shutdown finish,
// moving the clock while it waits for parked work. It returns the
// shutdown's error; an error other than a [*shutdown.Error]
// classification (a fail-stop, say) fails the world. The next step
// reopens the engine. If the world fails before the shutdown is over, or
// does not run it (after [World.Finish], from a handler), Shutdown
// returns the world's failure ([World.Err]).
func (w *World) Shutdown() error {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Shutdown") {
		return w.notRun("Shutdown")
	}
	if w.shut == nil {
		w.step("shutdown", w.beginShutdown)
	}
	w.awaitShutdown()
	err := w.shutdownErr()
	if w.Failed() {
		return err
	}
	var se *shutdown.Error
	if err != nil && !errors.As(err, &se) {
		w.fail("shutdown: %w", err)
	}
	return err
}

// Restart shuts the engine down gracefully and opens it again; a shutdown
// that is not a success fails the world.
func (w *World) Restart() {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Restart") {
		return
	}
	if err := w.Shutdown(); err != nil {
		w.fail("restart: shutdown: %w", err)
	}
	w.step("restart", func() {})
}

// shutdownErr is what Shutdown and ForceShutdown return: the world's
// failure, if any, else the last shutdown's error.
func (w *World) shutdownErr() error {
	if w.Failed() {
		return w.Err()
	}
	if w.last == nil {
		return nil
	}
	return w.last.Err
}

// awaitShutdown moves the clock, instant by instant, until the shutdown in
// progress is over.
func (w *World) awaitShutdown() {
	for w.shut != nil && !w.Failed() {
		now := w.clk.Now()
		next, ok := w.clk.Next()
		if t, ok2 := w.act.next(now); ok2 && (!ok || t.Before(next)) {
			next, ok = t, true
		}
		if !ok {
			w.fail("shutdown stuck at %v: nothing left to fire", now.Sub(t0))
			return
		}
		if !next.After(now) {
			w.step("shutdown wait", func() {})
			continue
		}
		w.AdvanceTo(next)
	}
}

// endShutdown ends the instance whose shutdown returned err: it checks
// that the engine gives the same result and report again (SD-21, SD-26),
// closes it, ends its parked work (the process exits), audits the journal
// it wrote, every record of which is now acknowledged, and checks that the
// journaled report is the one the engine returned (SD-33).
func (w *World) endShutdown(err error) {
	eng := w.shut.eng
	w.shut = nil
	rep := eng.ShutdownReport()
	if rep == nil {
		w.violation("SD-26: shutdown returned (%v) without a published report", err)
		return
	}
	again := eng.Shutdown(w.ctx)
	if fmt.Sprint(again) != fmt.Sprint(err) {
		w.violation("SD-21: a second Shutdown returned %v, the first %v", again, err)
		return
	}
	if rep2 := eng.ShutdownReport(); !reflect.DeepEqual(rep, rep2) {
		w.violation("SD-26: the published report changed: %+v, then %+v", *rep, *rep2)
		return
	}
	eng.Close(w.ctx)
	if eng == w.eng {
		w.eng = nil
		w.stopped = true
	}
	w.act.kill(w.epoch, w.clk.Now())
	w.last = &ShutdownResult{Err: err, Report: *rep}
	w.orc.stopped()
	if !w.orc.audit(w.fs, w.clk.Now()) {
		w.violation("after the shutdown: %s", w.orc.first())
		return
	}
	if !w.orc.checkReport(rep) {
		w.violation("after the shutdown: %s", w.orc.first())
	}
}
