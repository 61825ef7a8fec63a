package record

// Field conventions: instants are int64 Unix nanoseconds (suffix At), durations
// int64 nanoseconds (suffix Nanos); user data (payloads, state, outputs) is an
// opaque msgpack []byte that only the api decodes, under the same limits.
// Field tags are part of the format: never rename one.

// RunStarted is appended by each engine start after recovery (SD-33).
type RunStarted struct {
	RunID   string `msgpack:"run_id"`
	Version string `msgpack:"version"`
	// At is the recovery instant: jobs whose attempts a crash left open
	// are available again from it (DL-44).
	At int64 `msgpack:"at"`
	// Recovered counts attempts found open by recovery (DL-44).
	Recovered int64 `msgpack:"recovered"`
}

// Debug keeps a diagnostic that the specs name: a swallowed on-deadline
// handler error (WD-10), an interrupted shutdown (SD-36), a reasonless
// cancellation (DL-15).
type Debug struct {
	Subject string `msgpack:"subject"` // the workflow, job or component concerned
	Code    string `msgpack:"code"`
	Message string `msgpack:"message"`
}

// Backoff names a retry delay schedule (DL-4, DL-5).
type Backoff uint8

// Backoff values are part of the format.
const (
	BackoffExponential Backoff = 0
	BackoffFixed       Backoff = 1
	BackoffLinear      Backoff = 2
	BackoffList        Backoff = 3
)

// RetryPolicy is the resolved retry policy of a job, recorded at enqueue so
// that replay never consults options (DL-45).
type RetryPolicy struct {
	MaxAttempts int32   `msgpack:"max_attempts"`
	Backoff     Backoff `msgpack:"backoff"`
	BaseNanos   int64   `msgpack:"base_ns"`
	MaxNanos    int64   `msgpack:"max_ns"`
	JitterRatio float64 `msgpack:"jitter"`
	ListNanos   []int64 `msgpack:"list_ns,omitempty"`
}

// JobEnqueued makes a job, or a workflow step's job, pending (JB-1, WF-1).
// The job's seq (its enqueue order, JB-2) is the record's seq.
type JobEnqueued struct {
	JobID                string      `msgpack:"job_id"`
	Handler              string      `msgpack:"handler"`
	Queue                string      `msgpack:"queue"`
	Priority             uint8       `msgpack:"priority"`
	AvailableAt          int64       `msgpack:"available_at"`
	Retry                RetryPolicy `msgpack:"retry"`
	DeliveryTimeoutNanos int64       `msgpack:"delivery_timeout_ns"`
	UniqueKey            string      `msgpack:"unique_key,omitempty"`
	Payload              []byte      `msgpack:"payload"`
	WorkflowID           string      `msgpack:"workflow_id,omitempty"`
	Step                 int32       `msgpack:"step"`
	Branch               int32       `msgpack:"branch"`
}

// AttemptStarted opens one attempt (DL-7). Its seq is the attempt token
// (RL-10); it revokes any earlier token of the job.
type AttemptStarted struct {
	JobID    string `msgpack:"job_id"`
	Attempt  int32  `msgpack:"attempt"` // 1 for the first start
	StartAt  int64  `msgpack:"s"`       // S
	HardAt   int64  `msgpack:"h"`       // H
	NormalAt int64  `msgpack:"p"`       // P
}

// Outcome is what every settlement records about how an attempt ended
// (DL-38): enough for a reader to audit it afterwards.
type Outcome struct {
	JobID    string `msgpack:"job_id"`
	Token    uint64 `msgpack:"token"`
	Code     string `msgpack:"code,omitempty"`
	Class    string `msgpack:"class,omitempty"` // "retryable" or "permanent"
	Error    string `msgpack:"error,omitempty"`
	Stack    string `msgpack:"stack,omitempty"`
	Reason   string `msgpack:"reason,omitempty"` // first cancellation reason (DL-16)
	ReasonAt int64  `msgpack:"reason_at,omitempty"`
	Joined   bool   `msgpack:"joined"`            // execution_joined (DL-37)
	Cleanup  string `msgpack:"cleanup,omitempty"` // cleanup failure codes, comma-separated (DL-36)
	// The audit of the attempt's pipeline and cleanup (DL-26..DL-37),
	// absent from records written before these fields existed. Execution
	// is "returned", "abandoned" or "not_started"; Middleware names the
	// entered middleware in entry order, and NormalExits and
	// TerminationExits give each one's exits (DL-29, DL-32, DL-33); Scope
	// is how the attempt scope ended: "closed", "failed", "panicked",
	// "timed_out", "unobserved" or "quarantined".
	Execution        string   `msgpack:"execution,omitempty"`
	Middleware       []string `msgpack:"middleware,omitempty"`
	NormalExits      []string `msgpack:"normal_exits,omitempty"`
	TerminationExits []string `msgpack:"termination_exits,omitempty"`
	Scope            string   `msgpack:"scope,omitempty"`
}

