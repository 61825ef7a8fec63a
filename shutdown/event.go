package shutdown

import (
	"time"
	"unicode/utf8"
)

// CodeCloseAbandoned is the code of the [Diagnostic] for a phase-5 call
// still running at the end of its share or force deadline, which the
// coordinator stopped waiting for (SD-37). It is never a failure code: the
// report is Incomplete, not Failed.
const CodeCloseAbandoned = "SHUTDOWN_CLOSE_ABANDONED"

// CodeHandlerNotReturned is the code of the [Diagnostic] naming an
// attempt whose handler had not returned once phases 1 to 5 were over
// (SD-37): the report counts such goroutines, the diagnostic names the
// job. Its Subject is the job's id.
const CodeHandlerNotReturned = "SHUTDOWN_HANDLER_NOT_RETURNED"

// StragglersMax bounds the [CodeHandlerNotReturned] diagnostics of one
// shutdown; one more diagnostic says how many were left out.
const StragglersMax = 64

// DiagnosticBytesMax bounds [Diagnostic].Message, so that no error text
// makes a record too large for the journal.
const DiagnosticBytesMax = 1024

// clip returns s cut to at most n bytes, never inside a rune.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Event is one shutdown record the coordinator asks its [Journal] to
// append, in this order: [Initiated]; [ForceRequested] whenever force is
// switched on; for each phase 1 to 6 a [PhaseStarted] and a
// [PhaseFinished], with [ReportPublished] between phase 6's two; and a
// [Diagnostic] inside phase 5 for each close that failed, panicked or was
// abandoned. The api maps each to its journal record kind, named by Kind.
//
// Event is a closed sum type: the concrete types are the six below, passed
// by value; switch on them.
type Event interface {
	// Kind returns the name of the journal record, e.g.
	// "shutdown_phase_started".
	Kind() string
	event()
}

// Initiated is shutdown_initiated (SD-3): the first trigger and the root.
type Initiated struct {
	Trigger Trigger
	// Start is the root's start, the instant of the first initiation.
	Start time.Time
	// Total is ShutdownTimeout.
	Total time.Duration
	G     time.Time
	Hr    time.Time
}

// ForceRequested is shutdown_force_requested (SD-22): force was switched on
// at At by Trigger, explicitly or by a runtime failure (SD-23). It is
// emitted once, for the first force.
type ForceRequested struct {
	Trigger Trigger
	At      time.Time
}

// PhaseStarted is shutdown_phase_started {phase, name} (SD-11). Name is
// Phase.String().
type PhaseStarted struct {
	Phase Phase
	At    time.Time
}

// PhaseFinished is shutdown_phase_finished {phase, name, graceful, forced}
// (SD-11). For phases 1 to 4 Graceful and Forced are the outcomes of the
// phase's action at its end (phase 2: the drain's graceful outcome and
// NotAttempted; phase 3: both drain outcomes). For phase 5 they fold the
// outcomes of Actions, the worst of each; an empty phase 5 is Completed
// and NotAttempted. For phase 6 Graceful is Completed if the report was
// appended and Failed otherwise, and Completion is the report's.
type PhaseFinished struct {
	Phase    Phase
	At       time.Time
	Graceful Outcome
	Forced   Outcome
	// Actions are the phase's actions (phase 5 only; nil otherwise).
	Actions []Action
	// Completion is the report's completion (phase 6 only).
	Completion Completion
}

// ReportPublished is shutdown_report (SD-17): the published report, a copy
// the journal may keep.
type ReportPublished struct {
	Report Report
}

// Diagnostic is a debug record (SD-28): the error or panic text of one
// call of a phase-5 action, which the report never holds, or the news that
// the call was abandoned. It is what tells an operator which owned
// resource failed and why.
type Diagnostic struct {
	// Subject names the call: the component, then the resource's name,
	// e.g. "owned-resources/db", "signal-monitor", "telemetry/flush".
	Subject string
	// Code is the stable code of what happened, e.g.
	// [CodeOwnedResourceCloseFailed] or [CodeCloseAbandoned].
	Code string
	// Message is the error or panic text, at most [DiagnosticBytesMax]
	// bytes.
	Message string
}

// Kind returns "shutdown_initiated".
func (Initiated) Kind() string { return "shutdown_initiated" }

// Kind returns "shutdown_force_requested".
func (ForceRequested) Kind() string { return "shutdown_force_requested" }

// Kind returns "shutdown_phase_started".
func (PhaseStarted) Kind() string { return "shutdown_phase_started" }

// Kind returns "shutdown_phase_finished".
func (PhaseFinished) Kind() string { return "shutdown_phase_finished" }

// Kind returns "shutdown_report".
func (ReportPublished) Kind() string { return "shutdown_report" }

// Kind returns "debug".
func (Diagnostic) Kind() string { return "debug" }

func (Initiated) event()       {}
func (Diagnostic) event()      {}
func (ForceRequested) event()  {}
func (PhaseStarted) event()    {}
func (PhaseFinished) event()   {}
func (ReportPublished) event() {}
