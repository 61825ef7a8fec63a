package scheduler

import (
	"testing"

	"github.com/quire-dev/quire/journal/record"
)

// WF-8, WF-17: a child that outlives its cancelled parent keeps the job
// options it inherits. Its workflow_started records them; a child started
// by an earlier build, whose record does not, resolves them from its
// ancestors, also before the parent's terminal-index entry is written:
// the machine finds the parent among the workflows it has just finished
// (no LookupFunc here, and nothing is acknowledged).
func TestWF8_WF17_ChildKeepsInheritanceFromJustCancelledParent(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		childKeepsInheritance(t, legacy)
	}
}

func childKeepsInheritance(t *testing.T, legacy bool) {
	queue, prio, attempts := "etl", uint8(2), int32(7)
	parent := &WorkflowDef{Name: "parent", Hash: "hparent",
		Defaults: JobDefaults{Queue: &queue, Priority: &prio, MaxAttempts: &attempts},
		Steps:    []StepDef{{Kind: StepSub, Name: "sub", Sub: "kid"}}}
	work := defThen("work")
	work.Inherit = Inheritable{Queue: true, Priority: true, MaxAttempts: true}
	kid := &WorkflowDef{Name: "kid", Hash: "hkid", Steps: []StepDef{
		{Kind: StepSignal, Name: "go", Signals: []string{"go"}, Mode: ModeAll}, work,
	}}
	b := defsBundle(t, nil, []*WorkflowDef{parent, kid})
	p := b.startFlow(t0, "parent")
	var child string
	for _, r := range b.recs {
		if s, ok := r.Body.(*record.WorkflowStarted); ok && s.ParentID == p {
			child = s.WorkflowID
			if !s.Inherited || s.InheritedQueue != queue || s.InheritedPriority != prio+1 || s.InheritedMaxAttempts != attempts {
				t.Fatalf("WF-8: the child's workflow_started %+v does not record what it inherits", s)
			}
			if legacy { // as an earlier build wrote it, in the record and the state
				s.Inherited, s.InheritedQueue, s.InheritedPriority, s.InheritedMaxAttempts = false, "", 0, 0
				w := b.m.st.Workflows[child]
				w.Inherited, w.InheritedQueue, w.InheritedPriority, w.InheritedMaxAttempts = false, "", 0, 0
			}
		}
	}
	b.must(b.m.Cancel(t0, p))
	d := b.must(b.m.Signal(t0, child, "go", nil))
	jobs := bodies[*record.JobEnqueued](d, record.KindJobEnqueued)
	if len(jobs) != 1 || jobs[0].Queue != queue || jobs[0].Priority != prio || jobs[0].Retry.MaxAttempts != attempts {
		t.Fatalf("WF-8 (legacy %t): the child's step job after its parent was cancelled: %+v", legacy, jobs)
	}
	b.replayed()
}
