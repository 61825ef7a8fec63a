package shutdown

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/deadlines"
)

// panickyAdmission is a fakeEngine whose CloseAdmission panics.
type panickyAdmission struct{ *fakeEngine }

func (e panickyAdmission) CloseAdmission() int {
	e.note("CloseAdmission")
	panic("admission panics")
}

// TestSD28_AdmissionPanicIsRecorded: a panic while closing admission is
// the admission action's Panicked outcome, on the graceful path before G
// and on the force path under force (SD-28); the panic text never reaches
// the report, and a panicked action is never a success (SD-30).
func TestSD28_AdmissionPanicIsRecorded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		trigger Trigger
		action  string
		record  string
	}{
		{TriggerSigterm, "admission panicked/not_attempted", "finished close_admission panicked/not_attempted"},
		{TriggerSigquit, "admission cancelled_by_force/panicked", "finished close_admission cancelled_by_force/panicked"},
	} {
		t.Run(tt.trigger.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(b *testBundle) { b.opts.Engine = panickyAdmission{b.eng} })
			b.c.Initiate(tt.trigger)
			rep, err := b.finish()
			if !errors.Is(err, ErrIncomplete) {
				t.Fatalf("Wait = %v, want ErrIncomplete", err)
			}
			wantEq(t, "admission action", actionString(rep.Actions[0]), tt.action)
			wantEq(t, "completion", rep.Completion, Incomplete)
			wantEq(t, "coordinator complete", rep.CoordinatorComplete, false)
			if !slices.Contains(b.jrn.records(), tt.record) {
				t.Fatalf("records %q lack %q", b.jrn.records(), tt.record)
			}
		})
	}
}

func actionString(a Action) string {
	return a.Component + " " + a.Graceful.String() + "/" + a.Forced.String()
}

// TestSD27_QuarantinedGoroutineIsNotDrainReconciled: a drain that returned
// while the engine still counts a quarantined goroutine is not
// DrainReconciled (SD-27: every attempt, cleanup and hook goroutine
// joined), so close evidence is told so and owned resources, which such a
// goroutine may still use, stay open (SD-18).
func TestSD27_QuarantinedGoroutineIsNotDrainReconciled(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.counters = Counters{Quarantined: 1}
		b.owned("db")
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantEq(t, "DrainReconciled", rep.DrainReconciled, false)
	wantEq(t, "CloseReconciled", rep.CloseReconciled, false)
	wantEq(t, "DrainReconciled given to CloseEvidence", b.eng.closeReq[0].DrainReconciled, false)
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/not_attempted")
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{Owned: true})
	wantSlice(t, "closed", b.closedNames(), nil)
}

// TestSD17_FirstJournalErrorIsTheResult: when the report append fails and
// the journal's close fails too, Shutdown returns the append's error, the
// first one, and the journal is still closed once.
func TestSD17_FirstJournalErrorIsTheResult(t *testing.T) {
	t.Parallel()
	errClose := errors.New("close fails")
	b := setup(t, func(b *testBundle) {
		b.jrn.failKind = "shutdown_report"
		b.jrn.closeErr = errClose
	})
	b.c.Initiate(TriggerSigterm)
	_, err := b.finish()
	if !errors.Is(err, errBoom) || errors.Is(err, errClose) {
		t.Fatalf("Wait = %v, want the report append's error", err)
	}
	wantEq(t, "journal closes", b.jrn.closed, 1)
}

// TestSD28_CutOffAfterAFailedCloseIsTimedOut: the graceful outcome of an
// action is the worst of its calls: a close that failed, then one still
// running at G, leave the owned-resources action graceful TimedOut, not
// Failed, and its force path reports how the running close ended.
func TestSD28_CutOffAfterAFailedCloseIsTimedOut(t *testing.T) {
	t.Parallel()
	hang := (&step{block: true, ignoreCtx: true}).init()
	var mu sync.Mutex
	b := setup(t, func(b *testBundle) {
		b.opts.OwnedResources = []OwnedResource{
			{Name: "a", CloseFunc: func(ctx context.Context) error { return hang.run(&mu, ctx) }},
			{Name: "b", CloseFunc: b.closer("b", errBoom)},
		}
	})
	b.c.Initiate(TriggerSigterm)
	// b closes first (reverse order of hand-over) and fails; a runs past G.
	b.entered(hang)
	b.wantNext(ts(sec(28)))
	b.clk.Advance(28 * time.Second)
	hang.release <- nil
	rep, err := b.finish()
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait = %v, want ErrFailed", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/completed")
	wantEq(t, "failure code", rep.FailureCode, CodeOwnedResourceCloseFailed)
	wantEq(t, "forced", rep.Forced, true)
	if !slices.Contains(b.jrn.records(), "finished release_resources timed_out/completed") {
		t.Fatalf("records %q lack phase 5's folded outcomes", b.jrn.records())
	}
}

