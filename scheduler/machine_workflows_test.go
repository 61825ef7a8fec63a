package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// defsBundle is a recovered machine whose registered workflows are defs.
func defsBundle(t *testing.T, init []record.Record, defs []*WorkflowDef, mods ...func(*Config)) *testBundle {
	t.Helper()
	byName := map[string]*WorkflowDef{}
	for _, d := range defs {
		byName[d.Name] = d
	}
	mods = append(mods, func(c *Config) {
		c.WorkflowFunc = func(name string) *WorkflowDef { return byName[name] }
	})
	b := setup(t, init, mods...)
	b.recover(t0)
	return b
}

// startFlow dispatches a workflow of name at now and returns its id.
func (b *testBundle) startFlow(now time.Time, name string) string {
	b.t.Helper()
	d, id, err := b.m.StartWorkflow(now, DispatchRequest{Name: name})
	if err != nil {
		b.t.Fatalf("StartWorkflow(%s): %v", name, err)
	}
	b.take(d)
	return id
}

// must passes a (Decision, error) pair through take, failing on an error.
func (b *testBundle) must(d Decision, err error) Decision {
	b.t.Helper()
	if err != nil {
		b.t.Fatalf("%v", err)
	}
	return b.take(d)
}

// bodies returns the records of kind k in d, in order.
func bodies[T record.Body](d Decision, k record.Kind) []T {
	var out []T
	for _, r := range d.Records {
		if r.Kind() == k {
			out = append(out, r.Body.(T))
		}
	}
	return out
}

// delayThen is a workflow that waits d, then runs step "a".
func delayThen(name string, d time.Duration) *WorkflowDef {
	return &WorkflowDef{Name: name, Hash: "h" + name, Steps: []StepDef{
		{Kind: StepDelay, Name: "delay_0", Delay: d}, defThen("a"),
	}}
}

// WF-5, RL-9, DL-1: a Delay step fires at its fire_at, never a nanosecond
// before, and NextTimer names that instant even with a delayed job due
// later: the runner arms one timer for the earliest instant of either.
func TestWF5_RL9_DelayStepFiresAtItsInstant(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{delayThen("flow", time.Hour)})
	later := req("h")
	later.Delay = 2 * time.Hour
	b.enqueue(t0, later)
	id := b.startFlow(t0, "flow")
	if next, ok := b.m.NextTimer(); !ok || !next.Equal(ts(time.Hour)) {
		t.Fatalf("NextTimer = %v %v, want the delay's t0+1h", next, ok)
	}
	if d := b.take(b.m.Dispatch(ts(time.Hour - 1))); !d.Empty() {
		t.Fatalf("a nanosecond before fire_at: decided %v", kinds(d))
	}
	d := b.take(b.m.Dispatch(ts(time.Hour)))
	wantKinds(t, d, record.KindStepCompleted, record.KindJobEnqueued, record.KindAttemptStarted)
	if w := b.m.State().Workflows[id]; w.Step != 1 || w.DelayFireAt != 0 {
		t.Fatalf("after the delay fired: step %d fire_at %d", w.Step, w.DelayFireAt)
	}
	if next, ok := b.m.NextTimer(); !ok || !next.Equal(ts(2*time.Hour)) {
		t.Fatalf("NextTimer = %v %v, want the job's t0+2h", next, ok)
	}
	b.replayed()
}

// RL-9, WF-5: Delay steps due at one instant fire in the order of the
// records that armed them, and so do the step jobs they enqueue (JB-2).
func TestRL9_DelaysDueAtOneInstantFireInArmOrder(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{delayThen("flow", time.Hour)})
	var order []string
	for range 3 {
		order = append(order, b.startFlow(t0, "flow"))
	}
	d := b.take(b.m.Dispatch(ts(2 * time.Hour))) // a jump past the instant
	var fired []string
	for _, sc := range bodies[*record.StepCompleted](d, record.KindStepCompleted) {
		fired = append(fired, sc.WorkflowID)
	}
	if !slices.Equal(fired, order) {
		t.Fatalf("delays fired in order %v, want %v (arm order)", fired, order)
	}
	var started []string
	for _, st := range d.Starts {
		started = append(started, st.Job.WorkflowID)
	}
	if !slices.Equal(started, order) {
		t.Fatalf("their step jobs started in order %v, want %v", started, order)
	}
	b.replayed()
}

