package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Messages of workflow transitions that the specs fix.
const (
	MsgDeadlineExceeded  = "Deadline exceeded"  // WD-8
	MsgWorkflowCancelled = "Workflow cancelled" // WF-17
	CodeDeadlineExceeded = "DEADLINE_EXCEEDED"
	CodeWorkflowFailed   = "WORKFLOW_FAILED"
	// CodeWorkflowCancelled is the code of the job_buried a cancel
	// appends for each pending job of the workflow (WF-17).
	CodeWorkflowCancelled = "WORKFLOW_CANCELLED"
)

// Detection sources of workflow_deadline_exceeded (WD-8).
const (
	DetectedByCheck        = "check"
	DetectedByStepBoundary = "step_boundary"
)

// DispatchRequest is a validated workflow dispatch (WF-13).
type DispatchRequest struct {
	Name           string
	State          []byte // canonical msgpack map
	IdempotencyKey string
}

// DeadlineRun is an on-deadline handler to run once its
// deadline_handler_started is acknowledged (WD-10).
type DeadlineRun struct {
	Expiry     uint64
	WorkflowID string
	Name       string
	Handler    string
	State      []byte // public state as of the expiry
}

// def returns the definition registered under name, or nil. It is what a
// new instance is started with (a dispatch, a SubWorkflow step's child);
// an existing instance is advanced only by [Machine.defOf].
func (m *Machine) def(name string) *WorkflowDef {
	if m.cfg.WorkflowFunc == nil {
		return nil
	}
	return m.cfg.WorkflowFunc(name)
}

// defOf returns the definition that advances the existing instance w: the
// one registered under its name, only if it has the hash w recorded in
// workflow_started (WF-2). A definition registered under the same name with
// another hash describes other steps, waits and options: deciding w's
// next step, a wait's settlement or its step jobs' options from it would
// corrupt w (its step index and wait were recorded under its own
// definition). So w is then treated exactly as if its definition were not
// registered: it is parked, nothing is decided from its definition, and
// registering the definition with its hash lets it go on
// ([Machine.WorkflowRegistered]).
func (m *Machine) defOf(w *replay.Workflow) *WorkflowDef {
	def := m.def(w.Name)
	if def == nil || !def.Runs(w.DefinitionHash) {
		return nil
	}
	return def
}

// stepLabel names w's current step in a failure message: by its name and
// its place counted from 1, as qctl shows steps ("step \"charge\" (2 of
// 4)"), or by its place alone when w's definition is not registered.
func (m *Machine) stepLabel(w *replay.Workflow) string {
	if def := m.defOf(w); def != nil && int(w.Step) < len(def.Steps) {
		return fmt.Sprintf("step %q (%d of %d)", def.Steps[w.Step].Name, w.Step+1, w.Steps)
	}
	return fmt.Sprintf("step %d of %d", w.Step+1, w.Steps)
}

// WorkflowParked reports whether w, a workflow of the state, is parked: the
// definition it recorded (name and hash) is not registered in this
// process, so the machine decides nothing from it until it is (see
// [Machine.defOf]). Decisions that the journal alone determines still
// happen: a recorded delay fires, a child's outcome reaches it, a deadline
// expires it (WD-5), a signal is stored.
func (m *Machine) WorkflowParked(w *replay.Workflow) bool {
	return m.defOf(w) == nil
}

// StartWorkflow decides a dispatch: workflow_started and the first step's
// entry in one append (WF-13). An idempotency key already used returns the
// original workflow's id and decides nothing (WF-14); one used for another
// workflow name is refused.
func (m *Machine) StartWorkflow(now time.Time, req DispatchRequest) (Decision, string, error) {
	var d Decision
	def := m.def(req.Name)
	if def == nil {
		return d, "", fmt.Errorf("%w: workflow %q is not registered", ErrNotFound, req.Name)
	}
	if k := req.IdempotencyKey; k != "" {
		if id, ok := m.st.Idempotency[k]; ok {
			if w := m.st.Workflows[id]; w != nil && w.Name != req.Name {
				return d, "", fmt.Errorf("%w: idempotency key %q belongs to workflow %s of %q", ErrState, k, id, w.Name)
			}
			return d, id, nil
		}
		v, ok := replay.Idempotent{}, false
		if r, hit := m.recentIdem[k]; hit {
			v, ok = r.v, true
		} else if m.cfg.IdempotencyFunc != nil {
			v, ok = m.cfg.IdempotencyFunc(k)
		}
		if ok {
			if v.Name != req.Name {
				return d, "", fmt.Errorf("%w: idempotency key %q belongs to workflow %s of %q", ErrState, k, v.WorkflowID, v.Name)
			}
			return d, v.WorkflowID, nil
		}
	}
	id := m.startWorkflow(&d, now, def, req.State, req.IdempotencyKey, nil, 0)
	return d, id, nil
}

// startWorkflow starts a workflow of def; parent is nil for a dispatch,
// the running parent for a SubWorkflow child, whose inherited job options
// (WF-8) its workflow_started records.
func (m *Machine) startWorkflow(d *Decision, now time.Time, def *WorkflowDef, state []byte, idem string, parent *replay.Workflow, parentStep int32) string {
	id := m.cfg.NewIDFunc("wf_", now)
	var deadlineAt int64
	var onDeadline string
	if def.Deadline > 0 {
		deadlineAt = deadlines.InstantAfter(now, def.Deadline) // WD-3
		onDeadline = def.OnDeadline
	}
	rec := &record.WorkflowStarted{
		WorkflowID: id, Name: def.Name, DefinitionHash: def.Hash, Steps: int32(len(def.Steps)),
		State: state, At: now.UnixNano(), DeadlineAt: deadlineAt, IdempotencyKey: idem,
		ParentStep: parentStep, OnDeadline: onDeadline,
	}
	if parent != nil {
		rec.ParentID = parent.ID
		inh := m.childInherits(parent)
		rec.Inherited = true
		if inh.Queue != nil {
			rec.InheritedQueue = *inh.Queue
		}
		if inh.Priority != nil {
			rec.InheritedPriority = *inh.Priority + 1
		}
		if inh.MaxAttempts != nil {
			rec.InheritedMaxAttempts = *inh.MaxAttempts
		}
	}
	m.emit(d, id, rec)
	if idem != "" {
		if v, err := replay.EncodeIdempotent(replay.Idempotent{WorkflowID: id, Name: def.Name}); err == nil {
			d.Index = append(d.Index, IndexEntry{ID: replay.IdempotencyPrefix + idem, Value: v})
		}
	}
	m.enter(d, now, m.st.Workflows[id])
	return id
}

