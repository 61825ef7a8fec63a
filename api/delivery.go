package api

import (
	"context"
	"errors"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/scheduler"
)

// Delivery is a handler's read-only view of its attempt: which job and
// attempt it is, its deadline, and its cancellation (DL-12, DL-14). It
// offers no way to settle or cancel: a handler decides its outcome only by
// what it returns.
type Delivery struct {
	jobID    string
	handler  string
	queue    string
	attempt  int
	workflow string
	deadline time.Time
	clk      clock.Clock
	ctx      context.Context

	followUps []scheduler.EnqueueRequest
	eng       *Engine
	err       error
}

// JobID returns the id of the job (handlers must be idempotent: the same
// job may run again after a crash, RL-10).
func (d *Delivery) JobID() string { return d.jobID }

// Handler returns the handler name the job was enqueued for.
func (d *Delivery) Handler() string { return d.handler }

// Queue returns the job's queue.
func (d *Delivery) Queue() string { return d.queue }

// Attempt returns the attempt number, 1 for the first start.
func (d *Delivery) Attempt() int { return d.attempt }

// WorkflowID returns the workflow of a step job, or "".
func (d *Delivery) WorkflowID() string { return d.workflow }

// Deadline returns the attempt's deadline as the handler sees it (DL-12).
func (d *Delivery) Deadline() Deadline { return Deadline{at: d.deadline, clk: d.clk} }

// Cancellation returns the attempt's read-only cancellation view (DL-14).
func (d *Delivery) Cancellation() Cancellation { return Cancellation{ctx: d.ctx} }

// Enqueue adds a job to enqueue in the same atomic append as this
// attempt's successful settlement: it is enqueued if and only if the
// attempt succeeds. Its validation error, if any, is returned at once.
func (d *Delivery) Enqueue(handler string, payload any, opts ...JobOption) error {
	req, err := d.eng.enqueueRequest(handler, payload, opts)
	if err != nil {
		return err
	}
	d.followUps = append(d.followUps, req)
	return nil
}

// Deadline is the instant by which a handler should have returned.
type Deadline struct {
	at  time.Time
	clk clock.Clock
}

// At returns the deadline instant.
func (d Deadline) At() time.Time { return d.at }

// Remaining returns the budget left now, never negative (DL-12, DL-13).
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

// Cancellation is a read-only view of an attempt's cancellation: a done
// channel, whether it fired, and the first reason with its instant.
type Cancellation struct {
	ctx context.Context
}

// Done is closed when the attempt is cancelled.
func (c Cancellation) Done() <-chan struct{} { return c.ctx.Done() }

// IsCancelled reports whether the attempt has been cancelled.
func (c Cancellation) IsCancelled() bool { return c.ctx.Err() != nil }

// Reason returns the first reason and the instant it was recorded, or
// false if the attempt is not cancelled (DL-16).
func (c Cancellation) Reason() (Reason, time.Time, bool) {
	if c.ctx.Err() == nil {
		return deadlines.ReasonNone, time.Time{}, false
	}
	var cr *scheduler.CancelReason
	if errors.As(context.Cause(c.ctx), &cr) {
		if r, ok := deadlines.ParseReason(cr.Reason); ok {
			return r, cr.At, true
		}
	}
	return deadlines.ReasonRuntimeCancellation, time.Time{}, true
}
