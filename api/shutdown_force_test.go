package api_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

// The force variant of SD-10 and the final abort of DL-41, driven through
// the real engine under a manual clock. Instants are seconds after t0, the
// first signal.

// endOnFailure moves the clock past any root when a test that drives a
// shutdown on the manual clock fails half-way, so that the engine's Close
// in the bundle's cleanup does not wait for instants that never come.
func endOnFailure(b *testBundle) {
	b.t.Cleanup(func() {
		if b.t.Failed() {
			b.clk.Advance(time.Hour)
		}
	})
}

// forceTestOptions gives the tests of this file a 30 s root and the
// largest SettlementTimeout. The coordinator bounds the append of each
// shutdown record by SettlementTimeout on the engine's clock. These tests
// move the manual clock as soon as a record shows in the journal, which can
// be before the coordinator has seen that append return; a move past the
// bound then counts the append as timed out, and the coordinator journals
// nothing more. At 60 s the bound lies beyond every instant a test here
// moves to.
func forceTestOptions(o *api.Options) {
	o.ShutdownTimeout = 30 * time.Second
	o.SettlementTimeout = deadlines.SettlementTimeoutMax
}

// runningForForce starts an engine with forceTestOptions and one job whose
// handler is running under the probe, and returns the channels a test
// hands to a scope closer that hangs: closing (closed by the test's closer
// when it starts) and release (which lets it return; closed at cleanup if
// the test did not).
func runningForForce(t *testing.T, opts ...api.JobOption) (b *testBundle, p *probe, d *api.Delivery, id string, closing, release chan struct{}) {
	t.Helper()
	b = setup(t, forceTestOptions)
	endOnFailure(b)
	p = newProbe()
	p.free(t)
	if err := api.Handle(b.eng, "work", p.handler()); err != nil {
		t.Fatal(err)
	}
	id = b.enqueue("work", msg{}, opts...)
	b.start()
	d = <-p.started
	closing, release = make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return b, p, d, id, closing, release
}

// awaitRecord waits until the journal holds a record match accepts, while
// the engine runs, and returns the first one.
func (b *testBundle) awaitRecord(what string, match func(journalRecord) bool) journalRecord {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		for _, r := range b.records() {
			if match(r) {
				return r
			}
		}
		runtime.Gosched()
	}
	b.t.Fatalf("no %s record", what)
	return journalRecord{}
}

// noRecord fails if the journal holds a record match accepts.
func (b *testBundle) noRecord(what string, match func(journalRecord) bool) {
	b.t.Helper()
	for _, r := range b.records() {
		if match(r) {
			b.t.Fatalf("unexpected %s record at t0%+v", what, time.Unix(0, r.At).Sub(t0))
		}
	}
}

func phaseStarted(name string) func(journalRecord) bool {
	return func(r journalRecord) bool {
		p, ok := r.Body.(*record.ShutdownPhaseStarted)
		return ok && p.Name == name
	}
}

func phaseFinished(name string) func(journalRecord) bool {
	return func(r journalRecord) bool {
		p, ok := r.Body.(*record.ShutdownPhaseFinished)
		return ok && p.Name == name
	}
}

func settledJob(id string) func(journalRecord) bool {
	return func(r journalRecord) bool {
		o := outcome(r)
		return o != nil && o.JobID == id
	}
}

func isKind(k record.Kind) func(journalRecord) bool {
	return func(r journalRecord) bool { return r.Kind() == k }
}

// wantAt fails unless r was appended at t0+d.
func wantAppendedAt(t *testing.T, what string, r journalRecord, d time.Duration) {
	t.Helper()
	if got := time.Unix(0, r.At).Sub(t0); got != d {
		t.Fatalf("%s appended at t0%+v, want t0%+v", what, got, d)
	}
}

// index returns the position of the first record match accepts, or -1.
func indexOf(recs []journalRecord, match func(journalRecord) bool) int {
	for i, r := range recs {
		if match(r) {
			return i
		}
	}
	return -1
}

