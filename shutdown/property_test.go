package shutdown

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/clock/clocktest"
)

// behaviour is how a scripted call ends.
type behaviour int

const (
	returnsNil behaviour = iota
	returnsErr
	panics
)

func drawBehaviour(t *rapid.T, label string) behaviour {
	return rapid.SampledFrom([]behaviour{returnsNil, returnsErr, panics}).Draw(t, label)
}

func (bh behaviour) step() step {
	return step{err: map[behaviour]error{returnsErr: errBoom}[bh], panics: bh == panics}
}

var (
	gracefulOutcomes = []Outcome{OutcomeCompleted, OutcomeFailed, OutcomePanicked, OutcomeTimedOut, OutcomeCancelledByForce}
	forcedOutcomes   = []Outcome{OutcomeNotAttempted, OutcomeCompleted, OutcomeFailed, OutcomePanicked, OutcomeTimedOut, OutcomeUnavailable}
	componentOrder   = []string{ComponentAdmission, ComponentDrain, ComponentClose, ComponentOwnedResources, ComponentSignalMonitor, ComponentTelemetry}
)

// TestSD11_SD30_AnyScenario runs whole shutdowns over engines, resources and
// journals that succeed, fail or panic in any combination, and checks the
// invariants of SD-11 (ordered, journaled phases), SD-18 (barriers), SD-28
// (outcome sets), SD-30 (one classification) and SD-32 (write-once).
func TestSD11_SD30_AnyScenario(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		eng := newFakeEngine()
		eng.drain = drawBehaviour(t, "drain").step()
		eng.await = drawBehaviour(t, "await").step()
		eng.closeEv = drawBehaviour(t, "closeEvidence").step()
		eng.released = rapid.IntRange(0, 3).Draw(t, "releasedUnstarted")
		eng.counters = Counters{
			Drained:     rapid.IntRange(0, 3).Draw(t, "drained"),
			Released:    rapid.IntRange(0, 3).Draw(t, "released"),
			Unresolved:  rapid.IntRange(0, 1).Draw(t, "unresolved"),
			Quarantined: rapid.IntRange(0, 1).Draw(t, "quarantined"),
			Joined:      rapid.Bool().Draw(t, "joined"),
		}
		jrn := &fakeJournal{failAt: rapid.IntRange(0, 20).Draw(t, "journalFailAt")}
		if rapid.Bool().Draw(t, "journalCloseFails") {
			jrn.closeErr = errBoom
		}

		var (
			mu     sync.Mutex
			closed []string
		)
		closer := func(name string, bh behaviour) func(context.Context) error {
			return func(context.Context) error {
				mu.Lock()
				closed = append(closed, name)
				mu.Unlock()
				switch bh {
				case returnsErr:
					return errBoom
				case panics:
					panic("close panics")
				}
				return nil
			}
		}
		opts := Options{Clock: clocktest.New(t0), Engine: eng, Journal: jrn}
		names := []string{"r0", "r1", "r2"}[:rapid.IntRange(0, 3).Draw(t, "owned")]
		for _, n := range names {
			opts.OwnedResources = append(opts.OwnedResources, OwnedResource{Name: n, CloseFunc: closer(n, drawBehaviour(t, n))})
		}
		expected := 3
		if len(names) > 0 {
			expected++
		}
		if rapid.Bool().Draw(t, "signalMonitor") {
			opts.SignalMonitorStopFunc = closer("signals", drawBehaviour(t, "signals"))
			expected++
		}
		if rapid.Bool().Draw(t, "telemetry") {
			opts.Telemetry = &Telemetry{CloseFunc: closer("telemetry", drawBehaviour(t, "telemetryClose"))}
			if rapid.Bool().Draw(t, "telemetryFlush") {
				opts.Telemetry.FlushFunc = closer("flush", drawBehaviour(t, "telemetryFlush"))
			}
			expected++
		}
		c, err := New(opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		trigger := Trigger(rapid.IntRange(1, 7).Draw(t, "trigger"))
		if rapid.Bool().Draw(t, "fail") {
			c.Fail("SOME_FAILURE")
		} else {
			c.Initiate(trigger)
		}
		result := c.Wait(context.Background())
		rep := c.Report()
		if rep == nil {
			t.Fatalf("no report")
		}

		// SD-11: the records are a prefix of the one valid order.
		recs := jrn.records()
		jrn.mu.Lock()
		events := slices.Clone(jrn.events)
		jrn.mu.Unlock()
		if len(events) > 0 {
			if _, ok := events[0].(Initiated); !ok {
				t.Fatalf("first record %s", recs[0])
			}
		}
		phase, open, forces := Phase(0), false, 0
		for i, e := range events[min(1, len(events)):] {
			switch e := e.(type) {
			case PhaseStarted:
				if open || e.Phase != phase+1 {
					t.Fatalf("record %d %q out of order: %q", i+1, recs[i+1], recs)
				}
				phase, open = e.Phase, true
			case PhaseFinished:
				if !open || e.Phase != phase {
					t.Fatalf("record %d %q out of order: %q", i+1, recs[i+1], recs)
				}
				open = false
			case ForceRequested:
				forces++
			case ReportPublished:
				if phase != PhasePublishReport || !open || !reflect.DeepEqual(e.Report, *rep) {
					t.Fatalf("report record misplaced or different: %q", recs)
				}
			case Diagnostic:
				// SD-28: error and panic text go to debug records, inside
				// phase 5, bounded, never into the report.
				if phase != PhaseReleaseResources || !open || e.Subject == "" || e.Code == "" ||
					e.Message == "" || len(e.Message) > DiagnosticBytesMax {
					t.Fatalf("debug record %q misplaced or malformed: %q", recs[i+1], recs)
				}
			default:
				t.Fatalf("unexpected record %q", recs[i+1])
			}
		}
		if forces > 1 {
			t.Fatalf("%d force records", forces)
		}
		if jrn.failAt == 0 && (phase != PhasePublishReport || open) {
			t.Fatalf("records end early: %q", recs)
		}

		// SD-27, SD-28: one entry per action, in order, from the allowed sets.
		if len(rep.Actions) != expected || len(rep.Actions) > ActionsMax {
			t.Fatalf("%d actions, want %d", len(rep.Actions), expected)
		}
		if !rep.CoordinatorAccounted {
			t.Fatalf("not accounted")
		}
		last := -1
		for _, a := range rep.Actions {
			i := slices.Index(componentOrder, a.Component)
			if i <= last {
				t.Fatalf("action %s out of order", a.Component)
			}
			last = i
			if !slices.Contains(gracefulOutcomes, a.Graceful) || !slices.Contains(forcedOutcomes, a.Forced) {
				t.Fatalf("action %+v outside SD-28's sets", a)
			}
		}

		// SD-30: classified once, by Classify.
		again := *rep.Clone()
		again.Completion = Incomplete
		if got := Classify(again); got != rep.Completion {
			t.Fatalf("Completion %s, Classify says %s", rep.Completion, got)
		}
		if rep.IsSuccess() && (rep.FailureCode != "" || !rep.Dependencies.Successful() || !rep.CloseReconciled ||
			!rep.RuntimeJoined || rep.Quarantined > 0 || rep.Unresolved > 0) {
			t.Fatalf("success without evidence: %+v", rep)
		}
		journalOK := jrn.closeErr == nil && (jrn.failAt == 0 || jrn.failAt > jrn.appends)
		if (result == nil) != (rep.IsSuccess() && journalOK) {
			t.Fatalf("result %v with success %v, journal ok %v", result, rep.IsSuccess(), journalOK)
		}

		// SD-16, SD-18: owned resources close once each, in reverse order,
		// only behind a proven drain and close.
		mu.Lock()
		got := slices.Clone(closed)
		mu.Unlock()
		var ownedClosed []string
		for _, n := range got {
			if slices.Contains(names, n) {
				ownedClosed = append(ownedClosed, n)
			}
		}
		if len(ownedClosed) > 0 {
			want := slices.Clone(names)
			slices.Reverse(want)
			if !slices.Equal(ownedClosed, want) {
				t.Fatalf("owned closed %v, want %v", ownedClosed, want)
			}
			if !rep.DrainReconciled || !rep.Actions[2].Complete() {
				t.Fatalf("owned resources closed behind a closed barrier: %+v", rep)
			}
		}

		// SD-32: the report stays as published.
		c.Force(TriggerSigquit)
		c.Fail("LATER")
		if !reflect.DeepEqual(c.Report(), rep) || c.Wait(context.Background()) != result {
			t.Fatalf("the result changed after publication")
		}
	})
}
