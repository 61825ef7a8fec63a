package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

func decodeState(b []byte) (State, error) {
	m, err := replay.DecodeState(b)
	return State(m), err
}

func encodeState(s State) ([]byte, error) {
	if s == nil {
		return nil, nil
	}
	b, err := replay.EncodeState(map[string]any(s))
	if err != nil {
		return nil, stateKeyError(s, err)
	}
	return b, nil
}

// stateKeyError names the first key, in key order, whose value cannot be
// encoded on its own, so that a refused state, signal payload or step
// output says which key to fix rather than only the value's type. err,
// the whole state's encoding error, is returned as it is when no value
// fails alone (a state too deep or too large only as a whole).
func stateKeyError(s State, err error) error {
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if _, kerr := record.EncodeValue(s[k]); kerr != nil {
			return fmt.Errorf("key %q: %w", k, kerr)
		}
	}
	return err
}

// publicOnly returns s without its "_" keys, s itself when it has none.
// Step outputs and signal payloads cannot write them (WF-3, WF-12), so
// they are dropped before anything is journaled: a secret returned under
// a "_" key never reaches the disk.
func publicOnly(s State) State {
	for k := range s {
		if !replay.IsPublicKey(k) {
			out := make(State, len(s))
			for k, v := range s {
				if replay.IsPublicKey(k) {
					out[k] = v
				}
			}
			return out
		}
	}
	return s
}

type deadlineEntry struct {
	name string
	fn   DeadlineFunc
}

// HandleDeadline registers an on-deadline handler under name, for
// [Workflow.OnDeadline] (WD-2). It must be registered before the workflows
// that name it. An invalid name, a nil fn (matching [ErrInvalidOption]), a
// name registered before or a call once shutdown has begun is refused
// with a typed error.
func HandleDeadline(e *Engine, name string, fn DeadlineFunc) error {
	if err := validateName(name); err != nil {
		return &NameError{Kind: "deadline handler", Name: name, Err: err}
	}
	if fn == nil {
		return &NameError{Kind: "deadline handler", Name: name, Err: argRuleError("handler func is nil")}
	}
	if err := e.admit(); err != nil {
		return err
	}
	e.hmu.Lock()
	defer e.hmu.Unlock()
	if _, dup := e.deadlineHandlers[name]; dup {
		return &NameError{Kind: "deadline handler", Name: name, Err: ErrDuplicate}
	}
	e.deadlineHandlers[name] = &deadlineEntry{name: name, fn: fn}
	return nil
}

func (e *Engine) deadlineHandler(name string) *deadlineEntry {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	return e.deadlineHandlers[name]
}

func (e *Engine) workflowDef(name string) *scheduler.WorkflowDef {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	return e.workflows[name]
}

func (e *Engine) registerWorkflow(def *scheduler.WorkflowDef, handlers []*handlerEntry) error {
	e.hmu.Lock()
	if _, dup := e.workflows[def.Name]; dup {
		e.hmu.Unlock()
		return &NameError{Kind: "workflow", Name: def.Name, Err: ErrDuplicate}
	}
	for _, h := range handlers {
		if held, dup := e.handlers[h.name]; dup {
			e.hmu.Unlock()
			return stepNameTaken(h, held)
		}
	}
	e.workflows[def.Name] = def
	for _, h := range handlers {
		e.handlers[h.name] = h
	}
	e.hmu.Unlock()
	for _, h := range handlers {
		if err := e.unpark(h.name); err != nil {
			return err
		}
	}
	return nil
}

// runDeadline runs an on-deadline handler (WD-10): errors and panics are
// recovered and reported as the outcome, never propagated.
func (e *Engine) runDeadline(ctx context.Context, run scheduler.DeadlineRun) (outcome, msg string) {
	if turn := e.opts.deadlineTurn; turn != nil {
		turn(ctx, fmt.Sprintf("deadline/%s/%d", run.WorkflowID, run.Expiry))
	}
	h := e.deadlineHandler(run.Handler)
	if h == nil {
		return scheduler.HandlerNotRegistered, fmt.Sprintf("deadline handler %q is not registered", run.Handler)
	}
	state, err := decodeState(run.State)
	if err != nil {
		return scheduler.HandlerFailed, err.Error()
	}
	defer func() {
		if p := recover(); p != nil {
			outcome, msg = scheduler.HandlerPanicked, fmt.Sprintf("%v\n%s", p, debug.Stack())
		}
	}()
	if err := h.fn(ctx, state); err != nil {
		return scheduler.HandlerFailed, err.Error()
	}
	return scheduler.HandlerOK, ""
}