// TestSD10_SecondSignalAtFiveThroughTheEngine is SD-10's variant: 30 s
// root, first SIGTERM at 0, second at 5. One handler cooperates, one
// ignores its cancellation. ReasonForcedShutdown is stamped 5; the
// cooperative windows end at 5.25 (DL-22 row 8); the owner cutoff is 6
// (DL-21); the drain's force deadline is max(min(5 + 2, 30), 6) = 7; the
// hard cutoff stays 30. The handler that never returns keeps the joins
// open until 7: the drain's force path is TimedOut and the report
// Incomplete (SD-31 c), 7 s after initiation.
func TestSD10_SecondSignalAtFiveThroughTheEngine(t *testing.T) {
	b := setup(t, forceTestOptions)
	endOnFailure(b)
	p := workProbe(t, b)
	coop := b.enqueue("work", msg{N: 1})
	stuck := b.enqueue("work", msg{N: 2})
	b.start()
	byJob := map[string]*api.Delivery{}
	for range 2 {
		d := <-p.started
		byJob[d.JobID()] = d
	}
	p.send(byJob[coop], func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}) // the other one waits for an action that comes only after the shutdown

	res := make(chan error, 1)
	if api.Signal(b.eng, syscall.SIGTERM) {
		t.Fatal("the first SIGTERM stopped the listener")
	}
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	b.awaitRecord("phase 2 started", phaseStarted("drain"))
	if d := byJob[coop].Deadline().At(); !d.Equal(t0.Add(28 * time.Second)) {
		t.Fatalf("SD-8: handler deadline %v, want min(P = 29, G = 28)", d.Sub(t0))
	}

	b.moveTo(t0, 5*time.Second)
	if !api.Signal(b.eng, syscall.SIGTERM) {
		t.Fatal("the second SIGTERM did not stop the listener")
	}
	// Force reaches both attempts at once (DL-18); the cooperating one
	// returns and settles at 5.
	b.awaitRecord("cooperating settlement", settledJob(coop))
	wantReason(t, byJob[coop], api.ReasonForcedShutdown, t0.Add(5*time.Second))
	wantReason(t, byJob[stuck], api.ReasonForcedShutdown, t0.Add(5*time.Second))

	b.moveTo(t0, ms(5249))
	b.noRecord("stuck settlement before C", settledJob(stuck))
	b.moveTo(t0, ms(5250)) // C: abandoned (DL-26)
	b.awaitRecord("stuck settlement", settledJob(stuck))
	b.moveTo(t0, 6*time.Second) // owner cutoff: nothing is left to revoke
	b.moveTo(t0, ms(6999))
	b.noRecord("phase 3 finished before its force deadline", phaseFinished("force"))
	b.clk.Set(t0.Add(7 * time.Second)) // the rest of the shutdown runs at 7
	err := <-res
	if !errors.Is(err, shutdown.ErrIncomplete) {
		t.Fatalf("shutdown: %v, want ErrIncomplete", err)
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.Incomplete || !rep.Forced || rep.Trigger != shutdown.TriggerSigterm ||
		rep.Elapsed != 7*time.Second || rep.Released != 2 || rep.Quarantined == 0 || rep.RuntimeJoined {
		t.Fatalf("report %+v", rep)
	}
	if a := rep.Actions[1]; a.Graceful != shutdown.OutcomeCancelledByForce || a.Forced != shutdown.OutcomeTimedOut {
		t.Fatalf("drain action %+v", a)
	}
	// SD-18: the drain is not reconciled (an attempt is quarantined), so
	// close evidence withholds the queues' close: its forced path times
	// out rather than completing.
	if a := rep.Actions[2]; a.Phase != shutdown.PhaseCloseEvidence || a.Forced != shutdown.OutcomeTimedOut {
		t.Fatalf("close evidence action %+v, want timed out", a)
	}

	p.send(byJob[stuck], func(context.Context) error { return nil }) // it returns, late
	b.open()
	recs := b.records()
	init := recs[indexOf(recs, isKind(record.KindShutdownInitiated))]
	body := init.Body.(*record.ShutdownInitiated)
	if body.Trigger != "sigterm" || body.StartAt != t0.UnixNano() ||
		body.GracefulAt != t0.Add(28*time.Second).UnixNano() || body.HardAt != t0.Add(30*time.Second).UnixNano() {
		t.Fatalf("SD-3: shutdown_initiated %+v", body)
	}
	force := recs[indexOf(recs, isKind(record.KindShutdownForceRequested))]
	if f := force.Body.(*record.ShutdownForceRequested); f.Trigger != "sigterm" {
		t.Fatalf("SD-22: %+v", f)
	}
	wantAppendedAt(t, "shutdown_force_requested", force, 5*time.Second)
	drain := recs[indexOf(recs, phaseFinished("drain"))]
	wantAppendedAt(t, "phase 2 finished", drain, 5*time.Second)
	if f := drain.Body.(*record.ShutdownPhaseFinished); f.Graceful != "cancelled_by_force" {
		t.Fatalf("phase 2 %+v", f)
	}
	c := recs[indexOf(recs, settledJob(coop))]
	wantAppendedAt(t, "cooperating settlement", c, 5*time.Second)
	wantOutcome(t, c, record.KindAttemptReleased, api.CodeHandlerError, "forced_shutdown", t0.Add(5*time.Second), true)
	s := recs[indexOf(recs, settledJob(stuck))]
	wantAppendedAt(t, "stuck settlement", s, ms(5250))
	wantOutcome(t, s, record.KindAttemptReleased, api.CodeDeliveryInterrupted, "forced_shutdown", t0.Add(5*time.Second), false)
	f := recs[indexOf(recs, phaseFinished("force"))]
	wantAppendedAt(t, "phase 3 finished", f, 7*time.Second)
	if body := f.Body.(*record.ShutdownPhaseFinished); body.Graceful != "cancelled_by_force" || body.Forced != "timed_out" {
		t.Fatalf("phase 3 %+v", body)
	}
	wantAppendedAt(t, "phase 4 started", recs[indexOf(recs, phaseStarted("close_evidence"))], 7*time.Second)
	if indexOf(recs, func(r journalRecord) bool {
		o := outcome(r)
		return o != nil && o.Code == api.CodeSettlementRevoked
	}) >= 0 {
		t.Fatal("DL-41: a token settled before the owner cutoff was revoked")
	}
}

