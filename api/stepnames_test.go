package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
)

// Step handler names (WF-2). A step's jobs are journaled under the handler
// name "workflow/step", and a branch i of a Parallel step of two or more
// branches under "workflow/step#i". Those names are in every job_enqueued
// of a step, so they never change; instead Register refuses every
// definition that would give two steps, or a step and a job handler, one
// name, and registers nothing of it.

// stepNamesWant checks that err is a *WorkflowError for workflow and step
// whose message holds every string of texts, and returns it.
func stepNamesWant(t *testing.T, err error, workflow, step string, texts ...string) *api.WorkflowError {
	t.Helper()
	var we *api.WorkflowError
	if !errors.As(err, &we) || !errors.Is(err, api.ErrInvalidOption) {
		t.Fatalf("got %v, want a *WorkflowError matching ErrInvalidOption", err)
	}
	if we.Workflow != workflow || we.Step != step {
		t.Fatalf("error names workflow %q step %q, want %q %q (%v)", we.Workflow, we.Step, workflow, step, err)
	}
	for _, s := range texts {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("message %q lacks %s", err, s)
		}
	}
	return we
}

// WF-2: two steps of one definition whose handler names are equal, in
// either order, by their given names, an index name or Named. Until
// Register refused them, Parallel("b", f0, f1).Then("b#0", f2) registered,
// and at run time branch 0 never ran and f2 ran twice.
func TestWF2_StepsSharingAHandlerNameAreRefused(t *testing.T) {
	b := setup(t, nil)
	f := wfReturn(nil)
	cases := []struct {
		name string
		w    *api.Workflow
		step string
		// texts must all be in the message: both steps, the shared
		// handler name and what to do.
		texts []string
	}{
		{"Then after Parallel", api.NewWorkflow("p").Parallel("b", f, f).Then("b#0", f),
			"b#0", []string{`"p/b#0"`, `branch 0 of Parallel step "b"`, `step "b#0"`, "rename"}},
		{"Parallel after Then", api.NewWorkflow("p").Then("b#0", f).Parallel("b", f, f),
			"b", []string{`"p/b#0"`, `branch 0 of Parallel step "b"`, `step "b#0"`, "rename"}},
		{"Then after an unnamed Parallel", api.NewWorkflow("p").Parallel("", f, f).Then("0#1", f),
			"0#1", []string{`"p/0#1"`, `branch 1 of Parallel step "0"`, `step "0#1"`, "rename"}},
		{"Parallel after a Parallel", api.NewWorkflow("p").Parallel("b", f, f).Parallel("b#1", f),
			"b#1", []string{`"p/b#1"`, `branch 1 of Parallel step "b"`, `step "b#1"`, "rename"}},
		{"renamed by Named", api.NewWorkflow("p").Parallel("b", f, f).Then("x", f).Named("b#1"),
			"b#1", []string{`"p/b#1"`, `branch 1 of Parallel step "b"`, `step "b#1"`, "rename"}},
	}
	for _, c := range cases {
		wfNoAppend(b, c.name, func() {
			err := b.eng.Register(c.w)
			stepNamesWant(t, err, "p", c.step, c.texts...)
			if errors.Is(err, api.ErrDuplicate) {
				t.Fatalf("%s: %v matches ErrDuplicate: a definition clashing with itself registers nothing twice", c.name, err)
			}
		})
		// Nothing of the refused definition was registered: its name and
		// its step handler names are still free.
		if _, err := b.eng.Dispatch(b.ctx, "p", api.State{}); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("%s: dispatch of the refused definition: %v", c.name, err)
		}
	}
	wfRegister(t, b.eng, api.NewWorkflow("p").Parallel("b", f, f).Then("b#2", f))
	b.checkReplay()
}

// WF-2: a step handler name already held by another workflow's step, in
// either order of registration, and for a Parallel branch. Both used to
// map to one name and the second Register failed with a bare "handler
// already registered" that named neither step.
func TestWF2_StepHandlerNameHeldByAnotherWorkflowIsRefused(t *testing.T) {
	f := wfReturn(nil)
	cases := []struct {
		name          string
		first, second *api.Workflow
		workflow      string // the refused definition's
		step          string
		texts         []string
		valid         *api.Workflow // under the refused name, registers
	}{
		{"a/b then a", api.NewWorkflow("a/b").Then("c", f), api.NewWorkflow("a").Then("b/c", f),
			"a", "b/c", []string{`"a/b/c"`, `step "c" of workflow "a/b"`, "rename"}, api.NewWorkflow("a").Then("d", f)},
		{"a then a/b", api.NewWorkflow("a").Then("b/c", f), api.NewWorkflow("a/b").Then("c", f),
			"a/b", "c", []string{`"a/b/c"`, `step "b/c" of workflow "a"`, "rename"}, api.NewWorkflow("a/b").Then("d", f)},
		{"a Parallel branch", api.NewWorkflow("x/y").Parallel("s", f, f), api.NewWorkflow("x").Then("y/s#1", f),
			"x", "y/s#1", []string{`"x/y/s#1"`, `branch 1 of Parallel step "s" of workflow "x/y"`, "rename"}, api.NewWorkflow("x").Then("y/s#2", f)},
		{"taking a Parallel branch's", api.NewWorkflow("x").Then("y/s#1", f), api.NewWorkflow("x/y").Then("a", f).Parallel("s", f, f),
			"x/y", "s", []string{`"x/y/s#1"`, `step "y/s#1" of workflow "x"`, "rename"}, api.NewWorkflow("x/y").Then("a", f).Parallel("t", f, f)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			wfRegister(t, b.eng, c.first)
			wfNoAppend(b, "refused registration", func() {
				err := b.eng.Register(c.second)
				stepNamesWant(t, err, c.workflow, c.step, c.texts...)
				var ne *api.NameError
				if !errors.Is(err, api.ErrDuplicate) || !errors.As(err, &ne) || ne.Kind != "handler" {
					t.Fatalf("%v: want it to match ErrDuplicate through a handler *NameError", err)
				}
			})
			if _, err := b.eng.Dispatch(b.ctx, c.workflow, api.State{}); !errors.Is(err, api.ErrNotFound) {
				t.Fatalf("dispatch of the refused definition: %v", err)
			}
			wfRegister(t, b.eng, c.valid)
			b.checkReplay()
		})
	}
}

