package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

func TestRL3_ApplyRefusesSeqGap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue("job_a")
	body := &record.JobEnqueued{JobID: "job_b", Handler: "h", Queue: "default", Retry: policy}
	for _, seq := range []uint64{0, 1, 3, 100} {
		r := record.Record{Seq: seq, Stream: "job_b", Body: body}
		mustRefuse(t, b.s, r, ErrOrder)
	}
	if err := Apply(b.s, b.rec("job_b", body)); err != nil {
		t.Fatalf("the next seq after refusals: %v", err)
	}
}

func TestDL45_ApplyRefusesKindsItDoesNotFold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue("job_a")
	// Every workflow kind folds, but a zero body names no active workflow:
	// it is an impossible transition, never a panic.
	for _, k := range record.Kinds() {
		if k < record.KindWorkflowStarted || k > record.KindDeadlineHandlerFinished {
			continue
		}
		body, _ := record.NewBody(k)
		mustRefuse(t, b.s, b.rec("wf_1", body), ErrImpossible)
	}
	mustRefuse(t, b.s, b.rec("job_a", nil), ErrUnknownKind)
	// A typed nil body is a record without body too, never a panic.
	mustRefuse(t, b.s, b.rec("job_a", (*record.AttemptStarted)(nil)), ErrUnknownKind)
	mustRefuse(t, b.s, b.rec("job_a", (*record.JobEnqueued)(nil)), ErrUnknownKind)
}

func TestRL10_ApplyRefusesImpossibleTransitions(t *testing.T) {
	t.Parallel()
	refuseAll(t, []refusal{
		{"settle with a wrong token", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			tok := b.start("job_a")
			return b.rec("job_a", &record.AttemptSucceeded{Outcome: out("job_a", tok+7)})
		}},
		{"settle with a token of another job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.enqueue("job_b")
			tokA := b.start("job_a")
			b.start("job_b")
			return b.rec("job_b", &record.AttemptBuried{Outcome: out("job_b", tokA)})
		}},
		{"settle a token revoked by run_started", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			tok := b.start("job_a")
			b.add(record.EngineStream, &record.RunStarted{RunID: "r2", At: at(time.Second)})
			return b.rec("job_a", &record.AttemptSucceeded{Outcome: out("job_a", tok)})
		}},
		{"settle a token revoked by a new start", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			tok := b.start("job_a")
			b.add(record.EngineStream, &record.RunStarted{RunID: "r2", At: at(time.Second)})
			b.start("job_a")
			return b.rec("job_a", &record.AttemptReleased{Outcome: out("job_a", tok), AvailableAt: at(0)})
		}},
		{"settle a token twice", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			tok := b.start("job_a")
			b.retry("job_a", tok, at(time.Second))
			return b.rec("job_a", &record.AttemptRetryScheduled{Outcome: out("job_a", tok), AvailableAt: at(time.Second)})
		}},
		{"settle an unknown job", func(b *testBundle) record.Record {
			return b.rec("job_x", &record.AttemptSucceeded{Outcome: out("job_x", 1)})
		}},
		{"start a processing job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.start("job_a")
			return b.rec("job_a", b.startBody("job_a"))
		}},
		{"start a buried job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.add("job_a", &record.JobBuried{JobID: "job_a", Error: "buried by operator"})
			return b.rec("job_a", b.startBody("job_a"))
		}},
		{"start an unknown job", func(b *testBundle) record.Record {
			return b.rec("job_x", &record.AttemptStarted{JobID: "job_x", Attempt: 1})
		}},
		{"skip an attempt number", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			body := b.startBody("job_a")
			body.Attempt = 2
			return b.rec("job_a", body)
		}},
		{"repeat an attempt number", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			tok := b.start("job_a")
			b.release("job_a", tok, at(0))
			body := b.startBody("job_a")
			body.Attempt = 1
			return b.rec("job_a", body)
		}},
		{"enqueue a job twice", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			return b.rec("job_a", &record.JobEnqueued{JobID: "job_a", Handler: "h", Queue: "default"})
		}},
		{"enqueue the id of a processing job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.start("job_a")
			return b.rec("job_a", &record.JobEnqueued{JobID: "job_a", Handler: "h", Queue: "default"})
		}},
		{"enqueue a job without id", func(b *testBundle) record.Record {
			return b.rec("job_", &record.JobEnqueued{Handler: "h", Queue: "default"})
		}},
		{"hold a unique key twice", func(b *testBundle) record.Record {
			b.enqueue("job_a", unique("k"))
			return b.rec("job_b", &record.JobEnqueued{JobID: "job_b", Handler: "h", Queue: "default", UniqueKey: "k"})
		}},
		{"bury a processing job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.start("job_a")
			return b.rec("job_a", &record.JobBuried{JobID: "job_a", Error: "buried by operator"})
		}},
		{"bury a buried job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.add("job_a", &record.JobBuried{JobID: "job_a", Error: "buried by operator"})
			return b.rec("job_a", &record.JobBuried{JobID: "job_a", Error: "buried by operator"})
		}},
		{"requeue a pending job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			return b.rec("job_a", &record.JobRequeued{JobID: "job_a", AvailableAt: at(0)})
		}},
		{"requeue a processing job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.start("job_a")
			return b.rec("job_a", &record.JobRequeued{JobID: "job_a", AvailableAt: at(0)})
		}},
		{"requeue a completed job", func(b *testBundle) record.Record {
			b.enqueue("job_a")
			b.succeed("job_a", b.start("job_a"))
			return b.rec("job_a", &record.JobRequeued{JobID: "job_a", AvailableAt: at(0)})
		}},
		{"two shutdown reports in one run", func(b *testBundle) record.Record {
			b.add(record.EngineStream, &record.RunStarted{RunID: "r1"})
			b.add(record.EngineStream, &record.ShutdownReport{Completion: "clean"})
			return b.rec(record.EngineStream, &record.ShutdownReport{Completion: "clean"})
		}},
	})
}

