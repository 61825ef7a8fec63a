package api_test

// Input limits: inputs the api accepts must never lead the engine to a
// record or an atomic append the journal refuses, since such an append
// stops the engine for good (RL-2). Each limit is checked where the input
// is given (Register, Dispatch, Open) with a typed error naming it, and
// nothing is appended; an input exactly at its limit runs end to end.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// inBranches returns n Parallel branches that return nothing.
func inBranches(n int) []api.StepFunc {
	out := make([]api.StepFunc, n)
	for i := range out {
		out[i] = wfReturn(nil)
	}
	return out
}

// inNames returns n distinct signal names of NameBytesMax bytes.
func inNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%0*d", api.NameBytesMax, i)
	}
	return out
}

// inIDs returns n distinct workflow ids of record.StreamIDBytesMax bytes.
func inIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("wf_%0*d", record.StreamIDBytesMax-3, i)
	}
	return out
}

// inAlive fails the test unless the engine is still serving.
func inAlive(b *testBundle, what string) {
	b.t.Helper()
	if lc := b.eng.Lifecycle(); lc == api.Failed {
		b.t.Fatalf("RL-2: the engine stopped after %s", what)
	}
	if _, err := b.eng.Enqueue(b.ctx, "in_unregistered_probe", msg{}); errors.Is(err, api.ErrFailStop) {
		b.t.Fatalf("RL-2: the engine stopped after %s: %v", what, err)
	}
}

// WF-2, RL-11: names at NameBytesMax, for the workflow and every kind of
// step, and a Parallel step at ParallelBranchesMax register and run at
// RecordBytesMin; the longest step handler name is the workflow name, "/",
// the step name and "#1023", which every job_enqueued of the step records.
func TestWF2_RL11_StepNamesAtTheLimitRunEndToEnd(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMin })
	name := func(c string) string { return strings.Repeat(c, api.NameBytesMax) }
	wfName, child := name("w"), name("c")
	then, fan, sub, delay := name("t"), name("p"), name("s"), name("d")
	wfRegister(t, b.eng, api.NewWorkflow(child).Then(then, wfReturn(api.State{"child": true})))
	wfRegister(t, b.eng, api.NewWorkflow(wfName).
		Then(then, wfReturn(api.State{"then": true})).
		Parallel(fan, inBranches(api.ParallelBranchesMax)...).
		SubWorkflow(sub, child).
		Delay(time.Minute).Named(delay))
	b.start()
	id := wfDispatch(b, wfName, api.State{})
	b.idle()
	if got := wfInfo(b, id).StepName; got != delay {
		t.Fatalf("WF-2: at step %.20q, want the Named delay", got)
	}
	b.advance(time.Minute)
	info := wfWant(b, id, api.WorkflowCompleted)
	if info.State["then"] != true || info.State["child"] != true {
		t.Fatalf("WF-3, WF-8: state %s", wfState(info.State))
	}
	enq := wfSteps(b.records(), id)
	if len(enq) != 1+api.ParallelBranchesMax {
		t.Fatalf("WF-4: %d step jobs, want %d", len(enq), 1+api.ParallelBranchesMax)
	}
	longest, last := 0, false
	want := wfName + "/" + fan + "#" + strconv.Itoa(api.ParallelBranchesMax-1)
	for _, e := range enq {
		longest = max(longest, len(e.Handler))
		last = last || e.Handler == want
	}
	if !last || longest != len(want) || longest != 2*api.NameBytesMax+len("/#1023") {
		t.Fatalf("WF-2: longest step handler name %d bytes, want %d; last branch's found: %v", longest, len(want), last)
	}
	inAlive(b, "a workflow with every name at its limit")
	b.checkReplay()
}