// TestSD20_FirstSignalAfterContextCancelIsGraceful: Run's context ends
// first and initiates the shutdown, then the listener gets its first
// SIGTERM (the order a signal.NotifyContext context and Run's own
// listener can see one Ctrl-C in). The first signal is a graceful
// request that finds the shutdown running: it forces nothing and the
// listener keeps listening; only the second signal forces, with its own
// trigger. The listener used to count initiations, so this first SIGTERM
// forced the shutdown.
func TestSD20_FirstSignalAfterContextCancelIsGraceful(t *testing.T) {
	b := setup(t, nil)
	started, release := blocking(t, b.eng)
	b.enqueue("block", msg{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- b.eng.Run(ctx) }()
	<-started
	cancel()
	awaitInitiated(b.eng)
	if api.Signal(b.eng, syscall.SIGTERM) {
		t.Fatal("SD-20: the first SIGTERM stopped the listener")
	}
	if !api.Signal(b.eng, syscall.SIGTERM) {
		t.Fatal("SD-20: the second SIGTERM did not stop the listener")
	}
	close(release)
	if err := <-runErr; err != nil {
		t.Logf("Run = %v", err) // forced: not a success
	}
	b.open()
	var triggers []string
	for _, r := range b.records() {
		switch body := r.Body.(type) {
		case *record.ShutdownInitiated:
			triggers = append(triggers, "initiated:"+body.Trigger)
		case *record.ShutdownForceRequested:
			triggers = append(triggers, "force:"+body.Trigger)
		}
	}
	if want := []string{"initiated:context", "force:sigterm"}; !slices.Equal(triggers, want) {
		t.Fatalf("SD-20: shutdown triggers %q, want %q", triggers, want)
	}
}

// TestSD22_ForceDuringACloseIsJournaledAtOnce: force requested at 5
// while phase 5 waits for an owned resource's close appends
// shutdown_force_requested at 5, while the close still runs, and only
// then does the phase go on (SD-22, SD-10). It used to wait for the
// phase's next record, the close's end, so the journal (and qctl
// shutdowns) dated the force at 6 and showed the close ending under force
// before any force was recorded.
func TestSD22_ForceDuringACloseIsJournaledAtOnce(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	b := setup(t, func(o *api.Options) {
		o.ShutdownTimeout = 30 * time.Second
		o.OwnedResources = []api.OwnedResource{{Name: "db", CloseFunc: func(ctx context.Context) error {
			close(entered)
			<-release
			return nil
		}}}
	})
	endOnFailure(b)
	b.start()
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(context.Background()) }()
	<-entered
	b.moveTo(t0, 5*time.Second)
	if err := b.eng.Force(); err != nil {
		t.Fatal(err)
	}
	forced := b.awaitRecord("shutdown_force_requested", func(r journalRecord) bool {
		_, ok := r.Body.(*record.ShutdownForceRequested)
		return ok
	})
	wantAppendedAt(t, "force requested", forced, 5*time.Second)
	b.noRecord("phase 5 finished while its close runs", phaseFinished("release_resources"))
	b.moveTo(t0, 6*time.Second)
	close(release)
	if err := <-res; err != nil {
		t.Logf("Shutdown = %v", err) // forced: not a success
	}
	b.open()
	recs := b.records()
	if f, p := indexOf(recs, func(r journalRecord) bool { return r.Seq == forced.Seq }), indexOf(recs, phaseFinished("release_resources")); f < 0 || p < f {
		t.Fatalf("SD-22: force record at %d, phase 5 finished at %d", f, p)
	}
}

