package shutdown

import "testing"

// TestSD30_UnclosedTelemetryIsIncomplete: owned telemetry whose close never
// returned is not reconciled (SD-29), so the report is not terminal and is
// Incomplete, not Failed (SD-30).
func TestSD30_UnclosedTelemetryIsIncomplete(t *testing.T) {
	t.Parallel()
	r := caseA()
	r.Dependencies.Telemetry = ResourceReport{Owned: true, Started: true}
	r.Actions = append(r.Actions, Action{PhaseReleaseResources, ComponentTelemetry, OutcomeCompleted, OutcomeNotAttempted})
	wantEq(t, "dependencies reconciled", r.Dependencies.Reconciled(), false)
	wantEq(t, "terminal", r.Terminal(), false)
	wantEq(t, "completion", Classify(r), Incomplete)

	// The same for the signal monitor, for symmetry of the three.
	r = caseA()
	r.Dependencies.SignalMonitor = ResourceReport{Owned: true, Started: true}
	wantEq(t, "completion with the signal monitor unstopped", Classify(r), Incomplete)
}

// TestSD11_EventKinds: each event names the journal record it becomes
// (SD-11, SD-17, SD-22, SD-28); the api maps records by these names.
func TestSD11_EventKinds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		e    Event
		want string
	}{
		{Initiated{}, "shutdown_initiated"},
		{ForceRequested{}, "shutdown_force_requested"},
		{PhaseStarted{}, "shutdown_phase_started"},
		{PhaseFinished{}, "shutdown_phase_finished"},
		{ReportPublished{}, "shutdown_report"},
		{Diagnostic{}, "debug"},
	} {
		wantEq(t, "Kind", tt.e.Kind(), tt.want)
	}
}
