package shutdown

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/deadlines"
)

// TestSD22_RepeatedForceKeepsTheFirst: a second force request, made while
// the drain's graceful path is still being joined, changes nothing (SD-3,
// SD-22): the attempts are told ReasonForcedShutdown stamped at the first
// request (DL-16, DL-18), and shutdown_force_requested records that one.
func TestSD22_RepeatedForceKeepsTheFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		b.eng.drain.ignoreCtx = true // returns only when released
	})
	b.c.Initiate(TriggerSigterm)
	drainCtx := b.entered(&b.eng.drain)
	b.clk.Advance(time.Second)
	if err := b.c.Force(TriggerAPI); err != nil {
		t.Fatalf("Force = %v", err)
	}
	<-drainCtx.Done()
	b.clk.Advance(time.Second)
	if err := b.c.Force(TriggerSigterm); err != nil {
		t.Fatalf("second Force = %v", err)
	}
	b.eng.drain.release <- nil // the drain's graceful path returns at 2
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonForcedShutdown, ts(sec(1))})
	recs := b.jrn.records()
	if !slices.Contains(recs, "force api at 1s") || slices.Contains(recs, "force sigterm at 2s") {
		t.Fatalf("records %q, want the first force only", recs)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain cancelled_by_force/completed",
		"close cancelled_by_force/completed")
}

// TestSD13_FailedDrainStillForces: a drain whose graceful path returns an
// error proves nothing about the attempts (SD-13), so its force path still
// runs: running attempts are forced and joined (SD-14), and only those
// joins reconcile the drain.
func TestSD13_FailedDrainStillForces(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.eng.drain.err = errBoom })
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "engine calls", b.eng.calls(),
		[]string{"CloseAdmission", "Drain", "ForceAttempts", "AwaitJoin", "CloseEvidence"})
	// Neither requested nor after G: ReasonRuntimeFailure (DL-18).
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonRuntimeFailure, t0})
	wantActions(t, rep, "admission completed/not_attempted", "drain failed/completed", "close completed/not_attempted")
	wantEq(t, "drain reconciled", rep.DrainReconciled, true)
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
}

// TestDL41_RevokeStampedAtTheCutoff: the final abort is stamped with the
// forced owner cutoff, not with the instant the coordinator observes it
// (DL-16, DL-41): with force at 5 the cutoff is F(5) = 6, and a clock that
// jumps from 5 to 6.5 still revokes at 6.
func TestDL41_RevokeStampedAtTheCutoff(t *testing.T) {
	t.Parallel()
	b, _ := forcedAtFive(t, TriggerSigterm)
	b.wantNext(ts(sec(6)))
	b.clk.Advance(sec(1.5))
	wantTime(t, "revoked at", <-b.eng.revoked, ts(sec(6)))
	b.clk.BlockUntil(1)
	b.eng.await.release <- nil // joined at 6.5, before the force deadline 7
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain cancelled_by_force/completed",
		"close cancelled_by_force/completed")
}

// TestSD13_ForceAtGIsATimeout: force requested at exactly G does not come
// before G, which is reached at G (DL-1): the drain's graceful path timed
// out (SD-13), and so did the later actions' (SD-7).
func TestSD13_ForceAtGIsATimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		b.eng.drain.ignoreCtx = true
	})
	b.c.Initiate(TriggerSigterm)
	b.entered(&b.eng.drain)
	b.clk.Advance(28 * time.Second) // G
	b.c.Force(TriggerAPI)
	b.eng.drain.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain timed_out/completed", "close timed_out/completed")
}

// TestSD22_ForceDuringTheLastPhaseIsForced: force requested once every
// action has run, while phase 5 is still open, makes the report Forced
// (SD-22) although no action needed its force path: ForcedCompleted, not
// GracefulCompleted (SD-30).
func TestSD22_ForceDuringTheLastPhaseIsForced(t *testing.T) {
	t.Parallel()
	var jrn *gateJournal
	b := setup(t, func(b *testBundle) {
		jrn = gated(b, func(e Event, _ time.Time) bool {
			s, ok := e.(PhaseStarted)
			return ok && s.Phase == PhaseReleaseResources
		})
	})
	b.c.Initiate(TriggerSigterm)
	g := <-jrn.entered // phase 5 is starting; it has no action
	if err := b.c.Force(TriggerAPI); err != nil {
		t.Fatalf("Force = %v", err)
	}
	g.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted")
	if !slices.Contains(jrn.records(), "force api at 0s") {
		t.Fatalf("records %q lack the force", jrn.records())
	}
	wantEq(t, "forced", rep.Forced, true)
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
}

// TestSD16_ForcePathIsTheWorstOfItsCalls: on a force path, a close that
// failed stays the action's forced outcome although a later close
// completes (SD-28: each path's outcome is the worst of its calls').
func TestSD16_ForcePathIsTheWorstOfItsCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.owned("a")
		b.opts.OwnedResources = append(b.opts.OwnedResources, OwnedResource{Name: "b", CloseFunc: b.closer("b", errBoom)})
	})
	b.c.Initiate(TriggerSigquit) // initiates and forces at once (SD-20)
	rep, _ := b.finish()
	wantSlice(t, "closed", b.closedNames(), []string{"b", "a"})
	wantActions(t, rep, "admission cancelled_by_force/completed", "drain cancelled_by_force/completed",
		"close cancelled_by_force/completed", "owned-resources cancelled_by_force/failed")
	wantEq(t, "completion", rep.Completion, Failed)
}

