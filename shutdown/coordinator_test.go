package shutdown

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
)

// allPhases is the journal of a shutdown whose every action completes on
// its graceful path and that owns nothing.
var allPhases = []string{
	"initiated sigterm",
	"started close_admission", "finished close_admission completed/not_attempted",
	"started drain", "finished drain completed/not_attempted",
	"started force", "finished force completed/not_attempted",
	"started close_evidence", "finished close_evidence completed/not_attempted",
	"started release_resources", "finished release_resources completed/not_attempted",
	"started publish_report", "report graceful_completed", "finished publish_report completed/not_attempted",
}

// TestSD11_PhasesOrderedAndJournaledWhenEmpty: six phases in order, each
// journaled even with nothing to do; admission first (SD-12); the counters
// reach the report (SD-25); SD-31 a.
func TestSD11_PhasesOrderedAndJournaledWhenEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.released = 2
		b.eng.counters = Counters{Drained: 3, Released: 1, Joined: true}
	})
	if !b.c.Initiate(TriggerSigterm) {
		t.Fatalf("first Initiate reports not first")
	}
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "records", b.jrn.records(), allPhases)
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "Drain", "CloseEvidence"})
	wantEq(t, "journal closes", b.jrn.closed, 1)

	// SD-31 a, SD-25, SD-27.
	wantEq(t, "completion", rep.Completion, GracefulCompleted)
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted", "close completed/not_attempted")
	want := Report{
		Completion: GracefulCompleted, Trigger: TriggerSigterm, InitiatedAt: t0, Budget: 30 * time.Second,
		CoordinatorAccounted: true, CoordinatorComplete: true, RuntimeJoined: true,
		DrainReconciled: true, CloseReconciled: true, Actions: rep.Actions,
		Drained: 3, ReleasedUnstarted: 2, Released: 1,
	}
	if !reflect.DeepEqual(*rep, want) {
		t.Fatalf("report\n got %+v\nwant %+v", *rep, want)
	}
	// SD-9: the dispatcher's stop leaves min(30 s/4, 250 ms) before Hr.
	wantTime(t, "DispatcherStopBy", b.eng.closeReq[0].DispatcherStopBy, ts(sec(29.75)))
	wantEq(t, "DrainReconciled given to CloseEvidence", b.eng.closeReq[0].DrainReconciled, true)

	// Phase records carry the instants of the injected clock.
	b.jrn.mu.Lock()
	init := b.jrn.events[0].(Initiated)
	b.jrn.mu.Unlock()
	wantEq(t, "total", init.Total, 30*time.Second)
	wantTime(t, "start", init.Start, t0)
	wantTime(t, "G", init.G, ts(sec(28)))
	wantTime(t, "Hr", init.Hr, ts(sec(30)))
}

// TestSD21_LaterCallsObserveTheSameResult: a second initiation, Shutdown or
// Wait runs nothing again and returns the retained result at once.
func TestSD21_LaterCallsObserveTheSameResult(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.owned("db") })
	if err := b.c.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	first := b.c.Report()
	if b.c.Initiate(TriggerSigint) {
		t.Fatalf("Initiate after the end reports first")
	}
	if err := b.c.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
	if err := b.c.Force(TriggerSigterm); err != nil {
		t.Fatalf("Force after the end = %v", err)
	}
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "Drain", "CloseEvidence"})
	wantSlice(t, "closed", b.closedNames(), []string{"db"})
	if !reflect.DeepEqual(first, b.c.Report()) {
		t.Fatalf("report changed after the end")
	}
	wantEq(t, "trigger", first.Trigger, TriggerAPI)
}

// TestSD10_WorkedTimelineDeadline is SD-10's timeline with a drain that
// outlives G and joins at 29 (SD-7, SD-8, SD-31 b).
func TestSD10_WorkedTimelineDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		b.eng.await.block = true
		b.owned("db")
	})
	b.c.Initiate(TriggerSigterm)
	drainCtx := b.entered(&b.eng.drain)
	if b.c.Report() != nil {
		t.Fatalf("report before the runtime join (SD-26)")
	}
	root := b.c.Root()
	wantTime(t, "G", root.G(), ts(sec(28)))
	wantTime(t, "Hr", root.Hr(), ts(sec(30)))
	b.wantNext(ts(sec(28))) // the drain's graceful path ends at G

	b.clk.Advance(28 * time.Second)
	<-drainCtx.Done()
	wantEq(t, "drain cause", context.Cause(drainCtx), errGracefulEnded)
	awaitCtx := b.entered(&b.eng.await)
	// At G the force reason is ShutdownDeadline stamped 28; the attempt's
	// owner cutoff is F(28) = 29, the drain's force deadline
	// max(min(28 + 2, 30), 29) = 30.
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonShutdownDeadline, ts(sec(28))})
	wantTime(t, "owner cutoff", b.eng.latest[0], ts(sec(29)))
	b.wantNext(ts(sec(29))) // the final abort (DL-41)

	b.clk.Advance(time.Second) // 29: the attempts' cleanup is over
	wantTime(t, "revoked at", <-b.eng.revoked, ts(sec(29)))
	b.clk.BlockUntil(1)
	b.wantNext(ts(sec(30)))
	if awaitCtx.Err() != nil {
		t.Fatalf("AwaitJoin's ctx ended before its force deadline")
	}
	b.eng.await.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "records", b.jrn.records(), []string{
		"initiated sigterm",
		"started close_admission", "finished close_admission completed/not_attempted",
		"started drain", "finished drain timed_out/not_attempted",
		"started force", "finished force timed_out/completed",
		"started close_evidence", "finished close_evidence timed_out/completed",
		"started release_resources", "finished release_resources timed_out/completed",
		"started publish_report", "report forced_completed", "finished publish_report completed/not_attempted",
	})
	// SD-7: after G only force paths run; the later actions are graceful
	// TimedOut and forced Completed.
	wantActions(t, rep,
		"admission completed/not_attempted", "drain timed_out/completed",
		"close timed_out/completed", "owned-resources timed_out/completed")
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
	wantEq(t, "forced", rep.Forced, true)
	wantEq(t, "owned", rep.Dependencies.OwnedResources, rrAll)
	wantEq(t, "elapsed", rep.Elapsed, 29*time.Second)
	// SD-9 at 29: Hr − min((30 − 29)/4, 250 ms).
	wantTime(t, "DispatcherStopBy", b.eng.closeReq[0].DispatcherStopBy, ts(sec(29.75)))
}

