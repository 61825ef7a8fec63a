package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

var errInjected = errors.New("injected startup failure")

// failStartupAt makes the startup step named step fail, for this test.
func failStartupAt(t *testing.T, step string) {
	t.Cleanup(func() { api.SetStartupHook(nil) })
	api.SetStartupHook(func(s string) error {
		if s == step {
			return errInjected
		}
		return nil
	})
}

// wantRollback checks the error of a startup that failed at step: a
// *StartupError carrying the failure and the report of a rollback run as a
// shutdown with trigger startup_failure, anchored at the failure with the
// whole ShutdownTimeout (SD-35), that disposed the owned resources.
func wantRollback(t *testing.T, err error, step string, log *closeLog) *shutdown.Report {
	t.Helper()
	var se *api.StartupError
	if !errors.As(err, &se) || se.Step != step || !errors.Is(err, errInjected) {
		t.Fatalf("error %v, want a *StartupError at %s wrapping the failure", err, step)
	}
	rep := se.Report
	if rep == nil || rep.Trigger != shutdown.TriggerStartupFailure || rep.FailureCode != api.CodeStartupFailed ||
		rep.Completion != shutdown.Failed || rep.IsSuccess() || !rep.InitiatedAt.Equal(t0) ||
		rep.Budget != 30*time.Second || !rep.CloseReconciled {
		t.Fatalf("rollback report %+v", rep)
	}
	all := shutdown.ResourceReport{Owned: true, Started: true, Terminal: true, Succeeded: true}
	if rep.Dependencies.OwnedResources != all {
		t.Fatalf("owned resources %+v", rep.Dependencies.OwnedResources)
	}
	if got := log.get(); len(got) != 2 || got[0] != "cache" || got[1] != "db" {
		t.Fatalf("closed %v, want cache then db", got)
	}
	return rep
}

// ownedPair hands the engine two resources that log their close.
func ownedPair(log *closeLog) func(*api.Options) {
	return func(o *api.Options) {
		o.OwnedResources = []api.OwnedResource{
			{Name: "db", Closer: closerFunc(func() error { log.add("db"); return nil })},
			{Name: "cache", Closer: closerFunc(func() error { log.add("cache"); return nil })},
		}
	}
}

// startupShutdowns returns, from a fresh engine on b's files, every run's
// journaled shutdown_initiated trigger and shutdown_report.
func (b *testBundle) startupShutdowns() (triggers []string, reports []*record.ShutdownReport) {
	b.t.Helper()
	b.opts.OwnedResources = nil
	b.open()
	for _, r := range b.records() {
		switch body := r.Body.(type) {
		case *record.ShutdownInitiated:
			triggers = append(triggers, body.Trigger)
		case *record.ShutdownReport:
			reports = append(reports, body)
		}
	}
	return triggers, reports
}

// TestSD35_FailureAfterRunStartedRollsBackAsAShutdown: a step that fails
// once run_started is acknowledged (the runner is running, the journal
// holds the run) rolls back as a shutdown with trigger startup_failure:
// its six phases and report are journaled for that run, the owned
// resources are closed in reverse, the journal is closed (it reopens),
// and the report is reachable from Open's error.
func TestSD35_FailureAfterRunStartedRollsBackAsAShutdown(t *testing.T) {
	var log closeLog
	b := setup(t, nil)
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	ownedPair(&log)(&b.opts)
	failStartupAt(t, "ready")
	_, err := api.Open(b.ctx, b.opts)
	rep := wantRollback(t, err, "ready", &log)
	api.SetStartupHook(nil)

	triggers, reports := b.startupShutdowns()
	if len(triggers) != 2 || triggers[1] != "startup_failure" || len(reports) != 2 {
		t.Fatalf("journaled triggers %v, %d reports", triggers, len(reports))
	}
	jr := reports[1]
	if jr.Trigger != "startup_failure" || jr.Completion != "failed" || jr.FailureCode != api.CodeStartupFailed ||
		jr.InitiatedAt != rep.InitiatedAt.UnixNano() || len(jr.ActionComponents) != len(rep.Actions) {
		t.Fatalf("journaled report %+v, returned %+v", jr, rep)
	}
	if len(log.get()) != 2 {
		t.Fatalf("closed again by a later engine: %v", log.get())
	}
}

