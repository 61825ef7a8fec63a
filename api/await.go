package api

import (
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

// AwaitJob blocks until job id has ended its run, then returns its status
// as [Engine.Status] does: once it is [JobCompleted] or [JobBuried] (a
// buried job waits for [Engine.Retry] or [Engine.RetryBuried]), or reads
// [JobCorrupt]. It returns at once for such a job.
//
// It waits without polling: it wakes when a record of the job's stream is
// acknowledged (for a workflow step, its workflow's stream) and reads the
// job again. It keeps waiting while the job is pending, delayed, running,
// retrying or parked (its handler not registered), and while the engine is
// open but not started (no attempt starts before [Engine.Start] or
// [Engine.Run]). It returns ErrClosed if the engine closes first (also
// for a job that ended while the engine was closing, before the call read
// it: [Engine.Status] reports it after the next [Open]), an error matching
// ErrFailStop if the engine fail-stops, and ctx's error, wrapped, if ctx
// ends first. An id that names no job returns a *NameError matching
// ErrNotFound, as Status does.
func (e *Engine) AwaitJob(ctx context.Context, id string) (Job, error) {
	if err := checkContext(ctx); err != nil {
		return Job{}, err
	}
	if err := idError("job", id); err != nil {
		return Job{}, err
	}
	var (
		out     Job
		inState bool
	)
	err := e.await(ctx, func(m *scheduler.Machine) (string, bool) {
		j, ok := m.State().Jobs[id]
		if ok && j.Status != replay.JobCompleted && j.Status != replay.JobBuried {
			return j.Stream, false
		}
		// Read in the same loop step: a Retry decided in a later one
		// must not turn the job the wait ended on into a pending one.
		out, inState = e.jobInState(m, id)
		return "", true
	})
	if err != nil || inState {
		return out, err
	}
	return e.jobOutOfState(ctx, id)
}

// AwaitWorkflow blocks until workflow id has ended its run, then returns
// it as [Engine.Workflow] does: once it is [WorkflowCompleted],
// [WorkflowCancelled] or [WorkflowFailed] (a failed workflow waits for
// [Engine.RetryWorkflow]), or reads [WorkflowCorrupt]. It returns at once
// for such a workflow.
//
// It waits as [Engine.AwaitJob] does, on the workflow's stream: it keeps
// waiting while the workflow runs, is paused, waits for a signal or for
// other workflows, or is parked, and returns as AwaitJob does when the
// engine closes or fail-stops or ctx ends first. A workflow
// parked in a wait is not ended by the clock alone, not even past its
// deadline (WD-11): a wait for a signal that never comes lasts until
// [Engine.CancelWorkflow] or the signal, so bound such an AwaitWorkflow
// with ctx.
func (e *Engine) AwaitWorkflow(ctx context.Context, id string) (WorkflowInfo, error) {
	if err := checkContext(ctx); err != nil {
		return WorkflowInfo{}, err
	}
	if err := idError("workflow", id); err != nil {
		return WorkflowInfo{}, err
	}
	var (
		info    WorkflowInfo
		inState bool
	)
	err := e.await(ctx, func(m *scheduler.Machine) (string, bool) {
		if w, ok := m.State().Workflows[id]; ok {
			switch w.Status {
			case replay.WorkflowCompleted, replay.WorkflowCancelled, replay.WorkflowFailed:
			default:
				return id, false
			}
		}
		// Read in the same loop step, as AwaitJob does: a RetryWorkflow
		// must not turn the failure the wait ended on into a run.
		info, inState = e.workflowInState(m, id)
		return "", true
	})
	if err != nil || inState {
		return info, err
	}
	return e.finishedWorkflowInfo(id)
}

// await runs ended on the loop until it reports true. When it reports
// false it names the stream to watch, and the watch is registered in the
// same step of the loop, so a change acknowledged after ended's read
// wakes the caller.
func (e *Engine) await(ctx context.Context, ended func(m *scheduler.Machine) (stream string, done bool)) error {
	for {
		if err := e.live(); err != nil {
			return err
		}
		var (
			stream string
			w      chan struct{}
		)
		err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
			s, done := ended(m)
			if !done {
				stream, w = s, make(chan struct{})
				e.r.Watch(stream, w)
			}
			return scheduler.Decision{}, nil
		})
		if err != nil {
			if w != nil {
				e.r.Unwatch(stream, w)
			}
			return err
		}
		if w == nil {
			return nil
		}
		select {
		case <-w:
		case <-e.r.Done():
			e.r.Unwatch(stream, w)
		case <-ctx.Done():
			e.r.Unwatch(stream, w)
			return fmt.Errorf("quire: %w", ctx.Err())
		}
	}
}
