package api_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/shutdown"
)

// foldRecords replays recs from an empty state.
func foldRecords(t *testing.T, recs []journalRecord) *replay.State {
	t.Helper()
	st := replay.New()
	for _, r := range recs {
		if err := replay.Apply(st, r); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	return st
}

// awaitInitiated waits until a shutdown was initiated on e.
func awaitInitiated(e *api.Engine) {
	for !e.Snapshot().Shutdown.Initiated {
		runtime.Gosched()
	}
}

// blocking registers a handler "block" that reports its delivery and
// returns only once release is closed, ignoring its context.
func blocking(t *testing.T, e *api.Engine) (started chan *api.Delivery, release chan struct{}) {
	t.Helper()
	started, release = make(chan *api.Delivery, 4), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	err := api.Handle(e, "block", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- d
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return started, release
}

// shutdownBlocked runs a "block" job (see blocking), and once it runs
// starts a shutdown on a goroutine: res gets the shutdown's result.
func shutdownBlocked(b *testBundle) (d *api.Delivery, release chan struct{}, res chan error) {
	b.t.Helper()
	started, release := blocking(b.t, b.eng)
	b.enqueue("block", msg{})
	b.start()
	d = <-started
	res = make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	return d, release, res
}

func TestSD11_SD17_SD33_GracefulShutdownReportIsJournaled(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "ok", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	b.enqueue("ok", msg{N: 1})
	b.start()
	b.idle()
	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	rep := b.eng.ShutdownReport()
	if rep == nil || rep.Completion != shutdown.GracefulCompleted || !rep.IsSuccess() || rep.Trigger != shutdown.TriggerAPI {
		t.Fatalf("report %+v", rep)
	}
	if snap := b.eng.Snapshot(); !snap.Shutdown.Completed || snap.Lifecycle != api.Stopped || snap.Shutdown.Report.Completion != rep.Completion {
		t.Fatalf("snapshot %+v", snap)
	}
	// Every observer gets the same result; Close delegates.
	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}

	b.open()
	recs := b.records()
	// SD-11: initiated, then each phase started and finished in order, the
	// report between phase 6's two records.
	var got []string
	for _, r := range recs {
		switch body := r.Body.(type) {
		case *record.ShutdownInitiated:
			got = append(got, "initiated:"+body.Trigger)
		case *record.ShutdownPhaseStarted:
			got = append(got, "start:"+body.Name)
		case *record.ShutdownPhaseFinished:
			got = append(got, "finish:"+body.Name+":"+body.Graceful+body.Completion)
		case *record.ShutdownReport:
			got = append(got, "report:"+body.Completion)
		case *record.ShutdownForceRequested:
			got = append(got, "force")
		case *record.Debug:
			t.Fatalf("unexpected debug record %+v", body)
		}
	}
	want := []string{"initiated:api"}
	for p := shutdown.PhaseCloseAdmission; p <= shutdown.PhasePublishReport; p++ {
		want = append(want, "start:"+p.String())
		if p == shutdown.PhasePublishReport {
			// Phase 6 also records the report's completion (SD-11's table).
			want = append(want, "report:graceful_completed", "finish:"+p.String()+":completedgraceful_completed")
			continue
		}
		want = append(want, "finish:"+p.String()+":completed")
	}
	if len(got) != len(want) {
		t.Fatalf("shutdown records\n got %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shutdown record %d: got %s, want %s (all: %v)", i, got[i], want[i], got)
		}
	}
	// SD-33: the previous run's report, read back from the journal, is the
	// one the engine returned.
	st := foldRecords(t, recs)
	if len(st.Runs) != 2 {
		t.Fatalf("%d runs", len(st.Runs))
	}
	jr := st.Runs[0].Shutdown.Report
	if jr == nil {
		t.Fatal("no journaled report")
	}
	if jr.Completion != rep.Completion.String() || jr.Trigger != rep.Trigger.String() ||
		jr.InitiatedAt != rep.InitiatedAt.UnixNano() || jr.BudgetNanos != int64(rep.Budget) ||
		jr.ElapsedNanos != int64(rep.Elapsed) || jr.Forced != rep.Forced ||
		jr.DrainReconciled != rep.DrainReconciled || jr.CloseReconciled != rep.CloseReconciled ||
		jr.RuntimeJoined != rep.RuntimeJoined || len(jr.ActionPhases) != len(rep.Actions) ||
		jr.Quarantined != int64(rep.Quarantined) || jr.Released != int64(rep.Released) {
		t.Fatalf("journaled report %+v != returned %+v", jr, rep)
	}
	if st.Runs[1].Shutdown.Initiated != nil {
		t.Fatal("the new run shows a shutdown")
	}
}

