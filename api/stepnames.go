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