// DispatchOption sets an option of one dispatch.
type DispatchOption func(*dispatchOptions)

type dispatchOptions struct {
	idempotencyKey string
}

// IdempotencyKeyBytesMax bounds an idempotency key. The key is kept in the
// journal's terminal index under the id "idem:" + key, and an index id,
// like a stream id, is at most 127 bytes (RL-11).
const IdempotencyKeyBytesMax = record.StreamIDBytesMax - len(replay.IdempotencyPrefix)

// IdempotencyKey makes the dispatch idempotent: a key used before returns
// the original workflow's id and appends nothing (WF-14), whatever the
// state given and whatever that workflow's status, completed, failed and
// cancelled included. Keys are engine-wide and never released: a key a
// workflow of another name holds is refused with an error matching
// [ErrState] that names that workflow. An empty key is no key. A key is at
// most [IdempotencyKeyBytesMax] (122) bytes, so that its terminal-index id
// ("idem:" + key) is a valid id: Dispatch refuses a longer one with an
// [*OptionError] naming IdempotencyKey.
func IdempotencyKey(k string) DispatchOption {
	return func(o *dispatchOptions) { o.idempotencyKey = k }
}

// Dispatch starts a workflow of the registered name with an initial state
// (WF-13) and returns its id once workflow_started and the first step's
// entry are synced. A nil state is an empty state. With
// MustCompleteWithin, deadline_at is fixed now (WD-3). An unknown name, an
// invalid option or state, an [IdempotencyKey] a workflow of another name
// holds, a cancelled ctx or a closed engine return a typed error and
// append nothing; a ctx that ends during the call is
// treated as [Engine] says: once the engine has taken the call, it returns
// the workflow id even if ctx ended meanwhile. Once a shutdown has begun,
// Dispatch is refused with [ErrShuttingDown] (WF-13, SD-12).
//
// A handler may call Dispatch. The dispatch is its own append, not part of
// the attempt's settlement: an attempt that fails or is redelivered after
// a crash dispatches again when it runs again, so a handler passes an
// [IdempotencyKey] derived from its job or workflow (as in the example of
// [Workflow.WaitForWorkflowsIn]) to get the same workflow back.
func (e *Engine) Dispatch(ctx context.Context, name string, state State, opts ...DispatchOption) (string, error) {
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	if err := e.admit(); err != nil {
		return "", err
	}
	if err := unregistrableName("workflow", name, ErrNotFound); err != nil {
		return "", err
	}
	if e.workflowDef(name) == nil {
		return "", &NameError{Kind: "workflow", Name: name, Err: ErrNotFound}
	}
	var o dispatchOptions
	for _, opt := range opts {
		if opt == nil {
			return "", &OptionError{Field: "DispatchOption", Reason: "must not be nil"}
		}
		opt(&o)
	}
	if len(o.idempotencyKey) > IdempotencyKeyBytesMax {
		return "", &OptionError{Field: "IdempotencyKey", Value: o.idempotencyKey,
			Reason: fmt.Sprintf("is %d bytes, limit %d (IdempotencyKeyBytesMax)", len(o.idempotencyKey), IdempotencyKeyBytesMax)}
	}
	b, err := e.encodeUserState("state", state)
	if err != nil {
		return "", err
	}
	var id string
	err = e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		d, wid, err := m.StartWorkflow(now, scheduler.DispatchRequest{Name: name, State: b, IdempotencyKey: o.idempotencyKey})
		id = wid
		return d, err
	})
	if err != nil {
		return "", e.mapWorkflowErr(name, err)
	}
	return id, nil
}

func (e *Engine) encodeUserState(what string, s State) ([]byte, error) {
	b, err := encodeState(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidPayload, what, err)
	}
	if len(b) > e.opts.PayloadBytesMax {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d (Options.PayloadBytesMax)", ErrInvalidPayload, what, len(b), e.opts.PayloadBytesMax)
	}
	return b, nil
}

// Signal sends a signal to workflow id (WF-19). It is stored whatever the
// workflow's status, so a signal sent before its wait is reached satisfies
// it later; a waiting workflow settles in the same append (WF-6). A nil
// payload is an empty one; its keys starting with "_" are dropped before
// it is journaled (WF-12). An unknown, completed or cancelled workflow is
// refused. A workflow holding [StoredSignalsMax] unconsumed signals, or
// four times Options.PayloadBytesMax of their payloads, refuses more with
// [ErrSignalLimit], except one its current wait step needs: a name it
// waits for, with none of that name stored.
// An ended ctx returns its error and appends nothing (see [Engine]).
// Once a shutdown has begun it is refused with [ErrShuttingDown] (SD-12).
func (e *Engine) Signal(ctx context.Context, id, name string, payload State) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	if err := validateName(name); err != nil {
		return &NameError{Kind: "signal", Name: name, Err: err}
	}
	b, err := e.encodeUserState("signal payload", publicOnly(payload))
	if err != nil {
		return err
	}
	return e.mapWorkflowErr(id, e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Signal(now, id, name, b)
	}))
}

