package api

import (
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

// Enqueue appends a job_enqueued for handler with payload and returns the
// job id once the append is synced (JB-1). The payload is encoded with
// msgpack (map keys sorted) and must not be nil: an untyped nil and a nil
// pointer, map, slice, func or channel are refused alike, with an error
// matching [ErrInvalidPayload]. With [Unique], an existing pending or
// processing job enqueued with Unique for the same handler and payload is
// returned instead and nothing is appended (JB-5). A handler name that
// breaks the name rule ([ErrInvalidName]) is checked first, with a
// [*NameError] matching [ErrInvalidName] and, since no handler can be
// registered under it, [ErrUnknownHandler]. An
// unregistered handler ([ErrUnknownHandler]; the handler of a workflow
// step too, with an error naming the step: the engine enqueues a step's
// jobs), an invalid option or
// payload ([ErrInvalidPayload]: nil, over Options.PayloadBytesMax, or one
// that does not decode into the handler's type), a cancelled ctx or a closed engine return a typed error and
// append nothing; a ctx that ends during
// the call is treated as [Engine] says: once the engine has taken the
// call, it returns the job id even if ctx ended meanwhile. While a full
// batch of records already waits for the disk, the engine takes no new
// call until it has gone, so that starts and settlements never queue
// behind more: under a flood of producers, Enqueue waits for room there,
// and a ctx that ends meanwhile returns its error with nothing appended.
// Once a shutdown has begun, Enqueue is refused with [ErrShuttingDown]
// (JB-1, SD-12).
func (e *Engine) Enqueue(ctx context.Context, handler string, payload any, opts ...JobOption) (string, error) {
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	// A name no handler can have is refused as every call that takes a
	// name refuses one, before the engine's state is looked at.
	if err := handlerNameError(handler); err != nil {
		return "", err
	}
	if err := e.admit(); err != nil {
		return "", err
	}
	req, err := e.enqueueRequest(handler, payload, opts)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("quire: enqueue %s: %w", handler, err)
	}
	var id string
	err = e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		d, jid := m.Enqueue(now, req)
		id = jid
		return d, nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// JobStatus is a job's status (JB-3).
type JobStatus string

// Job statuses. Parked is not a journal status: the job is pending but its
// handler is not registered in this process, so it cannot start.
const (
	JobPending    JobStatus = "pending"
	JobProcessing JobStatus = "processing"
	JobCompleted  JobStatus = "completed"
	JobBuried     JobStatus = "buried"
	// JobCorrupt is the status of a job in a stream Open quarantined
	// ([QuarantinedStream]): [Job].Corrupt says why.
	JobCorrupt JobStatus = "corrupt"
)

// Job is the status of one job.
type Job struct {
	ID       string
	Handler  string
	Queue    string
	Priority Priority
	Status   JobStatus
	// Parked is true for a pending job whose handler is not registered,
	// or that is a step of a parked workflow ([WorkflowInfo].Parked: its
	// definition changed): it does not start until that is registered.
	Parked bool
	// Attempts counts starts; Consumed counts attempts consumed under DL-6;
	// MaxAttempts is the job's limit. For a completed job it is read from
	// the terminal index, and is 0 if the job completed before the index
	// recorded the limit (an older journal).
	Attempts    int
	Consumed    int
	MaxAttempts int
	// AvailableAt is when a pending job may start (zero for other statuses).
	AvailableAt time.Time
	// LastCode and LastError describe the last failure, if any. LastCode
	// is the code of a [Retryable] or [Permanent] error, HANDLER_ERROR for
	// any other error, or a code of the engine's (HANDLER_PANICKED,
	// DELIVERY_TIMEOUT, ...). LastError is the error's whole text: for
	// Retryable and Permanent it starts with the class and code
	// ("retryable MAINTENANCE: billing is in maintenance"); for a panic
	// it is the panic value. A job buried with [Engine.Bury] keeps the
	// last failure of its attempts (JB-6); one that never failed reads
	// BURIED_BY_OPERATOR and "buried by operator".
	LastCode   string
	LastError  string
	WorkflowID string
	// Corrupt is the damage that quarantined the job's stream, for a
	// JobCorrupt job; the other fields are as of its last good record.
	Corrupt *journal.CorruptError
}

// Status returns the status of job id. Jobs that completed are read from
// the journal's terminal index, so they stay queryable. An id that names
// no job (unknown, malformed, or a workflow's) returns a [*NameError]
// matching [ErrNotFound]; a damaged index entry of the job, an error
// matching journal.ErrCorrupt.
func (e *Engine) Status(ctx context.Context, id string) (Job, error) {
	if err := checkContext(ctx); err != nil {
		return Job{}, err
	}
	if err := idError("job", id); err != nil {
		return Job{}, err
	}
	if err := e.live(); err != nil {
		return Job{}, err
	}
	var (
		out   Job
		found bool
	)
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		out, found = e.jobInState(m, id)
		return scheduler.Decision{}, nil
	})
	if err != nil || found {
		return out, err
	}
	return e.jobOutOfState(ctx, id)
}

