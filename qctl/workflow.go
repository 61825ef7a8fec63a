package qctl

import (
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Workflow statuses (WF-9) in the order qctl lists them.
var wfStatuses = []string{
	replay.WorkflowRunning.String(), replay.WorkflowPaused.String(), replay.WorkflowWaitingSignal.String(),
	replay.WorkflowWaitingWorkflows.String(), replay.WorkflowFailed.String(), replay.WorkflowCompleted.String(),
	replay.WorkflowCancelled.String(), statusCorrupt,
}

// wfView is one workflow as qctl shows it: from replay.State.Workflows
// while it is live, and from the record that ended it (or its
// terminal-index summary) once it completed or was cancelled.
type wfView struct {
	ID         string
	Name       string
	Status     replay.WorkflowStatus
	Step       int32
	Steps      int32
	StartSeq   uint64
	StartedAt  int64
	DeadlineAt int64 // 0: none (WD-4)
	ParentID   string
	Error      string
	FailedAt   int64
	EndedAt    int64 // completed or cancelled
	EndSeq     uint64
	DelayAt    int64        // fire_at of a pending Delay step, 0 none
	Wait       *replay.Wait // the wait it is parked on, nil none
	Signals    int          // stored, not yet consumed
	Child      string       // the child of its current SubWorkflow step, "" none
	// Corrupt, when set, is why its stream was set aside: it is corrupt,
	// and Status is what it was at the stream's last good record.
	Corrupt *damage
}

// status is w's status as qctl shows it: corrupt for a workflow whose
// stream was set aside, as api.WorkflowCorrupt.
func (w *wfView) status() string {
	if w.Corrupt != nil {
		return statusCorrupt
	}
	return w.Status.String()
}

// canExpire reports whether w still has a deadline that can fire: not
// once it is set aside, which stops its timers (spec/reliability.md §4.4).
func (w *wfView) canExpire() bool { return w.Corrupt == nil && canExpire(w.Status) }

func viewOf(w *replay.Workflow) *wfView {
	return &wfView{
		ID: w.ID, Name: w.Name, Status: w.Status, Step: w.Step, Steps: w.Steps, StartSeq: w.StartSeq,
		StartedAt: w.StartedAt, DeadlineAt: w.DeadlineAt, ParentID: w.ParentID, Error: w.Error,
		FailedAt: w.FailedAt, DelayAt: w.DelayFireAt, Wait: w.Wait, Signals: len(w.Signals), Child: w.Child,
	}
}

// endedView is w as the completion or cancellation r leaves it.
func endedView(w *replay.Workflow, r record.Record) *wfView {
	v := viewOf(w)
	v.Status = replay.WorkflowCancelled
	if r.Kind() == record.KindWorkflowCompleted {
		v.Status = replay.WorkflowCompleted
	}
	v.EndedAt, v.EndSeq = r.At, r.Seq
	v.DelayAt, v.Wait = 0, nil
	return v
}

func summaryView(s replay.WorkflowSummary) *wfView {
	return &wfView{
		ID: s.ID, Name: s.Name, Status: s.Status, Step: s.Step, Steps: s.Steps, StartedAt: s.StartedAt,
		DeadlineAt: s.DeadlineAt, ParentID: s.ParentID, Error: s.Error, FailedAt: s.FailedAt,
		EndedAt: s.FinishedAt, EndSeq: s.Seq,
	}
}

func wfTerminal(s replay.WorkflowStatus) bool {
	return s == replay.WorkflowCompleted || s == replay.WorkflowCancelled
}

// canExpire reports whether a workflow in status s still has a deadline
// that can fire: a failed workflow's is spent until it is retried.
func canExpire(s replay.WorkflowStatus) bool {
	return s != replay.WorkflowFailed && !wfTerminal(s)
}

// wfCounts counts workflows by status: the live ones in st, the history
// counters of the finished ones, and those of the streams st set aside.
func wfCounts(st *replay.State) map[string]int64 {
	c := map[string]int64{
		replay.WorkflowCompleted.String(): st.WorkflowsCompleted,
		replay.WorkflowCancelled.String(): st.WorkflowsCancelled,
	}
	for _, w := range st.Workflows {
		c[w.Status.String()]++
	}
	for _, q := range st.Quarantined {
		if q.Workflow != nil {
			c[statusCorrupt]++
		}
	}
	return c
}

// jobIDOf returns the job a job or attempt record is about, or "".
func jobIDOf(b record.Body) string {
	switch b := b.(type) {
	case *record.JobEnqueued:
		return b.JobID
	case *record.AttemptStarted:
		return b.JobID
	case *record.AttemptSucceeded:
		return b.JobID
	case *record.AttemptRetryScheduled:
		return b.JobID
	case *record.AttemptBuried:
		return b.JobID
	case *record.AttemptReleased:
		return b.JobID
	case *record.JobBuried:
		return b.JobID
	case *record.JobRequeued:
		return b.JobID
	}
	return ""
}
