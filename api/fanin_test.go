package api_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

// The fan-in tests lower the journal's cap on one append to 40 records,
// so that the reactions of 30 workflows waiting on one target (three
// records each: workflow_resumed, step_completed, the next step's
// job_enqueued) cannot all go in the target's own append. Without the
// engine splitting them, the journal refuses that append and the engine
// stops (RL-2).
const (
	fanInUnitRecords = 40
	fanInWaiters     = 30
)

// fanInScale returns the cap and the waiters of
// TestWF7_RL4_FanInLargerThanOneAppend: with QUIRE_LONG=1 it keeps the
// journal's own cap (65 536 records) and has 22 000 waiters (about 30 s
// on 2 cores).
func fanInScale() (unitRecords, waiters int) {
	if os.Getenv("QUIRE_LONG") == "1" {
		return 0, 22_000
	}
	return fanInUnitRecords, fanInWaiters
}

// fanIn opens an engine with the journal's caps on one append lowered to
// unitRecords records and unitBytes bytes (0 keeps the journal's own)
// and registers, through the returned register, a "waiter" workflow that
// waits for the ids under "dep", puts the result under "r" and then runs
// one step, and the given target workflow.
func fanIn(t *testing.T, target *api.Workflow, unitRecords, unitBytes int) (*testBundle, func(*api.Engine)) {
	t.Helper()
	b := setup(t, func(o *api.Options) {
		o.RecordBytesMax = api.RecordBytesMin
		api.SetUnitCaps(o, unitRecords, unitBytes)
	})
	register := func(e *api.Engine) {
		wfRegister(t, e, target)
		wfRegister(t, e, api.NewWorkflow("waiter").WaitForWorkflowsIn(api.All(), "dep").Into("r").
			Then("after", wfReturn(api.State{"done": true})))
	}
	register(b.eng)
	return b, register
}

// dispatchWaiters dispatches n waiters on target and checks
// that each waits for it: a wait step is entered in the dispatch's own
// append (WF-11).
func dispatchWaiters(b *testBundle, target string, n int) []string {
	b.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wfDispatch(b, "waiter", api.State{"dep": []string{target}})
	}
	for _, id := range ids {
		wfWant(b, id, api.WorkflowWaitingWorkflows)
	}
	return ids
}

// signalTarget sends the target its "go", waits until the engine is idle
// and checks that it is still live.
func signalTarget(b *testBundle, target string) {
	b.t.Helper()
	if err := b.eng.Signal(b.ctx, target, "go", nil); err != nil {
		b.t.Fatalf("signal: %v", err)
	}
	b.idle()
	if !b.eng.Live() {
		b.t.Fatal("the engine stopped after the target finished")
	}
}

// wantWaitersDone checks that every waiter completed with target's
// outcome under "r" (WF-7).
func wantWaitersDone(b *testBundle, target string, waiters []string) {
	b.t.Helper()
	for _, id := range waiters {
		info := wfWant(b, id, api.WorkflowCompleted)
		r, _ := info.State["r"].(map[string]any)
		dep, _ := r[target].(map[string]any)
		if dep["status"] != "completed" || info.State["done"] != true {
			b.t.Fatalf("waiter %s ended with state %v, want r[%s].status completed and done", id, info.State, target)
		}
	}
}

// shutdownReleasing shuts b's engine down, closing release once phase 1
// has stopped dispatch, so that a step blocked on it finishes after
// nothing more is dispatched in this run; then opens the engine again,
// not started.
func shutdownReleasing(b *testBundle, release chan struct{}) {
	b.t.Helper()
	api.SetPhaseStartedHook(func(phase int) {
		if phase == int(shutdown.PhaseCloseAdmission) {
			close(release)
		}
	})
	defer api.SetPhaseStartedHook(nil)
	if err := b.eng.Shutdown(b.ctx); err != nil {
		b.t.Fatalf("shutdown: %v", err)
	}
	b.open()
}

