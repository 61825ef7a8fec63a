package api_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

// Workflow deadline tests (WD-1..WD-20). The engine runs in the
// long-running mode (Start), so the periodic check runs at Start and then
// every Options.DeadlineCheckInterval of the manual clock.

// wdNever is a check interval long enough that no periodic check runs
// after the one at Start: only the step-boundary rule (WD-7) can expire.
const wdNever = 10000 * time.Hour

// wdSlow is the DeliveryTimeout of tests whose steps block while the clock
// moves by minutes: the longest allowed, so that no attempt is timed out.
const wdSlow = 900 * time.Second

// wdExpiry returns the expiry records of workflow id: its workflow_failed
// and workflow_deadline_exceeded records, each pair checked adjacent and in
// that order (WD-8, WD-16).
func wdExpiries(t *testing.T, recs []journalRecord, id string) []*record.WorkflowDeadlineExceeded {
	t.Helper()
	var out []*record.WorkflowDeadlineExceeded
	for i, r := range recs {
		x, ok := r.Body.(*record.WorkflowDeadlineExceeded)
		if !ok || x.WorkflowID != id {
			continue
		}
		var f *record.WorkflowFailed
		if i > 0 {
			f, _ = recs[i-1].Body.(*record.WorkflowFailed)
		}
		if f == nil || f.WorkflowID != id || f.Error != api.MessageDeadlineExceeded || f.At != x.DetectedAt {
			t.Fatalf("WD-8: workflow_deadline_exceeded at seq %d does not follow its workflow_failed", r.Seq)
		}
		out = append(out, x)
	}
	return out
}

// wdOneExpiry checks that workflow id expired exactly once, detected by by
// at an instant within [from, to].
func wdOneExpiry(b *testBundle, id, by string, from, to time.Time) *record.WorkflowDeadlineExceeded {
	b.t.Helper()
	xs := wdExpiries(b.t, b.records(), id)
	if len(xs) != 1 {
		b.t.Fatalf("WD-16: %d expiries of %s, want 1", len(xs), id)
	}
	x := xs[0]
	at := time.Unix(0, x.DetectedAt)
	if (by != "" && x.DetectedBy != by) || at.Before(from) || at.After(to) {
		b.t.Fatalf("expiry detected by %s at %v, want %s within [%v, %v]", x.DetectedBy, at.UTC(), by, from.UTC(), to.UTC())
	}
	return x
}

// wdPastDeadline starts b's engine, dispatches the workflow name and, when
// its step, held by g, has started, moves the clock 2 min on, past a 1 min
// deadline, before letting the step return; it returns the workflow's id
// once the engine is idle.
func wdPastDeadline(b *testBundle, g *wfGate, name string) string {
	b.t.Helper()
	b.start()
	id := wfDispatch(b, name, api.State{})
	g.wait()
	b.clk.Advance(2 * time.Minute)
	g.open()
	b.idle()
	return id
}

// wdFailedByDeadline checks the status of a workflow failed by its deadline
// (WD-8, WD-18).
func wdFailedByDeadline(b *testBundle, id string) api.WorkflowInfo {
	b.t.Helper()
	info := wfWant(b, id, api.WorkflowFailed)
	if info.Error != "Deadline exceeded" || info.FailedAt.IsZero() {
		b.t.Fatalf("status error %q failed at %v, want Deadline exceeded", info.Error, info.FailedAt)
	}
	return info
}

// ---------------------------------------------------------------------------
// WD-1, WD-2: definition.

func TestWD1_MustCompleteWithinValidatesAndLastCallWins(t *testing.T) {
	b := setup(t, nil)
	ok := wfReturn(nil)
	for _, d := range []time.Duration{0, -time.Second, api.DelayMax + 1} {
		err := b.eng.Register(api.NewWorkflow("bad").Then("a", ok).MustCompleteWithin(d))
		var we *api.WorkflowError
		want := "MustCompleteWithin: duration must be > 0 and at most DelayMax (876000h0m0s, 100 years), got " + d.String()
		if !errors.As(err, &we) || we.Option != "MustCompleteWithin" || !strings.Contains(err.Error(), want) {
			t.Fatalf("WD-1: %v, want an error containing %q", err, want)
		}
	}
	cases := []struct {
		name string
		w    *api.Workflow
		want time.Duration
	}{
		{"h2m30", api.NewWorkflow("h2m30").MustCompleteWithin(2*time.Hour + 30*time.Minute), 9000 * time.Second},
		{"h24", api.NewWorkflow("h24").MustCompleteWithin(24 * time.Hour), 86400 * time.Second},
		{"h1", api.NewWorkflow("h1").MustCompleteWithin(time.Hour), 3600 * time.Second},
		{"h36", api.NewWorkflow("h36").MustCompleteWithin(36 * time.Hour), 129600 * time.Second},
		{"replaced", api.NewWorkflow("replaced").MustCompleteWithin(time.Hour).MustCompleteWithin(5 * time.Minute), 300 * time.Second},
	}
	for _, c := range cases {
		wfRegister(t, b.eng, c.w.Then("a", ok))
		info := wfInfo(b, wfDispatch(b, c.name, api.State{}))
		if got := info.DeadlineAt.Sub(info.StartedAt); got != c.want {
			t.Errorf("WD-1 %s: deadline_at - dispatch = %v, want %v", c.name, got, c.want)
		}
	}
	b.checkReplay()
}

func TestWD2_OnDeadlineNeedsARegisteredHandlerAndIsOptional(t *testing.T) {
	b := setup(t, nil)
	w := api.NewWorkflow("import").Then("a", wfReturn(nil), api.OnQueue("held")).MustCompleteWithin(time.Minute).OnDeadline("import_timeout")
	wfNoAppend(b, "refused registration", func() {
		err := b.eng.Register(w)
		var we *api.WorkflowError
		if !errors.As(err, &we) || we.Option != "OnDeadline" || !strings.Contains(err.Error(), `"import_timeout"`) {
			t.Fatalf("WD-2: %v", err)
		}
	})
	for _, bad := range []func() error{
		func() error {
			return api.HandleDeadline(b.eng, "", func(context.Context, api.State) error { return nil })
		},
		func() error { return api.HandleDeadline(b.eng, "x", nil) },
	} {
		var ne *api.NameError
		if err := bad(); !errors.As(err, &ne) {
			t.Fatalf("WD-2: HandleDeadline: %v", err)
		}
	}
	spy := newSpy()
	spy.register(t, b.eng, "import_timeout")
	if err := api.HandleDeadline(b.eng, "import_timeout", func(context.Context, api.State) error { return nil }); !errors.Is(err, api.ErrDuplicate) {
		t.Fatalf("WD-2: duplicate handler: %v", err)
	}
	wfRegister(t, b.eng, w)
	wfRegister(t, b.eng, api.NewWorkflow("plain").Then("a", wfReturn(nil), api.OnQueue("held")).MustCompleteWithin(time.Minute))
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	with := wfDispatch(b, "import", api.State{})
	without := wfDispatch(b, "plain", api.State{})
	b.advance(time.Minute)
	wdFailedByDeadline(b, with)
	wdFailedByDeadline(b, without)
	if len(spy.rec.get()) != 1 {
		t.Fatalf("WD-2: handler ran %d times", len(spy.rec.get()))
	}
	recs := b.records()
	if x := wdOneExpiry(b, without, "check", t0, t0.Add(time.Minute)); x.Handler != "" || wfCount(recs, without, record.KindDeadlineHandlerStarted) != 0 {
		t.Fatalf("WD-2: a workflow without OnDeadline just fails: %+v", x)
	}
	if x := wdOneExpiry(b, with, "check", t0, t0.Add(time.Minute)); x.Handler != "import_timeout" {
		t.Fatalf("WD-2: %+v", x)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-3, WD-17: deadline_at is fixed at dispatch on the engine's clock.

func TestWD3_DeadlineFixedAtDispatchAcrossOperations(t *testing.T) {
	b := setup(t, nil)
	fails := true
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if fails {
			return nil, api.Permanent("NO", errors.New("first run fails"))
		}
		return nil, nil
	}
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", step, api.OnQueue("etl")).WaitForSignal("go").MustCompleteWithin(24*time.Hour))
	if err := b.eng.PauseQueue(b.ctx, "etl"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "import", api.State{}, api.IdempotencyKey("import-1"))
	// Dispatched at 10:00:00 UTC with 24 h: deadline_at is 10:00:00 UTC the
	// next day.
	want := time.Date(2026, 1, 6, 10, 0, 0, 0, time.UTC)
	check := func(when string) {
		t.Helper()
		if got := wfInfo(b, id).DeadlineAt; !got.Equal(want) {
			t.Fatalf("WD-3 after %s: deadline_at %v, want %v", when, got.UTC(), want)
		}
	}
	check("dispatch")
	ops := []struct {
		name string
		op   func() error
	}{
		{"pause", func() error { return b.eng.PauseWorkflow(b.ctx, id) }},
		{"resume", func() error { return b.eng.ResumeWorkflow(b.ctx, id) }},
		{"early signal", func() error { return b.eng.Signal(b.ctx, id, "go", nil) }},
		{"idempotent re-dispatch", func() error {
			again, err := b.eng.Dispatch(b.ctx, "import", api.State{}, api.IdempotencyKey("import-1"))
			if again != id {
				t.Fatalf("WD-3: re-dispatch returned %s", again)
			}
			return err
		}},
		{"step failure", func() error { return b.eng.ResumeQueue(b.ctx, "etl") }},
		{"retry", func() error {
			wfWant(b, id, api.WorkflowFailed)
			fails = false // ordered: the step runs again only after the retry's append
			return b.eng.RetryWorkflow(b.ctx, id)
		}},
	}
	for _, o := range ops {
		b.advance(time.Hour)
		if err := o.op(); err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		b.idle()
		check(o.name)
	}
	// The early signal satisfied the wait: the workflow completed, and its
	// terminal status keeps the deadline.
	wfWant(b, id, api.WorkflowCompleted)
	check("completion")
	started := wfBodies[*record.WorkflowStarted](b.records())
	if len(started) != 1 || started[0].DeadlineAt != want.UnixNano() || started[0].At != t0.UnixNano() {
		t.Fatalf("WD-3: workflow_started %+v", started)
	}
	b.checkReplay()
}

func TestWD17_OneClockUnixNanosNoTimeZones(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = time.Second })
	wfRegister(t, b.eng, api.NewWorkflow("tz").Delay(2*time.Hour).MustCompleteWithin(90*time.Minute))
	// The clock reads the same instant in a zone 14 hours east of UTC.
	b.clk.Set(t0.In(time.FixedZone("UTC+14", 14*3600)))
	b.start()
	id := wfDispatch(b, "tz", api.State{})
	started := wfBodies[*record.WorkflowStarted](b.records())
	if started[0].At != t0.UnixNano() || started[0].DeadlineAt != t0.Add(90*time.Minute).UnixNano() {
		t.Fatalf("WD-17: at %d deadline_at %d", started[0].At, started[0].DeadlineAt)
	}
	b.advance(90*time.Minute - time.Second)
	wfWant(b, id, api.WorkflowRunning) // no zone offset fires it early
	b.advance(time.Second)
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "check", t0.Add(90*time.Minute), t0.Add(90*time.Minute))
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-4, WD-5, WD-6: who expires, and when.