// OutcomeOf returns the Outcome of a settlement body (attempt_succeeded,
// attempt_retry_scheduled, attempt_buried, attempt_released), or nil for
// any other body.
func OutcomeOf(b Body) *Outcome {
	switch b := b.(type) {
	case *AttemptSucceeded:
		return &b.Outcome
	case *AttemptRetryScheduled:
		return &b.Outcome
	case *AttemptBuried:
		return &b.Outcome
	case *AttemptReleased:
		return &b.Outcome
	}
	return nil
}

// AttemptSucceeded settles a successful attempt.
type AttemptSucceeded struct {
	Outcome `msgpack:",inline"`
	Output  []byte `msgpack:"output,omitempty"`
}

// AttemptRetryScheduled settles a consuming failure that will be retried.
type AttemptRetryScheduled struct {
	Outcome     `msgpack:",inline"`
	DelayNanos  int64 `msgpack:"delay_ns"`
	AvailableAt int64 `msgpack:"available_at"`
}

// AttemptBuried settles a failure that buries the job.
type AttemptBuried struct {
	Outcome `msgpack:",inline"`
	// Final marks the burial of a step job whose workflow has left the
	// state (completed or cancelled): the job can never run again, so it
	// leaves the state too, its summary going to the terminal index
	// (RL-11).
	Final bool `msgpack:"final,omitempty"`
}

// envelopeVersion: final is new in envelope version 2.
func (b *AttemptBuried) envelopeVersion() uint8 {
	if b.Final {
		return 2
	}
	return 1
}

// AttemptReleased settles an attempt interrupted by a non-timeout reason:
// nothing consumed, redelivered from AvailableAt (DL-6, DL-40).
type AttemptReleased struct {
	Outcome     `msgpack:",inline"`
	AvailableAt int64 `msgpack:"available_at"`
}

// CodeBuriedByOperator is the code of a job_buried an operator's Bury
// decided (JB-6). A job it buries keeps its last failure, if it had one.
const CodeBuriedByOperator = "BURIED_BY_OPERATOR"

// JobBuried buries a pending job outside an attempt (JB-6, WF-17, WD-8, DL-44).
type JobBuried struct {
	JobID string `msgpack:"job_id"`
	Code  string `msgpack:"code,omitempty"`
	Error string `msgpack:"error"`
	// Final marks the burial of a step job whose workflow is cancelled in
	// the same append: the job can never run again, so it leaves the
	// state, its summary going to the terminal index (RL-11).
	Final bool `msgpack:"final,omitempty"`
}

// envelopeVersion: final is new in envelope version 2.
func (b *JobBuried) envelopeVersion() uint8 {
	if b.Final {
		return 2
	}
	return 1
}

// JobRequeued moves a buried job back to pending (JB-7).
type JobRequeued struct {
	JobID       string `msgpack:"job_id"`
	AvailableAt int64  `msgpack:"available_at"`
	// KeepKey, set for a job enqueued with Unique, says that the job
	// keeps its unique key: if another pending or processing job took the
	// key while this one was buried, this one waits in line for it and
	// takes it when that job ends (JB-5). Without it, as in records
	// written before it existed, such a job loses its key instead.
	KeepKey bool `msgpack:"keep_key,omitempty"`
}

// envelopeVersion: keep_key is new in envelope version 2.
func (b *JobRequeued) envelopeVersion() uint8 {
	if b.KeepKey {
		return 2
	}
	return 1
}

// QueuePaused pauses a queue (JB-8).
type QueuePaused struct {
	Queue string `msgpack:"queue"`
}

// QueueResumed resumes a queue (JB-8).
type QueueResumed struct {
	Queue string `msgpack:"queue"`
}

