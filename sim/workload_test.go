package sim_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

type msg struct{ N int }

// mix is the workload knobs of one scenario.
type mix struct {
	steps   int
	crash   int // percent of steps that crash
	restart int // percent of steps that restart gracefully
	jump    int // percent of steps that jump the clock (forward or back)
}

// register installs the standard workload's handler and workflow on every
// engine instance of w: a flaky job handler and a workflow with a step, a
// delay, a signal wait, a flaky step and a 1 h deadline.
func register(w *sim.World) {
	w.Register(func(e *api.Engine) error {
		if err := api.Handle(e, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
			if w.Fails(d.JobID(), d.Attempt(), 30) {
				return api.Retryable("FLAKY", errors.New("try again"))
			}
			return nil
		}, api.MaxAttempts(3), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
			return err
		}
		step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			if w.Fails(d.JobID(), d.Attempt(), 25) {
				return nil, api.Retryable("FLAKY", errors.New("try again"))
			}
			return api.State{"n": d.Attempt()}, nil
		}
		return e.Register(api.NewWorkflow("flow").
			Then("a", step).
			Delay(5*time.Minute).
			WaitForSignal("go").
			Then("b", step).
			MustCompleteWithin(time.Hour))
	})
}

// workload drives w through m.steps seeded steps and lets the work settle.
func workload(m mix) func(w *sim.World) {
	return func(w *sim.World) {
		register(w)
		workloadSteps(w, m)
		settle(w)
	}
}

// flows holds the workflows each world dispatched, for settle.
var flows = map[*sim.World][]string{}

// workloadSteps runs m.steps seeded steps.
func workloadSteps(w *sim.World, m mix) {
	{
		r := w.Rand()
		wfs := flows[w]
		n := 0
		defer func() { flows[w] = wfs }()
		for i := 0; i < m.steps && !w.Failed(); i++ {
			p := r.IntN(100)
			switch {
			case p < m.crash:
				w.Crash()
			case p < m.crash+m.restart:
				w.Restart()
			case p < m.crash+m.restart+m.jump:
				if r.IntN(4) == 0 {
					w.JumpBack(time.Duration(1+r.IntN(600)) * time.Second)
				} else {
					w.Jump(time.Duration(1 + r.Int64N(int64(48*time.Hour))))
				}
			case p < 55:
				var opts []api.JobOption
				if r.IntN(3) == 0 {
					opts = append(opts, api.Delay(time.Duration(1+r.IntN(30))*time.Second))
				}
				w.Enqueue("work", msg{N: n}, opts...)
				n++
			case p < 70:
				wfs = append(wfs, w.Dispatch("flow", api.State{"i": len(wfs)}))
			case p < 80 && len(wfs) > 0:
				w.Signal(wfs[r.IntN(len(wfs))], "go", nil)
			default:
				w.Advance(time.Duration(1+r.IntN(400)) * time.Second)
			}
		}
	}
}

// settle signals every workflow, lets all work settle and checks that
// every workflow ended.
func settle(w *sim.World) {
	{
		wfs := flows[w]
		delete(flows, w)
		for _, id := range wfs {
			w.Signal(id, "go", nil)
		}
		w.Advance(2 * time.Hour)
		for _, id := range wfs {
			if info := w.Workflow(id); !w.Failed() && info.Status != api.WorkflowCompleted && info.Status != api.WorkflowFailed {
				panic(fmt.Sprintf("workflow %s still %s after the settle phase", id, info.Status))
			}
		}
	}
}
