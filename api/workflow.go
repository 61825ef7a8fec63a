package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/internal/invariant"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
)

// State is a workflow's state: string keys to msgpack-encodable values.
// Keys starting with "_" are private: given at Dispatch they are stored,
// never shown or passed on; in a step's output or a signal's payload they
// are dropped before anything is journaled (WF-3, WF-12).
//
// A step, a deadline handler and [Engine.Workflow] read the state back
// as msgpack decodes it into any: an integer comes back as the smallest
// Go integer type its encoding used, signed or not (a 3 stored from an int
// reads as int8, 200 as uint8, 70000 as uint32), a float as float32 or
// float64, a nested map as map[string]any, a list as []any, a time as
// time.Time. Read integers with [State.Int], other numbers with a type
// switch or a conversion, not s["n"].(int).
type State map[string]any

// Int returns the integer stored under key, whatever integer type it
// decoded as, and false if key is absent, holds no integer, or holds an
// unsigned one above [math.MaxInt64].
func (s State) Int(key string) (int64, bool) {
	switch v := s[key].(type) {
	case int:
		return int64(v), true
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint:
		if uint64(v) <= math.MaxInt64 {
			return int64(v), true
		}
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true
		}
	}
	return 0, false
}

// StepFunc is the handler of a Then or Parallel step: it receives a copy of
// the workflow's public state and returns the keys to merge into it (WF-3),
// or an error (a [Permanent] one fails the step at once, others are
// retried). Output keys starting with "_" are dropped before anything is
// journaled.
type StepFunc func(ctx context.Context, d *Delivery, state State) (State, error)

// DeadlineFunc is an on-deadline handler (WD-10): it receives the public
// state as of the expiry. Its error or panic is recorded and swallowed.
// It may run more than once across crashes, so it should be idempotent.
type DeadlineFunc func(ctx context.Context, state State) error

// WaitMode says when a WaitForWorkflows step completes (WF-7).
type WaitMode struct {
	mode   string
	quorum int
}

// All completes when every workflow completed; it fails as soon as one
// failed or was cancelled. It is the default.
func All() WaitMode { return WaitMode{mode: scheduler.ModeAll} }

// Any completes on the first completion and fails only when all ended and
// none completed.
func Any() WaitMode { return WaitMode{mode: scheduler.ModeAny} }

// Quorum completes at n completions and fails once n is out of reach;
// 1 <= n <= the number of workflows.
func Quorum(n int) WaitMode { return WaitMode{mode: scheduler.ModeQuorum, quorum: n} }

// Bounds of a workflow definition. The builder and [Engine.Register]
// refuse a definition past them, so that every record and every atomic
// append the definition leads to fits the journal's caps even at
// [RecordBytesMin]: a record or an append the journal refuses would stop
// the engine for good (RL-2, RL-4, RL-11). An atomic append larger than a
// group commit goes alone in a group of its own; the journal caps one at
// 65536 records and at 256 MiB or 16 × RecordBytesMax, whichever is more.
const (
	// SignalNamesMax bounds the signal names of one WaitForSignal or
	// WaitForAnySignal step. They all go in one workflow_waiting record:
	// 64 names of up to [NameBytesMax] bytes take under 7 KiB.
	SignalNamesMax = 64
	// WaitWorkflowsMax bounds the workflow ids of one WaitForWorkflows
	// step. They all go in one workflow_waiting record: 256 ids of up to
	// 127 bytes take about 33 KiB, half of [RecordBytesMin]. The ids of a
	// WaitForWorkflowsIn step are bounded by the state that holds them
	// (Options.PayloadBytesMax) instead.
	WaitWorkflowsMax = 256
	// ParallelBranchesMax bounds the branches of one Parallel step. A
	// step's branches are enqueued in one atomic append (WF-4), which may
	// follow a settlement with [FollowUpsMax] follow-ups and its
	// step_completed, and an expiry or a failure buries them all in one
	// (WD-8, WF-20): the largest of these appends (1 + 256 + 1 + 1024
	// records) stays far below the journal's cap on one append (RL-4).
	ParallelBranchesMax = 1024
	// SubWorkflowChainMax bounds a workflow's chain of first-step
	// sub-workflows: the workflow, the child its first step starts, that
	// child's own first-step child, and so on. Dispatch appends the
	// workflow_started of every workflow of the chain in one atomic
	// append (WF-13), each with a state of up to Options.PayloadBytesMax,
	// which is at most half of RecordBytesMax: 16 of them take at most
	// half of the journal's cap on one append (RL-4).
	SubWorkflowChainMax = 16
)