// PauseWorkflow pauses a running workflow (WF-15). An ended ctx returns
// its error and appends nothing (see [Engine]). During a shutdown it is
// accepted until phase 4 starts, then refused with [ErrShuttingDown]
// (SD-12).
func (e *Engine) PauseWorkflow(ctx context.Context, id string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.live(); err != nil {
		return err
	}
	return e.mapWorkflowErr(id, e.submit(ctx, e.untilCloseEvidence(func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Pause(id)
	})))
}

// ResumeWorkflow resumes a paused workflow (WF-16); a workflow in any
// other status is refused with an error matching [ErrState]. An ended ctx
// returns its error and appends nothing (see [Engine]). Once a shutdown
// has begun it is refused with [ErrShuttingDown] (SD-12).
func (e *Engine) ResumeWorkflow(ctx context.Context, id string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	return e.mapWorkflowErr(id, e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Resume(now, id)
	}))
}

// CancelWorkflow cancels a running, paused, waiting or failed workflow
// (WF-17). Running attempts are not interrupted; their results are
// discarded. Children are not cancelled. An ended ctx returns its error
// and appends nothing (see [Engine]). During a shutdown it is accepted
// until phase 4 starts, then refused with [ErrShuttingDown] (SD-12).
func (e *Engine) CancelWorkflow(ctx context.Context, id string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.live(); err != nil {
		return err
	}
	return e.mapWorkflowErr(id, e.submit(ctx, e.untilCloseEvidence(func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Cancel(now, id)
	})))
}

// RetryWorkflow retries a failed workflow: its current step is re-entered
// with fresh attempts; deadline_at is unchanged (WD-13). A Then step runs
// a new job, also when its job succeeded (the success failed or expired
// the workflow, or came after the failure: its output is discarded). A
// Parallel step runs again only the branches that have not succeeded,
// counting those that succeeded after the failure; their outputs are
// merged when the step completes (WF-18). A workflow that is not failed is refused with an error
// matching [ErrState], and so is a parked one (its definition not
// registered) that holds the output of a step job that succeeded: only
// its definition says whether that output is to be dropped (Then) or kept
// (Parallel). An ended ctx returns its error and appends nothing
// (see [Engine]). Once a shutdown has begun it is refused with
// [ErrShuttingDown] (SD-12).
func (e *Engine) RetryWorkflow(ctx context.Context, id string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	return e.mapWorkflowErr(id, e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.RetryWorkflow(now, id)
	}))
}

func (e *Engine) mapWorkflowErr(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, scheduler.ErrNotFound):
		if qerr := e.quarantinedErr("workflow", id); qerr != nil {
			return qerr
		}
		return &NameError{Kind: "workflow", Name: id, Err: ErrNotFound}
	case errors.Is(err, scheduler.ErrState):
		return stateErr(err)
	}
	return err
}

// stateErr is a scheduler.ErrState refusal as an [ErrState], worded once:
// "quire: operation not allowed in this state: workflow wf_… is completed".
func stateErr(err error) error {
	return fmt.Errorf("%w: %s", ErrState, strings.TrimPrefix(err.Error(), scheduler.ErrState.Error()+": "))
}

// WorkflowStatus is a workflow's status (WF-9).
type WorkflowStatus string

// Workflow statuses.
const (
	WorkflowRunning          WorkflowStatus = "running"
	WorkflowCompleted        WorkflowStatus = "completed"
	WorkflowFailed           WorkflowStatus = "failed"
	WorkflowPaused           WorkflowStatus = "paused"
	WorkflowWaitingSignal    WorkflowStatus = "waiting_for_signal"
	WorkflowWaitingWorkflows WorkflowStatus = "waiting_for_workflows"
	WorkflowCancelled        WorkflowStatus = "cancelled"
	// WorkflowCorrupt is the status of a workflow whose stream Open
	// quarantined ([QuarantinedStream]): [WorkflowInfo].Corrupt says why.
	WorkflowCorrupt WorkflowStatus = "corrupt"
)

