package sim_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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
	slow    int // percent of steps that enqueue a job whose handler takes time
	stop    int // percent of steps that shut down: graceful, graceful then force, or force
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

// registerSlow installs handler "slow": each attempt takes a simulated
// duration of 0..8 s, drawn from the seed, job and attempt, against a 4 s
// DeliveryTimeout (P = 3 s, so some attempts time out), and cooperates
// with its cancellation or ignores it, half the time each (DL-20..DL-26).
// Workflow "slowflow" has one such step with two attempts, so that crashes
// lose step attempts and exhaust some (DL-44, WF-20).
func registerSlow(w *sim.World) {
	w.Register(func(e *api.Engine) error {
		slow := func(ctx context.Context, d *api.Delivery) error {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%s/%d", w.Seed(), d.JobID(), d.Attempt())
			took := time.Duration(h.Sum64()%8000) * time.Millisecond
			mode := sim.Cooperate
			if w.Fails(d.JobID(), d.Attempt(), 50) {
				mode = sim.Ignore
			}
			if err := w.Take(ctx, key(d), took, mode); err != nil {
				return api.Retryable("STOPPED", err)
			}
			return nil
		}
		if err := api.Handle(e, "slow", func(ctx context.Context, d *api.Delivery, in msg) error {
			return slow(ctx, d)
		}, api.MaxAttempts(3), api.DeliveryTimeout(4*time.Second),
			api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
			return err
		}
		return e.Register(api.NewWorkflow("slowflow").MaxAttempts(2).
			Then("s", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
				return nil, slow(ctx, d)
			}, api.DeliveryTimeout(4*time.Second), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})))
	})
}

// workload drives w through m.steps seeded steps and lets the work settle.
func workload(m mix) func(w *sim.World) {
	return func(w *sim.World) {
		register(w)
		if m.slow > 0 {
			registerSlow(w)
		}
		workloadSteps(w, m)
		settle(w)
	}
}

// flows holds the workflows each world dispatched, for settle, and
// slowFlows its slowflow workflows, which wait for no signal.
var flows, slowFlows = map[*sim.World][]string{}, map[*sim.World][]string{}

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
			case p < m.crash+m.restart+m.stop:
				shutdownStep(w, r.IntN(3))
			case p < m.crash+m.restart+m.stop+m.slow:
				if r.IntN(3) == 0 {
					slowFlows[w] = append(slowFlows[w], w.Dispatch("slowflow", api.State{"i": n}))
				} else {
					w.Enqueue("slow", msg{N: n})
				}
				n++
			case p < m.crash+m.restart+m.stop+m.slow+m.jump:
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

// shutdownStep shuts w down one of three ways: gracefully (SD-13), by a
// graceful shutdown forced after a seeded wait (SD-22), or forced at once.
// A shutdown that waits for handlers that ignore their cancellation may
// end Incomplete: that is an outcome, not a failure. The next step
// reopens the engine.
func shutdownStep(w *sim.World, how int) {
	switch how {
	case 0:
		w.Shutdown()
	case 1:
		w.BeginShutdown()
		w.Advance(time.Duration(1+w.Rand().IntN(29000)) * time.Millisecond)
		if w.ShuttingDown() {
			w.ForceShutdown()
		}
	default:
		w.ForceShutdown()
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
		slow := slowFlows[w]
		delete(slowFlows, w)
		for _, id := range append(wfs, slow...) {
			if info := w.Workflow(id); !w.Failed() && info.Status != api.WorkflowCompleted && info.Status != api.WorkflowFailed {
				panic(fmt.Sprintf("workflow %s still %s after the settle phase", id, info.Status))
			}
		}
	}
}