// RL-9, WF-5: Delay steps due at one instant fire in the order of the
// step_delayed records that armed them, not of their workflows' starts:
// "late" starts first and arms its delay at its first step, "early" arms
// its own after a step that ran for 10 minutes. Both are due at 1h, and
// late's delay fires first, live and after a restart that re-arms both
// from the replayed state; so do the step jobs they enqueue (JB-2).
func TestRL9_DelaysDueTogetherFireInArmOrderNotStartOrder(t *testing.T) {
	t.Parallel()
	defs := []*WorkflowDef{
		{Name: "early", Hash: "hearly", Steps: []StepDef{
			defThen("x"), {Kind: StepDelay, Name: "delay_1", Delay: 50 * time.Minute}, defThen("a"),
		}},
		delayThen("late", time.Hour),
	}
	b := defsBundle(t, nil, defs)
	early := b.startFlow(t0, "early")
	late := b.startFlow(t0, "late")
	st := b.dispatch(t0)
	if len(st) != 1 || st[0].Job.WorkflowID != early {
		t.Fatalf("started %v, want early's first step", ids(st))
	}
	d := b.settle(ts(10*time.Minute), Result{Token: st[0].Token})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindStepCompleted, record.KindStepDelayed)
	for _, w := range []string{early, late} {
		if at := b.m.State().Workflows[w].DelayFireAt; at != ts(time.Hour).UnixNano() {
			t.Fatalf("%s fire_at %v, want t0+1h", w, time.Unix(0, at))
		}
	}
	want := []string{late, early}
	check := func(name string, b *testBundle) {
		t.Helper()
		d := b.take(b.m.Dispatch(ts(time.Hour)))
		var fired, started []string
		for _, sc := range bodies[*record.StepCompleted](d, record.KindStepCompleted) {
			fired = append(fired, sc.WorkflowID)
		}
		for _, st := range d.Starts {
			started = append(started, st.Job.WorkflowID)
		}
		if !slices.Equal(fired, want) || !slices.Equal(started, want) {
			t.Fatalf("%s: delays fired in order %v and their jobs started in order %v, want %v (arm order)",
				name, fired, started, want)
		}
		b.replayed()
	}
	restarted := defsBundle(t, append(slices.Clone(b.init), b.recs...), defs)
	check("live", b)
	check("after a restart", restarted)
}

// RL-9, WF-5: a Delay step recorded by an earlier run fires in this one:
// the machine arms it from the replayed state.
func TestRL9_RecordedDelayFiresAfterRestart(t *testing.T) {
	t.Parallel()
	def := delayThen("flow", time.Hour)
	var j journal
	j.add("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "flow", DefinitionHash: def.Hash, Steps: 2, At: t0.UnixNano()})
	j.add("wf_1", &record.StepDelayed{WorkflowID: "wf_1", Step: 0, FireAt: ts(time.Hour).UnixNano()})
	b := defsBundle(t, j.recs, []*WorkflowDef{def})
	if next, ok := b.m.NextTimer(); !ok || !next.Equal(ts(time.Hour)) {
		t.Fatalf("NextTimer after restart = %v %v, want t0+1h", next, ok)
	}
	d := b.take(b.m.Dispatch(ts(time.Hour)))
	wantKinds(t, d, record.KindStepCompleted, record.KindJobEnqueued, record.KindAttemptStarted)
	b.replayed()
}

// WF-15: a workflow paused during its Delay still has the delay fire: the
// step completes and the next one is not entered until Resume.
func TestWF15_DelayFiringWhilePausedAdvancesAndEntersNothing(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{delayThen("flow", time.Hour)})
	id := b.startFlow(t0, "flow")
	b.must(b.m.Pause(id))
	d := b.take(b.m.Dispatch(ts(time.Hour)))
	wantKinds(t, d, record.KindStepCompleted)
	if w := b.m.State().Workflows[id]; w.Step != 1 || w.Status != replay.WorkflowPaused {
		t.Fatalf("after the delay fired while paused: step %d status %s", w.Step, w.Status)
	}
	d = b.must(b.m.Resume(ts(time.Hour), id))
	wantKinds(t, d, record.KindWorkflowResumed, record.KindJobEnqueued)
	b.replayed()
}