// TestSD16_WithheldClosesLeaveTheirShares: owned resources withheld by
// their barrier (SD-18) do not run, so the signal monitor's share is the
// whole root time left, and its graceful path runs until G (SD-9).
func TestSD16_WithheldClosesLeaveTheirShares(t *testing.T) {
	t.Parallel()
	stop := (&step{block: true}).init()
	var mu sync.Mutex
	b := setup(t, func(b *testBundle) {
		b.eng.counters = Counters{Drained: 1, Unresolved: 1, Joined: true}
		b.owned("db", "cache")
		b.opts.SignalMonitorStopFunc = func(ctx context.Context) error { return stop.run(&mu, ctx) }
	})
	b.c.Initiate(TriggerSigterm)
	b.entered(stop)
	b.wantNext(ts(sec(28))) // min(G, 0 + (30 − 0)/1), not 0 + 30/3
	stop.release <- nil
	rep, _ := b.finish()
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/not_attempted",
		"signal-monitor completed/not_attempted")
	wantSlice(t, "closed", b.closedNames(), nil)
}

// TestSD17_JournalClosePanicIsTheResult: a journal close that panics has
// failed, and Shutdown returns that failure (SD-17); the report stays as
// published.
func TestSD17_JournalClosePanicIsTheResult(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.opts.Journal = panickyClose{b.jrn} })
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if err == nil {
		t.Fatalf("Wait = nil, want the journal close's failure")
	}
	wantEq(t, "completion", rep.Completion, GracefulCompleted)
	wantSlice(t, "records", b.jrn.records(), allPhases)
}

// panickyClose is a fakeJournal whose Close panics.
type panickyClose struct{ *fakeJournal }

func (panickyClose) Close(context.Context) error { panic("journal close panics") }

// TestSD20_SignalMonitorAfterInitiationIsRefused: a signal monitor handed
// over once a shutdown was initiated is refused and never stopped by
// phase 5, which may already have passed it by (SD-16, SD-20).
func TestSD20_SignalMonitorAfterInitiationIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if !b.c.SetSignalMonitor(b.closer("early", nil)) {
		t.Fatalf("SetSignalMonitor before initiation refused")
	}
	b.c.Initiate(TriggerSigterm)
	if b.c.SetSignalMonitor(b.closer("late", nil)) {
		t.Fatalf("SetSignalMonitor after initiation accepted")
	}
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "closed", b.closedNames(), []string{"early"})
	wantEq(t, "signal monitor", rep.Dependencies.SignalMonitor, rrAll)
}

// TestSD3_HarnessRootIsNoShutdown: a root a harness installs before the
// first initiation is not a shutdown in progress (SD-3, SD-4), and once
// the shutdown is over an install no longer reaches the engine.
func TestSD3_HarnessRootIsNoShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.c.Install(deadlines.NewRoot(t0, time.Minute))
	if b.c.Root().Installed() {
		t.Fatalf("Root() before the first initiation is installed")
	}
	if n := len(b.eng.roots); n != 0 {
		t.Fatalf("engine got %d roots before the first initiation", n)
	}
	b.c.Initiate(TriggerSigterm)
	if _, err := b.finish(); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	n := len(b.eng.roots)
	b.c.Install(deadlines.NewRoot(t0, time.Second))
	if got := len(b.eng.roots); got != n {
		t.Fatalf("an install after the shutdown reached the engine: %d roots, want %d", got, n)
	}
}

// TestSD11_CloseEvidenceIsJoinedBeforePhaseFive: quire's own call of phase
// 4 is joined on its force path, never abandoned (SD-11): a CloseEvidence
// that runs on past its force deadline, its ctx cancelled, holds phase 4
// open until it returns, and phase 5 starts only then (here with no time
// left to close the owned resources).
func TestSD11_CloseEvidenceIsJoinedBeforePhaseFive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, func(b *testBundle) {
			b.eng.closeEv.block = true
			b.eng.closeEv.ignoreCtx = true
			b.owned("db")
		})
		endOnCleanup(t, b, &b.eng.closeEv)
		b.c.Initiate(TriggerSigterm)
		ctx := b.entered(&b.eng.closeEv)
		if err := b.c.Force(TriggerAPI); err != nil {
			t.Fatalf("Force = %v", err)
		}
		synctest.Wait()
		end, ok := b.clk.Next()
		if !ok || !end.Before(ts(sec(30))) {
			t.Fatalf("force deadline at t0%+v (armed %v), want one before Hr", end.Sub(t0), ok)
		}
		b.clk.Advance(end.Sub(b.clk.Now()))
		<-ctx.Done()
		synctest.Wait()
		if recs := b.jrn.records(); slices.ContainsFunc(recs, func(r string) bool {
			return r == "finished close_evidence cancelled_by_force/timed_out" || r == "started release_resources"
		}) {
			t.Fatalf("records %q while CloseEvidence still ran", recs)
		}
		b.eng.closeEv.release <- nil
		rep, _ := b.finish()
		wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
			"close cancelled_by_force/timed_out", "owned-resources timed_out/not_attempted")
	})
}