func TestWD4_NoDeadlineNeverExpires(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("slow").Delay(2000*time.Hour))
	b.start()
	id := wfDispatch(b, "slow", api.State{})
	for i := 0; i < 3; i++ {
		b.advance(500 * time.Hour)
	}
	info := wfWant(b, id, api.WorkflowRunning)
	if !info.DeadlineAt.IsZero() || wfBodies[*record.WorkflowStarted](b.records())[0].DeadlineAt != 0 {
		t.Fatalf("WD-4: %+v", info)
	}
	if n := countKind(b.records(), record.KindWorkflowDeadlineExceeded); n != 0 {
		t.Fatalf("WD-4: %d expiries", n)
	}
	b.checkReplay()
}

func TestWD5_ExpiryPredicateIsInclusive(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = time.Second })
	wfRegister(t, b.eng, api.NewWorkflow("import").Delay(48*time.Hour).MustCompleteWithin(24*time.Hour))
	b.start()
	id := wfDispatch(b, "import", api.State{}) // deadline_at 10:00:00 the next day
	b.advance(24*time.Hour - time.Second)      // a check at 09:59:59 does nothing
	if got := wfWant(b, id, api.WorkflowRunning).DeadlineAt; got.UTC().Format("15:04:05") != "10:00:00" {
		t.Fatalf("deadline_at %v", got)
	}
	b.advance(time.Second) // a check at 10:00:00 fails it
	info := wdFailedByDeadline(b, id)
	x := wdOneExpiry(b, id, "check", info.DeadlineAt, info.DeadlineAt)
	if x.DeadlineAt != info.DeadlineAt.UnixNano() || !info.FailedAt.Equal(info.DeadlineAt) {
		t.Fatalf("WD-5: %+v, failed at %v", x, info.FailedAt)
	}
	b.checkReplay()
}

func TestWD6_ChecksAtStartThenEveryInterval(t *testing.T) {
	// The engine starts at T, deadline_at is T+30s: the post-recovery check
	// finds nothing; the check at T+60s fails the workflow.
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("import").Delay(time.Hour).MustCompleteWithin(30*time.Second))
	id := wfDispatch(b, "import", api.State{})
	b.start()
	b.advance(30 * time.Second)
	wfWant(b, id, api.WorkflowRunning) // expired, but no check since Start
	b.advance(29 * time.Second)
	wfWant(b, id, api.WorkflowRunning)
	b.advance(time.Second)
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "check", t0.Add(time.Minute), t0.Add(time.Minute))
	b.checkReplay()
}

func TestWD6_RunOnceNeverChecksStartChecksAfterRecovery(t *testing.T) {
	b := setup(t, nil)
	register := func(e *api.Engine) {
		wfRegister(t, e, api.NewWorkflow("import").Delay(time.Hour).MustCompleteWithin(time.Minute))
	}
	register(b.eng)
	id := wfDispatch(b, "import", api.State{})
	b.advance(10 * time.Minute)
	b.checkReplay()
	if err := b.eng.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.open()
	register(b.eng)
	wfWant(b, id, api.WorkflowRunning) // run-once mode never checked
	b.clk.Advance(time.Hour - 10*time.Minute - time.Second)
	b.start() // long-running mode: the check right after recovery
	b.idle()
	wdFailedByDeadline(b, id)
	x := wdOneExpiry(b, id, "check", t0.Add(time.Hour-time.Second), t0.Add(time.Hour-time.Second))
	if x.DeadlineAt != t0.Add(time.Minute).UnixNano() {
		t.Fatalf("WD-6: %+v", x)
	}
	b.checkReplay()
}

func TestWD6_CheckIntervalValidatedAndNotDelayedByBusyHandlers(t *testing.T) {
	opts := api.Options{Dir: "db", FS: vfs.NewMem(), DeadlineCheckInterval: 5 * time.Millisecond}
	_, err := api.Open(context.Background(), opts)
	var oe *api.OptionError
	if !errors.As(err, &oe) || oe.Field != "Options.DeadlineCheckInterval" {
		t.Fatalf("WD-6: interval below 10 ms: %v", err)
	}

	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = 10 * time.Millisecond })
	g := newGate()
	spy := newSpy()
	spy.register(t, b.eng, "notify")
	wfRegister(t, b.eng, api.NewWorkflow("busy").Then("slow", g.step(nil, nil)))
	wfRegister(t, b.eng, api.NewWorkflow("tight").Delay(time.Hour).MustCompleteWithin(time.Second).OnDeadline("notify"))
	b.start()
	busy := wfDispatch(b, "busy", api.State{})
	g.wait()
	tight := wfDispatch(b, "tight", api.State{})
	b.clk.Advance(time.Second) // the busy step still runs
	<-spy.calls                // the check expired "tight" meanwhile
	g.open()
	b.idle()
	wfWant(b, busy, api.WorkflowCompleted)
	wdFailedByDeadline(b, tight)
	wdOneExpiry(b, tight, "check", t0.Add(time.Second), t0.Add(time.Second))
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-7, WD-8, WD-9: the step boundary, the expiry append, running attempts.

func TestWD7_StepCompletingAtDeadlineNeverAdvances(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = wdNever; o.DeliveryTimeout = wdSlow })
	g := newGate()
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", g.step(api.State{"rows": 1}, nil)).Then("load", wfSeen(&rec, "load", nil)).MustCompleteWithin(time.Minute))
	b.start()
	id := wfDispatch(b, "import", api.State{})
	g.wait()
	b.clk.Advance(time.Minute) // exactly deadline_at
	g.open()
	b.idle()
	info := wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "step_boundary", t0.Add(time.Minute), t0.Add(time.Minute))
	if info.State["rows"] != nil || len(rec.get()) != 0 || info.Step != 0 {
		t.Fatalf("WD-7: the step's output was used: %+v", info)
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "attempt_succeeded", "workflow_failed", "workflow_deadline_exceeded") ||
		wfCount(b.records(), id, record.KindStepCompleted) != 0 {
		t.Fatalf("WD-7: %v", names)
	}
	b.checkReplay()
}

func TestWD7_StepFailingAfterDeadlineIsBuriedNotRetried(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = wdNever; o.DeliveryTimeout = wdSlow })
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("import").Then("fetch", g.step(nil, errors.New("s3 timeout"))).MustCompleteWithin(time.Minute))
	id := wdPastDeadline(b, g, "import")
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "step_boundary", t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	recs := b.records()
	buried := wfBodies[*record.AttemptBuried](recs)
	if len(buried) != 1 || buried[0].Error != "Deadline exceeded" || wfCount(recs, id, record.KindAttemptRetryScheduled) != 0 {
		t.Fatalf("WD-7: %+v", buried)
	}
	if !wfHasRun(wfStream(recs, id), "attempt_buried", "workflow_failed", "workflow_deadline_exceeded") {
		t.Fatalf("WD-7: %v", wfStream(recs, id))
	}
	b.checkReplay()
}

func TestWD7_WaitSettlingAfterDeadlineFails(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = wdNever })
	wfRegister(t, b.eng, api.NewWorkflow("dep").WaitForSignal("go"))
	b.start()
	dep := wfDispatch(b, "dep", api.State{})
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflows(api.All(), dep).MustCompleteWithin(time.Hour))
	join := wfDispatch(b, "join", api.State{})
	b.advance(2 * time.Hour)
	wfWant(b, join, api.WorkflowWaitingWorkflows)
	if err := b.eng.Signal(b.ctx, dep, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, dep, api.WorkflowCompleted)
	wdFailedByDeadline(b, join)
	wdOneExpiry(b, join, "step_boundary", t0.Add(2*time.Hour), t0.Add(2*time.Hour))
	names := wfNames(b.records())
	if !wfHasRun(names, "workflow_completed", "workflow_failed", "workflow_deadline_exceeded") {
		t.Fatalf("WD-7: the dependant's expiry belongs to the completion's append: %v", names)
	}
	b.checkReplay()
}

