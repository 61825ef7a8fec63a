package scheduler

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// WD-7, WD-8: a branch that succeeds at deadline_at (inclusive), while a
// sibling is still pending, expires the workflow in its settlement's
// append, detected at the step boundary: its follow-up is not enqueued
// and the pending sibling is buried with "Deadline exceeded" rather than
// run past the deadline.
func TestWD7_BranchSucceedingAtTheDeadlineExpiresTheWorkflow(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(time.Hour)}, workers(1))
	id := b.startFlow(t0, "par")
	st := b.dispatch(t0)
	if len(st) != 1 {
		t.Fatalf("started %v with one worker", ids(st))
	}
	d := b.settle(ts(time.Hour), Result{Token: st[0].Token, FollowUps: []EnqueueRequest{req("next")}})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded, record.KindJobBuried)
	if de := d.Records[2].Body.(*record.WorkflowDeadlineExceeded); de.DetectedBy != DetectedByStepBoundary {
		t.Fatalf("workflow_deadline_exceeded = %+v, want detected at the step boundary", de)
	}
	jb := d.Records[3].Body.(*record.JobBuried)
	if jb.JobID == st[0].Job.ID || jb.Code != CodeDeadlineExceeded || jb.Error != MsgDeadlineExceeded {
		t.Fatalf("job_buried = %+v, want the pending sibling buried by the deadline", jb)
	}
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed || w.Error != MsgDeadlineExceeded {
		t.Fatalf("workflow %s %q", w.Status, w.Error)
	}
	if st := b.dispatch(ts(time.Hour)); len(st) != 0 {
		t.Fatalf("started %v after the expiry", ids(st))
	}
	b.replayed()
}

// WD-7, WD-19, DL-44: a step attempt a crash lost, whose job has no
// attempts left, found by recovery at deadline_at (inclusive), is a step
// failing past the deadline: the workflow fails by its deadline (detected
// at the step boundary) and the job is buried with "Deadline exceeded",
// not with the crash's code.
func TestWD7_RecoverFindsAnExhaustedLostStepAtTheDeadline(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Deadline: time.Hour, Steps: []StepDef{defThen("a")}}
	one := defaultRetry
	one.MaxAttempts = 1
	var j journal
	j.add("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "flow", DefinitionHash: def.Hash, Steps: 1,
		At: t0.UnixNano(), DeadlineAt: ts(time.Hour).UnixNano()})
	j.add("wf_1", &record.JobEnqueued{JobID: "job_a", Handler: "flow/a", Queue: "default", AvailableAt: t0.UnixNano(),
		Retry: one, WorkflowID: "wf_1"})
	j.add("wf_1", &record.AttemptStarted{JobID: "job_a", Attempt: 1, StartAt: t0.UnixNano(),
		HardAt: ts(deliveryTimeout).UnixNano(), NormalAt: ts(deliveryTimeout - time.Second).UnixNano()})
	b := setup(t, j.recs, func(c *Config) { c.WorkflowFunc = func(string) *WorkflowDef { return def } })
	d := b.recover(ts(time.Hour))
	wantKinds(t, d, record.KindRunStarted, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded, record.KindJobBuried)
	if de := d.Records[2].Body.(*record.WorkflowDeadlineExceeded); de.DetectedBy != DetectedByStepBoundary {
		t.Fatalf("workflow_deadline_exceeded = %+v", de)
	}
	if jb := d.Records[3].Body.(*record.JobBuried); jb.JobID != "job_a" || jb.Code != CodeDeadlineExceeded {
		t.Fatalf("job_buried = %+v, want job_a buried by the deadline", jb)
	}
	if w := b.m.State().Workflows["wf_1"]; w.Status != replay.WorkflowFailed || w.Error != MsgDeadlineExceeded {
		t.Fatalf("workflow %s %q", w.Status, w.Error)
	}
	b.replayed()
}