// WorkflowStarted dispatches a workflow (WF-13). DeadlineAt is 0 without a
// deadline (WD-3, WD-4).
type WorkflowStarted struct {
	WorkflowID     string `msgpack:"workflow_id"`
	Name           string `msgpack:"name"`
	DefinitionHash string `msgpack:"definition_hash"`
	Steps          int32  `msgpack:"steps"`
	State          []byte `msgpack:"state"`
	At             int64  `msgpack:"at"` // the dispatch instant (WD-3)
	DeadlineAt     int64  `msgpack:"deadline_at"`
	IdempotencyKey string `msgpack:"idempotency_key,omitempty"`
	ParentID       string `msgpack:"parent_id,omitempty"`
	ParentStep     int32  `msgpack:"parent_step"`
	// OnDeadline names the on-deadline handler of the workflow's own
	// definition (WD-2), with a deadline only, so that an expiry calls it
	// even where that definition is not registered (WD-10). Journals
	// written before it was recorded leave it empty.
	OnDeadline string `msgpack:"on_deadline,omitempty"`
	// Inherited, set on a SubWorkflow child, says that the three fields
	// after it are the job options the child inherits from its ancestors
	// (WF-8), resolved when it started, while its parent ran: a queue, a
	// priority and a max attempts, each absent when no ancestor sets it.
	// Records without it (written before it existed) leave the engine to
	// resolve them from the ancestors' definitions, which an ancestor
	// whose definition is not registered cannot give.
	Inherited      bool   `msgpack:"inherited,omitempty"`
	InheritedQueue string `msgpack:"inherited_queue,omitempty"`
	// InheritedPriority is the inherited priority plus one: 0 inherits
	// none.
	InheritedPriority    uint8 `msgpack:"inherited_priority,omitempty"`
	InheritedMaxAttempts int32 `msgpack:"inherited_max_attempts,omitempty"`
}

// envelopeVersion: on_deadline and the inherited options are new in
// envelope version 2; without them the record is what version 1 wrote.
func (b *WorkflowStarted) envelopeVersion() uint8 {
	if b.OnDeadline != "" || b.Inherited {
		return 2
	}
	return 1
}

// StepCompleted completes step Step and moves the workflow to Next (WF-3).
// Output is a msgpack map of the public keys merged into the state (a
// Parallel step's branches already merged in journal order, WF-4).
// Consumed lists the seqs of the stored signals a wait consumed (WF-6).
type StepCompleted struct {
	WorkflowID string   `msgpack:"workflow_id"`
	Step       int32    `msgpack:"step"`
	Next       int32    `msgpack:"next"`
	Output     []byte   `msgpack:"output,omitempty"`
	Consumed   []uint64 `msgpack:"consumed,omitempty"`
}

// StepDelayed enters a Delay step (WF-5).
type StepDelayed struct {
	WorkflowID string `msgpack:"workflow_id"`
	Step       int32  `msgpack:"step"`
	FireAt     int64  `msgpack:"fire_at"`
}

// WorkflowWaiting parks a workflow on a wait step (WF-6, WF-7).
type WorkflowWaiting struct {
	WorkflowID string   `msgpack:"workflow_id"`
	Step       int32    `msgpack:"step"`
	Status     string   `msgpack:"status"` // waiting_for_signal or waiting_for_workflows
	Signals    []string `msgpack:"signals,omitempty"`
	Workflows  []string `msgpack:"workflows,omitempty"`
	Mode       string   `msgpack:"mode,omitempty"` // all, any, quorum
	Quorum     int32    `msgpack:"quorum,omitempty"`
}

// SignalReceived stores a signal (WF-19).
type SignalReceived struct {
	WorkflowID string `msgpack:"workflow_id"`
	Name       string `msgpack:"name"`
	Payload    []byte `msgpack:"payload,omitempty"`
}

// WorkflowPaused pauses a workflow (WF-15).
type WorkflowPaused struct {
	WorkflowID string `msgpack:"workflow_id"`
}

// WorkflowResumed resumes a workflow; Cause is "resume", "signal" or
// "workflows" (WF-16, WF-6).
type WorkflowResumed struct {
	WorkflowID string `msgpack:"workflow_id"`
	Cause      string `msgpack:"cause"`
}

// WorkflowCompleted completes a workflow.
type WorkflowCompleted struct {
	WorkflowID string `msgpack:"workflow_id"`
	// ArchiveBuried has the workflow's buried step jobs (those of a step
	// that failed before a retry, WF-18) leave the state with it, their
	// summaries going to the terminal index in the same append: nothing
	// can retry them any more (RL-11).
	ArchiveBuried bool `msgpack:"archive_buried,omitempty"`
}

