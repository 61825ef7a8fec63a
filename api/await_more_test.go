package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// A workflow's step jobs live on the workflow's stream, not on a stream of
// their own id: AwaitJob of a step job watches the workflow's stream and
// returns once the step job completes or is buried (JB-6, WF-20), even
// while the workflow itself goes on (here it then waits for a signal).
// A wait registered on the job id's own stream would never be woken: its
// watcher would still be registered once the engine is idle.
func TestAwaitJob_StepJobWatchesItsWorkflowsStream(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("flow").
		Then("a", wfReturn(api.State{"a": 1})).
		WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("doomed").
		Then("boom", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return nil, api.Permanent("NOPE", errors.New("cannot"))
		}))
	// Not started: the step jobs are enqueued and wait, pending.
	ok := wfDispatch(b, "flow", api.State{})
	bad := wfDispatch(b, "doomed", api.State{})
	okJob, badJob := b.stepJob("flow/a"), b.stepJob("doomed/boom")
	for _, c := range []struct{ job, wf string }{{okJob, ok}, {badJob, bad}} {
		if j := b.wantStatus(c.job, api.JobPending); j.WorkflowID != c.wf {
			t.Fatalf("step job %s: WorkflowID %q, want %q", c.job, j.WorkflowID, c.wf)
		}
		// The premise: the step job has no stream of its own.
		for _, r := range b.records() {
			if r.Stream == c.job {
				t.Fatalf("seq %d (%s) is on the step job's own stream %s", r.Seq, r.Kind(), c.job)
			}
		}
	}
	outOK := awaitInBackground(b, func(ctx context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, okJob) })
	outBad := awaitInBackground(b, func(ctx context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, badJob) })
	b.idle()
	notYet(b, outOK, "before the engine started")
	notYet(b, outBad, "before the engine started")

	b.start()
	b.idle()
	// Every record of the two step jobs has been acknowledged on their
	// workflows' streams: each wait was woken and, finding its job ended,
	// registered no new watch.
	if n := api.Watchers(b.eng); n != 0 {
		t.Fatalf("%d watchers still registered once the step jobs ended: a wait watches a stream that got no record", n)
	}
	r := <-outOK
	if r.err != nil || r.v.ID != okJob || r.v.Status != api.JobCompleted || r.v.WorkflowID != ok || r.v.Attempts != 1 {
		t.Fatalf("await of the completing step job: %+v, %v; want it completed in workflow %s", r.v, r.err, ok)
	}
	r = <-outBad
	if r.err != nil || r.v.ID != badJob || r.v.Status != api.JobBuried || r.v.LastCode != "NOPE" || r.v.WorkflowID != bad {
		t.Fatalf("await of the failing step job: %+v, %v; want it buried with NOPE in workflow %s", r.v, r.err, bad)
	}
	// AwaitJob returned on the step job's end, not on its workflow's.
	wfWant(b, ok, api.WorkflowWaitingSignal)
	wfWant(b, bad, api.WorkflowFailed)
}