// jobInState reports job id as the machine's state holds it, and false if
// the state does not hold it (completed, in a quarantined stream, or
// unknown). It runs on the loop.
func (e *Engine) jobInState(m *scheduler.Machine, id string) (Job, bool) {
	j, ok := m.State().Jobs[id]
	if !ok {
		return Job{}, false
	}
	out := jobFromState(j)
	if j.Status == replay.JobPending {
		w := m.State().Workflows[j.WorkflowID]
		out.Parked = e.handler(j.Handler) == nil || w != nil && m.WorkflowParked(w)
	}
	return out, true
}

// jobOutOfState reports job id, which the state does not hold: from its
// quarantined stream or the terminal index, neither of which changes
// while the engine is open.
func (e *Engine) jobOutOfState(ctx context.Context, id string) (Job, error) {
	// A stream named id is a job's unless it is a workflow's.
	if q := e.quarantine.of(id); q != nil && (q.Stream != id || q.Workflow == "") {
		return e.quarantinedJob(ctx, q, id)
	}
	s, ok, err := e.finishedJob(id)
	if err != nil {
		return Job{}, fmt.Errorf("quire: status of job %s: %w", id, err)
	}
	if !ok {
		return Job{}, &NameError{Kind: "job", Name: id, Err: ErrNotFound}
	}
	return Job{
		ID: s.ID, Handler: s.Handler, Queue: s.Queue, Priority: Priority(s.Priority),
		Status: JobStatus(s.Status.String()), Attempts: int(s.Attempts), Consumed: int(s.Consumed),
		MaxAttempts: int(s.MaxAttempts), LastCode: s.LastCode, LastError: s.LastError, WorkflowID: s.WorkflowID,
	}, nil
}

// finishedJob reads job id's entry in the terminal index (DESIGN §4). ok
// is false when there is none, and when the entry is of another kind: job
// ids, workflow ids and idempotency keys share the index, and an entry's
// kind is told by its shape ([replay.KindOfIndexValue]), not by whether
// it decodes as a job, so that a damaged job entry stays an error
// matching journal.ErrCorrupt.
func (e *Engine) finishedJob(id string) (replay.JobSummary, bool, error) {
	return finished(e, id, replay.IndexJob, replay.DecodeSummary)
}

// finishedWorkflow reads workflow id's entry in the terminal index, as
// [Engine.finishedJob] reads a job's: an entry of another kind is no
// workflow, a damaged workflow entry is an error.
func (e *Engine) finishedWorkflow(id string) (replay.WorkflowSummary, bool, error) {
	return finished(e, id, replay.IndexWorkflow, replay.DecodeWorkflowSummary)
}