// WF-14, RL-11: an idempotency key's terminal-index id, "idem:" + key, is
// a valid id at IdempotencyKeyBytesMax: the key is written, found again
// after its workflow completed and after a restart. One byte more is
// refused by Dispatch with an *OptionError, appending nothing.
func TestWF14_RL11_IdempotencyKeyFitsItsIndexID(t *testing.T) {
	if n := len(replay.IdempotencyPrefix) + api.IdempotencyKeyBytesMax; n != record.StreamIDBytesMax {
		t.Fatalf("RL-11: the index id of the longest key is %d bytes, want %d", n, record.StreamIDBytesMax)
	}
	b := setup(t, nil)
	register := func(e *api.Engine) { wfRegister(t, e, api.NewWorkflow("w").Then("a", wfReturn(nil))) }
	register(b.eng)
	for _, n := range []int{api.IdempotencyKeyBytesMax + 1, 200, 201, 2 << 20} {
		wfNoAppend(b, fmt.Sprintf("a %d-byte key", n), func() {
			_, err := b.eng.Dispatch(b.ctx, "w", api.State{}, api.IdempotencyKey(strings.Repeat("k", n)))
			var oe *api.OptionError
			if !errors.As(err, &oe) || oe.Field != "IdempotencyKey" || !errors.Is(err, api.ErrInvalidOption) ||
				!strings.Contains(oe.Reason, "limit 122") {
				t.Fatalf("WF-14: a %d-byte key: %.200v", n, err)
			}
		})
	}
	key := strings.Repeat("k", api.IdempotencyKeyBytesMax)
	id := wfDispatch(b, "w", api.State{}, api.IdempotencyKey(key))
	b.start()
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	check := func(when string) {
		t.Helper()
		wfNoAppend(b, "re-dispatch "+when, func() {
			if again := wfDispatch(b, "w", api.State{}, api.IdempotencyKey(key)); again != id {
				t.Fatalf("WF-14 %s: re-dispatch returned %s, want %s", when, again, id)
			}
		})
	}
	check("after completion")
	b.reopen(register)
	check("after a restart")
	inAlive(b, "a key at IdempotencyKeyBytesMax")
	b.checkReplay()
}

// WF-6, RL-11: a wait on SignalNamesMax names of NameBytesMax bytes is one
// workflow_waiting that fits RecordBytesMin, for WaitForSignal (all) and
// WaitForAnySignal.
func TestWF6_RL11_SignalWaitAtSignalNamesMaxFitsRecordBytesMin(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMin })
	names := inNames(api.SignalNamesMax)
	wfRegister(t, b.eng, api.NewWorkflow("all").WaitForSignal(names...))
	wfRegister(t, b.eng, api.NewWorkflow("any").WaitForAnySignal(names...))
	b.start()
	all, any := wfDispatch(b, "all", api.State{}), wfDispatch(b, "any", api.State{})
	b.idle()
	for _, id := range []string{all, any} {
		if info := wfWant(b, id, api.WorkflowWaitingSignal); len(info.WaitingFor) != api.SignalNamesMax {
			t.Fatalf("WF-6: %s waits for %d names", info.Name, len(info.WaitingFor))
		}
	}
	if err := b.eng.Signal(b.ctx, any, names[len(names)-1], api.State{"any": true}); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		if err := b.eng.Signal(b.ctx, all, n, api.State{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	b.idle()
	wfWant(b, any, api.WorkflowCompleted)
	wfWant(b, all, api.WorkflowCompleted)
	inAlive(b, "waits on SignalNamesMax names")
	b.checkReplay()
}

// WF-7, RL-11: a wait on WaitWorkflowsMax ids of 127 bytes is one
// workflow_waiting that fits RecordBytesMin. Under Any, one live
// dependency keeps the wait open (the others are unknown) and its
// completion completes the step.
func TestWF7_RL11_WorkflowsWaitAtWaitWorkflowsMaxFitsRecordBytesMin(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMin })
	wfRegister(t, b.eng, api.NewWorkflow("dep").WaitForSignal("go"))
	b.start()
	dep := wfDispatch(b, "dep", api.State{})
	ids := append([]string{dep}, inIDs(api.WaitWorkflowsMax-1)...)
	wfRegister(t, b.eng, api.NewWorkflow("w").WaitForWorkflows(api.Any(), ids...))
	id := wfDispatch(b, "w", api.State{})
	b.idle()
	if info := wfWant(b, id, api.WorkflowWaitingWorkflows); len(info.WaitingFor) != api.WaitWorkflowsMax {
		t.Fatalf("WF-7: waits for %d workflows", len(info.WaitingFor))
	}
	if err := b.eng.Signal(b.ctx, dep, "go", api.State{"dep": true}); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, dep, api.WorkflowCompleted)
	wfWant(b, id, api.WorkflowCompleted)
	inAlive(b, "a wait on WaitWorkflowsMax ids")
	b.checkReplay()
}