// enter appends the current step's entry records (WF-11). A paused
// workflow enters nothing, but completes once past its last step (WF-15);
// a parked workflow (its definition, with the hash it recorded, is not
// registered in this process) waits until it is.
func (m *Machine) enter(d *Decision, now time.Time, w *replay.Workflow) {
	if w == nil || w.Entered {
		return
	}
	if w.Step >= w.Steps && (w.Status == replay.WorkflowRunning || w.Status == replay.WorkflowPaused) {
		m.completeWorkflow(d, now, w)
		return
	}
	if w.Status != replay.WorkflowRunning {
		return
	}
	def := m.defOf(w) // w's own step: only its own definition says what it is
	if def == nil || int(w.Step) >= len(def.Steps) {
		return
	}
	step := &def.Steps[w.Step]
	switch step.Kind {
	case StepThen, StepParallel:
		queue, prio, retry, timeout := step.Queue, step.Priority, step.Retry, step.Timeout
		inh := m.inherited(w)
		if step.Inherit.Queue && inh.Queue != nil {
			queue = *inh.Queue
			if queue != step.Queue && m.cfg.QueueJobFunc != nil {
				// The step's retry policy and timeout were resolved
				// against the queue its definition names: on the queue
				// it inherits, that queue's options apply instead, as to
				// every other job of the queue (WF-22).
				qr, qt := m.cfg.QueueJobFunc(queue)
				n := retry.MaxAttempts
				if step.Inherit.MaxAttempts {
					n = qr.MaxAttempts
				}
				if step.Inherit.Backoff {
					retry = qr
				}
				retry.MaxAttempts = n
				if step.Inherit.Timeout {
					timeout = qt
				}
			}
		}
		if step.Inherit.Priority && inh.Priority != nil {
			prio = *inh.Priority
		}
		if step.Inherit.MaxAttempts && inh.MaxAttempts != nil {
			retry.MaxAttempts = *inh.MaxAttempts
		}
		done, _ := doneBranches(w, len(step.Handlers))
		for i, h := range step.Handlers {
			if done[i] {
				continue // WF-18: only branches without attempt_succeeded
			}
			m.enqueue(d, now, EnqueueRequest{
				Handler: h, Queue: queue, Priority: prio, Retry: retry,
				DeliveryTimeout: timeout, WorkflowID: w.ID, Step: w.Step, Branch: int32(i),
			})
		}
		if !w.Entered { // every branch had succeeded already
			m.completeBranches(d, now, w)
		}
	case StepDelay:
		m.emit(d, w.ID, &record.StepDelayed{WorkflowID: w.ID, Step: w.Step, FireAt: deadlines.InstantAfter(now, step.Delay)})
		m.armDelay(w)
	case StepSignal:
		if m.settleSignals(d, now, w, step, false) {
			return
		}
		m.emit(d, w.ID, &record.WorkflowWaiting{WorkflowID: w.ID, Step: w.Step, Status: "waiting_for_signal",
			Signals: step.Signals, Mode: step.Mode})
	case StepWorkflows:
		ids, err := m.waitIDs(w, step)
		if err != nil {
			m.fail(d, now, w, err.Error())
			return
		}
		if m.settleWorkflowsWait(d, now, w, step, ids, false) {
			return
		}
		m.emit(d, w.ID, &record.WorkflowWaiting{WorkflowID: w.ID, Step: w.Step, Status: "waiting_for_workflows",
			Workflows: ids, Mode: step.Mode, Quorum: int32(step.Quorum)})
		m.addWaiter(w.ID, ids)
		m.nestWaiters(w.ID)
	case StepSub:
		// The child is a new instance: it starts with the definition
		// registered now, and records that definition's hash.
		child := m.def(step.Sub)
		if child == nil {
			m.fail(d, now, w, fmt.Sprintf("sub-workflow %q of step %q is not registered", step.Sub, step.Name))
			return
		}
		pub, err := replay.PublicState(w.State)
		if err != nil {
			m.fail(d, now, w, err.Error())
			return
		}
		m.startWorkflow(d, now, child, pub, "", w, w.Step)
	}
}

// inherited returns the job options a sub-workflow inherits from its
// ancestors (WF-8): each ancestor's own workflow-wide options over those it
// inherited. A child records them when it starts, while its parent runs
// under its own definition, so they hold for every step it runs whatever
// becomes of its ancestors: parked under a changed definition, cancelled
// (children are not cancelled with their parent, WF-17) or gone.
//
// A child started before workflow_started recorded them resolves them
// from its ancestors now: one that left the state is read from the
// terminal index, and a parked one (its definition not registered) gives
// none.
func (m *Machine) inherited(w *replay.Workflow) JobDefaults {
	if w.Inherited {
		var out JobDefaults
		if w.InheritedQueue != "" {
			q := w.InheritedQueue
			out.Queue = &q
		}
		if w.InheritedPriority != 0 {
			p := w.InheritedPriority - 1
			out.Priority = &p
		}
		if w.InheritedMaxAttempts != 0 {
			n := w.InheritedMaxAttempts
			out.MaxAttempts = &n
		}
		return out
	}
	var out JobDefaults
	parent := w.ParentID
	for depth := 0; parent != "" && depth < 64; depth++ {
		var def *WorkflowDef
		if p := m.st.Workflows[parent]; p != nil {
			def, parent = m.defOf(p), p.ParentID
		} else if s, ok := m.lookup(parent); ok && s.Name != "" {
			if d := m.def(s.Name); d != nil && d.Runs(s.DefinitionHash) {
				def = d
			}
			parent = s.ParentID
		} else {
			break
		}
		if def != nil {
			if out.Queue == nil {
				out.Queue = def.Defaults.Queue
			}
			if out.Priority == nil {
				out.Priority = def.Defaults.Priority
			}
			if out.MaxAttempts == nil {
				out.MaxAttempts = def.Defaults.MaxAttempts
			}
		}
	}
	return out
}

// childInherits returns what a child started by parent's SubWorkflow step
// inherits (WF-8): parent's own workflow-wide options over those parent
// inherited. parent is running its step, so its definition is registered.
func (m *Machine) childInherits(parent *replay.Workflow) JobDefaults {
	out := m.inherited(parent)
	if def := m.defOf(parent); def != nil {
		if q := def.Defaults.Queue; q != nil {
			out.Queue = q
		}
		if p := def.Defaults.Priority; p != nil {
			out.Priority = p
		}
		if n := def.Defaults.MaxAttempts; n != nil {
			out.MaxAttempts = n
		}
	}
	return out
}

// doneBranches reports which of the n branches of w's step have an
// output (attempt_succeeded), and how many have none, in one pass over
// the outputs.
func doneBranches(w *replay.Workflow, n int) (done []bool, left int) {
	done, left = make([]bool, n), n
	for _, o := range w.Branches {
		if o.Branch >= 0 && int(o.Branch) < n && !done[o.Branch] {
			done[o.Branch] = true
			left--
		}
	}
	return done, left
}

// mergeBranches merges the branch outputs in journal order, the later one
// winning a collision (WF-4). Each output is decoded once into one map,
// encoded once: merging them one by one re-encoded the growing map per
// branch, quadratic in a wide Parallel step. A merge that fails (the
// merged map past record.ValueBytesMax) is an error naming the branch
// that took it there: no branch's output is left out.
func mergeBranches(w *replay.Workflow) ([]byte, error) {
	if len(w.Branches) == 1 {
		return w.Branches[0].Output, nil
	}
	merged, some := map[string]any{}, false
	for _, b := range w.Branches {
		if len(b.Output) == 0 {
			continue
		}
		out, err := replay.DecodeState(b.Output)
		if err != nil {
			return mergeBranchesOneByOne(w)
		}
		some = true
		for k, v := range out {
			if replay.IsPublicKey(k) {
				merged[k] = v
			}
		}
	}
	if !some {
		return nil, nil
	}
	enc, err := replay.EncodeState(merged)
	if err != nil {
		return mergeBranchesOneByOne(w)
	}
	return enc, nil
}

// mergeBranchesOneByOne is mergeBranches one branch at a time: the same
// result, and on failure the branch at which it failed.
func mergeBranchesOneByOne(w *replay.Workflow) ([]byte, error) {
	var out []byte
	for i, b := range w.Branches {
		merged, err := replay.MergeState(out, b.Output)
		if err != nil {
			return nil, fmt.Errorf("branch %d of %d: %w", i+1, len(w.Branches), err)
		}
		out = merged
	}
	return out, nil
}

// completeBranches completes the current step with its branches' merged
// outputs, or fails the workflow if they cannot be merged (by its
// deadline at or after deadline_at, WD-7).
func (m *Machine) completeBranches(d *Decision, now time.Time, w *replay.Workflow) {
	out, err := mergeBranches(w)
	if err != nil {
		m.failStep(d, now, w, fmt.Sprintf("%s: outputs cannot be merged: %v", m.stepLabel(w), err))
		return
	}
	m.completeStep(d, now, w, out, nil)
}

// stateMergeSlack bounds how much longer a merged state's encoding can be
// than its two inputs together: a map header grows by at most 4 bytes.
const stateMergeSlack = 16

// completeStep completes the current step, or, at or after deadline_at,
// expires the workflow instead (WD-7).
func (m *Machine) completeStep(d *Decision, now time.Time, w *replay.Workflow, output []byte, consumed []uint64) {
	if w.DeadlineAt != 0 && deadlines.WorkflowExpired(time.Unix(0, w.DeadlineAt), now) {
		m.expire(d, now, w, DetectedByStepBoundary)
		return
	}
	limit := m.cfg.StateBytesMax
	if limit > 0 && len(output) > limit {
		m.fail(d, now, w, fmt.Sprintf("%s: output is %d bytes, limit %d", m.stepLabel(w), len(output), limit))
		return
	}
	// The state the output makes is checked before step_completed is
	// decided, not after: a workflow failed with a state past the limit
	// would carry it on, into its terminal-index summary when cancelled
	// or completed, and into a retried step's records (a child's
	// workflow_started), which the journal refuses (RL-11). The merge is
	// only redone here when the sizes could reach the limit.
	if limit > 0 && len(output) > 0 && len(w.State)+len(output)+stateMergeSlack > limit {
		merged, err := replay.MergeState(w.State, output)
		if err != nil {
			m.fail(d, now, w, fmt.Sprintf("%s: output cannot be merged into the state: %v", m.stepLabel(w), err))
			return
		}
		if pub, _ := replay.PublicState(merged); len(pub) > limit {
			m.fail(d, now, w, fmt.Sprintf("%s: workflow state would be %d bytes, limit %d", m.stepLabel(w), len(pub), limit))
			return
		}
	}
	m.emit(d, w.ID, &record.StepCompleted{WorkflowID: w.ID, Step: w.Step, Next: w.Step + 1, Output: output, Consumed: consumed})
	m.enter(d, now, w)
}

