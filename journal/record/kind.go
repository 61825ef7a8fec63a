package record

import "strconv"

// Kind identifies what a record means. Kind values are part of the on-disk
// format: never renumber or reuse one. New kinds take new numbers.
type Kind uint16

// Engine stream records.
const (
	KindRunStarted Kind = 1 // an engine start finished recovery (SD-33)
	KindDebug      Kind = 2 // diagnostics named in the specs (WF-1, SD-36)
)

// Job and attempt records (WF-1, JB-3, DL-38).
const (
	KindJobEnqueued           Kind = 10
	KindAttemptStarted        Kind = 11
	KindAttemptSucceeded      Kind = 12
	KindAttemptRetryScheduled Kind = 13
	KindAttemptBuried         Kind = 14
	KindAttemptReleased       Kind = 15
	KindJobBuried             Kind = 16
	KindJobRequeued           Kind = 17
	KindQueuePaused           Kind = 18
	KindQueueResumed          Kind = 19
)

// Workflow records (WF-1).
const (
	KindWorkflowStarted          Kind = 30
	KindStepCompleted            Kind = 31
	KindStepDelayed              Kind = 32
	KindWorkflowWaiting          Kind = 33
	KindSignalReceived           Kind = 34
	KindWorkflowPaused           Kind = 35
	KindWorkflowResumed          Kind = 36
	KindWorkflowCompleted        Kind = 37
	KindWorkflowFailed           Kind = 38
	KindWorkflowCancelled        Kind = 39
	KindWorkflowRetried          Kind = 40
	KindWorkflowDeadlineExceeded Kind = 41
	KindDeadlineHandlerStarted   Kind = 42
	KindDeadlineHandlerFinished  Kind = 43
)

// Shutdown records (SD-11, SD-17, SD-22).
const (
	KindShutdownInitiated      Kind = 60
	KindShutdownForceRequested Kind = 61
	KindShutdownPhaseStarted   Kind = 62
	KindShutdownPhaseFinished  Kind = 63
	KindShutdownReport         Kind = 64
)

var kindNames = map[Kind]string{
	KindRunStarted:               "run_started",
	KindDebug:                    "debug",
	KindJobEnqueued:              "job_enqueued",
	KindAttemptStarted:           "attempt_started",
	KindAttemptSucceeded:         "attempt_succeeded",
	KindAttemptRetryScheduled:    "attempt_retry_scheduled",
	KindAttemptBuried:            "attempt_buried",
	KindAttemptReleased:          "attempt_released",
	KindJobBuried:                "job_buried",
	KindJobRequeued:              "job_requeued",
	KindQueuePaused:              "queue_paused",
	KindQueueResumed:             "queue_resumed",
	KindWorkflowStarted:          "workflow_started",
	KindStepCompleted:            "step_completed",
	KindStepDelayed:              "step_delayed",
	KindWorkflowWaiting:          "workflow_waiting",
	KindSignalReceived:           "signal_received",
	KindWorkflowPaused:           "workflow_paused",
	KindWorkflowResumed:          "workflow_resumed",
	KindWorkflowCompleted:        "workflow_completed",
	KindWorkflowFailed:           "workflow_failed",
	KindWorkflowCancelled:        "workflow_cancelled",
	KindWorkflowRetried:          "workflow_retried",
	KindWorkflowDeadlineExceeded: "workflow_deadline_exceeded",
	KindDeadlineHandlerStarted:   "deadline_handler_started",
	KindDeadlineHandlerFinished:  "deadline_handler_finished",
	KindShutdownInitiated:        "shutdown_initiated",
	KindShutdownForceRequested:   "shutdown_force_requested",
	KindShutdownPhaseStarted:     "shutdown_phase_started",
	KindShutdownPhaseFinished:    "shutdown_phase_finished",
	KindShutdownReport:           "shutdown_report",
}

// String returns the record name of WF-1 and SD-11 (e.g. "attempt_started"),
// or "kind(N)" for a number this version does not know.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Known reports whether this version of quire knows k.
func (k Kind) Known() bool {
	_, ok := kindNames[k]
	return ok
}

// ParseKind returns the Kind whose String is name.
func ParseKind(name string) (Kind, bool) {
	for k, s := range kindNames {
		if s == name {
			return k, true
		}
	}
	return 0, false
}

// Kinds returns every known kind in ascending numeric order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kindNames))
	for k := range kindNames {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