func TestWD8_ExpiryAppendOrder(t *testing.T) {
	b := setup(t, nil)
	ok := wfReturn(nil)
	wfRegister(t, b.eng, api.NewWorkflow("fan").Parallel("fan", ok, ok).OnQueue("held").MustCompleteWithin(time.Minute))
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflows(api.All(), id))
	join := wfDispatch(b, "join", api.State{})
	b.advance(time.Minute)
	info := wdFailedByDeadline(b, id)
	if !info.FailedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("WD-8: failed at %v", info.FailedAt)
	}
	recs := b.records()
	var got []string
	for _, r := range recs {
		switch x := r.Body.(type) {
		case *record.WorkflowFailed:
			got = append(got, "workflow_failed:"+map[bool]string{true: "fan", false: "join"}[x.WorkflowID == id])
		case *record.WorkflowDeadlineExceeded, *record.JobBuried:
			got = append(got, r.Kind().String())
		}
	}
	want := "workflow_failed:fan workflow_deadline_exceeded job_buried job_buried workflow_failed:join"
	if strings.Join(got, " ") != want {
		t.Fatalf("WD-8:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if !wfHasRun(wfNames(recs), "workflow_failed", "workflow_deadline_exceeded", "job_buried", "job_buried", "workflow_failed") {
		t.Fatalf("WD-8: not one append: %v", wfNames(recs))
	}
	for _, jb := range wfBodies[*record.JobBuried](recs) {
		if jb.Error != "Deadline exceeded" {
			t.Fatalf("WD-8: pending job buried with %q", jb.Error)
		}
	}
	if ji := wfWant(b, join, api.WorkflowFailed); !strings.Contains(ji.Error, id) {
		t.Fatalf("WD-8: dependant error %q", ji.Error)
	}
	b.checkReplay()
}

func TestWD9_RunningAttemptIsNotInterruptedAndItsResultDiscarded(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = wdSlow })
	spy := newSpy()
	spy.register(t, b.eng, "notify")
	ok, bad := newGate(), newGate()
	wfRegister(t, b.eng, api.NewWorkflow("ok").
		Then("slow", ok.step(api.State{"late": true}, nil)).Then("next", wfReturn(nil)).
		MustCompleteWithin(time.Minute).OnDeadline("notify"))
	wfRegister(t, b.eng, api.NewWorkflow("bad").
		Then("slow", bad.step(nil, errors.New("late failure"))).MustCompleteWithin(time.Minute).OnDeadline("notify"))
	b.start()
	okID := wfDispatch(b, "ok", api.State{})
	badID := wfDispatch(b, "bad", api.State{})
	ok.wait()
	bad.wait()
	b.clk.Advance(2 * time.Minute)
	<-spy.calls // both expired by the check while their attempts run
	<-spy.calls
	ok.open()
	bad.open()
	b.idle()
	for _, g := range []*wfGate{ok, bad} {
		if err := <-g.ctxErr; err != nil {
			t.Fatalf("WD-9: expiry cancelled a running attempt: %v", err)
		}
	}
	info := wdFailedByDeadline(b, okID)
	wdOneExpiry(b, okID, "check", t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	wdOneExpiry(b, badID, "check", t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	recs := b.records()
	if info.State["late"] != nil || wfCount(recs, okID, record.KindStepCompleted) != 0 ||
		len(wfSteps(recs, okID)) != 1 || wfCount(recs, okID, record.KindAttemptSucceeded) != 1 {
		t.Fatalf("WD-9: the late success was merged or enqueued: %v", wfStream(recs, okID))
	}
	buried := wfBodies[*record.AttemptBuried](recs)
	if len(buried) != 1 || buried[0].Error != "Deadline exceeded" || wfCount(recs, badID, record.KindAttemptRetryScheduled) != 0 {
		t.Fatalf("WD-9: late failure settled as %+v", buried)
	}
	for _, s := range wfBodies[*record.AttemptSucceeded](recs) {
		if s.Reason != "" {
			t.Fatalf("WD-9: a cancellation reason was recorded: %+v", s.Outcome)
		}
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-10: the on-deadline handler.

// wdExpiring is a workflow named name that waits an hour in a Delay and
// must complete within a minute: it expires at the check a minute in,
// and its on-deadline handler is handler (WD-2, WD-10).
func wdExpiring(name, handler string) *api.Workflow {
	return api.NewWorkflow(name).Delay(time.Hour).MustCompleteWithin(time.Minute).OnDeadline(handler)
}

func TestWD10_HandlerGetsPublicStateAfterTheExpiryAppend(t *testing.T) {
	b := setup(t, nil)
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	wfRegister(t, b.eng, wdExpiring("import", "cleanup"))
	b.start()
	id := wfDispatch(b, "import", api.State{"source": "s3://bucket/x", "temp_file": "import-42.csv", "_token": "k1"})
	b.advance(time.Minute)
	wdFailedByDeadline(b, id)
	if got := strings.Join(spy.rec.get(), "|"); got != "map[source:s3://bucket/x temp_file:import-42.csv]" {
		t.Fatalf("WD-10: handler got %s", got)
	}
	recs := b.records()
	x := wdOneExpiry(b, id, "check", t0.Add(time.Minute), t0.Add(time.Minute))
	var seqX uint64
	for _, r := range recs {
		if _, ok := r.Body.(*record.WorkflowDeadlineExceeded); ok {
			seqX = r.Seq
		}
	}
	started := wfBodies[*record.DeadlineHandlerStarted](recs)
	finished := wfBodies[*record.DeadlineHandlerFinished](recs)
	if len(started) != 1 || started[0].Expiry != seqX || started[0].Handler != "cleanup" || x.Handler != "cleanup" ||
		len(finished) != 1 || finished[0].Outcome != "ok" || finished[0].Expiry != seqX {
		t.Fatalf("WD-10: handler records %+v %+v", started, finished)
	}
	if !wfHasRun(wfStream(recs, id), "workflow_failed", "workflow_deadline_exceeded", "deadline_handler_started", "deadline_handler_finished") {
		t.Fatalf("WD-10: %v", wfStream(recs, id))
	}
	if n := countKind(recs, record.KindDebug); n != 0 {
		t.Fatalf("WD-10: %d debug records for a handler that succeeded", n)
	}
	b.checkReplay()
}

func TestWD10_HandlerErrorOrPanicIsRecordedAndSwallowed(t *testing.T) {
	b := setup(t, nil)
	if err := api.HandleDeadline(b.eng, "mail", func(ctx context.Context, st api.State) error {
		return errors.New("smtp down")
	}); err != nil {
		t.Fatal(err)
	}
	if err := api.HandleDeadline(b.eng, "boom", func(ctx context.Context, st api.State) error {
		panic("handler exploded")
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, wdExpiring("mailed", "mail"))
	wfRegister(t, b.eng, wdExpiring("boomed", "boom"))
	b.start()
	mailed := wfDispatch(b, "mailed", api.State{})
	boomed := wfDispatch(b, "boomed", api.State{})
	b.advance(time.Minute)
	for _, id := range []string{mailed, boomed} {
		wdFailedByDeadline(b, id) // never the handler's message
		wdOneExpiry(b, id, "check", t0.Add(time.Minute), t0.Add(time.Minute))
	}
	recs := b.records()
	outcomes := map[string]string{}
	for _, f := range wfBodies[*record.DeadlineHandlerFinished](recs) {
		outcomes[f.WorkflowID] = f.Outcome
	}
	if outcomes[mailed] != "failed" || outcomes[boomed] != "panicked" {
		t.Fatalf("WD-10: outcomes %v", outcomes)
	}
	debug := map[string]string{}
	for _, d := range wfBodies[*record.Debug](recs) {
		debug[d.Subject] = d.Message
	}
	if debug[mailed] != "smtp down" || !strings.Contains(debug[boomed], "handler exploded") {
		t.Fatalf("WD-10: debug records %v", debug)
	}
	b.advance(time.Hour) // nothing runs again
	if n := countKind(b.records(), record.KindDeadlineHandlerStarted); n != 2 {
		t.Fatalf("WD-10: %d handler starts", n)
	}
	b.checkReplay()
}

// WD-10: many obligations outstanding at once, their handlers finishing
// in an order other than the one they started in: each handler runs once
// (the loop looks for new obligations on every pass), every obligation is
// finished, and live state equals replay, which folded finishes from the
// middle of the list.
func TestWD10_ManyOutstandingHandlersFinishInAnyOrder(t *testing.T) {
	b := setup(t, nil)
	const n = 40
	release := map[string]chan struct{}{}
	var mu sync.Mutex
	started := make(chan string, n)
	if err := api.HandleDeadline(b.eng, "cleanup", func(ctx context.Context, st api.State) error {
		k := st["k"].(string)
		mu.Lock()
		ch := release[k]
		mu.Unlock()
		started <- k
		<-ch
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, wdExpiring("slow", "cleanup"))
	b.start()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
		release[keys[i]] = make(chan struct{})
		wfDispatch(b, "slow", api.State{"k": keys[i]})
	}
	b.clk.Advance(time.Minute)
	for range n {
		<-started
	}
	// Middle first, then the ends: finishes away from the oldest
	// obligation, and runs of it.
	order := append(append([]string{}, keys[n/2:]...), keys[:n/2]...)
	for _, k := range order {
		close(release[k])
	}
	b.idle()
	b.checkReplay()
	recs := b.records()
	if s, f := countKind(recs, record.KindDeadlineHandlerStarted), countKind(recs, record.KindDeadlineHandlerFinished); s != n || f != n {
		t.Fatalf("WD-10: %d handler starts and %d finishes for %d expiries", s, f, n)
	}
	if st := foldRecords(t, recs); st.ExpiryCount() != 0 {
		t.Fatalf("WD-10: %d obligations left after every handler finished", st.ExpiryCount())
	}
}

// WD-10, RL-12: once every obligation has finished, the state has none,
// as if it never had any, so snapshots taken after pass their round-trip
// check. The fold used to keep an empty list where a decoded snapshot has
// none, and every later snapshot was refused by that check.
func TestWD10_SnapshotsAfterTheLastObligationFinished(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = 100 })
	if err := api.HandleDeadline(b.eng, "cleanup", func(context.Context, api.State) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, wdExpiring("slow", "cleanup"))
	b.start()
	wfDispatch(b, "slow", api.State{})
	b.advance(time.Minute)
	if n := countKind(b.records(), record.KindDeadlineHandlerFinished); n != 1 {
		t.Fatalf("%d handlers finished, want 1", n)
	}
	for i := range 150 { // 300 records: past SnapshotEvery twice
		b.enqueue("noop", msg{N: i})
	}
	b.idle()
	if err := b.eng.Close(b.ctx); err != nil { // waits for snapshot writes
		t.Fatal(err)
	}
	if ss := b.eng.SnapshotStats(); ss.Written == 0 || ss.Failed != 0 {
		t.Fatalf("snapshot stats %+v: want snapshots written and none failed", ss)
	}
}

// WD-10, SD-10: an on-deadline handler's context is bounded by the
// shutdown's G as well as by DeliveryTimeout. A handler that waits on it
// is cancelled at G with ReasonShutdownDeadline, so the shutdown ends
// there rather than spend the rest of its budget waiting; the handler did
// not finish, so no deadline_handler_finished is appended (a debug record
// says why) and the obligation runs again after the next start.
func TestWD10_HandlerCancelledAtShutdownGRunsAgainAfterRestart(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 30 * time.Second })
	type call struct {
		deadline time.Time
		reason   api.Reason
	}
	calls, started := make(chan call, 2), make(chan struct{}, 1)
	wait := true
	register := func(e *api.Engine) {
		if err := api.HandleDeadline(e, "cleanup", func(ctx context.Context, st api.State) error {
			if !wait {
				calls <- call{}
				return nil
			}
			started <- struct{}{}
			<-ctx.Done()
			dl, _ := ctx.Deadline() // lowered to G when the shutdown began
			var cr *api.CancelReason
			errors.As(context.Cause(ctx), &cr)
			calls <- call{dl, cr.Reason}
			return ctx.Err()
		}); err != nil {
			t.Fatal(err)
		}
		wfRegister(t, e, wdExpiring("slow", "cleanup"))
	}
	register(b.eng)
	b.start()
	id := wfDispatch(b, "slow", api.State{})
	b.clk.Advance(time.Minute) // the expiry
	<-started                  // its handler now waits on its context
	start := b.clk.Now()
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	awaitInitiated(b.eng)
	b.clk.Advance(28 * time.Second) // G = 30 − min(30/4, 2) = 28 s
	c := <-calls
	if c.reason != api.ReasonShutdownDeadline || !c.deadline.Equal(start.Add(28*time.Second)) {
		t.Fatalf("handler ended with %v, deadline %v; want %v at G %v", c.reason, c.deadline, api.ReasonShutdownDeadline, start.Add(28*time.Second))
	}
	<-res // not a success: G was reached with the handler still running
	if rep := b.eng.ShutdownReport(); rep == nil || rep.Elapsed >= 30*time.Second {
		t.Fatalf("report %+v: want the shutdown over at G, not at the end of its budget", rep)
	}
	wait = false
	b.open()
	register(b.eng)
	recs := b.records()
	if n := countKind(recs, record.KindDeadlineHandlerFinished); n != 0 {
		t.Fatalf("%d deadline_handler_finished for a handler the shutdown cut off", n)
	}
	noted := false
	for _, d := range wfBodies[*record.Debug](recs) {
		noted = noted || (d.Subject == id && d.Code == "DEADLINE_HANDLER_INTERRUPTED")
	}
	if !noted {
		t.Fatal("no debug record of the interrupted handler")
	}
	b.start()
	<-calls
	b.idle()
	recs = b.records()
	finished := wfBodies[*record.DeadlineHandlerFinished](recs)
	if len(finished) != 1 || finished[0].Outcome != "ok" {
		t.Fatalf("after the restart: finished %+v, want one ok", finished)
	}
}