// envelopeVersion: archive_buried is new in envelope version 2.
func (b *WorkflowCompleted) envelopeVersion() uint8 {
	if b.ArchiveBuried {
		return 2
	}
	return 1
}

// WorkflowFailed fails a workflow with Error (WF-20, WD-8).
type WorkflowFailed struct {
	WorkflowID string `msgpack:"workflow_id"`
	Step       int32  `msgpack:"step"`
	Error      string `msgpack:"error"`
	At         int64  `msgpack:"at"` // the failed-at instant (WF-21)
}

// WorkflowCancelled cancels a workflow (WF-17).
type WorkflowCancelled struct {
	WorkflowID string `msgpack:"workflow_id"`
	// ArchiveBuried has the workflow's buried step jobs leave the state
	// with it, their summaries going to the terminal index in the same
	// append: nothing can retry them any more (RL-11).
	ArchiveBuried bool `msgpack:"archive_buried,omitempty"`
}

// envelopeVersion: archive_buried is new in envelope version 2.
func (b *WorkflowCancelled) envelopeVersion() uint8 {
	if b.ArchiveBuried {
		return 2
	}
	return 1
}

// WorkflowRetried retries a failed workflow (WF-18).
type WorkflowRetried struct {
	WorkflowID string `msgpack:"workflow_id"`
	// DropOutputs, set when the current step is a Then step, discards the
	// outputs kept for the step: its job's success did not complete the
	// step (it failed or expired the workflow, or came after the failure),
	// and the retry runs a new job. Without it, as in records written
	// before it existed, the kept outputs stay, which is what a Parallel
	// step's branches need.
	DropOutputs bool `msgpack:"drop_outputs,omitempty"`
}

// envelopeVersion: drop_outputs is new in envelope version 2.
func (b *WorkflowRetried) envelopeVersion() uint8 {
	if b.DropOutputs {
		return 2
	}
	return 1
}

// WorkflowDeadlineExceeded follows the workflow_failed of an expiry (WD-8).
// DetectedBy is "check" or "step_boundary".
type WorkflowDeadlineExceeded struct {
	WorkflowID string `msgpack:"workflow_id"`
	DeadlineAt int64  `msgpack:"deadline_at"`
	DetectedAt int64  `msgpack:"detected_at"`
	DetectedBy string `msgpack:"detected_by"`
	// Handler names the on-deadline handler this expiry obliges to run
	// (WD-10); empty when the workflow has none.
	Handler string `msgpack:"handler,omitempty"`
}

// DeadlineHandlerStarted is appended before an on-deadline handler runs
// (WD-10). Expiry is the seq of the workflow_deadline_exceeded it serves.
type DeadlineHandlerStarted struct {
	WorkflowID string `msgpack:"workflow_id"`
	Handler    string `msgpack:"handler"`
	Expiry     uint64 `msgpack:"expiry"`
}

// DeadlineHandlerFinished is appended after an on-deadline handler returned:
// Outcome is "ok", "failed", "panicked" or "not_registered" (WD-10).
type DeadlineHandlerFinished struct {
	WorkflowID string `msgpack:"workflow_id"`
	Expiry     uint64 `msgpack:"expiry"`
	Outcome    string `msgpack:"outcome"`
}

// ShutdownInitiated anchors a shutdown's root (SD-3).
type ShutdownInitiated struct {
	Trigger    string `msgpack:"trigger"`
	StartAt    int64  `msgpack:"start"`
	TotalNanos int64  `msgpack:"total_ns"`
	GracefulAt int64  `msgpack:"g"`
	HardAt     int64  `msgpack:"hr"`
}

// ShutdownForceRequested records an explicit force (SD-22).
type ShutdownForceRequested struct {
	Trigger string `msgpack:"trigger"`
}

// ShutdownPhaseStarted opens one of the six phases (SD-11).
type ShutdownPhaseStarted struct {
	Phase int8   `msgpack:"phase"`
	Name  string `msgpack:"name"`
}

// ShutdownPhaseFinished closes a phase with its outcomes (SD-11, SD-28).
type ShutdownPhaseFinished struct {
	Phase    int8   `msgpack:"phase"`
	Name     string `msgpack:"name"`
	Graceful string `msgpack:"graceful"`
	Forced   string `msgpack:"forced"`
	// Completion is the report's completion, the status SD-11 records at
	// the end of phase 6 (publish_report); empty for phases 1 to 5, and in
	// records written before it existed.
	Completion string `msgpack:"completion,omitempty"`
}

