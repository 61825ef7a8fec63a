package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/shutdown"
)

// CodeStartupFailed is the failure code of the report of a startup that
// failed part-way and was rolled back (SD-35), unless a failed journal
// commit caused it ([CodeJournalCommitFailed]).
const CodeStartupFailed = "STARTUP_FAILED"

// StartupError is the error of an [Open] or [Engine.Start] that failed
// after the options were accepted (SD-35). The engine then rolled back as
// a shutdown with trigger startup_failure, anchored at the failure and
// bounded by ShutdownTimeout like any shutdown: admission closed, what had
// started drained and closed, the owned resources disposed (behind the
// same barriers as any shutdown, SD-18), the journal synced and closed if
// it was open. Match it with errors.As; errors.Is and errors.As also see
// the failure through it.
type StartupError struct {
	// Step names the startup step that failed: "open", "open journal",
	// "replay", "recover", "ready" or "start".
	Step string
	// Err is the failure.
	Err error
	// Report is the rollback's shutdown report: Trigger is
	// [shutdown.TriggerStartupFailure] and FailureCode is set, so it is
	// never a success. The report is also appended to the journal if the
	// failure came after this run's run_started was acknowledged (the
	// journal must hold the run it belongs to); otherwise it exists only
	// here.
	Report *shutdown.Report
}

// Error describes the failure and the rollback's completion.
func (e *StartupError) Error() string {
	completion := "no report"
	if e.Report != nil {
		completion = e.Report.Completion.String()
	}
	return fmt.Sprintf("%v (startup step %q failed and was rolled back; rollback report: %s)", e.Err, e.Step, completion)
}

// Unwrap returns the failure.
func (e *StartupError) Unwrap() error { return e.Err }

// rollBack runs the rollback of a startup that failed at step with err
// (SD-35) and returns the [*StartupError] to return. Once this run's
// run_started is acknowledged, the engine's own coordinator rolls back and
// journals it; before that, a coordinator without journal records does,
// over the runner if it started and over nothing otherwise, and what
// started is stopped and closed after it.
func (e *Engine) rollBack(step string, err error) error {
	code := CodeStartupFailed
	if e.r != nil && e.r.Fatal() != nil {
		code = CodeJournalCommitFailed
	}
	coord := e.coord
	own := coord == nil || !e.runStarted
	if own {
		var eng shutdown.Engine = idleEngine{}
		if e.r != nil {
			eng = shutdownEngine{e}
		}
		owned, telemetry := e.opts.owned()
		c, cerr := shutdown.New(shutdown.Options{
			Clock:             e.clk,
			Engine:            eng,
			ShutdownTimeout:   e.opts.ShutdownTimeout,
			SettlementTimeout: e.opts.SettlementTimeout,
			OwnedResources:    owned,
			Telemetry:         telemetry,
		})
		if cerr != nil { // unreachable: the options were validated
			return errors.Join(err, cerr)
		}
		coord = c
	}
	coord.RollBack(code)
	_ = coord.Wait(context.Background())
	if own {
		if e.r != nil {
			_ = e.r.Stop(context.Background())
		}
		e.snapWG.Wait()
		if e.j != nil {
			_ = e.closeJournal()
		}
	} else {
		_ = e.finish()
	}
	return &StartupError{Step: step, Err: err, Report: coord.Report()}
}

// startupStep runs the test hook of a startup step, if any.
func startupStep(step string) error {
	if h := testHookStartup; h != nil {
		return h(step)
	}
	return nil
}

// idleEngine is the engine of a rollback that comes before the runner
// started (SD-35): no attempt, goroutine or record exists yet, so its acts
// have nothing to do and its waits nothing to wait for.
type idleEngine struct{}

var _ shutdown.Engine = idleEngine{}

func (idleEngine) InstallRoot(deadlines.Root)                                 {}
func (idleEngine) CloseAdmission() int                                        { return 0 }
func (idleEngine) Drain(context.Context) error                                { return nil }
func (idleEngine) ForceAttempts(deadlines.Reason, time.Time) time.Time        { return time.Time{} }
func (idleEngine) AwaitJoin(context.Context) error                            { return nil }
func (idleEngine) Revoke(deadlines.Reason, time.Time)                         {}
func (idleEngine) CloseEvidence(context.Context, shutdown.CloseRequest) error { return nil }
func (idleEngine) Counters() shutdown.Counters                                { return shutdown.Counters{Joined: true} }
