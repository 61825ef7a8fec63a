package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// TestRL8_OnDeadlineHandlerRunsInATurnOfItsOwn: one clock jump makes a
// delayed job due and a workflow's deadline pass, so the engine starts the
// job's attempt and the workflow's on-deadline handler (WD-10) together,
// each on a goroutine of its own. The world runs the handler in a turn of
// its own, at the quiescent point after the attempt settled: on every run
// of a seed the job's settlement comes first, the turn is a step of the
// trace, and the traces are equal (RL-8).
func TestRL8_OnDeadlineHandlerRunsInATurnOfItsOwn(t *testing.T) {
	sim.Check(t, 5, func(w *sim.World) {
		t := w.T()
		calls := 0
		w.Register(func(e *api.Engine) error {
			if err := api.HandleDeadline(e, "late", func(ctx context.Context, s api.State) error {
				calls++ // the world's turns run one at a time
				return nil
			}); err != nil {
				return err
			}
			if err := api.Handle(e, "tick", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
				return err
			}
			return e.Register(api.NewWorkflow("slow").
				Delay(time.Hour). // running, so the check expires it (WD-5, WD-11)
				Then("s", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }).
				MustCompleteWithin(10 * time.Minute).
				OnDeadline("late"))
		})
		wf := w.Dispatch("slow", nil)
		job := w.Enqueue("tick", msg{}, api.Delay(10*time.Minute))
		w.Jump(time.Duration(11+w.Rand().IntN(40)) * time.Minute)

		succeeded, finished := -1, -1
		for i, r := range w.Records() {
			switch b := r.Body.(type) {
			case *record.AttemptSucceeded:
				if b.JobID == job {
					succeeded = i
				}
			case *record.DeadlineHandlerFinished:
				if b.WorkflowID == wf {
					finished = i
				}
			}
		}
		if succeeded < 0 || finished < 0 || calls != 1 {
			t.Fatalf("after the jump: job settled at record %d, handler finished at record %d, %d handler calls", succeeded, finished, calls)
		}
		if finished < succeeded {
			t.Fatalf("the on-deadline handler finished (record %d) before the job's attempt settled (record %d)", finished, succeeded)
		}
		turns := 0
		for _, s := range w.Trace() {
			if strings.HasPrefix(s.What, "turn deadline/"+wf+"/") {
				turns++
			}
		}
		if turns != 1 {
			t.Fatalf("%d turns of %s's on-deadline handler in the trace, want 1", turns, wf)
		}
	})
}

// TestRL8_DeterminismWithManyWorkers is T9 for an engine with four
// workers: jobs due together, whose attempts fail at random (retried with
// jittered backoff) or enqueue follow-ups (new ids), across crashes. The
// attempts one event starts run in turns of their own, so each seed, run
// three times (the last under GOMAXPROCS=1), gives equal step traces and
// final digests (RL-8).
func TestRL8_DeterminismWithManyWorkers(t *testing.T) {
	sim.Check(t, 4, func(w *sim.World) {
		w.Register(func(e *api.Engine) error {
			return api.Handle(e, "fan", func(ctx context.Context, d *api.Delivery, in msg) error {
				if w.Fails(d.JobID(), d.Attempt(), 40) {
					return api.Retryable("FLAKY", errors.New("try again"))
				}
				if in.N > 0 {
					return d.Enqueue("fan", msg{N: in.N - 1})
				}
				return nil
			}, api.MaxAttempts(3), api.Backoff(api.BackoffPolicy{Kind: api.BackoffExponential, Base: time.Second, Max: 4 * time.Second, JitterRatio: 0.5}))
		})
		for i := range 8 {
			w.Enqueue("fan", msg{N: 1 + i%3})
		}
		for range 6 {
			w.Advance(time.Duration(1+w.Rand().IntN(3)) * time.Second)
			w.Crash()
		}
		w.Advance(time.Minute)
	}, sim.EngineOptions(func(o *api.Options) { o.Workers = 4 }))
}

// TestRL8_DeterminismWithManyWorkersAndDurations is the same for the
// standard workload with simulated handler durations, clock jumps, crashes
// and shutdowns, on three workers: parked attempts overlap in simulated
// time while the code between their parks runs in turns.
func TestRL8_DeterminismWithManyWorkersAndDurations(t *testing.T) {
	sim.Check(t, 3, workload(mix{steps: 30, crash: 8, stop: 8, slow: 25, jump: 5}),
		sim.EngineOptions(func(o *api.Options) { o.Workers = 3 }))
}

// TestWorkersZeroRunsAttemptsInTurns: Workers left at zero by
// EngineOptions is the engine's default, 16 workers, so attempts wait for
// turns as with any count above one.
func TestWorkersZeroRunsAttemptsInTurns(t *testing.T) {
	w := sim.New(1, sim.WithT(t), sim.EngineOptions(func(o *api.Options) { o.Workers = 0 }))
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "tick", func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
	})
	id := w.Enqueue("tick", msg{})
	w.Advance(time.Second)
	turns := 0
	for _, s := range w.Trace() {
		if s.What == "turn attempt/"+id+"/1" {
			turns++
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if turns != 1 {
		t.Fatalf("%d turns of %s's first attempt in the trace, want 1", turns, id)
	}
}