// WF-4, RL-4: a Parallel step at ParallelBranchesMax fits every atomic
// append it takes part in: its entry at dispatch, its entry after a step
// that settled with FollowUpsMax follow-ups, and the expiry that buries
// every branch (WD-8).
func TestWF4_RL4_ParallelAtParallelBranchesMaxFitsItsAppends(t *testing.T) {
	t.Run("dispatch", func(t *testing.T) {
		b := setup(t, nil)
		wfRegister(t, b.eng, api.NewWorkflow("p").Parallel("fan", inBranches(api.ParallelBranchesMax)...))
		b.start()
		id := wfDispatch(b, "p", api.State{})
		b.idle()
		wfWant(b, id, api.WorkflowCompleted)
		if n := len(wfSteps(b.records(), id)); n != api.ParallelBranchesMax {
			t.Fatalf("WF-4: %d branch jobs", n)
		}
		inAlive(b, "a Parallel step at ParallelBranchesMax")
		b.checkReplay()
	})
	t.Run("after_follow_ups", func(t *testing.T) {
		b := setup(t, nil)
		if err := api.Handle(b.eng, "fu", func(context.Context, *api.Delivery, msg) error { return nil }, api.OnQueue("held")); err != nil {
			t.Fatal(err)
		}
		if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
			t.Fatal(err)
		}
		first := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			for i := 0; i < api.FollowUpsMax; i++ {
				if err := d.Enqueue("fu", msg{}); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
		wfRegister(t, b.eng, api.NewWorkflow("p").Then("first", first).Parallel("fan", inBranches(api.ParallelBranchesMax)...))
		b.start()
		id := wfDispatch(b, "p", api.State{})
		b.idle()
		wfWant(b, id, api.WorkflowCompleted)
		if n := countKind(b.records(), record.KindJobEnqueued); n != 1+api.FollowUpsMax+api.ParallelBranchesMax {
			t.Fatalf("RL-4: %d job_enqueued", n)
		}
		inAlive(b, "FollowUpsMax follow-ups then a Parallel step at ParallelBranchesMax")
		b.checkReplay()
	})
	t.Run("expiry", func(t *testing.T) {
		b := setup(t, nil)
		wfRegister(t, b.eng, api.NewWorkflow("p").Parallel("fan", inBranches(api.ParallelBranchesMax)...).
			OnQueue("held").MustCompleteWithin(time.Second))
		if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
			t.Fatal(err)
		}
		b.start()
		id := wfDispatch(b, "p", api.State{})
		b.idle()
		b.advance(time.Minute)
		if info := wfWant(b, id, api.WorkflowFailed); info.Error != api.MessageDeadlineExceeded {
			t.Fatalf("WD-8: error %q", info.Error)
		}
		if n := wfCount(b.records(), id, record.KindJobBuried); n != api.ParallelBranchesMax {
			t.Fatalf("WD-8: %d branch jobs buried, want %d", n, api.ParallelBranchesMax)
		}
		inAlive(b, "the expiry of a Parallel step at ParallelBranchesMax")
		b.checkReplay()
	})
}

