package record

import (
	"strconv"
	"testing"
)

// TestKindsFrozen lists every kind's number and name literally: they are
// part of the on-disk format, so renumbering or renaming one fails here.
func TestKindsFrozen(t *testing.T) {
	t.Parallel()
	frozen := []struct {
		k    Kind
		num  uint16
		name string
	}{
		{KindRunStarted, 1, "run_started"},
		{KindDebug, 2, "debug"},
		{KindJobEnqueued, 10, "job_enqueued"},
		{KindAttemptStarted, 11, "attempt_started"},
		{KindAttemptSucceeded, 12, "attempt_succeeded"},
		{KindAttemptRetryScheduled, 13, "attempt_retry_scheduled"},
		{KindAttemptBuried, 14, "attempt_buried"},
		{KindAttemptReleased, 15, "attempt_released"},
		{KindJobBuried, 16, "job_buried"},
		{KindJobRequeued, 17, "job_requeued"},
		{KindQueuePaused, 18, "queue_paused"},
		{KindQueueResumed, 19, "queue_resumed"},
		{KindWorkflowStarted, 30, "workflow_started"},
		{KindStepCompleted, 31, "step_completed"},
		{KindStepDelayed, 32, "step_delayed"},
		{KindWorkflowWaiting, 33, "workflow_waiting"},
		{KindSignalReceived, 34, "signal_received"},
		{KindWorkflowPaused, 35, "workflow_paused"},
		{KindWorkflowResumed, 36, "workflow_resumed"},
		{KindWorkflowCompleted, 37, "workflow_completed"},
		{KindWorkflowFailed, 38, "workflow_failed"},
		{KindWorkflowCancelled, 39, "workflow_cancelled"},
		{KindWorkflowRetried, 40, "workflow_retried"},
		{KindWorkflowDeadlineExceeded, 41, "workflow_deadline_exceeded"},
		{KindDeadlineHandlerStarted, 42, "deadline_handler_started"},
		{KindDeadlineHandlerFinished, 43, "deadline_handler_finished"},
		{KindShutdownInitiated, 60, "shutdown_initiated"},
		{KindShutdownForceRequested, 61, "shutdown_force_requested"},
		{KindShutdownPhaseStarted, 62, "shutdown_phase_started"},
		{KindShutdownPhaseFinished, 63, "shutdown_phase_finished"},
		{KindShutdownReport, 64, "shutdown_report"},
	}
	all := Kinds()
	if len(all) != len(frozen) {
		t.Fatalf("Kinds() has %d kinds, the frozen list %d: add the new kind here with its number", len(all), len(frozen))
	}
	for i, f := range frozen {
		if uint16(f.k) != f.num {
			t.Errorf("%s is %d, frozen as %d", f.name, uint16(f.k), f.num)
		}
		if all[i] != f.k {
			t.Errorf("Kinds()[%d] = %d, want %d (ascending order)", i, all[i], f.k)
		}
		if !f.k.Known() {
			t.Errorf("%d not Known", f.num)
		}
		if got := f.k.String(); got != f.name {
			t.Errorf("Kind(%d).String() = %q, want %q", f.num, got, f.name)
		}
		if k, ok := ParseKind(f.name); !ok || k != f.k {
			t.Errorf("ParseKind(%q) = %d, %v; want %d", f.name, k, ok, f.k)
		}
		b, ok := NewBody(f.k)
		if !ok || b.Kind() != f.k {
			t.Errorf("NewBody(%s) = %T, %v", f.name, b, ok)
		}
	}
	for _, k := range []Kind{0, 3, 9, 20, 29, 44, 59, 65, 0xffff} {
		if k.Known() {
			t.Errorf("Kind(%d) is Known", k)
		}
		if got, want := k.String(), "kind("+strconv.Itoa(int(k))+")"; got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
		if _, ok := NewBody(k); ok {
			t.Errorf("NewBody(%d) succeeded", k)
		}
	}
	if _, ok := ParseKind("kind(3)"); ok {
		t.Errorf("ParseKind(kind(3)) succeeded")
	}
}
