package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/deadlines"
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
}
