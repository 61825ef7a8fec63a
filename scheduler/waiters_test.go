package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

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
			// The entry, the tally and the deciding event each read the
			// ids once; every other event reads none.
			if got := b.m.waitIDsRead; got > 4*n {
				t.Fatalf("waits read %d ids for %d events, want at most %d", got, n, 4*n)
			}
			b.replayed()
		})
	}
}

// WF-7, WF-18, WD-8: the wait tallies only let react skip decisions that
// could not settle a wait. Waiters in every mode, over dependencies drawn
// with repeats and unknown ids, while dependencies complete, are
// cancelled, expire (failed, still in the state) and are retried (under
// way again, which the tally does not see): after every event a workflow
// still waiting must be one that a decision in full, from the state and
// the terminal index, would leave waiting; and live state equals replay.
func TestWF7_WaitTalliesDecideAsAFullDecisionWould(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		deps := rapid.IntRange(1, 6).Draw(t, "deps")
		defs := map[string]*WorkflowDef{
			"dep": {Name: "dep", Hash: "hd", Deadline: time.Hour,
				Steps: []StepDef{{Kind: StepSignal, Name: "0", Signals: []string{"go"}, Mode: ModeAll}}},
		}
		b, index, take := indexedBundle(t, defs)
		now := t0
		var ids []string
		for range deps {
			d, id, err := b.m.StartWorkflow(now, DispatchRequest{Name: "dep"})
			take(d, err)
			ids = append(ids, id)
			now = now.Add(time.Minute) // deadlines one minute apart
		}
		type waiter struct {
			id   string
			step StepDef
		}
		var waiters []waiter
		for i := range rapid.IntRange(1, 3).Draw(t, "waiters") {
			list := rapid.SliceOfN(rapid.SampledFrom(append(ids, "wf_unknown")), 1, 8).Draw(t, "ids")
			step := StepDef{Kind: StepWorkflows, Name: "0", Mode: rapid.SampledFrom([]string{ModeAll, ModeAny, ModeQuorum}).Draw(t, "mode"), FromKey: "deps"}
			if step.Mode == ModeQuorum {
				step.Quorum = rapid.IntRange(1, len(list)).Draw(t, "quorum")
			}
			name := fmt.Sprintf("waiter%d", i)
			defs[name] = &WorkflowDef{Name: name, Hash: "h" + name, Steps: []StepDef{step}}
			deps := make([]any, len(list))
			for i, id := range list {
				deps[i] = id
			}
			state, err := replay.EncodeState(map[string]any{"deps": deps})
			if err != nil {
				t.Fatal(err)
			}
			d, id, err := b.m.StartWorkflow(now, DispatchRequest{Name: name, State: state})
			take(d, err)
			waiters = append(waiters, waiter{id, step})
		}
		// settles reports whether a decision in full would settle w's wait.
		settles := func(w waiter, list []string) bool {
			n, completed, failed := len(list), 0, 0
			for _, id := range list {
				status := ""
				if x := b.m.State().Workflows[id]; x != nil {
					status = x.Status.String()
				} else if s, ok := index[id]; ok {
					status = s.Status
				}
				switch status {
				case "completed":
					completed++
				case "", "failed", "cancelled":
					failed++
				}
			}
			need := map[string]int{ModeAll: n, ModeAny: 1, ModeQuorum: w.step.Quorum}[w.step.Mode]
			if w.step.Mode == ModeAll {
				return completed == n || failed > 0
			}
			return completed >= need || n-failed < need
		}
		for range rapid.IntRange(1, 30).Draw(t, "events") {
			id := rapid.SampledFrom(ids).Draw(t, "dep")
			switch rapid.IntRange(0, 3).Draw(t, "event") {
			case 0:
				take(b.m.Signal(now, id, "go", nil))
			case 1:
				take(b.m.Cancel(now, id))
			case 2:
				now = now.Add(time.Duration(rapid.IntRange(1, 40).Draw(t, "minutes")) * time.Minute)
				take(b.m.CheckDeadlines(now), nil)
			case 3:
				take(b.m.RetryWorkflow(now, id))
			}
			for _, w := range waiters {
				x := b.m.State().Workflows[w.id]
				if x == nil || x.Status != replay.WorkflowWaitingWorkflows {
					continue
				}
				if settles(w, x.Wait.Workflows) {
					t.Fatalf("waiter %s (%s, quorum %d, ids %v) still waits, but a decision in full settles it", w.id, w.step.Mode, w.step.Quorum, x.Wait.Workflows)
				}
			}
		}
		b.replayed()
	})
}

