package shutdown

import "strconv"

// Trigger is what initiated a shutdown or requested force (SD-20, SD-23,
// SD-35). The zero value is not a trigger.
//
// The numeric values and the names returned by [Trigger.String] may be
// persisted: never renumber or rename them.
type Trigger uint8

// Triggers as recorded in shutdown_initiated and shutdown_force_requested.
const (
	TriggerSigint         Trigger = 1
	TriggerSigterm        Trigger = 2
	TriggerSigquit        Trigger = 3
	TriggerContext        Trigger = 4
	TriggerAPI            Trigger = 5
	TriggerRuntimeFailure Trigger = 6
	TriggerStartupFailure Trigger = 7
)

var triggerNames = [...]string{
	TriggerSigint:         "sigint",
	TriggerSigterm:        "sigterm",
	TriggerSigquit:        "sigquit",
	TriggerContext:        "context",
	TriggerAPI:            "api",
	TriggerRuntimeFailure: "runtime_failure",
	TriggerStartupFailure: "startup_failure",
}

// String returns the recorded name of t, e.g. "sigterm", or "Trigger(n)" for
// a value that is not defined.
func (t Trigger) String() string {
	if t != 0 && int(t) < len(triggerNames) {
		return triggerNames[t]
	}
	return "Trigger(" + strconv.Itoa(int(t)) + ")"
}

// ParseTrigger returns the Trigger whose [Trigger.String] is s, and false if
// there is none.
func ParseTrigger(s string) (Trigger, bool) {
	for i, name := range triggerNames {
		if i != 0 && name == s {
			return Trigger(i), true
		}
	}
	return 0, false
}

// Phase is one of the six ordered phases of SD-11, numbered 1 to 6. The
// zero value is not a phase.
//
// The numbers and the names returned by [Phase.String] may be persisted:
// never renumber or rename them.
type Phase uint8

// Phases of SD-11, in execution order.
const (
	PhaseCloseAdmission   Phase = 1
	PhaseDrain            Phase = 2
	PhaseForce            Phase = 3
	PhaseCloseEvidence    Phase = 4
	PhaseReleaseResources Phase = 5
	PhasePublishReport    Phase = 6
)

var phaseNames = [...]string{
	PhaseCloseAdmission:   "close_admission",
	PhaseDrain:            "drain",
	PhaseForce:            "force",
	PhaseCloseEvidence:    "close_evidence",
	PhaseReleaseResources: "release_resources",
	PhasePublishReport:    "publish_report",
}

// String returns the recorded name of p, e.g. "close_admission", or
// "Phase(n)" for a value that is not defined.
func (p Phase) String() string {
	if p != 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// ParsePhase returns the Phase whose [Phase.String] is s, and false if there
// is none.
func ParsePhase(s string) (Phase, bool) {
	for i, name := range phaseNames {
		if i != 0 && name == s {
			return Phase(i), true
		}
	}
	return 0, false
}