// JB-7, RL-12: RequeueBuriedUpTo requeues at most max jobs, the first in
// enqueue order, and reports more only when buried jobs are left: a queue
// of exactly max buried jobs is requeued in full with none left.
func TestJB7_RequeueBuriedUpToReportsMoreOnlyWhenJobsAreLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	var buried []string
	for range 3 {
		id := b.enqueue(t0, req("h"))
		b.must(b.m.Bury(t0, id, "E_MANUAL", "buried"))
		buried = append(buried, id)
	}
	requeued := func(d Decision) []string {
		var out []string
		for _, r := range bodies[*record.JobRequeued](d, record.KindJobRequeued) {
			out = append(out, r.JobID)
		}
		return out
	}
	d, n, more := b.m.RequeueBuriedUpTo(ts(time.Second), "default", 2)
	b.take(d)
	if got := requeued(d); n != 2 || !more || !slices.Equal(got, buried[:2]) {
		t.Fatalf("first batch requeued %v (n %d, more %v), want %v with more", got, n, more, buried[:2])
	}
	d, n, more = b.m.RequeueBuriedUpTo(ts(time.Second), "default", 1)
	b.take(d)
	if got := requeued(d); n != 1 || more || !slices.Equal(got, buried[2:]) {
		t.Fatalf("last batch requeued %v (n %d, more %v), want %v and no more", got, n, more, buried[2:])
	}
	b.replayed()
}

// JB-5, JB-7: a buried Unique job retried while another job holds its key
// keeps its key (job_requeued carries KeepKey): once the holder
// completes, an Enqueue of the same payload returns the retried job
// instead of appending a new one.
func TestJB5_RetriedUniqueJobKeepsItsKeyWhileAnotherHoldsIt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	r := req("h")
	r.Unique = true
	first := b.enqueue(t0, r)
	b.must(b.m.Bury(t0, first, "E_MANUAL", "buried"))
	holder := b.enqueue(t0, r) // a buried job blocks nothing
	d := b.must(b.m.Requeue(t0, first))
	if jr := d.Records[0].Body.(*record.JobRequeued); !jr.KeepKey {
		t.Fatalf("job_requeued = %+v, want KeepKey", jr)
	}
	if d, id := b.m.Enqueue(t0, r); id != holder || !d.Empty() {
		t.Fatalf("Enqueue while the holder is pending = %s (%v), want %s", id, kinds(d), holder)
	}
	st := b.dispatch(t0)
	var tok uint64
	for _, s := range st {
		if s.Job.ID == holder {
			tok = s.Token
		}
	}
	if tok == 0 {
		t.Fatalf("started %v, want the holder %s among them", ids(st), holder)
	}
	b.settle(t0, Result{Token: tok})
	if d, id := b.m.Enqueue(t0, r); id != first || !d.Empty() {
		t.Fatalf("Enqueue after the holder completed = %s (%v), want the retried %s", id, kinds(d), first)
	}
	b.replayed()
}

// DL-28, DL-32: an After whose execution goroutine exited without
// returning (runtime.Goexit) never finished: once the owner takes the
// return, its exit is Interrupted, not left Running, and it gets its
// termination hook.
func TestDL28_AfterOfAGoroutineThatExitedIsInterruptedAndHooked(t *testing.T) {
	ran := make(chan Exit, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		i := a.Enter("m", func(ctx context.Context, run *HookRun) error {
			ran <- run.Exit
			return nil
		})
		a.SetExit(i, ExitRunning)
		runtime.Goexit()
		return Result{}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ran:
		if e != ExitInterrupted {
			t.Fatalf("the hook ran with exit %v, want interrupted", e)
		}
	default:
		t.Fatal("DL-32: the After of an exited goroutine got no termination hook")
	}
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements", len(s))
	}
	o := record.OutcomeOf(s[0].Body)
	if o.Code != CodeHandlerExited || strings.Join(o.NormalExits, " ") != "interrupted" || strings.Join(o.TerminationExits, " ") != "completed" {
		t.Fatalf("%+v", *o)
	}
}

// DL-6, DL-23, DL-36: a pipeline that succeeded consumed its attempt. When
// a cleanup failure replaces the success, the failure is retried, never
// released, even though a forced shutdown recorded a reason (one that
// would release a failing attempt) while the pipeline ran.
func TestDL36_SuccessReplacedByCleanupFailureIsNotReleasedByAForceReason(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		if err := a.Scope().Register("conn", closerFunc(func() error { return errors.New("connection reset") })); err != nil {
			return Result{Failure: &Failure{Code: "REGISTER", Message: err.Error()}}
		}
		close(started)
		<-release
		return Result{Output: []byte("done")}
	})
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-started
	b.clk.Set(ts(time.Second))
	if err := b.r.Force(ctx, deadlines.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := b.r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements", len(s))
	}
	o := record.OutcomeOf(s[0].Body)
	if s[0].Kind() != record.KindAttemptRetryScheduled {
		t.Fatalf("settled %s %+v, want attempt_retry_scheduled: the success consumed its attempt", s[0].Kind(), *o)
	}
	if o.Reason != "forced_shutdown" || o.Cleanup == "" {
		t.Fatalf("%+v, want the force's reason and a cleanup failure", *o)
	}
}

