package api_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// An instance is advanced only by the definition whose hash its
// workflow_started recorded (WF-2). A process that registers a changed
// definition under the same name parks it, as if its definition were not
// registered: nothing is appended for it, a signal is only stored, and its
// status says it is parked; a new dispatch uses the registered definition.
// A process that registers its own definition again lets it finish.
func TestWF2_ChangedDefinitionParksInstanceUntilItsOwnIsRegistered(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	v1 := func() *api.Workflow {
		return api.NewWorkflow("flow").Then("a", wfSeen(&rec, "a", api.State{"a": true})).WaitForSignal("go").
			Then("b", wfSeen(&rec, "b", api.State{"b": true})).Then("c", wfSeen(&rec, "c", api.State{"c": true}))
	}
	v2 := func() *api.Workflow {
		return api.NewWorkflow("flow").Then("z", wfSeen(&rec, "z", api.State{"z": true})).
			Then("y", wfSeen(&rec, "y", api.State{"y": true}))
	}
	wfRegister(t, b.eng, v1())
	b.start()
	id := wfDispatch(b, "flow", api.State{}, api.IdempotencyKey("x"))
	b.idle()
	old := wfWant(b, id, api.WorkflowWaitingSignal)
	if old.Parked || old.Step != 1 || old.StepName != "1" {
		t.Fatalf("WF-21: %+v", old)
	}
	before := len(wfStream(b.records(), id))

	b.reopen(func(e *api.Engine) { wfRegister(t, e, v2()) })
	b.start()
	b.idle()
	info := wfWant(b, id, api.WorkflowWaitingSignal)
	if !info.Parked || info.Step != 1 || info.Steps != 4 || info.StepName != "" || info.DefinitionHash != old.DefinitionHash {
		t.Fatalf("WF-2: under a changed definition, status %+v", info)
	}
	if err := b.eng.Signal(b.ctx, id, "go", api.State{"by": "ops"}); err != nil {
		t.Fatal(err)
	}
	b.advance(time.Minute)
	if got := wfStream(b.records(), id)[before:]; !slices.Equal(got, []string{"signal_received"}) {
		t.Fatalf("WF-2: appended %v for an instance of another definition, want only the stored signal", got)
	}
	if info := wfWant(b, id, api.WorkflowWaitingSignal); !info.Parked || info.Step != 1 {
		t.Fatalf("WF-2: %+v", info)
	}
	n := wfDispatch(b, "flow", api.State{})
	b.idle()
	if ni := wfWant(b, n, api.WorkflowCompleted); ni.DefinitionHash == old.DefinitionHash || wfState(ni.State) != "map[y:true z:true]" {
		t.Fatalf("WF-13: a new dispatch runs the registered definition: %+v", ni)
	}
	if got := strings.Join(rec.get(), ","); got != "a map[],z map[],y map[z:true]" {
		t.Fatalf("WF-2: steps ran %s", got)
	}

	b.reopen(func(e *api.Engine) { wfRegister(t, e, v1()) })
	b.start()
	b.idle()
	done := wfWant(b, id, api.WorkflowCompleted)
	if wfState(done.State) != "map[a:true b:true by:ops c:true]" {
		t.Fatalf("WF-6: the stored signal must settle the wait under the instance's own definition: %+v", done)
	}
	b.checkReplay()
}

