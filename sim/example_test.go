package sim_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// registerPayment is the application's own code: a payment workflow that
// authorizes (a flaky call to the bank), waits for an "approved" signal,
// then captures, and must complete within 2 h: past it, the approval's
// arrival (or a capture finishing) fails it and runs the refund handler.
// A payment still waiting for its approval is not failed by the clock
// alone (WD-11).
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

// charge is the payload of the card-charging handler of ExampleWorld_Take.
type charge struct{ Cents int }

// ExampleWorld_Take shows what a crash can interrupt. Crashes land only at
// quiescent points, where every handler has returned or is parked in
// Take: a handler that charges a card and returns at once is never cut
// off, so a crash cannot show that charging twice is possible. One that
// charges and then takes the time the provider's answer takes (here 1 s)
// is parked when the crash lands at 0.5 s; its attempt dies unsettled and
// the next attempt charges again: the crash exposes the missing
// idempotency key.
func ExampleWorld_Take() {
	for _, answer := range []time.Duration{0, time.Second} {
		w := sim.New(1)
		var charges atomic.Int32
		w.Register(func(e *api.Engine) error {
			return api.Handle(e, "charge", func(ctx context.Context, d *api.Delivery, in charge) error {
				charges.Add(1) // the side effect: the provider charges the card
				// The provider's answer takes answer; a zero Take returns at once.
				return w.Take(ctx, fmt.Sprintf("%s/%d", d.JobID(), d.Attempt()), answer, sim.Ignore)
			})
		})
		w.Enqueue("charge", charge{Cents: 1999})
		w.Advance(500 * time.Millisecond)
		w.CrashWith(0)
		w.Advance(time.Hour)
		if err := w.Finish(); err != nil {
			fmt.Println(err)
		}
		fmt.Printf("answer in %v: charged %d time(s)\n", answer, charges.Load())
	}
	// Output:
	// answer in 0s: charged 1 time(s)
	// answer in 1s: charged 2 time(s)
}

// docUsage is the scenario of the "Usage" section of doc.go, with its
// assertion, which must hold on every seed: approved within the 2 h
// deadline, the payment never expires; it completes, or fails because the
// flaky authorize step ran out of its five attempts.
func docUsage(w *sim.World) {
	w.Register(registerPayment(w)) // the application's handlers and workflows
	id := w.Dispatch("payment", api.State{"amount": 100})
	w.Crash()
	w.Advance(30 * time.Minute)
	w.Signal(id, "approved", nil) // within the 2 h deadline
	w.Advance(3 * time.Hour)
	switch info := w.Workflow(id); {
	case info.Status == api.WorkflowCompleted:
	case info.Status == api.WorkflowFailed && info.Error != api.MessageDeadlineExceeded:
	default:
		w.T().Fatalf("payment %s: %s %q", id, info.Status, info.Error)
	}
}

// TestDocUsage runs the "Usage" scenario of doc.go on the default seeds
// and on seed 0x8c4a24f5d94dda5d, one of the 8 in the first 3000 of
// sim.Seeds whose bank times out five times in a row: there the payment
// fails, so the section's assertion must allow it (it used to require
// Completed, which this seed refutes). Should the engine's draws change
// so that this seed completes, pick another exhausting seed.
func TestDocUsage(t *testing.T) {
	sim.Run(t, 5, docUsage)
	const exhausted = 0x8c4a24f5d94dda5d
	w := sim.New(exhausted, sim.WithT(t))
	docUsage(w)
	var id string
	for _, r := range w.Records() {
		if b, ok := r.Body.(*record.WorkflowStarted); ok {
			id = b.WorkflowID
		}
	}
	if info := w.Workflow(id); info.Status != api.WorkflowFailed {
		t.Fatalf("seed 0x%x: payment %s %q, want failed (authorize exhausted): not a counterexample to asserting Completed any more", uint64(exhausted), info.Status, info.Error)
	}
}