// stepHandlerNameBytesMax bounds a step handler's name: a workflow name,
// "/", a step name and, for a Parallel step, "#" and a branch index below
// ParallelBranchesMax (at most "1023"). Handler names go in every
// job_enqueued of the step, never in a stream or index id, so 206 bytes
// fit any record.
const stepHandlerNameBytesMax = 2*NameBytesMax + len("/#1023")

// WorkflowError reports an invalid workflow definition: Workflow names it,
// Step the step (or "" for a workflow option), Option the method. Err, if
// not nil, is the error under the refusal: a step whose handler name is
// already registered has a [*NameError] naming the handler and matching
// [ErrDuplicate]; a name or id that breaks its rule (the workflow's, a
// step's, a signal's, a child's, a queue's, an on-deadline handler's, a
// waited-for workflow's id) has one matching [ErrInvalidName].
type WorkflowError struct {
	Workflow string
	Step     string
	Option   string
	Reason   string
	Err      error
}

// Error names the workflow, the step and the option, then the reason.
func (e *WorkflowError) Error() string {
	where := "workflow " + strconv.Quote(e.Workflow)
	if e.Step != "" {
		where += " step " + strconv.Quote(e.Step)
	}
	if e.Option != "" {
		where += " " + e.Option
	}
	return "quire: " + where + ": " + e.Reason
}

// Is makes every WorkflowError match [ErrInvalidOption].
func (e *WorkflowError) Is(target error) bool { return target == ErrInvalidOption }

// Unwrap returns Err.
func (e *WorkflowError) Unwrap() error { return e.Err }

type stepSpec struct {
	kind      scheduler.StepKind
	name      string
	fns       []StepFunc
	delay     time.Duration
	signals   []string
	mode      string
	quorum    int
	ids       []string
	fromKey   string
	resultKey string
	sub       string
	opts      []JobOption
	// option is the builder method that added the step, for the errors
	// Register reports about it.
	option string
}

// Workflow is a workflow definition under construction (WF-2). Build it
// with [NewWorkflow] and its methods, then [Engine.Register] it. The first
// invalid call is remembered and returned by Register, naming the step or
// option.
type Workflow struct {
	name        string
	steps       []stepSpec
	queue       *string
	priority    *Priority
	maxAttempts *int
	deadline    time.Duration
	onDeadline  string
	middleware  []Middleware
	guards      []Guard
	err         error
}

// NewWorkflow starts the definition of a workflow registered under name.
//
// A [Workflow.Then] step runs its function as a job of the handler named
// name + "/" + the step's name, and branch i of a [Workflow.Parallel] step
// of two or more branches as name + "/" + step + "#" + i: "import/fetch",
// "import/fan#0". The journal records these names, so they never change,
// and they share one namespace with the job handlers of [Handle].
// [Engine.Register] therefore refuses, with a [*WorkflowError] naming the
// steps, a definition that would give two of its steps one name (a step
// "fan#0" besides a Parallel step "fan") or a name already held by a job
// handler or by another workflow's step (workflow "a/b" with step "c" and
// workflow "a" with step "b/c" both make "a/b/c"); the latter also
// matches [ErrDuplicate]. A step name may hold "#" and "/" as long as its
// handler names clash with none. A step's handler name cannot be
// registered with Handle nor enqueued: the engine enqueues a step's jobs,
// and [Engine.Dispatch] starts the workflow.
func NewWorkflow(name string) *Workflow {
	w := &Workflow{name: name}
	if err := validateName(name); err != nil {
		w.failName("", "NewWorkflow", err.Error(), err)
	}
	return w
}

func (w *Workflow) fail(step, option, reason string) { w.failName(step, option, reason, nil) }

// failName is fail for a name or id that breaks its rule: the error also
// matches [ErrInvalidName] through err, as every other refused name does.
func (w *Workflow) failName(step, option, reason string, err error) {
	if w.err == nil {
		w.err = &WorkflowError{Workflow: w.name, Step: step, Option: option, Reason: reason, Err: err}
	}
}

func (w *Workflow) add(s stepSpec, option string) *Workflow {
	if s.name == "" {
		s.name = strconv.Itoa(len(w.steps))
	}
	s.option = option
	// A step name is part of its step handlers' names, which every
	// job_enqueued of the step records.
	if err := validateName(s.name); err != nil {
		w.failName(s.name, option, "step name "+err.Error(), err)
	}
	for _, o := range w.steps {
		if o.name == s.name {
			w.fail(s.name, option, "duplicate step name")
		}
	}
	w.steps = append(w.steps, s)
	return w
}

