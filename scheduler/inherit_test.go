package scheduler

import (
	"testing"

	"github.com/quire-dev/quire/journal/record"
)

// WF-8, WF-17: a child that outlives its cancelled parent keeps the job
// options it inherits, before the parent's terminal-index entry is written
// too: the machine finds the parent among the workflows it has just
// finished (no LookupFunc here, and nothing is acknowledged).
func TestWF8_WF17_ChildKeepsInheritanceFromJustCancelledParent(t *testing.T) {
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
		}
	}
	b.must(b.m.Cancel(t0, p))
	d := b.must(b.m.Signal(t0, child, "go", nil))
	jobs := bodies[*record.JobEnqueued](d, record.KindJobEnqueued)
	if len(jobs) != 1 || jobs[0].Queue != queue || jobs[0].Priority != prio || jobs[0].Retry.MaxAttempts != attempts {
		t.Fatalf("WF-8: the child's step job after its parent was cancelled: %+v", jobs)
	}
	b.replayed()
}
