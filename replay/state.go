package replay

import (
	"sort"

	"github.com/quire-dev/quire/journal/record"
)

// JobStatus is a job's status (JB-3).
type JobStatus uint8

// Job statuses. Values are stable: snapshots and summaries store them.
const (
	JobPending    JobStatus = 1
	JobProcessing JobStatus = 2
	JobCompleted  JobStatus = 3
	JobBuried     JobStatus = 4
)

func (s JobStatus) String() string {
	switch s {
	case JobPending:
		return "pending"
	case JobProcessing:
		return "processing"
	case JobCompleted:
		return "completed"
	case JobBuried:
		return "buried"
	}
	return "unknown"
}

// Job is the replayed state of one job or workflow step job that has not
// completed. Completed jobs leave [State]; their final status lives in the
// journal's terminal index.
//
// The fields are ordered so that the struct has no padding inside it:
// every pending job is one, and every start copies one. Snapshots encode
// them in another order, jobFieldNames's.
type Job struct {
	ID          string
	Stream      string // the job's stream: its id, or its workflow's id
	Handler     string
	Queue       string
	EnqueueSeq  uint64 // seq of job_enqueued: start order among equal priorities (JB-2)
	AvailableAt int64
	Retry       record.RetryPolicy
	// DeliveryTimeoutNanos is the resolved DeliveryTimeout (DL-2), 0 for
	// the engine default at start time.
	DeliveryTimeoutNanos int64
	UniqueKey            string
	Payload              []byte
	WorkflowID           string

	// Token is the open attempt's token (seq of its attempt_started), 0 when
	// no attempt is open.
	Token     uint64
	StartAt   int64 // S of the open attempt
	HardAt    int64 // H of the open attempt
	NormalAt  int64 // P of the open attempt
	LastCode  string
	LastError string

	Step   int32
	Branch int32
	// Attempts counts starts: the attempt number of the latest start.
	Attempts int32
	// Consumed counts attempts consumed under DL-6. A start consumes
	// pessimistically (a crash after attempt_started counts, DL-44); a
	// release gives the attempt back.
	Consumed int32

	Priority uint8
	Status   JobStatus
	// Lost is set by recovery on a job whose attempt was left open by a
	// crash (DL-44), until its next start.
	Lost bool
}

// Shutdown is the replayed state of the newest shutdown attempt.
type Shutdown struct {
	RunID      string
	Initiated  *record.ShutdownInitiated
	Forced     bool
	PhaseStart int8 // newest phase started, 0 none
	PhaseEnd   int8 // newest phase finished, 0 none
	Report     *record.ShutdownReport
}

// RunsKeptMax bounds the run history kept in State (SD-33).
const RunsKeptMax = 64

// Run is one engine start and, if it published one, its shutdown report.
type Run struct {
	RunID     string
	StartSeq  uint64
	StartedAt int64
	Shutdown  Shutdown
}

// State is everything the scheduler needs to decide, folded from the
// journal (DESIGN §4). The zero value is not usable: call [New].
type State struct {
	// LastSeq is the seq of the last applied record. State never depends
	// on a record's append time, only on body fields, so that a live state
	// decided at "now" equals its replay (RL-7).
	LastSeq uint64

	// Jobs holds the jobs not completed. Insert and delete through
	// addJob and dropJob, which keep byWorkflow in step.
	Jobs map[string]*Job
	// byWorkflow indexes the step jobs in Jobs by workflow id, so that
	// what a workflow's transition does to its jobs costs in its own jobs,
	// not in every job the engine holds. It is derived from Jobs and never
	// stored.
	byWorkflow map[string]map[string]*Job
	// Tokens maps open attempt tokens to job ids.
	Tokens map[uint64]string
	// Unique maps unique keys of pending or processing jobs to job ids (JB-5).
	Unique map[string]string
	// uniqueWaiting holds, by key, the ids (sorted) of the other pending
	// or processing jobs that carry a key Unique gives to another job: a
	// buried job retried (JB-7) while another had taken its key. When the
	// holder ends, the smallest id takes the key (JB-5). Derived from
	// Jobs and Unique, never stored; no entry is empty.
	uniqueWaiting map[string][]string
	// PausedQueues holds the queues paused by queue_paused (JB-8).
	PausedQueues map[string]bool
	// Workflows holds the workflows not completed or cancelled. Insert
	// and delete through addWorkflow and leave, which keep byName in step.
	Workflows map[string]*Workflow
	// byName indexes Workflows by workflow name, so that registering a
	// definition finds the instances of its name without a pass over
	// every workflow. Derived from Workflows, never stored.
	byName map[string]map[string]*Workflow
	// Idempotency maps the idempotency keys of the workflows in Workflows
	// to their ids (WF-14); keys of finished ones live in the terminal index.
	Idempotency map[string]string
	// expiries are the on-deadline handler obligations (WD-10), by the
	// seq of their workflow_deadline_exceeded: any of thousands finishes
	// in O(1). [State.Expiries] lists them in seq order.
	expiries map[uint64]*Expiry
	// Quarantined holds the streams set aside because a record of theirs
	// is damaged (spec/reliability.md §4.4), by stream; nil when none is.
	// It is never encoded in a snapshot: the engine writes none while a
	// stream is quarantined, so every open meets the damage again.
	Quarantined map[string]*Quarantine `json:",omitempty"`
	// jobsPeak and wfPeak are the most jobs and workflows the maps held
	// since they were last rebuilt (shrunk); derived, never stored.
	jobsPeak, wfPeak int
	// Runs holds the newest RunsKeptMax runs, oldest first.
	Runs []Run
	// Counters over the whole history.
	Completed          int64
	WorkflowsCompleted int64
	WorkflowsCancelled int64
}