// resumeWait settles a wait: workflow_resumed with its cause, then the
// step's completion; or the expiry alone past deadline_at (WD-7, WD-11).
func (m *Machine) resumeWait(d *Decision, now time.Time, w *replay.Workflow, cause string, output []byte, consumed []uint64) {
	if w.DeadlineAt != 0 && deadlines.WorkflowExpired(time.Unix(0, w.DeadlineAt), now) {
		m.expire(d, now, w, DetectedByStepBoundary)
		return
	}
	m.emit(d, w.ID, &record.WorkflowResumed{WorkflowID: w.ID, Cause: cause})
	m.completeStep(d, now, w, output, consumed)
}

func (m *Machine) completeWorkflow(d *Decision, now time.Time, w *replay.Workflow) {
	sum := replay.SummarizeWorkflow(w)
	sum.Status = replay.WorkflowCompleted
	sum.FinishedAt = now.UnixNano()
	// Buried step jobs of an entry that failed before a retry (WF-18)
	// can never run again: they leave the state with it (RL-11).
	buried := m.buriedSummaries(w.ID)
	m.emit(d, w.ID, &record.WorkflowCompleted{WorkflowID: w.ID, ArchiveBuried: len(buried) > 0})
	sum.Seq = m.nextSeq - 1
	m.indexWorkflow(d, sum)
	m.indexJobs(d, now, buried, sum.Seq)
	m.react(d, now, w, replay.WorkflowCompleted, sum.State, "")
}

func (m *Machine) indexWorkflow(d *Decision, sum replay.WorkflowSummary) {
	if v, err := replay.EncodeWorkflowSummary(sum); err == nil {
		d.Index = append(d.Index, IndexEntry{ID: sum.ID, Value: v})
	}
	m.recent[sum.ID] = recentWorkflow{seq: sum.Seq, sum: SummaryOf(sum)}
	if sum.IdempotencyKey != "" {
		m.recentIdem[sum.IdempotencyKey] = recentIdem{seq: sum.Seq, v: replay.Idempotent{WorkflowID: sum.ID, Name: sum.Name}}
	}
}

// lookup returns the summary of a workflow that left the state.
func (m *Machine) lookup(id string) (WorkflowSummary, bool) {
	if r, ok := m.recent[id]; ok {
		return r.sum, true
	}
	if m.cfg.LookupFunc != nil {
		return m.cfg.LookupFunc(id)
	}
	return WorkflowSummary{}, false
}

// fail fails a workflow with msg (WF-20): workflow_failed, then job_buried
// for its pending jobs, then the reactions of its parent and dependants.
func (m *Machine) fail(d *Decision, now time.Time, w *replay.Workflow, msg string) {
	// The error carries user text (a step's error, a dependency's id): it
	// is bounded so that the record, and a later summary with the state,
	// always fit (RL-11).
	msg = clip(msg, FailureMessageBytesMax)
	delete(m.tallies, w.ID) // no wait of w's survives its failure
	m.emit(d, w.ID, &record.WorkflowFailed{WorkflowID: w.ID, Step: w.Step, Error: msg, At: now.UnixNano()})
	m.buryPending(d, now, w.ID, CodeWorkflowFailed, msg, false)
	pub, _ := replay.PublicState(w.State)
	m.react(d, now, w, replay.WorkflowFailed, pub, msg)
}

// expire is WD-8's append: workflow_failed "Deadline exceeded", then
// workflow_deadline_exceeded, then job_buried for every pending job, then
// the reactions of dependants and parent.
func (m *Machine) expire(d *Decision, now time.Time, w *replay.Workflow, by string) {
	delete(m.tallies, w.ID)
	m.emit(d, w.ID, &record.WorkflowFailed{WorkflowID: w.ID, Step: w.Step, Error: MsgDeadlineExceeded, At: now.UnixNano()})
	// The expiry itself needs no definition (WD-5 reads the status and
	// deadline_at, both recorded), so a parked workflow expires too. Its
	// handler is its own definition's OnDeadline (WD-2), which
	// workflow_started recorded: a parked workflow's handler is called
	// too, or recorded not_registered if the handler is not (WD-10).
	// Workflows started before the name was recorded take it from their
	// definition; a parked one of those expires with none, since another
	// definition's handler would get a state it does not describe.
	handler := w.OnDeadline
	if def := m.defOf(w); handler == "" && def != nil {
		handler = def.OnDeadline
	}
	m.emit(d, w.ID, &record.WorkflowDeadlineExceeded{WorkflowID: w.ID, DeadlineAt: w.DeadlineAt,
		DetectedAt: now.UnixNano(), DetectedBy: by, Handler: handler})
	if handler != "" {
		m.expiriesNew = append(m.expiriesNew, m.nextSeq-1) // its obligation (WD-10)
	}
	m.buryPending(d, now, w.ID, CodeDeadlineExceeded, MsgDeadlineExceeded, false)
	pub, _ := replay.PublicState(w.State)
	m.react(d, now, w, replay.WorkflowFailed, pub, MsgDeadlineExceeded)
}

// buryPending buries the pending jobs of a workflow, in enqueue order.
// With final (the workflow is cancelled), each leaves the state as it is
// buried, its summary going to the terminal index (RL-11).
func (m *Machine) buryPending(d *Decision, now time.Time, wfID, code, msg string, final bool) {
	for _, j := range m.workflowJobs(wfID, replay.JobPending) {
		sum := replay.Summarize(j)
		m.emit(d, j.Stream, &record.JobBuried{JobID: j.ID, Code: code, Error: msg, Final: final})
		if final {
			sum.Status, sum.LastCode, sum.LastError = replay.JobBuried, code, msg
			m.indexJob(d, now, sum, m.nextSeq-1)
		}
	}
}

// workflowJobs returns the jobs of workflow wfID with the given status, in
// enqueue order.
func (m *Machine) workflowJobs(wfID string, status replay.JobStatus) []*replay.Job {
	var js []*replay.Job
	for _, j := range m.st.WorkflowJobs(wfID) {
		if j.Status == status {
			js = append(js, j)
		}
	}
	return js
}

// buriedSummaries returns the summaries of workflow wfID's buried step
// jobs, in enqueue order, taken before a record that archives them
// (archive_buried) takes them out of the state.
func (m *Machine) buriedSummaries(wfID string) []replay.JobSummary {
	var sums []replay.JobSummary
	for _, j := range m.workflowJobs(wfID, replay.JobBuried) {
		sums = append(sums, replay.Summarize(j))
	}
	return sums
}

// indexJobs sets the terminal-index entries of jobs archived with the
// record at seq.
func (m *Machine) indexJobs(d *Decision, now time.Time, sums []replay.JobSummary, seq uint64) {
	for _, s := range sums {
		m.indexJob(d, now, s, seq)
	}
}

// indexJob sets the terminal-index entry of a job that leaves the state
// with the record at seq.
func (m *Machine) indexJob(d *Decision, now time.Time, sum replay.JobSummary, seq uint64) {
	sum.Seq, sum.FinishedAt = seq, now.UnixNano()
	if v, err := replay.EncodeSummary(sum); err == nil {
		d.Index = append(d.Index, IndexEntry{ID: sum.ID, Value: v})
	}
	m.x.forget(sum.ID)
}