// TestSD10_WorkedTimelineForce is SD-10's variant: a second SIGTERM at 5.
func TestSD10_WorkedTimelineForce(t *testing.T) {
	t.Parallel()
	b, drainCtx := blockedDrain(t, TriggerSigterm)
	b.clk.Advance(5 * time.Second)
	if err := b.c.Force(TriggerSigterm); err != nil {
		t.Fatalf("Force = %v", err)
	}
	<-drainCtx.Done()
	b.entered(&b.eng.await)
	// ForcedShutdown stamped 5; owner cutoff F(5) = 6; the drain's force
	// deadline is max(min(5 + 2, 30), 6) = 7; Hr is still 30.
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonForcedShutdown, ts(sec(5))})
	wantTime(t, "owner cutoff", b.eng.latest[0], ts(sec(6)))
	b.wantNext(ts(sec(6))) // the final abort at the owner cutoff (DL-41)
	wantTime(t, "Hr", b.c.Root().Hr(), ts(sec(30)))
	wantTime(t, "G", b.c.Root().G(), ts(sec(28)))

	b.clk.Advance(time.Second) // 6
	wantTime(t, "revoked at", <-b.eng.revoked, ts(sec(6)))
	b.clk.BlockUntil(1)
	b.wantNext(ts(sec(7)))
	b.eng.await.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "records", b.jrn.records()[:7], []string{
		"initiated sigterm",
		"started close_admission", "finished close_admission completed/not_attempted",
		"started drain", "force sigterm at 5s", "finished drain cancelled_by_force/not_attempted",
		"started force",
	})
	wantActions(t, rep, "admission completed/not_attempted", "drain cancelled_by_force/completed",
		"close cancelled_by_force/completed")
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
}

// TestSD10_ForceDeadlinePassesAtSeven: the same variant, with attempts
// that never return: the drain's force path ends TimedOut at 7, not at Hr.
func TestSD10_ForceDeadlinePassesAtSeven(t *testing.T) {
	t.Parallel()
	b, awaitCtx := forcedAtFive(t, TriggerSigint)
	b.eng.setCounters(Counters{Quarantined: 1})
	b.clk.Advance(2 * time.Second)
	<-awaitCtx.Done()
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain cancelled_by_force/timed_out",
		"close cancelled_by_force/completed")
	wantEq(t, "elapsed", rep.Elapsed, 7*time.Second)
}

// TestSD7_ForceAfterGKeepsTheDeadlineReason: force requested at 28.5, after
// G, whether or not the coordinator has seen G yet: the drain's graceful
// path timed out at G, the reason due then is ShutdownDeadline, and the
// force is still journaled and counted (SD-22).
func TestSD7_ForceAfterGKeepsTheDeadlineReason(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.eng.drain.block = true })
	b.c.Initiate(TriggerSigterm)
	b.entered(&b.eng.drain)
	b.clk.Advance(sec(28.5))
	b.c.Force(TriggerSigterm)
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonShutdownDeadline, ts(sec(28))})
	wantActions(t, rep, "admission completed/not_attempted", "drain timed_out/completed", "close timed_out/completed")
	recs := b.jrn.records()
	if !slices.Contains(recs, "force sigterm at 28.5s") || !slices.Contains(recs, "finished drain timed_out/not_attempted") {
		t.Fatalf("records %q lack the force or the drain's timeout", recs)
	}
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
}

// TestSD8_ShortRootLetsCooperatingAttemptsFinish is SD-8's example: a 1 s
// root, explicit force at 0.2 s.
func TestSD8_ShortRootLetsCooperatingAttemptsFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.opts.ShutdownTimeout = time.Second
		b.eng.drain.block = true
		b.eng.await.block = true
	})
	b.c.Initiate(TriggerContext)
	b.entered(&b.eng.drain)
	b.clk.Advance(ms(200))
	b.c.Force(TriggerAPI)
	b.entered(&b.eng.await)
	// Coordinator force deadline min(0.2 + 0.25, 1) = 0.45; owner cutoff
	// 0.8; the drain's force deadline is 0.8.
	wantTime(t, "coordinator force deadline", b.c.Root().ForceDeadline(ts(ms(200))), ts(ms(450)))
	wantTime(t, "owner cutoff", b.eng.latest[0], ts(ms(800)))
	b.wantNext(ts(ms(800)))
	b.clk.Advance(ms(150)) // C = 0.35: the attempts returned in their window
	b.eng.await.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
}

