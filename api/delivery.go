package api

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/scheduler"
)

// Delivery is a handler's read-only view of its attempt: which job and
// attempt it is, its deadline, its cancellation (DL-12, DL-14), its
// attempt scope and its attempt-local values. It offers no way to settle
// or cancel: a handler decides its outcome only by what it returns.
// Middleware and guards receive the same Delivery as the handler.
//
// Every method is safe for concurrent use by goroutines the pipeline
// starts. What they add to the attempt counts only until the attempt's
// end: once the follow-ups are taken, [Delivery.Enqueue] fails with
// [ErrFollowUpTooLate]; once the scope's disposal point passed,
// [Scope.Register] fails with [ErrScopeClosed] and [Delivery.SetValue]
// stores nothing. A goroutine that may outlive its handler must expect
// these refusals; one the handler waits for before returning never sees
// them.
type Delivery struct {
	a   *scheduler.Attempt
	clk clock.Clock
	eng *Engine

	// fu guards the follow-up list, which Enqueue may extend from several
	// goroutines and the pipeline hands to the settlement once.
	fu        sync.Mutex
	followUps []scheduler.EnqueueRequest
	// followBytes sums the follow-ups' payloads.
	followBytes int
	// followTaken is set once the list was handed to the settlement.
	followTaken bool
}

func newDelivery(e *Engine, a *scheduler.Attempt) *Delivery {
	return &Delivery{a: a, clk: e.clk, eng: e}
}

// JobID returns the id of the job (handlers must be idempotent: the same
// job may run again after a crash, RL-10).
func (d *Delivery) JobID() string { return d.a.Job.ID }

// Handler returns the handler name the job was enqueued for.
func (d *Delivery) Handler() string { return d.a.Job.Handler }

// Queue returns the job's queue.
func (d *Delivery) Queue() string { return d.a.Job.Queue }

// Attempt returns the attempt number, 1 for the first start.
func (d *Delivery) Attempt() int { return int(d.a.Job.Attempts) }

// WorkflowID returns the workflow of a step job, or "".
func (d *Delivery) WorkflowID() string { return d.a.Job.WorkflowID }

// Deadline returns the attempt's deadline as the handler sees it now:
// min(P, G) during a shutdown, P otherwise (DL-12). It never grows, and
// it is the Deadline of the context the handler receives.
func (d *Delivery) Deadline() Deadline { return Deadline{at: d.a.Deadline(), clk: d.clk} }

// Cancellation returns the attempt's read-only cancellation view (DL-14).
func (d *Delivery) Cancellation() Cancellation { return Cancellation{sig: d.a.Signal()} }

// Scope returns the attempt scope: resources registered on it are closed
// exactly once by the engine, after the attempt's termination hooks and
// before its settlement (DL-36).
func (d *Delivery) Scope() *Scope { return &Scope{s: d.a.Scope()} }

// SetValue stores an attempt-local value under key. Values that implement
// [Releaser] are released once by the engine when the attempt ends, unless
// a termination hook took them (DL-36 step 3).
//
// A call made once the attempt reached its scope's disposal point (the
// execution returned and its termination hooks ran) stores nothing: a
// Releaser is released at once, on the calling goroutine, since the
// engine's release has passed.
func (d *Delivery) SetValue(key string, v any) {
	if d.a.Scope().IfOpen(func() { d.a.SetValue(key, v) }) {
		return
	}
	if r, ok := v.(Releaser); ok {
		r.Release()
	}
}

// Value returns the attempt-local value under key.
func (d *Delivery) Value(key string) (any, bool) { return d.a.Value(key) }

// Enqueue adds a job to enqueue in the same atomic append as this
// attempt's successful settlement: it is enqueued if and only if the
// attempt succeeds, and, for a workflow step, if its success counts for
// the step: not once the workflow left running or paused (WF-20), nor at
// or after its deadline_at (WD-7). Its validation error, if any, is
// returned at once.
//
// One attempt enqueues at most [FollowUpsMax] jobs, whose payloads
// together take at most twice Options.PayloadBytesMax: the settlement and
// its follow-ups are one atomic append, which must fit in one group
// commit. Past either limit Enqueue returns an error wrapping
// [ErrFollowUpLimit] and adds nothing; the jobs added before stay. Fan out
// wider in steps, or enqueue from outside the handler.
//
// Enqueue may be called from several goroutines at once, from the
// middleware's Before and After, the guards and the handler. A call made
// once the follow-ups were taken (the pipeline returned, on success or
// not) or can no longer settle (the attempt passed its cooperative
// deadline or was abandoned, DL-26) adds nothing and returns an error
// wrapping [ErrFollowUpTooLate]: a nil error always means the job goes
// with the settlement if the attempt succeeds.
func (d *Delivery) Enqueue(handler string, payload any, opts ...JobOption) error {
	req, err := d.eng.enqueueRequest(handler, payload, opts)
	if err != nil {
		return err
	}
	d.fu.Lock()
	defer d.fu.Unlock()
	if d.followTaken || d.a.ExecutionReturned() || !d.a.Proceed() {
		return fmt.Errorf("%w: job for handler %q from attempt %d of %s job %s",
			ErrFollowUpTooLate, handler, d.Attempt(), d.Handler(), d.JobID())
	}
	if len(d.followUps) >= FollowUpsMax {
		return fmt.Errorf("%w: job %d of one attempt, limit %d (FollowUpsMax)", ErrFollowUpLimit, len(d.followUps)+1, FollowUpsMax)
	}
	if limit := 2 * d.eng.opts.PayloadBytesMax; d.followBytes+len(req.Payload) > limit {
		return fmt.Errorf("%w: payloads of one attempt's follow-ups would take %d bytes, limit %d (2 × Options.PayloadBytesMax)",
			ErrFollowUpLimit, d.followBytes+len(req.Payload), limit)
	}
	d.followUps = append(d.followUps, req)
	d.followBytes += len(req.Payload)
	return nil
}

