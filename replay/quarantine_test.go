package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// A quarantined stream stops at its last good record and leaves the
// scheduler's view, keeping its unique key reserved, while the other
// streams fold on (spec/reliability.md §4.4).
func TestRL5_QuarantineSetsAStreamAside(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue("job_a", unique("k"))
	b.enqueue("job_b")
	tok := b.start("job_a")
	cause := errors.New("checksum")
	if err := b.s.QuarantineStream(b.s.LastSeq+1, "job_a", cause); err != nil {
		t.Fatal(err)
	}
	q, ok := b.s.QuarantineOf("job_a")
	if !ok || q.Seq != 4 || q.Err != cause || q.Jobs["job_a"] == nil || q.Jobs["job_a"].Status != JobProcessing {
		t.Fatalf("quarantine %+v", q)
	}
	if _, live := b.s.Jobs["job_a"]; live {
		t.Fatal("the quarantined job is still in Jobs")
	}
	if _, open := b.s.Tokens[tok]; open {
		t.Fatal("the quarantined attempt's token is still open")
	}
	if b.s.Unique["k"] != "job_a" {
		t.Fatalf("unique key released: %v", b.s.Unique)
	}
	// Later records of the stream are passed over, even ones that would
	// not apply to it; the other stream folds on.
	b.add("job_a", &record.AttemptSucceeded{Outcome: record.Outcome{JobID: "job_a", Token: tok + 99}})
	b.start("job_b")
	if b.s.LastSeq != 6 || b.s.Jobs["job_b"].Status != JobProcessing || q.Jobs["job_a"].Status != JobProcessing {
		t.Fatalf("after the quarantine: last %d, job_b %+v", b.s.LastSeq, b.s.Jobs["job_b"])
	}
	// A second damaged record of the stream keeps the first cause.
	if err := b.s.QuarantineStream(7, "job_a", errors.New("other")); err != nil || b.s.Quarantined["job_a"].Seq != 4 || b.s.LastSeq != 7 {
		t.Fatalf("second damage: %v, %+v", err, b.s.Quarantined["job_a"])
	}
	// The engine stream is never quarantined, and order still holds.
	if err := b.s.QuarantineStream(8, record.EngineStream, cause); !errors.Is(err, ErrImpossible) {
		t.Fatalf("engine stream: %v", err)
	}
	if err := b.s.QuarantineStream(10, "job_b", cause); !errors.Is(err, ErrOrder) {
		t.Fatalf("seq gap: %v", err)
	}
}

// §4.4 of spec/reliability.md: a quarantined workflow stream takes its
// step jobs with it (no deliveries: their open tokens are revoked) and its
// on-deadline obligations (no handler runs for it); its idempotency key
// stays reserved, and its step jobs are found by their own ids.
func TestRL5_QuarantinedWorkflowTakesItsJobsAndObligations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkflow("wf_1", 2, func(ws *record.WorkflowStarted) {
		ws.DeadlineAt, ws.OnDeadline, ws.IdempotencyKey = at(time.Minute), "notify", "idem"
	})
	b.enqueueStep("job_s", "wf_1", 0, 0)
	tok := b.start("job_s")
	b.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: "Deadline exceeded", At: at(time.Minute)})
	b.add("wf_1", &record.WorkflowDeadlineExceeded{WorkflowID: "wf_1", DeadlineAt: at(time.Minute), DetectedAt: at(time.Minute), Handler: "notify"})
	b.enqueue("job_free")
	if b.s.ExpiryCount() != 1 {
		t.Fatalf("%d obligations before the quarantine", b.s.ExpiryCount())
	}
	if err := b.s.QuarantineStream(b.s.LastSeq+1, "wf_1", errors.New("checksum")); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.s.Workflows["wf_1"]; ok {
		t.Fatal("the quarantined workflow is still in Workflows")
	}
	if _, ok := b.s.Jobs["job_s"]; ok || len(b.s.WorkflowJobs("wf_1")) != 0 {
		t.Fatal("the quarantined workflow's step job is still in Jobs")
	}
	if _, open := b.s.Tokens[tok]; open {
		t.Fatal("the quarantined step job's token is still open")
	}
	if n := b.s.ExpiryCount(); n != 0 || b.s.Expiries() != nil {
		t.Fatalf("%d obligations of the quarantined workflow outstanding", n)
	}
	if b.s.Idempotency["idem"] != "wf_1" {
		t.Fatalf("idempotency key released: %v", b.s.Idempotency)
	}
	q, ok := b.s.QuarantineOf("job_s")
	if !ok || q.Stream != "wf_1" || q.Workflow == nil || q.Workflow.ID != "wf_1" || q.Jobs["job_s"] == nil {
		t.Fatalf("QuarantineOf(job_s) = %+v, %v", q, ok)
	}
	if _, ok := b.s.QuarantineOf("job_free"); ok {
		t.Fatal("a job of another stream is quarantined")
	}
	if _, ok := b.s.Jobs["job_free"]; !ok {
		t.Fatal("a job of another stream left the state")
	}
	checkInvariants(t, b.s)
}