// react applies the consequences of w reaching status for its parent
// (WF-8, WD-15) and the workflows waiting on it (WF-7), in the same unit
// (WF-11): with many waiters it is larger than a group commit, and the
// journal commits it alone, in a group of its own.
func (m *Machine) react(d *Decision, now time.Time, w *replay.Workflow, status replay.WorkflowStatus, pub []byte, msg string) {
	if p := m.st.Workflows[w.ParentID]; p != nil && p.Step == w.ParentStep && p.Child == w.ID &&
		(p.Status == replay.WorkflowRunning || p.Status == replay.WorkflowPaused) {
		if m.unitHalfFull(d) {
			// A chain of nested workflows, each finishing with its
			// child, grows this append by a state per level: the rest
			// of the chain goes on in appends of its own, as waiters do.
			m.deferWait(p.ID)
		} else {
			m.childFinished(d, now, p, w.ID, status, pub, msg)
		}
	}
	waiters := m.waiters[w.ID]
	if len(waiters) == 0 {
		return
	}
	ws := append([]string(nil), waiters...)
	sort.Strings(ws)
	var keep []string
	for i, id := range ws {
		if i > 0 && id == ws[i-1] {
			continue // listed once per occurrence of w in x's wait: reacts once
		}
		x := m.st.Workflows[id]
		if x == nil || x.Status != replay.WorkflowWaitingWorkflows || x.Wait == nil {
			continue
		}
		t, fresh := m.tally(x)
		k := t.deps[w.ID]
		if k == 0 {
			continue // a stale entry: x waits on other workflows now
		}
		if !fresh {
			t.underway -= int(k) // w was under way, and has finished
		}
		// x's wait is settled by x's own step (mode, quorum, result key):
		// a parked x stays a waiter until its definition is registered.
		// w's own definition plays no part: w's outcome is recorded.
		def := m.defOf(x)
		if def == nil || int(x.Step) >= len(def.Steps) {
			keep = append(keep, id)
			continue
		}
		if m.unitHalfFull(d) {
			// x's reaction could take this append past what the journal
			// commits atomically (RL-4), and a refused append stops the
			// engine (RL-2): x settles in an append of its own, right
			// after (settleDeferred), or in the next run if this one
			// stops dispatching first.
			m.deferWait(x.ID)
			keep = append(keep, id)
			continue
		}
		step := &def.Steps[x.Step]
		if t.undecided(step, len(x.Wait.Workflows), status) ||
			!m.settleWorkflowsWait(d, now, x, step, x.Wait.Workflows, true) {
			keep = append(keep, id)
		} else {
			delete(m.tallies, x.ID)
		}
	}
	m.waiterEntries -= len(waiters) - len(keep)
	if len(keep) == 0 {
		delete(m.waiters, w.ID)
	} else {
		m.waiters[w.ID] = keep
	}
}

// addWaiter files workflow id as a waiter of each of deps (WF-7). A waiter
// leaves the lists when a dependency finishes (react), but one that leaves
// its wait otherwise (cancelled, failed, expired) would stay under the
// dependencies that never finish, such as an unknown id under Any: once
// the entries have doubled since the last sweep, sweepWaiters drops those
// of workflows no longer waiting on them (RL-11).
func (m *Machine) addWaiter(id string, deps []string) {
	for _, dep := range deps {
		m.waiters[dep] = append(m.waiters[dep], id)
	}
	m.waiterEntries += len(deps)
	if m.waiterEntries > waitersSweepMin && m.waiterEntries > 2*m.waitersSwept {
		m.sweepWaiters()
	}
}

// nestWaiters raises the nested count of the tallies of the waits that
// name workflow id, which has just entered a wait for workflows.
func (m *Machine) nestWaiters(id string) {
	for _, x := range m.waiters[id] { // once per time x's wait names id
		if t := m.tallies[x]; t != nil && t.deps[id] > 0 {
			t.nested++
		}
	}
}

// waitersSweepMin is the number of waiter entries under which they are
// never swept.
const waitersSweepMin = 1024

// sweepWaiters drops the waiter entries of workflows no longer waiting on
// that dependency, and the dependencies left with none.
func (m *Machine) sweepWaiters() {
	n := 0
	waiters := make(map[string][]string, len(m.waiters))
	for id, t := range m.tallies {
		if x := m.st.Workflows[id]; x == nil || x.Wait != t.wait {
			delete(m.tallies, id)
		}
	}
	for dep, ids := range m.waiters {
		var keep []string
		for _, id := range ids {
			if x := m.st.Workflows[id]; x != nil && x.Status == replay.WorkflowWaitingWorkflows && x.Wait != nil {
				if t, _ := m.tally(x); t.deps[dep] > 0 {
					keep = append(keep, id)
				}
			}
		}
		if len(keep) > 0 {
			waiters[dep] = keep
			n += len(keep)
		}
	}
	m.waiters, m.waiterEntries, m.waitersSwept = waiters, n, n
}

// waitTally is what the machine keeps of one workflow's wait for
// workflows (WF-7), so that each dependency finishing costs O(1) rather
// than a pass over the wait's ids: a wait for 16 000 workflows, each
// finishing in turn, cost 16 000² steps. It is derived, never recorded:
// it only lets react skip deciding a wait in full when that cannot
// settle it, and the full decision reads the state alone.
type waitTally struct {
	// wait is the wait described: x.Wait is a new value at each
	// workflow_waiting, so another one means x waits anew.
	wait *replay.Wait
	// deps counts each id's occurrences in the wait.
	deps map[string]int32
	// underway is a lower bound on the ids still under way (in the state
	// and not failed): exact when counted, then lowered as dependencies
	// finish. A failed dependency that is retried (WF-18) is under way
	// again without raising it, which only makes more decisions full.
	underway int
	// nested is an upper bound on the ids under way that wait for
	// workflows themselves: counted with the tally, raised as one enters
	// such a wait (nestWaiters), never lowered. Those may be unable to
	// finish through a cycle of waits, so that only the others are sure
	// to finish.
	nested int
}

// tally returns x's wait tally, counting it from the state if it has none
// for its current wait (fresh: it already reflects every outcome applied
// so far).
func (m *Machine) tally(x *replay.Workflow) (t *waitTally, fresh bool) {
	if t = m.tallies[x.ID]; t != nil && t.wait == x.Wait {
		return t, false
	}
	t = &waitTally{wait: x.Wait, deps: make(map[string]int32, len(x.Wait.Workflows))}
	m.waitIDsRead += len(x.Wait.Workflows)
	for _, id := range x.Wait.Workflows {
		t.deps[id]++
		if y := m.st.Workflows[id]; y != nil && y.Status != replay.WorkflowFailed {
			t.underway++
			if y.Status == replay.WorkflowWaitingWorkflows {
				t.nested++
			}
		}
	}
	m.tallies[x.ID] = t
	return t, true
}

// waitNeed is the number of a wait's n dependencies that must complete
// for it to succeed: all of them, one (Any), or its quorum.
func waitNeed(step *StepDef, n int) int { return modeNeed(step.Mode, step.Quorum, n) }

// modeNeed is waitNeed for a wait of mode and quorum, as recorded.
func modeNeed(mode string, quorum, n int) int {
	switch mode {
	case ModeAny:
		return 1
	case ModeQuorum:
		return quorum
	}
	return n
}

// undecided reports that a dependency finishing with status cannot have
// settled a wait for n ids, from the tally alone. Deciding the wait in
// full costs a terminal-index read for every dependency that left the
// state, on the engine's one loop: with hundreds of dependencies
// finishing one by one, that was quadratic. The last evaluation left the
// wait undecided, so only what this outcome can move may settle it now:
//   - a completion settles All only once nothing is under way, and Any or
//     Quorum only once enough have finished to be the quorum (1 for Any)
//     if all of them completed;
//   - a failure settles Any and Quorum only once too few are under way to
//     still make the quorum, and All at once. With dependencies that wait
//     for workflows themselves, it may also have been the way out of a
//     cycle of waits through this one, which can then never be met
//     (WF-10): only once too few of those under way are sure to finish
//     (do not wait for workflows) is the wait decided in full, which
//     looks for the cycle (neverMet).
//
// A completion never leaves a wait unable to be met. A failure that does
// so to waits of a cycle reaches one of them here, since one of them
// names the failed workflow; each of the others names it or another of
// them, and is decided in full when that one fails.
//
// underway is a lower bound and nested an upper one, so each answer holds
// for the true counts. A wait whose reaction was deferred, or whose
// definition was not registered, is decided in full later (settleDeferred,
// WorkflowRegistered).
func (t *waitTally) undecided(step *StepDef, n int, status replay.WorkflowStatus) bool {
	need := waitNeed(step, n)
	switch {
	case step.Mode == ModeAll && status != replay.WorkflowCompleted:
		return false
	case step.Mode == ModeAll:
		return t.underway > 0
	case status == replay.WorkflowCompleted:
		return n-t.underway < need
	}
	return t.underway-t.nested >= need
}

