package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

// journalOf numbers bodies from seq 1, each at the instant beside it:
// what the oracle reads from a journal.
type at struct {
	ns   int64
	body record.Body
}

func journalOf(stream string, recs ...at) []record.Record {
	out := make([]record.Record, len(recs))
	for i, r := range recs {
		out[i] = record.Record{Seq: uint64(i + 1), At: r.ns, Stream: stream, Body: r.body}
	}
	return out
}

// Bodies of job "j" (stream "j"): an attempt n started at s with budget
// 10 (P at s+9, H at s+10), and settlements of token tok.
func enq(avail int64) *record.JobEnqueued {
	return &record.JobEnqueued{JobID: "j", Handler: "h", Queue: "default", AvailableAt: avail, Retry: record.RetryPolicy{MaxAttempts: 3}}
}

func start(n int32, s int64) *record.AttemptStarted {
	return &record.AttemptStarted{JobID: "j", Attempt: n, StartAt: s, NormalAt: s + 9, HardAt: s + 10}
}

func retried(tok uint64, delay int64, mod func(o *record.Outcome)) *record.AttemptRetryScheduled {
	b := &record.AttemptRetryScheduled{Outcome: record.Outcome{JobID: "j", Token: tok, Class: "retryable"}, DelayNanos: delay}
	if mod != nil {
		mod(&b.Outcome)
	}
	return b
}

// Step job bodies of workflow "w" (one step): job "s" of its first entry,
// "s2" of the entry a retry makes.
func wfStarted() *record.WorkflowStarted {
	return &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 1}
}

func stepEnq(id string) *record.JobEnqueued {
	return &record.JobEnqueued{JobID: id, Handler: "h", Queue: "default", WorkflowID: "w", Retry: record.RetryPolicy{MaxAttempts: 1}}
}

func stepStart(id string, s int64) *record.AttemptStarted {
	return &record.AttemptStarted{JobID: id, Attempt: 1, StartAt: s, NormalAt: s + 9, HardAt: s + 10}
}

// failedStep is a workflow whose step job s was buried (seq 4), failing
// it (seq 5), then retried (seq 6) with a new job s2 that completes the
// workflow (seq 7..10): what precedes workflow_completed.
func failedStep() []at {
	return []at{
		{0, wfStarted()}, {0, stepEnq("s")}, {1, stepStart("s", 1)},
		{2, &record.AttemptBuried{Outcome: record.Outcome{JobID: "s", Token: 3, Class: "permanent"}}},
		{2, &record.WorkflowFailed{WorkflowID: "w", Error: "broken", At: 2}},
	}
}

func retriedStep() []at {
	return append(failedStep(), at{3, &record.WorkflowRetried{WorkflowID: "w"}}, at{3, stepEnq("s2")}, at{4, stepStart("s2", 4)},
		at{5, &record.AttemptSucceeded{Outcome: record.Outcome{JobID: "s2", Token: 8}}},
		at{5, &record.StepCompleted{WorkflowID: "w", Step: 0, Next: 1}})
}

// cancelledPending is a workflow cancelled while its step job s waits
// for a retry (WF-17): the cancel buries s, Final as given.
func cancelledPending(final bool) []record.Record {
	return journalOf("w", at{0, wfStarted()}, at{0, stepEnq("s")}, at{1, stepStart("s", 1)},
		at{2, &record.AttemptRetryScheduled{Outcome: record.Outcome{JobID: "s", Token: 3, Class: "retryable"}, AvailableAt: 100}},
		at{3, &record.WorkflowCancelled{WorkflowID: "w"}},
		at{3, &record.JobBuried{JobID: "s", Code: "WORKFLOW_CANCELLED", Error: "Workflow cancelled", Final: final}})
}

