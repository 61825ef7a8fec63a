package replay

import (
	"bytes"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// encodeState returns the canonical state encoding of m, failing the test
// if it has none.
func encodeState(t tb, m map[string]any) []byte {
	t.Helper()
	b, err := EncodeState(m)
	if err != nil {
		t.Fatalf("EncodeState: %v", err)
	}
	return b
}

// wantState fails unless got is the canonical encoding of want.
func wantState(t tb, what string, got []byte, want map[string]any) {
	t.Helper()
	if !bytes.Equal(got, encodeState(t, want)) {
		m, err := DecodeState(got)
		t.Fatalf("%s is %v (%v), want %v", what, m, err, want)
	}
}

// startWorkflow adds a workflow_started for id with the given number of
// steps and returns the workflow as the state holds it.
func (b *testBundle) startWorkflow(id string, steps int32, mods ...func(*record.WorkflowStarted)) *Workflow {
	b.t.Helper()
	ws := &record.WorkflowStarted{WorkflowID: id, Name: "import", Steps: steps, At: at(0)}
	for _, m := range mods {
		m(ws)
	}
	b.add(id, ws)
	return b.workflow(id)
}

func (b *testBundle) workflow(id string) *Workflow {
	b.t.Helper()
	w, ok := b.s.Workflows[id]
	if !ok {
		b.t.Fatalf("workflow %s is not in the state", id)
	}
	return w
}

// enqueueStep adds a job_enqueued for a step job of workflow wf, on the
// workflow's stream.
func (b *testBundle) enqueueStep(id, wf string, step, branch int32) {
	b.t.Helper()
	b.add(wf, &record.JobEnqueued{
		JobID: id, Handler: "h", Queue: "default", AvailableAt: at(0), Retry: policy,
		WorkflowID: wf, Step: step, Branch: branch,
	})
}

// succeedWith settles the open attempt of job id with an output.
func (b *testBundle) succeedWith(id string, output []byte) {
	b.t.Helper()
	o := out(id, b.job(id).Token)
	b.add(b.job(id).Stream, &record.AttemptSucceeded{Outcome: o, Output: output})
}

// WF-10: the workflow fold refuses the transitions the table of WF-10 does
// not list, and the records that do not fit the workflow's step, stored
// signals or keys. A refusal leaves the state as it was (mustRefuse).
func TestWF10_WorkflowFoldRefusesImpossibleTransitions(t *testing.T) {
	t.Parallel()
	refuseAll(t, []refusal{
		{"complete a step into a step that does not follow it", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 3)
			return b.rec("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 2})
		}},
		{"complete a step while failed", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2)
			b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "boom", At: at(time.Second)})
			return b.rec("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
		}},
		{"complete a step while waiting, without the resume", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2)
			b.add("wf_1", &record.WorkflowWaiting{WorkflowID: "wf_1", Step: 0, Status: "waiting_for_signal", Signals: []string{"go"}})
			return b.rec("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
		}},
		{"consume a signal that is not stored", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2)
			sig := b.add("wf_1", &record.SignalReceived{WorkflowID: "wf_1", Name: "go"})
			return b.rec("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1, Consumed: []uint64{sig, sig + 100}})
		}},
		{"complete before the last step", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2)
			b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
			return b.rec("wf_1", &record.WorkflowCompleted{WorkflowID: "wf_1"})
		}},
		{"wait while paused", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2)
			b.add("wf_1", &record.WorkflowPaused{WorkflowID: "wf_1"})
			return b.rec("wf_1", &record.WorkflowWaiting{WorkflowID: "wf_1", Step: 0, Status: "waiting_for_signal", Signals: []string{"go"}})
		}},
		{"fail twice", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2)
			b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "boom", At: at(time.Second)})
			return b.rec("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "again", At: at(2 * time.Second)})
		}},
		{"exceed the deadline without workflow_failed", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 2, func(ws *record.WorkflowStarted) { ws.DeadlineAt = at(time.Second) })
			return b.rec("wf_1", &record.WorkflowDeadlineExceeded{WorkflowID: "wf_1", DeadlineAt: at(time.Second), DetectedAt: at(time.Second), Handler: "notify"})
		}},
		{"start a workflow with a held idempotency key", func(b *testBundle) record.Record {
			b.startWorkflow("wf_1", 1, func(ws *record.WorkflowStarted) { ws.IdempotencyKey = "k" })
			return b.rec("wf_2", &record.WorkflowStarted{WorkflowID: "wf_2", Name: "import", Steps: 1, IdempotencyKey: "k"})
		}},
	})
}