// WF-8, WF-17: a child started by an earlier build (its workflow_started
// records no inherited options) resolves them from its ancestors, also
// once they all left the state: through each one's terminal-index summary
// up to the grandparent. An ancestor whose registered definition is now
// another (its hash changed) gives none, as a parked one does.
func TestWF8_LegacyChildInheritsThroughAncestorsThatLeftTheState(t *testing.T) {
	t.Parallel()
	for _, changed := range []bool{false, true} {
		got := legacyGrandchildQueue(t, changed)
		want := "etl"
		if changed {
			want = "default" // the step's own queue
		}
		if got != want {
			t.Fatalf("WF-8 (grandparent definition changed %t): the grandchild's step job runs on %q, want %q", changed, got, want)
		}
	}
}

// legacyGrandchildQueue runs grand -> mid -> kid, grand's options giving
// the queue "etl", as an earlier build recorded them (nothing inherited
// in workflow_started), cancels grand and mid, optionally registers
// another definition of grand, and returns the queue of kid's step job.
func legacyGrandchildQueue(t *testing.T, changed bool) string {
	t.Helper()
	etl, other := "etl", "other"
	work := defThen("work")
	work.Inherit = Inheritable{Queue: true}
	defs := map[string]*WorkflowDef{
		"grand": {Name: "grand", Hash: "hgrand", Defaults: JobDefaults{Queue: &etl},
			Steps: []StepDef{{Kind: StepSub, Name: "sub", Sub: "mid"}}},
		"mid": {Name: "mid", Hash: "hmid", Steps: []StepDef{{Kind: StepSub, Name: "sub", Sub: "kid"}}},
		"kid": {Name: "kid", Hash: "hkid", Steps: []StepDef{
			{Kind: StepSignal, Name: "go", Signals: []string{"go"}, Mode: ModeAll}, work,
		}},
	}
	b := setup(t, nil, func(c *Config) { c.WorkflowFunc = func(n string) *WorkflowDef { return defs[n] } })
	b.recover(t0)
	grand := b.startFlow(t0, "grand")
	var mid, kid string
	for _, r := range b.recs {
		s, ok := r.Body.(*record.WorkflowStarted)
		if !ok || s.ParentID == "" {
			continue
		}
		switch s.Name {
		case "mid":
			mid = s.WorkflowID
		case "kid":
			kid = s.WorkflowID
		}
		// As an earlier build wrote it, in the record and the state.
		s.Inherited, s.InheritedQueue, s.InheritedPriority, s.InheritedMaxAttempts = false, "", 0, 0
		w := b.m.st.Workflows[s.WorkflowID]
		w.Inherited, w.InheritedQueue, w.InheritedPriority, w.InheritedMaxAttempts = false, "", 0, 0
	}
	if mid == "" || kid == "" {
		t.Fatalf("grand did not start mid (%q) and kid (%q)", mid, kid)
	}
	b.must(b.m.Cancel(t0, grand))
	b.must(b.m.Cancel(t0, mid))
	if changed {
		defs["grand"] = &WorkflowDef{Name: "grand", Hash: "hgrand2", Defaults: JobDefaults{Queue: &other},
			Steps: []StepDef{{Kind: StepSub, Name: "sub", Sub: "mid"}}}
	}
	d := b.must(b.m.Signal(t0, kid, "go", nil))
	jobs := bodies[*record.JobEnqueued](d, record.KindJobEnqueued)
	if len(jobs) != 1 {
		t.Fatalf("the signal enqueued %+v, want the step's one job", jobs)
	}
	b.replayed()
	return jobs[0].Queue
}