// Then adds a step that runs fn as a job (WF-3) of the handler named
// workflow/name (see [NewWorkflow]). An empty name names the step by its
// index; a name is at most [NameBytesMax] bytes, unique in the workflow,
// and must not give the step the handler name of another step, such as
// "fan#0" besides a Parallel step "fan". opts set the
// step's job options (WF-22): [OnQueue], [WithPriority], [MaxAttempts],
// [Backoff] and [DeliveryTimeout]. Register refuses [Delay] and [Unique]
// there (use a [Workflow.Delay] step), and middleware and guards (use
// [Workflow.WithMiddleware] and [Workflow.WithGuards]).
func (w *Workflow) Then(name string, fn StepFunc, opts ...JobOption) *Workflow {
	if fn == nil {
		w.fail(name, "Then", "step func is nil")
	}
	return w.add(stepSpec{kind: scheduler.StepThen, name: name, fns: []StepFunc{fn}, opts: opts}, "Then")
}

// Parallel adds a step that runs every fn as its own job at once; it
// completes when all succeeded, their outputs merged in the journal order
// of their successes (WF-4). It takes 1 to [ParallelBranchesMax] branches;
// the name is as for [Workflow.Then]. Branch i runs as the handler named
// workflow/name#i (a single branch as workflow/name, like a Then step), so
// no other step of the workflow may be named name#i (see [NewWorkflow]).
func (w *Workflow) Parallel(name string, fns ...StepFunc) *Workflow {
	if len(fns) == 0 {
		w.fail(name, "Parallel", "needs at least one branch")
	}
	if len(fns) > ParallelBranchesMax {
		w.fail(name, "Parallel", fmt.Sprintf("has %d branches, limit %d (ParallelBranchesMax)", len(fns), ParallelBranchesMax))
	}
	for i, fn := range fns {
		if fn == nil {
			w.fail(name, "Parallel", fmt.Sprintf("branch %d func is nil", i))
		}
	}
	return w.add(stepSpec{kind: scheduler.StepParallel, name: name, fns: fns}, "Parallel")
}

// Delay adds a durable delay of d (WF-5), named delay_0, delay_1, ... by
// its rank among delays. d must be > 0 and at most [DelayMax], 100 years.
// Delays count against the deadline.
func (w *Workflow) Delay(d time.Duration) *Workflow {
	rank := 0
	for _, s := range w.steps {
		if s.kind == scheduler.StepDelay {
			rank++
		}
	}
	name := "delay_" + strconv.Itoa(rank)
	if d <= 0 || d > DelayMax {
		w.fail(name, "Delay", delayReason(d))
	}
	return w.add(stepSpec{kind: scheduler.StepDelay, name: name, delay: d}, "Delay")
}

// delayReason says why d is not a valid Delay step or deadline.
func delayReason(d time.Duration) string {
	return fmt.Sprintf("duration must be > 0 and at most DelayMax (%v, 100 years), got %v", DelayMax, d)
}

// WaitForSignal adds a step that waits for a signal of each name (WF-6):
// all of them, one stored signal each, oldest first. A signal sent before
// the step is reached satisfies it. Payload public keys merge into the
// state, or under the key given to [Workflow.Into]. It takes 1 to
// [SignalNamesMax] names of at most [NameBytesMax] bytes.
func (w *Workflow) WaitForSignal(names ...string) *Workflow {
	return w.waitSignal("WaitForSignal", scheduler.ModeAll, names)
}

// WaitForAnySignal is WaitForSignal satisfied by the first stored signal of
// any of the names, oldest first. The result does not name the signal
// that settled the wait: its public payload merges into the state, or goes
// alone under the [Workflow.Into] key. Senders whose signals must be told
// apart put the decision in the payload.
func (w *Workflow) WaitForAnySignal(names ...string) *Workflow {
	return w.waitSignal("WaitForAnySignal", scheduler.ModeAny, names)
}

func (w *Workflow) waitSignal(option, mode string, names []string) *Workflow {
	name := strconv.Itoa(len(w.steps))
	if len(names) == 0 {
		w.fail(name, option, "needs at least one signal name")
	}
	if len(names) > SignalNamesMax {
		w.fail(name, option, fmt.Sprintf("has %d signal names, limit %d (SignalNamesMax)", len(names), SignalNamesMax))
	}
	for _, n := range names {
		if err := validateName(n); err != nil {
			w.failName(name, option, "signal name "+strconv.Quote(n)+" "+err.Error(), err)
		}
	}
	return w.add(stepSpec{kind: scheduler.StepSignal, name: name, signals: names, mode: mode}, option)
}