func TestSD12_EnqueueAfterInitiationIsRefused(t *testing.T) {
	b := setup(t, nil)
	_, release, res := shutdownBlocked(b)
	awaitInitiated(b.eng)
	if _, err := b.eng.Enqueue(b.ctx, "block", msg{}); !errors.Is(err, api.ErrShuttingDown) {
		t.Fatalf("enqueue after initiation: %v, want ErrShuttingDown", err)
	}
	if l := b.eng.Lifecycle(); l != api.Draining {
		t.Fatalf("lifecycle %v, want draining", l)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if rep := b.eng.ShutdownReport(); rep.Completion != shutdown.GracefulCompleted || rep.Drained != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// TestSD12_PhaseFourCutsOffControlWhenItRuns: pause, cancel and bury are
// accepted until phase 4 starts. Its action refuses them itself, also when
// its record has not been appended yet (it waits behind a record still
// being appended at Hr), so none is accepted after phase 4 took its
// evidence.
func TestSD12_PhaseFourCutsOffControlWhenItRuns(t *testing.T) {
	b := setup(t, nil)
	b.start()
	if err := b.eng.PauseQueue(b.ctx, "a"); err != nil {
		t.Fatalf("pause before phase 4: %v", err)
	}
	if err := api.CloseEvidence(b.eng); err != nil {
		t.Fatalf("phase 4's action: %v", err)
	}
	if err := b.eng.PauseQueue(b.ctx, "b"); !errors.Is(err, api.ErrShuttingDown) {
		t.Fatalf("pause after phase 4's action: %v, want ErrShuttingDown", err)
	}
}

func TestSD22_ForceBeforeInitiationIsTyped(t *testing.T) {
	b := setup(t, nil)
	if err := b.eng.Force(); !errors.Is(err, shutdown.ErrNotInitiated) {
		t.Fatalf("force before initiation: %v", err)
	}
	if b.eng.ShutdownReport() != nil {
		t.Fatal("report before any shutdown")
	}
}

// TestDL18_ForceReturnsOnceAttemptsHaveTheirReason: Force publishes
// ReasonForcedShutdown synchronously (DL-18): when it returns, a running
// attempt already has it. It used to return as soon as the request was
// noted, before the coordinator told the attempts.
func TestDL18_ForceReturnsOnceAttemptsHaveTheirReason(t *testing.T) {
	b := setup(t, nil)
	d, release, res := shutdownBlocked(b)
	<-b.eng.ShutdownStarted()
	if err := b.eng.Force(); err != nil {
		t.Fatal(err)
	}
	if r, at, ok := d.Cancellation().Reason(); !ok || r != api.ReasonForcedShutdown || !at.Equal(t0) {
		t.Fatalf("DL-18: after Force the attempt has reason %v at %v (recorded %v), want forced_shutdown at %v", r, at, ok, t0)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestSD37_NeverYieldingHandlerIsIncomplete(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 4 * time.Second })
	d, _, res := shutdownBlocked(b)
	awaitInitiated(b.eng)
	b.clk.Advance(5 * time.Second) // past Hr = 4 s
	err := <-res
	if !errors.Is(err, shutdown.ErrIncomplete) {
		t.Fatalf("shutdown: %v, want ErrIncomplete", err)
	}
	rep := b.eng.ShutdownReport()
	if rep == nil || rep.IsSuccess() || rep.Completion != shutdown.Incomplete || rep.Quarantined == 0 || rep.RuntimeJoined {
		t.Fatalf("report %+v", rep)
	}
	// The same result again, and Close keeps its contract.
	if err2 := b.eng.Shutdown(b.ctx); err2 != err {
		t.Fatalf("second shutdown: %v, want %v", err2, err)
	}
	// The attempt was left without a settlement (the clock passed Hr at
	// once): qctl says so, and its jobs listing names the job.
	var out, errb bytes.Buffer
	qctl.Main(b.ctx, []string{"-d", b.opts.Dir, "shutdowns"}, qctl.Env{Stdout: &out, Stderr: &errb, FS: b.fs, Now: b.clk.Now()})
	if !strings.Contains(out.String(), "1 attempt left without a settlement (unresolved)") {
		t.Fatalf("qctl shutdowns does not say the attempt was left unsettled:\n%s%s", out.String(), errb.String())
	}
	// The shutdown's debug records name the job whose handler had not
	// returned (SD-37).
	_, diags, _ := strings.Cut(out.String(), "diagnostics (debug records)")
	if !strings.Contains(diags, d.JobID()) || !strings.Contains(diags, shutdown.CodeHandlerNotReturned) {
		t.Fatalf("qctl shutdowns does not name job %s among the shutdown's diagnostics:\n%s", d.JobID(), out.String())
	}
	out.Reset()
	qctl.Main(b.ctx, []string{"-d", b.opts.Dir, "jobs", "--status", "processing"}, qctl.Env{Stdout: &out, Stderr: &errb, FS: b.fs, Now: b.clk.Now()})
	if !strings.Contains(out.String(), d.JobID()) {
		t.Fatalf("qctl jobs --status processing does not name job %s:\n%s%s", d.JobID(), out.String(), errb.String())
	}
}

// TestSD37_QctlNamesTheAttemptsAShutdownAbandoned: the report of a
// shutdown whose handler never returned only counts it; qctl shutdowns
// names its job, from the settlement that abandoned it (DL-26).
func TestSD37_QctlNamesTheAttemptsAShutdownAbandoned(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 30 * time.Second })
	d, release, res := shutdownBlocked(b)
	defer close(release)
	awaitInitiated(b.eng)
	// The clock moves only once shutdown_initiated is journaled: moved
	// past Hr before, it cuts that append short and nothing is journaled.
	for countKind(b.records(), record.KindShutdownInitiated) == 0 {
		runtime.Gosched()
	}
	for range 310 {
		b.clk.Advance(100 * time.Millisecond)
		_ = api.Sync(b.eng) // fails once the loop has stopped
	}
	if err := <-res; !errors.Is(err, shutdown.ErrIncomplete) {
		t.Fatalf("shutdown: %v, want ErrIncomplete", err)
	}
	var out, errb bytes.Buffer
	code := qctl.Main(b.ctx, []string{"-d", b.opts.Dir, "shutdowns"}, qctl.Env{Stdout: &out, Stderr: &errb, FS: b.fs, Now: b.clk.Now()})
	_, abandoned, _ := strings.Cut(out.String(), "abandoned attempts:")
	if code != qctl.ExitFindings || !strings.Contains(abandoned, d.JobID()) {
		t.Fatalf("qctl shutdowns: exit %d, want %d naming job %s as abandoned:\n%s%s", code, qctl.ExitFindings, d.JobID(), out.String(), errb.String())
	}
}