// WF-2, WF-22: the definition hash covers what the definition says, not
// the engine's Options. A release that changes an engine-wide retry default
// or a queue's options used to park every workflow in flight (their step
// jobs' resolved options were hashed); a signal was then only stored.
// What the definition sets itself, a step's MaxAttempts included, still
// changes the hash.
func TestWF2_EngineOptionsDoNotChangeTheDefinitionHash(t *testing.T) {
	b := setup(t, nil)
	def := func(stepOpts ...api.JobOption) *api.Workflow {
		return api.NewWorkflow("flow").Then("a", wfReturn(api.State{"a": true}), stepOpts...).WaitForSignal("go").
			Then("b", wfReturn(api.State{"b": true}))
	}
	wfRegister(t, b.eng, def())
	b.start()
	id := wfDispatch(b, "flow", api.State{})
	b.idle()
	first := wfWant(b, id, api.WorkflowWaitingSignal)

	b.opts.MaxAttempts = 5
	b.opts.Backoff = api.BackoffPolicy{Kind: api.BackoffFixed, Base: 100 * time.Millisecond}
	b.opts.QueueOptions = map[string]api.QueueOptions{"default": {MaxAttempts: 4}}
	b.reopen(func(e *api.Engine) { wfRegister(t, e, def()) })
	b.start()
	if info := wfWant(b, id, api.WorkflowWaitingSignal); info.Parked || info.StepName != "1" {
		t.Fatalf("WF-2: after changing only the engine's Options the workflow is %+v", info)
	}
	if err := b.eng.Signal(b.ctx, id, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	if n := wfDispatch(b, "flow", api.State{}); wfInfo(b, n).DefinitionHash != first.DefinitionHash {
		t.Fatalf("WF-2: a new dispatch records %s, the first %s", wfInfo(b, n).DefinitionHash, first.DefinitionHash)
	}

	b.reopen(func(e *api.Engine) { wfRegister(t, e, def(api.MaxAttempts(2))) })
	n := wfDispatch(b, "flow", api.State{})
	if h := wfInfo(b, n).DefinitionHash; h == first.DefinitionHash {
		t.Fatalf("WF-2: a step's own MaxAttempts does not change the hash %s", h)
	}
	b.checkReplay()
}

// A parked instance's pending step job does not start, even when the
// changed definition has a step of the same name (so a handler of the same
// name): it would run another definition's step for it, and its success
// could not complete the instance's step (WF-2).
func TestWF2_ChangedDefinitionHoldsStepJobsOfParkedInstance(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	v1 := func() *api.Workflow {
		return api.NewWorkflow("flow").Then("a", wfSeen(&rec, "v1 a", api.State{"a": 1})).Then("b", wfSeen(&rec, "v1 b", api.State{"b": 1}))
	}
	v2 := func() *api.Workflow {
		return api.NewWorkflow("flow").Then("b", wfSeen(&rec, "v2 b", api.State{"b": 2})).Then("a", wfSeen(&rec, "v2 a", api.State{"a": 2}))
	}
	wfRegister(t, b.eng, v1())
	id := wfDispatch(b, "flow", api.State{}) // not started: step a's job stays pending
	before := len(wfStream(b.records(), id))

	b.reopen(func(e *api.Engine) { wfRegister(t, e, v2()) })
	b.start()
	b.advance(time.Minute)
	if info := wfWant(b, id, api.WorkflowRunning); !info.Parked || info.Step != 0 || info.Attempts != 0 {
		t.Fatalf("WF-2: %+v", info)
	}
	if got := wfStream(b.records(), id)[before:]; len(got) != 0 || len(rec.get()) != 0 {
		t.Fatalf("WF-2: appended %v and ran %v for an instance of another definition", got, rec.get())
	}
	// Its step job's handler (flow/a) is registered by v2 too, yet the
	// job is parked with its workflow.
	stepJob := b.stepJob("flow/a")
	if j := b.status(stepJob); j.Status != api.JobPending || !j.Parked {
		t.Fatalf("WF-2: the parked workflow's step job is %s, parked %t; want pending and parked", j.Status, j.Parked)
	}

	b.reopen(func(e *api.Engine) { wfRegister(t, e, v1()) })
	b.start()
	b.idle()
	if info := wfWant(b, id, api.WorkflowCompleted); wfState(info.State) != "map[a:1 b:1]" {
		t.Fatalf("WF-2: %+v", info)
	}
	if got := strings.Join(rec.get(), ","); got != "v1 a map[],v1 b map[a:1]" {
		t.Fatalf("WF-2: steps ran %s", got)
	}
	b.checkReplay()
}

// After a retry the status shows the re-entered step's fresh attempt
// counts, not counts summed with the buried job the retry replaced
// (WF-18, WF-21).
func TestWF18_StatusShowsRetriedStepsFreshAttemptCounts(t *testing.T) {
	b := setup(t, nil)
	f := newFlaky()
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if f.fails() {
			return nil, errors.New("flaky")
		}
		return api.State{"ok": true}, nil
	}
	wfRegister(t, b.eng, api.NewWorkflow("r").Then("a", step).MaxAttempts(2))
	b.start()
	id := wfDispatch(b, "r", api.State{})
	b.idle()
	b.advance(time.Second)
	counts := func(want api.WorkflowStatus, attempts, consumed int) {
		t.Helper()
		info := wfWant(b, id, want)
		if info.Attempts != attempts || info.Consumed != consumed {
			t.Fatalf("WF-18: %s with attempts %d consumed %d, want %d and %d", want, info.Attempts, info.Consumed, attempts, consumed)
		}
	}
	counts(api.WorkflowFailed, 2, 2)
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	counts(api.WorkflowRunning, 1, 1) // the first attempt of the new job failed
	b.advance(time.Second)
	counts(api.WorkflowFailed, 2, 2)
	wfHealAndRetry(b, f, id)
	wfWant(b, id, api.WorkflowCompleted)
	b.checkReplay()
}