// WF-17: a cancel buries each pending job of the workflow with the
// cancel's own code and message, not a failure's.
func TestWF17_CancelBuriesPendingJobsAsCancelled(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(0)})
	id := b.startFlow(t0, "par")
	d := b.must(b.m.Cancel(t0, id))
	jbs := bodies[*record.JobBuried](d, record.KindJobBuried)
	if len(jbs) != 2 {
		t.Fatalf("cancel decided %v, want both pending branches buried", kinds(d))
	}
	for _, jb := range jbs {
		if jb.Code != CodeWorkflowCancelled || jb.Error != MsgWorkflowCancelled {
			t.Fatalf("job_buried = %+v, want %s %q", jb, CodeWorkflowCancelled, MsgWorkflowCancelled)
		}
	}
	b.replayed()
}

// expiredThen runs a one-Then-step workflow with a one-hour deadline whose
// job succeeds at deadline_at: the success expires the workflow (WD-7)
// and its output is kept in the state. It returns the bundle, the
// workflow's id and the map of registered definitions, which the test may
// change.
func expiredThen(t *testing.T) (*testBundle, string, map[string]*WorkflowDef) {
	t.Helper()
	defs := map[string]*WorkflowDef{
		"flow": {Name: "flow", Hash: "hflow", Deadline: time.Hour, Steps: []StepDef{defThen("a")}},
	}
	b := setup(t, nil, func(c *Config) { c.WorkflowFunc = func(n string) *WorkflowDef { return defs[n] } })
	b.recover(t0)
	id := b.startFlow(t0, "flow")
	sts := b.dispatch(t0)
	if len(sts) != 1 {
		t.Fatalf("started %v, want the step's one job", ids(sts))
	}
	st := sts[0]
	d := b.settle(ts(time.Hour), Result{Token: st.Token, Output: []byte{0x81, 0xa1, 'k', 0xa1, 'v'}})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded)
	if w := b.m.State().Workflows[id]; len(w.Branches) == 0 {
		t.Fatalf("the expired workflow holds no output: %+v", w)
	}
	return b, id, defs
}

// WF-18, WD-7, WD-9: retrying a workflow expired by its Then step's
// success runs a new job: the output of the success past the deadline is
// dropped (workflow_retried says so) rather than completing the step.
func TestWF18_RetryOfAThenStepDropsTheOutputThatExpiredIt(t *testing.T) {
	t.Parallel()
	b, id, _ := expiredThen(t)
	d := b.must(b.m.RetryWorkflow(ts(2*time.Hour), id))
	wantKinds(t, d, record.KindWorkflowRetried, record.KindJobEnqueued)
	if wr := d.Records[0].Body.(*record.WorkflowRetried); !wr.DropOutputs {
		t.Fatalf("workflow_retried = %+v, want DropOutputs", wr)
	}
	b.replayed()
}

// WF-18, WF-2: a failed workflow holding a step job's output, whose
// definition is no longer registered under its hash (parked), is refused
// a retry with ErrState: only its definition says whether that output is
// dropped (Then) or kept (Parallel).
func TestWF18_RetryOfAParkedWorkflowHoldingAnOutputIsRefused(t *testing.T) {
	t.Parallel()
	b, id, defs := expiredThen(t)
	changed := *defs["flow"]
	changed.Hash = "hflow2"
	defs["flow"] = &changed
	d, err := b.m.RetryWorkflow(ts(2*time.Hour), id)
	refused(t, d, err, ErrState)
}

// WF-18: a parked failed workflow that holds no output is not refused: the
// refusal is only for one whose kept output its definition must judge.
func TestWF18_RetryOfAParkedWorkflowWithoutOutputIsAccepted(t *testing.T) {
	t.Parallel()
	defs := map[string]*WorkflowDef{
		"flow": {Name: "flow", Hash: "hflow", Steps: []StepDef{defThen("a")}},
	}
	b := setup(t, nil, func(c *Config) { c.WorkflowFunc = func(n string) *WorkflowDef { return defs[n] } })
	b.recover(t0)
	id := b.startFlow(t0, "flow")
	sts := b.dispatch(t0)
	if len(sts) != 1 {
		t.Fatalf("started %v, want the step's one job", ids(sts))
	}
	st := sts[0]
	b.settle(t0, Result{Token: st.Token, Failure: fail(Permanent)})
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed || len(w.Branches) != 0 {
		t.Fatalf("workflow %s with branches %v, want failed holding none", w.Status, w.Branches)
	}
	delete(defs, "flow")
	d := b.must(b.m.RetryWorkflow(ts(time.Minute), id))
	if len(d.Records) == 0 || d.Records[0].Kind() != record.KindWorkflowRetried {
		t.Fatalf("retry decided %v, want workflow_retried first", kinds(d))
	}
	if wr := d.Records[0].Body.(*record.WorkflowRetried); wr.DropOutputs {
		t.Fatalf("workflow_retried = %+v, want no DropOutputs", wr)
	}
	b.replayed()
}