// takeFollowUps hands the follow-up list to the attempt's settlement, once,
// and closes it: a later Enqueue fails with [ErrFollowUpTooLate] instead
// of adding a job that would never exist. The pipeline calls it as it
// builds a successful result.
func (d *Delivery) takeFollowUps() []scheduler.EnqueueRequest {
	d.fu.Lock()
	defer d.fu.Unlock()
	d.followTaken = true
	return d.followUps
}

// Releaser is implemented by attempt-local values that hold something to
// give back when the attempt ends. A panic in Release is recorded as
// DELIVERY_RESOURCE_RELEASE_PANICKED.
type Releaser = scheduler.Releaser

// Scope is an attempt scope: named resources that live as long as one
// attempt. Resolve them with Lookup, from the pipeline or from a
// termination hook while the scope is open.
type Scope struct {
	s *scheduler.Scope
}

// Register adds r under key, to be closed once when the attempt ends, in
// reverse order of registration. It fails with a [*NameError] naming key
// for an empty key (matching [ErrInvalidName]), a nil r (matching
// [ErrInvalidOption]) or a key already held (matching [ErrDuplicate]),
// and, wrapping [ErrScopeClosed], once the attempt reached its scope's
// disposal point (the execution returned and its termination hooks ran,
// DL-36), whether or not the scope held anything. When it fails, r is not
// registered and the caller must close it.
func (s *Scope) Register(key string, r io.Closer) error {
	switch {
	case key == "":
		return &NameError{Kind: "resource", Name: key, Err: nameRuleError("must not be empty")}
	case r == nil:
		return &NameError{Kind: "resource", Name: key, Err: argRuleError("resource is nil")}
	}
	err := s.s.Register(key, r)
	if errors.Is(err, scheduler.ErrScopeDuplicate) {
		return &NameError{Kind: "resource", Name: key, Err: ErrDuplicate}
	}
	return err
}

// Lookup returns the resource under key while the scope is open.
func (s *Scope) Lookup(key string) (io.Closer, bool) { return s.s.Lookup(key) }

// Deadline is the instant by which a handler should have returned.
type Deadline struct {
	at  time.Time
	clk clock.Clock
}

// At returns the deadline instant.
func (d Deadline) At() time.Time { return d.at }

// String returns the deadline instant in RFC 3339 with nanoseconds, in
// its own location, so that a Deadline printed or logged reads as the
// instant it is.
func (d Deadline) String() string { return d.at.Format(time.RFC3339Nano) }

// Remaining returns the budget left now, never negative (DL-12, DL-13).
// It says only whether budget exists at this instant: pass the context to
// every blocking call instead of relying on it.
func (d Deadline) Remaining() time.Duration { return deadlines.Remaining(d.at, d.clk.Now()) }

// Reason is why an attempt was cancelled (DL-15).
type Reason = deadlines.Reason

// The cancellation reasons of DL-15.
const (
	ReasonDeliveryTimeout     = deadlines.ReasonDeliveryTimeout
	ReasonShutdownDeadline    = deadlines.ReasonShutdownDeadline
	ReasonForcedShutdown      = deadlines.ReasonForcedShutdown
	ReasonRuntimeFailure      = deadlines.ReasonRuntimeFailure
	ReasonRuntimeCancellation = deadlines.ReasonRuntimeCancellation
)

// CodeReasonlessCancellation is the code of the debug record the engine
// appends when an attempt's source is cancelled by a path that recorded no
// reason: the attempt gets [ReasonRuntimeCancellation], the defensive
// default, and the record's subject is the job's id (DL-15).
const CodeReasonlessCancellation = scheduler.CodeReasonlessCancellation