// envelopeVersion: completion is new in envelope version 2.
func (b *ShutdownPhaseFinished) envelopeVersion() uint8 {
	if b.Completion != "" {
		return 2
	}
	return 1
}

// ShutdownReport is the immutable report of one shutdown (SD-27). Actions
// and Dependencies are flattened into fixed-size scalar slices so that the
// record stays a non-recursive struct of scalars (spec/reliability.md §3.4):
// entry i of each Action* slice describes action i.
type ShutdownReport struct {
	Completion           string   `msgpack:"completion"`
	Forced               bool     `msgpack:"forced"`
	Trigger              string   `msgpack:"trigger"`
	InitiatedAt          int64    `msgpack:"initiated_at"`
	BudgetNanos          int64    `msgpack:"budget_ns"`
	ElapsedNanos         int64    `msgpack:"elapsed_ns"`
	CoordinatorAccounted bool     `msgpack:"coordinator_accounted"`
	CoordinatorComplete  bool     `msgpack:"coordinator_complete"`
	RuntimeJoined        bool     `msgpack:"runtime_joined"`
	DrainReconciled      bool     `msgpack:"drain_reconciled"`
	CloseReconciled      bool     `msgpack:"close_reconciled"`
	Dependencies         []uint8  `msgpack:"dependencies"` // 3 entries: owned, signal, telemetry; bits Owned|Started<<1|Terminal<<2|Succeeded<<3
	ActionPhases         []int8   `msgpack:"action_phases"`
	ActionComponents     []string `msgpack:"action_components"`
	ActionGraceful       []string `msgpack:"action_graceful"`
	ActionForced         []string `msgpack:"action_forced"`
	Drained              int64    `msgpack:"drained"`
	ReleasedUnstarted    int64    `msgpack:"released_unstarted"`
	Released             int64    `msgpack:"released"`
	Unresolved           int64    `msgpack:"unresolved"`
	Quarantined          int64    `msgpack:"quarantined"`
	FailureCode          string   `msgpack:"failure_code,omitempty"`
}

func (*RunStarted) Kind() Kind               { return KindRunStarted }
func (*Debug) Kind() Kind                    { return KindDebug }
func (*JobEnqueued) Kind() Kind              { return KindJobEnqueued }
func (*AttemptStarted) Kind() Kind           { return KindAttemptStarted }
func (*AttemptSucceeded) Kind() Kind         { return KindAttemptSucceeded }
func (*AttemptRetryScheduled) Kind() Kind    { return KindAttemptRetryScheduled }
func (*AttemptBuried) Kind() Kind            { return KindAttemptBuried }
func (*AttemptReleased) Kind() Kind          { return KindAttemptReleased }
func (*JobBuried) Kind() Kind                { return KindJobBuried }
func (*JobRequeued) Kind() Kind              { return KindJobRequeued }
func (*QueuePaused) Kind() Kind              { return KindQueuePaused }
func (*QueueResumed) Kind() Kind             { return KindQueueResumed }
func (*WorkflowStarted) Kind() Kind          { return KindWorkflowStarted }
func (*StepCompleted) Kind() Kind            { return KindStepCompleted }
func (*StepDelayed) Kind() Kind              { return KindStepDelayed }
func (*WorkflowWaiting) Kind() Kind          { return KindWorkflowWaiting }
func (*SignalReceived) Kind() Kind           { return KindSignalReceived }
func (*WorkflowPaused) Kind() Kind           { return KindWorkflowPaused }
func (*WorkflowResumed) Kind() Kind          { return KindWorkflowResumed }
func (*WorkflowCompleted) Kind() Kind        { return KindWorkflowCompleted }
func (*WorkflowFailed) Kind() Kind           { return KindWorkflowFailed }
func (*WorkflowCancelled) Kind() Kind        { return KindWorkflowCancelled }
func (*WorkflowRetried) Kind() Kind          { return KindWorkflowRetried }
func (*WorkflowDeadlineExceeded) Kind() Kind { return KindWorkflowDeadlineExceeded }
func (*DeadlineHandlerStarted) Kind() Kind   { return KindDeadlineHandlerStarted }
func (*DeadlineHandlerFinished) Kind() Kind  { return KindDeadlineHandlerFinished }
func (*ShutdownInitiated) Kind() Kind        { return KindShutdownInitiated }
func (*ShutdownForceRequested) Kind() Kind   { return KindShutdownForceRequested }
func (*ShutdownPhaseStarted) Kind() Kind     { return KindShutdownPhaseStarted }
func (*ShutdownPhaseFinished) Kind() Kind    { return KindShutdownPhaseFinished }
func (*ShutdownReport) Kind() Kind           { return KindShutdownReport }