// TestOracleChecksFire: each check of the oracle fires on the journal it
// exists to refuse, naming the rule, and stays quiet at its edge: a check
// that can never fire would pass every engine.
func TestOracleChecksFire(t *testing.T) {
	root := deadlines.NewRoot(time.Unix(0, 1000), 30*time.Second)
	cases := []struct {
		name string
		recs []record.Record
		want string // "": no violation but replay's
		not  string // a violation that must not appear
	}{
		{"RL-3 gap", []record.Record{{Seq: 1, At: 1, Stream: "j", Body: enq(0)}, {Seq: 3, At: 2, Stream: "j", Body: start(1, 2)}},
			"RL-3: record seq 3 follows seq 1", ""},
		{"RL-9 time goes back", journalOf("j", at{5, enq(0)}, at{4, start(1, 4)}), "RL-9: record seq 2 at 4 is before seq 1 at 5", ""},
		{"early start", journalOf("j", at{0, enq(100)}, at{50, start(1, 50)}), "early: attempt 1 of job j starts at 50, the job is available at 100", ""},
		{"start at availability", journalOf("j", at{0, enq(100)}, at{100, start(1, 100)}), "", "early"},
		{"early start after a retry delay", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{2, &record.AttemptRetryScheduled{Outcome: record.Outcome{JobID: "j", Token: 2}, DelayNanos: 98, AvailableAt: 100}},
			at{50, start(2, 50)}), "early: attempt 2 of job j starts at 50, the job is available at 100", ""},
		{"hard before start", journalOf("j", at{0, enq(0)}, at{1, &record.AttemptStarted{JobID: "j", Attempt: 1, StartAt: 10, NormalAt: 5, HardAt: 9}}),
			"negative budget", ""},
		{"normal after hard", journalOf("j", at{0, enq(0)}, at{1, &record.AttemptStarted{JobID: "j", Attempt: 1, StartAt: 1, NormalAt: 12, HardAt: 11}}),
			"negative budget", ""},
		{"negative retry delay", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{2, retried(2, -1, nil)}), "negative retry delay", ""},
		{"token no attempt holds", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{2, retried(7, 0, nil)}),
			"fencing: seq 3 settles token 7 of job j, which no attempt_started holds", ""},
		{"another job's token", append(journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}),
			record.Record{Seq: 3, At: 2, Stream: "k", Body: &record.AttemptBuried{Outcome: record.Outcome{JobID: "k", Token: 2}}}),
			"the token is job j's", ""},
		{"settled twice", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{2, retried(2, 0, nil)}, at{3, retried(2, 0, nil)}),
			"token 2 of job j settled twice: seq 3 and seq 4", ""},
		{"revoked by a new run", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{2, &record.RunStarted{RunID: "r2"}}, at{3, retried(2, 0, nil)}),
			"fencing: seq 4 settles token 2 of job j, whose open attempt is 0", ""},
		{"abandoned without a reason", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{20, retried(2, 0, func(o *record.Outcome) { o.Execution = "abandoned" })}),
			"DL-26: seq 3 abandons attempt 2 of job j without a reason", ""},
		{"unknown reason", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{20, retried(2, 0, func(o *record.Outcome) { o.Reason, o.ReasonAt = "bored", 10 })}),
			`unknown reason "bored"`, ""},
		{"reason recorded later", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{20, retried(2, 0, func(o *record.Outcome) { o.Reason, o.ReasonAt = "delivery_timeout", 21 })}),
			"recorded later, at 21", ""},
		{"timeout at P", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{20, retried(2, 0, func(o *record.Outcome) { o.Reason, o.ReasonAt = "delivery_timeout", 10 })}),
			"", "DL-16"},
		{"timeout before P", journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}, at{20, retried(2, 0, func(o *record.Outcome) { o.Reason, o.ReasonAt = "delivery_timeout", 9 })}),
			"DL-16: seq 3: delivery_timeout of job j", ""},
		{"delay step completes early", journalOf("w", at{0, &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 2}},
			at{1, &record.StepDelayed{WorkflowID: "w", Step: 0, FireAt: 100}}, at{50, &record.StepCompleted{WorkflowID: "w", Step: 0, Next: 1}}),
			"early: delay step 0 of workflow w completes at 50, it fires at 100", ""},
		{"deadline early", journalOf("w", at{0, &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 1, DeadlineAt: 100}},
			at{100, &record.WorkflowDeadlineExceeded{WorkflowID: "w", DeadlineAt: 100, DetectedAt: 99}}),
			"early: workflow w expires at 99, its deadline is 100", ""},
		{"deadline moved", journalOf("w", at{0, &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 1, DeadlineAt: 100}},
			at{200, &record.WorkflowDeadlineExceeded{WorkflowID: "w", DeadlineAt: 150, DetectedAt: 200}}),
			"deadline moved: workflow w expires with deadline 150, it was dispatched with 100", ""},
		{"deadline fires twice", journalOf("w", at{0, &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 1, DeadlineAt: 100}},
			at{100, &record.WorkflowDeadlineExceeded{WorkflowID: "w", DeadlineAt: 100, DetectedAt: 100}},
			at{101, &record.WorkflowDeadlineExceeded{WorkflowID: "w", DeadlineAt: 100, DetectedAt: 101}}),
			"workflow w's deadline fired twice", ""},
		{"deadline fires again after a retry", journalOf("w", at{0, &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 1, DeadlineAt: 100}},
			at{100, &record.WorkflowDeadlineExceeded{WorkflowID: "w", DeadlineAt: 100, DetectedAt: 100}},
			at{101, &record.WorkflowRetried{WorkflowID: "w"}},
			at{102, &record.WorkflowDeadlineExceeded{WorkflowID: "w", DeadlineAt: 100, DetectedAt: 102}}),
			"", "fired twice"},
		{"SD-4 root", journalOf("engine", at{1000, &record.ShutdownInitiated{StartAt: 1000, TotalNanos: int64(30 * time.Second),
			GracefulAt: root.G().UnixNano() + 1, HardAt: root.Hr().UnixNano()}}), "SD-4: seq 1", ""},
		{"SD-4 root as computed", journalOf("engine", at{1000, &record.ShutdownInitiated{StartAt: 1000, TotalNanos: int64(30 * time.Second),
			GracefulAt: root.G().UnixNano(), HardAt: root.Hr().UnixNano()}}), "", "SD-4"},
		{"SD-12 start after admission closed", journalOf("j", at{0, enq(0)}, at{1, &record.ShutdownPhaseStarted{Phase: int8(shutdown.PhaseCloseAdmission), Name: "close_admission"}},
			at{2, start(1, 2)}), "SD-12: attempt 1 of job j starts at seq 3, after shutdown phase 1 started", ""},
		{"SD-12 start in a new run", journalOf("j", at{0, enq(0)}, at{1, &record.ShutdownPhaseStarted{Phase: int8(shutdown.PhaseCloseAdmission), Name: "close_admission"}},
			at{2, &record.RunStarted{RunID: "r2"}}, at{3, start(1, 3)}), "", "SD-12"},
		{"SD-12 control in phase 4", journalOf("engine", at{1, &record.ShutdownPhaseStarted{Phase: int8(shutdown.PhaseCloseEvidence), Name: "close_evidence"}},
			at{2, &record.QueuePaused{Queue: "q"}}), "SD-12: queue_paused at seq 2, after shutdown phase 4 started", ""},
		{"SD-12 control in phase 3", journalOf("engine", at{1, &record.ShutdownPhaseStarted{Phase: int8(shutdown.PhaseCloseEvidence) - 1, Name: "force"}},
			at{2, &record.QueuePaused{Queue: "q"}}), "", "SD-12"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := newOracle()
			for _, r := range c.recs {
				o.ingest(r)
			}
			got := strings.Join(o.violations, "\n")
			if c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("violations:\n%s\nwant one saying %q", got, c.want)
			}
			if c.not != "" && strings.Contains(got, c.not) {
				t.Errorf("violations:\n%s\nwant none saying %q", got, c.not)
			}
		})
	}
	// The memory check: the engine holding the jobs of held, and the
	// workflows the model has unfinished, against what the journal shows
	// unfinished.
	memory := []struct {
		name string
		recs []record.Record
		want string // "": no violation
		not  string // a violation that must not appear
		held []string
	}{
		// RL-11: a job leaves memory on attempt_succeeded, on a final
		// burial, and with its workflow's ArchiveBuried if it is buried.
		{"memory keeps a job the cancel buried as final", cancelledPending(true), "memory holds job s, which the journal finished at seq 6", "", []string{"s"}},
		{"memory drops a job the cancel buried as final", cancelledPending(true), "", "memory", nil},
		{"memory drops a job buried without final", cancelledPending(false), "memory lacks unfinished job s (known since seq 2)", "", nil},
		{"memory keeps a job buried late as final", journalOf("w", at{0, wfStarted()}, at{0, stepEnq("s")}, at{1, stepStart("s", 1)},
			at{2, &record.WorkflowCancelled{WorkflowID: "w"}},
			at{3, &record.AttemptBuried{Outcome: record.Outcome{JobID: "s", Token: 3, Class: "retryable"}, Final: true}}),
			"memory holds job s, which the journal finished at seq 5", "", []string{"s"}},
		{"memory drops a step job its failure buried", journalOf("w", failedStep()...), "memory lacks unfinished job s (known since seq 2)", "", nil},
		{"memory keeps a buried job its completed workflow archived", journalOf("w", append(retriedStep(),
			at{5, &record.WorkflowCompleted{WorkflowID: "w", ArchiveBuried: true}})...),
			"memory holds job s, which the journal finished at seq 11", "", []string{"s"}},
		{"memory drops a buried job its completed workflow kept", journalOf("w", append(retriedStep(),
			at{5, &record.WorkflowCompleted{WorkflowID: "w"}})...),
			"memory lacks unfinished job s (known since seq 2)", "", nil},
		{"memory keeps a buried job its cancelled workflow archived", journalOf("w", append(failedStep(),
			at{3, &record.WorkflowCancelled{WorkflowID: "w", ArchiveBuried: true}})...),
			"memory holds job s, which the journal finished at seq 6", "", []string{"s"}},
		{"memory drops a requeued job its cancelled workflow archived", journalOf("w", append(failedStep(),
			at{3, &record.JobRequeued{JobID: "s", AvailableAt: 3}},
			at{3, &record.WorkflowCancelled{WorkflowID: "w", ArchiveBuried: true}})...),
			"memory lacks unfinished job s (known since seq 2)", "", nil},
	}
	for _, c := range memory {
		t.Run(c.name, func(t *testing.T) {
			o := newOracle()
			for _, r := range c.recs {
				o.ingest(r)
			}
			if len(o.violations) != 0 {
				t.Fatalf("ingest: %v", o.violations)
			}
			o.checkHeld(c.held, sortedSeqKeys(o.liveWfs))
			got := strings.Join(o.violations, "\n")
			if c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("violations:\n%s\nwant one saying %q", got, c.want)
			}
			if c.not != "" && strings.Contains(got, c.not) {
				t.Errorf("violations:\n%s\nwant none saying %q", got, c.not)
			}
		})
	}
}