// TestSD18_WithheldQueuesAreTheCoordinatorsWithheld: close evidence's
// error for queues it withholds (the drain not reconciled) matches
// shutdown.ErrWithheld, so that the close action ends TimedOut, as a
// withheld action does (SD-18), not Failed (SD-28).
func TestSD18_WithheldQueuesAreTheCoordinatorsWithheld(t *testing.T) {
	if !errors.Is(api.ErrQueuesWithheld, shutdown.ErrWithheld) {
		t.Fatalf("%v does not match shutdown.ErrWithheld", api.ErrQueuesWithheld)
	}
}

func TestSD10_ForcedAtGWithShutdownDeadline(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 30 * time.Second })
	d, release, res := shutdownBlocked(b)
	awaitInitiated(b.eng)
	b.clk.Advance(28 * time.Second) // G = 30 − min(30/4, 2) = 28 s
	<-d.Cancellation().Done()
	wantReason(t, d, api.ReasonShutdownDeadline, t0.Add(28*time.Second))
	close(release)
	b.clk.Advance(2 * time.Second) // Hr
	<-res
	if rep := b.eng.ShutdownReport(); rep == nil || rep.Completion == shutdown.GracefulCompleted {
		t.Fatalf("report %+v", rep)
	}
}

// interruptedShutdown returns a crash image of b's files taken while a
// shutdown is under way (shutdown_initiated appended, a job still
// running), then lets that shutdown finish on b's own files.
func interruptedShutdown(b *testBundle) *vfs.MemFS {
	b.t.Helper()
	_, release, res := shutdownBlocked(b)
	awaitInitiated(b.eng)
	for countKind(b.records(), record.KindShutdownInitiated) == 0 {
		runtime.Gosched()
	}
	img := b.fs.CrashClone(vfs.CrashCloneCfg{})
	close(release)
	if err := <-res; err != nil {
		b.t.Fatalf("shutdown: %v", err)
	}
	return img
}