// finished reads id's terminal-index entry if it is of kind, with decode.
func finished[T any](e *Engine, id string, kind replay.IndexKind, decode func([]byte) (T, error)) (T, bool, error) {
	var zero T
	b, ok, err := e.j.Index(id)
	if err != nil || !ok {
		return zero, false, closedJournal(err)
	}
	k, err := replay.KindOfIndexValue(b)
	if err != nil || k != kind {
		return zero, false, err
	}
	s, err := decode(b)
	if err != nil {
		return zero, false, err
	}
	return s, true, nil
}

// idError refuses an id no job or workflow can have: empty, or longer than
// a journal id (record.StreamIDBytesMax). Like an unknown id, it is a
// [*NameError] matching [ErrNotFound], which says why.
func idError(kind, id string) error {
	if err := validateID(id); err != nil {
		return &NameError{Kind: kind, Name: id, Err: fmt.Errorf("%w: id %v", ErrNotFound, err)}
	}
	return nil
}

func jobFromState(j *replay.Job) Job {
	out := Job{
		ID: j.ID, Handler: j.Handler, Queue: j.Queue, Priority: Priority(j.Priority),
		Status: JobStatus(j.Status.String()), Attempts: int(j.Attempts), Consumed: int(j.Consumed),
		MaxAttempts: int(j.Retry.MaxAttempts), LastCode: j.LastCode, LastError: j.LastError,
		WorkflowID: j.WorkflowID,
	}
	if j.Status == replay.JobPending {
		out.AvailableAt = time.Unix(0, j.AvailableAt)
	}
	return out
}

// Bury buries a pending job with the message "buried by operator" (JB-6).
// The job keeps the last failure of its attempts ([Job].LastCode). A
// processing, buried or unknown job is refused with a typed error. An
// ended ctx returns its error and appends nothing (see [Engine]). During
// a shutdown it is accepted until phase 4 starts, then refused with
// [ErrShuttingDown] (SD-12).
func (e *Engine) Bury(ctx context.Context, id string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := idError("job", id); err != nil {
		return err
	}
	if err := e.live(); err != nil {
		return err
	}
	return e.controlJob(ctx, id, "only a pending job can be buried", e.untilCloseEvidence(func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Bury(now, id, CodeBuriedByOperator, MessageBuriedByOperator)
	}))
}

// Retry moves a buried job back to pending, available now, with a fresh
// consumed count (JB-7). A [Unique] job whose key another pending or
// processing job took meanwhile keeps its key and takes part in
// deduplication again once that job ends (JB-5). A job that is not buried, and a buried step job
// whose workflow is not running (retry the workflow instead, with
// [Engine.RetryWorkflow]), are refused with an error matching [ErrState];
// an unknown id with a [*NameError] matching [ErrNotFound]. An ended ctx
// returns its error and appends nothing (see [Engine]). Once a shutdown
// has begun it is refused with [ErrShuttingDown] (SD-12).
func (e *Engine) Retry(ctx context.Context, id string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := idError("job", id); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	return e.controlJob(ctx, id, "only a buried job can be retried", func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Requeue(now, id)
	})
}

// RetryBuried requeues every buried job of queue and returns how many it
// requeued (JB-7), skipping buried step jobs whose workflow is not
// running. It requeues them in appends of up to [RetryBuriedBatch] jobs,
// so that however many there are, a snapshot can come between two and a
// restart replays no more than SnapshotEvery records and a group (RL-12):
// a crash, an ended ctx or a shutdown between two appends leaves the jobs
// after them buried, and the count says how many were requeued. A ctx
// ended before the call returns its error and appends nothing (see
// [Engine]). Once a shutdown has begun it is refused with
// [ErrShuttingDown] (SD-12).
func (e *Engine) RetryBuried(ctx context.Context, queue string) (int, error) {
	if err := checkContext(ctx); err != nil {
		return 0, err
	}
	if err := queueError(queue); err != nil {
		return 0, err
	}
	if err := e.admit(); err != nil {
		return 0, err
	}
	total := 0
	for {
		var n int
		more := false
		err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
			d, k, left := m.RequeueBuriedUpTo(now, queue, RetryBuriedBatch)
			n, more = k, left
			return d, nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if !more {
			return total, nil
		}
		if err := e.admit(); err != nil { // the next submit refuses an ended ctx
			return total, err
		}
	}
}

