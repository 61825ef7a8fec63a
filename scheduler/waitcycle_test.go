package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Waits that can never be met because of a cycle of waits (WF-7, WF-10):
// the waiting workflows' deadlines never catch them (WD-11), so without
// this they would wait until cancelled.

// cycleBundle drives workflows that wait for a signal "go" whose payload
// gives the ids to wait for (state key "deps"), then wait for them; and
// leaves, which complete on "go".
type cycleBundle struct {
	*testBundle
	t    *testing.T
	now  time.Time
	defs map[string]*WorkflowDef
}

// gateDef is a workflow that waits for "go", then for the workflows under
// "deps" in mode, with quorum, under a deadline if not zero.
func gateDef(name, mode string, quorum int, deadline time.Duration) *WorkflowDef {
	return &WorkflowDef{Name: name, Hash: "h" + name, Deadline: deadline, Steps: []StepDef{
		{Kind: StepSignal, Name: "deps", Signals: []string{"go"}, Mode: ModeAll},
		{Kind: StepWorkflows, Name: "join", Mode: mode, Quorum: quorum, FromKey: "deps"},
	}}
}

func cycleSetup(t *testing.T) *cycleBundle {
	c := &cycleBundle{t: t, now: t0, defs: map[string]*WorkflowDef{
		"all":    gateDef("all", ModeAll, 0, 0),
		"any":    gateDef("any", ModeAny, 0, 0),
		"q1":     gateDef("q1", ModeQuorum, 1, 0),
		"q2":     gateDef("q2", ModeQuorum, 2, 0),
		"any-1h": gateDef("any-1h", ModeAny, 0, time.Hour),
		"leaf":   {Name: "leaf", Hash: "hleaf", Steps: []StepDef{{Kind: StepSignal, Name: "0", Signals: []string{"go"}, Mode: ModeAll}}},
	}}
	c.testBundle = setup(t, nil, func(cfg *Config) {
		cfg.WorkflowFunc = func(name string) *WorkflowDef { return c.defs[name] }
	})
	c.recover(c.now)
	return c
}

// start dispatches a workflow of def; it waits for "go".
func (c *cycleBundle) start(def string) string {
	c.t.Helper()
	d, id, err := c.m.StartWorkflow(c.now, DispatchRequest{Name: def})
	if err != nil {
		c.t.Fatal(err)
	}
	c.take(d)
	return id
}

// signal sends "go" to id with deps as its payload's "deps", if any: a
// gate then enters its wait for them, a leaf completes.
func (c *cycleBundle) signal(id string, deps ...string) {
	c.t.Helper()
	d, err := c.m.Signal(c.now, id, "go", depsState(c.t, deps))
	if err != nil {
		c.t.Fatal(err)
	}
	c.take(d)
}

// status returns id's status and error, from the state or, once it left
// it, its summary.
func (c *cycleBundle) status(id string) (string, string) {
	if w := c.m.State().Workflows[id]; w != nil {
		return w.Status.String(), w.Error
	}
	if s, ok := c.m.lookup(id); ok {
		return s.Status, s.Error
	}
	return "unknown", ""
}

// want fails unless each of ids has status.
func (c *cycleBundle) want(status string, ids ...string) {
	c.t.Helper()
	for _, id := range ids {
		if got, msg := c.status(id); got != status {
			c.t.Fatalf("%s is %s (%q), want %s", id, got, msg, status)
		}
	}
}

// wantError fails unless id failed with an error naming dep for why.
func (c *cycleBundle) wantError(id, dep, why string) {
	c.t.Helper()
	c.want("failed", id)
	if _, msg := c.status(id); !strings.Contains(msg, dep+" ("+why+")") {
		c.t.Fatalf("%s failed with %q, want it to name %s (%s)", id, msg, dep, why)
	}
}

