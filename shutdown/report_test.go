package shutdown

import (
	"reflect"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

var (
	allOutcomes = []Outcome{
		OutcomeNotAttempted, OutcomeCompleted, OutcomeFailed, OutcomePanicked,
		OutcomeTimedOut, OutcomeCancelledByForce, OutcomeUnavailable,
	}
	rrAll  = ResourceReport{Owned: true, Started: true, Terminal: true, Succeeded: true}
	rrNone = ResourceReport{}
)

// derive sets the fields the coordinator derives from the actions:
// CoordinatorComplete, and Forced when a force path was needed (SD-22,
// SD-27).
func derive(r Report) Report {
	r.CoordinatorComplete = len(r.Actions) > 0
	for _, a := range r.Actions {
		r.CoordinatorComplete = r.CoordinatorComplete && a.Complete()
		r.Forced = r.Forced || a.Forced != OutcomeNotAttempted
	}
	return r
}

// caseA is SD-31 a: every action graceful Completed, forced NotAttempted;
// drain and close reconciled; owned resources {t,t,t,t}; no failure code.
func caseA() Report {
	return Report{
		CoordinatorAccounted: true,
		RuntimeJoined:        true,
		DrainReconciled:      true,
		CloseReconciled:      true,
		Dependencies:         Dependencies{OwnedResources: rrAll},
		Actions: []Action{
			{PhaseCloseAdmission, ComponentAdmission, OutcomeCompleted, OutcomeNotAttempted},
			{PhaseDrain, ComponentDrain, OutcomeCompleted, OutcomeNotAttempted},
			{PhaseCloseEvidence, ComponentClose, OutcomeCompleted, OutcomeNotAttempted},
			{PhaseReleaseResources, ComponentOwnedResources, OutcomeCompleted, OutcomeNotAttempted},
		},
	}
}

// withAction returns r with the action of component replaced.
func withAction(r Report, component string, graceful, forced Outcome) Report {
	r.Actions = slices.Clone(r.Actions)
	for i := range r.Actions {
		if r.Actions[i].Component == component {
			r.Actions[i].Graceful, r.Actions[i].Forced = graceful, forced
		}
	}
	return r
}

func TestSD31_WorkedCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    Report
		want Completion
	}{
		{"a all graceful", caseA(), GracefulCompleted},
		{"b drain forced completed", withAction(caseA(), ComponentDrain, OutcomeTimedOut, OutcomeCompleted), ForcedCompleted},
		{"c drain forced timed out, goroutine returned later", withAction(caseA(), ComponentDrain, OutcomeTimedOut, OutcomeTimedOut), Incomplete},
		{"d owned close error", func() Report {
			r := withAction(caseA(), ComponentOwnedResources, OutcomeFailed, OutcomeNotAttempted)
			r.Dependencies.OwnedResources = ResourceReport{true, true, true, false}
			r.FailureCode = CodeOwnedResourceCloseFailed
			return r
		}(), Failed},
		{"e caller-owned only", func() Report {
			r := caseA()
			r.Actions = r.Actions[:3]
			r.Dependencies = Dependencies{OwnedResources: rrNone, SignalMonitor: rrNone, Telemetry: rrNone}
			return r
		}(), GracefulCompleted},
		{"f no force path", withAction(caseA(), ComponentClose, OutcomeTimedOut, OutcomeUnavailable), Incomplete},
		{"g close not reconciled", func() Report {
			r := caseA()
			r.CloseReconciled = false
			return r
		}(), Incomplete},
		{"h failed twice, no code", withAction(caseA(), ComponentDrain, OutcomeFailed, OutcomeFailed), Incomplete},
		{"h failed twice, with code", func() Report {
			r := withAction(caseA(), ComponentDrain, OutcomeFailed, OutcomeFailed)
			r.FailureCode = "X"
			return r
		}(), Failed},
		{"i one goroutine quarantined", func() Report {
			r := caseA()
			r.RuntimeJoined = false
			r.Quarantined = 1
			return r
		}(), Incomplete},
	}
	for _, tt := range tests {
		r := derive(tt.r)
		got := Classify(r)
		if got != tt.want {
			t.Fatalf("%s: Classify = %s, want %s", tt.name, got, tt.want)
		}
		r.Completion = got
		wantSuccess := tt.want == GracefulCompleted || tt.want == ForcedCompleted
		if r.IsSuccess() != wantSuccess {
			t.Fatalf("%s: IsSuccess = %v, want %v", tt.name, r.IsSuccess(), wantSuccess)
		}
	}
}