// TestSD35_FailureBeforeRunStartedRollsBackWithoutRecords: a step that
// fails before this run's run_started is acknowledged (the replay, with
// the journal open and nothing running; the recovery, with the runner
// running) still closes what started, the owned resources and the
// journal; the report exists only in the error, since the journal holds
// no run of this start to file it under.
func TestSD35_FailureBeforeRunStartedRollsBackWithoutRecords(t *testing.T) {
	for _, step := range []string{"replay", "recover"} {
		t.Run(step, func(t *testing.T) {
			var log closeLog
			b := setup(t, nil)
			if err := b.eng.Close(b.ctx); err != nil {
				t.Fatal(err)
			}
			ownedPair(&log)(&b.opts)
			failStartupAt(t, step)
			_, err := api.Open(b.ctx, b.opts)
			wantRollback(t, err, step, &log)
			api.SetStartupHook(nil)

			triggers, reports := b.startupShutdowns() // the journal was closed
			if len(triggers) != 1 || len(reports) != 1 || triggers[0] != "api" {
				t.Fatalf("journaled triggers %v, %d reports: the rollback wrote records", triggers, len(reports))
			}
		})
	}
}

// TestSD35_StartFailureRollsBack: Start failing part-way (the deadline
// check enabled, dispatch not yet) rolls the engine back: Start returns
// the *StartupError, the engine is stopped with the same report, and the
// report is journaled.
func TestSD35_StartFailureRollsBack(t *testing.T) {
	var log closeLog
	b := setup(t, ownedPair(&log))
	failStartupAt(t, "start")
	err := b.eng.Start(b.ctx)
	rep := wantRollback(t, err, "start", &log)
	if got := b.eng.ShutdownReport(); got == nil || got.Completion != rep.Completion || got.Trigger != rep.Trigger {
		t.Fatalf("engine report %+v, error's %+v", got, rep)
	}
	if b.eng.Lifecycle() != api.Stopped {
		t.Fatalf("lifecycle %v", b.eng.Lifecycle())
	}
	if _, err := b.eng.Enqueue(b.ctx, "work", msg{}); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("enqueue after the rollback: %v", err)
	}
	if err := b.eng.Close(context.Background()); err == nil {
		t.Fatal("Close after a rolled-back start reports success")
	}
	api.SetStartupHook(nil)
	triggers, reports := b.startupShutdowns()
	if len(triggers) != 1 || triggers[0] != "startup_failure" || len(reports) != 1 || reports[0].Completion != "failed" {
		t.Fatalf("journaled triggers %v, reports %v", triggers, reports)
	}
}

// SD-20, SD-35: a Start that succeeded is never undone. Start again, or
// Run, with a ctx that has already ended finds the engine started: Start
// does nothing, and Run takes the ended ctx as its shutdown request, a
// graceful one with trigger context, not a startup failure.
func TestSD20_RunOnAStartedEngineWithAnEndedContext(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	b.start()
	ended, cancel := context.WithCancel(b.ctx)
	cancel()
	if err := b.eng.Start(ended); err != nil || !b.eng.Ready() {
		t.Fatalf("Start on a started engine with an ended ctx: %v, ready %t", err, b.eng.Ready())
	}
	if _, err := b.eng.Enqueue(b.ctx, "work", msg{N: 1}); err != nil {
		t.Fatalf("enqueue after it: %v", err)
	}
	if err := b.eng.Run(ended); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rep := b.eng.ShutdownReport()
	if rep == nil || rep.Trigger != shutdown.TriggerContext || rep.Completion != shutdown.GracefulCompleted {
		t.Fatalf("shutdown report %+v, want a graceful shutdown with trigger context", rep)
	}
}