// WF-10, WF-7: W1 waits Any(W2); an hour later W2, entering its own wait,
// waits Any(W1). Neither can finish before the other: W2, which closes
// the cycle, fails naming it, and its failure fails W1 (an Any wait whose
// only dependency failed), instead of both waiting forever.
func TestWF10_AnyCycleClosedLaterFailsBoth(t *testing.T) {
	t.Parallel()
	c := cycleSetup(t)
	w1, w2 := c.start("any"), c.start("any")
	c.signal(w1, w2)
	c.want("waiting_for_workflows", w1) // W2 waits for a signal: it can finish
	c.now = c.now.Add(time.Hour)
	c.signal(w2, w1)
	c.wantError(w2, w1, whyWaitsForThis)
	c.wantError(w1, w2, "failed")
	c.replayed()
}

// WF-10, WF-7: W1 waits Quorum(2 of W2, W3, W4) while W2 and W3 each wait
// All(W1). W4 alone cannot make the quorum: when W3 closes the cycle, it
// fails, and so must W1 and W2. W1's wait still counts two dependencies
// under way (W2, W4), so W3's failure alone does not make it impossible:
// W1 must see that W2 waits for it.
func TestWF10_QuorumCycleFailsEveryMember(t *testing.T) {
	t.Parallel()
	c := cycleSetup(t)
	w1, w2, w3, w4 := c.start("q2"), c.start("all"), c.start("all"), c.start("leaf")
	c.signal(w1, w2, w3, w4)
	c.signal(w2, w1) // W1 can still make its quorum with W3 and W4
	c.want("waiting_for_workflows", w1, w2)
	c.signal(w3, w1)
	c.wantError(w3, w1, whyWaitsForThis)
	c.wantError(w1, w2, whyWaitsForThis)
	c.wantError(w2, w1, "failed")
	c.want("waiting_for_signal", w4) // not a member: it goes on
	c.replayed()
}

// WF-10, WF-7: a ring of mixed waits, W1 All(W2, L), W2 Any(W3), W3
// Quorum(1 of W1), where L can finish, can never be met, whichever member
// enters its wait last and closes it: that one fails naming the cycle,
// and every other member fails after it.
func TestWF10_MixedAllAnyQuorumCycleFailsWhoeverClosesIt(t *testing.T) {
	t.Parallel()
	for closer := range 3 {
		t.Run(fmt.Sprintf("closed by W%d", closer+1), func(t *testing.T) {
			t.Parallel()
			c := cycleSetup(t)
			w := []string{c.start("all"), c.start("any"), c.start("q1")}
			leaf := c.start("leaf")
			deps := [][]string{{w[1], leaf}, {w[2]}, {w[0]}}
			for k := 1; k <= 3; k++ {
				i := (closer + k) % 3
				c.signal(w[i], deps[i]...)
				if k < 3 {
					c.want("waiting_for_workflows", w[i])
				}
			}
			c.wantError(w[closer], deps[closer][0], whyWaitsForThis)
			c.want("failed", w...)
			c.want("waiting_for_signal", leaf)
			c.replayed()
		})
	}
}

// WF-10, WF-7: W1 waits Any(W2, W3), W2 waits All(W1), W3 waits All(W1).
// While W3 waits for its signal W1 can finish through it; once W3 closes
// the cycle nothing can: W3 fails, and W1, whose wait still counts W2
// under way, must notice that W2 waits for it, then W2 fails with W1.
func TestWF10_AnyCycleClosedBySecondDependantFailsEveryMember(t *testing.T) {
	t.Parallel()
	c := cycleSetup(t)
	w1, w2, w3 := c.start("any"), c.start("all"), c.start("all")
	c.signal(w1, w2, w3)
	c.signal(w2, w1)
	c.want("waiting_for_workflows", w1, w2)
	c.now = c.now.Add(time.Hour)
	c.signal(w3, w1)
	c.wantError(w3, w1, whyWaitsForThis)
	c.wantError(w1, w2, whyWaitsForThis)
	c.wantError(w2, w1, "failed")
	c.replayed()
}