// openRecords opens an engine with opts, closed when the test ends, and
// returns it with its journal's records.
func openRecords(t *testing.T, opts api.Options) (*api.Engine, []journalRecord) {
	t.Helper()
	eng, err := api.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	var recs []journalRecord
	it := api.JournalOf(eng).Scan(1, ^uint64(0))
	for it.Next() {
		recs = append(recs, it.Record())
	}
	if err := it.Close(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	return eng, recs
}

func TestSD36_InterruptedShutdownIsNotedAtRecovery(t *testing.T) {
	b := setup(t, nil)
	opts := b.opts
	opts.FS = interruptedShutdown(b) // the process died mid-shutdown
	eng, recs := openRecords(t, opts)
	st := foldRecords(t, recs)
	if len(st.Runs) != 2 || st.Runs[0].Shutdown.Initiated == nil || st.Runs[0].Shutdown.Report != nil {
		t.Fatalf("runs %+v", st.Runs)
	}
	last := recs[len(recs)-1]
	dbg, ok := last.Body.(*record.Debug)
	if !ok || dbg.Code != api.CodeShutdownInterrupted || dbg.Subject != st.Runs[0].RunID {
		t.Fatalf("last record %+v, want the SD-36 debug record", last.Body)
	}
	if eng.Stats().Recovered != 1 {
		t.Fatalf("stats %+v", eng.Stats())
	}
}

// TestSD36_NoteIsInRunStartedsAppend: the SD-36 debug record goes in the
// same append as the recovering run's run_started. A crash right after
// that append leaves both or neither: the run after it would see the
// recovering run, whose shutdown is not initiated, and never note the
// interrupted one.
func TestSD36_NoteIsInRunStartedsAppend(t *testing.T) {
	b := setup(t, nil)
	interrupted := interruptedShutdown(b)
	// The next run dies right after its first append, run_started's.
	var afterRecovery *vfs.MemFS
	api.SetAfterAppendHook(func([]uint64) {
		if afterRecovery == nil {
			afterRecovery = interrupted.CrashClone(vfs.CrashCloneCfg{})
		}
	})
	opts := b.opts
	opts.FS = interrupted
	eng, err := api.Open(b.ctx, opts)
	api.SetAfterAppendHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	eng.Close(b.ctx)
	if afterRecovery == nil {
		t.Fatal("no append at recovery")
	}
	opts.FS = afterRecovery
	_, recs := openRecords(t, opts)
	st := foldRecords(t, recs)
	if len(st.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(st.Runs))
	}
	var noted []string
	for _, d := range wfBodies[*record.Debug](recs) {
		if d.Code == api.CodeShutdownInterrupted {
			noted = append(noted, d.Subject)
		}
	}
	if len(noted) != 1 || noted[0] != st.Runs[0].RunID {
		t.Fatalf("SD-36: interrupted shutdowns noted for runs %v, want [%s] (runs %+v)", noted, st.Runs[0].RunID, st.Runs)
	}
}