// TestDL41_SD24_CoordinatorReleasesAtTheOwnerCutoff: force at 5; the
// handler returns within its cooperative window but its attempt scope's
// close hangs. Its owner's authority ends at the owner cutoff 6: the
// shutdown coordinator revokes it there and settles the token with
// attempt_released, although the handler succeeded (success is not
// settlement, DL-38); then it waits for the close's real return (6.5),
// and only then does close evidence start (SD-24). The journal holds, in
// order: force requested (5), phase 3 started (5), attempt_released (6,
// by the coordinator), phase 3 finished (6.5), phase 4 started (6.5).
func TestDL41_SD24_CoordinatorReleasesAtTheOwnerCutoff(t *testing.T) {
	b, p, d, id, closing, release := runningForForce(t)
	p.send(d, func(ctx context.Context) error {
		if err := d.Scope().Register("conn", closer(func() error {
			close(closing)
			<-release // ignores everything
			return nil
		})); err != nil {
			return err
		}
		<-ctx.Done()
		return nil // a success inside the window
	})
	res := make(chan error, 1)
	api.Signal(b.eng, syscall.SIGTERM)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	b.awaitRecord("phase 2 started", phaseStarted("drain"))
	b.moveTo(t0, 5*time.Second)
	api.Signal(b.eng, syscall.SIGTERM)
	<-closing // the handler returned at 5; its scope's close hangs
	b.awaitRecord("phase 3 started", phaseStarted("force"))

	b.moveTo(t0, ms(5999))
	b.noRecord("settlement before the owner cutoff", settledJob(id))
	b.moveTo(t0, 6*time.Second)
	b.awaitRecord("release", settledJob(id))
	b.moveTo(t0, ms(6500))
	b.noRecord("phase 3 finished before the close returned", phaseFinished("force"))
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.ForcedCompleted || rep.Released != 1 || rep.Drained != 1 ||
		rep.Quarantined != 0 || !rep.DrainReconciled || !rep.RuntimeJoined {
		t.Fatalf("report %+v", rep)
	}

	b.open()
	recs := b.records()
	settled := b.settlements(id) // DL-38: exactly one per token
	if len(settled) != 1 {
		t.Fatalf("%d settlements", len(settled))
	}
	r := settled[0]
	wantAppendedAt(t, "attempt_released", r, 6*time.Second)
	wantOutcome(t, r, record.KindAttemptReleased, api.CodeSettlementRevoked, "forced_shutdown", t0.Add(5*time.Second), true)
	if o := outcome(r); o.Scope != "timed_out" || o.Cleanup != api.CodeScopeCleanupTimedOut || o.Execution != "returned" {
		t.Fatalf("audit of the revoked attempt %+v", *o)
	}
	wantInOrder(t, recs, []orderedRecord{
		{"shutdown_force_requested", isKind(record.KindShutdownForceRequested), 5 * time.Second},
		{"phase 3 started", phaseStarted("force"), 5 * time.Second},
		{"attempt_released", settledJob(id), 6 * time.Second},
		{"phase 3 finished", phaseFinished("force"), ms(6500)},
		{"phase 4 started", phaseStarted("close_evidence"), ms(6500)},
	})
	if f := recs[indexOf(recs, phaseFinished("force"))].Body.(*record.ShutdownPhaseFinished); f.Forced != "completed" {
		t.Fatalf("phase 3 %+v", f)
	}
	if j := b.status(id); j.Status != api.JobPending || j.Consumed != 0 {
		t.Fatalf("DL-6: the released job %+v", j)
	}
}