// WF-7, WF-10: waits that name a workflow waiting for them are not a
// cycle that can never be met when enough of their dependencies can
// finish otherwise: none of them fails, and they complete once those do.
func TestWF7_WaitsThatCanStillBeMetThroughOthersAreNotCycles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		mode  string // W1's
		ws    int    // W1 waits for W2 and ws-1 leaves; W2 waits All(W1)
		w2    bool   // W2 enters its wait before W1
		leafs int    // leaves completed, in order, to let W1 finish
	}{
		{"Any(W2, L1)", "any", 2, false, 1},
		{"Any(W2, L1), W2 first", "any", 2, true, 1},
		{"Quorum(1 of W2, L1)", "q1", 2, false, 1},
		{"Quorum(2 of W2, L1, L2)", "q2", 3, false, 2},
		{"Quorum(2 of W2, L1, L2), W2 first", "q2", 3, true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := cycleSetup(t)
			w1, w2 := b.start(c.mode), b.start("all")
			deps := []string{w2}
			for range c.ws - 1 {
				deps = append(deps, b.start("leaf"))
			}
			if c.w2 {
				b.signal(w2, w1)
				b.signal(w1, deps...)
			} else {
				b.signal(w1, deps...)
				b.signal(w2, w1)
			}
			b.want("waiting_for_workflows", w1, w2)
			for _, leaf := range deps[1 : 1+c.leafs] {
				b.signal(leaf)
			}
			b.want("completed", w1, w2)
			b.replayed()
		})
	}
}

// WF-10, WF-7: W1 waits Any(W2, W3) and W2 waits All(W1): W3 is W1's way
// out. When W3 fails or is cancelled, W1's wait still counts W2 under way,
// but W2 can finish only after W1: both must fail then. W1 must see so
// whether W2 entered its wait before W1's, or after W1 had counted its
// own wait (here when a third dependency, L, was cancelled).
func TestWF10_ACycleLeftWithoutAWayOutFails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                   string
		expire, w2First, tally bool
	}{
		{name: "W3 cancelled"},
		{name: "W3 expired", expire: true},
		{name: "W3 cancelled, W2 waiting first", w2First: true},
		{name: "W3 cancelled, W1's wait counted before W2 waits", tally: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := cycleSetup(t)
			b.defs["slow"] = &WorkflowDef{Name: "slow", Hash: "hslow", Deadline: time.Hour,
				Steps: []StepDef{{Kind: StepThen, Name: "0", Handlers: []string{"h"}, Queue: "default", Retry: defaultRetry}}}
			w1, w2, w3 := b.start("any"), b.start("all"), b.start("slow") // W3 runs its step
			deps := []string{w2, w3}
			if c.tally {
				deps = append(deps, b.start("leaf"))
			}
			cancel := func(id string) {
				t.Helper()
				d, err := b.m.Cancel(b.now, id)
				if err != nil {
					t.Fatal(err)
				}
				b.take(d)
			}
			if c.w2First {
				b.signal(w2, w1)
			}
			b.signal(w1, deps...)
			if c.tally {
				cancel(deps[2])
			}
			if !c.w2First {
				b.signal(w2, w1)
			}
			b.want("waiting_for_workflows", w1, w2)
			if c.expire {
				b.now = b.now.Add(time.Hour)
				b.take(b.m.CheckDeadlines(b.now)) // W3 fails by its deadline (WD-5)
				b.want("failed", w3)
			} else {
				cancel(w3)
			}
			b.wantError(w1, w2, whyWaitsForThis)
			b.wantError(w2, w1, "failed")
			b.replayed()
		})
	}
}

// WD-11, WD-7, WF-10: a workflow waiting for workflows never expires
// (WD-5 matches running workflows only), so a cycle of waits past a
// member's deadline would never end by it. Found past deadline_at, the
// cycle fails that member by its deadline (WD-7), with its expiry
// records, as any wait that becomes impossible then does.
func TestWD7_ACycleFoundPastTheDeadlineExpiresTheMember(t *testing.T) {
	t.Parallel()
	c := cycleSetup(t)
	w1, w2 := c.start("any-1h"), c.start("any")
	c.signal(w1, w2)
	c.now = c.now.Add(2 * time.Hour)
	c.take(c.m.CheckDeadlines(c.now))
	c.want("waiting_for_workflows", w1) // WD-11: past deadline_at, still waiting
	c.signal(w2, w1)
	c.wantError(w2, w1, whyWaitsForThis)
	c.want("failed", w1)
	if _, msg := c.status(w1); msg != MsgDeadlineExceeded {
		t.Fatalf("W1 failed with %q, want %q", msg, MsgDeadlineExceeded)
	}
	var x *record.WorkflowDeadlineExceeded
	for _, r := range c.recs {
		if e, ok := r.Body.(*record.WorkflowDeadlineExceeded); ok && e.WorkflowID == w1 {
			x = e
		}
	}
	if x == nil || x.DetectedBy != DetectedByStepBoundary || x.DetectedAt != c.now.UnixNano() {
		t.Fatalf("W1's expiry %+v, want one detected by %s at %v", x, DetectedByStepBoundary, c.now)
	}
	c.replayed()
}