// TestSD25_WD10_HandlerIgnoringItsCancellationIsQuarantined: an
// on-deadline handler still running past the shutdown's budget keeps the
// runtime unjoined, and the report counts it quarantined (SD-25): Quarantined
// counts every goroutine not returned. It used to count only attempts'.
func TestSD25_WD10_HandlerIgnoringItsCancellationIsQuarantined(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 4 * time.Second })
	started, block := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(block) })
	if err := api.HandleDeadline(b.eng, "cleanup", func(context.Context, api.State) error {
		started <- struct{}{}
		<-block // ignores its context
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, wdExpiring("slow", "cleanup"))
	b.start()
	wfDispatch(b, "slow", api.State{})
	b.clk.Advance(time.Minute) // the expiry
	<-started
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	awaitInitiated(b.eng)
	b.clk.Advance(5 * time.Second) // past Hr
	if err := <-res; !errors.Is(err, shutdown.ErrIncomplete) {
		t.Fatalf("shutdown: %v, want ErrIncomplete", err)
	}
	if rep := b.eng.ShutdownReport(); rep == nil || rep.RuntimeJoined || rep.Quarantined != 1 {
		t.Fatalf("SD-25: report %+v, want the handler quarantined", rep)
	}
}

func TestWD10_HandlerUnfinishedAtCrashRunsAgainAfterReopen(t *testing.T) {
	b := setup(t, nil)
	calls := make(chan api.State, 4)
	block := make(chan struct{})
	if err := api.HandleDeadline(b.eng, "cleanup", func(ctx context.Context, st api.State) error {
		calls <- st
		<-block
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w := func() *api.Workflow {
		return wdExpiring("import", "cleanup")
	}
	wfRegister(t, b.eng, w())
	b.start()
	id := wfDispatch(b, "import", api.State{"source": "s3://x"})
	b.clk.Advance(time.Minute)
	<-calls // the expiry is synced and the handler runs: now the engine dies
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Close(expired)
	close(block)
	b.open()
	if n := countKind(b.records(), record.KindDeadlineHandlerFinished); n != 0 {
		t.Fatalf("WD-10: %d finished records before the crash", n)
	}
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	wfRegister(t, b.eng, w())
	wdFailedByDeadline(b, id)
	b.start()
	b.idle()
	if got := strings.Join(spy.rec.get(), "|"); got != "map[source:s3://x]" {
		t.Fatalf("WD-10: after the restart the handler ran with %q", got)
	}
	recs := b.records()
	if s, f := countKind(recs, record.KindDeadlineHandlerStarted), countKind(recs, record.KindDeadlineHandlerFinished); s != 2 || f != 1 {
		t.Fatalf("WD-10: %d started, %d finished", s, f)
	}
	wdOneExpiry(b, id, "check", t0.Add(time.Minute), t0.Add(time.Minute))
	b.reopen(func(e *api.Engine) { spy.register(t, e, "cleanup"); wfRegister(t, e, w()) })
	b.start()
	b.idle()
	if n := len(spy.rec.get()); n != 1 {
		t.Fatalf("WD-10: a finished obligation ran again (%d)", n)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-11, WD-12, WD-13: worked examples.

func TestWD11_WaitingWorkflowExpiresWhenTheSignalSettlesIt(t *testing.T) {
	b := setup(t, nil)
	spy := newSpy()
	spy.register(t, b.eng, "notify")
	wfRegister(t, b.eng, api.NewWorkflow("approval").
		Delay(10*time.Minute).WaitForSignal("approved").Then("ship", wfReturn(nil)).
		MustCompleteWithin(time.Hour).OnDeadline("notify"))
	b.start()
	id := wfDispatch(b, "approval", api.State{})
	b.advance(10 * time.Minute) // parks on the wait at T0+10min
	wfWant(b, id, api.WorkflowWaitingSignal)
	for i := 0; i < 17; i++ { // the checks every 10 min until T0+3h skip it
		b.advance(10 * time.Minute)
	}
	info := wfWant(b, id, api.WorkflowWaitingSignal)
	if !info.DeadlineAt.Equal(t0.Add(time.Hour)) || countKind(b.records(), record.KindWorkflowDeadlineExceeded) != 0 {
		t.Fatalf("WD-11: %+v", info)
	}
	if err := b.eng.Signal(b.ctx, id, "approved", api.State{"by": "ops"}); err != nil {
		t.Fatal(err)
	}
	// The signal's own append holds the expiry (WD-7), not a later check.
	if names := wfStream(b.records(), id); !wfHasRun(names, "signal_received", "workflow_failed", "workflow_deadline_exceeded") {
		t.Fatalf("WD-11: signal append %v", names)
	}
	b.idle()
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "step_boundary", t0.Add(3*time.Hour), t0.Add(3*time.Hour))
	if len(spy.rec.get()) != 1 {
		t.Fatalf("WD-11: handler runs %d", len(spy.rec.get()))
	}
	b.checkReplay()
}

func TestWD11_PausedWorkflowExpiresAtTheFirstCheckAfterResume(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("import").Then("fetch", wfReturn(nil)).OnQueue("etl").MustCompleteWithin(time.Hour))
	if err := b.eng.PauseQueue(b.ctx, "etl"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "import", api.State{})
	b.advance(10 * time.Minute)
	if err := b.eng.PauseWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.advance(170 * time.Minute) // T0+3h: paused never matches the predicate
	wfWant(b, id, api.WorkflowPaused)
	if err := b.eng.ResumeWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowRunning)
	b.advance(time.Minute) // the next check, within one interval
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "check", t0.Add(3*time.Hour), t0.Add(3*time.Hour+time.Minute))
	b.checkReplay()
}