// childFinished applies the outcome of p's child (WF-8): its public state
// completes p's SubWorkflow step; a failed or cancelled child fails p.
func (m *Machine) childFinished(d *Decision, now time.Time, p *replay.Workflow, child string, status replay.WorkflowStatus, pub []byte, msg string) {
	switch status {
	case replay.WorkflowCompleted:
		m.completeStep(d, now, p, pub, nil)
	default:
		m.failStep(d, now, p, fmt.Sprintf("sub-workflow %s %s: %s", child, status, msg))
	}
}

// waitCycleNodesMax bounds the waits a search for waits that can never be
// met visits (neverMet), and waitCycleDepsMax the dependencies it reads
// over them: past either, it concludes nothing and the waits stay as they
// are.
const (
	waitCycleNodesMax = 4096
	waitCycleDepsMax  = 16 * waitCycleNodesMax
)

// Why a dependency that waits for workflows itself counts as failed
// (neverMet): it can finish only once the waiting workflow has, or its
// own wait can never be met at all.
const (
	whyWaitsForThis = "it waits for this workflow"
	whyNeverMet     = "its wait can never be met"
)

// waitNode is one wait in a search for waits that can never be met.
type waitNode struct {
	need, have int
	met        bool
	// waiters lists the nodes whose wait names this one, once for each
	// time it names it.
	waiters []int32
}

// neverMet finds the dependencies that keep w's wait for ids, which needs
// need of them to complete, from ever being met: those that wait for
// workflows themselves and can never finish (WF-7, WF-10). deps are the
// ids' states as settleWorkflowsWait read them. It returns, for each id,
// why it can never finish, or "", and nil if w's wait can still be met or
// the search stopped at its bounds.
//
// It is a least fixpoint, not a path search. A workflow waiting for
// workflows can finish only if its wait can still collect enough
// completions (All: every dependency; Any: one; Quorum: its quorum) from
// dependencies that can finish themselves. Workflows under way (running,
// paused, waiting for a signal, delayed, quarantined) and completed ones
// can; failed, cancelled and unknown ones cannot. Starting from those, a
// wait that collects enough is met, which may let the waits naming it
// collect enough in turn. A wait never met that way never will be: what
// it lacks are completions of workflows that cannot finish, or that wait,
// directly or through others, for workflows that need them to finish
// first (a cycle). Whatever the modes: W1 waiting Any(W2) while W2 waits
// Any(W1) are both never met; W1 waiting Quorum(2 of W2, W3, W4) while W2
// and W3 wait All(W1) is never met, but would be with a quorum of 1,
// through W4 if it can finish.
//
// It reads the state, and the terminal index for dependencies that left
// it, visiting waits in the order they name one another, so its answer
// depends on neither map order nor the order in which the waits were
// entered: the cycle is found by whichever wait closes it.
func (m *Machine) neverMet(w *replay.Workflow, need int, ids []string, deps []depState) []string {
	const (
		able  = -1 // completed, or under way and able to finish
		never = -2 // failed, cancelled or unknown: it can never complete
	)
	nodes := []waitNode{{need: need}}
	waits := []*replay.Wait{nil}    // the root's wait is ids, not recorded yet on entry
	at := map[string]int32{w.ID: 0} // a node's index, able or never
	reads := 0
	for i := 0; i < len(nodes); i++ {
		list := ids
		if i > 0 {
			list = waits[i].Workflows
			m.waitIDsRead += len(list)
		}
		if reads += len(list); reads > waitCycleDepsMax {
			return nil
		}
		for k, id := range list {
			j, seen := at[id]
			if !seen {
				var ds depState
				if i == 0 {
					ds = deps[k]
				} else {
					ds = m.depState(id)
				}
				switch {
				case ds.live != nil && ds.status == replay.WorkflowWaitingWorkflows && ds.live.Wait != nil:
					if len(nodes) >= waitCycleNodesMax {
						return nil
					}
					j = int32(len(nodes))
					wt := ds.live.Wait
					nodes = append(nodes, waitNode{need: modeNeed(wt.Mode, int(wt.Quorum), len(wt.Workflows))})
					waits = append(waits, wt)
				case ds.known && ds.status != replay.WorkflowFailed && ds.status != replay.WorkflowCancelled:
					j = able
				default:
					j = never
				}
				at[id] = j
			}
			switch j {
			case able:
				nodes[i].have++
			case never:
			default:
				nodes[j].waiters = append(nodes[j].waiters, int32(i))
			}
		}
	}
	var met []int32
	for i := range nodes {
		if nodes[i].have >= nodes[i].need {
			nodes[i].met = true
			met = append(met, int32(i))
		}
	}
	for len(met) > 0 {
		i := met[len(met)-1]
		met = met[:len(met)-1]
		for _, j := range nodes[i].waiters {
			if nodes[j].have++; !nodes[j].met && nodes[j].have >= nodes[j].need {
				nodes[j].met = true
				met = append(met, j)
			}
		}
	}
	if nodes[0].met {
		return nil
	}
	// The waits that wait for w's, directly or through others, are those
	// that name the root, then those that name one of them, and so on.
	reach := make([]bool, len(nodes))
	next := []int32{0}
	for len(next) > 0 {
		i := next[len(next)-1]
		next = next[:len(next)-1]
		for _, j := range nodes[i].waiters {
			if !reach[j] {
				reach[j] = true
				next = append(next, j)
			}
		}
	}
	why := make([]string, len(ids))
	for k, id := range ids {
		switch j := at[id]; {
		case j <= 0 || nodes[j].met:
		case reach[j]:
			why[k] = whyWaitsForThis
		default:
			why[k] = whyNeverMet
		}
	}
	return why
}

// failStep fails w because its current step ended in failure at now: a
// child failed or was cancelled, a wait became impossible, the step's
// output (merged branches, a wait's result) cannot be stored. At or after
// deadline_at the workflow fails by its deadline instead, with its
// expiry records and on-deadline handler, as a failing step attempt does
// (WD-7: a step that ends at or after the deadline never decides the
// workflow's outcome, whichever way it ends and whoever notices first).
func (m *Machine) failStep(d *Decision, now time.Time, w *replay.Workflow, msg string) {
	if w.DeadlineAt != 0 && deadlines.WorkflowExpired(time.Unix(0, w.DeadlineAt), now) {
		m.expire(d, now, w, DetectedByStepBoundary)
		return
	}
	m.fail(d, now, w, msg)
}

// settleChild applies the outcome of p's child if the child finished and
// p still waits for it at its SubWorkflow step: a reaction react deferred,
// or one a run left undecided when it stopped.
func (m *Machine) settleChild(d *Decision, now time.Time, p *replay.Workflow) {
	if p.Child == "" || (p.Status != replay.WorkflowRunning && p.Status != replay.WorkflowPaused) {
		return
	}
	if c := m.st.Workflows[p.Child]; c != nil {
		if c.Status == replay.WorkflowFailed {
			pub, _ := replay.PublicState(c.State)
			m.childFinished(d, now, p, c.ID, c.Status, pub, c.Error)
		}
		return // still running, paused or waiting
	}
	s, ok := m.lookup(p.Child)
	if !ok {
		return
	}
	status, _ := replay.ParseWorkflowStatus(s.Status)
	msg := s.Error
	if status == replay.WorkflowCancelled {
		msg = "cancelled"
	}
	m.childFinished(d, now, p, p.Child, status, s.State, msg)
}