// WF-10, WF-7: a dependency whose own wait can never be met, through a
// cycle that does not pass through the waiting workflow, is named as
// such. Such a cycle is failed as it closes; here it is one left by a
// journal of an engine that did not look for cycles through Any waits,
// found when a workflow waits for one of its members.
func TestWF10_ADependencyStuckInAnotherCycleIsNamed(t *testing.T) {
	t.Parallel()
	var j journal
	started := func(id, name string, steps int32) {
		j.add(id, &record.WorkflowStarted{WorkflowID: id, Name: name, DefinitionHash: "h" + name, Steps: steps, State: []byte{0x80}})
	}
	for _, id := range []string{"wf_a", "wf_b"} {
		started(id, "wait", 1)
	}
	j.add("wf_a", &record.WorkflowWaiting{WorkflowID: "wf_a", Status: "waiting_for_workflows", Workflows: []string{"wf_b"}, Mode: ModeAny})
	j.add("wf_b", &record.WorkflowWaiting{WorkflowID: "wf_b", Status: "waiting_for_workflows", Workflows: []string{"wf_a"}, Mode: ModeAny})
	defs := map[string]*WorkflowDef{
		"wait": {Name: "wait", Hash: "hwait", Steps: []StepDef{{Kind: StepWorkflows, Name: "0", Mode: ModeAny, FromKey: "deps"}}},
		"any":  gateDef("any", ModeAny, 0, 0),
	}
	b := setup(t, j.recs, func(cfg *Config) { cfg.WorkflowFunc = func(name string) *WorkflowDef { return defs[name] } })
	b.recover(t0)
	c := &cycleBundle{testBundle: b, t: t, now: t0, defs: defs}
	w := c.start("any")
	c.signal(w, "wf_a")
	c.wantError(w, "wf_a", whyNeverMet)
	c.replayed()
}