// wdTakes models a step that takes wait+run of the clock: its job waits
// for wait in the paused queue "etl" (queue waiting counts against the
// deadline like work, WD-12), then its attempt runs for run. A single
// attempt cannot outlive DeliveryTimeout (at most 900 s), so the longer
// step times of the worked example are mostly queue waiting. The queue is
// paused again once the attempt started; during, if set, runs while the
// attempt runs, before the clock moves by run.
func wdTakes(b *testBundle, g *wfGate, wait, run time.Duration, during func()) {
	b.t.Helper()
	b.advance(wait)
	if err := b.eng.ResumeQueue(b.ctx, "etl"); err != nil {
		b.t.Fatal(err)
	}
	g.wait()
	if err := b.eng.PauseQueue(b.ctx, "etl"); err != nil {
		b.t.Fatal(err)
	}
	if during != nil {
		during()
	}
	b.clk.Advance(run)
	g.open()
	b.idle()
}

// wd12 runs Then(A).Delay(1h).Then(B) under MustCompleteWithin(2h), A and
// B each waiting and running as given, and returns the workflow id.
func wd12(t *testing.T, b *testBundle, aWait, aRun, bWait, bRun time.Duration, duringB func()) string {
	t.Helper()
	ga, gb := newGate(), newGate()
	slow := api.DeliveryTimeout(900 * time.Second)
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("A", ga.step(api.State{"a": true}, nil), slow).Delay(time.Hour).Then("B", gb.step(api.State{"b": true}, nil), slow).
		OnQueue("etl").MustCompleteWithin(2*time.Hour).OnDeadline("notify"))
	if err := b.eng.PauseQueue(b.ctx, "etl"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "import", api.State{})
	wdTakes(b, ga, aWait, aRun, nil)
	info := wfWant(b, id, api.WorkflowRunning)
	if want := t0.Add(aWait + aRun + time.Hour); !info.DelayUntil.Equal(want) {
		t.Fatalf("WD-12: the delay fires at %v, want %v", info.DelayUntil, want)
	}
	b.advance(time.Hour)
	wdTakes(b, gb, bWait, bRun, duringB)
	if err := <-gb.ctxErr; err != nil {
		t.Fatalf("WD-9: B's attempt was cancelled: %v", err)
	}
	return id
}

func TestWD12_DelaysCountAgainstTheDeadline(t *testing.T) {
	// A takes 50 min, the delay fires at T0+110min, B takes 15 min: the
	// deadline passes at T0+120 during B.
	t.Run("A50_B15_failed_by_the_check", func(t *testing.T) {
		b := setup(t, nil)
		spy := newSpy()
		spy.register(t, b.eng, "notify")
		// B runs from T0+115: at T0+121 the check has failed the workflow
		// while B still runs; B returns at T0+125.
		id := wd12(t, b, 40*time.Minute, 10*time.Minute, 5*time.Minute, 4*time.Minute, func() {
			b.clk.Advance(6 * time.Minute)
			<-spy.calls
		})
		info := wdFailedByDeadline(b, id)
		wdOneExpiry(b, id, "check", t0.Add(120*time.Minute), t0.Add(121*time.Minute))
		recs := b.records()
		if info.State["b"] != nil || wfCount(recs, id, record.KindStepCompleted) != 2 || wfCount(recs, id, record.KindWorkflowCompleted) != 0 {
			t.Fatalf("WD-12: B's late success advanced the workflow: %v", wfStream(recs, id))
		}
		names := strings.Join(wfStream(recs, id), " ")
		if !strings.Contains(names, "workflow_deadline_exceeded deadline_handler_started attempt_succeeded") &&
			!strings.Contains(names, "workflow_deadline_exceeded deadline_handler_started deadline_handler_finished attempt_succeeded") {
			t.Fatalf("WD-12: B must settle after the expiry and the handler's start: %v", names)
		}
		b.checkReplay()
	})
	t.Run("A50_B15_failed_by_WD7", func(t *testing.T) {
		b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = wdNever })
		newSpy().register(t, b.eng, "notify")
		id := wd12(t, b, 40*time.Minute, 10*time.Minute, 5*time.Minute, 10*time.Minute, nil)
		wdFailedByDeadline(b, id)
		wdOneExpiry(b, id, "step_boundary", t0.Add(125*time.Minute), t0.Add(125*time.Minute))
		if !wfHasRun(wfStream(b.records(), id), "attempt_succeeded", "workflow_failed", "workflow_deadline_exceeded") {
			t.Fatalf("WD-12: %v", wfStream(b.records(), id))
		}
		b.checkReplay()
	})
	t.Run("A20_B30_completed", func(t *testing.T) {
		b := setup(t, nil)
		newSpy().register(t, b.eng, "notify")
		id := wd12(t, b, 10*time.Minute, 10*time.Minute, 20*time.Minute, 10*time.Minute, nil)
		info := wfWant(b, id, api.WorkflowCompleted)
		if wfState(info.State) != "map[a:true b:true]" || countKind(b.records(), record.KindWorkflowDeadlineExceeded) != 0 {
			t.Fatalf("WD-12: %+v", info)
		}
		if last := wfBodies[*record.StepCompleted](b.records()); len(last) != 3 {
			t.Fatalf("WD-12: %d steps completed", len(last))
		}
		b.advance(3 * time.Hour) // WD-14: completed first, never touched
		wfWant(b, id, api.WorkflowCompleted)
		b.checkReplay()
	})
}

func TestWD12_DelayLongerThanTheDeadlineAlwaysFails(t *testing.T) {
	for _, c := range []struct {
		name     string
		interval time.Duration
		by       string
		at       time.Duration
	}{
		{"by_the_check_while_the_delay_is_pending", 0, "check", 2 * time.Hour},
		{"by_WD7_when_the_delay_fires", wdNever, "step_boundary", 3 * time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = c.interval })
			var rec recorder
			wfRegister(t, b.eng, api.NewWorkflow("import").
				Then("A", wfReturn(nil)).Delay(3*time.Hour).Then("B", wfSeen(&rec, "B", nil)).MustCompleteWithin(2*time.Hour))
			b.start()
			id := wfDispatch(b, "import", api.State{})
			b.idle() // A completes at T0
			b.advance(2 * time.Hour)
			b.advance(time.Hour)
			info := wdFailedByDeadline(b, id)
			wdOneExpiry(b, id, c.by, t0.Add(c.at), t0.Add(c.at))
			if !info.DelayUntil.IsZero() || info.Step != 1 || len(rec.get()) != 0 {
				t.Fatalf("WD-12: %+v", info)
			}
			b.advance(2 * time.Hour)
			wdOneExpiry(b, id, c.by, t0.Add(c.at), t0.Add(c.at))
			b.checkReplay()
		})
	}
}

// TestWD13_RetryAfterAStepBoundaryExpiryRunsANewJob: the Then step's job
// succeeds past the deadline, which fails the workflow at the step
// boundary and discards the output (WD-7). Retry re-enters the step with a
// new job (WF-18, WD-13), and WD-7 fails the workflow again when that job
// completes, past the deadline still. The retry used to reuse the
// discarded output and expire the workflow in its own append, without a
// job; so did a retry after a check expiry whose running attempt
// succeeded late (WD-9).
func TestWD13_RetryAfterAStepBoundaryExpiryRunsANewJob(t *testing.T) {
	for _, c := range []struct {
		name  string
		check time.Duration // DeadlineCheckInterval
	}{{"step boundary", wdNever}, {"check, then a late success", time.Minute}} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = c.check; o.DeliveryTimeout = wdSlow })
			g := newGate()
			wfRegister(t, b.eng, api.NewWorkflow("dl").Then("a", g.step(api.State{"out": 1}, nil)).MustCompleteWithin(time.Minute))
			id := wdPastDeadline(b, g, "dl")
			wdFailedByDeadline(b, id)
			if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
				t.Fatal(err)
			}
			b.idle()
			names := wfStream(b.records(), id)
			if !wfHasRun(names, "workflow_retried", "job_enqueued") || len(g.started) != 1 {
				t.Fatalf("WF-18: after the retry %v, %d new runs of the step, want a new job", names, len(g.started))
			}
			wdFailedByDeadline(b, id)
			xs := wdExpiries(t, b.records(), id)
			if len(xs) != 2 || xs[1].DetectedBy != "step_boundary" {
				t.Fatalf("WD-7: expiries %+v, want the new job's completion to expire it again", xs)
			}
			b.checkReplay()
		})
	}
}

