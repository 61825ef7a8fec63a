package replay

import (
	"sort"

	"github.com/quire-dev/quire/journal/record"
)

// WorkflowStatus is a workflow's status (WF-9).
type WorkflowStatus uint8

// Workflow statuses. Values are stable: snapshots and summaries store them.
const (
	WorkflowRunning          WorkflowStatus = 1
	WorkflowCompleted        WorkflowStatus = 2
	WorkflowFailed           WorkflowStatus = 3
	WorkflowPaused           WorkflowStatus = 4
	WorkflowWaitingSignal    WorkflowStatus = 5
	WorkflowWaitingWorkflows WorkflowStatus = 6
	WorkflowCancelled        WorkflowStatus = 7
)

var workflowStatusNames = [...]string{
	WorkflowRunning:          "running",
	WorkflowCompleted:        "completed",
	WorkflowFailed:           "failed",
	WorkflowPaused:           "paused",
	WorkflowWaitingSignal:    "waiting_for_signal",
	WorkflowWaitingWorkflows: "waiting_for_workflows",
	WorkflowCancelled:        "cancelled",
}

// String returns the status name of WF-9.
func (s WorkflowStatus) String() string {
	if int(s) < len(workflowStatusNames) && workflowStatusNames[s] != "" {
		return workflowStatusNames[s]
	}
	return "unknown"
}

// ParseWorkflowStatus returns the status named s.
func ParseWorkflowStatus(s string) (WorkflowStatus, bool) {
	for i, n := range workflowStatusNames {
		if n != "" && n == s {
			return WorkflowStatus(i), true
		}
	}
	return 0, false
}

// Waiting reports whether s is one of the waiting statuses.
func (s WorkflowStatus) Waiting() bool {
	return s == WorkflowWaitingSignal || s == WorkflowWaitingWorkflows
}

// Signal is a stored, not yet consumed signal (WF-19).
type Signal struct {
	Seq     uint64
	Name    string
	Payload []byte
}

// BranchOutput is the output of one succeeded branch of the current step,
// in the journal order of the attempt_succeeded records (WF-4).
type BranchOutput struct {
	Branch int32
	Output []byte
}

// Wait describes the wait a workflow is parked on (WF-6, WF-7).
type Wait struct {
	Signals   []string
	Workflows []string
	Mode      string
	Quorum    int32
}

// Workflow is the replayed state of a workflow that is not completed or
// cancelled. Those leave State; their summary lives in the journal's
// terminal index.
type Workflow struct {
	ID             string
	Name           string
	DefinitionHash string
	Steps          int32
	StartSeq       uint64
	StartedAt      int64
	Status         WorkflowStatus
	Step           int32
	// State is the canonical msgpack map of the whole state, private keys
	// included (WF-12).
	State      []byte
	DeadlineAt int64 // 0: no deadline (WD-4)
	// OnDeadline is the on-deadline handler workflow_started recorded
	// (WD-2), "" if it recorded none. Omitted from the encoding when
	// empty, so that states without one encode as before it existed.
	OnDeadline string `msgpack:",omitempty"`
	// Inherited and the three fields after it are the job options a
	// SubWorkflow child inherits (WF-8), as its workflow_started recorded
	// them (see record.WorkflowStarted); all omitted from the encodings
	// when unset, so that states without them encode as before.
	Inherited            bool   `msgpack:",omitempty" json:",omitempty"`
	InheritedQueue       string `msgpack:",omitempty" json:",omitempty"`
	InheritedPriority    uint8  `msgpack:",omitempty" json:",omitempty"` // priority + 1, 0 none
	InheritedMaxAttempts int32  `msgpack:",omitempty" json:",omitempty"`
	IdempotencyKey       string
	ParentID             string
	ParentStep           int32
	Error                string
	FailedAt             int64

	// Progress of the current step.
	Entered     bool  // the step's entry records are in the journal
	DelayFireAt int64 // a pending Delay (WF-5), 0 none
	// DelaySeq is the seq of the step_delayed that armed DelayFireAt:
	// delays due at one instant fire in (instant, this seq) order (RL-9).
	// Set exactly when DelayFireAt is, and omitted from the encoding when
	// zero, so that states without a pending Delay encode as before it
	// existed.
	DelaySeq uint64 `msgpack:",omitempty"`
	Wait     *Wait  // the wait parked on, nil none
	Branches []BranchOutput
	Child    string // the current SubWorkflow step's child

	Signals []Signal // stored, unconsumed, oldest first
}

// Expiry is an on-deadline handler obligation: a deadline expiry whose
// handler has not finished (WD-10). It outlives its workflow's stay in
// State (a cancelled workflow's obligation stands, WD-14).
type Expiry struct {
	Seq        uint64 // seq of workflow_deadline_exceeded
	WorkflowID string
	Name       string // the workflow's name
	Handler    string
	State      []byte // public state as of the expiry
}

// addWorkflow puts w in Workflows and in its name's index.
func (s *State) addWorkflow(w *Workflow) {
	s.Workflows[w.ID] = w
	s.wfPeak = max(s.wfPeak, len(s.Workflows))
	indexPut(s.byName, w.Name, w.ID, w)
}