func (*RunStarted) isBody()               {}
func (*Debug) isBody()                    {}
func (*JobEnqueued) isBody()              {}
func (*AttemptStarted) isBody()           {}
func (*AttemptSucceeded) isBody()         {}
func (*AttemptRetryScheduled) isBody()    {}
func (*AttemptBuried) isBody()            {}
func (*AttemptReleased) isBody()          {}
func (*JobBuried) isBody()                {}
func (*JobRequeued) isBody()              {}
func (*QueuePaused) isBody()              {}
func (*QueueResumed) isBody()             {}
func (*WorkflowStarted) isBody()          {}
func (*StepCompleted) isBody()            {}
func (*StepDelayed) isBody()              {}
func (*WorkflowWaiting) isBody()          {}
func (*SignalReceived) isBody()           {}
func (*WorkflowPaused) isBody()           {}
func (*WorkflowResumed) isBody()          {}
func (*WorkflowCompleted) isBody()        {}
func (*WorkflowFailed) isBody()           {}
func (*WorkflowCancelled) isBody()        {}
func (*WorkflowRetried) isBody()          {}
func (*WorkflowDeadlineExceeded) isBody() {}
func (*DeadlineHandlerStarted) isBody()   {}
func (*DeadlineHandlerFinished) isBody()  {}
func (*ShutdownInitiated) isBody()        {}
func (*ShutdownForceRequested) isBody()   {}
func (*ShutdownPhaseStarted) isBody()     {}
func (*ShutdownPhaseFinished) isBody()    {}
func (*ShutdownReport) isBody()           {}

// NewBody returns a fresh zero body for kind k, or false if k is unknown.
func NewBody(k Kind) (Body, bool) {
	var b Body
	switch k {
	case KindRunStarted:
		b = new(RunStarted)
	case KindDebug:
		b = new(Debug)
	case KindJobEnqueued:
		b = new(JobEnqueued)
	case KindAttemptStarted:
		b = new(AttemptStarted)
	case KindAttemptSucceeded:
		b = new(AttemptSucceeded)
	case KindAttemptRetryScheduled:
		b = new(AttemptRetryScheduled)
	case KindAttemptBuried:
		b = new(AttemptBuried)
	case KindAttemptReleased:
		b = new(AttemptReleased)
	case KindJobBuried:
		b = new(JobBuried)
	case KindJobRequeued:
		b = new(JobRequeued)
	case KindQueuePaused:
		b = new(QueuePaused)
	case KindQueueResumed:
		b = new(QueueResumed)
	case KindWorkflowStarted:
		b = new(WorkflowStarted)
	case KindStepCompleted:
		b = new(StepCompleted)
	case KindStepDelayed:
		b = new(StepDelayed)
	case KindWorkflowWaiting:
		b = new(WorkflowWaiting)
	case KindSignalReceived:
		b = new(SignalReceived)
	case KindWorkflowPaused:
		b = new(WorkflowPaused)
	case KindWorkflowResumed:
		b = new(WorkflowResumed)
	case KindWorkflowCompleted:
		b = new(WorkflowCompleted)
	case KindWorkflowFailed:
		b = new(WorkflowFailed)
	case KindWorkflowCancelled:
		b = new(WorkflowCancelled)
	case KindWorkflowRetried:
		b = new(WorkflowRetried)
	case KindWorkflowDeadlineExceeded:
		b = new(WorkflowDeadlineExceeded)
	case KindDeadlineHandlerStarted:
		b = new(DeadlineHandlerStarted)
	case KindDeadlineHandlerFinished:
		b = new(DeadlineHandlerFinished)
	case KindShutdownInitiated:
		b = new(ShutdownInitiated)
	case KindShutdownForceRequested:
		b = new(ShutdownForceRequested)
	case KindShutdownPhaseStarted:
		b = new(ShutdownPhaseStarted)
	case KindShutdownPhaseFinished:
		b = new(ShutdownPhaseFinished)
	case KindShutdownReport:
		b = new(ShutdownReport)
	default:
		return nil, false
	}
	return b, true
}