func TestWD13_RetryAfterExpiryKeepsDeadlineAndExpiresAgain(t *testing.T) {
	b := setup(t, nil)
	spy := newSpy()
	spy.register(t, b.eng, "notify")
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", wfReturn(nil)).OnQueue("etl").MustCompleteWithin(time.Hour).OnDeadline("notify"))
	if err := b.eng.PauseQueue(b.ctx, "etl"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "import", api.State{}) // deadline_at 11:00
	b.advance(40 * time.Second)                // checks now run at hh:mm:40
	b.advance(59 * time.Minute)
	wfWant(b, id, api.WorkflowRunning)
	b.advance(time.Minute) // failed by the check at 11:00:40
	first := wdFailedByDeadline(b, id)
	if !first.FailedAt.Equal(t0.Add(time.Hour + 40*time.Second)) {
		t.Fatalf("WD-13: failed at %v", first.FailedAt)
	}
	b.advance(59*time.Minute + 20*time.Second) // 12:00:00
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	info := wfWant(b, id, api.WorkflowRunning)
	if info.Error != "" || !info.FailedAt.IsZero() || !info.DeadlineAt.Equal(t0.Add(time.Hour)) || info.Step != 0 || info.Attempts != 0 {
		t.Fatalf("WD-13: after retry %+v", info)
	}
	if n := len(wfSteps(b.records(), id)); n != 2 {
		t.Fatalf("WD-13: the step must be re-entered with a new job, %d jobs", n)
	}
	b.advance(time.Minute) // the next check, within one interval
	again := wdFailedByDeadline(b, id)
	xs := wdExpiries(t, b.records(), id)
	if len(xs) != 2 || xs[0].DeadlineAt != xs[1].DeadlineAt || xs[1].DetectedBy != "check" ||
		!again.FailedAt.After(t0.Add(2*time.Hour)) || again.FailedAt.After(t0.Add(2*time.Hour+time.Minute)) {
		t.Fatalf("WD-13: expiries %+v, failed again at %v", xs, again.FailedAt)
	}
	if n := len(spy.rec.get()); n != 2 {
		t.Fatalf("WD-13: the handler ran %d times, want once per expiry", n)
	}
	if n := countKind(b.records(), record.KindDeadlineHandlerFinished); n != 2 {
		t.Fatalf("WD-13: %d handler finished records", n)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-14, WD-15, WD-16.

func TestWD14_CompletedFirstWinsAndCancelAfterExpiryIsAllowed(t *testing.T) {
	b := setup(t, nil)
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	if err := api.HandleDeadline(b.eng, "slow_cleanup", func(ctx context.Context, st api.State) error {
		started <- struct{}{}
		<-block
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("quick").Then("a", wfReturn(nil)).MustCompleteWithin(time.Minute).OnDeadline("slow_cleanup"))
	wfRegister(t, b.eng, wdExpiring("stuck", "slow_cleanup"))
	b.start()
	quick := wfDispatch(b, "quick", api.State{})
	stuck := wfDispatch(b, "stuck", api.State{})
	b.idle()
	wfWant(b, quick, api.WorkflowCompleted)
	b.clk.Advance(time.Minute)
	<-started
	// Cancel while the handler runs: the obligation stands.
	if err := b.eng.CancelWorkflow(b.ctx, stuck); err != nil {
		t.Fatalf("WD-14: cancel after expiry: %v", err)
	}
	close(block)
	b.idle()
	wfWant(b, stuck, api.WorkflowCancelled)
	wfWant(b, quick, api.WorkflowCompleted)
	recs := b.records()
	if len(wdExpiries(t, recs, quick)) != 0 {
		t.Fatal("WD-14: a completed workflow was expired")
	}
	fin := wfBodies[*record.DeadlineHandlerFinished](recs)
	if len(fin) != 1 || fin[0].WorkflowID != stuck || fin[0].Outcome != "ok" {
		t.Fatalf("WD-14: %+v", fin)
	}
	if !wfHasRun(wfStream(recs, stuck), "deadline_handler_started", "workflow_cancelled", "deadline_handler_finished") {
		t.Fatalf("WD-14: %v", wfStream(recs, stuck))
	}
	b.checkReplay()
}

func TestWD15_ChildHasNoDeadlineAndNeverAdvancesAnExpiredParent(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = wdSlow })
	spy := newSpy()
	spy.register(t, b.eng, "notify")
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("child").Then("work", g.step(api.State{"child_done": true}, nil)))
	wfRegister(t, b.eng, api.NewWorkflow("parent").
		SubWorkflow("sub", "child").Then("after", wfReturn(nil)).MustCompleteWithin(time.Minute).OnDeadline("notify"))
	b.start()
	p := wfDispatch(b, "parent", api.State{"x": 1})
	g.wait()
	c := wfChild(b, p, 0)
	if ci := wfInfo(b, c); !ci.DeadlineAt.IsZero() || ci.ParentID != p {
		t.Fatalf("WD-15: the child inherited the deadline: %+v", ci)
	}
	if s := wfBodies[*record.WorkflowStarted](b.records()); s[1].DeadlineAt != 0 {
		t.Fatalf("WD-15: child workflow_started %+v", s[1])
	}
	b.clk.Advance(2 * time.Minute)
	<-spy.calls // the parent expired while its child works
	g.open()
	b.idle()
	wfWant(b, c, api.WorkflowCompleted)
	info := wdFailedByDeadline(b, p)
	if info.Step != 0 || info.State["child_done"] != nil || wfCount(b.records(), p, record.KindStepCompleted) != 0 {
		t.Fatalf("WD-15: the expired parent was advanced: %+v", info)
	}
	b.checkReplay()
}

func TestWD15_RunningParentPastDeadlineFailsWhenChildCompletes(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = wdNever; o.DeliveryTimeout = wdSlow })
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("child").Then("work", g.step(nil, nil)))
	wfRegister(t, b.eng, api.NewWorkflow("parent").SubWorkflow("sub", "child").MustCompleteWithin(time.Minute))
	p := wdPastDeadline(b, g, "parent")
	c := wfChild(b, p, 0)
	wfWant(b, c, api.WorkflowCompleted)
	wdFailedByDeadline(b, p)
	wdOneExpiry(b, p, "step_boundary", t0.Add(2*time.Minute), t0.Add(2*time.Minute))
	if !wfHasRun(wfNames(b.records()), "workflow_completed", "workflow_failed", "workflow_deadline_exceeded") {
		t.Fatalf("WD-15: %v", wfNames(b.records()))
	}
	b.checkReplay()
}

func TestWD16_OneExpiryWhenCheckAndStepBoundaryMeet(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = wdSlow })
	spy := newSpy()
	spy.register(t, b.eng, "notify")
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", g.step(nil, nil)).Then("load", wfReturn(nil)).MustCompleteWithin(time.Minute).OnDeadline("notify"))
	b.start()
	id := wfDispatch(b, "import", api.State{})
	g.wait()
	// The check (due at T0+1min) and the step's completion reach the
	// engine at the same instant, in either order.
	b.clk.Advance(time.Minute)
	g.open()
	b.idle()
	b.advance(5 * time.Minute)
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "", t0.Add(time.Minute), t0.Add(time.Minute))
	if n := len(spy.rec.get()); n != 1 {
		t.Fatalf("WD-16: the handler ran %d times", n)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-18, WD-19, WD-20.

func TestWD18_StatusShowsDeadlineErrorAndFailedAt(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("import").Delay(time.Hour).MustCompleteWithin(30*time.Minute))
	b.start()
	id := wfDispatch(b, "import", api.State{})
	info := wfInfo(b, id)
	if !info.DeadlineAt.Equal(t0.Add(30*time.Minute)) || info.Error != "" || !info.FailedAt.IsZero() {
		t.Fatalf("WD-18: before expiry %+v", info)
	}
	b.advance(30 * time.Minute)
	info = wdFailedByDeadline(b, id)
	if !info.DeadlineAt.Equal(t0.Add(30*time.Minute)) || !info.FailedAt.Equal(t0.Add(30*time.Minute)) ||
		info.Error != api.MessageDeadlineExceeded {
		t.Fatalf("WD-18: %+v", info)
	}
	b.checkReplay()
}

func TestWD19_ReplayFoldsExpiriesWithoutReevaluating(t *testing.T) {
	b := setup(t, nil)
	spy := newSpy()
	register := func(e *api.Engine) {
		spy.register(t, e, "notify")
		wfRegister(t, e, wdExpiring("import", "notify"))
		wfRegister(t, e, api.NewWorkflow("later").Delay(5*time.Hour).MustCompleteWithin(3*time.Hour).OnDeadline("notify"))
	}
	register(b.eng)
	b.start()
	id := wfDispatch(b, "import", api.State{})
	later := wfDispatch(b, "later", api.State{})
	b.advance(time.Minute)
	before := wdFailedByDeadline(b, id)
	b.reopen(register) // checks live == replay first
	// Replay restored the expiry as recorded; the post-recovery check adds
	// nothing for it.
	b.start()
	b.idle()
	after := wdFailedByDeadline(b, id)
	if !after.FailedAt.Equal(before.FailedAt) || len(wdExpiries(t, b.records(), id)) != 1 || len(spy.rec.get()) != 1 {
		t.Fatalf("WD-19: %+v vs %+v, handler runs %d", before, after, len(spy.rec.get()))
	}
	// A deadline passing during downtime is caught by the post-recovery check.
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(3 * time.Hour)
	b.open()
	register(b.eng)
	wfWant(b, later, api.WorkflowRunning) // nothing checks before Start
	b.start()
	b.idle()
	wdFailedByDeadline(b, later)
	wdOneExpiry(b, later, "check", t0.Add(3*time.Hour+time.Minute), t0.Add(3*time.Hour+time.Minute))
	b.checkReplay()
}