// WorkflowIDsNamed returns the ids of the workflows in s named name,
// sorted.
func (s *State) WorkflowIDsNamed(name string) []string {
	m := s.byName[name]
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// WorkflowIDs returns the ids of the workflows in s, sorted.
func (s *State) WorkflowIDs() []string {
	ids := make([]string, 0, len(s.Workflows))
	for id := range s.Workflows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (w *Workflow) clearProgress() {
	w.Entered = false
	w.DelayFireAt, w.DelaySeq = 0, 0
	w.Wait = nil
	w.Branches = nil
	w.Child = ""
}

func workflow(s *State, id string) (*Workflow, error) {
	w, ok := s.Workflows[id]
	if !ok {
		return nil, impossible("workflow %s is not active", id)
	}
	return w, nil
}

// archiveBuried drops the buried step jobs of workflow id, which has
// left the state: nothing can retry them any more (RL-11).
func (s *State) archiveBuried(id string) {
	for _, j := range s.byWorkflow[id] {
		if j.Status == JobBuried {
			s.dropJob(j)
		}
	}
}

func (s *State) leave(w *Workflow) {
	s.wfPeak = max(s.wfPeak, len(s.Workflows))
	delete(s.Workflows, w.ID)
	indexDel(s.byName, w.Name, w.ID)
	if w.IdempotencyKey != "" && s.Idempotency[w.IdempotencyKey] == w.ID {
		delete(s.Idempotency, w.IdempotencyKey)
	}
	if s.wfPeak >= shrinkMin && len(s.Workflows) <= s.wfPeak/4 {
		s.Workflows, s.Idempotency = shrunk(s.Workflows), shrunk(s.Idempotency)
		s.wfPeak = len(s.Workflows)
	}
}

// applyWorkflow folds the workflow kinds. Like apply, it validates before
// mutating.
func applyWorkflow(s *State, r record.Record) (bool, error) {
	switch b := r.Body.(type) {
	case *record.WorkflowStarted:
		if b.WorkflowID == "" {
			return true, impossible("workflow_started without id")
		}
		if _, ok := s.Workflows[b.WorkflowID]; ok {
			return true, impossible("workflow %s started twice", b.WorkflowID)
		}
		if b.IdempotencyKey != "" {
			if other, ok := s.Idempotency[b.IdempotencyKey]; ok {
				return true, impossible("idempotency key of %s already held by %s", b.WorkflowID, other)
			}
		}
		if err := CheckState(b.State); err != nil {
			return true, impossible("workflow %s state: %v", b.WorkflowID, err)
		}
		w := &Workflow{
			ID: b.WorkflowID, Name: b.Name, DefinitionHash: b.DefinitionHash, Steps: b.Steps,
			StartSeq: r.Seq, StartedAt: b.At, Status: WorkflowRunning, State: b.State,
			DeadlineAt: b.DeadlineAt, OnDeadline: b.OnDeadline, IdempotencyKey: b.IdempotencyKey,
			ParentID: b.ParentID, ParentStep: b.ParentStep,
			Inherited: b.Inherited, InheritedQueue: b.InheritedQueue,
			InheritedPriority: b.InheritedPriority, InheritedMaxAttempts: b.InheritedMaxAttempts,
		}
		s.addWorkflow(w)
		if w.IdempotencyKey != "" {
			s.Idempotency[w.IdempotencyKey] = w.ID
		}
		if p, ok := s.Workflows[b.ParentID]; ok && p.Step == b.ParentStep {
			p.Child = w.ID
			p.Entered = true
		}
	case *record.StepCompleted:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Step != b.Step || b.Next != b.Step+1 {
			return true, impossible("workflow %s at step %d completed step %d -> %d", w.ID, w.Step, b.Step, b.Next)
		}
		if w.Status != WorkflowRunning && w.Status != WorkflowPaused {
			return true, impossible("workflow %s completed a step while %s", w.ID, w.Status)
		}
		merged, err := MergeState(w.State, b.Output)
		if err != nil {
			return true, impossible("workflow %s step output: %v", w.ID, err)
		}
		signals, err := consume(w.Signals, b.Consumed)
		if err != nil {
			return true, err
		}
		w.State, w.Signals = merged, signals
		w.Step = b.Next
		w.clearProgress()
	case *record.StepDelayed:
		w, err := active(s, b.WorkflowID, b.Step)
		if err != nil {
			return true, err
		}
		w.DelayFireAt, w.DelaySeq = b.FireAt, r.Seq
		w.Entered = true
	case *record.WorkflowWaiting:
		w, err := active(s, b.WorkflowID, b.Step)
		if err != nil {
			return true, err
		}
		if w.Status != WorkflowRunning {
			return true, impossible("workflow %s waits while %s", w.ID, w.Status)
		}
		switch b.Status {
		case "waiting_for_signal":
			w.Status = WorkflowWaitingSignal
		case "waiting_for_workflows":
			w.Status = WorkflowWaitingWorkflows
		default:
			return true, impossible("workflow %s waits with status %q", w.ID, b.Status)
		}
		w.Wait = &Wait{Signals: b.Signals, Workflows: b.Workflows, Mode: b.Mode, Quorum: b.Quorum}
		w.Entered = true
	case *record.SignalReceived:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		w.Signals = append(w.Signals, Signal{Seq: r.Seq, Name: b.Name, Payload: b.Payload})
	case *record.WorkflowPaused:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Status != WorkflowRunning {
			return true, impossible("workflow %s paused while %s", w.ID, w.Status)
		}
		w.Status = WorkflowPaused
	case *record.WorkflowResumed:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Status != WorkflowPaused && !w.Status.Waiting() {
			return true, impossible("workflow %s resumed while %s", w.ID, w.Status)
		}
		w.Status = WorkflowRunning
		w.Wait = nil
	case *record.WorkflowCompleted:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Step < w.Steps || (w.Status != WorkflowRunning && w.Status != WorkflowPaused) {
			return true, impossible("workflow %s completed at step %d of %d while %s", w.ID, w.Step, w.Steps, w.Status)
		}
		s.leave(w)
		s.WorkflowsCompleted++
		if b.ArchiveBuried {
			s.archiveBuried(w.ID)
		}
	case *record.WorkflowFailed:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Status == WorkflowFailed {
			return true, impossible("workflow %s failed twice", w.ID)
		}
		w.Status = WorkflowFailed
		w.Error = b.Error
		w.FailedAt = b.At
		w.DelayFireAt, w.DelaySeq = 0, 0
		w.Wait = nil
	case *record.WorkflowCancelled:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		s.leave(w)
		s.WorkflowsCancelled++
		if b.ArchiveBuried {
			// Its buried step jobs leave with it; their summaries are in
			// the terminal index.
			s.archiveBuried(w.ID)
		}
	case *record.WorkflowRetried:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Status != WorkflowFailed {
			return true, impossible("workflow %s retried while %s", w.ID, w.Status)
		}
		w.Status = WorkflowRunning
		w.Error = ""
		w.FailedAt = 0
		// Parallel branches that succeeded keep their outputs (WF-18); a
		// Then step's kept output is dropped: the retry runs a new job.
		branches := w.Branches
		w.clearProgress()
		if !b.DropOutputs {
			w.Branches = branches
		}
	case *record.WorkflowDeadlineExceeded:
		w, err := workflow(s, b.WorkflowID)
		if err != nil {
			return true, err
		}
		if w.Status != WorkflowFailed {
			return true, impossible("workflow %s deadline exceeded without its workflow_failed", w.ID)
		}
		if b.Handler != "" {
			pub, err := PublicState(w.State)
			if err != nil {
				return true, impossible("workflow %s state: %v", w.ID, err)
			}
			s.expiries[r.Seq] = &Expiry{Seq: r.Seq, WorkflowID: w.ID, Name: w.Name, Handler: b.Handler, State: pub}
		}
	case *record.DeadlineHandlerStarted:
		if s.expiries[b.Expiry] == nil {
			return true, impossible("deadline handler started for unknown expiry %d", b.Expiry)
		}
	case *record.DeadlineHandlerFinished:
		if s.expiries[b.Expiry] == nil {
			return true, impossible("deadline handler finished for unknown expiry %d", b.Expiry)
		}
		delete(s.expiries, b.Expiry)
	default:
		return false, nil
	}
	return true, nil
}

// active returns a workflow at step.
func active(s *State, id string, step int32) (*Workflow, error) {
	w, err := workflow(s, id)
	if err != nil {
		return nil, err
	}
	if w.Step != step {
		return nil, impossible("workflow %s is at step %d, record names step %d", id, w.Step, step)
	}
	return w, nil
}

// Expiries returns the on-deadline handler obligations (WD-10), in seq
// order.
func (s *State) Expiries() []Expiry {
	if len(s.expiries) == 0 {
		return nil // as a snapshot has always encoded none
	}
	out := make([]Expiry, 0, len(s.expiries))
	for _, e := range s.expiries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Expiry returns the obligation recorded at seq, if it is outstanding.
func (s *State) Expiry(seq uint64) (Expiry, bool) {
	if e := s.expiries[seq]; e != nil {
		return *e, true
	}
	return Expiry{}, false
}

// ExpiryCount returns the number of outstanding obligations.
func (s *State) ExpiryCount() int { return len(s.expiries) }

// consume removes the signals with the given seqs.
func consume(signals []Signal, seqs []uint64) ([]Signal, error) {
	if len(seqs) == 0 {
		return signals, nil
	}
	out := make([]Signal, 0, len(signals))
	used := 0
	for _, sg := range signals {
		hit := false
		for _, q := range seqs {
			if sg.Seq == q {
				hit = true
				break
			}
		}
		if hit {
			used++
			continue
		}
		out = append(out, sg)
	}
	if used != len(seqs) {
		return nil, impossible("step consumed %d signals, %d of them are not stored", len(seqs), len(seqs)-used)
	}
	if len(out) == 0 {
		// nil, as a decoded snapshot has it: an empty list encodes apart
		// from nil, so the state would digest differently from its own
		// snapshot, whose round-trip check then refuses it (RL-12).
		return nil, nil
	}
	return out, nil
}