func TestApplyErrorUnwraps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := Apply(b.s, b.rec("job_x", &record.JobRequeued{JobID: "job_x"}))
	var ae *ApplyError
	if !errors.As(err, &ae) || !errors.Is(err, ErrImpossible) || errors.Is(err, ErrOrder) {
		t.Fatalf("Apply = %v", err)
	}
	if ae.Error() == "" || ae.Kind != record.KindJobRequeued || ae.Seq != 1 {
		t.Fatalf("ApplyError = %+v", ae)
	}
	if err := Fold(b.s, b.rec("job_x", nil)); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("Fold = %v, want ErrUnknownKind", err)
	}
}

func TestDL6_ConsumedAccounting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue("job_a")
	want := func(status JobStatus, attempts, consumed int32) {
		t.Helper()
		j := b.job("job_a")
		if j.Status != status || j.Attempts != attempts || j.Consumed != consumed {
			t.Fatalf("job is %s attempts %d consumed %d, want %s %d %d", j.Status, j.Attempts, j.Consumed, status, attempts, consumed)
		}
		checkInvariants(t, b.s)
	}
	want(JobPending, 0, 0)
	tok := b.start("job_a") // a start consumes (a crash after it counts, DL-44)
	want(JobProcessing, 1, 1)
	b.release("job_a", tok, at(2*time.Second)) // a release gives it back
	want(JobPending, 1, 0)
	if j := b.job("job_a"); j.AvailableAt != at(2*time.Second) || j.Token != 0 {
		t.Fatalf("released job available at %d token %d", j.AvailableAt, j.Token)
	}
	tok = b.start("job_a")
	want(JobProcessing, 2, 1)
	b.retry("job_a", tok, at(3*time.Second)) // a retryable failure keeps it
	want(JobPending, 2, 1)
	if j := b.job("job_a"); j.AvailableAt != at(3*time.Second) || j.LastError != "boom" || j.LastCode != "E" {
		t.Fatalf("retried job = %+v", j)
	}
	tok = b.start("job_a")
	want(JobProcessing, 3, 2)
	b.buryAttempt("job_a", tok) // a burying failure keeps it
	want(JobBuried, 3, 2)
	b.add("job_a", &record.JobRequeued{JobID: "job_a", AvailableAt: at(4 * time.Second)})
	want(JobPending, 3, 0) // JB-7: a fresh consumed count
	if j := b.job("job_a"); j.AvailableAt != at(4*time.Second) {
		t.Fatalf("requeued job available at %d, want the requeue's instant (JB-7)", j.AvailableAt)
	}
	tok = b.start("job_a")
	want(JobProcessing, 4, 1)
	// Success keeps it too; the job leaves the state (JB-3).
	before := b.s.Completed
	b.succeed("job_a", tok)
	if _, ok := b.s.Jobs["job_a"]; ok || b.s.Completed != before+1 || len(b.s.Tokens) != 0 {
		t.Fatalf("completed job still in state, or Completed %d", b.s.Completed)
	}
}