// A retry of a parked workflow re-enters nothing until its definition is
// registered (WF-2), so its status shows no attempts yet rather than the
// buried job's (WF-18, WF-21).
func TestWF18_RetryOfParkedWorkflowShowsNoAttemptsUntilEntered(t *testing.T) {
	b := setup(t, nil)
	f := newFlaky()
	v1 := func() *api.Workflow {
		return api.NewWorkflow("r").Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			if f.fails() {
				return nil, api.Permanent("NO", errors.New("broken"))
			}
			return api.State{"ok": true}, nil
		})
	}
	wfRegister(t, b.eng, v1())
	b.start()
	id := wfDispatch(b, "r", api.State{})
	b.idle()
	if info := wfWant(b, id, api.WorkflowFailed); info.Attempts != 1 {
		t.Fatalf("WF-21: %+v", info)
	}
	b.reopen(func(e *api.Engine) { wfRegister(t, e, api.NewWorkflow("r").Then("other", wfReturn(nil))) })
	b.start()
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if info := wfWant(b, id, api.WorkflowRunning); !info.Parked || info.Attempts != 0 || info.Consumed != 0 {
		t.Fatalf("WF-18: a retried step shows fresh counts: %+v", info)
	}
	f.heal()
	b.reopen(func(e *api.Engine) { wfRegister(t, e, v1()) })
	b.start()
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	b.checkReplay()
}

// WF-18: a failed workflow whose Then step's job succeeded (its output
// took the state past its limit) and that is parked after a restart (its
// definition not registered yet) is not retried: only its definition says
// whether the kept output is a Then step's, to drop, or a Parallel
// branch's, to keep. The retry used to go through and keep the output, so
// once the definition was registered the step reused it and failed again
// without calling the handler. Registered, the retry runs a new job.
func TestWF18_RetryOfParkedWorkflowHoldingAnOutputWaitsForItsDefinition(t *testing.T) {
	b := setup(t, nil)
	var calls atomic.Int32
	register := func(e *api.Engine) {
		wfRegister(t, e, api.NewWorkflow("grow").Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			if calls.Add(1) == 1 {
				return api.State{"b": strings.Repeat("x", 300<<10)}, nil
			}
			return api.State{"b": "small"}, nil
		}))
	}
	register(b.eng)
	b.start()
	id := wfDispatch(b, "grow", api.State{"a": strings.Repeat("s", 300<<10)})
	b.idle()
	wfWant(b, id, api.WorkflowFailed)
	b.reopen(nil) // parked: "grow" is not registered yet
	b.start()
	before := b.lastSeq()
	if err := b.eng.RetryWorkflow(b.ctx, id); !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "parked") {
		t.Fatalf("retry while parked: %v, want ErrState saying it is parked", err)
	}
	if after := b.lastSeq(); after != before {
		t.Fatalf("the refused retry appended: seq %d -> %d", before, after)
	}
	register(b.eng)
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if info := wfWant(b, id, api.WorkflowCompleted); calls.Load() != 2 || wfState(info.State) == "" {
		t.Fatalf("WF-18: handler called %d times, want a new job", calls.Load())
	}
	b.checkReplay()
}

// WF-21: a workflow's status names its step only from its own definition:
// under a changed one of the same name, StepName is "", not the name of the
// changed definition's step at that index, for a failed workflow (held in
// memory) and a cancelled one (read from the terminal index).
func TestWF2_WF21_StepNameOnlyFromItsDefinition(t *testing.T) {
	b := setup(t, nil)
	fail := func(context.Context, *api.Delivery, api.State) (api.State, error) {
		return nil, api.Permanent("BROKEN", errors.New("broken"))
	}
	ok := func(context.Context, *api.Delivery, api.State) (api.State, error) { return nil, nil }
	wfRegister(t, b.eng, api.NewWorkflow("flow").Then("a", ok).Then("b", fail))
	wfRegister(t, b.eng, api.NewWorkflow("wait").Then("a", ok).WaitForSignal("go"))
	b.start()
	failed := wfDispatch(b, "flow", api.State{})
	cancelled := wfDispatch(b, "wait", api.State{})
	b.idle()
	if err := b.eng.CancelWorkflow(b.ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if info := wfWant(b, failed, api.WorkflowFailed); info.Step != 1 || info.StepName != "b" {
		t.Fatalf("WF-21: %+v", info)
	}
	if info := wfWant(b, cancelled, api.WorkflowCancelled); info.Step != 1 || info.StepName != "1" {
		t.Fatalf("WF-21: %+v", info)
	}
	b.reopen(func(e *api.Engine) {
		wfRegister(t, e, api.NewWorkflow("flow").Then("x", ok).Then("y", ok))
		wfRegister(t, e, api.NewWorkflow("wait").Then("x", ok).Then("y", ok))
	})
	for _, c := range []struct {
		id     string
		status api.WorkflowStatus
	}{{cancelled, api.WorkflowCancelled}, {failed, api.WorkflowFailed}} {
		if info := wfWant(b, c.id, c.status); info.Step != 1 || info.StepName != "" {
			t.Fatalf("WF-2: under a changed definition the %s workflow shows step %d %q, want 1 and no name", c.status, info.Step, info.StepName)
		}
	}
}