// waitBundle returns a recovered machine with "waiter", an All wait for
// the ids under its state key "deps", and "dep", a wait for signal "go";
// start starts one of them, waiting for deps.
// depsState is a workflow state whose "deps" lists deps (nil for none),
// the key the wait steps of these tests read their ids from.
func depsState(t *testing.T, deps []string) []byte {
	t.Helper()
	if len(deps) == 0 {
		return nil
	}
	list := make([]any, len(deps))
	for i, d := range deps {
		list[i] = d
	}
	state, err := replay.EncodeState(map[string]any{"deps": list})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func waitBundle(t *testing.T) (b *testBundle, start func(name string, deps ...string) string) {
	defs := map[string]*WorkflowDef{
		"waiter": {Name: "waiter", Hash: "hw", Steps: []StepDef{{Kind: StepWorkflows, Name: "0", Mode: ModeAll, FromKey: "deps"}}},
		"dep":    {Name: "dep", Hash: "hd", Steps: []StepDef{{Kind: StepSignal, Name: "0", Signals: []string{"go"}, Mode: ModeAll}}},
	}
	b = setup(t, nil, func(cfg *Config) { cfg.WorkflowFunc = func(name string) *WorkflowDef { return defs[name] } })
	b.recover(t0)
	return b, func(name string, deps ...string) string {
		d, id, err := b.m.StartWorkflow(t0, DispatchRequest{Name: name, State: depsState(t, deps)})
		if err != nil {
			t.Fatal(err)
		}
		b.take(d)
		return id
	}
}

// WF-7: an id listed twice in a wait counts twice, in the tally too: with
// the tally counted at c's completion, a's completion takes two from it,
// and b's completion then settles the All wait.
func TestWF7_WaitTallyCountsRepeatedIDs(t *testing.T) {
	t.Parallel()
	b, start := waitBundle(t)
	a, bb, c := start("dep"), start("dep"), start("dep")
	waiter := start("waiter", a, a, bb, c)
	for _, id := range []string{c, a, bb} {
		if got := b.m.State().Workflows[waiter]; got == nil || got.Status != replay.WorkflowWaitingWorkflows {
			t.Fatalf("the waiter left its wait before %s completed", id)
		}
		d, err := b.m.Signal(t0, id, "go", nil)
		if err != nil {
			t.Fatal(err)
		}
		b.take(d)
	}
	if got := b.m.State().Workflows[waiter]; got != nil {
		t.Fatalf("the waiter is %s after all its dependencies completed", got.Status)
	}
	b.replayed()
}

// RL-11, WF-7: a waiter's tally leaves with its wait when the waiter is
// cancelled, fails or expires, not at the next sweep of the waiter lists,
// which may never come once the engine is idle.
func TestRL11_WaitTallyLeavesWithItsWaiter(t *testing.T) {
	t.Parallel()
	b, start := waitBundle(t)
	a, c := start("dep"), start("dep")
	waiter := start("waiter", a, c)
	d, err := b.m.Signal(t0, a, "go", nil) // a completes: the waiter's tally is made
	if err != nil {
		t.Fatal(err)
	}
	b.take(d)
	if b.m.tallies[waiter] == nil {
		t.Fatal("no tally after a dependency finished")
	}
	if d, err = b.m.Cancel(t0, waiter); err != nil {
		t.Fatal(err)
	}
	b.take(d)
	if n := len(b.m.tallies); n != 0 {
		t.Fatalf("%d tallies left after the only waiter was cancelled", n)
	}
	b.replayed()
}

// indexedBundle is a recovered machine whose workflows are defs, by name,
// and whose terminal index is the returned map, kept as the engine keeps
// it: take applies a decision (nothing for a refused one), records its
// index entries and acknowledges it, so that summaries come from the
// index from then on.
func indexedBundle(t tb, defs map[string]*WorkflowDef) (b *testBundle, index map[string]WorkflowSummary, take func(Decision, error)) {
	index = map[string]WorkflowSummary{}
	b = setup(t, nil, func(cfg *Config) {
		cfg.WorkflowFunc = func(name string) *WorkflowDef { return defs[name] }
		cfg.LookupFunc = func(id string) (WorkflowSummary, bool) { s, ok := index[id]; return s, ok }
	})
	b.recover(t0)
	take = func(d Decision, err error) {
		if err != nil {
			return // refused: nothing decided
		}
		b.take(d)
		for _, e := range d.Index {
			if s, err := replay.DecodeWorkflowSummary(e.Value); err == nil {
				index[e.ID] = WorkflowSummary{Status: s.Status.String(), State: s.State, Error: s.Error}
			}
		}
		b.m.Acked(b.m.NextSeq() - 1)
	}
	return b, index, take
}
