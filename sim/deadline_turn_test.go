package sim_test

import (
	"context"
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