// unitHalfFull reports whether the unit being decided holds half of the
// journal's cap on one append, in records or in bytes. Under half, one
// more waiter's reaction fits: a workflow definition's largest transition
// takes far less than the other half (see the api package's limits), and
// the reactions it sets off for waiters of its own are checked here too.
func (m *Machine) unitHalfFull(d *Decision) bool {
	if m.cfg.UnitRecordsMax <= 0 && m.cfg.UnitBytesMax <= 0 {
		return false
	}
	if recs := len(d.Records) - d.unitRecords; m.cfg.RecordBytesMax > 0 && m.cfg.UnitRecordsMax > 0 &&
		recs < m.cfg.UnitRecordsMax/2 && (recs+len(d.Index)-d.unitIndex)*m.cfg.RecordBytesMax < m.cfg.UnitBytesMax/2 {
		// No record or index entry is longer than a record: too few to
		// reach half the bytes, whatever they hold. The common case
		// encodes nothing.
		return false
	}
	recs, bytes, buf := d.unitSize(m.sizeBuf)
	m.sizeBuf = buf[:0]
	return (m.cfg.UnitRecordsMax > 0 && recs >= m.cfg.UnitRecordsMax/2) ||
		(m.cfg.UnitBytesMax > 0 && bytes >= m.cfg.UnitBytesMax/2)
}

// deferWait queues the wait of workflow id to be checked in an append of
// its own (settleDeferred).
func (m *Machine) deferWait(id string) {
	if !m.deferredSet[id] {
		m.deferredSet[id] = true
		m.deferred = append(m.deferred, id)
	}
}

// settleDeferred settles the deferred reactions (react), in order, each
// in a unit of its own: a wait for workflows (WF-7) or a parent's
// SubWorkflow step (WF-8). One that is settled already, or not yet,
// decides nothing; one whose definition is not registered waits for it,
// as in react.
func (m *Machine) settleDeferred(d *Decision, now time.Time) {
	// Settling may defer more (a waiter that finishes has waiters of its
	// own): the loop runs until none is left.
	for i := 0; i < len(m.deferred); i++ {
		id := m.deferred[i]
		delete(m.deferredSet, id)
		x := m.st.Workflows[id]
		if x == nil || m.defOf(x) == nil {
			continue
		}
		d.cut()
		if x.Status == replay.WorkflowWaitingWorkflows {
			m.settleWait(d, now, x)
		} else {
			m.settleChild(d, now, x)
		}
	}
	clear(m.deferred)
	m.deferred = m.deferred[:0]
}

// waitIDs resolves the ids of a WaitForWorkflows step: given, or read from
// a public state key on entry (WF-7).
func (m *Machine) waitIDs(w *replay.Workflow, step *StepDef) ([]string, error) {
	ids := step.IDs
	if step.FromKey != "" {
		st, err := replay.DecodeState(w.State)
		if err != nil {
			return nil, err
		}
		raw, ok := st[step.FromKey]
		if !ok {
			return nil, fmt.Errorf("step %q: state key %q holding workflow ids is missing", step.Name, step.FromKey)
		}
		list, ok := raw.([]any)
		if !ok {
			return nil, fmt.Errorf("step %q: state key %q is not a list of workflow ids", step.Name, step.FromKey)
		}
		ids = nil
		for _, v := range list {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("step %q: state key %q holds a non-string id", step.Name, step.FromKey)
			}
			// A workflow id is a stream id: a string that is not one names
			// no workflow, and the journal would refuse it as an index key.
			if err := record.ValidateStream(s); err != nil {
				return nil, fmt.Errorf("step %q: state key %q holds an invalid workflow id: %v", step.Name, step.FromKey, err)
			}
			ids = append(ids, s)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("step %q: no workflows to wait for", step.Name)
	}
	if step.Mode == ModeQuorum && step.Quorum > len(ids) {
		return nil, fmt.Errorf("step %q: quorum %d larger than its %d workflows", step.Name, step.Quorum, len(ids))
	}
	return ids, nil
}

type depState struct {
	status replay.WorkflowStatus
	live   *replay.Workflow // a dependency still in the state
	state  []byte           // the public state of one that left it
	known  bool
}

func (m *Machine) depState(id string) depState {
	if m.st.Quarantined[id] != nil {
		// Its outcome cannot be known while it is quarantined
		// (spec/reliability.md §4.4): to its dependants it is still under
		// way, and never settles their wait.
		return depState{status: replay.WorkflowRunning, known: true}
	}
	if x := m.st.Workflows[id]; x != nil {
		return depState{status: x.Status, live: x, known: true}
	}
	if s, ok := m.lookup(id); ok {
		st, _ := replay.ParseWorkflowStatus(s.Status)
		return depState{status: st, state: s.State, known: true}
	}
	return depState{}
}

// public returns the dependency's public state.
func (ds depState) public() []byte {
	if ds.live != nil {
		pub, _ := replay.PublicState(ds.live.State)
		return pub
	}
	return ds.state
}

// settleWorkflowsWait decides a WaitForWorkflows step if its outcome is
// known (WF-7) and reports whether it did. waiting says whether the
// workflow is parked on it (then a completion resumes it first).
func (m *Machine) settleWorkflowsWait(d *Decision, now time.Time, w *replay.Workflow, step *StepDef, ids []string, waiting bool) bool {
	completed, failed, underway := 0, 0, 0
	failedAt, failedID := len(ids), ""
	failedFor := func(i int, why string) {
		failed++
		if i < failedAt {
			failedAt, failedID = i, ids[i]+" ("+why+")"
		}
	}
	nested := false
	deps := make([]depState, len(ids))
	m.waitIDsRead += len(ids)
	for i, id := range ids {
		ds := m.depState(id)
		deps[i] = ds
		if ds.live != nil && ds.status != replay.WorkflowFailed {
			underway++
		}
		switch {
		case id == w.ID:
			// A workflow that waits for itself can never see itself
			// finish: the wait is impossible (WF-10).
			failedFor(i, "the workflow itself")
		case !ds.known:
			failedFor(i, "unknown workflow")
		case ds.status == replay.WorkflowCompleted:
			completed++
		case ds.status == replay.WorkflowFailed || ds.status == replay.WorkflowCancelled:
			failedFor(i, ds.status.String())
		case ds.status == replay.WorkflowWaitingWorkflows:
			nested = true // it may wait for w, or never finish: see below
		}
	}
	n := len(ids)
	need := waitNeed(step, n)
	var ok, impossible bool
	decide := func() {
		switch step.Mode {
		case ModeAny, ModeQuorum:
			ok = completed >= need
			impossible = n-failed < need
		default:
			ok = completed == n
			impossible = failed > 0
		}
	}
	decide()
	if nested && !ok && !impossible {
		// Nor can w see one finish that waits for it, or whose own wait
		// can never be met: a cycle of waits, whatever their modes
		// (WF-10). Only a dependency that waits for workflows itself can
		// be one, so one under way costs no search.
		for i, why := range m.neverMet(w, need, ids, deps) {
			if why != "" {
				failedFor(i, why)
			}
		}
		decide()
	}
	switch {
	case ok:
		var out []byte
		if step.ResultKey != "" {
			// The states are decoded only for the result that settles the
			// wait, not on every evaluation that leaves it undecided.
			result := make(map[string]any, len(ids))
			for i, ds := range deps {
				if ds.known {
					st, _ := replay.DecodeState(ds.public())
					result[ids[i]] = map[string]any{"status": ds.status.String(), "state": st}
				}
			}
			var err error
			if out, err = replay.EncodeState(map[string]any{step.ResultKey: result}); err != nil {
				m.failStep(d, now, w, fmt.Sprintf("step %q: the result cannot be stored under %q: %v", step.Name, step.ResultKey, err))
				return true
			}
		}
		if waiting {
			m.resumeWait(d, now, w, "workflows", out, nil)
		} else {
			m.completeStep(d, now, w, out, nil)
		}
		return true
	case impossible:
		m.failStep(d, now, w, fmt.Sprintf("step %q: dependency %s", step.Name, failedID))
		return true
	}
	if t := m.tallies[w.ID]; t != nil && t.wait == w.Wait {
		t.underway = underway // counted in full: exact again
	}
	return false
}

// settleSignals completes a WaitForSignal step that the stored signals
// satisfy (WF-6): resumed if the workflow was waiting, at once on entry.
// It reports whether they did. Their output that cannot be encoded (a
// payload nested as deep as a state may be, put under the step's result
// key) fails the workflow instead of being lost.
func (m *Machine) settleSignals(d *Decision, now time.Time, w *replay.Workflow, step *StepDef, waiting bool) bool {
	out, consumed, ok, err := m.signalsSatisfy(w, step)
	switch {
	case !ok:
		return false
	case err != nil:
		m.failStep(d, now, w, err.Error())
	case waiting:
		m.resumeWait(d, now, w, "signal", out, consumed)
	default:
		m.completeStep(d, now, w, out, consumed)
	}
	return true
}

