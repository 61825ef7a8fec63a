package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// The spec's worked examples as sim scenarios. The sim executor runs a
// handler to completion at one instant, so "step A takes 50 min" is
// modelled as A's first ten attempts failing with a fixed 5 min retry
// backoff (the longest allowed) and the eleventh succeeding: the workflow
// spends 50 min in A, as the example needs. Each scenario runs under crashes at seeded instants; the
// oracle checks every step (the deadline never fires early or twice).

// wd12 registers Then(A).Delay(delay).Then(B).MustCompleteWithin(2h) with
// A taking a and B taking b.
func wd12(a, delay, b time.Duration) func(e *api.Engine) error {
	const slice = 5 * time.Minute // the longest fixed backoff
	takes := func(d time.Duration) (api.StepFunc, []api.JobOption) {
		n := int(d / slice)
		fn := func(ctx context.Context, dl *api.Delivery, s api.State) (api.State, error) {
			if dl.Attempt() <= n {
				return nil, api.Retryable("BUSY", errors.New("still working"))
			}
			return nil, nil
		}
		return fn, []api.JobOption{api.MaxAttempts(n + 1), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: slice, Max: slice})}
	}
	return func(e *api.Engine) error {
		fa, oa := takes(a)
		fb, ob := takes(b)
		return e.Register(api.NewWorkflow("wd12").
			Then("A", fa, oa...).
			Delay(delay).
			Then("B", fb, ob...).
			MustCompleteWithin(2 * time.Hour))
	}
}

// TestWD12_Scenarios reproduces WD-12's three cases: A 50 min + 1 h delay
// + B 15 min fails at the 2 h deadline; A 20 min + 1 h + B 30 min
// completes at about T0+110 min; a 3 h delay under a 2 h deadline always
// fails. Crashes and restarts happen at seeded instants in between.
func TestWD12_Scenarios(t *testing.T) {
	cases := []struct {
		name        string
		a, delay, b time.Duration
		want        api.WorkflowStatus
	}{
		{"A50m_B15m_fails", 50 * time.Minute, time.Hour, 15 * time.Minute, api.WorkflowFailed},
		{"A20m_B30m_completes", 20 * time.Minute, time.Hour, 30 * time.Minute, api.WorkflowCompleted},
		{"delay3h_fails", 5 * time.Minute, 3 * time.Hour, 5 * time.Minute, api.WorkflowFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sim.Run(t, 10, func(w *sim.World) {
				t := w.T() // the seed's subtest
				w.Register(wd12(c.a, c.delay, c.b))
				id := w.Dispatch("wd12", api.State{})
				for i := 0; i < 2; i++ {
					at := time.Duration(w.Rand().Int64N(int64(130 * time.Minute)))
					w.At(at, "crash", func(w *sim.World) {
						if w.Rand().IntN(2) == 0 {
							w.Crash()
						} else {
							w.Restart()
						}
					})
				}
				w.Run()
				w.AdvanceTo(sim.T0.Add(4 * time.Hour))
				info := w.Workflow(id)
				if info.Status != c.want {
					t.Fatalf("WD-12: %s ends %s (%q), want %s", c.name, info.Status, info.Error, c.want)
				}
				if c.want == api.WorkflowFailed {
					if info.Error != api.MessageDeadlineExceeded || info.FailedAt.Before(sim.T0.Add(2*time.Hour)) {
						t.Fatalf("WD-12: failed with %q at %v, want the deadline at or after T0+2h", info.Error, info.FailedAt.Sub(sim.T0))
					}
				}
			})
		})
	}
}
