package sim_test

import (
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
	"github.com/quire-dev/quire/sim"
)

// TestSD22_ForcedShutdownWorkload runs the standard workload with
// handlers that take simulated time (some past their delivery timeout,
// cooperating or not) and shutdown steps of three kinds: graceful,
// graceful then forced after a seeded wait, and forced at once, between
// crashes. After every step and wake-up the oracle checks that nothing
// acknowledged is lost, each attempt deadline fires once and never early,
// memory holds only unfinished work, and every shutdown report, once
// returned, is the journaled one and never changes (SD-22, SD-26, SD-33,
// RL-1).
func TestSD22_ForcedShutdownWorkload(t *testing.T) {
	sim.Run(t, 8, workload(mix{steps: 40, crash: 10, stop: 12, slow: 25, jump: 3}))
}

// TestT9_DeterminismWithDurations is T9 for worlds with simulated
// handler durations and shutdowns, in step mode: each seed three times,
// the last under GOMAXPROCS=1, equal step traces (wake-ups included) and
// final digests (RL-8).
func TestT9_DeterminismWithDurations(t *testing.T) {
	sim.Check(t, 3, workload(mix{steps: 30, crash: 8, stop: 8, slow: 25, jump: 5}), sim.StepMode())
}

// TestSD26_ReportNeverChanges forces a shutdown whose handler never
// returns (Incomplete), then crashes and restarts the world several times:
// the report the engine returned stays the one in the journal, unchanged,
// and the oracle audits it at every reopen.
func TestSD26_ReportNeverChanges(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		t := w.T() // the seed's subtest
		slowFirst(w, takes(w, time.Hour, sim.Ignore))
		w.Enqueue("work", msg{}, api.DeliveryTimeout(time.Minute))
		w.Advance(time.Second)
		w.ForceShutdown()
		first := w.LastShutdown()
		if first == nil || first.Report.Completion != shutdown.Incomplete || !first.Report.Forced {
			t.Fatalf("forced shutdown: %+v", first)
		}
		for i := 0; i < 3; i++ {
			w.Crash()
			w.Advance(time.Minute)
		}
		w.Restart()
		var reports []*record.ShutdownReport
		for _, r := range w.Records() {
			if b, ok := r.Body.(*record.ShutdownReport); ok {
				reports = append(reports, b)
			}
		}
		if len(reports) == 0 || reports[0].Completion != first.Report.Completion.String() ||
			reports[0].ElapsedNanos != int64(first.Report.Elapsed) || reports[0].Quarantined != int64(first.Report.Quarantined) {
			t.Fatalf("journaled reports %+v, first returned %+v", reports, first.Report)
		}
	})
}