// WF-15: an attempt running when its workflow is paused settles normally:
// its success completes the step and enters nothing, or, at the last
// step, completes the workflow.
func TestWF15_StepSucceedingWhilePaused(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Steps: []StepDef{defThen("a"), defThen("b")}}
	b := defsBundle(t, nil, []*WorkflowDef{def})
	id := b.startFlow(t0, "flow")
	run := func(step int32) *Start {
		t.Helper()
		st := b.dispatch(t0)
		if len(st) != 1 || st[0].Job.Step != step {
			t.Fatalf("started %v, want step %d's job", ids(st), step)
		}
		b.must(b.m.Pause(id))
		return st[0]
	}
	d := b.settle(t0, Result{Token: run(0).Token})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindStepCompleted)
	if w := b.m.State().Workflows[id]; w.Step != 1 || w.Status != replay.WorkflowPaused {
		t.Fatalf("step %d status %s", w.Step, w.Status)
	}
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("started %v while paused", ids(st))
	}
	d = b.must(b.m.Resume(t0, id))
	wantKinds(t, d, record.KindWorkflowResumed, record.KindJobEnqueued)
	d = b.settle(t0, Result{Token: run(1).Token})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindStepCompleted, record.KindWorkflowCompleted)
	if _, ok := b.m.State().Workflows[id]; ok {
		t.Fatal("a completed workflow is still in the state")
	}
	b.replayed()
}

// WD-7, WD-8: a step attempt that fails at deadline_at (inclusive) is not
// retried: it is buried with "Deadline exceeded" and the workflow fails by
// its deadline, with the expiry records, in the same append.
func TestWD7_StepFailingAtTheDeadlineExpiresTheWorkflow(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Deadline: time.Hour, Steps: []StepDef{defThen("a")}}
	b := defsBundle(t, nil, []*WorkflowDef{def})
	id := b.startFlow(t0, "flow")
	st := only(t, b.dispatch(t0), "job_0002")
	d := b.settle(ts(time.Hour), Result{Token: st.Token, Failure: fail(Retryable)})
	wantKinds(t, d, record.KindAttemptBuried, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded)
	if ab := d.Records[0].Body.(*record.AttemptBuried); ab.Code != CodeDeadlineExceeded || ab.Error != MsgDeadlineExceeded {
		t.Fatalf("attempt_buried = %+v", ab)
	}
	if de := d.Records[2].Body.(*record.WorkflowDeadlineExceeded); de.DetectedBy != DetectedByStepBoundary || de.DeadlineAt != ts(time.Hour).UnixNano() {
		t.Fatalf("workflow_deadline_exceeded = %+v", de)
	}
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed || w.Error != MsgDeadlineExceeded {
		t.Fatalf("workflow %s %q", w.Status, w.Error)
	}
	b.replayed()
}

// WD-11, WD-7, WF-10: a signal that settles a wait at or after deadline_at
// fails the workflow in that very append: waiting_for_signal goes to
// failed, with no workflow_resumed before the expiry records.
func TestWD11_SignalAfterTheDeadlineExpiresTheWaitingWorkflow(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Deadline: time.Hour, Steps: []StepDef{
		{Kind: StepSignal, Name: "approval", Signals: []string{"go"}, Mode: ModeAll}, defThen("a"),
	}}
	b := defsBundle(t, nil, []*WorkflowDef{def})
	id := b.startFlow(t0, "flow")
	d := b.must(b.m.Signal(ts(3*time.Hour), id, "go", nil))
	wantKinds(t, d, record.KindSignalReceived, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded)
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed || w.Error != MsgDeadlineExceeded {
		t.Fatalf("workflow %s %q", w.Status, w.Error)
	}
	b.replayed()
}

// parallel is a workflow whose one step runs branches "a" and "b", within
// deadline if not zero.
func parallel(deadline time.Duration) *WorkflowDef {
	return &WorkflowDef{Name: "par", Hash: "hpar", Deadline: deadline, Steps: []StepDef{
		{Kind: StepParallel, Name: "0", Handlers: []string{"par/a", "par/b"}, Queue: "default", Retry: defaultRetry},
	}}
}

