package sim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// registerPayment is the application's own code: a payment workflow that
// authorizes (a flaky call to the bank), waits for an "approved" signal,
// then captures, and must complete within 2 h or be refunded.
func registerPayment(w *sim.World) func(e *api.Engine) error {
	return func(e *api.Engine) error {
		if err := api.HandleDeadline(e, "refund", func(ctx context.Context, s api.State) error { return nil }); err != nil {
			return err
		}
		authorize := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			// The bank times out a third of the time: seeded, so it
			// reproduces.
			if w.Fails(d.JobID(), d.Attempt(), 33) {
				return nil, api.Retryable("BANK_TIMEOUT", errors.New("bank timed out"))
			}
			return api.State{"auth": "ok"}, nil
		}
		capture := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			return api.State{"captured": s["amount"]}, nil
		}
		return e.Register(api.NewWorkflow("payment").
			Then("authorize", authorize, api.MaxAttempts(5)).
			WaitForSignal("approved").
			Then("capture", capture).
			MustCompleteWithin(2 * time.Hour).
			OnDeadline("refund"))
	}
}

// TestPaymentWorkflow is how an application tests its own workflow under
// crashes and a fake clock: for each seed, dispatch, crash, approve at a
// seeded instant, crash again, and check the outcome. The oracle checks
// every step (nothing acknowledged lost, no double settlement, the
// deadline never early, live state = replay). The scenario asserts through
// w.T(), the seed's subtest: a failing seed prints QUIRE_SEED=... to rerun
// it and the qctl command that inspects its journal image.
func TestPaymentWorkflow(t *testing.T) {
	sim.Run(t, 20, func(w *sim.World) {
		w.Register(registerPayment(w))
		id := w.Dispatch("payment", api.State{"amount": 100})
		w.Advance(time.Duration(w.Rand().IntN(30)) * time.Second)
		w.Crash()
		w.Advance(time.Duration(w.Rand().IntN(180)) * time.Minute)
		approveAt := w.Now().Sub(sim.T0)
		w.Signal(id, "approved", nil) // stored even once the workflow has failed (WF-19)
		w.Crash()
		w.Advance(3 * time.Hour)

		info := w.Workflow(id)
		switch {
		case info.Status == api.WorkflowCompleted:
			if approveAt > 2*time.Hour {
				w.T().Fatalf("completed although approved after the 2 h deadline (at %v)", approveAt)
			}
		case info.Status == api.WorkflowFailed && info.Error == api.MessageDeadlineExceeded:
			if approveAt < 2*time.Hour-time.Minute {
				w.T().Fatalf("expired although approved in time (at %v)", approveAt)
			}
		case info.Status == api.WorkflowFailed:
			// authorize failed five times in a row: a valid outcome.
		default:
			w.T().Fatalf("payment %s is %s after 3 h", id, info.Status)
		}
	})
}

// Example shows the harness on one seed: the same seed always prints the
// same lines.
func Example() {
	w := sim.New(42)
	w.Register(registerPayment(w))
	id := w.Dispatch("payment", api.State{"amount": 100})
	w.Crash()
	w.Advance(30 * time.Minute)
	w.Signal(id, "approved", nil)
	w.Advance(time.Minute)
	fmt.Println(w.Workflow(id).Status, w.Workflow(id).State["captured"])
	if err := w.Finish(); err != nil {
		fmt.Println(err)
	}
	// Output: completed 100
}
