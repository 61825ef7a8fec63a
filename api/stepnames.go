package api

import (
	"fmt"
	"strconv"
)

// A step's jobs run under a handler name made of its workflow's and its
// own name (stepHandlerName), which every job_enqueued of the step
// records: the scheme is part of the journal and never changes. Names
// made that way can clash, so Register refuses a definition that would
// give one name to two of its steps, or take one already held: two steps
// under one name would run one step's function for both (WF-2).

// stepRef names what a step handler runs, for the errors that name it: a
// step, or one branch of a Parallel step of two or more branches. option is
// the builder method that added the step.
type stepRef struct {
	workflow, step, option string
	branch, branches       int
}

// String names the step, or the branch, within its workflow.
func (r stepRef) String() string {
	if r.branches > 1 {
		return fmt.Sprintf("branch %d of Parallel step %q", r.branch, r.step)
	}
	return "step " + strconv.Quote(r.step)
}

// long names the step, or the branch, and its workflow.
func (r stepRef) long() string { return r.String() + " of workflow " + strconv.Quote(r.workflow) }

// checkStepHandlerNames refuses a definition two of whose steps would run
// under one handler name, such as a Then step "b#0" after a Parallel step
// "b" of two branches, naming both steps (WF-2). Step names may hold "#":
// a definition registered before this check whose names do not clash
// still registers, so the workflows its journal holds still run.
func checkStepHandlerNames(w *Workflow) error {
	seen := make(map[string]stepRef)
	for _, s := range w.steps {
		for i := range s.fns {
			ref := stepRef{workflow: w.name, step: s.name, option: s.option, branch: i, branches: len(s.fns)}
			name := stepHandlerName(w.name, s.name, i, len(s.fns))
			if first, dup := seen[name]; dup {
				return &WorkflowError{Workflow: w.name, Step: s.name, Option: s.option,
					Reason: fmt.Sprintf("%s and %s would both run as handler %q: a step runs as workflow/step, "+
						"and branch i of a Parallel step as workflow/step#i, so rename one of the two steps", first, ref, name)}
			}
			seen[name] = ref
		}
	}
	return nil
}

// stepNameTaken refuses step handler h, whose name held already holds: a
// job handler or another workflow's step. The error names h's step and
// the holder, and matches [ErrDuplicate] through the [*NameError] it
// wraps, as the bare NameError Register returned before did.
func stepNameTaken(h, held *handlerEntry) error {
	holder, todo := "a job handler registered with Handle", "rename the step or the workflow, or give the job handler another name"
	if held.ref != nil {
		holder, todo = held.ref.long(), "rename the step or the workflow"
	}
	return &WorkflowError{Workflow: h.ref.workflow, Step: h.ref.step, Option: h.ref.option,
		Reason: fmt.Sprintf("%s would run as handler %q, which %s already holds: %s", h.ref, h.name, holder, todo),
		Err:    &NameError{Kind: "handler", Name: h.name, Err: ErrDuplicate}}
}

// unknownHandlerError refuses an enqueue for handler, registered as h (nil
// if not at all). It matches [ErrUnknownHandler] whichever it is; for a
// step's handler it says which step, since the name is registered.
func unknownHandlerError(handler string, h *handlerEntry) error {
	if h == nil || h.ref == nil {
		return &NameError{Kind: "handler", Name: handler, Err: ErrUnknownHandler}
	}
	return &NameError{Kind: "handler", Name: handler, Err: stepNameReason{
		text: "not a job handler: it runs " + h.ref.long() + ", whose jobs the engine enqueues; start the workflow with Engine.Dispatch",
		is:   ErrUnknownHandler}}
}

// stepNameReason is why a call naming a step's handler is refused: text
// says which step holds the name, and is the sentinel the refusal matches.
// It reads as the reason alone, since the [NameError] that carries it names
// the handler.
type stepNameReason struct {
	text string
	is   error
}

func (e stepNameReason) Error() string        { return e.text }
func (e stepNameReason) Is(target error) bool { return target == e.is }