// WF-2, JB-1: job handlers and step handlers share one namespace. A job
// handler holding a step's handler name refuses the workflow, naming the
// step and the job handler; the job handler keeps working.
func TestWF2_StepHandlerNameHeldByAJobHandlerIsRefused(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "billing/charge", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	wfNoAppend(b, "refused registration", func() {
		err := b.eng.Register(api.NewWorkflow("billing").Then("charge", wfReturn(nil)))
		stepNamesWant(t, err, "billing", "charge", `"billing/charge"`, "job handler", "rename")
		var ne *api.NameError
		if !errors.Is(err, api.ErrDuplicate) || !errors.As(err, &ne) || ne.Name != "billing/charge" {
			t.Fatalf("%v: want it to match ErrDuplicate through a *NameError naming the handler", err)
		}
	})
	if _, err := b.eng.Dispatch(b.ctx, "billing", api.State{}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("dispatch of the refused definition: %v", err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("billing").Then("pay", wfReturn(nil)))
	b.start()
	id := b.enqueue("billing/charge", msg{N: 7})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	if got := strings.Join(rec.get(), ","); got != "7" {
		t.Fatalf("the job handler ran %q, want 7", got)
	}
	b.checkReplay()
}

// WF-2, JB-1: a workflow step's handler name is neither registrable with
// Handle nor enqueueable, from outside or as a follow-up job, and the
// errors say which step holds it; they still match the sentinels callers
// branch on. The step keeps running its own function.
func TestWF2_JB1_HandleAndEnqueueOfAStepHandlerNameSayWhichStep(t *testing.T) {
	b := setup(t, nil)
	var steps recorder
	wfRegister(t, b.eng, api.NewWorkflow("quick").Then("a", wfSeen(&steps, "a", nil)))
	var ne *api.NameError
	wfNoAppend(b, "refused Handle and Enqueue", func() {
		err := api.Handle(b.eng, "quick/a", okHandler(nil))
		if !errors.Is(err, api.ErrDuplicate) || !errors.As(err, &ne) || ne.Kind != "handler" || ne.Name != "quick/a" {
			t.Fatalf("Handle of a step's handler name: %v, want a handler *NameError matching ErrDuplicate", err)
		}
		for _, s := range []string{`step "a" of workflow "quick"`, "another name"} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("Handle: message %q lacks %s", err, s)
			}
		}
		_, err = b.eng.Enqueue(b.ctx, "quick/a", msg{})
		stepNamesEnqueueWant(t, err)
	})
	// A follow-up job is refused alike, before its attempt settles.
	follow := make(chan error, 1)
	if err := api.Handle(b.eng, "fan", func(ctx context.Context, d *api.Delivery, in msg) error {
		follow <- d.Enqueue("quick/a", msg{})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.enqueue("fan", msg{})
	b.idle()
	stepNamesEnqueueWant(t, <-follow)

	id := wfDispatch(b, "quick", api.State{})
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(steps.get(), ","); got != "a map[]" {
		t.Fatalf("step a ran %q, want once", got)
	}
	b.checkReplay()
}

// stepNamesEnqueueWant checks the refusal of an enqueue for step "a" of
// workflow "quick"'s handler.
func stepNamesEnqueueWant(t *testing.T, err error) {
	t.Helper()
	var ne *api.NameError
	if !errors.Is(err, api.ErrUnknownHandler) || !errors.As(err, &ne) || ne.Kind != "handler" || ne.Name != "quick/a" {
		t.Fatalf("enqueue of a step's handler name: %v, want a handler *NameError matching ErrUnknownHandler", err)
	}
	for _, s := range []string{`step "a" of workflow "quick"`, "Dispatch"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("enqueue: message %q lacks %s", err, s)
		}
	}
}

// WF-2, WF-4: steps whose names differ run as handlers whose names differ,
// "#" in a name included, so every step function runs exactly once: the
// three-step definition below has its four jobs enqueued under four names.
func TestWF2_WF4_DistinctStepsRunEachFunctionOnce(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("p").
		Parallel("b", wfSeen(&rec, "f0", api.State{"f0": true}), wfSeen(&rec, "f1", api.State{"f1": true})).
		Then("b#2", wfSeen(&rec, "f2", api.State{"f2": true})).
		Then("b#0#0", wfSeen(&rec, "f3", api.State{"f3": true})))
	b.start()
	id := wfDispatch(b, "p", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[f0:true f1:true f2:true f3:true]" {
		t.Fatalf("state %s, want every step's output", got)
	}
	count := map[string]int{}
	for _, s := range rec.get() {
		count[strings.Fields(s)[0]]++
	}
	for _, fn := range []string{"f0", "f1", "f2", "f3"} {
		if count[fn] != 1 {
			t.Fatalf("%s ran %d times, want once (ran %v)", fn, count[fn], rec.get())
		}
	}
	var handlers []string
	for _, e := range wfSteps(b.records(), id) {
		handlers = append(handlers, e.Handler)
	}
	if got := strings.Join(handlers, ","); got != "p/b#0,p/b#1,p/b#2,p/b#0#0" {
		t.Fatalf("step jobs enqueued for %s", got)
	}
	b.checkReplay()
}
