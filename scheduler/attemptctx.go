package scheduler

import (
	"context"
	"time"
)

// attemptContext is an attempt's context: cancelled by the runner from its
// injected clock, never by the wall clock, and reporting the attempt's
// handler-visible deadline P (DL-12). context.WithDeadline would time out
// on the wall clock, which a simulated run must never do.
type attemptContext struct {
	context.Context
	deadline time.Time
}

func (c *attemptContext) Deadline() (time.Time, bool) { return c.deadline, true }

func newAttemptContext(parent context.Context, deadline time.Time) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	return &attemptContext{Context: ctx, deadline: deadline}, cancel
}