// signalsSatisfy reports whether the stored signals satisfy a
// WaitForSignal step, oldest first (WF-6), with the output to merge and the
// seqs consumed, or the error encoding the output.
func (m *Machine) signalsSatisfy(w *replay.Workflow, step *StepDef) ([]byte, []uint64, bool, error) {
	var picked []replay.Signal
	if step.Mode == ModeAny {
		for _, sg := range w.Signals {
			if slices.Contains(step.Signals, sg.Name) {
				picked = append(picked, sg)
				break
			}
		}
		if len(picked) == 0 {
			return nil, nil, false, nil
		}
	} else {
		for _, name := range step.Signals {
			found := false
			for _, sg := range w.Signals {
				if sg.Name == name && !pickedSeq(picked, sg.Seq) {
					picked = append(picked, sg)
					found = true
					break
				}
			}
			if !found {
				return nil, nil, false, nil
			}
		}
	}
	merged := map[string]any{}
	byName := map[string]any{}
	consumed := make([]uint64, 0, len(picked))
	for _, sg := range picked {
		consumed = append(consumed, sg.Seq)
		pl, err := replay.DecodeState(sg.Payload)
		if err != nil {
			continue
		}
		pub := map[string]any{}
		for k, v := range pl {
			if replay.IsPublicKey(k) {
				pub[k] = v
			}
		}
		byName[sg.Name] = pub
		for k, v := range pub {
			merged[k] = v
		}
	}
	out := merged
	if step.ResultKey != "" {
		if len(picked) == 1 {
			out = map[string]any{step.ResultKey: byName[picked[0].Name]}
		} else {
			out = map[string]any{step.ResultKey: byName}
		}
	}
	b, err := replay.EncodeState(out)
	if err != nil {
		return nil, consumed, true, fmt.Errorf("step %q: the signals' output cannot be stored: %v", step.Name, err)
	}
	return b, consumed, true, nil
}

func pickedSeq(ps []replay.Signal, seq uint64) bool {
	for _, p := range ps {
		if p.Seq == seq {
			return true
		}
	}
	return false
}

// Signal stores a signal and settles a wait it satisfies, in one append
// (WF-6, WF-19).
func (m *Machine) Signal(now time.Time, id, name string, payload []byte) (Decision, error) {
	var d Decision
	w, err := m.liveWorkflow(id)
	if err != nil {
		return d, err
	}
	if err := m.signalRoom(w, name, payload); err != nil {
		return d, err
	}
	m.emit(&d, w.ID, &record.SignalReceived{WorkflowID: w.ID, Name: name, Payload: payload})
	if w.Status == replay.WorkflowWaitingSignal {
		// Only w's own wait step may consume the signal; a parked w
		// stores it for when its definition is registered.
		if def := m.defOf(w); def != nil && int(w.Step) < len(def.Steps) {
			m.settleSignals(&d, now, w, &def.Steps[w.Step], true)
		}
	}
	return d, nil
}

// StoredSignalsMax bounds the unconsumed signals one workflow stores, and
// StoredSignalsBytesFactor × Config.StateBytesMax their payloads: they are
// part of its state, in memory and in every snapshot (RL-11).
const (
	StoredSignalsMax         = 1024
	StoredSignalsBytesFactor = 4
)

// ErrSignalLimit refuses a signal that w would have to store past
// [StoredSignalsMax] signals or their bytes bound.
var ErrSignalLimit = errors.New("scheduler: too many signals stored by the workflow")

// signalRoom reports whether w may store one more signal. A signal that w
// waits for by name right now, with none of that name stored, is always
// accepted: its wait needs it (it may be consumed in its own append), and
// refusing it could leave w waiting for good. One more of a name already
// stored is surplus, and counts against the bound like any other.
func (m *Machine) signalRoom(w *replay.Workflow, name string, payload []byte) error {
	if w.Status == replay.WorkflowWaitingSignal && w.Wait != nil && slices.Contains(w.Wait.Signals, name) &&
		!slices.ContainsFunc(w.Signals, func(sg replay.Signal) bool { return sg.Name == name }) {
		return nil
	}
	if len(w.Signals) >= StoredSignalsMax {
		return fmt.Errorf("%w: workflow %s stores %d unconsumed signals, limit %d", ErrSignalLimit, w.ID, len(w.Signals), StoredSignalsMax)
	}
	if m.cfg.StateBytesMax <= 0 {
		return nil
	}
	n := len(payload)
	for _, sg := range w.Signals {
		n += len(sg.Payload)
	}
	if limit := StoredSignalsBytesFactor * m.cfg.StateBytesMax; n > limit {
		return fmt.Errorf("%w: workflow %s would store %d bytes of unconsumed signal payloads, limit %d", ErrSignalLimit, w.ID, n, limit)
	}
	return nil
}

// liveWorkflow returns a workflow that is in State, or an error saying
// whether it is unknown or finished.
func (m *Machine) liveWorkflow(id string) (*replay.Workflow, error) {
	if w := m.st.Workflows[id]; w != nil {
		return w, nil
	}
	if s, ok := m.lookup(id); ok {
		return nil, fmt.Errorf("%w: workflow %s is %s", ErrState, id, s.Status)
	}
	return nil, fmt.Errorf("%w: workflow %s", ErrNotFound, id)
}

// Pause pauses a running workflow (WF-15).
func (m *Machine) Pause(id string) (Decision, error) {
	var d Decision
	w, err := m.liveWorkflow(id)
	if err != nil {
		return d, err
	}
	if w.Status != replay.WorkflowRunning {
		return d, fmt.Errorf("%w: workflow %s is %s, only a running workflow can be paused", ErrState, id, w.Status)
	}
	m.emit(&d, w.ID, &record.WorkflowPaused{WorkflowID: w.ID})
	return d, nil
}

// Resume resumes a paused workflow and enters its current step unless
// something for it is already pending (WF-16).
func (m *Machine) Resume(now time.Time, id string) (Decision, error) {
	var d Decision
	w, err := m.liveWorkflow(id)
	if err != nil {
		return d, err
	}
	if w.Status != replay.WorkflowPaused {
		return d, fmt.Errorf("%w: workflow %s is %s, only a paused workflow can be resumed", ErrState, id, w.Status)
	}
	m.emit(&d, w.ID, &record.WorkflowResumed{WorkflowID: w.ID, Cause: "resume"})
	m.release(w.ID)
	m.enter(&d, now, w)
	return d, nil
}

// Cancel cancels a workflow that is running, paused, waiting or failed
// (WF-17): workflow_cancelled, job_buried "Workflow cancelled" for every
// pending job, dependants re-evaluated. Children are not cancelled.
func (m *Machine) Cancel(now time.Time, id string) (Decision, error) {
	var d Decision
	w, err := m.liveWorkflow(id)
	if err != nil {
		return d, err
	}
	sum := replay.SummarizeWorkflow(w)
	sum.Status = replay.WorkflowCancelled
	sum.FinishedAt = now.UnixNano()
	// Its step jobs buried before (a failed step's) and those buried now
	// can never run again: they leave the state with it, their summaries
	// going to the terminal index, so that cancelled workflows leave
	// nothing behind in memory and snapshots (RL-11).
	buried := m.buriedSummaries(w.ID)
	delete(m.tallies, w.ID)
	m.emit(&d, w.ID, &record.WorkflowCancelled{WorkflowID: w.ID, ArchiveBuried: len(buried) > 0})
	sum.Seq = m.nextSeq - 1
	m.indexWorkflow(&d, sum)
	m.indexJobs(&d, now, buried, sum.Seq)
	m.buryPending(&d, now, w.ID, CodeWorkflowCancelled, MsgWorkflowCancelled, true)
	m.react(&d, now, w, replay.WorkflowCancelled, sum.State, "cancelled")
	return d, nil
}

