package sim_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// The flows below are ones the spec requires. The oracle must accept each
// on every seed: a violation here is the oracle's defect, not the engine's.

// hasRecord fails the world's test unless the journal holds a record
// that match accepts, so that each flow checks it reached the records the
// oracle has to fold.
func hasRecord(w *sim.World, what string, match func(b record.Body) bool) {
	w.T().Helper()
	for _, r := range w.Records() {
		if match(r.Body) {
			return
		}
	}
	w.T().Fatalf("the journal holds no %s", what)
}

func do(w *sim.World, what string, f func(ctx context.Context, e *api.Engine) error) {
	w.T().Helper()
	if err := w.Do(what, f); err != nil {
		w.T().Fatalf("%s: %v", what, err)
	}
}

// TestOracleFlow_CancelWhileStepJobAwaitsRetry: a step job pending after a
// failed attempt is buried with Final when its workflow is cancelled
// (WF-17); it leaves the engine's memory, and the oracle must not demand
// it there.
func TestOracleFlow_CancelWhileStepJobAwaitsRetry(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		w.Register(func(e *api.Engine) error {
			return e.Register(api.NewWorkflow("flaky").Then("a", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
				return nil, api.Retryable("FLAKY", errors.New("try again"))
			}, api.MaxAttempts(3), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 5 * time.Minute})))
		})
		id := w.Dispatch("flaky", api.State{})
		w.Advance(time.Minute)
		hasRecord(w, "attempt_retry_scheduled", func(b record.Body) bool { _, ok := b.(*record.AttemptRetryScheduled); return ok })
		do(w, "cancel", func(ctx context.Context, e *api.Engine) error { return e.CancelWorkflow(ctx, id) })
		hasRecord(w, "final job_buried", func(b record.Body) bool { j, ok := b.(*record.JobBuried); return ok && j.Final })
		w.Advance(2 * time.Hour)
		if st := w.Workflow(id).Status; st != api.WorkflowCancelled {
			w.T().Fatalf("workflow %s, want cancelled", st)
		}
	})
}

// TestOracleFlow_StepFailsAfterCancel: an attempt that fails after its
// workflow was cancelled is buried with Final (WF-20); the job leaves the
// engine's memory.
func TestOracleFlow_StepFailsAfterCancel(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		w.Register(func(e *api.Engine) error {
			return e.Register(api.NewWorkflow("slow").Then("a", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
				w.Take(ctx, fmt.Sprintf("%s/%d", d.JobID(), d.Attempt()), 5*time.Minute, sim.Ignore)
				return nil, api.Retryable("FLAKY", errors.New("try again"))
			}, api.MaxAttempts(3), api.DeliveryTimeout(15*time.Minute)))
		})
		id := w.Dispatch("slow", api.State{})
		do(w, "cancel", func(ctx context.Context, e *api.Engine) error { return e.CancelWorkflow(ctx, id) })
		w.Advance(time.Hour)
		hasRecord(w, "final attempt_buried", func(b record.Body) bool { a, ok := b.(*record.AttemptBuried); return ok && a.Final })
		if st := w.Workflow(id).Status; st != api.WorkflowCancelled {
			w.T().Fatalf("workflow %s, want cancelled", st)
		}
	})
}

// registerRetried installs workflow "redo": one step that fails
// permanently while fail is set, and otherwise takes d of simulated time
// and succeeds.
func registerRetried(w *sim.World, fail *atomic.Bool, d time.Duration) {
	w.Register(func(e *api.Engine) error {
		return e.Register(api.NewWorkflow("redo").Then("a", func(ctx context.Context, d2 *api.Delivery, s api.State) (api.State, error) {
			if fail.Load() {
				return nil, api.Permanent("BROKEN", errors.New("broken"))
			}
			if d > 0 {
				w.Take(ctx, fmt.Sprintf("%s/%d", d2.JobID(), d2.Attempt()), d, sim.Ignore)
			}
			return api.State{"done": true}, nil
		}, api.DeliveryTimeout(15*time.Minute)))
	})
}

// TestOracleFlow_RetriedWorkflowCompletes: a failed workflow is retried
// (WF-18) and completes; workflow_completed carries ArchiveBuried, and the
// buried step job of the failed entry leaves the engine's memory with it.
func TestOracleFlow_RetriedWorkflowCompletes(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		id := failedThenRetried(w, 0)
		w.Advance(time.Minute)
		hasRecord(w, "workflow_completed with ArchiveBuried", func(b record.Body) bool {
			c, ok := b.(*record.WorkflowCompleted)
			return ok && c.ArchiveBuried
		})
		if st := w.Workflow(id).Status; st != api.WorkflowCompleted {
			w.T().Fatalf("workflow %s, want completed", st)
		}
	})
}

// TestOracleFlow_RetriedStepStillRunning: after a retry (WF-18) the
// workflow runs at the step it failed at, whose buried job of the earlier
// entry stays in the state beside the new job; a quiescent point while the
// new job runs is no WF-20 violation: the buried job is not the step's
// current one.
func TestOracleFlow_RetriedStepStillRunning(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		id := failedThenRetried(w, 5*time.Minute)
		if info := w.Workflow(id); info.Status != api.WorkflowRunning || info.Step != 0 {
			w.T().Fatalf("workflow %s at step %d, want running at step 0", info.Status, info.Step)
		}
		w.Advance(time.Minute) // the new job still runs
		w.Advance(time.Hour)
		if st := w.Workflow(id).Status; st != api.WorkflowCompleted {
			w.T().Fatalf("workflow %s, want completed", st)
		}
	})
}

// failedThenRetried dispatches a "redo" workflow (registerRetried, its
// step taking take) whose step fails until the workflow has failed, then
// retries it (WF-18) with the step healed, and returns its id.
func failedThenRetried(w *sim.World, take time.Duration) string {
	var fail atomic.Bool
	fail.Store(true)
	registerRetried(w, &fail, take)
	id := w.Dispatch("redo", api.State{})
	w.Advance(time.Minute)
	if st := w.Workflow(id).Status; st != api.WorkflowFailed {
		w.T().Fatalf("workflow %s, want failed", st)
	}
	fail.Store(false)
	do(w, "retry", func(ctx context.Context, e *api.Engine) error { return e.RetryWorkflow(ctx, id) })
	return id
}

// TestOracleFlow_RequeuedDelayedJobStartsAtOnce: a delayed job buried by
// the operator (JB-6) and retried (JB-7) is available from the requeue's
// instant, not from its original available_at: its attempt starts at once,
// which is not early.
func TestOracleFlow_RequeuedDelayedJobStartsAtOnce(t *testing.T) {
	sim.Run(t, 3, func(w *sim.World) {
		w.Register(func(e *api.Engine) error {
			return api.Handle(e, "work", func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
		})
		id := w.Enqueue("work", msg{}, api.Delay(time.Hour))
		do(w, "bury", func(ctx context.Context, e *api.Engine) error { return e.Bury(ctx, id) })
		do(w, "retry", func(ctx context.Context, e *api.Engine) error { return e.Retry(ctx, id) })
		if j := w.Job(id); j.Status != api.JobCompleted {
			w.T().Fatalf("job %s after its retry, want completed at once", j.Status)
		}
	})
}