// resumedWaiters returns how many of recs resume a waiter.
func resumedWaiters(recs []journalRecord, waiters []string) int {
	is := make(map[string]bool, len(waiters))
	for _, id := range waiters {
		is[id] = true
	}
	n := 0
	for _, r := range wfBodies[*record.WorkflowResumed](recs) {
		if is[r.WorkflowID] {
			n++
		}
	}
	return n
}

// TestWF7_RL4_FanInLargerThanOneAppend: a workflow finishing with more
// waiters than one append holds reacts for as many as fit in its own
// append (WF-11) and for the rest in appends right after; the engine
// stays live and every waiter gets the outcome (WF-7).
func TestWF7_RL4_FanInLargerThanOneAppend(t *testing.T) {
	unitRecords, n := fanInScale()
	b, _ := fanIn(t, api.NewWorkflow("target").WaitForSignal("go"), unitRecords, 0)
	b.start()
	target := wfDispatch(b, "target", api.State{})
	waiters := dispatchWaiters(b, target, n)
	signalTarget(b, target)
	wfWant(b, target, api.WorkflowCompleted)
	wantWaitersDone(b, target, waiters)

	// The target's append holds the first reactions (WF-11), up to half
	// the cap: its own records come first, the waiters' right after.
	recs := b.records()
	done := -1
	for i, r := range recs {
		if c, ok := r.Body.(*record.WorkflowCompleted); ok && c.WorkflowID == target {
			done = i
		}
	}
	if done < 0 {
		t.Fatal("no workflow_completed for the target")
	}
	if resumedWaiters(recs[done+1:done+2], waiters) != 1 {
		t.Fatalf("WF-11: the record after the target's workflow_completed is %s, want a waiter's workflow_resumed", recs[done+1].Kind())
	}
	b.checkReplay()
}

// TestWF7_DeferredReactionsSettleAfterRestart: a target that finishes
// during a shutdown, once dispatch has stopped, reacts in its own append
// for the waiters that fit; the others are settled by the next run,
// which checks every wait with a finished dependency when it opens.
func TestWF7_DeferredReactionsSettleAfterRestart(t *testing.T) {
	release := make(chan struct{})
	b, register := fanIn(t, api.NewWorkflow("target").Then("t", func(ctx context.Context, _ *api.Delivery, _ api.State) (api.State, error) {
		<-release
		return nil, nil
	}), fanInUnitRecords, 0)
	b.start()
	target := wfDispatch(b, "target", api.State{})
	waiters := dispatchWaiters(b, target, fanInWaiters)
	// The target's step is running; it returns once phase 1 has stopped
	// dispatch, so that nothing in this run settles the waits left over.
	shutdownReleasing(b, release)
	recs := b.records()
	if n := resumedWaiters(recs, waiters); n == 0 || n >= fanInWaiters {
		t.Fatalf("%d of %d waiters resumed in the run the target finished in, want some, not all", n, fanInWaiters)
	}
	register(b.eng)
	b.start()
	b.idle()
	wfWant(b, target, api.WorkflowCompleted)
	wantWaitersDone(b, target, waiters)
	b.checkReplay()
}

// TestWF7_RL4_FanInOfLargeResults: as TestWF7_RL4_FanInLargerThanOneAppend,
// with the journal's cap on one append's bytes reached first: each waiter
// gets the target's public state of about 30 KiB under its result key.
func TestWF7_RL4_FanInOfLargeResults(t *testing.T) {
	// 30 results of 30 KiB take 900 KiB; 8 take half the cap.
	b, _ := fanIn(t, api.NewWorkflow("target").WaitForSignal("go"), 0, 512<<10)
	b.start()
	target := wfDispatch(b, "target", api.State{"big": strings.Repeat("x", 30<<10)})
	waiters := dispatchWaiters(b, target, fanInWaiters)
	signalTarget(b, target)
	wantWaitersDone(b, target, waiters)
	b.checkReplay()
}