// New returns an empty State.
func New() *State {
	return &State{
		Jobs:          make(map[string]*Job),
		byWorkflow:    make(map[string]map[string]*Job),
		Tokens:        make(map[uint64]string),
		Unique:        make(map[string]string),
		uniqueWaiting: make(map[string][]string),
		PausedQueues:  make(map[string]bool),
		Workflows:     make(map[string]*Workflow),
		byName:        make(map[string]map[string]*Workflow),
		expiries:      make(map[uint64]*Expiry),
		Idempotency:   make(map[string]string),
	}
}

// JobIDs returns the ids of the jobs in s, sorted, so that callers never
// depend on map order.
func (s *State) JobIDs() []string {
	ids := make([]string, 0, len(s.Jobs))
	for id := range s.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// addJob puts j in Jobs and, if it is a step job, in its workflow's index.
func (s *State) addJob(j *Job) {
	s.Jobs[j.ID] = j
	s.jobsPeak = max(s.jobsPeak, len(s.Jobs))
	if j.WorkflowID != "" {
		indexPut(s.byWorkflow, j.WorkflowID, j.ID, j)
	}
}

// dropJob removes j from Jobs and from its workflow's index.
func (s *State) dropJob(j *Job) {
	s.jobsPeak = max(s.jobsPeak, len(s.Jobs)) // a decoded state's too
	delete(s.Jobs, j.ID)
	indexDel(s.byWorkflow, j.WorkflowID, j.ID)
	if s.jobsPeak >= shrinkMin && len(s.Jobs) <= s.jobsPeak/4 {
		s.Jobs, s.Tokens, s.Unique = shrunk(s.Jobs), shrunk(s.Tokens), shrunk(s.Unique)
		s.jobsPeak = len(s.Jobs)
	}
}

// shrinkMin is the largest size below which a map of the state is never
// rebuilt smaller.
const shrinkMin = 1 << 14

// shrunk returns a copy of m sized to what it holds. A Go map keeps the
// room of the most it ever held: without this, a drained backlog of a
// million jobs would keep its maps' room for the life of the process.
// Rebuilt when a map holds a quarter of its peak, the copying costs O(1)
// per deletion, amortized.
func shrunk[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// indexPut files v under group and id in a two-level index.
func indexPut[T any](idx map[string]map[string]T, group, id string, v T) {
	m := idx[group]
	if m == nil {
		m = make(map[string]T)
		idx[group] = m
	}
	m[id] = v
}

// indexDel removes id from group in a two-level index, and the group once
// it is empty.
func indexDel[T any](idx map[string]map[string]T, group, id string) {
	if m := idx[group]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(idx, group)
		}
	}
}

// WorkflowJobs returns the step jobs of workflow id still in the state,
// in enqueue order.
func (s *State) WorkflowJobs(id string) []*Job {
	m := s.byWorkflow[id]
	if len(m) == 0 {
		return nil
	}
	js := make([]*Job, 0, len(m))
	for _, j := range m {
		js = append(js, j)
	}
	// Enqueue seqs are unique: the order is the map's no more.
	sort.Slice(js, func(a, b int) bool { return js[a].EnqueueSeq < js[b].EnqueueSeq })
	return js
}

// CurrentStepJob reports whether the step job j is the current job of its
// branch at its workflow's current step: the workflow is in the state and
// at j's step, the branch has no output yet, and no later job of the
// branch was enqueued. A retry of the workflow (WF-18) re-enters the step
// with a new job for every branch without an output; the jobs it replaced
// stay buried and are current no more. Only the current job of a branch
// moves its workflow (WF-20), and only it may be requeued (JB-7). It costs
// O(jobs of the workflow) and does not depend on map order.
func (s *State) CurrentStepJob(j *Job) bool {
	if j.WorkflowID == "" {
		return false
	}
	w := s.Workflows[j.WorkflowID]
	if w == nil || w.Step != j.Step {
		return false
	}
	for _, o := range w.Branches {
		if o.Branch == j.Branch {
			return false
		}
	}
	for _, o := range s.byWorkflow[j.WorkflowID] {
		if o != j && o.Step == j.Step && o.Branch == j.Branch && o.EnqueueSeq > j.EnqueueSeq {
			return false
		}
	}
	return true
}

// LastRun returns the newest run, or nil.
func (s *State) LastRun() *Run {
	if len(s.Runs) == 0 {
		return nil
	}
	return &s.Runs[len(s.Runs)-1]
}