// revokedDuringCleanup drives the timeline of
// TestDL41_SD24_CoordinatorReleasesAtTheOwnerCutoff (30 s root, SIGTERM
// at 0, second SIGTERM at 5, forced owner cutoff 6) with one attempt
// whose handler returns at 4, before the force, with no reason, so that
// force does not reach it (DL-19) and its cleanup cutoff stays its own,
// min(H, Hr) (DL-30). Its attempt scope's close, which blocks until
// release is closed, is still running at the final abort at 6, which
// revokes its authority and stamps forced_shutdown at 6 but settles
// nothing yet: the close gets the final window cap_root(min(H, 6.1))
// (DL-30). It returns once the final abort is done, with the shutdown's
// result to come on res.
func revokedDuringCleanup(t *testing.T, opts ...api.JobOption) (b *testBundle, id string, release chan struct{}, res chan error) {
	t.Helper()
	b, p, d, id, closing, release := runningForForce(t, opts...)
	res = make(chan error, 1)
	api.Signal(b.eng, syscall.SIGTERM)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	b.awaitRecord("phase 2 started", phaseStarted("drain"))
	b.moveTo(t0, 4*time.Second)
	p.send(d, func(ctx context.Context) error {
		return d.Scope().Register("conn", closer(func() error {
			close(closing)
			<-release // ignores everything
			return nil
		}))
	})
	<-closing // the handler returned at 4; its scope's close hangs
	b.moveTo(t0, 5*time.Second)
	api.Signal(b.eng, syscall.SIGTERM)
	b.awaitRecord("phase 3 started", phaseStarted("force"))
	if _, _, ok := d.Cancellation().Reason(); ok {
		t.Fatal("DL-19: force reached an attempt whose handler had returned")
	}
	b.moveTo(t0, ms(5999))
	b.noRecord("settlement before the owner cutoff", settledJob(id))
	b.moveTo(t0, 6*time.Second)
	// The coordinator's final abort runs on its own goroutine at 6; it
	// stamps the reason first.
	wait, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	for _, _, ok := d.Cancellation().Reason(); !ok; _, _, ok = d.Cancellation().Reason() {
		if wait.Err() != nil {
			t.Fatal("no final abort at the owner cutoff")
		}
		runtime.Gosched()
	}
	if err := api.Sync(b.eng); err != nil {
		t.Fatal(err)
	}
	wantReason(t, d, api.ReasonForcedShutdown, t0.Add(6*time.Second))
	b.noRecord("DL-30: release at the final abort, before its window", settledJob(id))
	return b, id, release, res
}

// wantRevokedRelease checks the journal after a shutdown whose final
// abort released job id at t0+at: exactly one settlement (DL-38), the
// abort's attempt_released with the first reason, stamped by the abort,
// its scope outcome as it really ended, and the DL-41/SD-24 order:
// phase 3 started, the release, then phase 3 finished at t0+joined and
// phase 4 after it.
func wantRevokedRelease(b *testBundle, id string, at, joined time.Duration, scope, cleanup string) {
	t := b.t
	t.Helper()
	recs := b.records()
	settled := b.settlements(id)
	if len(settled) != 1 {
		t.Fatalf("%d settlements", len(settled))
	}
	r := settled[0]
	wantOutcome(t, r, record.KindAttemptReleased, api.CodeSettlementRevoked, "forced_shutdown", t0.Add(6*time.Second), true)
	if o := outcome(r); o.Scope != scope || o.Cleanup != cleanup || o.Execution != "returned" {
		t.Fatalf("audit of the revoked attempt %+v", *o)
	}
	if rel := r.Body.(*record.AttemptReleased); rel.AvailableAt != t0.Add(at).UnixNano() {
		t.Fatalf("released at t0%+v, want t0%+v", time.Unix(0, rel.AvailableAt).Sub(t0), at)
	}
	wantInOrder(t, recs, []orderedRecord{
		{"phase 3 started", phaseStarted("force"), 5 * time.Second},
		{"attempt_released", settledJob(id), at},
		{"phase 3 finished", phaseFinished("force"), joined},
		{"phase 4 started", phaseStarted("close_evidence"), joined},
	})
	if j := b.status(id); j.Status != api.JobPending || j.Consumed != 0 {
		t.Fatalf("DL-6: the released job %+v", j)
	}
}