// WF-6, WF-11: a step that completes consumes exactly the stored signals
// it names (each satisfies at most one wait), merges its output, moves to
// the next step and leaves nothing of the step it finished: no wait, no
// entry, no delay.
func TestWF6_StepCompletionConsumesItsSignalsAndClearsTheStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkflow("wf_1", 3, func(ws *record.WorkflowStarted) {
		ws.State = encodeState(t, map[string]any{"source": "s3://x"})
	})
	first := b.add("wf_1", &record.SignalReceived{WorkflowID: "wf_1", Name: "approval", Payload: []byte{0x80}})
	second := b.add("wf_1", &record.SignalReceived{WorkflowID: "wf_1", Name: "approval", Payload: []byte{0x80}})
	// Step 0 is a Delay.
	b.add("wf_1", &record.StepDelayed{WorkflowID: "wf_1", Step: 0, FireAt: at(time.Hour)})
	if w := b.workflow("wf_1"); w.DelayFireAt != at(time.Hour) || !w.Entered {
		t.Fatalf("after step_delayed: delay %d entered %v", w.DelayFireAt, w.Entered)
	}
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
	w := b.workflow("wf_1")
	if w.Step != 1 || w.DelayFireAt != 0 || w.Entered || w.Wait != nil || len(w.Signals) != 2 {
		t.Fatalf("after the delay: step %d delay %d entered %v wait %+v signals %d", w.Step, w.DelayFireAt, w.Entered, w.Wait, len(w.Signals))
	}
	// Step 1 waits for a signal; the oldest stored one satisfies it.
	b.add("wf_1", &record.WorkflowWaiting{WorkflowID: "wf_1", Step: 1, Status: "waiting_for_signal", Signals: []string{"approval"}})
	if w.Status != WorkflowWaitingSignal || w.Wait == nil || !w.Entered {
		t.Fatalf("after workflow_waiting: %s wait %+v entered %v", w.Status, w.Wait, w.Entered)
	}
	b.add("wf_1", &record.WorkflowResumed{WorkflowID: "wf_1", Cause: "signal"})
	if w.Status != WorkflowRunning || w.Wait != nil {
		t.Fatalf("after workflow_resumed: %s wait %+v", w.Status, w.Wait)
	}
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 1, Next: 2, Consumed: []uint64{first},
		Output: encodeState(t, map[string]any{"by": "ann"})})
	if w.Step != 2 || w.Entered || w.Wait != nil || len(w.Signals) != 1 || w.Signals[0].Seq != second {
		t.Fatalf("after the wait: step %d entered %v wait %+v signals %+v", w.Step, w.Entered, w.Wait, w.Signals)
	}
	wantState(t, "the state", w.State, map[string]any{"source": "s3://x", "by": "ann"})
	// The consumed signal cannot satisfy another wait.
	mustRefuse(t, b.s, b.rec("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 2, Next: 3, Consumed: []uint64{first}}), ErrImpossible)
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 2, Next: 3, Consumed: []uint64{second}})
	if len(w.Signals) != 0 {
		t.Fatalf("signals left: %+v", w.Signals)
	}
	checkInvariants(t, b.s)
}

// WF-11: enqueueing a job for the workflow's current step is the step's
// entry; the engine re-enters a step only while it has none (WF-16).
func TestWF11_StepJobEntersItsStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startWorkflow("wf_1", 2)
	if w.Entered {
		t.Fatal("a new workflow has entered its first step")
	}
	b.enqueueStep("job_s", "wf_1", 0, 0)
	if !w.Entered {
		t.Fatal("a job_enqueued of the current step did not enter it")
	}
}

// WF-10, WF-5: a failure ends the pending delay and the wait: a failed
// workflow is timed by nothing until it is retried.
func TestWF10_FailureEndsThePendingDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startWorkflow("wf_1", 2, func(ws *record.WorkflowStarted) { ws.DeadlineAt = at(time.Minute) })
	b.add("wf_1", &record.StepDelayed{WorkflowID: "wf_1", Step: 0, FireAt: at(time.Hour)})
	b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "Deadline exceeded", At: at(time.Minute)})
	if w.Status != WorkflowFailed || w.DelayFireAt != 0 || w.Wait != nil || w.FailedAt != at(time.Minute) {
		t.Fatalf("failed workflow: %s delay %d wait %+v failed at %d", w.Status, w.DelayFireAt, w.Wait, w.FailedAt)
	}
}