// Cancellation is a read-only view of an attempt's cancellation, or of a
// termination hook's cleanup cancellation: a done channel, whether it
// fired, and the first reason with its instant (DL-14, DL-16). The context
// passed with it is cancelled with the same cause, a [*CancelReason].
type Cancellation struct {
	sig *scheduler.Signal
}

// CancelReason is the cause (see context.Cause) of a cancelled attempt
// context: the first reason and the instant it was recorded.
type CancelReason = scheduler.CancelReason

// Done is closed when the attempt is cancelled.
func (c Cancellation) Done() <-chan struct{} { return c.sig.Done() }

// IsCancelled reports whether the attempt has been cancelled. Like
// [Deadline.Remaining], it holds only at the instant of the call (DL-13).
func (c Cancellation) IsCancelled() bool { return c.sig.IsCancelled() }

// Reason returns the first reason and the instant it was recorded, or
// false if the attempt is not cancelled (DL-16). Deadline-driven reasons
// carry the deadline instant, not the instant the engine observed it.
func (c Cancellation) Reason() (Reason, time.Time, bool) { return c.sig.Reason() }

// TerminationCause says why termination hooks run (DL-35).
type TerminationCause = scheduler.Cause

// Termination causes.
const (
	// ExecutionCancelled: the attempt was abandoned at its cooperative
	// deadline after a cancellation reason; see [Termination.Reason].
	ExecutionCancelled = scheduler.CauseExecutionCancelled
	// TerminationPanicked: a normal After panicked (DL-28).
	TerminationPanicked = scheduler.CausePanicked
	// OwnerAbandoned: the attempt's owner was torn down.
	OwnerAbandoned = scheduler.CauseOwnerAbandoned
)

// NormalExit is how a middleware's normal After ended (DL-29).
type NormalExit = scheduler.Exit

// Normal exits a termination hook may see (DL-32).
const (
	ExitNotStarted  = scheduler.ExitNotStarted
	ExitInterrupted = scheduler.ExitInterrupted
	ExitPanicked    = scheduler.ExitPanicked
)

// Termination is what a middleware's termination hook may read (DL-35):
// the attempt's identity, why the hooks run, its own normal exit, its own
// cleanup cancellation and deadline, the still-open attempt scope, the
// attempt-local values and whether the execution has returned. It has no
// way to change the attempt's result and no settlement authority.
type Termination struct {
	d   *Delivery
	run *scheduler.HookRun
}

// JobID returns the id of the job.
func (t *Termination) JobID() string { return t.d.JobID() }

// Handler returns the handler name of the job.
func (t *Termination) Handler() string { return t.d.Handler() }

// Queue returns the job's queue.
func (t *Termination) Queue() string { return t.d.Queue() }

// Attempt returns the attempt number.
func (t *Termination) Attempt() int { return t.d.Attempt() }

// WorkflowID returns the workflow of a step job, or "".
func (t *Termination) WorkflowID() string { return t.d.WorkflowID() }

// Cause returns why the hooks run.
func (t *Termination) Cause() TerminationCause { return t.run.Cause }

// Reason returns the attempt's first cancellation reason and its instant,
// or false if none was recorded (a panic ended the unwind).
func (t *Termination) Reason() (Reason, time.Time, bool) {
	if t.run.Reason == deadlines.ReasonNone {
		return deadlines.ReasonNone, time.Time{}, false
	}
	return t.run.Reason, t.run.ReasonAt, true
}

// Exit returns the normal exit of the hook's own middleware:
// ExitNotStarted, ExitInterrupted or ExitPanicked.
func (t *Termination) Exit() NormalExit { return t.run.Exit }

// Cancellation returns the hook's own cleanup cancellation: independent of
// the attempt's, fired at the hook's deadline.
func (t *Termination) Cancellation() Cancellation { return Cancellation{sig: t.run.Signal()} }

// Deadline returns the hook's deadline: its fair share of the time left
// for hooks (DL-33).
func (t *Termination) Deadline() Deadline { return Deadline{at: t.run.Deadline(), clk: t.d.clk} }

// Lookup resolves a resource from the still-open attempt scope.
func (t *Termination) Lookup(key string) (io.Closer, bool) { return t.d.a.Scope().Lookup(key) }

// Value returns the attempt-local value under key.
func (t *Termination) Value(key string) (any, bool) { return t.d.a.Value(key) }

// TakeValue returns and removes the attempt-local value under key; the
// engine then no longer releases it.
func (t *Termination) TakeValue(key string) (any, bool) { return t.d.a.TakeValue(key) }

// ExecutionReturned reports whether the attempt's execution goroutine has
// returned. Hooks must tolerate running while it is still alive (DL-35).
func (t *Termination) ExecutionReturned() bool { return t.d.a.ExecutionReturned() }