// WF-10, WF-7, RL-7: random workflows waiting in every mode for random
// others (themselves, unknown ids and one another included), while
// leaves complete, workflows are cancelled, expire and are retried. After
// every event, checked against a least fixpoint computed here by plain
// repetition:
//   - no workflow still waits on a wait that can never be met;
//   - every workflow failed as part of a cycle in that event had a wait
//     that could never be met, counting those failed with it as waiting;
//
// and live state equals replay.
func TestWF10_NoWaitThatCanNeverBeMetIsLeftOrFailedWrongly(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		defs := map[string]*WorkflowDef{
			"leaf": {Name: "leaf", Hash: "hleaf", Steps: []StepDef{{Kind: StepSignal, Name: "0", Signals: []string{"go"}, Mode: ModeAll}}},
			"slow": {Name: "slow", Hash: "hslow", Deadline: time.Hour,
				Steps: []StepDef{{Kind: StepThen, Name: "0", Handlers: []string{"h"}, Queue: "default", Retry: defaultRetry}}},
		}
		b, index, take := indexedBundle(t, defs)
		now := t0
		var ids, gates []string
		quorum := map[string]int{} // of each gate
		for i := range rapid.IntRange(3, 6).Draw(t, "workflows") {
			name, q := "leaf", 0
			switch kind := rapid.IntRange(0, 5).Draw(t, "kind"); kind {
			case 0:
			case 1:
				name = "slow"
			default:
				name = fmt.Sprintf("gate%d", i)
				mode := []string{ModeAll, ModeAny, ModeQuorum, ModeAny}[kind-2]
				if q = 1; mode == ModeQuorum {
					q = rapid.IntRange(1, 2).Draw(t, "quorum")
				}
				defs[name] = gateDef(name, mode, q, 0)
			}
			d, id, err := b.m.StartWorkflow(now, DispatchRequest{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			take(d, nil)
			ids = append(ids, id)
			if q > 0 {
				gates = append(gates, id)
				quorum[id] = q
			}
		}
		// Dependencies are drawn among the gates more often, so that
		// they wait for one another.
		pool := slices.Concat(ids, gates, gates, gates, []string{"wf_unknown"})
		status := func(id string) string {
			if x := b.m.State().Workflows[id]; x != nil {
				return x.Status.String()
			}
			if s, ok := index[id]; ok {
				return s.Status
			}
			return "unknown"
		}
		// waitOf returns x's wait for workflows: the ids under its
		// "deps" and its step's mode, whether it waits or failed at it.
		waitOf := func(x *replay.Workflow) (need int, deps []string) {
			st, err := replay.DecodeState(x.State)
			if err != nil {
				t.Fatal(err)
			}
			list, _ := st["deps"].([]any)
			for _, v := range list {
				deps = append(deps, v.(string))
			}
			step := defs[x.Name].Steps[x.Step]
			return waitNeed(&step, len(deps)), deps
		}
		// neverMet returns the workflows of waiting (ids) whose waits are
		// not in the least fixpoint of "can finish".
		neverMet := func(waiting []string) []string {
			need := map[string]int{}
			deps := map[string][]string{}
			for _, id := range waiting {
				need[id], deps[id] = waitOf(b.m.State().Workflows[id])
			}
			can := map[string]bool{}
			for _, id := range ids {
				if _, ok := need[id]; !ok {
					s := status(id)
					can[id] = s != "failed" && s != "cancelled" && s != "unknown"
				}
			}
			for changed := true; changed; {
				changed = false
				for _, id := range waiting {
					n := 0
					for _, dep := range deps[id] {
						if can[dep] {
							n++
						}
					}
					if !can[id] && n >= need[id] {
						can[id], changed = true, true
					}
				}
			}
			var out []string
			for _, id := range waiting {
				if !can[id] {
					out = append(out, id)
				}
			}
			return out
		}
		for range rapid.IntRange(10, 40).Draw(t, "events") {
			from := len(b.recs)
			id := rapid.SampledFrom(ids).Draw(t, "id")
			switch rapid.IntRange(0, 5).Draw(t, "event") {
			case 0, 1, 2: // a gate enters its wait; a leaf completes
				var payload []byte
				if q := quorum[id]; q > 0 {
					list := rapid.SliceOfN(rapid.SampledFrom(pool), q, 3).Draw(t, "deps")
					deps := make([]any, len(list))
					for i, dep := range list {
						deps[i] = dep
					}
					var err error
					if payload, err = replay.EncodeState(map[string]any{"deps": deps}); err != nil {
						t.Fatal(err)
					}
				}
				take(b.m.Signal(now, id, "go", payload))
			case 3:
				take(b.m.Cancel(now, id))
			case 4:
				now = now.Add(time.Duration(rapid.IntRange(1, 90).Draw(t, "minutes")) * time.Minute)
				take(b.m.CheckDeadlines(now), nil)
			case 5:
				take(b.m.RetryWorkflow(now, id))
			}
			var waiting, cyclic []string
			for _, x := range ids {
				if status(x) == "waiting_for_workflows" {
					waiting = append(waiting, x)
				}
			}
			if stuck := neverMet(waiting); len(stuck) > 0 {
				t.Fatalf("%v still wait, but their waits can never be met", stuck)
			}
			// Those whose wait failed in this event, as waiting again.
			for _, r := range b.recs[from:] {
				if f, ok := r.Body.(*record.WorkflowFailed); ok && strings.Contains(f.Error, `step "join": dependency`) {
					waiting = append(waiting, f.WorkflowID)
					if strings.Contains(f.Error, whyWaitsForThis) || strings.Contains(f.Error, whyNeverMet) {
						cyclic = append(cyclic, f.WorkflowID)
					}
				}
			}
			stuck := neverMet(waiting)
			for _, x := range cyclic {
				if !slices.Contains(stuck, x) {
					t.Fatalf("%s failed with %q, but its wait could be met", x, b.m.State().Workflows[x].Error)
				}
			}
		}
		b.replayed()
	})
}
