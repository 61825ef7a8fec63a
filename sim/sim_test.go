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

// The sim-level reliability tests of spec/reliability.md §6. Each runs its
// default seed count (QUIRE_SEEDS=N for long runs, QUIRE_SEED=S for one
// seed, -short divides by 10); the oracle checks every step.

// TestT1_KillDuringAppends crashes the engine at seeded quiescent points
// with 0 %, 1..99 % or 100 % of unsynced data kept: nothing acknowledged is
// lost, the journal is a gap-free prefix, live state equals replay (RL-1,
// RL-3). Mid-commit kill points are api's TestEngineCrash_* (see doc.go).
func TestT1_KillDuringAppends(t *testing.T) {
	sim.Run(t, 50, workload(mix{steps: 40, crash: 15, restart: 3}))
}

// TestT9_Determinism runs each seed three times, the last under
// GOMAXPROCS=1: equal step traces and final digests (RL-8).
func TestT9_Determinism(t *testing.T) {
	sim.Check(t, 15, workload(mix{steps: 30, crash: 10, restart: 5, jump: 5}))
}

// TestT10_ReplayEqualsLive restarts gracefully between steps; the oracle
// compares the live digest with the fold of the acknowledged records after
// every step and audits the journal read-only at every reopen (RL-7).
// Snapshot + tail = full fold is tests/property's TestT10_SnapshotPlusTail.
func TestT10_ReplayEqualsLive(t *testing.T) {
	sim.Run(t, 30, workload(mix{steps: 40, restart: 15}))
}

// TestT12_ClockJumps jumps the clock forward by up to 48 h (past several
// deadlines and delays) and back by up to 10 min, with crashes right after:
// no timer, delay or deadline fires early or twice; instants stay monotone
// (RL-9).
func TestT12_ClockJumps(t *testing.T) {
	sim.Run(t, 50, workload(mix{steps: 40, crash: 8, jump: 25}))
}

// TestT14_ExecutionAndSettlement crashes often between attempts' start,
// return and settlement steps: each token settles at most once and only as
// its job's open attempt; every acknowledged job and workflow settles once
// faults stop (RL-10).
func TestT14_ExecutionAndSettlement(t *testing.T) {
	sim.Run(t, 50, workload(mix{steps: 40, crash: 25}))
}

// TestCrashStepsAppearInTheTrace guards the workload itself: a crash-heavy
// seed really crashes and reopens.
func TestCrashStepsAppearInTheTrace(t *testing.T) {
	w := sim.New(7, sim.WithT(t))
	workload(mix{steps: 30, crash: 30})(w)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for _, s := range w.Trace() {
		if strings.HasPrefix(s.What, "crash") {
			crashes++
		}
	}
	if crashes == 0 {
		t.Fatal("no crash step in the trace")
	}
}

// TestT3_WALFaultFailStop switches the WAL fault on for one enqueue at
// seeded points of the standard workload: the enqueue is never
// acknowledged, the engine fail-stops, and the reopen on an image taken
// after the fail-stop passes the oracle (RL-2; T1's criteria).
func TestT3_WALFaultFailStop(t *testing.T) {
	sim.Run(t, 30, func(w *sim.World) {
		register(w)
		for i := 0; i < 3; i++ {
			workloadSteps(w, mix{steps: 8, crash: 5})
			w.DiskFault("work", msg{N: -1})
		}
		settle(w)
	})
}

// TestT15_SlowDisk runs each seed with and without a slow disk (real
// write latency, 200 µs mean, at most 100 ms per run): the traces must be
// equal, since real delay never fires a sim deadline (RL-1, RL-9).
func TestT15_SlowDisk(t *testing.T) {
	for _, seed := range sim.Seeds(t, 5) {
		scenario := workload(mix{steps: 25, crash: 10, restart: 5})
		a := sim.New(seed, sim.WithT(t))
		scenario(a)
		a.Finish()
		b := sim.New(seed, sim.WithT(t), sim.SlowDisk(200*time.Microsecond, 100*time.Millisecond))
		scenario(b)
		b.Finish()
		if err := sim.Diverge(a, b); err != nil {
			t.Fatalf("seed 0x%x: the slow disk changed the trace: %v", seed, err)
		}
	}
}

// TestSignalBeforeWait checks World.Signal's doc (WF-19): a signal sent
// while the workflow has not reached its wait is accepted, stored, and
// satisfies the wait when the workflow gets there.
func TestSignalBeforeWait(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		w.Register(func(e *api.Engine) error {
			step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return s, nil }
			return e.Register(api.NewWorkflow("early").Then("a", step).Delay(5*time.Minute).WaitForSignal("go").Then("b", step))
		})
		id := w.Dispatch("early", nil)
		if err := w.Signal(id, "go", nil); err != nil {
			w.T().Fatalf("early signal refused: %v", err)
		}
		if s := w.Workflow(id).Status; s == api.WorkflowWaitingSignal {
			w.T().Fatalf("the workflow waits already; the signal is not early")
		}
		w.Advance(10 * time.Minute)
		if s := w.Workflow(id).Status; s != api.WorkflowCompleted {
			w.T().Fatalf("workflow %s after the delay, want completed: the early signal was not kept", s)
		}
	})
}

// TestSeedDecidesJitter: the seed decides the engine's jitter draws, as
// it decides every random choice of a world: retry delays with jitter
// differ from seed to seed.
func TestSeedDecidesJitter(t *testing.T) {
	delays := func(seed uint64) string {
		w := sim.New(seed)
		w.Register(func(e *api.Engine) error {
			return api.Handle(e, "flaky", func(ctx context.Context, d *api.Delivery, in msg) error {
				return api.Retryable("FLAKY", errors.New("try again"))
			}, api.MaxAttempts(6), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 10 * time.Second, JitterRatio: 0.5}))
		})
		w.Enqueue("flaky", msg{})
		w.Advance(10 * time.Minute)
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range w.Records() {
			if b, ok := r.Body.(*record.AttemptRetryScheduled); ok {
				out = append(out, time.Duration(b.DelayNanos).String())
			}
		}
		if len(out) != 5 {
			t.Fatalf("seed %d: %d retries, want 5", seed, len(out))
		}
		return strings.Join(out, " ")
	}
	first := delays(1)
	for seed := uint64(2); seed <= 4; seed++ {
		if delays(seed) != first {
			return
		}
	}
	t.Fatalf("seeds 1..4 draw the same retry delays %s", first)
}