// TestSD37_QuarantinedAttemptIsIncomplete is SD-10 up to Hr with an attempt
// that never returns (SD-31 i): nothing after it is waited for past Hr,
// nothing it may use is disposed, and the report is Incomplete.
func TestSD37_QuarantinedAttemptIsIncomplete(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		b.eng.await.block = true
		b.owned("db", "cache")
		b.opts.Telemetry = &Telemetry{CloseFunc: b.closer("telemetry", nil)}
	})
	b.c.Initiate(TriggerSigterm)
	b.entered(&b.eng.drain)
	b.clk.Advance(28 * time.Second)
	awaitCtx := b.entered(&b.eng.await)
	b.eng.setCounters(Counters{Drained: 4, Released: 1, Quarantined: 1})
	b.clk.Advance(2 * time.Second)
	<-awaitCtx.Done()
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	// The error says what the report did not confirm.
	wantEq(t, "error", err.Error(), "shutdown: incomplete: 1 goroutine not returned, drain timed_out/timed_out, "+
		"close timed_out/timed_out, owned-resources timed_out/not_attempted, telemetry timed_out/not_attempted")
	// At 30 close evidence has no time left: it is not started.
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "Drain", "ForceAttempts", "AwaitJoin", "Revoke"})
	wantSlice(t, "closed", b.closedNames(), nil)
	wantActions(t, rep,
		"admission completed/not_attempted", "drain timed_out/timed_out", "close timed_out/timed_out",
		"owned-resources timed_out/not_attempted", "telemetry timed_out/not_attempted")
	wantEq(t, "completion", rep.Completion, Incomplete)
	wantEq(t, "runtime joined", rep.RuntimeJoined, false)
	wantEq(t, "drain reconciled", rep.DrainReconciled, false)
	wantEq(t, "quarantined", rep.Quarantined, 1)
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{Owned: true})
	wantEq(t, "telemetry", rep.Dependencies.Telemetry, ResourceReport{Owned: true})
	wantEq(t, "elapsed", rep.Elapsed, 30*time.Second)
}

func TestSD22_ForceBeforeInitiationIsTypedError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := b.c.Force(TriggerSigterm); !errors.Is(err, ErrNotInitiated) {
		t.Fatalf("Force before initiation = %v, want ErrNotInitiated", err)
	}
	if b.c.Report() != nil || b.c.Root().Installed() {
		t.Fatalf("Force before initiation started something")
	}
	select {
	case <-b.c.Done():
		t.Fatalf("done before initiation")
	default:
	}
}

// TestSD20_FirstSigquitInitiatesForced: force before cleanup began still
// runs admission, the force drain and close, each exactly once (SD-22), and
// joins come before close evidence (SD-24).
func TestSD20_FirstSigquitInitiatesForced(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.owned("db") })
	b.c.Initiate(TriggerSigquit)
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "ForceAttempts", "AwaitJoin", "CloseEvidence"})
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonForcedShutdown, t0})
	wantSlice(t, "records", b.jrn.records()[:3], []string{"initiated sigquit", "force sigquit at 0s", "started close_admission"})
	wantActions(t, rep,
		"admission cancelled_by_force/completed", "drain cancelled_by_force/completed",
		"close cancelled_by_force/completed", "owned-resources cancelled_by_force/completed")
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
	wantSlice(t, "closed", b.closedNames(), []string{"db"})
}

func TestSD23_RuntimeFailure(t *testing.T) {
	t.Parallel()
	t.Run("first trigger", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		if !b.c.Fail("JOURNAL_COMMIT_FAILED") {
			t.Fatalf("Fail did not initiate")
		}
		rep, err := b.finish()
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("Wait = %v, want ErrFailed", err)
		}
		var serr *Error
		if !errors.As(err, &serr) || serr.FailureCode != "JOURNAL_COMMIT_FAILED" {
			t.Fatalf("Wait = %#v, want *Error with the failure code", err)
		}
		wantEq(t, "trigger", rep.Trigger, TriggerRuntimeFailure)
		wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonRuntimeFailure, t0})
		wantEq(t, "failure code", rep.FailureCode, "JOURNAL_COMMIT_FAILED")
		wantEq(t, "forced", rep.Forced, true)
		wantEq(t, "completion", rep.Completion, Failed)
	})
	t.Run("during the drain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(b *testBundle) { b.eng.drain.block = true })
		b.c.Initiate(TriggerSigterm)
		drainCtx := b.entered(&b.eng.drain)
		b.clk.Advance(time.Second)
		if b.c.Fail("DISPATCHER_PANIC") {
			t.Fatalf("Fail after initiation reports first")
		}
		b.c.Fail("LATER")
		<-drainCtx.Done()
		rep, _ := b.finish()
		wantEq(t, "trigger", rep.Trigger, TriggerSigterm)
		wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonRuntimeFailure, ts(time.Second)})
		wantEq(t, "failure code", rep.FailureCode, "DISPATCHER_PANIC")
		wantActions(t, rep, "admission completed/not_attempted", "drain cancelled_by_force/completed",
			"close cancelled_by_force/completed")
		wantEq(t, "completion", rep.Completion, Failed)
	})
}

