package replay

import (
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/journal/record"
)

// arbitraryRecord draws a record of a random kind with random fields drawn
// from small pools, so that ids, tokens and attempt numbers sometimes
// match the state and often do not. The seq is usually the next one.
func arbitraryRecord(t *rapid.T, s *State) record.Record {
	ids := append([]string{"job_a", "job_b", "job_c", ""}, s.JobIDs()...)
	id := func() string {
		if rapid.IntRange(0, 9).Draw(t, "odd_id") == 0 {
			return rapid.StringN(0, 6, 24).Draw(t, "random_id")
		}
		return rapid.SampledFrom(ids).Draw(t, "id")
	}
	token := func() uint64 {
		toks := []uint64{0, 1, s.LastSeq, s.LastSeq + 1, rapid.Uint64().Draw(t, "random_token")}
		for tok := range s.Tokens {
			toks = append(toks, tok)
		}
		return rapid.SampledFrom(toks).Draw(t, "token")
	}
	i64 := func(label string) int64 { return rapid.Int64().Draw(t, label) }
	str := func(label string) string { return rapid.StringN(0, 4, 16).Draw(t, label) }
	outcome := func() record.Outcome {
		return record.Outcome{JobID: id(), Token: token(), Code: str("code"), Error: str("error"), Class: str("class")}
	}
	wfs := []string{"wf_a", "wf_b"}
	wfid := func() string {
		if rapid.IntRange(0, 2).Draw(t, "step_job") == 0 {
			return rapid.SampledFrom(wfs).Draw(t, "workflow")
		}
		return ""
	}
	wfStep := func(id string) int32 {
		if w := s.Workflows[id]; w != nil && rapid.Bool().Draw(t, "at_step") {
			return w.Step
		}
		return rapid.Int32Range(0, 2).Draw(t, "step")
	}
	kinds := append([]record.Kind{0, record.KindWorkflowStarted, record.KindStepCompleted, record.Kind(999),
		record.KindWorkflowCompleted, record.KindWorkflowFailed, record.KindWorkflowCancelled, record.KindWorkflowRetried,
		record.KindSignalReceived}, jobKinds...)
	var body record.Body
	switch k := rapid.SampledFrom(kinds).Draw(t, "kind"); k {
	case 0:
		body = nil
	case record.KindJobEnqueued:
		wf := wfid()
		body = &record.JobEnqueued{
			JobID: id(), Handler: str("handler"), Queue: str("queue"), Priority: rapid.Uint8().Draw(t, "priority"),
			AvailableAt: i64("available_at"), UniqueKey: rapid.SampledFrom([]string{"", "k1", "k2"}).Draw(t, "unique"),
			Retry:      record.RetryPolicy{MaxAttempts: rapid.Int32().Draw(t, "max_attempts")},
			WorkflowID: wf, Step: wfStep(wf),
		}
	case record.KindWorkflowStarted:
		b := &record.WorkflowStarted{WorkflowID: rapid.SampledFrom(wfs).Draw(t, "workflow"), Name: "w",
			Steps: rapid.Int32Range(0, 2).Draw(t, "steps")}
		if rapid.Bool().Draw(t, "child") {
			b.ParentID, b.Inherited = rapid.SampledFrom(wfs).Draw(t, "parent"), true
			b.InheritedQueue = rapid.SampledFrom([]string{"", "q"}).Draw(t, "inherited_queue")
			b.InheritedPriority = rapid.Uint8Range(0, 4).Draw(t, "inherited_priority")
			b.InheritedMaxAttempts = rapid.Int32Range(0, 100).Draw(t, "inherited_max_attempts")
		}
		body = b
	case record.KindSignalReceived:
		body = &record.SignalReceived{WorkflowID: rapid.SampledFrom(wfs).Draw(t, "workflow"), Name: "go"}
	case record.KindStepCompleted:
		wf := rapid.SampledFrom(wfs).Draw(t, "workflow")
		step := wfStep(wf)
		b := &record.StepCompleted{WorkflowID: wf, Step: step, Next: step + 1}
		if w := s.Workflows[wf]; w != nil { // consume some of its stored signals
			for _, sg := range w.Signals {
				if rapid.Bool().Draw(t, "consume") {
					b.Consumed = append(b.Consumed, sg.Seq)
				}
			}
		}
		body = b
	case record.KindWorkflowCompleted:
		body = &record.WorkflowCompleted{WorkflowID: rapid.SampledFrom(wfs).Draw(t, "workflow"), ArchiveBuried: rapid.Bool().Draw(t, "archive")}
	case record.KindWorkflowFailed:
		body = &record.WorkflowFailed{WorkflowID: rapid.SampledFrom(wfs).Draw(t, "workflow"), Error: str("error")}
	case record.KindWorkflowCancelled:
		body = &record.WorkflowCancelled{WorkflowID: rapid.SampledFrom(wfs).Draw(t, "workflow"), ArchiveBuried: rapid.Bool().Draw(t, "archive")}
	case record.KindWorkflowRetried:
		body = &record.WorkflowRetried{WorkflowID: rapid.SampledFrom(wfs).Draw(t, "workflow"), DropOutputs: rapid.Bool().Draw(t, "drop_outputs")}
	case record.KindAttemptStarted:
		body = &record.AttemptStarted{JobID: id(), Attempt: rapid.Int32Range(-1, 4).Draw(t, "attempt"), StartAt: i64("s")}
	case record.KindAttemptSucceeded:
		body = &record.AttemptSucceeded{Outcome: outcome()}
	case record.KindAttemptRetryScheduled:
		body = &record.AttemptRetryScheduled{Outcome: outcome(), DelayNanos: i64("delay"), AvailableAt: i64("available_at")}
	case record.KindAttemptBuried:
		body = &record.AttemptBuried{Outcome: outcome(), Final: rapid.Bool().Draw(t, "final")}
	case record.KindAttemptReleased:
		body = &record.AttemptReleased{Outcome: outcome(), AvailableAt: i64("available_at")}
	case record.KindJobBuried:
		body = &record.JobBuried{JobID: id(), Code: str("code"), Error: str("error"), Final: rapid.Bool().Draw(t, "final")}
	case record.KindJobRequeued:
		body = &record.JobRequeued{JobID: id(), AvailableAt: i64("available_at"), KeepKey: rapid.Bool().Draw(t, "keep_key")}
	case record.KindRunStarted:
		body = &record.RunStarted{RunID: str("run"), At: i64("at")}
	case record.KindShutdownReport:
		body = &record.ShutdownReport{Completion: str("completion")}
	case record.Kind(999):
		body = (*record.JobBuried)(nil)
	default:
		body, _ = record.NewBody(k)
		switch b := body.(type) {
		case *record.QueuePaused:
			b.Queue = str("queue")
		case *record.QueueResumed:
			b.Queue = str("queue")
		}
	}
	seq := s.LastSeq + 1
	if rapid.IntRange(0, 19).Draw(t, "odd_seq") == 0 {
		seq = rapid.Uint64Range(0, s.LastSeq+3).Draw(t, "seq")
	}
	return record.Record{Seq: seq, Stream: str("stream"), Body: body}
}