func TestDL44_RunStartedReopensOpenAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue("job_late", func(e *record.JobEnqueued) { e.AvailableAt = at(time.Hour) })
	b.enqueue("job_early", func(e *record.JobEnqueued) { e.AvailableAt = at(-time.Hour) })
	b.enqueue("job_idle")
	b.start("job_late") // a forged but foldable start before its instant
	b.start("job_early")
	b.add(record.EngineStream, &record.RunStarted{RunID: "r2", Version: "v", At: at(time.Minute), Recovered: 2})
	if len(b.s.Tokens) != 0 {
		t.Fatalf("tokens survive run_started: %v", b.s.Tokens)
	}
	for id, wantAt := range map[string]int64{"job_late": at(time.Minute), "job_early": at(-time.Hour)} {
		j := b.job(id)
		if j.Status != JobPending || j.Token != 0 || !j.Lost || j.Consumed != 1 || j.Attempts != 1 {
			t.Fatalf("%s after run_started = %+v", id, j)
		}
		if j.AvailableAt != wantAt {
			t.Fatalf("%s available at %v, want min(old, run_started.At) = %v", id, time.Unix(0, j.AvailableAt).UTC(), time.Unix(0, wantAt).UTC())
		}
	}
	if j := b.job("job_idle"); j.Lost || j.AvailableAt != at(0) {
		t.Fatalf("a pending job was touched by recovery: %+v", j)
	}
	if run := b.s.LastRun(); run == nil || run.RunID != "r2" || run.StartedAt != at(time.Minute) {
		t.Fatalf("last run = %+v", run)
	}
	// The next start revokes nothing left and clears Lost.
	b.start("job_early")
	if j := b.job("job_early"); j.Lost || j.Attempts != 2 || j.Consumed != 2 {
		t.Fatalf("restarted job = %+v", j)
	}
	checkInvariants(t, b.s)
}

func TestSD33_RunsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range RunsKeptMax + 5 {
		b.add(record.EngineStream, &record.RunStarted{RunID: "r"})
	}
	if len(b.s.Runs) != RunsKeptMax || b.s.Runs[0].StartSeq != 6 {
		t.Fatalf("runs = %d, oldest seq %d", len(b.s.Runs), b.s.Runs[0].StartSeq)
	}
	b.add(record.EngineStream, &record.ShutdownInitiated{Trigger: "signal"})
	b.add(record.EngineStream, &record.ShutdownForceRequested{Trigger: "signal"})
	b.add(record.EngineStream, &record.ShutdownPhaseStarted{Phase: 2})
	b.add(record.EngineStream, &record.ShutdownPhaseFinished{Phase: 2})
	sd := b.s.LastRun().Shutdown
	if sd.Initiated == nil || !sd.Forced || sd.PhaseStart != 2 || sd.PhaseEnd != 2 {
		t.Fatalf("shutdown = %+v", sd)
	}
}

func TestJB5_UniqueKeyReleasedAndReReserved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	holder := func(key string) string { return b.s.Unique[key] }

	// Success releases the key.
	b.enqueue("job_a", unique("k"))
	if holder("k") != "job_a" {
		t.Fatalf("k held by %q", holder("k"))
	}
	b.succeed("job_a", b.start("job_a"))
	if _, held := b.s.Unique["k"]; held {
		t.Fatal("k still held after success")
	}

	// A burying attempt releases it; a requeue re-reserves it while free.
	b.enqueue("job_b", unique("k"))
	b.buryAttempt("job_b", b.start("job_b"))
	if _, held := b.s.Unique["k"]; held {
		t.Fatal("k still held after attempt_buried")
	}
	b.add("job_b", &record.JobRequeued{JobID: "job_b", AvailableAt: at(0)})
	if holder("k") != "job_b" {
		t.Fatalf("requeue did not re-reserve k: held by %q", holder("k"))
	}

	// A manual bury releases it; a requeue while another job holds it
	// leaves the other holder in place.
	b.add("job_b", &record.JobBuried{JobID: "job_b", Error: "buried by operator"})
	if _, held := b.s.Unique["k"]; held {
		t.Fatal("k still held after job_buried")
	}
	b.enqueue("job_c", unique("k"))
	b.add("job_b", &record.JobRequeued{JobID: "job_b", AvailableAt: at(0)})
	if holder("k") != "job_c" {
		t.Fatalf("k held by %q, want job_c", holder("k"))
	}
	// Without KeepKey (a record written before it existed) the requeued
	// job loses its key rather than wait for it.
	if j := b.s.Jobs["job_b"]; j.UniqueKey != "" || len(b.s.uniqueWaiting) != 0 {
		t.Fatalf("job_b requeued without KeepKey: key %q, lines %v", j.UniqueKey, b.s.uniqueWaiting)
	}
	checkInvariants(t, b.s)
	// Retry and release keep the key.
	b.retry("job_c", b.start("job_c"), at(time.Second))
	b.release("job_c", b.start("job_c"), at(time.Second))
	if holder("k") != "job_c" {
		t.Fatalf("k held by %q after retry and release, want job_c", holder("k"))
	}
	// The non-holder's end does not release the holder's key.
	b.succeed("job_b", b.start("job_b"))
	if holder("k") != "job_c" {
		t.Fatalf("k held by %q after the non-holder completed", holder("k"))
	}
	checkInvariants(t, b.s)
}