func TestWD20_DeliveryTimeoutRetriesNeverTouchTheDeadline(t *testing.T) {
	b := setup(t, nil)
	release := make(chan struct{})
	started := make(chan *api.Delivery, 4)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		started <- d
		if d.Attempt() == 1 {
			<-release // ignores its context: abandoned at its cooperative deadline
		}
		return api.State{"attempt": d.Attempt()}, nil
	}
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", step, api.DeliveryTimeout(2*time.Second)).MustCompleteWithin(time.Hour))
	b.start()
	id := wfDispatch(b, "import", api.State{})
	d := <-started
	b.clk.Advance(1500 * time.Millisecond)
	<-d.Cancellation().Done()
	b.clk.Advance(125 * time.Millisecond)
	b.idle()
	info := wfWant(b, id, api.WorkflowRunning)
	if !info.DeadlineAt.Equal(t0.Add(time.Hour)) || info.Attempts != 1 {
		t.Fatalf("WD-20: after the timeout %+v", info)
	}
	close(release)
	b.advance(time.Second)
	<-started
	info = wfWant(b, id, api.WorkflowCompleted)
	if !info.DeadlineAt.Equal(t0.Add(time.Hour)) || wfState(info.State) != "map[attempt:2]" {
		t.Fatalf("WD-20: %+v", info)
	}
	if n := countKind(b.records(), record.KindAttemptRetryScheduled); n != 1 {
		t.Fatalf("WD-20: %d retries", n)
	}
	b.checkReplay()
}

// WD-6, WD-19: the check right after startup recovery comes before the
// first dispatch, so that a workflow whose deadline passed during downtime
// fails before any of its pending work starts.
func TestWD6_PostRecoveryCheckPrecedesFirstDispatch(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	register := func(e *api.Engine) {
		wfRegister(t, e, api.NewWorkflow("import").Then("fetch", wfSeen(&rec, "fetch", nil)).MustCompleteWithin(time.Minute))
	}
	register(b.eng)
	id := wfDispatch(b, "import", api.State{})
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Hour)
	b.open()
	register(b.eng)
	b.start()
	b.idle()
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "check", t0.Add(time.Hour), t0.Add(time.Hour))
	if len(rec.get()) != 0 || countKind(b.records(), record.KindAttemptStarted) != 0 {
		t.Fatalf("WD-6: a step of a workflow expired during downtime started: %v", rec.get())
	}
	b.checkReplay()
}