// TestSD34_LiveAndReadyFollowTheLifecycle walks an engine through the
// states of SD-34's table and checks the Live and Ready columns, through
// the methods and through Snapshot.
func TestSD34_LiveAndReadyFollowTheLifecycle(t *testing.T) {
	b := setup(t, nil)
	want := func(stage string, lc api.Lifecycle, live, ready bool) {
		t.Helper()
		s := b.eng.Snapshot()
		if s.Lifecycle != lc || s.Live != live || s.Ready != ready ||
			b.eng.Lifecycle() != lc || b.eng.Live() != live || b.eng.Ready() != ready {
			t.Fatalf("%s: snapshot %v live %t ready %t, methods %v live %t ready %t; want %v live %t ready %t",
				stage, s.Lifecycle, s.Live, s.Ready, b.eng.Lifecycle(), b.eng.Live(), b.eng.Ready(), lc, live, ready)
		}
	}
	// Open, not started: admission is open but nothing starts.
	want("open", api.Ready, true, false)
	started, release := blocking(t, b.eng)
	b.enqueue("block", msg{})
	b.start()
	want("started", api.Ready, true, true)
	<-started
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	awaitInitiated(b.eng)
	want("draining", api.Draining, true, false)
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	want("stopped", api.Stopped, false, false)
}

// TestSD34_LifecycleColumns pins the Live column for every state.
func TestSD34_LifecycleColumns(t *testing.T) {
	for lc, live := range map[api.Lifecycle]bool{
		api.Starting: true, api.Recovering: true, api.Ready: true, api.Draining: true,
		api.Stopped: false, api.Failed: false,
	} {
		if lc.Live() != live {
			t.Errorf("%v.Live() = %t, want %t", lc, lc.Live(), live)
		}
	}
}

// phaseRecords returns the journal's records from the start of the last
// shutdown (its shutdown_initiated) to its report, reopening b's engine to
// read them.
func phaseRecords(b *testBundle) []journalRecord {
	b.t.Helper()
	b.open()
	recs := b.records()
	start := -1
	for i, r := range recs {
		if r.Kind() == record.KindShutdownInitiated {
			start = i
		}
	}
	if start < 0 {
		b.t.Fatal("no shutdown_initiated")
	}
	for i := start; i < len(recs); i++ {
		if recs[i].Kind() == record.KindShutdownReport {
			return recs[start : i+1]
		}
	}
	b.t.Fatal("no shutdown_report")
	return nil
}

// TestSD12_NoAttemptStartsAfterPhaseOneStarts: a job that comes due right
// after phase 1's shutdown_phase_started, before the phase has acted, is
// not started: the dispatcher stops before the record (SD-12, §8).
func TestSD12_NoAttemptStartsAfterPhaseOneStarts(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "ok", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := b.enqueue("ok", msg{N: 1}, api.Delay(time.Second))
	api.SetPhaseStartedHook(func(phase int) {
		if phase == int(shutdown.PhaseCloseAdmission) {
			b.clk.Advance(time.Second) // the job comes due in the window
			_ = api.Sync(b.eng)
		}
	})
	defer api.SetPhaseStartedHook(nil)
	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	api.SetPhaseStartedHook(nil)
	phase1 := false
	for _, r := range phaseRecords(b) {
		if p, ok := r.Body.(*record.ShutdownPhaseStarted); ok && p.Phase == int8(shutdown.PhaseCloseAdmission) {
			phase1 = true
		}
		if r.Kind() == record.KindAttemptStarted && phase1 {
			t.Fatalf("SD-12: attempt_started at seq %d, after phase 1 started", r.Seq)
		}
	}
	if !phase1 {
		t.Fatal("no phase 1 record")
	}
	if j := b.status(id); j.Status != api.JobPending || j.Attempts != 0 {
		t.Fatalf("SD-12: the job that came due during the shutdown is %s after %d attempts, want pending", j.Status, j.Attempts)
	}
}

