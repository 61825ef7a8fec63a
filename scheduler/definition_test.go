package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// defThen is a Then step of workflow "flow" whose job runs handler
// "flow/"+name.
func defThen(name string) StepDef {
	return StepDef{Kind: StepThen, Name: name, Handlers: []string{"flow/" + name}, Queue: "default", Retry: defaultRetry}
}

// TestWF2_InstanceAdvancedOnlyByItsRecordedDefinition: an existing
// instance is advanced only by the definition whose hash its
// workflow_started recorded. Under another definition registered with the
// same name it is parked exactly as if its definition were not
// registered: registering decides nothing for it, a signal is only
// stored, its pending step job is held (its handler name is also one of
// the other definition's steps) while a new dispatch uses the registered
// definition. Registering its own definition again lets it go on.
func TestWF2_InstanceAdvancedOnlyByItsRecordedDefinition(t *testing.T) {
	v1 := &WorkflowDef{Name: "flow", Hash: "h1", Steps: []StepDef{
		defThen("a"), {Kind: StepSignal, Name: "1", Signals: []string{"go"}, Mode: ModeAll}, defThen("b"), defThen("c"),
	}}
	v2 := &WorkflowDef{Name: "flow", Hash: "h2", Steps: []StepDef{defThen("a"), defThen("y")}}
	cur := v2
	var j journal
	// wf_w waits for signal "go" at step 1; wf_p has its step 0 job pending.
	j.add("wf_w", &record.WorkflowStarted{WorkflowID: "wf_w", Name: "flow", DefinitionHash: "h1", Steps: 4, At: t0.UnixNano()})
	j.add("wf_w", &record.StepCompleted{WorkflowID: "wf_w", Step: 0, Next: 1})
	j.add("wf_w", &record.WorkflowWaiting{WorkflowID: "wf_w", Step: 1, Status: "waiting_for_signal", Signals: []string{"go"}, Mode: ModeAll})
	j.add("wf_p", &record.WorkflowStarted{WorkflowID: "wf_p", Name: "flow", DefinitionHash: "h1", Steps: 4, At: t0.UnixNano()})
	j.add("wf_p", &record.JobEnqueued{JobID: "job_p", Handler: "flow/a", Queue: "default", AvailableAt: t0.UnixNano(),
		Retry: defaultRetry, WorkflowID: "wf_p", Step: 0})
	b := setup(t, j.recs, func(c *Config) {
		c.WorkflowFunc = func(name string) *WorkflowDef {
			if name == "flow" {
				return cur
			}
			return nil
		}
	})
	b.recover(t0)
	st := b.m.State()

	// Under v2: nothing is decided for the v1 instances.
	if d := b.take(b.m.WorkflowRegistered(ts(time.Second), "flow")); len(d.Records) != 0 {
		t.Fatalf("WF-2: registering another definition decided %v", kinds(d))
	}
	for _, id := range []string{"wf_w", "wf_p"} {
		if !b.m.WorkflowParked(st.Workflows[id]) {
			t.Fatalf("WF-2: %s is not parked under another definition", id)
		}
	}
	d, err := b.m.Signal(ts(2*time.Second), "wf_w", "go", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantKinds(t, b.take(d), record.KindSignalReceived)
	if w := st.Workflows["wf_w"]; w.Status != replay.WorkflowWaitingSignal || w.Step != 1 || len(w.Signals) != 1 {
		t.Fatalf("WF-2: parked workflow changed: %+v", w)
	}
	d, id, err := b.m.StartWorkflow(ts(3*time.Second), DispatchRequest{Name: "flow"})
	if err != nil {
		t.Fatal(err)
	}
	b.take(d)
	if w := st.Workflows[id]; w.DefinitionHash != "h2" || w.Steps != 2 || b.m.WorkflowParked(w) {
		t.Fatalf("WF-13: a new dispatch must use the registered definition: %+v", w)
	}
	starts := b.dispatch(ts(3 * time.Second))
	if len(starts) != 1 || starts[0].Job.WorkflowID != id {
		t.Fatalf("WF-2: started %v, want only the new instance's job (job_p is held)", ids(starts))
	}

	// v1 registered again: the stored signal settles the wait, and the
	// held job starts.
	cur = v1
	d = b.take(b.m.WorkflowRegistered(ts(4*time.Second), "flow"))
	wantKinds(t, d, record.KindWorkflowResumed, record.KindStepCompleted, record.KindJobEnqueued)
	if w := st.Workflows["wf_w"]; w.Status != replay.WorkflowRunning || w.Step != 2 || len(w.Signals) != 0 {
		t.Fatalf("WF-6: %+v", w)
	}
	starts = b.dispatch(ts(4 * time.Second))
	got := ids(starts)
	if !slices.Contains(got, "job_p") || len(got) != 2 {
		t.Fatalf("WF-2: started %v, want job_p and wf_w's step b", got)
	}
	b.replayed()
}
