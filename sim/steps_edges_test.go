package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// Events scheduled for one instant run in the order they were scheduled
// (World.At), whatever order the others were scheduled in.
func TestAtSameInstantRunsInSchedulingOrder(t *testing.T) {
	w := sim.New(1, sim.WithT(t))
	var ran []string
	note := func(w *sim.World) { ran = append(ran, strings.TrimPrefix(w.Trace()[len(w.Trace())-1].What, "event ")) }
	w.At(2*time.Minute, "later", note)
	for _, name := range []string{"first", "second", "third", "fourth"} {
		w.At(time.Minute, name, note)
	}
	w.At(30*time.Second, "earlier", note)
	w.Run()
	if got, want := strings.Join(ran, ","), "earlier,first,second,third,fourth,later"; got != want {
		t.Fatalf("events ran as %s, want %s", got, want)
	}
}

// An event scheduled inside an advance runs at its own instant, not at
// the end of the advance, and the clock goes on to the target after it.
func TestAdvanceStopsAtAnEvent(t *testing.T) {
	w := sim.New(1, sim.WithT(t))
	var at time.Duration
	w.At(30*time.Second, "half", func(w *sim.World) { at = w.Now().Sub(sim.T0) })
	w.Advance(time.Hour)
	if at != 30*time.Second {
		t.Fatalf("the event ran at T0+%v, want T0+30s", at)
	}
	if got := w.Now().Sub(sim.T0); got != time.Hour {
		t.Fatalf("the advance ended at T0+%v, want T0+1h", got)
	}
}

// Each parked work ends at its own instant however long the advance
// that passes it, the earliest first: the clock stops at the end of
// every parked work (World.Take, World.Advance).
func TestAdvanceStopsAtTheEndOfEachParkedWork(t *testing.T) {
	w := sim.New(1, sim.WithT(t))
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		long := make(chan error, 1)
		go func() { long <- w.Take(ctx, "long", 20*time.Second, sim.Cooperate) }()
		if err := w.Take(ctx, "short", 10*time.Second, sim.Cooperate); err != nil {
			return err
		}
		return <-long
	})
	id := w.Enqueue("a", msg{N: 1})
	w.Advance(time.Minute)
	if j := w.Job(id); j.Status != api.JobCompleted {
		t.Fatalf("job %+v, want completed", j)
	}
	ends := map[string]time.Duration{}
	for _, wk := range w.Works() {
		ends[wk.Key] = wk.End.Sub(wk.Start)
	}
	if ends["short"] != 10*time.Second || ends["long"] != 20*time.Second || len(ends) != 2 {
		t.Fatalf("works took %v, want short 10s and long 20s", ends)
	}
}

// Ignore runs the work to the end of its duration whatever its context
// says, even a context that had ended before the call (DL-26: a handler
// that never checks it); Cooperate returns at once with the cause.
func TestTakeIgnoreRunsToItsEndUnderAnEndedContext(t *testing.T) {
	w := sim.New(1, sim.WithT(t))
	cause := errors.New("gone")
	var ignored, cooperated error
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		ended, cancel := context.WithCancelCause(ctx)
		cancel(cause)
		cooperated = w.Take(ended, "cooperate", 10*time.Second, sim.Cooperate)
		ignored = w.Take(ended, "ignore", 10*time.Second, sim.Ignore)
		return nil
	})
	w.Enqueue("a", msg{N: 1})
	w.Advance(time.Minute)
	if !errors.Is(cooperated, cause) {
		t.Fatalf("Cooperate under an ended context returned %v, want its cause", cooperated)
	}
	if ignored != nil {
		t.Fatalf("Ignore under an ended context returned %v, want nil at the end of its duration", ignored)
	}
	works := w.Works()
	if len(works) != 2 {
		t.Fatalf("works %+v, want two", works)
	}
	if c := works[0]; c.Key != "cooperate" || !c.Cancelled || c.End != c.Start {
		t.Fatalf("the cooperating work %+v, want cancelled at its start", c)
	}
	if i := works[1]; i.Key != "ignore" || i.Cancelled || i.End.Sub(i.Start) != 10*time.Second {
		t.Fatalf("the ignoring work %+v, want its 10s run to the end", i)
	}
}

// A world that fails while work is parked ends that work at Finish as a
// process exit would: it is recorded as killed at the instant of the
// exit, and the handler never goes on past its Take.
func TestFinishOfAFailedWorldKillsParkedWork(t *testing.T) {
	w := sim.New(1)
	var returned bool
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		err := w.Take(ctx, "forever", time.Hour, sim.Ignore)
		returned = true
		return err
	})
	w.Enqueue("a", msg{N: 1})
	w.Advance(time.Second)
	w.Advance(-time.Second) // fails the world with the work parked
	if err := w.Finish(); !errors.Is(err, sim.ErrMisuse) {
		t.Fatalf("Finish = %v, want the negative advance's misuse", err)
	}
	works := w.Works()
	if len(works) != 1 || works[0].Key != "forever" || !works[0].Killed || works[0].End.Sub(sim.T0) != time.Second {
		t.Fatalf("works %+v, want the parked work killed at T0+1s", works)
	}
	if returned {
		t.Fatal("the handler went on past the Take of its killed work")
	}
}
