package api

import (
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

// Enqueue appends a job_enqueued for handler with payload and returns the
// job id once the append is synced (JB-1). The payload is encoded with
// msgpack (map keys sorted) and must not be nil. With [Unique], an
// existing pending or processing job enqueued with Unique for the same
// handler and payload is returned instead and nothing is appended (JB-5). An unregistered
// handler, an invalid option or payload, a cancelled ctx or a closed
// engine return a typed error and append nothing.
func (e *Engine) Enqueue(ctx context.Context, handler string, payload any, opts ...JobOption) (string, error) {
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
)

// Job is the status of one job.
type Job struct {
	ID       string
	Handler  string
	Queue    string
	Priority Priority
	Status   JobStatus
	// Parked is true for a pending job whose handler is not registered.
	Parked bool
	// Attempts counts starts; Consumed counts attempts consumed under DL-6;
	// MaxAttempts is the job's limit.
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
	// it is the panic value.
	LastCode   string
	LastError  string
	WorkflowID string
}

// Status returns the status of job id. Jobs that completed are read from
// the journal's terminal index, so they stay queryable.
func (e *Engine) Status(ctx context.Context, id string) (Job, error) {
	if err := e.live(); err != nil {
		return Job{}, err
	}
	var (
		out   Job
		found bool
	)
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		j, ok := m.State().Jobs[id]
		if !ok {
			return scheduler.Decision{}, nil
		}
		found = true
		out = jobFromState(j)
		out.Parked = j.Status == replay.JobPending && e.handler(j.Handler) == nil
		return scheduler.Decision{}, nil
	})
	if err != nil || found {
		return out, err
	}
	b, ok, err := e.j.Index(id)
	if err != nil {
		return Job{}, fmt.Errorf("quire: status of job %s: %w", id, err)
	}
	if !ok {
		return Job{}, &NameError{Kind: "job", Name: id, Err: ErrNotFound}
	}
	s, err := replay.DecodeSummary(b)
	if err != nil {
		return Job{}, fmt.Errorf("quire: status of job %s: %w", id, err)
	}
	return Job{
		ID: s.ID, Handler: s.Handler, Queue: s.Queue, Priority: Priority(s.Priority),
		Status: JobStatus(s.Status.String()), Attempts: int(s.Attempts), Consumed: int(s.Consumed),
		LastCode: s.LastCode, LastError: s.LastError, WorkflowID: s.WorkflowID,
	}, nil
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
// A processing, buried or unknown job is refused with a typed error.
func (e *Engine) Bury(ctx context.Context, id string) error {
	if err := e.live(); err != nil {
		return err
	}
	return e.mapJobErr(id, e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Bury(id, CodeBuriedByOperator, MessageBuriedByOperator)
	}))
}

// Retry moves a buried job back to pending, available now, with a fresh
// consumed count (JB-7).
func (e *Engine) Retry(ctx context.Context, id string) error {
	if err := e.admit(); err != nil {
		return err
	}
	return e.mapJobErr(id, e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.Requeue(now, id)
	}))
}

// RetryBuried requeues every buried job of queue and returns how many it
// requeued (JB-7).
func (e *Engine) RetryBuried(ctx context.Context, queue string) (int, error) {
	if err := e.admit(); err != nil {
		return 0, err
	}
	var n int
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		d, k := m.RequeueBuried(now, queue)
		n = k
		return d, nil
	})
	return n, err
}

// PauseQueue stops attempts of queue from starting; running attempts
// continue and enqueue is still accepted (JB-8). Pausing a paused queue
// appends nothing. The pause survives restarts.
func (e *Engine) PauseQueue(ctx context.Context, queue string) error {
	if err := validateName(queue); err != nil {
		return &NameError{Kind: "queue", Name: queue, Err: err}
	}
	if err := e.live(); err != nil {
		return err
	}
	return e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.PauseQueue(queue), nil
	})
}

// ResumeQueue resumes a paused queue (JB-8). Resuming a running queue
// appends nothing.
func (e *Engine) ResumeQueue(ctx context.Context, queue string) error {
	if err := validateName(queue); err != nil {
		return &NameError{Kind: "queue", Name: queue, Err: err}
	}
	if err := e.admit(); err != nil {
		return err
	}
	return e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		return m.ResumeQueue(queue), nil
	})
}

func (e *Engine) mapJobErr(id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errorsIs(err, scheduler.ErrNotFound):
		return &NameError{Kind: "job", Name: id, Err: ErrNotFound}
	case errorsIs(err, scheduler.ErrState):
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	return err
}