// WF-4, WF-20: a buried branch fails the workflow, and its still-pending
// sibling is buried in the same append with the workflow's error.
func TestWF4_BuriedBranchBuriesItsPendingSibling(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(0)}, workers(1))
	id := b.startFlow(t0, "par")
	st := b.dispatch(t0)
	if len(st) != 1 {
		t.Fatalf("started %v with one worker", ids(st))
	}
	d := b.settle(t0, Result{Token: st[0].Token, Failure: fail(Permanent)})
	wantKinds(t, d, record.KindAttemptBuried, record.KindWorkflowFailed, record.KindJobBuried)
	jb := d.Records[2].Body.(*record.JobBuried)
	if jb.JobID == st[0].Job.ID || jb.Error != "boom" {
		t.Fatalf("job_buried = %+v, want the sibling with the step's error", jb)
	}
	for _, j := range b.m.State().WorkflowJobs(id) {
		if j.Status != replay.JobBuried {
			t.Fatalf("job %s is %s after its workflow failed", j.ID, j.Status)
		}
	}
	b.replayed()
}

// WD-8: an expiry buries every pending job of the workflow with
// "Deadline exceeded", in the expiry's append, after its two records.
func TestWD8_ExpiryBuriesPendingJobs(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(time.Hour)})
	id := b.startFlow(t0, "par")
	d := b.take(b.m.CheckDeadlines(ts(time.Hour)))
	wantKinds(t, d, record.KindWorkflowFailed, record.KindWorkflowDeadlineExceeded, record.KindJobBuried, record.KindJobBuried)
	for _, jb := range bodies[*record.JobBuried](d, record.KindJobBuried) {
		if jb.Code != CodeDeadlineExceeded || jb.Error != MsgDeadlineExceeded {
			t.Fatalf("job_buried = %+v", jb)
		}
	}
	if st := b.dispatch(ts(time.Hour)); len(st) != 0 {
		t.Fatalf("started %v of an expired workflow", ids(st))
	}
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed {
		t.Fatalf("workflow %s", w.Status)
	}
	b.replayed()
}

// WF-18: retrying a workflow failed at a Parallel step enqueues new jobs
// only for the branches without attempt_succeeded.
func TestWF18_RetryReentersOnlyUnfinishedBranches(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(0)})
	id := b.startFlow(t0, "par")
	st := b.dispatch(t0)
	if len(st) != 2 {
		t.Fatalf("started %v", ids(st))
	}
	b.settle(t0, Result{Token: st[0].Token, Output: []byte{0x81, 0xa1, 'x', 0x01}})
	b.settle(t0, Result{Token: st[1].Token, Failure: fail(Permanent)})
	d := b.must(b.m.RetryWorkflow(ts(time.Minute), id))
	wantKinds(t, d, record.KindWorkflowRetried, record.KindJobEnqueued)
	if je := d.Records[1].Body.(*record.JobEnqueued); je.Branch != st[1].Job.Branch {
		t.Fatalf("retry enqueued branch %d, want %d", je.Branch, st[1].Job.Branch)
	}
	b.replayed()
}

// JB-7: a buried step job of a workflow that is not running cannot be
// requeued alone; RequeueBuried skips it.
func TestJB7_BuriedStepJobOfFailedWorkflowIsNotRequeued(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Steps: []StepDef{defThen("a")}}
	b := defsBundle(t, nil, []*WorkflowDef{def})
	id := b.startFlow(t0, "flow")
	st := b.dispatch(t0)
	b.settle(t0, Result{Token: st[0].Token, Failure: fail(Permanent)})
	if w := b.m.State().Workflows[id]; w.Status != replay.WorkflowFailed {
		t.Fatalf("workflow %s", w.Status)
	}
	d, err := b.m.Requeue(ts(time.Minute), st[0].Job.ID)
	refused(t, d, err, ErrState)
	if d, n := b.m.RequeueBuried(ts(time.Minute), "default"); n != 0 || !d.Empty() {
		t.Fatalf("RequeueBuried = %d with %v", n, kinds(d))
	}
	b.replayed()
}