// WaitForWorkflows adds a step that waits for the workflows ids (WF-7):
// 1 to [WaitWorkflowsMax] ids, each a workflow id, 1 to 127 bytes. The ids
// are part of the definition (and of its hash); for ids known only when
// the workflow runs, use [Workflow.WaitForWorkflowsIn].
//
// Any number of workflows may wait for one workflow. When it finishes, the
// waits it settles move on in the same atomic append as its own last
// records (WF-11), as long as that append holds under half of the
// journal's cap on one append (65 536 records; 256 MiB, or 16 ×
// Options.RecordBytesMax if more). The waits past that point, which only a
// fan-in of thousands or results of many megabytes reach, move on in
// appends of their own right after; if the engine stops dispatching first
// (a shutdown, a crash), in the next run once the waiting workflows'
// definition is registered.
func (w *Workflow) WaitForWorkflows(mode WaitMode, ids ...string) *Workflow {
	name := strconv.Itoa(len(w.steps))
	if len(ids) == 0 {
		w.fail(name, "WaitForWorkflows", "needs at least one workflow id")
	}
	if len(ids) > WaitWorkflowsMax {
		w.fail(name, "WaitForWorkflows", fmt.Sprintf("has %d workflow ids, limit %d (WaitWorkflowsMax)", len(ids), WaitWorkflowsMax))
	}
	for i, id := range ids {
		// By index: an id past the limit may be too long to quote.
		if err := validateID(id); err != nil {
			w.failName(name, "WaitForWorkflows", fmt.Sprintf("workflow id %d %v", i, err), err)
		}
	}
	w.checkMode(name, mode, len(ids))
	return w.add(stepSpec{kind: scheduler.StepWorkflows, name: name, mode: mode.mode, quorum: mode.quorum, ids: ids}, "WaitForWorkflows")
}

// WaitForWorkflowsIn is WaitForWorkflows with the ids read, on entry, from
// the public state key stateKey: a list of strings, each a workflow id (1
// to 127 bytes), else the workflow fails on entry. The state's own bound
// (Options.PayloadBytesMax) bounds the list.
func (w *Workflow) WaitForWorkflowsIn(mode WaitMode, stateKey string) *Workflow {
	name := strconv.Itoa(len(w.steps))
	if stateKey == "" || !isPublic(stateKey) {
		w.fail(name, "WaitForWorkflowsIn", "state key must be a public key, got "+strconv.Quote(stateKey))
	}
	w.checkMode(name, mode, -1)
	return w.add(stepSpec{kind: scheduler.StepWorkflows, name: name, mode: mode.mode, quorum: mode.quorum, fromKey: stateKey}, "WaitForWorkflowsIn")
}

func (w *Workflow) checkMode(step string, mode WaitMode, n int) {
	switch mode.mode {
	case scheduler.ModeAll, scheduler.ModeAny:
	case scheduler.ModeQuorum:
		if mode.quorum < 1 || (n >= 0 && mode.quorum > n) {
			w.fail(step, "Quorum", fmt.Sprintf("must be 1..%d, got %d", max(n, 1), mode.quorum))
		}
	default:
		w.fail(step, "WaitMode", "use All(), Any() or Quorum(n)")
	}
}

// Into stores the result of the last wait step under key:
//   - WaitForSignal with one name, or WaitForAnySignal: the picked signal's
//     public payload. Without Into its keys merge into the state.
//   - WaitForSignal with several names: a map of signal name to public
//     payload, so each name may appear once. Without Into all the
//     payloads' keys merge into the state, and a name may repeat to wait
//     for as many signals of it.
//   - WaitForWorkflows and WaitForWorkflowsIn: a map of each known id to
//     {"status": ..., "state": its public state}, with ids still running
//     under Any or Quorum included and unknown ids left out. Without Into
//     this result is not stored.
func (w *Workflow) Into(key string) *Workflow {
	if len(w.steps) == 0 {
		w.fail("", "Into", "no step to apply it to")
		return w
	}
	s := &w.steps[len(w.steps)-1]
	if s.kind != scheduler.StepSignal && s.kind != scheduler.StepWorkflows {
		w.fail(s.name, "Into", "applies only to a wait step")
	}
	if key == "" || !isPublic(key) {
		w.fail(s.name, "Into", "result key must be a public key, got "+strconv.Quote(key))
	}
	if s.kind == scheduler.StepSignal && s.mode == scheduler.ModeAll {
		// The result maps each name to its signal's payload: a name
		// waited for twice would keep one of its two payloads (WF-6).
		seen := make(map[string]bool, len(s.signals))
		for _, n := range s.signals {
			if seen[n] {
				w.fail(s.name, "Into", "signal "+strconv.Quote(n)+" is waited for more than once; "+
					"the result maps each name to one payload, so the others would be lost: name each signal once, "+
					"or leave out Into to merge every payload into the state")
				break
			}
			seen[n] = true
		}
	}
	s.resultKey = key
	return w
}

