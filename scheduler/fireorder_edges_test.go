package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

// watchOn registers, on the loop and without waiting for the appends in
// flight, a watch on the stream of the attempt in flight, or, with
// committing set, on the stream of the batch being appended. The channel
// is closed once the loop has acted on the acknowledgement of that
// stream's next record, so a test can wait for it without waking the loop
// itself.
func watchOn(t *testing.T, r *Runner, committing bool) chan struct{} {
	t.Helper()
	w := make(chan struct{})
	var stream string
	if err := r.Do(context.Background(), func(time.Time) {
		switch {
		case committing && r.committing != nil && len(r.committing.d.Records) > 0:
			stream = r.committing.d.Records[0].Stream
		case !committing:
			for _, a := range r.attempts {
				stream = r.m.State().Jobs[a.att.Job.ID].Stream
			}
		}
		if stream != "" {
			r.Watch(stream, w)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if stream == "" {
		t.Fatal("nothing to watch")
	}
	return w
}

// waitClosed waits for w, bounded so that a broken runner fails the test
// rather than hanging it.
func waitClosed(t *testing.T, w chan struct{}, what string) {
	t.Helper()
	select {
	case <-w:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not acknowledged", what)
	}
}

// DL-24, RL-9: a result the loop first observes at or after C is fenced
// out when the execution returned at C, even though no timer woke the
// loop at C (an inert clock fires none): the deadlines due at the instant
// a result is taken come before it. T = 30 s: P = 29, C = 29.25.
func TestDL24_ResultTakenAtCWithNoTimerFiredIsFenced(t *testing.T) {
	release := make(chan struct{})
	started := make(chan *Attempt, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		started <- a
		<-release
		return Result{Output: []byte("done")}
	}, func(c *RunnerConfig) { c.Clock = inertClock{c.Clock.(*clocktest.Clock)} })
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	a := <-started
	w := watchOn(t, b.r, false)
	c := *a.c.Load() // C of a delivery timeout at P: no reason recorded yet
	b.clk.Set(c)
	close(release) // returns at C; only its result wakes the loop
	waitClosed(t, w, "the settlement")
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements, want 1", len(s))
	}
	if s[0].Kind() == record.KindAttemptSucceeded {
		t.Fatalf("DL-24: a result returned at C was kept: %+v", *record.OutcomeOf(s[0].Body))
	}
	if o := record.OutcomeOf(s[0].Body); o.Reason != "delivery_timeout" || o.Joined {
		t.Fatalf("settlement %s %+v, want the delivery timeout's, unjoined", s[0].Kind(), *o)
	}
}

// DL-33, RL-9: a termination hook that returns at its deadline is timed
// out, even when its return is the first thing the loop observes at that
// instant (an inert clock fires no timer there): the deadlines due come
// before the owner event. T = 30 s, no reason: one hook whose deadline is
// Hk = 29.75.
func TestDL33_HookReturnTakenAtItsDeadlineWithNoTimerFiredIsTimedOut(t *testing.T) {
	b, deadline, release := newHookBundle(t, func(c *RunnerConfig) { c.Clock = inertClock{c.Clock.(*clocktest.Clock)} })
	w := watchOn(t, b.r, false)
	b.clk.Set(deadline)
	close(release)
	waitClosed(t, w, "the settlement")
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements, want 1", len(s))
	}
	if o := record.OutcomeOf(s[0].Body); strings.Join(o.TerminationExits, " ") != "timed_out" {
		t.Fatalf("termination exits %v, want [timed_out] for a hook that returned at its deadline", o.TerminationExits)
	}
}

// DL-39, DL-1, RL-9: a settlement's wait ends at its cap (now >= x). An
// acknowledgement the loop first observes at the cap, with no timer fired
// there and nothing else waking the loop (the test waits on a Watch, not a
// call that would wake it), counts the settlement Unresolved: the cap due
// at the instant the acknowledgement is taken comes before it.
func TestDL39_AckTakenAtTheCapWithNoTimerFiredIsUnresolved(t *testing.T) {
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result { return Result{} }, func(c *RunnerConfig) {
		c.Clock = inertClock{c.Clock.(*clocktest.Clock)}
		c.SettlementTimeout = 5 * time.Second
	})
	b.app.mu.Lock()
	b.app.hold = true
	b.app.mu.Unlock()
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	<-b.app.held // decided at t0: the wait ends at t0 + 5 s
	w := watchOn(t, b.r, true)
	b.clk.Set(t0.Add(5 * time.Second))
	close(b.app.release) // only the acknowledgement wakes the loop
	waitClosed(t, w, "the settlement")
	if q := b.r.Quarantine(); q.Unresolved != 1 || len(b.app.settlements()) != 1 {
		t.Fatalf("%+v, %d settlements; want the one settlement Unresolved", q, len(b.app.settlements()))
	}
}