// WF-20, WF-17, RL-11: the attempts of a workflow cancelled while they run
// settle without effect: a success enqueues none of its follow-ups, a
// failure is buried, not retried; both jobs leave the state with their
// summaries, as the job the cancellation buried does.
func TestWF20_AttemptsOfACancelledWorkflowSettleWithoutEffect(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(0)}, workers(1))
	id := b.startFlow(t0, "par")
	st := b.dispatch(t0)[0]
	d := b.must(b.m.Cancel(t0, id))
	wantKinds(t, d, record.KindWorkflowCancelled, record.KindJobBuried)
	pending := d.Records[1].Body.(*record.JobBuried).JobID
	indexed := func(d Decision, job string) {
		t.Helper()
		if _, ok := b.m.State().Jobs[job]; ok {
			t.Fatalf("job %s of a cancelled workflow stays in the state", job)
		}
		if !slices.ContainsFunc(d.Index, func(e IndexEntry) bool { return e.ID == job }) {
			t.Fatalf("no terminal-index entry for %s", job)
		}
	}
	indexed(d, pending)

	d = b.settle(t0, Result{Token: st.Token, FollowUps: []EnqueueRequest{req("h")}})
	wantKinds(t, d, record.KindAttemptSucceeded)
	indexed(d, st.Job.ID)

	// A second workflow: its running attempt fails after the cancellation.
	id = b.startFlow(t0, "par")
	st = b.dispatch(t0)[0]
	b.must(b.m.Cancel(t0, id))
	d = b.settle(t0, Result{Token: st.Token, Failure: fail(Retryable)})
	wantKinds(t, d, record.KindAttemptBuried)
	if ab := d.Records[0].Body.(*record.AttemptBuried); !ab.Final {
		t.Fatalf("attempt_buried = %+v, want final", ab)
	}
	indexed(d, st.Job.ID)
	b.replayed()
}

// WF-20, WF-18, RL-11: an attempt released (DL-23: a shutdown cut it)
// after its workflow left running/paused is buried with the workflow's
// error, as a failure then is, instead of going back to pending: a
// cancelled workflow's job would stay pending in the state for good, and
// a failed one's would run again beside the job a retry of the workflow
// enqueues for its branch.
func TestWF20_AttemptReleasedAfterItsWorkflowLeftIsBuried(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(0)})
	released := &Failure{Code: "E_CUT", Message: "cut", Release: true}

	// A cancelled workflow: the job leaves the state with its summary.
	id := b.startFlow(t0, "par")
	st := b.dispatch(t0)
	b.must(b.m.Cancel(t0, id))
	d := b.settle(t0, Result{Token: st[0].Token, Failure: released})
	wantKinds(t, d, record.KindAttemptBuried)
	if ab := d.Records[0].Body.(*record.AttemptBuried); !ab.Final || ab.Error != "workflow ended" {
		t.Fatalf("attempt_buried = %+v, want final with the workflow's end", ab)
	}
	if _, ok := b.m.State().Jobs[st[0].Job.ID]; ok {
		t.Fatal("the released job of a cancelled workflow stays in the state")
	}

	// A failed workflow: its retry runs the branch once, in a new job.
	id = b.startFlow(t0, "par")
	st = b.dispatch(t0)
	b.settle(t0, Result{Token: st[1].Token, Failure: fail(Permanent)})
	d = b.settle(t0, Result{Token: st[0].Token, Failure: released})
	wantKinds(t, d, record.KindAttemptBuried)
	if j := b.job(st[0].Job.ID); j.Status != replay.JobBuried || j.LastError != "boom" {
		t.Fatalf("job = %+v, want buried with the workflow's error", j)
	}
	b.must(b.m.RetryWorkflow(ts(time.Minute), id))
	if again := b.dispatch(ts(time.Minute)); len(again) != 2 || again[0].Job.ID == st[0].Job.ID || again[1].Job.ID == st[0].Job.ID {
		t.Fatalf("after the retry started %v, want the two new jobs only", ids(again))
	}
	b.replayed()
}