// TestOracleRL10_HandlerCallWithoutStart: a handler call of the current
// instance whose attempt_started was not acknowledged is a violation
// (RL-10); one whose start was, or one of an instance that has ended, is
// not.
func TestOracleRL10_HandlerCallWithoutStart(t *testing.T) {
	o := newOracle()
	o.setEpoch(2)
	o.called(1, "j", 1) // an ended instance's
	o.checkCalls()
	if len(o.violations) != 0 {
		t.Fatalf("a call of an ended instance: %v", o.violations)
	}
	for _, r := range journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}) {
		o.ingest(r)
	}
	o.called(2, "j", 1)
	o.checkCalls()
	if len(o.violations) != 0 {
		t.Fatalf("a call of an acknowledged start: %v", o.violations)
	}
	o.called(2, "j", 2)
	o.checkCalls()
	if got := strings.Join(o.violations, "\n"); !strings.Contains(got, "RL-10: handler call j#2 without an acknowledged attempt_started") {
		t.Fatalf("violations %q, want RL-10 for j#2", got)
	}
}

// TestOracleSD33_ReportAsReturned: the oracle accepts the journal's
// newest shutdown report only if each field it compares is the returned
// report's (SD-33), and refuses a journal that holds none.
func TestOracleSD33_ReportAsReturned(t *testing.T) {
	rep := &shutdown.Report{Completion: shutdown.ForcedCompleted, Forced: true, Trigger: shutdown.TriggerSigterm,
		InitiatedAt: time.Unix(0, 1000), Budget: 30 * time.Second, Elapsed: 31 * time.Second,
		RuntimeJoined: true, DrainReconciled: true, CloseReconciled: true,
		Actions: []shutdown.Action{{}, {}}, Drained: 1, Released: 2, Quarantined: 3, Unresolved: 4}
	journaled := func() *record.ShutdownReport {
		return &record.ShutdownReport{Completion: rep.Completion.String(), Forced: true, Trigger: rep.Trigger.String(),
			InitiatedAt: 1000, BudgetNanos: int64(30 * time.Second), ElapsedNanos: int64(31 * time.Second),
			RuntimeJoined: true, DrainReconciled: true, CloseReconciled: true,
			ActionPhases: []int8{1, 2}, Drained: 1, Released: 2, Quarantined: 3, Unresolved: 4}
	}
	// check runs checkReport of rep on a journal of runs, each but the
	// last ended by one of reports.
	check := func(reports ...*record.ShutdownReport) (bool, []string) {
		o := newOracle()
		recs := []at{{1, &record.RunStarted{RunID: "r1"}}}
		for i, b := range reports {
			recs = append(recs, at{int64(2*i + 2), b}, at{int64(2*i + 3), &record.RunStarted{RunID: "r"}})
		}
		o.recs = journalOf("engine", recs...)
		return o.checkReport(rep), o.violations
	}
	if ok, v := check(journaled()); !ok {
		t.Fatalf("the returned report journaled as is: %v", v)
	}
	older := journaled()
	older.Completion = "graceful_completed"
	if ok, v := check(older, journaled()); !ok {
		t.Fatalf("the returned report journaled after an older one: %v", v)
	}
	if ok, v := check(); ok || len(v) != 1 || !strings.Contains(v[0], "SD-33: the shutdown returned a report the journal does not hold") {
		t.Fatalf("no report in the journal: ok %v, %v", ok, v)
	}
	for name, mod := range map[string]func(b *record.ShutdownReport){
		"completion":       func(b *record.ShutdownReport) { b.Completion = "graceful_completed" },
		"trigger":          func(b *record.ShutdownReport) { b.Trigger = shutdown.TriggerSigint.String() },
		"forced":           func(b *record.ShutdownReport) { b.Forced = false },
		"initiated at":     func(b *record.ShutdownReport) { b.InitiatedAt++ },
		"budget":           func(b *record.ShutdownReport) { b.BudgetNanos++ },
		"elapsed":          func(b *record.ShutdownReport) { b.ElapsedNanos++ },
		"drain reconciled": func(b *record.ShutdownReport) { b.DrainReconciled = false },
		"close reconciled": func(b *record.ShutdownReport) { b.CloseReconciled = false },
		"runtime joined":   func(b *record.ShutdownReport) { b.RuntimeJoined = false },
		"drained":          func(b *record.ShutdownReport) { b.Drained++ },
		"released":         func(b *record.ShutdownReport) { b.Released++ },
		"quarantined":      func(b *record.ShutdownReport) { b.Quarantined++ },
		"unresolved":       func(b *record.ShutdownReport) { b.Unresolved++ },
		"actions":          func(b *record.ShutdownReport) { b.ActionPhases = b.ActionPhases[:1] },
	} {
		b := journaled()
		mod(b)
		if ok, v := check(b); ok || len(v) != 1 || !strings.HasPrefix(v[0], "SD-33: the journaled report") {
			t.Errorf("journaled report with another %s: ok %v, %v", name, ok, v)
		}
	}
}