// TestSD12_NoAttemptStartsOnceShutdownStartedIsClosed: admission closes
// with the initiation (ShutdownStarted), and so does the dispatcher. A slot
// that frees between the initiation and phase 1 used to start the next
// ready job, under a budget its attempt_started did not cap by the root
// (DL-7); a job released by the drain was started again the same way.
func TestSD12_NoAttemptStartsOnceShutdownStartedIsClosed(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	started, release := blocking(t, b.eng)
	var rec recorder
	if err := api.Handle(b.eng, "ok", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	first := b.enqueue("block", msg{N: 1})
	next := b.enqueue("ok", msg{N: 2}) // ready, waiting for the one slot
	b.start()
	<-started
	api.SetInitiatedHook(func() {
		select {
		case <-b.eng.ShutdownStarted():
		default:
			t.Error("the hook runs before ShutdownStarted is closed")
		}
		close(release) // the slot frees in the window before phase 1
		for b.status(first).Status != api.JobCompleted {
			runtime.Gosched()
		}
		_ = api.Sync(b.eng)
	})
	defer api.SetInitiatedHook(nil)
	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	api.SetInitiatedHook(nil)
	b.open() // the journal's view, without starting
	if j := b.status(next); j.Status != api.JobPending || j.Attempts != 0 || len(rec.get()) != 0 {
		t.Fatalf("SD-12: the ready job is %s after %d attempts (ran %v), want pending and never started", j.Status, j.Attempts, rec.get())
	}
}

// TestSD12_PauseCancelBuryUntilPhaseFour: during a shutdown, cancel (like
// pause, bury and queue pause) is accepted until phase 4 starts; from then
// on all four are refused with ErrShuttingDown, appending nothing (SD-12).
func TestSD12_PauseCancelBuryUntilPhaseFour(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "ok", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go"))
	b.start()
	early, late := wfDispatch(b, "wait", api.State{}), wfDispatch(b, "wait", api.State{})
	b.idle()
	job := b.enqueue("ok", msg{}, api.Delay(time.Hour)) // pending, never due here
	var accepted error
	var refused []error
	api.SetPhaseStartedHook(func(phase int) {
		switch phase {
		case int(shutdown.PhaseDrain):
			accepted = b.eng.CancelWorkflow(b.ctx, early)
		case int(shutdown.PhaseCloseEvidence):
			refused = append(refused,
				b.eng.PauseWorkflow(b.ctx, late),
				b.eng.CancelWorkflow(b.ctx, late),
				b.eng.Bury(b.ctx, job),
				b.eng.PauseQueue(b.ctx, "default"))
		}
	})
	defer api.SetPhaseStartedHook(nil)
	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	api.SetPhaseStartedHook(nil)
	if accepted != nil {
		t.Fatalf("SD-12: cancel during phase 2: %v", accepted)
	}
	if len(refused) != 4 {
		t.Fatalf("phase 4 hook ran %d calls", len(refused))
	}
	for i, err := range refused {
		if !errors.Is(err, api.ErrShuttingDown) {
			t.Errorf("SD-12: call %d in phase 4: %v, want ErrShuttingDown", i, err)
		}
	}
	recs := phaseRecords(b)
	cancelled := 0
	for _, r := range recs {
		switch r.Kind() {
		case record.KindWorkflowCancelled:
			cancelled++
		case record.KindWorkflowPaused, record.KindJobBuried, record.KindQueuePaused:
			t.Errorf("SD-12: %s at seq %d during the shutdown", r.Kind(), r.Seq)
		}
	}
	if cancelled != 1 {
		t.Fatalf("SD-12: %d workflow_cancelled during the shutdown, want the one of phase 2", cancelled)
	}
	if info := wfWant(b, late, api.WorkflowWaitingSignal); info.ID != late {
		t.Fatal(info)
	}
	b.wantStatus(job, api.JobPending)
}

// SD-21: Close with an ended ctx abandons the engine without a shutdown;
// Shutdown then has no report to return and says so with ErrClosed rather
// than nil, which reads as a confirmed success. Close keeps its first
// result.
func TestSD21_ShutdownAfterAbandonIsErrClosed(t *testing.T) {
	b := setup(t, nil)
	b.start()
	abandonLikeACrash(b)
	if err := b.eng.Shutdown(b.ctx); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("Shutdown after an abandon: %v, want ErrClosed", err)
	}
	if r := b.eng.ShutdownReport(); r != nil {
		t.Fatalf("report %+v after an abandon", r)
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("Close again: %v, want its first result, nil", err)
	}
}