// chainDepth is the nesting of the chain tests: each level completes its
// SubWorkflow step, and so itself, with its child, adding two records a
// level to the innermost's append, so that 30 levels outgrow a cap of 40.
const chainDepth = 30

// registerChain registers lvl0 … lvl<chainDepth-1>: level i runs a step,
// then level i+1 as a sub-workflow (not as its first step, so that
// SubWorkflowChainMax does not apply); the last level runs inner.
func registerChain(t *testing.T, e *api.Engine, inner *api.Workflow) {
	t.Helper()
	wfRegister(t, e, inner)
	for i := chainDepth - 2; i >= 0; i-- {
		wfRegister(t, e, api.NewWorkflow(fmt.Sprintf("lvl%d", i)).
			Then("a", wfReturn(nil)).SubWorkflow("s", fmt.Sprintf("lvl%d", i+1)))
	}
}

// chainIDs returns the ids of the chain's workflows, outermost first.
func chainIDs(b *testBundle) []string {
	b.t.Helper()
	ids := make([]string, chainDepth)
	for _, s := range wfBodies[*record.WorkflowStarted](b.records()) {
		var i int
		if _, err := fmt.Sscanf(s.Name, "lvl%d", &i); err == nil {
			ids[i] = s.WorkflowID
		}
	}
	for i, id := range ids {
		if id == "" {
			b.t.Fatalf("level %d was not started", i)
		}
	}
	return ids
}

// wantChainCompleted checks that every level completed (WF-8).
func wantChainCompleted(b *testBundle, ids []string) {
	b.t.Helper()
	for _, id := range ids {
		wfWant(b, id, api.WorkflowCompleted)
	}
}

// TestWF8_RL4_NestedCompletionsLargerThanOneAppend: a chain of nested
// workflows that all finish with the innermost completes as many levels
// as fit in the innermost's append (WF-8, WF-11) and the rest in appends
// right after; the engine stays live.
func TestWF8_RL4_NestedCompletionsLargerThanOneAppend(t *testing.T) {
	b := setup(t, func(o *api.Options) { api.SetUnitCaps(o, fanInUnitRecords, 0) })
	registerChain(t, b.eng, api.NewWorkflow(fmt.Sprintf("lvl%d", chainDepth-1)).WaitForSignal("go"))
	b.start()
	wfDispatch(b, "lvl0", api.State{})
	b.idle()
	ids := chainIDs(b)
	signalTarget(b, ids[chainDepth-1])
	wantChainCompleted(b, ids)
	b.checkReplay()
}

// TestWF8_DeferredCompletionsSettleAfterRestart: the innermost completes
// during a shutdown, once dispatch has stopped; the levels that did not
// fit in its append complete in the next run, when their definitions
// are registered.
func TestWF8_DeferredCompletionsSettleAfterRestart(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	inner := api.NewWorkflow(fmt.Sprintf("lvl%d", chainDepth-1)).Then("t", func(ctx context.Context, _ *api.Delivery, _ api.State) (api.State, error) {
		started <- struct{}{}
		<-release
		return nil, nil
	})
	b := setup(t, func(o *api.Options) { api.SetUnitCaps(o, fanInUnitRecords, 0) })
	registerChain(t, b.eng, inner)
	b.start()
	wfDispatch(b, "lvl0", api.State{})
	<-started // every level is started and waits for the next
	ids := chainIDs(b)
	shutdownReleasing(b, release)
	done := len(wfBodies[*record.WorkflowCompleted](b.records()))
	if done == 0 || done >= chainDepth {
		t.Fatalf("%d of %d levels completed in the run the innermost finished in, want some, not all", done, chainDepth)
	}
	registerChain(t, b.eng, inner)
	b.start()
	b.idle()
	wantChainCompleted(b, ids)
	b.checkReplay()
}
