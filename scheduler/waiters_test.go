package scheduler

import (
	"slices"
	"testing"

	"github.com/quire-dev/quire/replay"
)

// RL-11, WF-7: a workflow cancelled while it waits for a dependency that
// never finishes (here an unknown id, under Any with one that runs on)
// leaves the machine's waiter lists once they have doubled since their
// last sweep: they follow the workflows waiting now, not every workflow
// that ever waited.
func TestRL11_CancelledWaitersLeaveTheWaiterLists(t *testing.T) {
	t.Parallel()
	defs := map[string]*WorkflowDef{
		"waiter": {Name: "waiter", Hash: "hw", Steps: []StepDef{{Kind: StepWorkflows, Name: "0", Mode: ModeAny, FromKey: "deps"}}},
		"never":  {Name: "never", Hash: "hn", Steps: []StepDef{{Kind: StepSignal, Name: "0", Signals: []string{"go"}, Mode: ModeAll}}},
	}
	b := setup(t, nil, func(c *Config) {
		c.WorkflowFunc = func(name string) *WorkflowDef { return defs[name] }
	})
	b.recover(t0)
	d, never, err := b.m.StartWorkflow(t0, DispatchRequest{Name: "never"})
	if err != nil {
		t.Fatal(err)
	}
	b.take(d)
	state, err := replay.EncodeState(map[string]any{"deps": []any{never, "wf_unknown"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000 // 6000 entries: past waitersSweepMin, several sweeps
	var last string
	for i := range n {
		d, id, err := b.m.StartWorkflow(t0, DispatchRequest{Name: "waiter", State: state})
		if err != nil {
			t.Fatalf("dispatch %d: %v", i, err)
		}
		b.take(d)
		if last = id; i == n-1 {
			break // the last one keeps waiting
		}
		d, err = b.m.Cancel(t0, id)
		if err != nil {
			t.Fatalf("cancel %s: %v", id, err)
		}
		b.take(d)
	}
	if got := b.m.waiterEntries; got > 2*waitersSweepMin+2 {
		t.Fatalf("%d waiter entries for 1 waiting workflow after %d cancelled", got, n-1)
	}
	for dep, ids := range b.m.waiters {
		if len(ids) > waitersSweepMin {
			t.Fatalf("%d waiters listed under %s", len(ids), dep)
		}
	}
	for _, dep := range []string{never, "wf_unknown"} {
		if !slices.Contains(b.m.waiters[dep], last) {
			t.Fatalf("the workflow still waiting is not listed under %s", dep)
		}
	}
	b.replayed()
}