// RL-2, SD-23: AwaitJob and AwaitWorkflow waiting when the journal
// fail-stops return an error matching ErrFailStop (not ErrClosed, which
// says the engine was closed), and so do calls made after it.
func TestAwait_FailStopEndsWaitsWithErrFailStop(t *testing.T) {
	_, fs, failing := walFaults()
	b := setup(t, func(o *api.Options) { o.FS = fs })
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("approve").WaitForSignal("approved"))
	job := b.enqueue("work", msg{}, api.Delay(time.Hour))
	wf := wfDispatch(b, "approve", api.State{})
	b.start()
	b.idle()
	outJob := awaitInBackground(b, func(ctx context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, job) })
	outWF := awaitInBackground(b, func(ctx context.Context) (api.WorkflowInfo, error) { return b.eng.AwaitWorkflow(ctx, wf) })
	notYet(b, outJob, "before the fail-stop")
	notYet(b, outWF, "before the fail-stop")

	failing.Store(true)
	if _, err := b.eng.Enqueue(b.ctx, "work", msg{N: 2}); !errors.Is(err, api.ErrFailStop) {
		t.Fatalf("enqueue on a failing journal: %v, want ErrFailStop", err)
	}
	if r := <-outJob; !errors.Is(r.err, api.ErrFailStop) || errors.Is(r.err, api.ErrClosed) {
		t.Fatalf("AwaitJob waiting at the fail-stop: %+v, %v; want ErrFailStop", r.v, r.err)
	}
	if r := <-outWF; !errors.Is(r.err, api.ErrFailStop) || errors.Is(r.err, api.ErrClosed) {
		t.Fatalf("AwaitWorkflow waiting at the fail-stop: %+v, %v; want ErrFailStop", r.v, r.err)
	}
	if err := b.eng.Shutdown(b.ctx); !errors.Is(err, api.ErrFailStop) {
		t.Fatalf("shutdown after the fail-stop: %v", err)
	}
	// After the engine stopped, a new call fails at once the same way.
	if _, err := b.eng.AwaitJob(b.ctx, job); !errors.Is(err, api.ErrFailStop) || errors.Is(err, api.ErrClosed) {
		t.Fatalf("AwaitJob after the fail-stop: %v, want ErrFailStop", err)
	}
	if _, err := b.eng.AwaitWorkflow(b.ctx, wf); !errors.Is(err, api.ErrFailStop) || errors.Is(err, api.ErrClosed) {
		t.Fatalf("AwaitWorkflow after the fail-stop: %v, want ErrFailStop", err)
	}
	if n := api.Watchers(b.eng); n != 0 {
		t.Fatalf("%d watchers left registered", n)
	}
}

// WF-21: AwaitWorkflow refuses an id that names no workflow with the very
// error Workflow gives it: empty or longer than a journal id (malformed),
// well formed but unknown, or a job's id or an idempotency key's index id
// (ids of other kinds share the terminal index), before and after a
// restart. AwaitJob does the same against Status for the ids that name no
// job (JB-3). The ended ones of the right kind read as the lookups read
// them.
func TestWF21_JB3_AwaitRefusesBadIDsAsTheLookupsDo(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	long := "wf_" + strings.Repeat("x", record.StreamIDBytesMax)
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen(nil)
		}
		before := f.lastSeq()
		for _, id := range []string{"", long, "wf_01JZZZZZZZZZZZZZZZZZZZZZZZ", "not-an-id", f.job, f.stepJob, f.idem} {
			_, want := f.eng.Workflow(f.ctx, id)
			_, got := f.eng.AwaitWorkflow(f.ctx, id)
			wantNotFound(t, "AwaitWorkflow", got, "workflow", id)
			if got.Error() != want.Error() {
				t.Fatalf("AwaitWorkflow(%.12q): %q, Workflow says %q", id, got, want)
			}
		}
		for _, id := range []string{"", long, "job_01JZZZZZZZZZZZZZZZZZZZZZZZ", f.done, f.cancelled, f.idem} {
			_, want := f.eng.Status(f.ctx, id)
			_, got := f.eng.AwaitJob(f.ctx, id)
			wantNotFound(t, "AwaitJob", got, "job", id)
			if got.Error() != want.Error() {
				t.Fatalf("AwaitJob(%.12q): %q, Status says %q", id, got, want)
			}
		}
		// The ids of the right kind, ended and read from the terminal
		// index, return at once what the lookups say.
		for _, id := range []string{f.done, f.cancelled} {
			want, werr := f.eng.Workflow(f.ctx, id)
			got, err := f.eng.AwaitWorkflow(f.ctx, id)
			if err != nil || werr != nil || got.ID != id || got.Status != want.Status || got.Name != want.Name || got.Steps != want.Steps {
				t.Fatalf("AwaitWorkflow(%s): %+v, %v; Workflow says %+v, %v", id, got, err, want, werr)
			}
		}
		for _, id := range []string{f.job, f.stepJob} {
			want, werr := f.eng.Status(f.ctx, id)
			got, err := f.eng.AwaitJob(f.ctx, id)
			if err != nil || werr != nil || got != want {
				t.Fatalf("AwaitJob(%s): %+v, %v; Status says %+v, %v", id, got, err, want, werr)
			}
		}
		if got := f.lastSeq(); got != before {
			t.Fatalf("refused awaits appended %d records", got-before)
		}
		if n := api.Watchers(f.eng); n != 0 {
			t.Fatalf("refused awaits left %d watchers", n)
		}
	}
}