// TestSD30_UnconfirmedBeforeFailure pins SD-30's order where the rapid
// property below rarely looks: an unconfirmed action is Incomplete even
// with a failure code (SD-31 f), and owned telemetry that failed to close
// is Failed without one (SD-29).
func TestSD30_UnconfirmedBeforeFailure(t *testing.T) {
	t.Parallel()
	withCode := func(r Report) Report {
		r.FailureCode = "X"
		return r
	}
	tests := []struct {
		name string
		r    Report
		want Completion
	}{
		{"f no force path, with a code", withCode(withAction(caseA(), ComponentClose, OutcomeTimedOut, OutcomeUnavailable)), Incomplete},
		{"cancelled by force, no force path, with a code", withCode(withAction(caseA(), ComponentDrain, OutcomeCancelledByForce, OutcomeNotAttempted)), Incomplete},
		{"timed out, no force path, with a code", withCode(withAction(caseA(), ComponentDrain, OutcomeTimedOut, OutcomeNotAttempted)), Incomplete},
		{"telemetry close error, no code", func() Report {
			r := caseA()
			r.Dependencies.Telemetry = ResourceReport{true, true, true, false}
			return r
		}(), Failed},
	}
	for _, tt := range tests {
		if got := Classify(derive(tt.r)); got != tt.want {
			t.Fatalf("%s: Classify = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestSD30_ClassificationOrder checks SD-30's order as properties over any
// report.
func TestSD30_ClassificationOrder(t *testing.T) {
	t.Parallel()
	rr := func(t *rapid.T, label string) ResourceReport {
		return ResourceReport{
			Owned:     rapid.Bool().Draw(t, label+".owned"),
			Started:   rapid.Bool().Draw(t, label+".started"),
			Terminal:  rapid.Bool().Draw(t, label+".terminal"),
			Succeeded: rapid.Bool().Draw(t, label+".succeeded"),
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		r := Report{
			Forced:               rapid.Bool().Draw(t, "forced"),
			CoordinatorAccounted: rapid.Bool().Draw(t, "accounted"),
			CoordinatorComplete:  rapid.Bool().Draw(t, "complete"),
			RuntimeJoined:        rapid.Bool().Draw(t, "joined"),
			DrainReconciled:      rapid.Bool().Draw(t, "drain"),
			CloseReconciled:      rapid.Bool().Draw(t, "close"),
			Dependencies:         Dependencies{rr(t, "owned"), rr(t, "signal"), rr(t, "telemetry")},
			FailureCode:          rapid.SampledFrom([]string{"", CodeOwnedResourceCloseFailed}).Draw(t, "code"),
		}
		n := rapid.IntRange(0, ActionsMax).Draw(t, "actions")
		for range n {
			r.Actions = append(r.Actions, Action{
				Phase:     Phase(rapid.IntRange(1, 5).Draw(t, "phase")),
				Component: ComponentDrain,
				Graceful:  rapid.SampledFrom(allOutcomes).Draw(t, "graceful"),
				Forced:    rapid.SampledFrom(allOutcomes).Draw(t, "forced"),
			})
		}
		before := r.Clone()
		r.Completion = Classify(r)
		if !reflect.DeepEqual(before.Actions, r.Actions) {
			t.Fatalf("Classify changed the actions")
		}

		terminal := r.RuntimeJoined && r.DrainReconciled && r.CloseReconciled && r.Dependencies.Reconciled()
		unconfirmed := false
		for _, a := range r.Actions {
			if a.Forced == OutcomeTimedOut || a.Forced == OutcomeUnavailable ||
				(a.Forced == OutcomeNotAttempted && (a.Graceful == OutcomeTimedOut || a.Graceful == OutcomeCancelledByForce)) {
				unconfirmed = true
			}
		}
		depsOK := r.Dependencies.OwnedResources.Successful() && r.Dependencies.SignalMonitor.Successful() &&
			r.Dependencies.Telemetry.Successful()
		switch {
		case !terminal || !r.CoordinatorAccounted || unconfirmed:
			if r.Completion != Incomplete {
				t.Fatalf("not terminal, unaccounted or unconfirmed, got %s", r.Completion)
			}
		case r.FailureCode != "" || !depsOK:
			if r.Completion != Failed {
				t.Fatalf("failure code or dependency failure, got %s", r.Completion)
			}
		case !r.CoordinatorComplete:
			if r.Completion != Incomplete {
				t.Fatalf("not complete, got %s", r.Completion)
			}
		case r.Forced:
			if r.Completion != ForcedCompleted {
				t.Fatalf("forced, got %s", r.Completion)
			}
		default:
			if r.Completion != GracefulCompleted {
				t.Fatalf("got %s, want graceful_completed", r.Completion)
			}
		}
		if r.IsSuccess() && !(terminal && r.CoordinatorAccounted && r.CoordinatorComplete && !unconfirmed &&
			r.FailureCode == "" && depsOK) {
			t.Fatalf("success without evidence: %+v", r)
		}
		if r.Completion == Failed && !terminal {
			t.Fatalf("failed but not terminal")
		}
		if r.IsSuccess() != (r.Completion == GracefulCompleted || r.Completion == ForcedCompleted) {
			t.Fatalf("IsSuccess disagrees with %s", r.Completion)
		}
	})
}

func TestSD26_NilReportNeverSuccess(t *testing.T) {
	t.Parallel()
	var r *Report
	if r.IsSuccess() || r.Clone() != nil {
		t.Fatalf("nil report: success %v, clone %v", r.IsSuccess(), r.Clone())
	}
	if (&Report{}).IsSuccess() {
		t.Fatalf("zero report is a success")
	}
	wantEq(t, "zero completion", Report{}.Completion, Incomplete)
}

func TestSD29_ResourceReport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r                      ResourceReport
		reconciled, successful bool
	}{
		{ResourceReport{}, true, true},                                                // caller-owned or absent
		{ResourceReport{Owned: true}, false, false},                                   // withheld
		{ResourceReport{Owned: true, Started: true}, false, false},                    // abandoned close
		{ResourceReport{Owned: true, Started: true, Terminal: true}, true, false},     // close returned an error
		{ResourceReport{true, true, true, true}, true, true},                          // closed
		{ResourceReport{Started: true, Terminal: true, Succeeded: false}, true, true}, // not owned
	}
	for _, tt := range tests {
		if tt.r.Reconciled() != tt.reconciled || tt.r.Successful() != tt.successful {
			t.Fatalf("%+v: reconciled %v successful %v, want %v %v",
				tt.r, tt.r.Reconciled(), tt.r.Successful(), tt.reconciled, tt.successful)
		}
	}
}

func TestSD27_NamesRoundTrip(t *testing.T) {
	t.Parallel()
	completions := map[Completion]string{
		GracefulCompleted: "graceful_completed", ForcedCompleted: "forced_completed",
		Failed: "failed", Incomplete: "incomplete",
	}
	for c, s := range completions {
		wantEq(t, "Completion.String", c.String(), s)
		got, ok := ParseCompletion(s)
		if !ok || got != c {
			t.Fatalf("ParseCompletion(%q) = %v, %v", s, got, ok)
		}
	}
	outcomes := []string{"not_attempted", "completed", "failed", "panicked", "timed_out", "cancelled_by_force", "unavailable"}
	for i, o := range allOutcomes {
		wantEq(t, "Outcome.String", o.String(), outcomes[i])
		got, ok := ParseOutcome(outcomes[i])
		if !ok || got != o {
			t.Fatalf("ParseOutcome(%q) = %v, %v", outcomes[i], got, ok)
		}
	}
	triggers := []string{"sigint", "sigterm", "sigquit", "context", "api", "runtime_failure", "startup_failure"}
	for i, s := range triggers {
		tr := Trigger(i + 1)
		wantEq(t, "Trigger.String", tr.String(), s)
		got, ok := ParseTrigger(s)
		if !ok || got != tr {
			t.Fatalf("ParseTrigger(%q) = %v, %v", s, got, ok)
		}
	}
	phases := []string{"close_admission", "drain", "force", "close_evidence", "release_resources", "publish_report"}
	for i, s := range phases {
		p := Phase(i + 1)
		wantEq(t, "Phase.String", p.String(), s)
		got, ok := ParsePhase(s)
		if !ok || got != p {
			t.Fatalf("ParsePhase(%q) = %v, %v", s, got, ok)
		}
	}
	wantEq(t, "unknown completion", Completion(9).String(), "Completion(9)")
	wantEq(t, "unknown outcome", Outcome(9).String(), "Outcome(9)")
	wantEq(t, "zero trigger", Trigger(0).String(), "Trigger(0)")
	wantEq(t, "zero phase", Phase(0).String(), "Phase(0)")
	for _, s := range []string{"", "Completed", "trigger", "none"} {
		if _, ok := ParseCompletion(s); ok {
			t.Fatalf("ParseCompletion(%q) accepted", s)
		}
		if _, ok := ParseTrigger(s); ok {
			t.Fatalf("ParseTrigger(%q) accepted", s)
		}
		if _, ok := ParsePhase(s); ok {
			t.Fatalf("ParsePhase(%q) accepted", s)
		}
	}
}

func TestSD32_PublishedWriteOnce(t *testing.T) {
	t.Parallel()
	var p Published
	if p.Load() != nil {
		t.Fatalf("Load before Publish is not nil")
	}
	// Concurrent publishers: exactly one wins, and everyone loads its value.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []int
	)
	for i := range 8 {
		wg.Go(func() {
			r := caseA()
			r.Drained = i
			if p.Publish(r) {
				mu.Lock()
				wins = append(wins, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 {
		t.Fatalf("%d publishers won, want 1", len(wins))
	}
	got := p.Load()
	wantEq(t, "published Drained", got.Drained, wins[0])

	// Copies are independent of the published report and of each other.
	got.Actions[0].Graceful = OutcomeTimedOut
	got.Completion = GracefulCompleted
	again := p.Load()
	if again.Actions[0].Graceful != OutcomeCompleted || again.Completion != Incomplete {
		t.Fatalf("changing a loaded copy changed the published report: %+v", again)
	}
	if p.Publish(Report{Completion: GracefulCompleted}) {
		t.Fatalf("a second Publish won")
	}
	if !reflect.DeepEqual(p.Load(), again) {
		t.Fatalf("the report changed after a second Publish")
	}

	// The published value is a copy too: the publisher's slice is not shared.
	var q Published
	r := caseA()
	q.Publish(r)
	r.Actions[0].Graceful = OutcomeFailed
	if q.Load().Actions[0].Graceful != OutcomeCompleted {
		t.Fatalf("Publish shares the caller's Actions")
	}
}