// Named renames the last step. Delays are named delay_0, delay_1, ... and
// waits by their index in the definition ("2" for a third step that is a
// wait); errors and [WorkflowInfo].StepName use those names unless Named
// gives another. The name is at most [NameBytesMax] bytes and follows the
// rules of [Workflow.Then]. A step's name is part of its definition's
// hash: renaming a step of a registered definition parks its running
// instances, as any change to the definition does.
func (w *Workflow) Named(name string) *Workflow {
	if len(w.steps) == 0 || name == "" {
		w.fail(name, "Named", "needs a step and a name")
		return w
	}
	if err := validateName(name); err != nil {
		w.failName(name, "Named", "step name "+err.Error(), err)
		return w
	}
	for _, o := range w.steps[:len(w.steps)-1] {
		if o.name == name {
			w.fail(name, "Named", "duplicate step name")
		}
	}
	w.steps[len(w.steps)-1].name = name
	return w
}

// SubWorkflow adds a step that dispatches the registered workflow child
// with the parent's public state, and completes when the child completes,
// merging the child's public state (WF-8). The child's steps inherit the
// queue, priority and max attempts its ancestors set (with OnQueue,
// WithPriority, MaxAttempts on the workflow), the nearest one first; the
// child's workflow_started records them, so they hold for every step it
// runs, whatever becomes of its ancestors. The name is as for
// [Workflow.Then]. As a first step, it makes the child's workflow_started
// part of the parent's dispatch: [Engine.Register] refuses a workflow
// whose chain of first-step sub-workflows is longer than
// [SubWorkflowChainMax].
//
// The child's completion completes the parent's step in its own append
// (WF-11), and so on up a chain of nested workflows that finish together,
// as long as that append holds under half of the journal's cap on one
// append (see [Workflow.WaitForWorkflows]); the levels past that point
// complete in appends of their own right after, or in the next run.
func (w *Workflow) SubWorkflow(name, child string) *Workflow {
	if err := validateName(child); err != nil {
		w.failName(name, "SubWorkflow", "child workflow name "+err.Error(), err)
	}
	return w.add(stepSpec{kind: scheduler.StepSub, name: name, sub: child}, "SubWorkflow")
}

// OnQueue sets the queue of every step job (default "default"; WF-22).
func (w *Workflow) OnQueue(q string) *Workflow {
	if err := validateName(q); err != nil {
		w.failName("", "OnQueue", err.Error(), err)
	}
	w.queue = &q
	return w
}

// WithPriority sets the priority of every step job (default Low; WF-22).
func (w *Workflow) WithPriority(p Priority) *Workflow {
	if p > Urgent {
		w.fail("", "WithPriority", fmt.Sprintf("must be Low..Urgent, got %d", p))
	}
	w.priority = &p
	return w
}

// MaxAttempts sets the attempts of every step job whose step does not set
// its own (WF-22). Without it a step job takes its queue's
// (QueueOptions.MaxAttempts), else Options.MaxAttempts, which is 3 unless
// set.
func (w *Workflow) MaxAttempts(n int) *Workflow {
	if err := deadlines.ValidateMaxAttempts(n); err != nil {
		w.fail("", "MaxAttempts", optionErr("", err).(*OptionError).reason())
	}
	w.maxAttempts = &n
	return w
}

// MustCompleteWithin sets the workflow's deadline: deadline_at = dispatch +
// d, fixed at dispatch (WD-1, WD-3). d must be > 0 and at most [DelayMax],
// 100 years; a second call replaces the first.
//
// The periodic check expires a running workflow once the deadline passes.
// A paused workflow, or one waiting for a signal or for other workflows,
// is not expired by the clock alone (WD-11): a signal or a dependency's
// end that settles the wait after deadline_at fails it with "Deadline
// exceeded" in that same append (WD-7), and after a Resume the next check
// fails it.
func (w *Workflow) MustCompleteWithin(d time.Duration) *Workflow {
	if d <= 0 || d > DelayMax {
		w.fail("", "MustCompleteWithin", delayReason(d))
	}
	w.deadline = d
	return w
}