// wantForcedCompleted checks the report of a forced shutdown whose one
// attempt was released by the final abort and whose goroutines all
// returned.
func wantForcedCompleted(t *testing.T, b *testBundle, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.ForcedCompleted || rep.Released != 1 || rep.Unresolved != 0 ||
		rep.Quarantined != 0 || !rep.DrainReconciled || !rep.RuntimeJoined {
		t.Fatalf("report %+v", rep)
	}
}

// TestDL30_DL41_RevokedCleanupFinishingInTheWindowIsReleasedThen: the
// scope close still running at the final abort at 6 returns at 6.05,
// inside the final window: the scope is recorded closed, and the
// coordinator's release lands at 6.05, after which the joins are proven
// and close evidence starts.
func TestDL30_DL41_RevokedCleanupFinishingInTheWindowIsReleasedThen(t *testing.T) {
	b, id, release, res := revokedDuringCleanup(t)
	b.moveTo(t0, ms(6050))
	b.noRecord("release before the close returned", settledJob(id))
	close(release)
	wantForcedCompleted(t, b, <-res)
	b.open()
	wantRevokedRelease(b, id, ms(6050), ms(6050), "closed", "")
}

// TestDL30_DL41_RevokedCleanupIgnoringCancellationIsCutAtTheWindowEnd: the
// scope close that ignores everything is timed out exactly at the end of
// the final window, 6 + 100 ms, where the release lands; phase 3 still
// waits for the close's real return (6.5) before close evidence starts.
func TestDL30_DL41_RevokedCleanupIgnoringCancellationIsCutAtTheWindowEnd(t *testing.T) {
	b, id, release, res := revokedDuringCleanup(t)
	b.moveTo(t0, ms(6099.999))
	b.noRecord("release before the window's end", settledJob(id))
	b.moveTo(t0, ms(6100))
	b.awaitRecord("release", settledJob(id))
	b.moveTo(t0, ms(6500))
	b.noRecord("phase 3 finished before the close returned", phaseFinished("force"))
	close(release)
	wantForcedCompleted(t, b, <-res)
	b.open()
	wantRevokedRelease(b, id, ms(6100), ms(6500), "timed_out", api.CodeScopeCleanupTimedOut)
}

// TestDL30_DL41_RevokedWindowEndsAtH: with the job's own H = 6.04,
// earlier than the final abort + 100 ms, the window ends at H: the close
// is timed out and the release lands at 6.04.
func TestDL30_DL41_RevokedWindowEndsAtH(t *testing.T) {
	b, id, release, res := revokedDuringCleanup(t, api.DeliveryTimeout(ms(6040)))
	b.moveTo(t0, ms(6039.999))
	b.noRecord("release before H", settledJob(id))
	b.moveTo(t0, ms(6040))
	b.awaitRecord("release", settledJob(id))
	b.moveTo(t0, ms(6500))
	close(release)
	wantForcedCompleted(t, b, <-res)
	b.open()
	wantRevokedRelease(b, id, ms(6040), ms(6500), "timed_out", api.CodeScopeCleanupTimedOut)
}

// orderedRecord is one record wantInOrder looks for: what names it,
// match finds it, at is when it must have been appended.
type orderedRecord struct {
	what  string
	match func(journalRecord) bool
	at    time.Duration
}

// wantInOrder checks that each record of order is in recs, after the one
// before it, appended at its instant (SD-24).
func wantInOrder(t *testing.T, recs []journalRecord, order []orderedRecord) {
	t.Helper()
	last := -1
	for _, o := range order {
		i := indexOf(recs, o.match)
		if i <= last {
			t.Fatalf("SD-24: %s at position %d, after position %d", o.what, i, last)
		}
		wantAppendedAt(t, o.what, recs[i], o.at)
		last = i
	}
}
