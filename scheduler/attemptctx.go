package scheduler

import (
	"context"
	"sync/atomic"
	"time"
)

// attemptContext is the context of an attempt or of one termination hook:
// cancelled by the runner from its injected clock, never by the wall
// clock, and reporting the deadline user code may see (DL-12), which the
// runner lowers when a root is installed. context.WithDeadline would time
// out on the wall clock, which a simulated run must never do.
type attemptContext struct {
	context.Context
	deadline atomic.Pointer[time.Time]
	first    time.Time // the deadline at creation, which deadline points to
}

// Deadline returns the current deadline. Contexts derived from it copy
// the deadline they saw when they were derived (DL-12).
func (c *attemptContext) Deadline() (time.Time, bool) { return *c.deadline.Load(), true }

// lower sets the deadline to d if d is earlier: it never grows.
func (c *attemptContext) lower(d time.Time) {
	for {
		old := c.deadline.Load()
		if !d.Before(*old) {
			return
		}
		if c.deadline.CompareAndSwap(old, &d) {
			return
		}
	}
}

func newAttemptContext(parent context.Context, deadline time.Time) (*attemptContext, context.CancelCauseFunc) {
	c := new(attemptContext)
	return c, c.init(parent, deadline)
}

// init makes c a context under parent with the given deadline, in place,
// and returns its cancel func.
func (c *attemptContext) init(parent context.Context, deadline time.Time) context.CancelCauseFunc {
	ctx, cancel := context.WithCancelCause(parent)
	c.Context = ctx
	c.first = deadline
	c.deadline.Store(&c.first)
	return cancel
}