// OnDeadline names the registered deadline handler to run after the
// workflow expires (WD-2, WD-10); see [HandleDeadline]. Only a workflow
// with [Workflow.MustCompleteWithin] expires: without it the workflow has
// no deadline (WD-4) and the handler never runs.
func (w *Workflow) OnDeadline(name string) *Workflow {
	if err := validateName(name); err != nil {
		w.failName("", "OnDeadline", err.Error(), err)
	}
	w.onDeadline = name
	return w
}

// WithMiddleware adds workflow middleware: it wraps the pipeline of every
// step attempt of the workflow, Parallel branches included, in the "queue
// or workflow" place of the order (DL-27): after the global middleware
// ([Options.Middleware]) and the step job's queue middleware
// ([QueueOptions.Middleware]), in the order given. A sub-workflow's steps
// get the child's own workflow middleware, not the parent's. No entry may
// be nil, and [Engine.Register] refuses a workflow whose step attempts
// would have more than [MiddlewareMax] middleware in effect: global,
// queue and workflow middleware together. Calls add up.
func (w *Workflow) WithMiddleware(mw ...Middleware) *Workflow {
	for i, m := range mw {
		if m == nil {
			w.fail("", "WithMiddleware", fmt.Sprintf("middleware %d is nil", len(w.middleware)+i))
		}
	}
	w.middleware = append(w.middleware, mw...)
	return w
}

// WithGuards adds workflow guards, run for every step attempt of the
// workflow after the global and queue guards (DL-27). No entry may be nil,
// and at most [GuardsMax] guards may be in effect for one step attempt.
// Calls add up.
func (w *Workflow) WithGuards(g ...Guard) *Workflow {
	for i, f := range g {
		if f == nil {
			w.fail("", "WithGuards", fmt.Sprintf("guard %d is nil", len(w.guards)+i))
		}
	}
	w.guards = append(w.guards, g...)
	return w
}

func isPublic(k string) bool { return len(k) > 0 && k[0] != '_' }

// stepHandlerName is the handler name a step's job is enqueued for: at
// most stepHandlerNameBytesMax bytes, since the workflow and step names
// are at most [NameBytesMax] and a branch index is below
// [ParallelBranchesMax].
func stepHandlerName(workflow, step string, branch, branches int) string {
	if branches == 1 {
		return workflow + "/" + step
	}
	return workflow + "/" + step + "#" + strconv.Itoa(branch)
}