// WF-8, WF-13: Register refuses a workflow whose chain of first-step
// sub-workflows, itself included, is longer than SubWorkflowChainMax:
// Dispatch appends the chain's workflow_started records, each with the
// state, in one append. A chain at the limit dispatches the largest state
// under the default options, where a group holds just four records; a
// sub-workflow past the first step is not part of the dispatch.
func TestWF8_WF13_SubWorkflowChainIsBoundedAtRegister(t *testing.T) {
	b := setup(t, nil)
	ok := wfReturn(nil)
	wfRegister(t, b.eng, api.NewWorkflow("c0").Then("a", wfReturn(api.State{"leaf": true})))
	last := "c0"
	for i := 1; i < api.SubWorkflowChainMax; i++ {
		name := fmt.Sprintf("c%d", i)
		wfRegister(t, b.eng, api.NewWorkflow(name).SubWorkflow("s", last))
		last = name
	}
	wfNoAppend(b, "refused chains", func() {
		for _, w := range []*api.Workflow{
			api.NewWorkflow("over").SubWorkflow("s", last),
			api.NewWorkflow("over").SubWorkflow("", last).Then("b", ok),
		} {
			err := b.eng.Register(w)
			var we *api.WorkflowError
			if !errors.As(err, &we) || !errors.Is(err, api.ErrInvalidOption) || we.Workflow != "over" ||
				we.Option != "SubWorkflow" || (we.Step != "s" && we.Step != "0") ||
				!strings.Contains(err.Error(), fmt.Sprintf("chain of %d", api.SubWorkflowChainMax+1)) ||
				!strings.Contains(err.Error(), "SubWorkflowChainMax") {
				t.Fatalf("WF-13: a chain of %d: %v", api.SubWorkflowChainMax+1, err)
			}
		}
	})
	if _, err := b.eng.Dispatch(b.ctx, "over", api.State{}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("WF-2: dispatch of the refused definition: %v", err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("later").Then("a", ok).SubWorkflow("s", last))

	st := api.State{"blob": strings.Repeat("x", api.PayloadBytesMaxDefault-64)}
	b.start()
	root := wfDispatch(b, last, st)
	if n := countKind(b.records(), record.KindWorkflowStarted); n != api.SubWorkflowChainMax {
		t.Fatalf("WF-13: dispatch appended %d workflow_started, want %d", n, api.SubWorkflowChainMax)
	}
	later := wfDispatch(b, "later", st)
	b.idle()
	for _, id := range []string{root, later} {
		if info := wfWant(b, id, api.WorkflowCompleted); info.State["leaf"] != true || info.State["blob"] != st["blob"] {
			t.Fatalf("WF-8: %s ends with keys %d, leaf %v", info.Name, len(info.State), info.State["leaf"])
		}
	}
	inAlive(b, "a sub-workflow chain at SubWorkflowChainMax with the largest state")
	b.checkReplay()
}

// RL-11: RecordBytesMax is at least RecordBytesMin (64 KiB), and every
// settlement fits at it: a failure with its message and stack at their
// clips under MiddlewareMax middleware with names at their clip, and a
// step's output of PayloadBytesMax (half a record) under the same audit.
func TestRL11_RecordBytesMinFitsTheLargestSettlement(t *testing.T) {
	open := func(rec, payload int) error {
		eng, err := api.Open(context.Background(), api.Options{
			Dir: "db", FS: vfs.NewMem(), Clock: clocktest.New(t0), RecordBytesMax: rec, PayloadBytesMax: payload,
		})
		if err == nil {
			eng.Close(context.Background())
		}
		return err
	}
	var oe *api.OptionError
	if err := open(api.RecordBytesMin-1, 0); !errors.As(err, &oe) || oe.Field != "Options.RecordBytesMax" {
		t.Fatalf("RL-11: RecordBytesMax %d: %v", api.RecordBytesMin-1, err)
	}
	if err := open(api.RecordBytesMin, api.RecordBytesMin/2+1); !errors.As(err, &oe) || oe.Field != "Options.PayloadBytesMax" {
		t.Fatalf("RL-11: PayloadBytesMax over RecordBytesMin/2: %v", err)
	}
	for _, payload := range []int{0, api.PayloadBytesMin, api.RecordBytesMin / 2} {
		if err := open(api.RecordBytesMin, payload); err != nil {
			t.Fatalf("RL-11: RecordBytesMin with PayloadBytesMax %d: %v", payload, err)
		}
	}

	var mw []api.Middleware
	for i := 0; i < api.MiddlewareMax; i++ {
		mw = append(mw, api.MiddlewareFuncs{Label: fmt.Sprintf("a-middleware-name-longer-than-its-clip-%04d", i)})
	}
	b := setup(t, func(o *api.Options) {
		o.RecordBytesMax = api.RecordBytesMin
		o.Middleware = mw
	})
	long := strings.Repeat("é", 5000)
	if err := api.Handle(b.eng, "fails", func(context.Context, *api.Delivery, msg) error {
		return errors.New(long)
	}, api.MaxAttempts(2)); err != nil { // retried after the default 1 s
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "panics", func(context.Context, *api.Delivery, msg) error { panic(long) }, api.MaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	payload := api.RecordBytesMin / 2
	out := api.State{"out": strings.Repeat("o", payload-64)}
	wfRegister(t, b.eng, api.NewWorkflow("w").Then("big", wfReturn(out)))
	fails, panics := b.enqueue("fails", msg{}), b.enqueue("panics", msg{})
	b.start()
	wf := wfDispatch(b, "w", api.State{})
	b.idle()
	b.advance(time.Second)
	b.wantStatus(fails, api.JobBuried)
	b.wantStatus(panics, api.JobBuried)
	for _, id := range []string{fails, panics} {
		_, o := b.lastSettlement(id)
		if len(o.Middleware) != api.MiddlewareMax || len(o.Error) == 0 || len(o.Error) > 1<<10 || len(o.Stack) > 2<<10 {
			t.Fatalf("DL-38: %s settled with %d middleware, %d bytes of error, %d of stack", id, len(o.Middleware), len(o.Error), len(o.Stack))
		}
	}
	if info := wfWant(b, wf, api.WorkflowCompleted); info.State["out"] != out["out"] {
		t.Fatalf("WF-3: output of %d bytes lost", payload-64)
	}
	inAlive(b, "settlements at their largest with RecordBytesMax at RecordBytesMin")
	b.checkReplay()
}