// RetryWorkflow retries a failed workflow: workflow_retried, then the
// current step re-entered with fresh attempts (WF-18). deadline_at is
// unchanged (WD-13).
func (m *Machine) RetryWorkflow(now time.Time, id string) (Decision, error) {
	var d Decision
	w, err := m.liveWorkflow(id)
	if err != nil {
		return d, err
	}
	if w.Status != replay.WorkflowFailed {
		return d, fmt.Errorf("%w: workflow %s is %s, only a failed workflow can be retried", ErrState, id, w.Status)
	}
	// A Then step's kept output is the success that failed or expired the
	// workflow, or one that came after the failure: WF-18 runs a new job
	// (WD-7, WD-9: that output is discarded). Only Parallel keeps the
	// outputs of branches that succeeded. Which one the step is, only its
	// definition says: a parked workflow holding outputs is refused until
	// its definition is registered, rather than retried with an output
	// its Then step would reuse.
	drop := false
	if len(w.Branches) > 0 {
		def := m.defOf(w)
		if def == nil || int(w.Step) >= len(def.Steps) {
			return d, fmt.Errorf("%w: workflow %s is parked (its definition %s is not registered) and holds the output of a step job that succeeded: register the definition, then retry it", ErrState, id, w.DefinitionHash)
		}
		drop = def.Steps[w.Step].Kind == StepThen
	}
	m.emit(&d, w.ID, &record.WorkflowRetried{WorkflowID: w.ID, DropOutputs: drop})
	m.enter(&d, now, w)
	return d, nil
}

// CheckDeadlinesUpTo is the periodic check of WD-5 and WD-6: every running
// workflow whose deadline_at <= now expires, in id order. It stops once
// its decision holds maxRecords records or more (0: no limit), reporting
// whether expired workflows are left: the runner goes on with them in its
// next decision, so that a check expiring thousands of workflows at once
// (after a long stop) makes appends of a bounded size, between which a
// snapshot can come (RL-12). The expiries it leaves fail as soon as it goes on, in the
// same id order.
func (m *Machine) CheckDeadlinesUpTo(now time.Time, maxRecords int) (d Decision, more bool) {
	for _, id := range m.st.WorkflowIDs() {
		w := m.st.Workflows[id]
		if w == nil || w.Status != replay.WorkflowRunning || w.DeadlineAt == 0 {
			continue
		}
		if deadlines.WorkflowExpired(time.Unix(0, w.DeadlineAt), now) {
			if maxRecords > 0 && len(d.Records) >= maxRecords {
				return d, true
			}
			d.cut() // each expiry is its own unit
			m.expire(&d, now, w, DetectedByCheck)
		}
	}
	return d, false
}

// StartDeadlineHandlers decides a deadline_handler_started for every
// obligation not yet running in this process (WD-10): the runner calls the
// handler once that record is acknowledged.
func (m *Machine) StartDeadlineHandlers() Decision {
	var d Decision
	if !m.recovered {
		return d
	}
	// The loop calls this on every pass, with any number of handlers
	// running: it looks only at the obligations queued since the last
	// call (by Recover, then by each expiry), in seq order, and every one
	// up to expiriesStarted is running or done in this process.
	for _, seq := range m.expiriesNew {
		e, ok := m.st.Expiry(seq)
		if !ok || seq <= m.expiriesStarted {
			continue
		}
		m.expiriesStarted = seq
		d.cut()
		m.emit(&d, e.WorkflowID, &record.DeadlineHandlerStarted{WorkflowID: e.WorkflowID, Handler: e.Handler, Expiry: e.Seq})
		d.DeadlineRuns = append(d.DeadlineRuns, DeadlineRun{Expiry: e.Seq, WorkflowID: e.WorkflowID, Name: e.Name, Handler: e.Handler, State: e.State})
	}
	m.expiriesNew = m.expiriesNew[:0]
	return d
}

// Deadline handler outcomes (WD-10).
const (
	HandlerOK            = "ok"
	HandlerFailed        = "failed"
	HandlerPanicked      = "panicked"
	HandlerNotRegistered = "not_registered"
)

// DeadlineHandlerDone decides deadline_handler_finished for a run, with a
// debug record keeping a failure's message (WD-10).
func (m *Machine) DeadlineHandlerDone(run DeadlineRun, outcome, msg string) Decision {
	var d Decision
	m.emit(&d, run.WorkflowID, &record.DeadlineHandlerFinished{WorkflowID: run.WorkflowID, Expiry: run.Expiry, Outcome: outcome})
	if outcome != HandlerOK {
		m.emit(&d, record.EngineStream, &record.Debug{Subject: run.WorkflowID, Code: "DEADLINE_HANDLER_" + outcome,
			Message: clip(msg, FailureMessageBytesMax)})
	}
	return d
}

// WorkflowRegistered enters the current step of the workflows of name that
// waited for their definition, settles the waits that signals or
// dependencies satisfied meanwhile (WF-6, WF-7) and lets their held step
// jobs start. Workflows that recorded another hash than the registered
// definition's stay parked: nothing is decided for them.
func (m *Machine) WorkflowRegistered(now time.Time, name string) Decision {
	var d Decision
	for _, id := range m.st.WorkflowIDsNamed(name) {
		if w := m.st.Workflows[id]; w != nil && w.Name == name {
			d.cut() // each workflow is its own unit
			m.enter(&d, now, w)
			m.settleWait(&d, now, w)
			m.settleChild(&d, now, w)
			m.release(w.ID)
		}
	}
	return d
}

// settleWait settles the wait w is parked on if it is satisfied or, for
// workflows, decided.
func (m *Machine) settleWait(d *Decision, now time.Time, w *replay.Workflow) {
	def := m.defOf(w)
	if def == nil || int(w.Step) >= len(def.Steps) || w.Wait == nil {
		return
	}
	step := &def.Steps[w.Step]
	switch w.Status {
	case replay.WorkflowWaitingSignal:
		m.settleSignals(d, now, w, step, true)
	case replay.WorkflowWaitingWorkflows:
		m.settleWorkflowsWait(d, now, w, step, w.Wait.Workflows, true)
	}
}

// delay timers of Delay steps: entries keyed by (fire at, seq of the
// step_delayed that armed it) as RL-9 orders them, valid while the
// workflow still waits on that delay.
func (m *Machine) armDelay(w *replay.Workflow) {
	heapPush(&m.x.delays, entry{id: w.ID, at: w.DelayFireAt, seq: w.DelaySeq, step: w.Step})
}

func (m *Machine) delayValid(e entry) (*replay.Workflow, bool) {
	w := m.st.Workflows[e.id]
	if w == nil || w.Step != e.step || w.DelayFireAt != e.at ||
		(w.Status != replay.WorkflowRunning && w.Status != replay.WorkflowPaused) {
		return nil, false
	}
	return w, true
}

// fireDelays completes every Delay step due at now, in (instant, seq)
// order (WF-5, RL-9).
func (m *Machine) fireDelays(d *Decision, now time.Time) {
	n := now.UnixNano()
	for m.x.delays.Len() > 0 {
		e := m.x.delays[0]
		w, ok := m.delayValid(e)
		if !ok {
			heapPop(&m.x.delays)
			continue
		}
		if e.at > n {
			return
		}
		heapPop(&m.x.delays)
		d.cut() // each workflow's step is its own unit
		m.completeStep(d, now, w, nil, nil)
	}
}

// release re-files the jobs of a workflow held while it was not running.
func (m *Machine) release(wfID string) {
	ids := m.x.held[wfID]
	delete(m.x.held, wfID)
	for _, id := range ids {
		if j, ok := m.st.Jobs[id]; ok {
			m.place(j)
		}
	}
}

// eligible reports whether a pending job's workflow lets it start (JB-2).
// A step job of a workflow whose name is registered with another hash than
// the one it recorded is held like one of a workflow that is not running,
// until [Machine.WorkflowRegistered] releases it: its handler name may name
// a step of that other definition, and its success could not complete the
// step, which takes the workflow's own definition ([Machine.stepSucceeded]).
// A workflow whose definition is not registered at all needs no hold: step
// handlers are registered with their definition, so its jobs are parked.
func (m *Machine) eligible(j *replay.Job) bool {
	if j.WorkflowID == "" {
		return true
	}
	w := m.st.Workflows[j.WorkflowID]
	if w == nil || w.Status != replay.WorkflowRunning {
		return false
	}
	def := m.def(w.Name)
	return def == nil || def.Runs(w.DefinitionHash)
}

// stepRunning reports whether a step job's workflow is running, which a
// requeue needs (JB-7); a parked workflow's requeued job is then held.
func (m *Machine) stepRunning(j *replay.Job) bool {
	w := m.st.Workflows[j.WorkflowID]
	return w != nil && w.Status == replay.WorkflowRunning
}