// TestRL6_FoldIsTotal applies arbitrary records one by one: Apply never
// panics, either applies (LastSeq moves to the record's seq) or returns an
// *ApplyError and leaves the state as it was, the state keeps its
// invariants, and every state it reaches survives a snapshot round trip.
func TestRL6_FoldIsTotal(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := New()
		var applied []record.Record
		for range rapid.IntRange(1, 60).Draw(t, "len") {
			r := arbitraryRecord(t, s)
			before, last := Digest(s), s.LastSeq
			err := Apply(s, r)
			if err != nil {
				var ae *ApplyError
				if !errors.As(err, &ae) {
					t.Fatalf("Apply(%s) = %T %v, want *ApplyError", r.Kind(), err, err)
				}
				if !errors.Is(err, ErrOrder) && !errors.Is(err, ErrImpossible) && !errors.Is(err, ErrUnknownKind) {
					t.Fatalf("Apply(%s) = %v wraps no replay sentinel", r.Kind(), err)
				}
				if Digest(s) != before || s.LastSeq != last {
					t.Fatalf("refused %s moved the state: %v", r.Kind(), err)
				}
			} else {
				if s.LastSeq != r.Seq {
					t.Fatalf("applied seq %d, LastSeq %d", r.Seq, s.LastSeq)
				}
				applied = append(applied, r)
			}
			checkInvariants(t, s)
		}
		snapshotOf(t, "snapshot of an arbitrary fold", s)
		sameState(t, "refold of the accepted records", fold(t, applied), s)
	})
}