// TestSD3_RootAnchoredAtInitiation: initiated at 0 with a 10 s budget, the
// coordinator first gets going at 20; Hr = 10 is past, and a fresh 30 s
// root installed then changes nothing.
func TestSD3_RootAnchoredAtInitiation(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.opts.ShutdownTimeout = 10 * time.Second
		b.opts.SettlementTimeout = time.Minute
		b.jrn.hold = make(chan struct{})
		b.jrn.held = make(chan struct{})
		b.owned("db")
	})
	b.c.Initiate(TriggerSigterm)
	<-b.jrn.held // the coordinator is held in its first record
	b.clk.Advance(20 * time.Second)
	b.c.Install(deadlines.NewRoot(ts(sec(20)), 30*time.Second))
	b.c.Initiate(TriggerAPI)
	root := b.c.Root()
	wantTime(t, "start", root.Start(), t0)
	wantTime(t, "G", root.G(), ts(sec(8)))
	wantTime(t, "Hr", root.Hr(), ts(sec(10)))
	close(b.jrn.hold)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantActions(t, rep,
		"admission timed_out/timed_out", "drain timed_out/timed_out", "close timed_out/timed_out",
		"owned-resources timed_out/not_attempted")
	// Admission still closes, force is still published; nothing is waited for.
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "ForceAttempts", "Revoke"})
	wantEq(t, "initiated at", rep.InitiatedAt, t0)
	wantEq(t, "trigger", rep.Trigger, TriggerSigterm)
	wantEq(t, "budget", rep.Budget, 10*time.Second)
	b.jrn.mu.Lock()
	init := b.jrn.events[0].(Initiated)
	b.jrn.mu.Unlock()
	wantTime(t, "recorded Hr", init.Hr, ts(sec(10)))
	for _, r := range b.eng.roots {
		wantTime(t, "engine Hr", r.Hr(), ts(sec(10)))
	}
}

// TestSD4_ZeroLengthRoot: a harness's zero-length root makes every action
// graceful TimedOut; force is published but no forced cleanup is waited
// for, and the report is Incomplete.
func TestSD4_ZeroLengthRoot(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.owned("db") })
	b.c.Install(deadlines.NewRoot(t0, 0))
	b.c.Initiate(TriggerAPI)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantActions(t, rep,
		"admission timed_out/timed_out", "drain timed_out/timed_out", "close timed_out/timed_out",
		"owned-resources timed_out/not_attempted")
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "ForceAttempts", "Revoke"})
	wantEq(t, "force reason", b.eng.forces[0], forceCall{deadlines.ReasonShutdownDeadline, t0})
	wantEq(t, "budget", rep.Budget, time.Duration(0))
	wantSlice(t, "closed", b.closedNames(), nil)
	wantEq(t, "records", len(b.jrn.records()), len(allPhases))
}

// TestSD5_InstallOnlyShortens: roots with hard cutoffs 100 ms, 40 ms and
// 60 s installed while the drain waits for G: it ends at the shortened G,
// once, and nothing restarts.
func TestSD5_InstallOnlyShortens(t *testing.T) {
	t.Parallel()
	b, drainCtx := blockedDrain(t, TriggerSigterm)
	for _, total := range []time.Duration{ms(100), ms(40), 60 * time.Second} {
		b.c.Install(deadlines.NewRoot(t0, total))
	}
	root := b.c.Root()
	wantTime(t, "Hr", root.Hr(), ts(ms(40)))
	wantTime(t, "G", root.G(), ts(ms(30)))
	wantTime(t, "start", root.Start(), t0)
	wantEq(t, "total", root.Total(), 30*time.Second)
	wantTime(t, "engine Hr", b.eng.root().Hr(), ts(ms(40)))

	b.clk.Advance(ms(30))
	<-drainCtx.Done()
	b.entered(&b.eng.await)
	// F(30 ms) = 30 + min(10 × 3/4, 1000) = 37.5 ms; ForceDeadline(30 ms) =
	// min(30 + min(10, 10), 40) = 40 ms.
	wantTime(t, "owner cutoff", b.eng.latest[0], ts(ms(37.5)))
	b.wantNext(ts(ms(37.5))) // the final abort, before the force deadline 40 ms
	b.eng.await.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantEq(t, "drain calls", b.eng.drain.calls, 1)
	wantActions(t, rep, "admission completed/not_attempted", "drain timed_out/completed", "close timed_out/completed")
	wantEq(t, "budget", rep.Budget, 30*time.Second)
}

// TestSD16_ReleaseOrderAndOnce: owned resources close once each in reverse
// order of hand-over, then the signal monitor, then telemetry is flushed
// and closed; six actions at most.
func TestSD16_ReleaseOrderAndOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.owned("a", "b", "c")
		b.opts.SignalMonitorStopFunc = b.closer("signals", nil)
		b.opts.Telemetry = &Telemetry{FlushFunc: b.closer("flush", nil), CloseFunc: b.closer("telemetry", nil)}
	})
	b.c.Initiate(TriggerSigint)
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	b.c.Shutdown(context.Background())
	wantSlice(t, "closed", b.closedNames(), []string{"c", "b", "a", "signals", "flush", "telemetry"})
	wantActions(t, rep,
		"admission completed/not_attempted", "drain completed/not_attempted", "close completed/not_attempted",
		"owned-resources completed/not_attempted", "signal-monitor completed/not_attempted",
		"telemetry completed/not_attempted")
	wantEq(t, "actions", len(rep.Actions), ActionsMax)
	wantEq(t, "dependencies", rep.Dependencies, Dependencies{rrAll, rrAll, rrAll})
	wantEq(t, "completion", rep.Completion, GracefulCompleted)
	b.jrn.mu.Lock()
	var fin PhaseFinished
	for _, e := range b.jrn.events {
		if f, ok := e.(PhaseFinished); ok && f.Phase == PhaseReleaseResources {
			fin = f
		}
	}
	b.jrn.mu.Unlock()
	if !reflect.DeepEqual(fin.Actions, rep.Actions[3:]) {
		t.Fatalf("phase 5 record actions %v, want %v", fin.Actions, rep.Actions[3:])
	}
}

