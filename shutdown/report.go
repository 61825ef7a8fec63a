package shutdown

import (
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// Completion is the classification of a shutdown (SD-27, SD-30). The zero
// value is [Incomplete], so a report nobody classified is never a success.
//
// The numeric values and the names returned by [Completion.String] may be
// persisted: never renumber or rename them.
type Completion uint8

// Completions of SD-27.
const (
	// Incomplete means that some evidence is missing: a goroutine was not
	// joined, a path timed out or the journal did not confirm (SD-30).
	Incomplete Completion = 0
	// GracefulCompleted means that every action completed on its graceful
	// path and everything was proven closed.
	GracefulCompleted Completion = 1
	// ForcedCompleted means that everything was proven closed, but at least
	// one action needed its force path, or force was requested (SD-22).
	ForcedCompleted Completion = 2
	// Failed means that everything reached a terminal state, but a failure
	// code is set or an owned dependency did not close successfully.
	Failed Completion = 3
)

var completionNames = [...]string{
	Incomplete:        "incomplete",
	GracefulCompleted: "graceful_completed",
	ForcedCompleted:   "forced_completed",
	Failed:            "failed",
}

// String returns the serialised name of c, e.g. "graceful_completed", or
// "Completion(n)" for a value that is not defined.
func (c Completion) String() string {
	if int(c) < len(completionNames) {
		return completionNames[c]
	}
	return "Completion(" + strconv.Itoa(int(c)) + ")"
}

// ParseCompletion returns the Completion whose [Completion.String] is s, and
// false if there is none.
func ParseCompletion(s string) (Completion, bool) {
	for i, name := range completionNames {
		if name == s {
			return Completion(i), true
		}
	}
	return Incomplete, false
}

// Outcome is how one path (graceful or force) of one action ended (SD-28).
//
// The numeric values and the names returned by [Outcome.String] may be
// persisted: never renumber or rename them.
type Outcome uint8

// Outcomes of SD-28. Graceful paths end in one of Completed, Failed,
// Panicked, TimedOut and CancelledByForce; force paths in one of
// NotAttempted, Completed, Failed, Panicked, TimedOut and Unavailable.
const (
	// OutcomeNotAttempted means that the path did not run: for a force path,
	// that it was not needed.
	OutcomeNotAttempted Outcome = 0
	// OutcomeCompleted means that the path's work returned without error
	// before its deadline.
	OutcomeCompleted Outcome = 1
	// OutcomeFailed means that the path's work returned an error before its
	// deadline. The error text is not kept in the report.
	OutcomeFailed Outcome = 2
	// OutcomePanicked means that the path's work panicked before its
	// deadline. The panic value is not kept in the report.
	OutcomePanicked Outcome = 3
	// OutcomeTimedOut means that the path's deadline passed first: G for a
	// graceful path, the force deadline for a force path.
	OutcomeTimedOut Outcome = 4
	// OutcomeCancelledByForce means that force arrived before the graceful
	// path finished.
	OutcomeCancelledByForce Outcome = 5
	// OutcomeUnavailable means that the action has no force path although
	// its graceful path did not finish.
	OutcomeUnavailable Outcome = 6
)

var outcomeNames = [...]string{
	OutcomeNotAttempted:     "not_attempted",
	OutcomeCompleted:        "completed",
	OutcomeFailed:           "failed",
	OutcomePanicked:         "panicked",
	OutcomeTimedOut:         "timed_out",
	OutcomeCancelledByForce: "cancelled_by_force",
	OutcomeUnavailable:      "unavailable",
}

// String returns the snake_case name of o, e.g. "timed_out", or
// "Outcome(n)" for a value that is not defined.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// ParseOutcome returns the Outcome whose [Outcome.String] is s, and false if
// there is none.
func ParseOutcome(s string) (Outcome, bool) {
	for i, name := range outcomeNames {
		if name == s {
			return Outcome(i), true
		}
	}
	return OutcomeNotAttempted, false
}

// severity orders outcomes from best to worst, for summaries that fold
// several outcomes into one (a phase with several actions, an action with
// several calls).
var severity = [...]uint8{
	OutcomeNotAttempted:     0,
	OutcomeCompleted:        1,
	OutcomeFailed:           2,
	OutcomePanicked:         3,
	OutcomeCancelledByForce: 4,
	OutcomeTimedOut:         5,
	OutcomeUnavailable:      6,
}

// worse returns the worse of a and b by severity.
func worse(a, b Outcome) Outcome {
	if int(b) < len(severity) && int(a) < len(severity) && severity[b] <= severity[a] {
		return a
	}
	return b
}

// Components of the actions of SD-11, as they appear in [Action.Component].
const (
	ComponentAdmission      = "admission"
	ComponentDrain          = "drain"
	ComponentClose          = "close"
	ComponentOwnedResources = "owned-resources"
	ComponentSignalMonitor  = "signal-monitor"
	ComponentTelemetry      = "telemetry"
)

// ActionsMax is the most actions a report holds: one per component (SD-33).
const ActionsMax = 6

// Failure codes the coordinator sets when no earlier failure set one
// (SD-27, SD-31 d). A runtime failure's own code ([Coordinator.Fail]) comes
// first and is never replaced.
const (
	CodeOwnedResourceCloseFailed = "OWNED_RESOURCE_CLOSE_FAILED"
	CodeSignalMonitorStopFailed  = "SIGNAL_MONITOR_STOP_FAILED"
	CodeTelemetryCloseFailed     = "TELEMETRY_CLOSE_FAILED"
)

// Action is the entry of one action in the report (SD-27): the phase it
// started in, its component and the outcome of each path. The drain
// action's graceful path runs in phase 2 and its force path in phase 3; its
// entry names phase 2.
type Action struct {
	Phase     Phase
	Component string
	Graceful  Outcome
	Forced    Outcome
}

// Unconfirmed reports whether a's termination is not proven (SD-30): its
// force path timed out or is unavailable, or its graceful path was cut off
// and no force path ran.
func (a Action) Unconfirmed() bool {
	switch {
	case a.Forced == OutcomeTimedOut || a.Forced == OutcomeUnavailable:
		return true
	case a.Forced == OutcomeNotAttempted:
		return a.Graceful == OutcomeTimedOut || a.Graceful == OutcomeCancelledByForce
	}
	return false
}

// Complete reports whether a proved graceful Completed or forced Completed
// (SD-27 CoordinatorComplete).
func (a Action) Complete() bool {
	return a.Graceful == OutcomeCompleted || a.Forced == OutcomeCompleted
}

// ResourceReport says what happened to one dependency (SD-29). Owned means
// that the engine was handed it to dispose; Started that its close began;
// Terminal that the close call was observed to return (an error or a
// recovered panic counts); Succeeded that it returned without error. A
// caller-owned or absent dependency is all false.
type ResourceReport struct {
	Owned     bool
	Started   bool
	Terminal  bool
	Succeeded bool
}

// Reconciled reports !Owned || Terminal (SD-29).
func (r ResourceReport) Reconciled() bool { return !r.Owned || r.Terminal }

// Successful reports !Owned || Succeeded (SD-29).
func (r ResourceReport) Successful() bool { return !r.Owned || r.Succeeded }

// Dependencies are the three dependencies phase 5 disposes (SD-16, SD-27).
// OwnedResources folds every owned resource: Started if any close began,
// Terminal if every close returned, Succeeded if every close succeeded.
type Dependencies struct {
	OwnedResources ResourceReport
	SignalMonitor  ResourceReport
	Telemetry      ResourceReport
}

// Reconciled reports whether every dependency is reconciled (SD-29).
func (d Dependencies) Reconciled() bool {
	return d.OwnedResources.Reconciled() && d.SignalMonitor.Reconciled() && d.Telemetry.Reconciled()
}

// Successful reports whether every dependency is successful (SD-29).
func (d Dependencies) Successful() bool {
	return d.OwnedResources.Successful() && d.SignalMonitor.Successful() && d.Telemetry.Successful()
}

// Report is the immutable result of one shutdown (SD-26..SD-33). It covers
// phases 1 to 5; phase 6's own status lives only in its journal records
// (SD-17). It has a fixed size: at most [ActionsMax] actions, fixed
// counters, no per-attempt history, no error text.
//
// Reports handed out by this package ([Coordinator.Report],
// [Published.Load]) are fresh copies: changing one, its Actions included,
// never changes the published report (SD-32).
type Report struct {
	// Completion is Classify of the other fields, set once (SD-30).
	Completion Completion
	// Forced is true if force was requested or any action needed its force
	// path (SD-22).
	Forced bool
	// Trigger is the first trigger; InitiatedAt the root's start (SD-3).
	Trigger     Trigger
	InitiatedAt time.Time
	// Budget is ShutdownTimeout, shared by all phases (SD-1, SD-2).
	Budget time.Duration
	// Elapsed runs from the first initiation to the end of phase 5.
	Elapsed time.Duration

	// CoordinatorAccounted: every action produced its entry.
	CoordinatorAccounted bool
	// CoordinatorComplete: every action proved graceful or forced Completed.
	CoordinatorComplete bool
	// RuntimeJoined: every goroutine the engine and the coordinator started
	// was observed to return; false while any is quarantined.
	RuntimeJoined bool
	// DrainReconciled: every started attempt settled or released, every
	// attempt, cleanup and hook goroutine joined, every attempt scope
	// closed, Unresolved == 0.
	DrainReconciled bool
	// CloseReconciled: DrainReconciled, close evidence (SD-15), and every
	// shutdown record of phases 1 to 5 written (SD-11).
	CloseReconciled bool

	Dependencies Dependencies
	// Actions holds the actions in execution order, at most ActionsMax.
	Actions []Action

	// Counters of SD-25.
	Drained           int
	ReleasedUnstarted int
	Released          int
	Unresolved        int
	Quarantined       int

	// FailureCode is the stable code of the original failure, or empty.
	FailureCode string
}

// IsSuccess reports whether r is GracefulCompleted or ForcedCompleted. A nil
// report is never a success (SD-26).
func (r *Report) IsSuccess() bool {
	return r != nil && (r.Completion == GracefulCompleted || r.Completion == ForcedCompleted)
}

// Clone returns a deep copy of r, or nil if r is nil.
func (r *Report) Clone() *Report {
	if r == nil {
		return nil
	}
	c := *r
	c.Actions = slices.Clone(r.Actions)
	return &c
}

// Terminal reports the terminal predicate of SD-30: the runtime joined,
// drain and close reconciled, and every dependency reconciled.
func (r *Report) Terminal() bool {
	return r.RuntimeJoined && r.DrainReconciled && r.CloseReconciled && r.Dependencies.Reconciled()
}

// Classify returns the completion of r by SD-30, in its order, from every
// field but Completion:
//
//	terminal := RuntimeJoined && DrainReconciled && CloseReconciled && all dependencies reconciled
//	unconfirmed := any action with Forced in {TimedOut, Unavailable}
//		|| (Forced == NotAttempted && Graceful in {TimedOut, CancelledByForce})
//	!terminal || !CoordinatorAccounted || unconfirmed  → Incomplete
//	FailureCode != "" || !all dependencies successful → Failed
//	!CoordinatorComplete                               → Incomplete
//	Forced                                             → ForcedCompleted
//	otherwise                                          → GracefulCompleted
func Classify(r Report) Completion {
	unconfirmed := slices.ContainsFunc(r.Actions, Action.Unconfirmed)
	switch {
	case !r.Terminal() || !r.CoordinatorAccounted || unconfirmed:
		return Incomplete
	case r.FailureCode != "" || !r.Dependencies.Successful():
		return Failed
	case !r.CoordinatorComplete:
		return Incomplete
	case r.Forced:
		return ForcedCompleted
	default:
		return GracefulCompleted
	}
}

// Published holds a report that is written once (SD-32): the first
// [Published.Publish] wins and later ones change nothing. The zero value
// holds no report. It is safe for concurrent use.
type Published struct {
	p atomic.Pointer[Report]
}

// Publish stores a copy of r if no report is stored yet, and reports
// whether it did.
func (p *Published) Publish(r Report) bool {
	return p.p.CompareAndSwap(nil, r.Clone())
}

// Load returns a fresh copy of the published report, or nil if none is
// published yet.
func (p *Published) Load() *Report {
	return p.p.Load().Clone()
}