// WF-18, WF-20, WF-4: a branch that succeeds while its workflow is failed
// at that step keeps its output, and a retry keeps it, so the retry starts
// no new job for that branch and merges the output when the step
// completes. A late result of another step is discarded.
func TestWF18_RetryKeepsSucceededBranches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startWorkflow("wf_1", 2)
	b.enqueueStep("job_a", "wf_1", 0, 0)
	b.enqueueStep("job_b", "wf_1", 0, 1)
	b.start("job_a")
	b.start("job_b")
	// Branch 0 is buried: the workflow fails; branch 1 is still running
	// (WD-9) and succeeds after the failure.
	o := out("job_a", b.job("job_a").Token)
	o.Code, o.Error, o.Class = "E", "boom", "permanent"
	b.add("wf_1", &record.AttemptBuried{Outcome: o})
	b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Step: 0, Error: "boom", At: at(time.Second)})
	outB := encodeState(t, map[string]any{"b": int64(1)})
	b.succeedWith("job_b", outB)
	if len(w.Branches) != 1 || w.Branches[0].Branch != 1 {
		t.Fatalf("branches while failed: %+v", w.Branches)
	}
	b.add("wf_1", &record.WorkflowRetried{WorkflowID: "wf_1"})
	if w.Status != WorkflowRunning || len(w.Branches) != 1 || w.Branches[0].Branch != 1 {
		t.Fatalf("after the retry: %s branches %+v", w.Status, w.Branches)
	}
	// The retry re-enters branch 0 only.
	b.enqueueStep("job_a2", "wf_1", 0, 0)
	b.start("job_a2")
	b.succeedWith("job_a2", encodeState(t, map[string]any{"a": int64(1)}))
	if len(w.Branches) != 2 || w.Branches[1].Branch != 0 {
		t.Fatalf("branches after the retried branch: %+v", w.Branches)
	}
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
	checkInvariants(t, b.s)
}

// WF-18: a workflow_retried with drop_outputs (a Then step's retry)
// drops the output kept for the step, so the retry's new job is the
// step's only branch; one without it, as older builds wrote for every
// retry, keeps it.
func TestWF18_RetryDropsAThenStepsKeptOutput(t *testing.T) {
	t.Parallel()
	for _, drop := range []bool{true, false} {
		b := setup(t)
		w := b.startWorkflow("wf_1", 2)
		b.enqueueStep("job_a", "wf_1", 0, 0)
		b.start("job_a")
		// The check expires the workflow while job_a runs (WD-9); its late
		// success is kept for the step, not merged.
		b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Step: 0, Error: "Deadline exceeded", At: at(time.Second)})
		b.succeedWith("job_a", encodeState(t, map[string]any{"late": true}))
		if len(w.Branches) != 1 {
			t.Fatalf("branches while failed: %+v", w.Branches)
		}
		b.add("wf_1", &record.WorkflowRetried{WorkflowID: "wf_1", DropOutputs: drop})
		if want := map[bool]int{true: 0, false: 1}[drop]; w.Status != WorkflowRunning || len(w.Branches) != want {
			t.Fatalf("drop_outputs %t: after the retry %s with branches %+v, want %d", drop, w.Status, w.Branches, want)
		}
		checkInvariants(t, b.s)
	}
}

// WF-20: an attempt of an earlier step that settles after its workflow
// moved on changes nothing in the current step.
func TestWF20_LateResultOfAnEarlierStepIsDiscarded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startWorkflow("wf_1", 3)
	b.enqueueStep("job_old", "wf_1", 0, 0)
	b.start("job_old")
	// The workflow fails at step 0 while job_old runs on, is retried, and
	// a new job completes step 0.
	b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Step: 0, Error: "Deadline exceeded", At: at(time.Second)})
	b.add("wf_1", &record.WorkflowRetried{WorkflowID: "wf_1"})
	b.enqueueStep("job_new", "wf_1", 0, 0)
	b.start("job_new")
	b.succeedWith("job_new", nil)
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
	b.enqueueStep("job_1", "wf_1", 1, 0)
	// job_old, of step 0, succeeds while the workflow runs step 1.
	b.succeedWith("job_old", encodeState(t, map[string]any{"stale": true}))
	if len(w.Branches) != 0 {
		t.Fatalf("a result of step 0 counts at step %d: %+v", w.Step, w.Branches)
	}
	if _, ok := b.s.Jobs["job_old"]; ok {
		t.Fatal("the late job is still in the state")
	}
	checkInvariants(t, b.s)
}