// A call that reads the journal while a shutdown closes it, before the
// engine is Stopped, fails as the same call a moment later would: with
// ErrClosed, not only with the journal's own error. The journal is closed
// directly here, which is that window held open.
func TestClosedJournalUnderACallIsErrClosed(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := b.enqueue("noop", msg{N: 1})
	b.idle()
	b.wantStatus(id, api.JobCompleted) // read from the terminal index
	if err := api.JournalOf(b.eng).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Status(b.ctx, id); !errors.Is(err, api.ErrClosed) || !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("Status: %v, want ErrClosed with the journal's cause", err)
	}
	if err := b.eng.Checkpoint(b.t.TempDir() + "/cp"); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("Checkpoint: %v, want ErrClosed", err)
	}
}

// TestSD23_CommitFailureForcesAttemptsWithRuntimeFailure: a failed commit
// forces running attempts with ReasonRuntimeFailure, not a cancellation
// (SD-23, DL-18), and an attempt's goroutine leaves the quarantine count
// when it returns (SD-25): the loop that would have observed its return is
// gone, so the goroutine reports it. It used to stay counted for good.
func TestSD23_CommitFailureForcesAttemptsWithRuntimeFailure(t *testing.T) {
	var failing atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return errorfs.ErrInjected
		}
		return nil
	}))
	b := setup(t, func(o *api.Options) { o.FS = fs })
	started, reasons := make(chan struct{}, 1), make(chan api.Reason, 1)
	if err := api.Handle(b.eng, "wait", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- struct{}{}
		<-ctx.Done()
		r, _, _ := d.Cancellation().Reason()
		reasons <- r
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	b.enqueue("wait", msg{})
	b.start()
	<-started
	failing.Store(true)
	if _, err := b.eng.Enqueue(b.ctx, "wait", msg{N: 2}); !errors.Is(err, api.ErrFailStop) {
		t.Fatalf("enqueue on a failing journal: %v, want ErrFailStop", err)
	}
	if r := <-reasons; r != api.ReasonRuntimeFailure {
		t.Fatalf("SD-23: the running attempt was forced with %v, want %v", r, api.ReasonRuntimeFailure)
	}
	// The handler returns right after reporting its reason.
	for i := 0; i < 1_000_000 && api.QuarantineOf(b.eng).Executions != 0; i++ {
		runtime.Gosched()
	}
	if q := api.QuarantineOf(b.eng); q.Executions != 0 {
		t.Fatalf("SD-25: %d executions still quarantined after the handler returned", q.Executions)
	}
	if err := b.eng.Shutdown(b.ctx); !errors.Is(err, api.ErrFailStop) {
		t.Fatalf("shutdown after a fail-stop: %v", err)
	}
	if rep := b.eng.ShutdownReport(); rep == nil || rep.Trigger != shutdown.TriggerRuntimeFailure || rep.FailureCode != "JOURNAL_COMMIT_FAILED" {
		t.Fatalf("SD-23: report %+v", rep)
	}
}