// TestSD18_BarrierWithholdsOwnedResources: close evidence not proven keeps
// owned resources and telemetry undisposed; the signal monitor still stops
// (SD-31 g).
func TestSD18_BarrierWithholdsOwnedResources(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.closeEv.err = errBoom
		b.owned("db")
		b.opts.SignalMonitorStopFunc = b.closer("signals", nil)
		b.opts.Telemetry = &Telemetry{FlushFunc: b.closer("flush", nil)}
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantSlice(t, "closed", b.closedNames(), []string{"signals"})
	wantActions(t, rep,
		"admission completed/not_attempted", "drain completed/not_attempted", "close failed/not_attempted",
		"owned-resources timed_out/not_attempted", "signal-monitor completed/not_attempted",
		"telemetry timed_out/not_attempted")
	wantEq(t, "close reconciled", rep.CloseReconciled, false)
	wantEq(t, "drain reconciled", rep.DrainReconciled, true)
	wantEq(t, "dependencies", rep.Dependencies, Dependencies{
		OwnedResources: ResourceReport{Owned: true}, SignalMonitor: rrAll, Telemetry: ResourceReport{Owned: true},
	})
}

// TestSD18_UnresolvedSettlementWithholds: an unconfirmed settlement
// (DL-39) leaves the drain unreconciled although every goroutine joined,
// and close evidence alone does not make CloseReconciled (SD-15).
func TestSD18_UnresolvedSettlementWithholds(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.counters = Counters{Drained: 2, Unresolved: 1, Joined: true}
		b.owned("db")
	})
	b.c.Initiate(TriggerSigterm)
	rep, _ := b.finish()
	wantEq(t, "drain reconciled", rep.DrainReconciled, false)
	wantEq(t, "CloseEvidence told", b.eng.closeReq[0].DrainReconciled, false)
	wantEq(t, "unresolved", rep.Unresolved, 1)
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/not_attempted")
	wantEq(t, "close reconciled", rep.CloseReconciled, false)
	wantSlice(t, "closed", b.closedNames(), nil)
	wantEq(t, "completion", rep.Completion, Incomplete)
}

// TestSD18_WithheldCloseTimesOut: a close evidence that withholds the
// internal queues because the drain was not reconciled ends TimedOut, as a
// withheld action does (SD-18), not Failed (SD-28: Failed means a close
// call returned an error).
func TestSD18_WithheldCloseTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.counters = Counters{Drained: 1, Unresolved: 1, Joined: true}
		b.eng.closeEv.err = fmt.Errorf("queues not closed: %w", ErrWithheld)
	})
	b.c.Initiate(TriggerSigterm)
	rep, _ := b.finish()
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close timed_out/not_attempted")
	wantEq(t, "completion", rep.Completion, Incomplete)
}

// TestSD31d_OwnedCloseError: a close that returns an error is terminal but
// not successful; the next resource still closes; the report is Failed.
func TestSD31d_OwnedCloseError(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.owned("a")
		b.opts.OwnedResources = append(b.opts.OwnedResources, OwnedResource{Name: "b", CloseFunc: b.closer("b", errBoom)})
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait = %v, want ErrFailed", err)
	}
	wantSlice(t, "closed", b.closedNames(), []string{"b", "a"})
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{true, true, true, false})
	wantEq(t, "failure code", rep.FailureCode, CodeOwnedResourceCloseFailed)
	wantEq(t, "completion", rep.Completion, Failed)
}

// TestSD28_CloseErrorTextGoesToDebugRecords: the report keeps only the
// failure code, so the error and panic text of each failed phase-5 call
// goes to a debug record inside phase 5, naming the call, clipped to
// DiagnosticBytesMax on a rune boundary; a close that succeeds gets none.
func TestSD28_CloseErrorTextGoesToDebugRecords(t *testing.T) {
	t.Parallel()
	// 2 bytes a rune after an odd prefix: the cut at DiagnosticBytesMax
	// falls inside a rune.
	long := errors.New("x" + strings.Repeat("é", DiagnosticBytesMax))
	b := setup(t, func(b *testBundle) {
		b.opts.OwnedResources = []OwnedResource{
			{Name: "db", CloseFunc: b.closer("db", errBoom)},
			{Name: "cache", CloseFunc: func(context.Context) error { panic("cache close panics") }},
			{Name: "spool", CloseFunc: b.closer("spool", long)},
			{Name: "ok", CloseFunc: b.closer("ok", nil)},
		}
		b.opts.SignalMonitorStopFunc = b.closer("signals", errBoom)
		b.opts.Telemetry = &Telemetry{FlushFunc: b.closer("flush", errBoom), CloseFunc: b.closer("telemetry", nil)}
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait = %v, want ErrFailed", err)
	}
	wantEq(t, "failure code", rep.FailureCode, CodeOwnedResourceCloseFailed)
	clipped := "failed: x" + strings.Repeat("é", (DiagnosticBytesMax-len("failed: x"))/2)
	wantEq(t, "clipped length", len(clipped), DiagnosticBytesMax-1)
	wantSlice(t, "records", b.jrn.records(), []string{
		"initiated sigterm",
		"started close_admission", "finished close_admission completed/not_attempted",
		"started drain", "finished drain completed/not_attempted",
		"started force", "finished force completed/not_attempted",
		"started close_evidence", "finished close_evidence completed/not_attempted",
		"started release_resources",
		"debug owned-resources/spool OWNED_RESOURCE_CLOSE_FAILED: " + clipped,
		"debug owned-resources/cache OWNED_RESOURCE_CLOSE_FAILED: panicked: cache close panics",
		"debug owned-resources/db OWNED_RESOURCE_CLOSE_FAILED: failed: boom",
		"debug signal-monitor SIGNAL_MONITOR_STOP_FAILED: failed: boom",
		"debug telemetry/flush TELEMETRY_CLOSE_FAILED: failed: boom",
		"finished release_resources panicked/not_attempted",
		"started publish_report", "report failed", "finished publish_report completed/not_attempted",
	})
}

// TestSD30_PanickingCloseIsFailed: a panicking close is recorded Panicked,
// terminal and unsuccessful; the report is Failed, not a crash.
func TestSD30_PanickingCloseIsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.opts.OwnedResources = []OwnedResource{
			{Name: "a", CloseFunc: b.closer("a", nil)},
			{Name: "b", CloseFunc: func(context.Context) error { panic("close panics") }},
		}
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait = %v, want ErrFailed", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources panicked/not_attempted")
	wantSlice(t, "closed", b.closedNames(), []string{"a"})
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{true, true, true, false})
	wantEq(t, "completion", rep.Completion, Failed)
}