// WF-6: a WaitForSignal in mode Any takes the oldest stored signal of its
// names, and leaves the others stored.
func TestWF6_AnyWaitConsumesTheOldestStoredSignal(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Steps: []StepDef{
		defThen("a"), {Kind: StepSignal, Name: "either", Signals: []string{"x", "y"}, Mode: ModeAny},
	}}
	b := defsBundle(t, nil, []*WorkflowDef{def})
	id := b.startFlow(t0, "flow")
	st := b.dispatch(t0)
	first := b.must(b.m.Signal(t0, id, "y", []byte{0x81, 0xa1, 'v', 0xa1, 'y'})).Records[0].Seq
	b.must(b.m.Signal(t0, id, "x", []byte{0x81, 0xa1, 'v', 0xa1, 'x'}))
	d := b.settle(t0, Result{Token: st[0].Token})
	sc := bodies[*record.StepCompleted](d, record.KindStepCompleted)
	if len(sc) != 2 || !slices.Equal(sc[1].Consumed, []uint64{first}) {
		t.Fatalf("step_completed %+v, want the wait to consume seq %d", sc, first)
	}
	if w, ok := b.m.State().Workflows[id]; ok {
		t.Fatalf("workflow %s after its wait was satisfied", w.Status)
	}
	b.replayed()
}

// DL-44, WF-20: recovery buries the job of an attempt a crash lost when
// its workflow has failed meanwhile, attempts left or not: held, it would
// stay pending for good.
func TestDL44_RecoverBuriesLostStepJobOfAFailedWorkflow(t *testing.T) {
	t.Parallel()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Steps: []StepDef{defThen("a")}}
	var j journal
	j.add("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "flow", DefinitionHash: def.Hash, Steps: 1, At: t0.UnixNano()})
	j.add("wf_1", &record.JobEnqueued{JobID: "job_a", Handler: "flow/a", Queue: "default", AvailableAt: t0.UnixNano(),
		Retry: defaultRetry, WorkflowID: "wf_1"})
	j.add("wf_1", &record.AttemptStarted{JobID: "job_a", Attempt: 1, StartAt: t0.UnixNano(),
		HardAt: ts(deliveryTimeout).UnixNano(), NormalAt: ts(deliveryTimeout - time.Second).UnixNano()})
	j.add("wf_1", &record.WorkflowFailed{WorkflowID: "wf_1", Error: MsgDeadlineExceeded, At: ts(time.Second).UnixNano()})
	b := setup(t, j.recs, func(c *Config) { c.WorkflowFunc = func(string) *WorkflowDef { return def } })
	d := b.recover(ts(time.Minute))
	wantKinds(t, d, record.KindRunStarted, record.KindJobBuried)
	if jb := d.Records[1].Body.(*record.JobBuried); jb.JobID != "job_a" || jb.Code != CodeInterruptedByCrash {
		t.Fatalf("job_buried = %+v", jb)
	}
	if j := b.job("job_a"); j.Status != replay.JobBuried || j.Consumed != 1 {
		t.Fatalf("job = %+v", j)
	}
	b.replayed()
}

// JB-7, WF-18, WF-20: a step job that a retry of its workflow replaced
// never moves the workflow, even when a journal written before JB-7
// refused it holds its requeue: its success is recorded with its output
// discarded, the step waits for the job the retry enqueued, and only that
// job's output is merged. Replay agrees.
func TestJB7_WF20_ReplacedStepJobRequeuedByAnOlderVersionMovesNothing(t *testing.T) {
	t.Parallel()
	b, id, old, d := replacedStepJob(t)
	wantKinds(t, d, record.KindWorkflowRetried, record.KindJobEnqueued)
	fresh := d.Records[1].Body.(*record.JobEnqueued).JobID

	// The requeue an older version decided, which Requeue now refuses.
	var rq Decision
	b.m.emit(&rq, old.Job.Stream, &record.JobRequeued{JobID: old.Job.ID, AvailableAt: ts(time.Minute).UnixNano()})
	b.take(rq)
	tokens := map[string]uint64{}
	for _, st := range b.dispatch(ts(time.Minute)) {
		tokens[st.Job.ID] = st.Token
	}
	if len(tokens) != 2 || tokens[old.Job.ID] == 0 || tokens[fresh] == 0 {
		t.Fatalf("started %v, want the replaced job %s and the retry's %s", tokens, old.Job.ID, fresh)
	}

	d = b.settle(ts(time.Minute), Result{Token: tokens[old.Job.ID], Output: []byte{0x81, 0xa1, 'x', 0x01}})
	wantKinds(t, d, record.KindAttemptSucceeded)
	if w := b.m.State().Workflows[id]; w.Step != 0 || w.Status != replay.WorkflowRunning || len(w.Branches) != 0 {
		t.Fatalf("after the replaced job's success: step %d %s branches %v, want step 0 running with no output", w.Step, w.Status, w.Branches)
	}

	d = b.settle(ts(time.Minute), Result{Token: tokens[fresh], Output: []byte{0x81, 0xa1, 'y', 0x02}})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindStepCompleted, record.KindJobEnqueued)
	if sc := d.Records[1].Body.(*record.StepCompleted); sc.Step != 0 || string(sc.Output) != "\x81\xa1y\x02" {
		t.Fatalf("step_completed %+v, want step 0 with the retry's output only", sc)
	}
	b.replayed()
}