// TestSD18_TelemetryWaitsForOwnedResourcesConfirmed: an owned close
// abandoned at the end of its share leaves the owned resources
// unconfirmed, even if it returns before telemetry's turn: owned telemetry
// is then withheld and stays undisposed (SD-18), while the signal monitor,
// whose barrier is only the end of the owned-resources action, still stops.
func TestSD18_TelemetryWaitsForOwnedResourcesConfirmed(t *testing.T) {
	t.Parallel()
	hang := (&step{block: true, ignoreCtx: true}).init()
	sig := (&step{block: true}).init()
	var mu sync.Mutex
	b := setup(t, func(b *testBundle) {
		b.opts.OwnedResources = []OwnedResource{
			{Name: "db", CloseFunc: func(ctx context.Context) error { return hang.run(&mu, ctx) }},
		}
		b.opts.SignalMonitorStopFunc = func(ctx context.Context) error { return sig.run(&mu, ctx) }
		b.opts.Telemetry = &Telemetry{CloseFunc: b.closer("telemetry", nil)}
	})
	b.c.Initiate(TriggerSigterm)
	b.entered(hang)
	// Three calls in phase 5: db's share is 0 + (30 − 0)/3 = 10 s.
	b.wantNext(ts(sec(10)))
	b.clk.Advance(10 * time.Second)
	<-sig.entered
	// The abandoned close returns while the signal monitor stops.
	hang.release <- nil
	<-b.c.abandoned[0].done
	sig.release <- nil
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
		"close completed/not_attempted", "owned-resources timed_out/timed_out",
		"signal-monitor completed/not_attempted", "telemetry timed_out/not_attempted")
	wantEq(t, "owned", rep.Dependencies.OwnedResources, ResourceReport{Owned: true, Started: true})
	wantEq(t, "telemetry", rep.Dependencies.Telemetry, ResourceReport{Owned: true})
	wantSlice(t, "closed", b.closedNames(), nil)
}

// TestDL16_DrainForceNotStampedBeforeTheDrainBegan: the coordinator is
// held in its first record until 1 s, so the drain begins at 1 s; a root
// installed then with G = 0.75 s ends the drain's graceful path at once.
// Force reaches the running attempts stamped at 1 s, when the graceful path
// ended, not at the earlier G: their owner cutoffs count from that instant
// (DL-16, DL-21, SD-5).
func TestDL16_DrainForceNotStampedBeforeTheDrainBegan(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		b.jrn.hold = make(chan struct{})
		b.jrn.held = make(chan struct{})
	})
	b.c.Initiate(TriggerSigterm)
	<-b.jrn.held
	b.clk.Advance(time.Second)
	close(b.jrn.hold)
	b.entered(&b.eng.drain)
	b.c.Install(deadlines.NewRoot(t0, time.Second)) // G = 0.75 s, Hr = 1 s
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantEq(t, "drain action", actionString(rep.Actions[1]), "drain timed_out/timed_out")
	b.eng.mu.Lock()
	forces := slices.Clone(b.eng.forces)
	b.eng.mu.Unlock()
	if len(forces) != 1 {
		t.Fatalf("ForceAttempts calls = %v, want one", forces)
	}
	wantEq(t, "reason", forces[0].reason, deadlines.ReasonShutdownDeadline)
	wantTime(t, "force instant", forces[0].at, ts(sec(1)))
}

// panickyJournal is a fakeJournal whose append of the drain's
// shutdown_phase_started record panics.
type panickyJournal struct{ *fakeJournal }

func (j panickyJournal) Append(ctx context.Context, e Event) error {
	if s, ok := e.(PhaseStarted); ok && s.Phase == PhaseDrain {
		panic("append panics")
	}
	return j.fakeJournal.Append(ctx, e)
}

// TestSD11_PanickingAppendIsAJournalFailure: an append that panics is a
// journal that cannot be written, like one that returns an error: the
// phases still run in order, their later records are skipped, the report
// shows CloseReconciled = false and owned resources stay open (SD-11,
// SD-18).
func TestSD11_PanickingAppendIsAJournalFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.opts.Journal = panickyJournal{b.jrn}
		b.owned("db")
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want ErrIncomplete", err)
	}
	wantSlice(t, "records", b.jrn.records(), allPhases[:3])
	wantSlice(t, "engine calls", b.eng.calls(), []string{"CloseAdmission", "Drain", "CloseEvidence"})
	wantEq(t, "close reconciled", rep.CloseReconciled, false)
	wantEq(t, "completion", rep.Completion, Incomplete)
	wantSlice(t, "closed", b.closedNames(), nil)
	wantEq(t, "journal closes", b.jrn.closed, 1)
}