// WD-19, WD-10: a snapshot holds the workflows (waits, stored signals,
// paused and failed ones) and the deadline handler obligations; a restart
// from it equals a replay from seq 1, and an obligation the crash left
// unfinished runs after it.
func TestWD19_SnapshotKeepsWorkflowsAndObligations(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMin })
	block := make(chan struct{})
	calls := make(chan string, 64)
	register := func(e *api.Engine, blocking bool) {
		if err := api.HandleDeadline(e, "cleanup", func(ctx context.Context, st api.State) error {
			calls <- wfState(st)
			if blocking {
				<-block
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		wfRegister(t, e, api.NewWorkflow("chain").Then("a", wfReturn(api.State{"a": 1})).Then("b", wfReturn(nil)))
		wfRegister(t, e, api.NewWorkflow("wait").WaitForSignal("go", "also"))
		wfRegister(t, e, api.NewWorkflow("held").Then("a", wfReturn(nil), api.OnQueue("held")).MustCompleteWithin(time.Hour).OnDeadline("cleanup"))
	}
	register(b.eng, true)
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	for i := 0; i < 40; i++ { // 6 records each: several snapshots
		wfDispatch(b, "chain", api.State{"i": i})
	}
	waiting := wfDispatch(b, "wait", api.State{})
	paused := wfDispatch(b, "held", api.State{"n": 1})
	expired := wfDispatch(b, "held", api.State{"n": 2})
	b.idle()
	if err := b.eng.Signal(b.ctx, waiting, "go", api.State{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseWorkflow(b.ctx, paused); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Hour)
	<-calls // the running workflow expired; its handler blocks: crash now
	expiredAt := b.lastSeq()
	expiredCtx, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Close(expiredCtx)
	close(block)
	b.open()
	if st := b.eng.Stats(); st.SnapshotSeq == 0 || st.LastSeq < expiredAt {
		t.Fatalf("WD-19: no snapshot was used: %+v", st)
	}
	b.checkReplay()
	register(b.eng, false)
	wfWant(b, waiting, api.WorkflowWaitingSignal)
	wfWant(b, paused, api.WorkflowPaused)
	wdFailedByDeadline(b, expired)
	b.start()
	b.idle()
	if got := <-calls; got != "map[n:2]" {
		t.Fatalf("WD-10: the obligation ran again with %s", got)
	}
	if err := b.eng.Signal(b.ctx, waiting, "also", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if info := wfWant(b, waiting, api.WorkflowCompleted); info.State["x"] == nil {
		t.Fatalf("WD-19: the stored signal was lost: %s", wfState(info.State))
	}
	b.reopen(func(e *api.Engine) { register(e, false) })
	wfWant(b, paused, api.WorkflowPaused)
	b.checkReplay()
}

// WD-10: an obligation whose handler this process did not register
// finishes with outcome not_registered and a debug record; the workflow
// stays failed with "Deadline exceeded".
func TestWD10_ObligationWithoutRegisteredHandlerFinishesNotRegistered(t *testing.T) {
	b := setup(t, nil)
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	if err := api.HandleDeadline(b.eng, "cleanup", func(ctx context.Context, st api.State) error {
		started <- struct{}{}
		<-block
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, wdExpiring("import", "cleanup"))
	b.start()
	id := wfDispatch(b, "import", api.State{})
	b.clk.Advance(time.Minute)
	<-started
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Close(expired)
	close(block)
	b.open() // this process registers no deadline handler
	b.start()
	b.idle()
	wdFailedByDeadline(b, id)
	recs := b.records()
	fin := wfBodies[*record.DeadlineHandlerFinished](recs)
	dbg := wfBodies[*record.Debug](recs)
	if len(fin) != 1 || fin[0].Outcome != "not_registered" || len(dbg) != 1 || !strings.Contains(dbg[0].Message, `"cleanup"`) {
		t.Fatalf("WD-10: %+v %+v", fin, dbg)
	}
	b.checkReplay()
}

// TestWD10_ParkedWorkflowExpiresWithItsOwnHandler: workflow_started
// records the definition's on-deadline handler (WD-2), so a workflow whose
// definition is not registered in this process at its expiry (here, a
// changed definition parks it) still gets its own handler called with its
// public state (WD-10); the changed definition's handler is not called.
func TestWD10_ParkedWorkflowExpiresWithItsOwnHandler(t *testing.T) {
	b := setup(t, nil)
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	wfRegister(t, b.eng, wdExpiring("import", "cleanup"))
	b.start()
	id := wfDispatch(b, "import", api.State{"source": "s3://bucket/x", "_token": "k1"})
	b.reopen(func(e *api.Engine) {
		spy.register(t, e, "cleanup")
		other := newSpy()
		other.register(t, e, "cleanup_v2")
		wfRegister(t, e, api.NewWorkflow("import").Delay(2*time.Hour).MustCompleteWithin(time.Minute).OnDeadline("cleanup_v2"))
	})
	b.start()
	b.idle()
	if info := wfInfo(b, id); !info.Parked {
		t.Fatalf("workflow %s is not parked under the changed definition", id)
	}
	b.advance(time.Minute)
	wdFailedByDeadline(b, id)
	if got := strings.Join(spy.rec.get(), "|"); got != "map[source:s3://bucket/x]" {
		t.Fatalf("WD-10: the workflow's own handler got %q, want its public state once", got)
	}
	recs := b.records()
	x := wdOneExpiry(b, id, "check", t0.Add(time.Minute), t0.Add(time.Minute))
	fin := wfBodies[*record.DeadlineHandlerFinished](recs)
	if x.Handler != "cleanup" || len(fin) != 1 || fin[0].Outcome != "ok" {
		t.Fatalf("WD-10: expiry handler %q, finished %+v; want cleanup, ok", x.Handler, fin)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WD-7: a step that ends in failure at or after deadline_at, whatever ends
// it, fails the workflow by its deadline.

// A child that fails after its parent's deadline_at, before a periodic
// check noticed the parent, expires the parent at the step boundary with
// its handler, as a failing step attempt would: the outcome does not
// depend on which is noticed first.
func TestWD7_ChildFailingAfterTheDeadlineExpiresTheParent(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval = time.Minute })
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	wfRegister(t, b.eng, api.NewWorkflow("child").Delay(5*time.Minute+10*time.Second).
		Then("c", func(context.Context, *api.Delivery, api.State) (api.State, error) {
			return nil, api.Permanent("X", errors.New("child boom"))
		}))
	wfRegister(t, b.eng, api.NewWorkflow("parent").SubWorkflow("sub", "child").
		MustCompleteWithin(5*time.Minute+5*time.Second).OnDeadline("cleanup"))
	b.start()
	id := wfDispatch(b, "parent", api.State{})
	for range 5 {
		b.advance(time.Minute) // the checks at 1..5 min find it within its deadline
	}
	wfWant(b, id, api.WorkflowRunning)
	b.advance(10 * time.Second) // the child fails 5 s past the parent's deadline_at, before the next check
	wdFailedByDeadline(b, id)
	wdOneExpiry(b, id, "step_boundary", t0.Add(5*time.Minute+10*time.Second), t0.Add(5*time.Minute+10*time.Second))
	<-spy.calls
	b.checkReplay()
}

// A dependency wait that becomes impossible after deadline_at (WD-11 kept
// it waiting past the deadline) fails the workflow by its deadline too.
func TestWD7_WaitImpossibleAfterTheDeadlineExpires(t *testing.T) {
	b := setup(t, nil)
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	wfRegister(t, b.eng, api.NewWorkflow("dep").WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflowsIn(api.All(), "ids").
		MustCompleteWithin(time.Hour).OnDeadline("cleanup"))
	b.start()
	dep := wfDispatch(b, "dep", api.State{})
	join := wfDispatch(b, "join", api.State{"ids": []any{dep}})
	b.advance(2 * time.Hour)
	wfWant(b, join, api.WorkflowWaitingWorkflows) // WD-11
	if err := b.eng.CancelWorkflow(b.ctx, dep); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wdFailedByDeadline(b, join)
	wdOneExpiry(b, join, "step_boundary", t0.Add(2*time.Hour), t0.Add(2*time.Hour))
	<-spy.calls
	b.checkReplay()
}

// A Parallel branch whose attempt succeeds at or after deadline_at expires
// the workflow in its settlement's append, as the last branch's would and
// as a failing branch's does: the other branches' pending jobs are buried
// with "Deadline exceeded" instead of running past the deadline.
func TestWD7_BranchSucceedingPastTheDeadlineExpiresTheWorkflow(t *testing.T) {
	b := setup(t, func(o *api.Options) {
		o.DeadlineCheckInterval, o.DeliveryTimeout, o.Workers = wdNever, wdSlow, 1
		o.Backoff = api.BackoffPolicy{Kind: api.BackoffFixed, Base: 300 * time.Second}
	})
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	g := newGate()
	var runs atomic.Int32
	flaky := func(context.Context, *api.Delivery, api.State) (api.State, error) {
		runs.Add(1)
		return nil, errors.New("flaky")
	}
	// One worker: the flaky branch runs and settles (retry in 5 min)
	// before the gated one starts.
	wfRegister(t, b.eng, api.NewWorkflow("wide").Parallel("p", flaky, g.step(api.State{"a": 1}, nil)).
		MustCompleteWithin(time.Minute).OnDeadline("cleanup"))
	id := wdPastDeadline(b, g, "wide")
	info := wdFailedByDeadline(b, id)
	at := t0.Add(2 * time.Minute)
	wdOneExpiry(b, id, "step_boundary", at, at)
	if info.State["a"] != nil {
		t.Fatalf("WD-7: the branch's output was merged: %+v", info.State)
	}
	if !wfHasRun(wfStream(b.records(), id), "attempt_succeeded", "workflow_failed", "workflow_deadline_exceeded", "job_buried") {
		t.Fatalf("WD-7: %v", wfStream(b.records(), id))
	}
	<-spy.calls
	b.advance(10 * time.Minute)
	if n := runs.Load(); n != 1 {
		t.Fatalf("WD-7: the other branch ran %d times, want once (before the deadline)", n)
	}
	b.checkReplay()
}

// The jobs a step attempt enqueues with its success (Delivery.Enqueue) go
// with its output: a success at or after deadline_at enqueues none of
// them, as a success the periodic check overtook enqueues none (WD-9), so
// that the outcome does not hang on which of the two noticed first.
func TestWD7_SuccessPastTheDeadlineEnqueuesNoFollowUp(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval, o.DeliveryTimeout = wdNever, wdSlow })
	if err := api.Handle(b.eng, "mail", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			if err := d.Enqueue("mail", msg{}); err != nil {
				return nil, err
			}
			return g.step(api.State{"rows": 1}, nil)(ctx, d, st)
		}).MustCompleteWithin(time.Minute))
	id := wdPastDeadline(b, g, "import")
	wdFailedByDeadline(b, id)
	for _, e := range wfBodies[*record.JobEnqueued](b.records()) {
		if e.Handler == "mail" {
			t.Fatalf("WD-7: the success past the deadline enqueued its follow-up %s", e.JobID)
		}
	}
	b.checkReplay()
}

// A step that completes at or after deadline_at with an output that cannot
// be stored (a wait's result nested too deep, branch outputs too large to
// merge) fails the workflow by its deadline, with its handler, as any
// other completion past deadline_at does: the output never decides the
// outcome.
func TestWD7_UnstorableOutputPastTheDeadlineExpires(t *testing.T) {
	b := setup(t, func(o *api.Options) {
		o.DeadlineCheckInterval, o.DeliveryTimeout = wdNever, wdSlow
		o.RecordBytesMax, o.PayloadBytesMax = 64<<20, 8<<20
	})
	spy := newSpy()
	spy.register(t, b.eng, "cleanup")
	g := newGate()
	const branch = 7 << 20 // three take 21 MiB, past record.ValueBytesMax
	big := func(k string) api.StepFunc { return g.step(api.State{k: strings.Repeat("s", branch)}, nil) }
	wfRegister(t, b.eng, api.NewWorkflow("dep").WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("sig").WaitForSignal("s").Into("r").
		MustCompleteWithin(time.Hour).OnDeadline("cleanup"))
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflowsIn(api.All(), "deps").Into("r").
		MustCompleteWithin(time.Hour).OnDeadline("cleanup"))
	wfRegister(t, b.eng, api.NewWorkflow("wide").Parallel("p", big("k1"), big("k2"), big("k3")).
		MustCompleteWithin(time.Hour).OnDeadline("cleanup"))
	b.start()
	sig := wfDispatch(b, "sig", api.State{})
	dep := wfDispatch(b, "dep", api.State{"k": nest(29)})
	join := wfDispatch(b, "join", api.State{"deps": []any{dep}})
	wide := wfDispatch(b, "wide", api.State{})
	for range 3 {
		g.wait()
	}
	b.advance(2 * time.Hour) // the waits stay (WD-11), the branches run on
	wfWant(b, sig, api.WorkflowWaitingSignal)
	wfWant(b, join, api.WorkflowWaitingWorkflows)
	if err := b.eng.Signal(b.ctx, sig, "s", api.State{"k": nest(31)}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Signal(b.ctx, dep, "go", nil); err != nil {
		t.Fatal(err)
	}
	g.open()
	b.idle()
	at := t0.Add(2 * time.Hour)
	for _, id := range []string{sig, join, wide} {
		wdFailedByDeadline(b, id)
		wdOneExpiry(b, id, "step_boundary", at, at)
	}
	for range 3 {
		<-spy.calls
	}
	b.checkReplay()
}

// WF-10: a workflow waiting for itself can never see itself finish: the
// wait is impossible and fails the workflow at once, naming the cause,
// instead of waiting forever (its deadline would never catch it, WD-11).
func TestWF10_WaitingForItselfFails(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("self").
		Then("me", func(_ context.Context, d *api.Delivery, _ api.State) (api.State, error) {
			return api.State{"ids": []any{d.WorkflowID()}}, nil
		}).
		WaitForWorkflowsIn(api.All(), "ids"))
	b.start()
	id := wfDispatch(b, "self", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if !strings.Contains(info.Error, "the workflow itself") {
		t.Fatalf("WF-10: error %q does not name the cause", info.Error)
	}
	b.checkReplay()
}

// WF-10: two workflows that each wait for the other (All) can never see
// the other finish: the second to enter its wait finds the cycle, fails
// naming it, and its failure fails the first, instead of both waiting
// forever.
func TestWF10_ACycleOfWaitsFails(t *testing.T) {
	b := setup(t, nil)
	var mu sync.Mutex
	peer := map[string]string{}
	wfRegister(t, b.eng, api.NewWorkflow("pair").
		Then("pick", func(_ context.Context, d *api.Delivery, _ api.State) (api.State, error) {
			mu.Lock()
			defer mu.Unlock()
			return api.State{"ids": []any{peer[d.WorkflowID()]}}, nil
		}).
		WaitForWorkflowsIn(api.All(), "ids"))
	a := wfDispatch(b, "pair", api.State{})
	c := wfDispatch(b, "pair", api.State{})
	mu.Lock()
	peer[a], peer[c] = c, a
	mu.Unlock()
	b.start()
	b.idle()
	cycles := 0
	for _, id := range []string{a, c} {
		info := wfWant(b, id, api.WorkflowFailed)
		if strings.Contains(info.Error, "it waits for this workflow") {
			cycles++
		}
	}
	if cycles != 1 {
		t.Fatalf("WF-10: %d of the two failures name the cycle, want the second to enter its wait", cycles)
	}
	b.checkReplay()
}

// WF-10, WF-7: three workflows that each wait Any for the two others can
// never finish, though each has two ways out: in whatever order they
// enter their waits, the last to enter finds that none can finish first
// and fails naming the cycle, and the two others fail after it, although
// the first of them to notice still counts a dependency under way,
// instead of all three waiting forever.
func TestWF10_AnAnyCycleOfWaitsFails(t *testing.T) {
	b := setup(t, nil)
	var mu sync.Mutex
	peers := map[string][]any{}
	wfRegister(t, b.eng, api.NewWorkflow("trio").
		Then("pick", func(_ context.Context, d *api.Delivery, _ api.State) (api.State, error) {
			mu.Lock()
			defer mu.Unlock()
			return api.State{"ids": peers[d.WorkflowID()]}, nil
		}).
		WaitForWorkflowsIn(api.Any(), "ids"))
	ids := []string{wfDispatch(b, "trio", api.State{}), wfDispatch(b, "trio", api.State{}), wfDispatch(b, "trio", api.State{})}
	mu.Lock()
	for i, id := range ids {
		peers[id] = []any{ids[(i+1)%3], ids[(i+2)%3]}
	}
	mu.Unlock()
	b.start()
	b.idle()
	cycles := 0
	for _, id := range ids {
		info := wfWant(b, id, api.WorkflowFailed)
		if strings.Contains(info.Error, "it waits for this workflow") {
			cycles++
		}
	}
	if cycles == 0 {
		t.Fatal("WF-10: no failure names the cycle")
	}
	b.checkReplay()
}
