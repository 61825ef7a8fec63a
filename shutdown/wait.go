package shutdown

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
)

// Causes of the contexts the coordinator ends, for context.Cause.
var (
	errGracefulEnded = errors.New("shutdown: graceful path ended (G or force)")
	errForceDeadline = errors.New("shutdown: force deadline passed")
	errShareEnded    = errors.New("shutdown: the call's share of the budget ended")
	errAppendTimeout = errors.New("shutdown: SettlementTimeout passed")
	errPanicked      = errors.New("shutdown: call panicked")
)

// call is one function running on a goroutine of its own, so that the
// coordinator can watch the clock, force and root changes meanwhile.
type call struct {
	done chan struct{}
	// The fields below are written before done is closed.
	err      error
	panicked bool
	// panicText is the recovered panic value as text, for a Diagnostic
	// only: it never reaches the report (SD-28).
	panicText string
	// at is the clock instant observed right after the function returned
	// or panicked. Outcomes are decided by comparing it with the path's
	// deadline, not by the order in which the coordinator observes events,
	// so that a late observation never turns a timely return into a
	// timeout, nor the reverse (DL-1: expired when now >= deadline).
	at time.Time
}

// start runs fn(ctx) on a new goroutine. A panic is recovered and recorded:
// error and panic text never reach the report (SD-28).
func (c *Coordinator) start(ctx context.Context, fn func(context.Context) error) *call {
	cl := &call{done: make(chan struct{})}
	go func() {
		defer close(cl.done)
		defer func() {
			if p := recover(); p != nil {
				cl.panicked = true
				cl.panicText = fmt.Sprint(p)
			}
			cl.at = c.clk.Now()
		}()
		cl.err = fn(ctx)
	}()
	return cl
}

// outcome returns the outcome of a returned call.
func (cl *call) outcome() Outcome {
	switch {
	case cl.panicked:
		return OutcomePanicked
	case cl.err != nil:
		return OutcomeFailed
	}
	return OutcomeCompleted
}

// returned reports whether cl has returned, without blocking.
func (cl *call) returned() bool {
	select {
	case <-cl.done:
		return true
	default:
		return false
	}
}

// await blocks until done is closed or the clock reaches end(v), where v is
// the current view. end is evaluated again whenever the root or the force
// state changes, so an install that shortens the root re-arms the same wait
// (SD-5) and force ends a graceful wait at once. It reports whether done
// was closed; a done closed by the time the deadline is observed counts.
func (c *Coordinator) await(done <-chan struct{}, end func(view) time.Time) bool {
	return c.wait(done, end, false)
}

// awaitCall is await for a call of a phase's action (a close, a join):
// force requested before or while it runs is journaled as soon as the
// coordinator sees it, before the call's path switches (SD-22, SD-10:
// "appends shutdown_force_requested and switches the current and
// remaining actions to their force paths"), not at the phase's next
// record, which may come as late as Hr. Waits for the coordinator's own
// appends use await: a record appended while another is in flight could
// overtake it.
func (c *Coordinator) awaitCall(done <-chan struct{}, end func(view) time.Time) bool {
	return c.wait(done, end, true)
}

func (c *Coordinator) wait(done <-chan struct{}, end func(view) time.Time, noteForce bool) bool {
	for {
		if noteForce {
			c.noteForce()
		}
		v := c.view()
		target := end(v)
		now := c.clk.Now()
		if deadlines.Expired(target, now) {
			select {
			case <-done:
				return true
			default:
				return false
			}
		}
		// Armed at the instant itself: a clock moved between the reading
		// above and the arming must not leave the timer armed late.
		t := clock.NewTimerAt(c.clk, target)
		select {
		case <-done:
			t.Stop()
			return true
		case <-t.C():
		case <-v.changed:
			t.Stop()
		}
	}
}

// bounded runs fn with a context that ends at end (SettlementTimeout
// passed) and joins it: fn must return promptly once its context ends. It
// returns fn's error, or errPanicked.
func (c *Coordinator) bounded(end time.Time, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cl := c.start(ctx, fn)
	if !c.await(cl.done, func(view) time.Time { return end }) {
		cancel(errAppendTimeout)
		<-cl.done
	}
	if cl.panicked {
		return errPanicked
	}
	return cl.err
}

// protect runs the act f, reporting false if it panicked.
func protect(f func()) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	f()
	return true
}

// callResult is what one call of an action did.
type callResult struct {
	started   bool
	returned  bool
	err       error
	panicked  bool
	panicText string
	// abandoned is true for the call left running when the action gave up
	// on it (actionRun.abandoned).
	abandoned bool
}

func (r *callResult) set(cl *call) {
	r.returned = true
	r.err = cl.err
	r.panicked = cl.panicked
	r.panicText = cl.panicText
}

// ok reports whether the call returned without error.
func (r callResult) ok() bool { return r.returned && r.err == nil && !r.panicked }

// actionRun is the result of [Coordinator.runAction].
type actionRun struct {
	graceful Outcome
	forced   Outcome
	calls    []callResult
	// abandoned is the call left running at the force deadline, if the
	// action does not join its calls.
	abandoned *call
}