// WD-10, WF-12: an expiry with an on-deadline handler records the
// workflow's public state, is outstanding while its handler runs and ends
// when the handler finishes; a second finish names no obligation.
func TestWD10_ExpiryObligationUntilItsHandlerFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkflow("wf_1", 2, func(ws *record.WorkflowStarted) {
		ws.DeadlineAt, ws.OnDeadline = at(time.Minute), "notify"
		ws.State = encodeState(t, map[string]any{"source": "s3://x", "_import_token": "k1"})
	})
	b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "Deadline exceeded", At: at(time.Minute)})
	seq := b.add("wf_1", &record.WorkflowDeadlineExceeded{WorkflowID: "wf_1", DeadlineAt: at(time.Minute),
		DetectedAt: at(time.Minute), DetectedBy: "check", Handler: "notify"})
	e, ok := b.s.Expiry(seq)
	if !ok || e.WorkflowID != "wf_1" || e.Handler != "notify" || e.Name != "import" {
		t.Fatalf("expiry %d: %+v %v", seq, e, ok)
	}
	wantState(t, "the handler's state", e.State, map[string]any{"source": "s3://x"})
	b.add("wf_1", &record.DeadlineHandlerStarted{WorkflowID: "wf_1", Handler: "notify", Expiry: seq})
	if b.s.ExpiryCount() != 1 {
		t.Fatalf("%d obligations while the handler runs", b.s.ExpiryCount())
	}
	b.add("wf_1", &record.DeadlineHandlerFinished{WorkflowID: "wf_1", Expiry: seq, Outcome: "ok"})
	if _, ok := b.s.Expiry(seq); ok || b.s.ExpiryCount() != 0 || b.s.Expiries() != nil {
		t.Fatalf("obligation %d outstanding after its handler finished", seq)
	}
	mustRefuse(t, b.s, b.rec("wf_1", &record.DeadlineHandlerFinished{WorkflowID: "wf_1", Expiry: seq, Outcome: "ok"}), ErrImpossible)
}

// WF-3, WF-12: a step's output writes its public keys over the state and
// its "_" keys are dropped; the dispatch payload's "_" keys stay stored but
// are not public. The examples are the spec's.
func TestWF3_OutputMergesPublicKeysOnly(t *testing.T) {
	t.Parallel()
	merged, err := MergeState(
		encodeState(t, map[string]any{"source": "s3://x"}),
		encodeState(t, map[string]any{"rows": int64(120), "_tmp": "y"}))
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "the merged state", merged, map[string]any{"source": "s3://x", "rows": int64(120)})
	pub, err := PublicState(encodeState(t, map[string]any{
		"source": "s3://bucket/x", "temp_file": "import-42.csv", "_import_token": "k1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "the public state", pub, map[string]any{"source": "s3://bucket/x", "temp_file": "import-42.csv"})
}

// WF-9, WF-18, RL-11: completed and cancelled workflows leave the state
// with their idempotency keys (the terminal index keeps those, WF-14) and
// are counted apart; a retry clears the failure.
func TestWF9_TerminalWorkflowsLeaveTheState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkflow("wf_1", 1, func(ws *record.WorkflowStarted) { ws.IdempotencyKey = "k1" })
	w2 := b.startWorkflow("wf_2", 1, func(ws *record.WorkflowStarted) { ws.IdempotencyKey = "k2" })
	if b.s.Idempotency["k1"] != "wf_1" || b.s.Idempotency["k2"] != "wf_2" {
		t.Fatalf("idempotency keys of active workflows: %v", b.s.Idempotency)
	}
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
	b.add("wf_1", &record.WorkflowCompleted{WorkflowID: "wf_1"})
	b.add("wf_2", &record.WorkflowFailed{WorkflowID: "wf_2", Error: "boom", At: at(time.Second)})
	b.add("wf_2", &record.WorkflowRetried{WorkflowID: "wf_2"})
	if w2.Status != WorkflowRunning || w2.Error != "" || w2.FailedAt != 0 {
		t.Fatalf("retried workflow: %s error %q failed at %d", w2.Status, w2.Error, w2.FailedAt)
	}
	b.add("wf_2", &record.WorkflowCancelled{WorkflowID: "wf_2"})
	if len(b.s.Workflows) != 0 || len(b.s.WorkflowIDsNamed("import")) != 0 || len(b.s.Idempotency) != 0 {
		t.Fatalf("terminal workflows in the state: %v, keys %v", b.s.WorkflowIDs(), b.s.Idempotency)
	}
	if b.s.WorkflowsCompleted != 1 || b.s.WorkflowsCancelled != 1 {
		t.Fatalf("completed %d cancelled %d, want 1 and 1", b.s.WorkflowsCompleted, b.s.WorkflowsCancelled)
	}
	checkInvariants(t, b.s)
}