// TestOracleOverdueAttempt: an attempt still open at its hard cutoff H is
// a missed deadline; one instant before H it is not.
func TestOracleOverdueAttempt(t *testing.T) {
	o := newOracle()
	for _, r := range journalOf("j", at{0, enq(0)}, at{1, start(1, 1)}) { // H at 11
		o.ingest(r)
	}
	o.checkOverdue(time.Unix(0, 10))
	if len(o.violations) != 0 {
		t.Fatalf("before H: %v", o.violations)
	}
	o.checkOverdue(time.Unix(0, 11))
	if got := strings.Join(o.violations, "\n"); !strings.Contains(got, "deadline missed: attempt 1 (token 2) of job j is still open") {
		t.Fatalf("at H: violations %q, want the deadline missed", got)
	}
}

// TestOracleWF20_BuriedStepJob: a buried job of the step its workflow is
// at, the workflow running or paused, is a violation (WF-20: the
// workflow fails in the same append); once the workflow failed it is not.
func TestOracleWF20_BuriedStepJob(t *testing.T) {
	buried := []at{
		{0, &record.WorkflowStarted{WorkflowID: "w", Name: "n", Steps: 1}},
		{0, &record.JobEnqueued{JobID: "s", Handler: "h", Queue: "default", WorkflowID: "w", Retry: record.RetryPolicy{MaxAttempts: 1}}},
		{1, &record.AttemptStarted{JobID: "s", Attempt: 1, StartAt: 1, NormalAt: 10, HardAt: 11}},
		{2, &record.AttemptBuried{Outcome: record.Outcome{JobID: "s", Token: 3, Class: "permanent"}}},
	}
	for _, c := range []struct {
		name string
		jobs []at // instead of buried
		then []at
		want string
	}{
		{"running", nil, nil, "WF-20: step job s of workflow w is buried, and the workflow is running at that step"},
		{"pending", buried[:2], nil, ""},
		{"buried at another step", []at{buried[0],
			{0, &record.JobEnqueued{JobID: "s", Handler: "h", Queue: "default", WorkflowID: "w", Step: 1, Retry: record.RetryPolicy{MaxAttempts: 1}}},
			buried[2], buried[3]}, nil, ""},
		{"paused", nil, []at{{3, &record.WorkflowPaused{WorkflowID: "w"}}}, "WF-20: step job s of workflow w is buried, and the workflow is paused at that step"},
		{"failed", nil, []at{{2, &record.WorkflowFailed{WorkflowID: "w", Error: "step s buried", At: 2}}}, ""},
		// WF-18: the retry re-enters the step with a new job; the buried
		// job of the earlier entry is not the step's.
		{"buried before a retry", nil, []at{{2, &record.WorkflowFailed{WorkflowID: "w", Error: "step s buried", At: 2}},
			{3, &record.WorkflowRetried{WorkflowID: "w"}},
			{3, &record.JobEnqueued{JobID: "s2", Handler: "h", Queue: "default", WorkflowID: "w", Retry: record.RetryPolicy{MaxAttempts: 1}}}}, ""},
		{"buried after a retry", nil, []at{{2, &record.WorkflowFailed{WorkflowID: "w", Error: "step s buried", At: 2}},
			{3, &record.WorkflowRetried{WorkflowID: "w"}},
			{3, &record.JobEnqueued{JobID: "s2", Handler: "h", Queue: "default", WorkflowID: "w", Retry: record.RetryPolicy{MaxAttempts: 1}}},
			{4, &record.AttemptStarted{JobID: "s2", Attempt: 1, StartAt: 4, NormalAt: 13, HardAt: 14}},
			{5, &record.AttemptBuried{Outcome: record.Outcome{JobID: "s2", Token: 8, Class: "permanent"}}}},
			"WF-20: step job s2 of workflow w is buried, and the workflow is running at that step"},
	} {
		o := newOracle()
		jobs := buried
		if c.jobs != nil {
			jobs = c.jobs
		}
		for _, r := range journalOf("w", append(append([]at(nil), jobs...), c.then...)...) {
			o.ingest(r)
		}
		if len(o.violations) != 0 {
			t.Fatalf("%s: ingest: %v", c.name, o.violations)
		}
		o.checkSteps()
		if got := strings.Join(o.violations, "\n"); got != c.want {
			t.Errorf("%s: violations %q, want %q", c.name, got, c.want)
		}
	}
}