// TestSD16_SD37_HangingCloseAbandonedAtItsShare: a close that ignores its
// context is abandoned at the end of its share of the root time, never
// waited for past it (SD-2, SD-9); what was handed over before it is not
// closed; telemetry is withheld; the report is Incomplete and stays as
// published when the close returns later (SD-32).
func TestSD16_SD37_HangingCloseAbandonedAtItsShare(t *testing.T) {
	t.Parallel()
	hang := (&step{block: true, ignoreCtx: true}).init()
	var mu sync.Mutex
	b := setup(t, func(b *testBundle) {
		b.owned("a")
		b.opts.OwnedResources = append(b.opts.OwnedResources, OwnedResource{
			Name: "b", CloseFunc: func(ctx context.Context) error { return hang.run(&mu, ctx) },
		})
		b.opts.Telemetry = &Telemetry{CloseFunc: b.closer("telemetry", nil)}
	})
	b.c.Initiate(TriggerSigterm)
	closeCtx := b.entered(hang)
	// Three calls in phase 5 (b, a, telemetry's close): b's share is
	// 0 + (30 − 0)/3 = 10 s, before G = 28.
	b.wantNext(ts(sec(10)))
	b.clk.Advance(10 * time.Second)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantEq(t, "close ctx cause", context.Cause(closeCtx), errShareEnded)
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/timed_out", "telemetry timed_out/not_attempted")
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{Owned: true, Started: true})
	wantEq(t, "runtime joined", rep.RuntimeJoined, false)
	wantEq(t, "quarantined", rep.Quarantined, 1)
	wantEq(t, "elapsed", rep.Elapsed, 10*time.Second)
	wantSlice(t, "closed", b.closedNames(), nil)
	// SD-28: the journal names the close that was abandoned; no failure
	// code, since nothing returned an error.
	if !slices.Contains(b.jrn.records(), "debug owned-resources/b SHUTDOWN_CLOSE_ABANDONED: "+
		"did not return by its deadline (its share of the budget or the force deadline); abandoned, still running (SD-37)") {
		t.Fatalf("no debug record for the abandoned close: %q", b.jrn.records())
	}
	wantEq(t, "failure code", rep.FailureCode, "")

	// The close returns late: nothing is rewritten.
	hang.release <- nil
	for range 3 {
		b.c.Shutdown(context.Background())
		b.c.Force(TriggerSigquit)
		if got := b.c.Report(); !reflect.DeepEqual(got, rep) {
			t.Fatalf("report changed after a late return:\n got %+v\nwant %+v", got, rep)
		}
	}
}

// TestSD16_SharesLeaveTimeForTheSignalMonitor: phase 5's calls share the
// root time left (SD-9): an owned close that hangs takes only its share,
// the resource handed over before it stays open (it may still use it,
// SD-37), and the signal monitor still stops, on its graceful path, in
// the time the skipped close leaves it.
func TestSD16_SharesLeaveTimeForTheSignalMonitor(t *testing.T) {
	t.Parallel()
	hang := (&step{block: true, ignoreCtx: true}).init()
	t.Cleanup(func() { close(hang.release) })
	var mu sync.Mutex
	b := setup(t, func(b *testBundle) {
		b.opts.ShutdownTimeout = 8 * time.Second
		b.owned("db")
		b.opts.OwnedResources = append(b.opts.OwnedResources, OwnedResource{
			Name: "cache", CloseFunc: func(ctx context.Context) error { return hang.run(&mu, ctx) },
		})
		b.opts.SignalMonitorStopFunc = b.closer("signals", nil)
	})
	b.c.Initiate(TriggerSigterm)
	b.entered(hang)
	// Calls left: cache, db, signals → cache's share ends at 8/3 s.
	b.wantNext(ts(time.Duration(8 * time.Second / 3)))
	b.clk.Advance(3 * time.Second)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantSlice(t, "closed", b.closedNames(), []string{"signals"})
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/timed_out", "signal-monitor completed/not_attempted")
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{Owned: true, Started: true})
	wantEq(t, "signal monitor", rep.Dependencies.SignalMonitor, rrAll)
	wantEq(t, "elapsed", rep.Elapsed, 3*time.Second)
}

// TestSD21_ConcurrentObserversShareTheResult: concurrent Shutdown and Wait
// calls return the same error value.
func TestSD21_ConcurrentObserversShareTheResult(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.closeEv.err = errBoom
		b.eng.drain.block = true
	})
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			if i%2 == 0 {
				errs[i] = b.c.Shutdown(context.Background())
			} else {
				errs[i] = b.c.Wait(context.Background())
			}
		})
	}
	b.c.Initiate(TriggerAPI)
	b.entered(&b.eng.drain)
	b.eng.drain.release <- nil
	wg.Wait()
	if errs[0] == nil {
		t.Fatalf("Shutdown = nil, want an Incomplete result")
	}
	for i, err := range errs {
		if err != errs[0] {
			t.Fatalf("observer %d got %v (%p), observer 0 got %v (%p)", i, err, err, errs[0], errs[0])
		}
	}
	if err := b.c.Shutdown(context.Background()); err != errs[0] {
		t.Fatalf("a later Shutdown got another error value")
	}
}