// RetryBuriedBatch is the most jobs [Engine.RetryBuried] requeues in one
// append: half of the journal's default group, so that each append leaves
// room for a snapshot to follow it (RL-12).
const RetryBuriedBatch = journal.GroupRecordsMaxDefault / 2

// PauseQueue stops attempts of queue from starting; running attempts
// continue and enqueue is still accepted (JB-8). Pausing a paused queue
// appends nothing. The pause survives restarts. An ended ctx returns its
// error and appends nothing (see [Engine]). During a shutdown it is
// accepted until phase 4 starts, then refused with [ErrShuttingDown]
// (SD-12).
func (e *Engine) PauseQueue(ctx context.Context, queue string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := queueError(queue); err != nil {
		return err
	}
	if err := e.live(); err != nil {
		return err
	}
	return e.submit(ctx, e.untilCloseEvidence(func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.PauseQueue(queue), nil
	}))
}

// ResumeQueue resumes a paused queue (JB-8). Resuming a running queue
// appends nothing. An ended ctx returns its error and appends nothing
// (see [Engine]). Once a shutdown has begun it is refused with
// [ErrShuttingDown] (SD-12).
func (e *Engine) ResumeQueue(ctx context.Context, queue string) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := queueError(queue); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	return e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.ResumeQueue(queue), nil
	})
}

// queueError refuses a queue name no queue can have (empty or too long),
// with the same [*NameError] for every call that names a queue.
func queueError(queue string) error {
	if err := validateName(queue); err != nil {
		return &NameError{Kind: "queue", Name: queue, Err: err}
	}
	return nil
}

// controlJob runs fn, a job control call, on the engine's loop. A job the
// state does not hold is unknown or finished: fn's ErrNotFound then
// becomes an empty decision, which is answered only once every earlier
// decision is acknowledged, so the terminal index serves the job if it
// finished in one of them. A finished (completed) job is refused as a job
// of any other wrong status is, with an error matching [ErrState] that
// names it and its status (JB-6, JB-7); only an id the index does not
// know as a job is [ErrNotFound].
func (e *Engine) controlJob(ctx context.Context, id, only string, fn func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error)) error {
	gone := false
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		d, err := fn(m, now)
		if errorsIs(err, scheduler.ErrNotFound) {
			gone = true
			return scheduler.Decision{}, nil
		}
		return d, err
	})
	if err != nil || !gone {
		return e.mapJobErr(id, err)
	}
	if qerr := e.quarantinedErr("job", id); qerr != nil {
		return qerr
	}
	s, ok, err := e.finishedJob(id)
	switch {
	case err != nil:
		return fmt.Errorf("quire: job %s: %w", id, err)
	case !ok:
		return &NameError{Kind: "job", Name: id, Err: ErrNotFound}
	}
	if s.Status == replay.JobBuried && s.WorkflowID != "" {
		// A buried step job leaves the engine only with its workflow's
		// end (cancelled, or completed after a retry replaced it): no
		// call can requeue it, and "only a buried job" would not say why.
		return fmt.Errorf("%w: job %s is a buried step of workflow %s, which has ended: the job left the engine with it and can no longer be retried or buried",
			ErrState, id, s.WorkflowID)
	}
	return fmt.Errorf("%w: job %s is %s, %s", ErrState, id, s.Status, only)
}

func (e *Engine) mapJobErr(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errorsIs(err, scheduler.ErrNotFound):
		if qerr := e.quarantinedErr("job", id); qerr != nil {
			return qerr
		}
		return &NameError{Kind: "job", Name: id, Err: ErrNotFound}
	case errorsIs(err, scheduler.ErrState):
		return stateErr(err)
	}
	return err
}