// TestOracleAuditRefusesLostOrChangedRecords: before an instance opens
// the journal, every record acknowledged so far must be there, unchanged:
// a journal that ends before one lost it (RL-1), one that differs changed
// it (RL-3).
func TestOracleAuditRefusesLostOrChangedRecords(t *testing.T) {
	fs := vfs.NewMem()
	now := time.Unix(0, 1000)
	j, err := journal.Open(Dir, journal.Options{FS: fs, Clock: clocktest.New(now)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), record.Record{Stream: "j", Body: enq(0)}, record.Record{Stream: "j", Body: start(1, 1000)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		shown  func(shown []string) []string
		want   string
		passes bool
	}{
		{"as acknowledged", func(s []string) []string { return s }, "", true},
		{"one more acknowledged", func(s []string) []string { return append(s, "3/...") }, "RL-1: acknowledged record seq 3 lost (the journal ends at 2)", false},
		{"seq 2 acknowledged otherwise", func(s []string) []string { return []string{s[0], "2/..."} }, "RL-3: acknowledged record seq 2 changed", false},
	} {
		o := newOracle()
		if !o.audit(fs, now) || len(o.shown) != 2 {
			t.Fatalf("audit of the journal: %v, %d records", o.violations, len(o.shown))
		}
		o.shown = c.shown(o.shown)
		ok := o.audit(fs, now)
		got := strings.Join(o.violations, "\n")
		if ok != c.passes || !strings.HasPrefix(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("%s: audit %v, violations %q, want %q", c.name, ok, got, c.want)
		}
	}
}