// JB-5, JB-7: a buried job retried (job_requeued with KeepKey) while
// another job holds its unique key waits in line for the key, so that an enqueue never creates a job while
// one with the key is pending: when the holder ends, the first in line (by
// id) takes the key; one that ends while in line leaves the line. A
// snapshot taken with a line rebuilds it.
func TestJB5_JB7_RetriedJobTakesTheKeyWhenTheHolderEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	holder := func() string { return b.s.Unique["k"] }
	b.enqueue("job_x", unique("k"))
	b.buryAttempt("job_x", b.start("job_x"))
	b.enqueue("job_w", unique("k"))
	b.add("job_w", &record.JobBuried{JobID: "job_w", Error: "buried by operator"})
	b.enqueue("job_y", unique("k"))
	b.add("job_x", &record.JobRequeued{JobID: "job_x", AvailableAt: at(0), KeepKey: true})
	b.add("job_w", &record.JobRequeued{JobID: "job_w", AvailableAt: at(0), KeepKey: true})
	if holder() != "job_y" {
		t.Fatalf("k held by %q, want job_y, which held it before the retries", holder())
	}
	checkInvariants(t, b.s)
	snapshotOf(t, "a snapshot with a line", b.s)

	// The holder ends: the first in line by id takes the key.
	b.succeed("job_y", b.start("job_y"))
	if holder() != "job_w" {
		t.Fatalf("k held by %q after the holder completed, want job_w", holder())
	}
	checkInvariants(t, b.s)
	// One in line that ends leaves the line; the holder ends by burial.
	b.enqueue("job_z", unique("l")) // another key is untouched
	b.add("job_x", &record.JobBuried{JobID: "job_x", Error: "buried by operator"})
	b.add("job_x", &record.JobRequeued{JobID: "job_x", AvailableAt: at(0), KeepKey: true})
	b.buryAttempt("job_w", b.start("job_w"))
	if holder() != "job_x" || b.s.Unique["l"] != "job_z" {
		t.Fatalf("k held by %q, l by %q, want job_x and job_z", holder(), b.s.Unique["l"])
	}
	checkInvariants(t, b.s)
	b.succeed("job_x", b.start("job_x"))
	if _, held := b.s.Unique["k"]; held || len(b.s.uniqueWaiting) != 0 {
		t.Fatalf("k held by %q, lines %v, after every job with it ended", holder(), b.s.uniqueWaiting)
	}
	checkInvariants(t, b.s)
}

func TestJB8_QueuePauseFolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.add(record.EngineStream, &record.QueuePaused{Queue: "mail"})
	b.add(record.EngineStream, &record.QueuePaused{Queue: "mail"})
	if !b.s.PausedQueues["mail"] || len(b.s.PausedQueues) != 1 {
		t.Fatalf("paused = %v", b.s.PausedQueues)
	}
	b.add(record.EngineStream, &record.QueueResumed{Queue: "mail"})
	b.add(record.EngineStream, &record.QueueResumed{Queue: "other"})
	if len(b.s.PausedQueues) != 0 {
		t.Fatalf("paused = %v", b.s.PausedQueues)
	}
}