// runAction runs fns in order as the one action whose turn comes now, with
// a graceful path until G and a force path after it (SD-6, SD-7):
//
//   - If G has passed or force was requested when its turn comes, its
//     graceful outcome is TimedOut (CancelledByForce if force came before
//     G) and it starts on its force path, whose deadline is
//     ForceDeadline(now) = min(now + reserve', Hr).
//   - A graceful path cut off while a call runs ends at that instant e, and
//     the same call goes on under the force deadline ForceDeadline(e): a
//     call is never started twice.
//   - The calls share one context, which ends at the force deadline. Then
//     a call still running is joined if join is set (quire's own code,
//     which returns once its context ends), or abandoned otherwise (user
//     code, which may never return, SD-37), and the action ends TimedOut
//     without starting the calls after it. A call whose turn comes after
//     the force deadline is not started (SD-4).
//
// With shares (phase 5), each call is also bounded by its fair share of
// the root time left when its turn comes ([shares]): the share is the
// call's own absolute cutoff (SD-6), which ends its graceful path if it
// comes before G and caps its force deadline. A call still running when
// its share ends is cut off like one at its force deadline: both its
// paths are TimedOut. shares is nil outside phase 5.
//
// A call that returns with an error or a panic does not stop the ones after
// it. Each path's outcome is the worst of its calls'.
func (c *Coordinator) runAction(fns []func(context.Context) error, join bool, sh *shares) actionRun {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	res := actionRun{graceful: OutcomeCompleted, forced: OutcomeNotAttempted, calls: make([]callResult, len(fns))}
	started := 0
	defer func() { sh.skip(len(fns) - started) }()
	begin := c.clk.Now()
	forcing := false
	var e time.Time
	enterForce := func(graceful Outcome, at time.Time) {
		forcing = true
		e = deadlines.Latest(begin, at)
		res.graceful = worse(res.graceful, graceful)
		res.forced = OutcomeCompleted
	}
	if v := c.view(); deadlines.Expired(v.gracefulEnd(), begin) {
		enterForce(v.interruption(), begin)
	}
	for i, fn := range fns {
		share := sh.peek(c.clk.Now())
		forceEnd := func(v view) time.Time { return share.cap(v, v.root.ForceDeadline(e)) }
		if forcing && deadlines.Expired(forceEnd(c.view()), c.clk.Now()) {
			res.forced = OutcomeTimedOut
			return res
		}
		cl := c.start(ctx, fn)
		sh.skip(1)
		started++
		r := &res.calls[i]
		r.started = true
		if !forcing {
			gracefulEnd := func(v view) time.Time { return share.cap(v, v.gracefulEnd()) }
			returned := c.awaitCall(cl.done, gracefulEnd)
			v := c.view()
			if returned && cl.at.Before(gracefulEnd(v)) {
				r.set(cl)
				res.graceful = worse(res.graceful, cl.outcome())
				continue
			}
			if share.endsBy(v, v.gracefulEnd()) {
				enterForce(OutcomeTimedOut, share.end(v))
			} else {
				enterForce(v.interruption(), v.gracefulEnd())
			}
		}
		returned := c.awaitCall(cl.done, forceEnd)
		if !returned {
			cause := errForceDeadline
			if share.endsBy(c.view(), c.view().root.ForceDeadline(e)) {
				cause = errShareEnded
			}
			cancel(cause)
			if join {
				<-cl.done
				returned = true
			}
		}
		if !returned {
			res.abandoned = cl
			r.abandoned = true
			res.forced = OutcomeTimedOut
			return res
		}
		r.set(cl)
		if !cl.at.Before(forceEnd(c.view())) {
			res.forced = OutcomeTimedOut
			return res
		}
		res.forced = worse(res.forced, cl.outcome())
	}
	return res
}

// shares deals out phase 5's time (SD-9, SD-16): each call of phase 5 (an
// owned resource's close, the signal monitor's stop, telemetry's flush and
// close) gets, when its turn comes at now, the fair share
// now + (Hr − now)/k of the root time left, where k counts the calls of
// phase 5 not yet run, this one included. This is DL-33's rule for
// termination hooks applied to the root: one close that hangs cannot take
// the time of the ones after it, and no share ever reaches past Hr. The
// zero value has no calls left; a nil *shares gives no share.
type shares struct {
	left int
}

// share is one call's share: it ends at start + (Hr − start)/k, evaluated
// against the root in effect, so a root installed later shortens it
// (SD-5). The zero share has no end.
type share struct {
	start time.Time
	k     int
}

// peek returns the share of the call whose turn comes at now; the caller
// counts it with skip(1) once the call starts.
func (s *shares) peek(now time.Time) share {
	if s == nil {
		return share{}
	}
	return share{start: now, k: max(s.left, 1)}
}

// skip counts n calls as no longer to run: started, withheld or cut off,
// so that the calls after them get their time.
func (s *shares) skip(n int) {
	if s != nil {
		s.left = max(s.left-n, 0)
	}
}

// end returns the end of a share that has one, under v's root.
func (sh share) end(v view) time.Time {
	rest := v.root.Hr().Sub(sh.start)
	if rest < 0 {
		rest = 0
	}
	return sh.start.Add(rest / time.Duration(sh.k))
}

// cap returns min(d, end) for a share, d otherwise.
func (sh share) cap(v view, d time.Time) time.Time {
	if sh.k == 0 {
		return d
	}
	return deadlines.Earliest(d, sh.end(v))
}

// endsBy reports whether the share ends no later than d.
func (sh share) endsBy(v view, d time.Time) bool {
	return sh.k != 0 && !sh.end(v).After(d)
}