// MessageDeadlineExceeded is the error of a workflow failed by its deadline.
const MessageDeadlineExceeded = scheduler.MsgDeadlineExceeded

// WorkflowInfo is the status of one workflow (WF-21).
type WorkflowInfo struct {
	ID     string
	Name   string
	Status WorkflowStatus
	Step   int // current step index, from 0 (== Steps once completed); qctl says "step Step+1 of Steps"
	// StepName is the current step's name, or "". Step names are not in
	// the journal: they come from the definition registered in this
	// process. So StepName is "" past the last step, and also when the
	// workflow's definition is not registered here or is registered with
	// another hash (Parked, while the workflow is not finished).
	StepName string
	// Steps is the number of steps of the definition the workflow
	// started with.
	Steps int
	State State // public state
	// ParentID is the workflow that dispatched this one from a
	// SubWorkflow step, and ParentStep that step's index (from 0, as
	// Step); "" and 0 for a workflow dispatched with [Engine.Dispatch].
	ParentID   string
	ParentStep int
	WaitingFor []string // every signal name or workflow id of the current wait step, settled or not
	// WaitMode is how the current wait step settles: "all", "any" or
	// "quorum" (WF-6, WF-7); "" at other steps.
	WaitMode string
	// Child is the id of the child workflow the current SubWorkflow step
	// runs (its ParentID is this workflow's), "" at other steps: a caller
	// signals or awaits the child by it.
	Child      string
	DelayUntil time.Time // a pending Delay's fire instant
	DeadlineAt time.Time // zero without a deadline
	// Error says why a failed workflow failed, and FailedAt when; "" and
	// zero unless Status is failed (a retry clears them). A workflow
	// failed by its deadline reads [MessageDeadlineExceeded]; any other
	// names what failed it (a step's buried job, a failed or cancelled
	// child, a failed dependency, an output that cannot be stored), cut
	// to at most 1024 bytes.
	Error          string
	FailedAt       time.Time
	IdempotencyKey string
	// DefinitionHash is the hash of the definition the workflow was
	// started with (WF-2), recorded in its workflow_started.
	DefinitionHash string
	StartedAt      time.Time
	// Parked is true for a workflow that is not completed or cancelled
	// whose definition is not registered in this process, or is
	// registered under its name with another hash than DefinitionHash
	// (the definition changed). Status stays what the journal says, but
	// the engine decides nothing from the definition for it: no step is
	// entered, no wait settles (signals are stored), no step job starts.
	// Its deadline still expires, and calls the on-deadline handler its
	// own definition named, which workflow_started records (on_deadline;
	// a workflow whose record lacks it, written by an earlier build,
	// calls none). Registering the
	// definition with that hash lets it go on: at once if its name is not
	// registered yet, else in a process that registers it (a name
	// registers once per process). Like [Job].Parked, it is not a journal
	// status.
	Parked bool
	// Attempts and Consumed are the current step's attempt counts, summed
	// over the jobs of the step's latest entry that have not completed:
	// a Parallel step's branches that succeeded leave the sum, as they
	// leave the work a retry redoes (WF-18). After a retry only the
	// re-entered step's new jobs count, not the buried ones the retry
	// replaced; 0 until the step's jobs are enqueued.
	Attempts int
	Consumed int
	// Corrupt is the damage that quarantined the workflow's stream, for a
	// WorkflowCorrupt workflow; the other fields are as of its last good
	// record.
	Corrupt *journal.CorruptError
}

func unixOrZero(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Workflow returns the status of workflow id (WF-21, WD-18). Completed and
// cancelled workflows are read from the journal's terminal index. An id
// that names no workflow (unknown, malformed, or a job's) returns a
// [*NameError] matching [ErrNotFound]; a damaged index entry of the
// workflow, an error matching journal.ErrCorrupt.
func (e *Engine) Workflow(ctx context.Context, id string) (WorkflowInfo, error) {
	if err := checkContext(ctx); err != nil {
		return WorkflowInfo{}, err
	}
	if err := idError("workflow", id); err != nil {
		return WorkflowInfo{}, err
	}
	if err := e.live(); err != nil {
		return WorkflowInfo{}, err
	}
	var (
		info  WorkflowInfo
		found bool
	)
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		info, found = e.workflowInState(m, id)
		return scheduler.Decision{}, nil
	})
	if err != nil || found {
		return info, err
	}
	return e.finishedWorkflowInfo(id)
}