// RL-11, WF-18: a workflow's step jobs are found through its own index,
// which follows every way a job enters and leaves the state, snapshots
// included; workflow_completed with archive_buried takes the buried jobs
// of an earlier entry out of the state.
func TestRL11_WorkflowJobsFollowTheirWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	step := func(wf string) func(*record.JobEnqueued) {
		return func(e *record.JobEnqueued) { e.WorkflowID = wf }
	}
	want := func(wf string, ids ...string) {
		t.Helper()
		var got []string
		for _, j := range b.s.WorkflowJobs(wf) {
			got = append(got, j.ID)
		}
		if len(got) != len(ids) {
			t.Fatalf("jobs of %s: %v, want %v", wf, got, ids)
		}
		for i := range ids {
			if got[i] != ids[i] {
				t.Fatalf("jobs of %s: %v, want %v in enqueue order", wf, got, ids)
			}
		}
		checkInvariants(t, b.s)
		dec := snapshotOf(t, "snapshot of "+wf, b.s)
		if n := len(dec.WorkflowJobs(wf)); n != len(ids) {
			t.Fatalf("jobs of %s after a snapshot: %d, want %d", wf, n, len(ids))
		}
	}
	b.add("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "w", Steps: 1})
	b.add("wf_2", &record.WorkflowStarted{WorkflowID: "wf_2", Name: "w", Steps: 1})
	// Enqueued in an order their ids do not sort in.
	b.enqueue("job_z", step("wf_1"))
	b.enqueue("job_y", step("wf_1"))
	b.enqueue("job_x", step("wf_2"))
	b.enqueue("job_free")
	want("wf_1", "job_z", "job_y")
	want("wf_2", "job_x")
	want("")

	b.buryAttempt("job_z", b.start("job_z"))
	b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "x"})
	b.add("job_y", &record.JobBuried{JobID: "job_y", Error: "x"})
	want("wf_1", "job_z", "job_y") // buried, but retryable with their workflow
	b.add("wf_1", &record.WorkflowRetried{WorkflowID: "wf_1"})
	b.enqueue("job_w", step("wf_1"))
	b.succeed("job_w", b.start("job_w"))
	want("wf_1", "job_z", "job_y")
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
	b.add("wf_1", &record.WorkflowCompleted{WorkflowID: "wf_1", ArchiveBuried: true})
	want("wf_1")
	for _, id := range []string{"job_z", "job_y", "job_w"} {
		if _, ok := b.s.Jobs[id]; ok {
			t.Fatalf("job %s of completed workflow wf_1 is still in the state", id)
		}
	}
	want("wf_2", "job_x")
	if _, ok := b.s.Jobs["job_free"]; !ok {
		t.Fatal("a job of no workflow left with wf_1")
	}
}

// JB-6: a job an operator buries keeps the last failure of its attempts;
// one that never failed takes the burial's code and message. A burial for
// another reason (its workflow failed, was cancelled or expired) records
// that reason.
func TestJB6_OperatorBuryKeepsTheLastFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	operator := &record.JobBuried{Code: record.CodeBuriedByOperator, Error: "buried by operator"}
	bury := func(id string, body record.JobBuried) {
		t.Helper()
		body.JobID = id
		b.add(id, &body)
	}
	b.enqueue("job_failed")
	b.retry("job_failed", b.start("job_failed"), at(time.Second))
	bury("job_failed", *operator)
	if j := b.job("job_failed"); j.Status != JobBuried || j.LastCode != "E" || j.LastError != "boom" || j.Attempts != 1 || j.Consumed != 1 {
		t.Fatalf("buried after a failure: %+v", j)
	}
	b.enqueue("job_fresh")
	bury("job_fresh", *operator)
	if j := b.job("job_fresh"); j.LastCode != record.CodeBuriedByOperator || j.LastError != "buried by operator" {
		t.Fatalf("buried without a failure: code %q error %q", j.LastCode, j.LastError)
	}
	b.enqueue("job_step")
	b.retry("job_step", b.start("job_step"), at(time.Second))
	bury("job_step", record.JobBuried{Code: "WORKFLOW_FAILED", Error: "Workflow cancelled"})
	if j := b.job("job_step"); j.LastCode != "WORKFLOW_FAILED" || j.LastError != "Workflow cancelled" {
		t.Fatalf("buried with its workflow: code %q error %q", j.LastCode, j.LastError)
	}
	checkInvariants(t, b.s)
}