// JB-7, WF-18: a buried step job that a retry of its workflow replaced is
// not requeued, whether the workflow is still at its step (the retry's job
// pending) or has moved past it: Requeue refuses it with ErrState,
// RequeueBuried skips it.
func TestJB7_ReplacedStepJobIsNotRequeued(t *testing.T) {
	t.Parallel()
	b, id, old, _ := replacedStepJob(t)
	requeueRefused(t, b, old.Job.ID, "retry's job pending")
	fresh := b.dispatch(ts(time.Minute))
	if len(fresh) != 1 || fresh[0].Job.ID == old.Job.ID {
		t.Fatalf("started %v", ids(fresh))
	}
	b.settle(ts(time.Minute), Result{Token: fresh[0].Token})
	if w := b.m.State().Workflows[id]; w.Step != 1 || w.Status != replay.WorkflowRunning {
		t.Fatalf("workflow at step %d %s, want step 1 running", w.Step, w.Status)
	}
	requeueRefused(t, b, old.Job.ID, "workflow past the step")
	b.replayed()
}

// JB-7, WF-4, WF-18: at a Parallel step, a buried branch job stays
// replaced once the retry's job of its branch has succeeded and left the
// state while a sibling is still running: the branch's output is what
// says so then.
func TestJB7_ReplacedBranchJobIsNotRequeuedAfterItsReplacementSucceeded(t *testing.T) {
	t.Parallel()
	b := defsBundle(t, nil, []*WorkflowDef{parallel(0)})
	id := b.startFlow(t0, "par")
	first := b.dispatch(t0)
	if len(first) != 2 {
		t.Fatalf("started %v", ids(first))
	}
	for _, st := range first {
		b.settle(t0, Result{Token: st.Token, Failure: fail(Permanent)})
	}
	b.must(b.m.RetryWorkflow(ts(time.Minute), id))
	retried := b.dispatch(ts(time.Minute))
	if len(retried) != 2 {
		t.Fatalf("started %v", ids(retried))
	}
	b.settle(ts(time.Minute), Result{Token: retried[1].Token, Output: []byte{0x81, 0xa1, 'y', 0x02}})
	if _, ok := b.m.State().Jobs[retried[1].Job.ID]; ok {
		t.Fatalf("succeeded job %s stays in the state", retried[1].Job.ID)
	}
	requeueRefused(t, b, first[1].Job.ID, "replacement succeeded")
	b.replayed()
}

// replacedStepJob starts a workflow of two Then steps whose first job
// fails permanently, then retries the workflow (WF-18): the job the retry
// enqueues replaces the buried one, old. d is the retry's decision.
func replacedStepJob(t *testing.T) (b *testBundle, id string, old *Start, d Decision) {
	t.Helper()
	def := &WorkflowDef{Name: "flow", Hash: "hflow", Steps: []StepDef{defThen("a"), defThen("b")}}
	b = defsBundle(t, nil, []*WorkflowDef{def})
	id = b.startFlow(t0, "flow")
	old = b.dispatch(t0)[0]
	b.settle(t0, Result{Token: old.Token, Failure: fail(Permanent)})
	return b, id, old, b.must(b.m.RetryWorkflow(ts(time.Minute), id))
}

// requeueRefused checks that the replaced step job id is neither requeued
// by Requeue (ErrState) nor by RequeueBuried (JB-7).
func requeueRefused(t *testing.T, b *testBundle, id, when string) {
	t.Helper()
	d, err := b.m.Requeue(ts(time.Minute), id)
	refused(t, d, err, ErrState)
	if d, n := b.m.RequeueBuried(ts(time.Minute), "default"); n != 0 || !d.Empty() {
		t.Fatalf("%s: RequeueBuried = %d with %v", when, n, kinds(d))
	}
}