// TestSD21_ObserverCancelDoesNotAbort: an observer's ctx ending returns its
// error while the shutdown carries on under the root.
func TestSD21_ObserverCancelDoesNotAbort(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) { b.eng.drain.block = true })
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.c.Shutdown(ctx) }()
	drainCtx := b.entered(&b.eng.drain)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if drainCtx.Err() != nil || b.c.Report() != nil {
		t.Fatalf("cancelling an observer ended the drain or published a report")
	}
	wantTime(t, "Hr", b.c.Root().Hr(), ts(sec(30)))
	b.eng.drain.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantEq(t, "completion", rep.Completion, GracefulCompleted)
}

// TestSD11_JournalFailureSkipsRecords: after a failed append the phases
// still run in order, later records are skipped, CloseReconciled is false
// and the result carries the journal error.
func TestSD11_JournalFailureSkipsRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.jrn.failAt = 4 // started drain
		b.owned("db")
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, errBoom) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want the journal error and ErrIncomplete", err)
	}
	wantSlice(t, "records", b.jrn.records(), allPhases[:3])
	wantEq(t, "appends tried", b.jrn.appends, 4)
	wantEq(t, "journal closes", b.jrn.closed, 1)
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "Drain", "CloseEvidence"})
	wantEq(t, "close reconciled", rep.CloseReconciled, false)
	wantSlice(t, "closed", b.closedNames(), nil)
}

// TestSD17_ReportAppendFailure: a failed report append or journal close is
// Shutdown's error; the in-memory report stays as published.
func TestSD17_ReportAppendFailure(t *testing.T) {
	t.Parallel()
	t.Run("append", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(b *testBundle) { b.jrn.failKind = "shutdown_report" })
		b.c.Initiate(TriggerSigterm)
		rep, err := b.finish()
		if !errors.Is(err, errBoom) {
			t.Fatalf("Wait = %v, want the append error", err)
		}
		if !rep.IsSuccess() || !rep.CloseReconciled {
			t.Fatalf("report %+v, want the successful report published before the append", rep)
		}
		wantSlice(t, "records", b.jrn.records(), allPhases[:12])
		wantEq(t, "journal closes", b.jrn.closed, 1)
	})
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(b *testBundle) { b.jrn.closeErr = errBoom })
		b.c.Initiate(TriggerSigterm)
		rep, err := b.finish()
		if !errors.Is(err, errBoom) || errors.Is(err, ErrIncomplete) || errors.Is(err, ErrFailed) {
			t.Fatalf("Wait = %v, want only the close error", err)
		}
		wantEq(t, "completion", rep.Completion, GracefulCompleted)
		wantSlice(t, "records", b.jrn.records(), allPhases)
	})
}

func TestSD1_ShutdownTimeoutRange(t *testing.T) {
	t.Parallel()
	if err := deadlines.ValidateShutdownTimeout(0); err == nil {
		t.Fatalf("ValidateShutdownTimeout(0) accepted")
	}
	tests := []struct {
		timeout time.Duration
		ok      bool
		want    time.Duration
	}{
		{0, true, 30 * time.Second}, // absent
		{-time.Second, false, 0},
		{time.Second - 1, false, 0},
		{time.Second, true, time.Second},
		{3_153_600_000 * time.Second, true, 3_153_600_000 * time.Second},
		{3_153_600_001 * time.Second, false, 0},
	}
	for _, tt := range tests {
		c, err := New(Options{Clock: clocktest.New(t0), Engine: newFakeEngine(), ShutdownTimeout: tt.timeout})
		if (err == nil) != tt.ok {
			t.Fatalf("ShutdownTimeout %v: New error %v, want ok %v", tt.timeout, err, tt.ok)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, deadlines.ErrOutOfRange) {
				t.Fatalf("ShutdownTimeout %v: %v does not match ErrInvalidOptions and ErrOutOfRange", tt.timeout, err)
			}
			var re *deadlines.RangeError
			if !errors.As(err, &re) || re.Field != "ShutdownTimeout" {
				t.Fatalf("ShutdownTimeout %v: %v does not name the field", tt.timeout, err)
			}
			continue
		}
		wantEq(t, "total", c.total, tt.want)
	}
}