// Register validates and registers a workflow definition (WF-2): its step
// handlers, its options, its middleware plan (DL-27) and its deadline
// handler, which must be registered first, like any sub-workflow it names.
// A workflow whose chain of first-step sub-workflows, itself included, is
// longer than [SubWorkflowChainMax] is refused, and so is one two of whose
// steps would run under one handler name, or one of whose step handler
// names a job handler or another workflow's step holds (see
// [NewWorkflow]). Nothing is registered or appended on refusal. Once a
// shutdown has begun, Register is refused with [ErrShuttingDown] (SD-12).
//
// A workflow keeps the definition it was dispatched with: its hash is in
// the journal (WF-2). If a process registers a changed definition under
// the same name, the workflows already running with the old one park
// ([WorkflowInfo].Parked) until a process registers the old one again;
// new dispatches use the changed one. To change a workflow while some
// run, register the new definition under a new name (for example
// "data_import_v2") and keep the old one registered until its workflows
// have finished.
func (e *Engine) Register(w *Workflow) error {
	if err := e.admit(); err != nil {
		return err
	}
	if w == nil {
		return &WorkflowError{Option: "Register", Reason: "workflow is nil"}
	}
	if w.err != nil {
		return w.err
	}
	if len(w.steps) == 0 {
		return &WorkflowError{Workflow: w.name, Option: "Register", Reason: "a workflow needs at least one step"}
	}
	if err := checkStepHandlerNames(w); err != nil {
		return err
	}
	if w.onDeadline != "" && e.deadlineHandler(w.onDeadline) == nil {
		return &WorkflowError{Workflow: w.name, Option: "OnDeadline", Reason: fmt.Sprintf("deadline handler %q is not registered", w.onDeadline)}
	}
	if err := e.checkWorkflowPlan(w); err != nil {
		return err
	}
	if n := e.subWorkflowChain(w); n > SubWorkflowChainMax {
		return &WorkflowError{Workflow: w.name, Step: w.steps[0].name, Option: "SubWorkflow",
			Reason: fmt.Sprintf("starts a chain of %d first-step sub-workflows, itself included, limit %d (SubWorkflowChainMax): "+
				"their workflow_started records are one append (WF-13)", n, SubWorkflowChainMax)}
	}
	def := &scheduler.WorkflowDef{Name: w.name, Deadline: w.deadline, OnDeadline: w.onDeadline}
	def.Defaults.Queue = w.queue
	if w.priority != nil {
		p := uint8(*w.priority)
		def.Defaults.Priority = &p
	}
	if w.maxAttempts != nil {
		n := int32(*w.maxAttempts)
		def.Defaults.MaxAttempts = &n
	}
	var handlers []*handlerEntry
	canon := canonicalDef{Name: def.Name, Deadline: def.Deadline, OnDeadline: def.OnDeadline, Defaults: def.Defaults}
	for _, s := range w.steps {
		sd := scheduler.StepDef{Kind: s.kind, Name: s.name, Delay: s.delay, Signals: s.signals, Mode: s.mode,
			IDs: s.ids, FromKey: s.fromKey, Quorum: s.quorum, ResultKey: s.resultKey, Sub: s.sub}
		cs := canonicalStep{StepDef: sd}
		if s.kind == scheduler.StepSub && e.workflowDef(s.sub) == nil {
			return &WorkflowError{Workflow: w.name, Step: s.name, Option: "SubWorkflow", Reason: fmt.Sprintf("workflow %q is not registered", s.sub)}
		}
		if len(s.fns) > 0 {
			req, err := e.stepJob(w, s)
			if err != nil {
				return err
			}
			sd.Queue, sd.Priority, sd.Retry, sd.Timeout = req.Queue, req.Priority, req.Retry, req.DeliveryTimeout
			own, _ := e.buildJobOptions(s.opts)
			sd.Inherit = scheduler.Inheritable{
				Queue:       own.queue == nil && w.queue == nil,
				Priority:    own.priority == nil && w.priority == nil,
				MaxAttempts: own.maxAttempts == nil && w.maxAttempts == nil,
				Backoff:     own.backoff == nil,
				Timeout:     own.timeout == nil,
			}
			cs.Own = canonicalOptions(own)
		}
		for i, fn := range s.fns {
			name := stepHandlerName(w.name, s.name, i, len(s.fns))
			invariant.Check(len(name) <= stepHandlerNameBytesMax, "api: step handler name outgrows stepHandlerNameBytesMax")
			sd.Handlers = append(sd.Handlers, name)
			h := e.stepHandler(name, fn)
			h.ref = &stepRef{workflow: w.name, step: s.name, option: s.option, branch: i, branches: len(s.fns)}
			// A step handler's own middleware and guards are its
			// workflow's: they take the "queue or workflow" place of the
			// plan, after the queue's (DL-27).
			h.opts.middleware, h.opts.guards = slices.Clone(w.middleware), slices.Clone(w.guards)
			handlers = append(handlers, h)
		}
		cs.Handlers = sd.Handlers
		def.Steps = append(def.Steps, sd)
		canon.Steps = append(canon.Steps, cs)
	}
	legacy, err := definitionHash(def)
	if err == nil {
		def.Hash, err = definitionHash(canon)
	}
	if err != nil {
		return &WorkflowError{Workflow: w.name, Option: "Register", Reason: err.Error()}
	}
	def.LegacyHash = legacy
	if err := e.registerWorkflow(def, handlers); err != nil {
		return err
	}
	return e.submit(context.Background(), func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.WorkflowRegistered(now, def.Name), nil
	})
}

// subWorkflowChain returns the length of w's chain of first-step
// sub-workflows: 1 for w, plus 1 for each registered child started by the
// first step of the previous workflow. It stops counting past
// SubWorkflowChainMax; an unregistered child ends the chain (Register
// refuses it on its own).
func (e *Engine) subWorkflowChain(w *Workflow) int {
	n := 1
	if w.steps[0].kind != scheduler.StepSub {
		return n
	}
	child := w.steps[0].sub
	for n <= SubWorkflowChainMax {
		def := e.workflowDef(child)
		if def == nil {
			break
		}
		n++
		if len(def.Steps) == 0 || def.Steps[0].Kind != scheduler.StepSub {
			break
		}
		child = def.Steps[0].Sub
	}
	return n
}