// workflowInState reports workflow id as the machine's state holds it,
// quarantined ones included, and false if the state does not hold it
// (completed, cancelled or unknown). It runs on the loop.
func (e *Engine) workflowInState(m *scheduler.Machine, id string) (WorkflowInfo, bool) {
	w, ok := m.State().Workflows[id]
	if ok {
		return e.workflowInfo(m, w), true
	}
	q := m.State().Quarantined[id]
	if q == nil || q.Workflow == nil && len(q.Jobs) > 0 {
		return WorkflowInfo{}, false
	}
	info := WorkflowInfo{ID: id}
	if q.Workflow != nil {
		info = e.workflowInfo(m, q.Workflow)
	}
	info.Status, info.Corrupt = WorkflowCorrupt, e.quarantine.streams[id].Err
	return info, true
}

// finishedWorkflowInfo reports workflow id from the terminal index, which
// does not change while the engine is open.
func (e *Engine) finishedWorkflowInfo(id string) (WorkflowInfo, error) {
	s, ok, err := e.finishedWorkflow(id)
	if err != nil {
		return WorkflowInfo{}, fmt.Errorf("quire: status of workflow %s: %w", id, err)
	}
	if !ok {
		return WorkflowInfo{}, &NameError{Kind: "workflow", Name: id, Err: ErrNotFound}
	}
	state, _ := decodeState(s.State)
	info := WorkflowInfo{
		ID: s.ID, Name: s.Name, Status: WorkflowStatus(s.Status.String()), Step: int(s.Step), Steps: int(s.Steps),
		State: state, ParentID: s.ParentID, ParentStep: int(s.ParentStep), DeadlineAt: unixOrZero(s.DeadlineAt),
		Error: s.Error, FailedAt: unixOrZero(s.FailedAt), IdempotencyKey: s.IdempotencyKey,
		DefinitionHash: s.DefinitionHash, StartedAt: unixOrZero(s.StartedAt),
	}
	info.StepName = e.stepName(s.Name, s.DefinitionHash, int(s.Step))
	return info, nil
}

// stepName is the name of step in the definition registered here for
// workflow, if that definition has the hash the instance recorded.
func (e *Engine) stepName(workflow, hash string, step int) string {
	if def := e.workflowDef(workflow); def != nil && def.Runs(hash) && step < len(def.Steps) {
		return def.Steps[step].Name
	}
	return ""
}

// workflowInfo runs on the engine's loop.
func (e *Engine) workflowInfo(m *scheduler.Machine, w *replay.Workflow) WorkflowInfo {
	pub, _ := replay.PublicState(w.State)
	state, _ := decodeState(pub)
	info := WorkflowInfo{
		ID: w.ID, Name: w.Name, Status: WorkflowStatus(w.Status.String()), Step: int(w.Step), Steps: int(w.Steps),
		State: state, ParentID: w.ParentID, ParentStep: int(w.ParentStep), DelayUntil: unixOrZero(w.DelayFireAt),
		DeadlineAt: unixOrZero(w.DeadlineAt), Error: w.Error, FailedAt: unixOrZero(w.FailedAt),
		IdempotencyKey: w.IdempotencyKey, DefinitionHash: w.DefinitionHash, StartedAt: unixOrZero(w.StartedAt),
	}
	info.Parked = m.WorkflowParked(w)
	info.Child = w.Child
	info.StepName = e.stepName(w.Name, w.DefinitionHash, int(w.Step))
	if w.Wait != nil {
		info.WaitingFor = append(append(info.WaitingFor, w.Wait.Signals...), w.Wait.Workflows...)
		info.WaitMode = w.Wait.Mode
	}
	info.Attempts, info.Consumed = stepCounts(m.State(), w)
	return info
}

// stepCounts sums the attempt counts of the jobs of w's current step
// entry (WF-18, WF-21). A step's jobs stay in the state until they
// complete, so after a retry the buried jobs of the earlier entry are
// still there, at the same step: for each branch only the job enqueued
// last counts, since a retry enqueues a new job for every branch it
// re-enters. Until the entry's jobs are enqueued (w.Entered is false
// after workflow_retried) the counts are 0.
func stepCounts(st *replay.State, w *replay.Workflow) (attempts, consumed int) {
	if !w.Entered {
		return 0, 0
	}
	latest := map[int32]*replay.Job{}
	for _, j := range st.WorkflowJobs(w.ID) {
		if j.Step != w.Step {
			continue
		}
		if l := latest[j.Branch]; l == nil || j.EnqueueSeq > l.EnqueueSeq {
			latest[j.Branch] = j
		}
	}
	for _, j := range latest {
		attempts += int(j.Attempts)
		consumed += int(j.Consumed)
	}
	return attempts, consumed
}