// WD-6, RL-12: CheckDeadlinesUpTo stops once its decision holds
// maxRecords records, reporting more, and the next call goes on with the
// expiries it left, in id order. Each expiry here is three records: the
// workflow's two and its pending step job's burial.
func TestWD6_CheckDeadlinesUpToStopsAtItsRecordBound(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Deadline: time.Hour, Steps: []StepDef{defThen("a")}}
	b := defsBundle(t, nil, []*WorkflowDef{def})
	var flows []string
	for range 3 {
		flows = append(flows, b.startFlow(t0, "flow"))
	}
	expired := func(d Decision) []string {
		var out []string
		for _, f := range bodies[*record.WorkflowFailed](d, record.KindWorkflowFailed) {
			out = append(out, f.WorkflowID)
		}
		return out
	}
	d, more := b.m.CheckDeadlinesUpTo(ts(time.Hour), 6)
	b.take(d)
	if got := expired(d); !more || len(d.Records) != 6 || !slices.Equal(got, flows[:2]) {
		t.Fatalf("first check expired %v in %d records (more %v), want %v and more", got, len(d.Records), more, flows[:2])
	}
	d, more = b.m.CheckDeadlinesUpTo(ts(time.Hour), 6)
	b.take(d)
	if got := expired(d); more || !slices.Equal(got, flows[2:]) {
		t.Fatalf("second check expired %v (more %v), want %v and no more", got, more, flows[2:])
	}
	b.replayed()
}

// DL-33: "must finish by Hk" is strict at the instant: a termination hook
// that returns at its deadline, not before it, is TimedOut, as the loop
// would time it out had it been on time, even when the loop first
// observes the return then. T = 30 s, no reason: the one hook's deadline
// is 29.75.
func TestDL33_HookReturningAtItsDeadlineIsTimedOut(t *testing.T) {
	b, deadline, release := newHookBundle(t)
	b.observeLate(func() {
		b.clk.Set(deadline) // the hook returns at its deadline
		close(release)
	}, deadline)
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements", len(s))
	}
	if o := record.OutcomeOf(s[0].Body); strings.Join(o.TerminationExits, " ") != "timed_out" {
		t.Fatalf("DL-33: a hook returning at its deadline settled %s %+v, want timed_out", s[0].Kind(), *o)
	}
}

// WD-7, WF-18: a retry past deadline_at that re-enters a Parallel step
// whose branches had all succeeded, with outputs that cannot be merged,
// fails the step at or after the deadline: the workflow fails by its
// deadline (detected at the step boundary), not with the merge error.
func TestWD7_RetriedStepWhoseOutputsCannotBeMergedPastTheDeadlineExpires(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(time.Hour)})
	id := b.startFlow(t0, "par")
	st := b.dispatch(t0)
	if len(st) != 2 {
		t.Fatalf("started %v", ids(st))
	}
	bad := []byte{0xc1} // never valid msgpack: the outputs cannot be merged
	b.settle(t0, Result{Token: st[0].Token, Output: bad})
	d := b.settle(t0, Result{Token: st[1].Token, Output: bad})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindWorkflowFailed)
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed || !strings.Contains(w.Error, "cannot be merged") {
		t.Fatalf("workflow %s %q, want failed by the merge", w.Status, w.Error)
	}
	d = b.must(b.m.RetryWorkflow(ts(2*time.Hour), id))
	wantKinds(t, d, record.KindWorkflowRetried, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded)
	if de := d.Records[2].Body.(*record.WorkflowDeadlineExceeded); de.DetectedBy != DetectedByStepBoundary {
		t.Fatalf("workflow_deadline_exceeded = %+v", de)
	}
	if w := b.m.State().Workflows[id]; w.Error != MsgDeadlineExceeded {
		t.Fatalf("workflow %s %q, want failed by its deadline", w.Status, w.Error)
	}
	b.replayed()
}