// TestDL42_CloseWhoseCtxEndsReleasesWhatRuns: a Close whose ctx ends while
// a shutdown drains releases the attempts still running (DL-41, DL-42)
// before it cuts the root: they consume nothing (DL-6), and a job on its
// last attempt is delivered again. Cutting the root first left them
// unsettled, consumed as after a crash (DL-44), and such a job was buried
// at the next Open.
// cooperating registers "coop", a handler that reports each delivery on
// started and returns its ctx's error once the ctx ends.
func cooperating(t *testing.T, e *api.Engine) (started chan *api.Delivery) {
	t.Helper()
	started = make(chan *api.Delivery, 1)
	if err := api.Handle(e, "coop", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- d
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	return started
}

func TestDL42_CloseWhoseCtxEndsReleasesWhatRuns(t *testing.T) {
	b := setup(t, nil)
	started := cooperating(t, b.eng)
	id := b.enqueue("coop", msg{}, api.MaxAttempts(1))
	b.start()
	<-started
	go b.eng.Shutdown(context.Background())
	<-b.eng.ShutdownStarted()
	ended, cancel := context.WithCancel(b.ctx)
	cancel()
	if err := b.eng.Close(ended); err != nil {
		t.Fatalf("close: %v", err)
	}
	if rep := b.eng.ShutdownReport(); rep == nil || rep.Released != 1 || rep.Unresolved != 0 {
		t.Fatalf("DL-42: report %+v, want the attempt released", rep)
	}
	b.open()
	if j := b.status(id); j.Status != api.JobPending || j.Consumed != 0 || j.Attempts != 1 {
		t.Fatalf("DL-6: after the reopen the job is %s, consumed %d of %d attempts (%s), want pending and nothing consumed",
			j.Status, j.Consumed, j.Attempts, j.LastCode)
	}
}

// SD-8, DL-6, DL-18: a shutdown with a budget under 4 s cuts a running
// attempt at its P recomputed under Hr (DL-10), before G. That cutoff is
// the shutdown's: the attempt gets ReasonShutdownDeadline and is
// released, not charged a delivery timeout, so a job on its last attempt
// is not buried by a graceful shutdown.
func TestSD8_ShortRootReleasesTheAttemptItCuts(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 2 * time.Second })
	started := cooperating(t, b.eng)
	id := b.enqueue("coop", msg{}, api.MaxAttempts(1))
	b.start()
	d := <-started
	b.clk.Advance(10 * time.Second) // S = 0, P = 29 s
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	awaitInitiated(b.eng)
	// Hr = 12 s, G = 12 − min(2/4, 2) = 11.5 s; capped, the attempt's
	// P = 12 − min(12/4, 1) = 11 s.
	b.clk.Advance(time.Second)
	<-d.Cancellation().Done()
	wantReason(t, d, api.ReasonShutdownDeadline, t0.Add(11*time.Second))
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	b.open() // not started: the journal as the shutdown left it
	if j := b.status(id); j.Status != api.JobPending || j.Consumed != 0 || j.Attempts != 1 {
		t.Fatalf("DL-6: after the shutdown the job is %s, consumed %d of %d attempts (%s), want pending and nothing consumed",
			j.Status, j.Consumed, j.Attempts, j.LastCode)
	}
}

// TestSD37_AShutdownNamesAHandlerAbandonedBeforeIt: a handler abandoned
// at its delivery timeout (DL-26) before the shutdown, and still not
// returned, makes the shutdown Incomplete (SD-37). The attempt was
// settled long before, so only the shutdown's debug record names its job.
func TestSD37_AShutdownNamesAHandlerAbandonedBeforeIt(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.ShutdownTimeout = 4 * time.Second })
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	if err := api.Handle(b.eng, "stuck", func(ctx context.Context, d *api.Delivery, in msg) error {
		close(started)
		<-release // ignores ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("stuck", msg{}, api.DeliveryTimeout(time.Second), api.MaxAttempts(1))
	b.start()
	<-started
	for range 30 {
		b.clk.Advance(100 * time.Millisecond)
		if err := api.Sync(b.eng); err != nil {
			t.Fatal(err)
		}
	}
	if j, err := b.eng.AwaitJob(b.ctx, id); err != nil || j.Status != api.JobBuried || j.LastCode != "DELIVERY_TIMEOUT" {
		t.Fatalf("job %+v, %v; want it buried by its delivery timeout", j, err)
	}
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	awaitInitiated(b.eng)
	b.clk.Advance(5 * time.Second)
	if err := <-res; !errors.Is(err, shutdown.ErrIncomplete) {
		t.Fatalf("shutdown: %v, want ErrIncomplete", err)
	}
	var out, errb bytes.Buffer
	qctl.Main(b.ctx, []string{"-d", b.opts.Dir, "shutdowns"}, qctl.Env{Stdout: &out, Stderr: &errb, FS: b.fs, Now: b.clk.Now()})
	_, diags, _ := strings.Cut(out.String(), "diagnostics (debug records)")
	if !strings.Contains(diags, id) || !strings.Contains(diags, shutdown.CodeHandlerNotReturned) {
		t.Fatalf("qctl shutdowns does not name job %s among the shutdown's diagnostics:\n%s%s", id, out.String(), errb.String())
	}
}