func TestNewRejectsIncompleteOptions(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(t0)
	for _, o := range []Options{
		{Engine: newFakeEngine()},
		{Clock: clk},
		{Clock: clk, Engine: newFakeEngine(), SettlementTimeout: time.Hour},
		{Clock: clk, Engine: newFakeEngine(), OwnedResources: []OwnedResource{{Name: "db"}}},
		{Clock: clk, Engine: newFakeEngine(), Telemetry: &Telemetry{}},
	} {
		if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

// TestDL41_SD24_FinalAbortAtTheOwnerCutoff: force at 5 with a 30 s root
// revokes nothing at once; at the forced owner cutoff F(5) = 6 the
// coordinator revokes (the engine then cancels and releases), keeps
// waiting for the real joins until the drain's force deadline 7, and
// starts close evidence only after the join.
func TestDL41_SD24_FinalAbortAtTheOwnerCutoff(t *testing.T) {
	t.Parallel()
	b, awaitCtx := forcedAtFive(t, TriggerSigterm)
	b.wantNext(ts(sec(6)))
	b.clk.Advance(ms(999)) // 5.999: cooperating attempts may still settle
	b.clk.BlockUntil(1)
	wantSlice(t, "engine calls before the cutoff", b.eng.calls(),
		[]string{"CloseAdmission", "Drain", "ForceAttempts", "AwaitJoin"})

	b.clk.Advance(ms(1)) // 6: the final abort
	wantTime(t, "revoked at", <-b.eng.revoked, ts(sec(6)))
	wantEq(t, "revoke reason", b.eng.revokes[0].reason, deadlines.ReasonForcedShutdown)
	b.clk.BlockUntil(1)
	b.wantNext(ts(sec(7)))
	if awaitCtx.Err() != nil {
		t.Fatalf("the joins' wait ended at the revocation")
	}
	b.clk.Advance(ms(500))
	wantSlice(t, "engine calls before the join", b.eng.calls(),
		[]string{"CloseAdmission", "Drain", "ForceAttempts", "AwaitJoin", "Revoke"})
	b.eng.await.release <- nil // the goroutines returned at 6.5
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "engine calls", b.eng.calls(),
		[]string{"CloseAdmission", "Drain", "ForceAttempts", "AwaitJoin", "Revoke", "CloseEvidence"})
	wantActions(t, rep, "admission completed/not_attempted", "drain cancelled_by_force/completed",
		"close cancelled_by_force/completed")
	wantEq(t, "revokes", len(b.eng.revokes), 1)
}

// TestDL41_JoinedBeforeTheCutoffRevokesNothing: attempts that settle and
// join in their cooperative windows leave nothing to revoke.
func TestDL41_JoinedBeforeTheCutoffRevokesNothing(t *testing.T) {
	t.Parallel()
	b, _ := forcedAtFive(t, TriggerSigterm)
	b.clk.Advance(ms(250)) // C = 5.25
	b.eng.await.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "Drain", "ForceAttempts", "AwaitJoin", "CloseEvidence"})
	wantEq(t, "completion", rep.Completion, ForcedCompleted)
}

// TestDL41_AbortInstants pins the final abort's instant (SD-10, SD-8,
// SD-14): the forced owner cutoff, clamped to Hr and to the drain's force
// deadline.
func TestDL41_AbortInstants(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		total         time.Duration
		e, latest     time.Duration
		want, wantEnd time.Duration
	}{
		{"30 s root, force at 5", 30 * time.Second, sec(5), sec(6), sec(6), sec(7)},
		{"30 s root, G = 28", 30 * time.Second, sec(28), sec(29), sec(29), sec(30)},
		{"1 s root, force at 0.2", time.Second, ms(200), ms(800), ms(800), ms(800)},
		{"no attempt running", 30 * time.Second, sec(5), -1, sec(6), sec(7)},
		{"an attempt's own timeout later", 30 * time.Second, sec(5), sec(6.5), sec(6.5), sec(7)},
		{"zero-length root", 0, 0, -1, 0, 0},
	} {
		root := deadlines.NewRoot(t0, tt.total)
		var latest time.Time
		if tt.latest >= 0 {
			latest = ts(tt.latest)
		}
		end := root.DrainForceDeadline(ts(tt.e), latest)
		wantTime(t, tt.name+": end", end, ts(tt.wantEnd))
		wantTime(t, tt.name+": abort", abortAt(root, ts(tt.e), latest, end), ts(tt.want))
	}
}

// TestSD37_StragglersAreNamedBeforeTheReport: when the engine's counters
// show handlers that have not returned once phase 5 is over, the
// coordinator appends one diagnostic per attempt the engine names (at
// most StragglersMax, then one that counts the rest), before the report,
// which only counts them. A shutdown whose counters are clean names none,
// whatever the engine would list.
func TestSD37_StragglersAreNamedBeforeTheReport(t *testing.T) {
	t.Parallel()
	var named []Diagnostic
	for i := range StragglersMax + 2 {
		named = append(named, Diagnostic{Subject: fmt.Sprintf("job_%02d", i), Code: CodeHandlerNotReturned, Message: "had not returned"})
	}
	for _, quarantined := range []bool{true, false} {
		b := setup(t, func(b *testBundle) {
			b.eng.drain.block = true
			b.eng.await.block = true
			b.eng.stragglers = named
		})
		b.c.Initiate(TriggerSigterm)
		b.entered(&b.eng.drain)
		b.clk.Advance(28 * time.Second)
		awaitCtx := b.entered(&b.eng.await)
		if quarantined {
			b.eng.setCounters(Counters{Quarantined: 2})
		}
		b.clk.Advance(2 * time.Second)
		<-awaitCtx.Done()
		b.finish()
		recs := b.jrn.records()
		var debug []string
		report := -1
		for i, r := range recs {
			switch {
			case strings.HasPrefix(r, "debug "):
				if report >= 0 {
					t.Fatalf("a diagnostic after the report: %v", recs)
				}
				debug = append(debug, r)
			case strings.HasPrefix(r, "report "):
				report = i
			}
		}
		if !quarantined {
			if len(debug) != 0 {
				t.Fatalf("clean counters, diagnostics %v", debug)
			}
			continue
		}
		if len(debug) != StragglersMax+1 || debug[0] != "debug job_00 "+CodeHandlerNotReturned+": had not returned" ||
			debug[StragglersMax] != "debug drain "+CodeHandlerNotReturned+": 2 more attempts whose handlers had not returned are not named" {
			t.Fatalf("diagnostics (%d): %q", len(debug), debug)
		}
	}
}
