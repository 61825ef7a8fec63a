package scheduler

import (
	"slices"
	"testing"

	"github.com/quire-dev/quire/journal/record"
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

// WF-7: a wait for many workflows that finish one by one is decided
// without reading every finished dependency's summary at each event: an
// All wait with another dependency still running cannot be settled by a
// completion, nor an Any wait by a failure; a Quorum wait cannot be
// settled by a completion while fewer than the quorum have finished, nor
// by a failure while the quorum are still under way. n events cost about
// n terminal-index reads, not n²/2.
func TestWF7_WaitsReadEachFinishedDependencyOnce(t *testing.T) {
	t.Parallel()
	const n = 300
	for _, c := range []struct {
		mode   string
		quorum int
		finish string // "completed" (a signal) or "cancelled"
		want   record.Kind
	}{
		{ModeAll, 0, "completed", record.KindWorkflowCompleted},
		{ModeAny, 0, "cancelled", record.KindWorkflowFailed},
		{ModeQuorum, n / 2, "completed", record.KindWorkflowCompleted},
		{ModeQuorum, n / 2, "cancelled", record.KindWorkflowFailed},
	} {
		t.Run(c.mode+"/"+c.finish, func(t *testing.T) {
			t.Parallel()
			defs := map[string]*WorkflowDef{
				"waiter": {Name: "waiter", Hash: "hw", Steps: []StepDef{{Kind: StepWorkflows, Name: "0", Mode: c.mode, Quorum: c.quorum, FromKey: "deps", ResultKey: "r"}}},
				"dep":    {Name: "dep", Hash: "hd", Steps: []StepDef{{Kind: StepSignal, Name: "0", Signals: []string{"go"}, Mode: ModeAll}}},
			}
			finished := map[string]bool{} // the terminal index, as far as the test goes
			reads := 0
			b := setup(t, nil, func(cfg *Config) {
				cfg.WorkflowFunc = func(name string) *WorkflowDef { return defs[name] }
				cfg.LookupFunc = func(id string) (WorkflowSummary, bool) {
					reads++
					return WorkflowSummary{Status: c.finish}, finished[id]
				}
			})
			b.recover(t0)
			take := func(d Decision, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				b.take(d)
				b.m.Acked(b.m.NextSeq() - 1) // summaries come from LookupFunc from now on
			}
			deps := make([]any, n)
			for i := range deps {
				d, id, err := b.m.StartWorkflow(t0, DispatchRequest{Name: "dep"})
				take(d, err)
				deps[i] = id
			}
			state, err := replay.EncodeState(map[string]any{"deps": deps})
			if err != nil {
				t.Fatal(err)
			}
			d, waiter, err := b.m.StartWorkflow(t0, DispatchRequest{Name: "waiter", State: state})
			take(d, err)
			reads = 0
			for _, id := range deps {
				if c.finish == "completed" {
					take(b.m.Signal(t0, id.(string), "go", nil))
				} else {
					take(b.m.Cancel(t0, id.(string)))
				}
				finished[id.(string)] = true
			}
			ended := false
			for _, r := range b.recs {
				if r.Kind() == c.want && r.Stream == waiter {
					ended = true
				}
			}
			if !ended {
				t.Fatalf("the waiter has no %s after its %d dependencies were %s", c.want, n, c.finish)
			}
			if reads > 2*n {
				t.Fatalf("%d terminal-index reads for %d events, want at most %d", reads, n, 2*n)
			}
			b.replayed()
		})
	}
}
