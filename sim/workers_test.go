package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

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