// stepJob resolves a step's job options: the step's, then the workflow's,
// then the engine's (WF-22).
func (e *Engine) stepJob(w *Workflow, s stepSpec) (scheduler.EnqueueRequest, error) {
	var layers []JobOption
	if w.queue != nil {
		layers = append(layers, OnQueue(*w.queue))
	}
	if w.priority != nil {
		layers = append(layers, WithPriority(*w.priority))
	}
	if w.maxAttempts != nil {
		layers = append(layers, MaxAttempts(*w.maxAttempts))
	}
	o, err := buildOptions(append(layers, s.opts...))
	if err == nil && o.registration {
		return scheduler.EnqueueRequest{}, stepPlanError(w, s, o)
	}
	if err != nil {
		var oe *OptionError
		if errors.As(err, &oe) {
			return scheduler.EnqueueRequest{}, &WorkflowError{Workflow: w.name, Step: s.name, Option: oe.Field, Reason: oe.reason()}
		}
		return scheduler.EnqueueRequest{}, err
	}
	// A step job is enqueued when its step is entered, by the engine, so
	// the enqueue-only options have nothing to apply to: refused rather
	// than ignored, so that a definition never says more than it does
	// (WF-2, WF-22).
	if o.delaySet {
		return scheduler.EnqueueRequest{}, &WorkflowError{Workflow: w.name, Step: s.name, Option: "Delay",
			Reason: "a step takes no job Delay: add a Workflow.Delay step before it"}
	}
	if o.unique {
		return scheduler.EnqueueRequest{}, &WorkflowError{Workflow: w.name, Step: s.name, Option: "Unique",
			Reason: "a step takes no Unique: each entry of a step enqueues its job once (WF-11)"}
	}
	return e.resolve(&handlerEntry{}, o), nil
}

// stepPlanError refuses middleware or guards given to one step: a step
// attempt's own layer of the plan is its workflow's (DL-27).
func stepPlanError(w *Workflow, s stepSpec, o jobOptions) error {
	if len(o.guards) > 0 && len(o.middleware) == 0 {
		return &WorkflowError{Workflow: w.name, Step: s.name, Option: "WithGuards",
			Reason: "a step takes no guards of its own: give them to Workflow.WithGuards, which runs them for every step attempt of the workflow"}
	}
	return &WorkflowError{Workflow: w.name, Step: s.name, Option: "WithMiddleware",
		Reason: "a step takes no middleware of its own: give it to Workflow.WithMiddleware, which wraps every step attempt of the workflow"}
}

// stepHandler wraps a StepFunc as a handler: state in, merged keys out.
func (e *Engine) stepHandler(name string, fn StepFunc) *handlerEntry {
	limit := e.opts.PayloadBytesMax
	return &handlerEntry{name: name, step: true, call: func(ctx context.Context, d *Delivery, st *scheduler.Start) ([]byte, error) {
		in, err := decodeState(st.State)
		if err != nil {
			return nil, Permanent(CodePayloadDecodeFailed, err)
		}
		out, err := fn(ctx, d, in)
		if err != nil {
			return nil, err
		}
		b, err := encodeState(publicOnly(out))
		if err != nil {
			return nil, Permanent(CodeOutputInvalid, err)
		}
		if len(b) > limit {
			return nil, Permanent(CodeOutputInvalid, fmt.Errorf("step output is %d bytes, limit %d (Options.PayloadBytesMax)", len(b), limit))
		}
		return b, nil
	}}
}

// CodeOutputInvalid fails a step whose output cannot be stored.
const CodeOutputInvalid = "STEP_OUTPUT_INVALID"

// canonicalDef is the definition WF-2 hashes: what the definition says,
// deadline fields included, and none of the engine's Options. The step
// jobs' options resolved from the engine's defaults (WF-22) are left out,
// so that a release that changes Options.MaxAttempts, Options.Backoff or a
// queue's options parks no workflow in flight: only a changed definition
// does.
type canonicalDef struct {
	Name       string
	Deadline   time.Duration
	OnDeadline string
	Defaults   scheduler.JobDefaults
	Steps      []canonicalStep
}

// canonicalStep is a step of a canonicalDef: its StepDef with the resolved
// job options left zero, and the options the step itself sets.
type canonicalStep struct {
	scheduler.StepDef
	Own stepOptions
}

// stepOptions are the job options a step sets itself; nil when not set.
type stepOptions struct {
	Queue       *string
	Priority    *Priority
	Delay       time.Duration
	MaxAttempts *int
	Backoff     *deadlines.Backoff
	Timeout     *time.Duration
	Unique      bool
}

func canonicalOptions(o jobOptions) stepOptions {
	return stepOptions{Queue: o.queue, Priority: o.priority, Delay: o.delay, MaxAttempts: o.maxAttempts,
		Backoff: o.backoff, Timeout: o.timeout, Unique: o.unique}
}

// definitionHash is the SHA-256 of def's encoding: of a canonicalDef for
// the hash workflows record (WF-2), and of the resolved WorkflowDef for the
// hash earlier builds recorded (WorkflowDef.LegacyHash).
func definitionHash(def any) (string, error) {
	b, err := record.EncodeValue(def)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
