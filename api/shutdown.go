package api

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
	"github.com/quire-dev/quire/shutdown"
)

// Codes of the engine's own diagnostics and failures.
const (
	// CodeJournalCommitFailed is the failure code of a shutdown forced by a
	// failed journal commit (SD-23).
	CodeJournalCommitFailed = "JOURNAL_COMMIT_FAILED"
	// CodeShutdownInterrupted is the debug code recovery appends when the
	// previous run initiated a shutdown and never reported it (SD-36).
	CodeShutdownInterrupted = "SHUTDOWN_INTERRUPTED"
	// CodeSettlementRevoked is the code of an attempt_released the shutdown
	// appended at the forced owner cutoff for an attempt whose owner had
	// not settled it by then (DL-41): the job is pending again and nothing
	// was consumed.
	CodeSettlementRevoked = scheduler.CodeSettlementRevoked
)

// errQueuesWithheld is the close-evidence error when the drain was not
// reconciled, so the internal queues' barrier stayed closed (SD-18).
var errQueuesWithheld = fmt.Errorf("quire: internal queues not closed, drain not reconciled: %w", shutdown.ErrWithheld)

// EngineSnapshot is a point-in-time view of the engine (SD-34).
type EngineSnapshot struct {
	Lifecycle Lifecycle
	// Live and Ready are the lifecycle's columns in SD-34, as
	// [Engine.Live] and [Engine.Ready] report them, read together with
	// Lifecycle.
	Live, Ready bool
	Shutdown    ShutdownStatus
}

// ShutdownStatus is the shutdown part of an [EngineSnapshot] (SD-34).
type ShutdownStatus struct {
	// Initiated is true once a shutdown was initiated and the engine
	// installed its root: admission is closed.
	Initiated bool
	// Completed is true once the runtime join happened and the report is
	// published; it says nothing about success.
	Completed bool
	// Report is the same value as [Engine.ShutdownReport].
	Report *shutdown.Report
}

// Snapshot returns the engine's lifecycle and shutdown status (SD-34).
func (e *Engine) Snapshot() EngineSnapshot {
	rep := e.coord.Report()
	e.mu.Lock()
	lc, ready := e.lifecycle, e.ready()
	e.mu.Unlock()
	return EngineSnapshot{
		Lifecycle: lc,
		Live:      lc.Live(),
		Ready:     ready,
		Shutdown: ShutdownStatus{
			Initiated: e.initiated.Load(),
			Completed: rep != nil,
			Report:    rep,
		},
	}
}

// ShutdownReport returns a copy of the published shutdown report, or nil
// until it is published (SD-26, SD-32).
func (e *Engine) ShutdownReport() *shutdown.Report { return e.coord.Report() }

// Force requests force for the shutdown in progress (SD-22): running
// attempts get ReasonForcedShutdown and every remaining action takes its
// force path. It returns once every running attempt has its reason
// (DL-18), or the drain is over. It returns an error matching
// [shutdown.ErrNotInitiated] before any initiation. Once phase 5 is over
// (the shutdown ended, or Close returned) there is nothing left to force:
// it changes nothing and returns nil, as a second force does.
func (e *Engine) Force() error {
	if err := e.coord.Force(shutdown.TriggerAPI); err != nil {
		return err
	}
	<-e.coord.DrainForced()
	return nil
}

// settleCounts counts settlement records as the journal acknowledges them,
// for the shutdown counters (SD-25).
type settleCounts struct {
	settled  atomic.Int64
	released atomic.Int64
	// base values at the initiation: counters cover the shutdown only.
	baseSettled  atomic.Int64
	baseReleased atomic.Int64
	// baseUnresolved is the runner's Unresolved count at the initiation:
	// settlements whose wait ran out before the shutdown (DL-39). Their
	// commits are acknowledged or failed by the time the drain ends, so
	// they are not the shutdown's to confirm (SD-25).
	baseUnresolved atomic.Int64
	marked         sync.Once
}

// mark takes the base values, once, at the first initiation; unresolved
// is the runner's Unresolved count then.
func (c *settleCounts) mark(unresolved int) {
	c.marked.Do(func() {
		c.baseSettled.Store(c.settled.Load())
		c.baseReleased.Store(c.released.Load())
		c.baseUnresolved.Store(int64(unresolved))
	})
}

func (c *settleCounts) count(recs []record.Record) {
	for _, r := range recs {
		switch r.Body.(type) {
		case *record.AttemptSucceeded, *record.AttemptRetryScheduled, *record.AttemptBuried:
			c.settled.Add(1)
		case *record.AttemptReleased:
			c.settled.Add(1)
			c.released.Add(1)
		}
	}
}

// shutdownEngine is the engine as the shutdown coordinator drives it.
type shutdownEngine struct{ e *Engine }

var _ shutdown.Engine = shutdownEngine{}

func (s shutdownEngine) InstallRoot(root deadlines.Root) {
	// Admission closes with the initiation: nothing new is admitted once a
	// shutdown is requested (SD-12), and the dispatcher starts nothing
	// more. A start decided after the root is installed would run under a
	// budget its attempt_started does not record (DL-7), and a job
	// released by the drain would start again at once.
	s.e.beginDraining()
	_ = s.e.r.StopAdmission(context.Background())
	s.e.counts.mark(s.e.r.Quarantine().Unresolved)
	// The coordinator settles what is left at the forced owner cutoff
	// (DL-41): owners hand it their tokens from then on.
	_ = s.e.r.DeferFinalAbort(context.Background())
	_ = s.e.r.InstallRoot(context.Background(), root)
	s.e.initiated.Store(true)
	s.e.startedOnce.Do(func() { close(s.e.started) })
	if testHookInitiated != nil {
		testHookInitiated()
	}
}

// ShutdownStarted returns a channel closed once a shutdown was initiated
// and admission is closed (SD-12): a process can report itself not ready
// from then on.
func (e *Engine) ShutdownStarted() <-chan struct{} { return e.started }

func (s shutdownEngine) CloseAdmission() int {
	e := s.e
	e.beginDraining()
	e.counts.mark(e.r.Quarantine().Unresolved)
	_ = e.r.StopAdmission(context.Background())
	// The dispatcher claims only what it starts at once: nothing is
	// buffered unstarted (DL-43).
	return 0
}

func (s shutdownEngine) Drain(ctx context.Context) error {
	if err := s.e.r.Drain(ctx); err != nil {
		return err
	}
	// SD-13: the drain is over once every goroutine has returned too,
	// those abandoned before the shutdown included (DL-26): one that
	// returns before G leaves nothing quarantined, and the owned resources
	// it may use can be closed (SD-18). One that never returns holds the
	// drain until G, and the force path's joins until their deadline; it
	// stays quarantined and the report Incomplete (SD-37).
	if h := testHookDrainJoin; h != nil {
		h()
	}
	return s.e.r.WaitQuarantine(ctx)
}

func (s shutdownEngine) ForceAttempts(reason deadlines.Reason, at time.Time) time.Time {
	_ = s.e.r.Force(context.Background(), reason)
	latest, _ := s.e.r.LatestOwnerCutoff(context.Background())
	return latest
}

func (s shutdownEngine) AwaitJoin(ctx context.Context) error {
	// Attempts settle in their windows and cleanup until the final abort
	// (Revoke) settles the rest; this observes the commits and the real
	// returns.
	if err := s.e.r.Drain(ctx); err != nil {
		return err
	}
	return s.e.r.WaitQuarantine(ctx)
}

func (s shutdownEngine) Revoke(reason deadlines.Reason, at time.Time) {
	// Revoke decides the releases on the runner's loop and returns; their
	// commits and the goroutines' returns are AwaitJoin's to observe.
	_, _ = s.e.r.Revoke(context.Background(), reason, at)
}

func (s shutdownEngine) CloseEvidence(ctx context.Context, req shutdown.CloseRequest) error {
	e := s.e
	// Pause, cancel and bury end when phase 4 starts. Its record's append
	// did that already, unless the record was left behind a record still
	// being appended at Hr and waits for it (shutdown.Coordinator's emit):
	// phase 4 runs all the same, so it cuts them off itself.
	e.closeControl()
	if err := e.r.StopAdmission(ctx); err != nil {
		return err
	}
	// An empty decision is acknowledged once everything decided before it
	// is: every record so far is committed and synced. The loop stays up
	// to append the shutdown's own records until phase 6 closes the
	// journal.
	if err := e.r.Submit(ctx, noop); err != nil {
		return err
	}
	if !req.DrainReconciled {
		return errQueuesWithheld
	}
	return nil
}

func (s shutdownEngine) Counters() shutdown.Counters {
	e := s.e
	q := e.r.Quarantine()
	quarantined := q.Executions + q.Hooks + q.Scopes + q.Handlers
	inflight, err := e.r.InFlight(context.Background())
	if err != nil {
		inflight = 0 // stopped: what it abandoned is counted in quarantine
	}
	return shutdown.Counters{
		Drained:     int(e.counts.settled.Load() - e.counts.baseSettled.Load()),
		Released:    int(e.counts.released.Load() - e.counts.baseReleased.Load()),
		Unresolved:  q.Unresolved - int(e.counts.baseUnresolved.Load()),
		Quarantined: quarantined,
		Joined:      quarantined == 0 && inflight == 0,
	}
}

var _ shutdown.StragglerLister = shutdownEngine{}

// Stragglers names the attempts whose handlers have not returned, for the
// shutdown's debug records (SD-37). Its subject is the job; a stopped
// loop names none.
func (s shutdownEngine) Stragglers() []shutdown.Diagnostic {
	ss, err := s.e.r.Stragglers(context.Background())
	if err != nil {
		return nil
	}
	out := make([]shutdown.Diagnostic, 0, len(ss))
	for _, st := range ss {
		state := "still awaited"
		if st.Abandoned {
			state = "abandoned (DL-26), quarantined"
		}
		out = append(out, shutdown.Diagnostic{Subject: st.JobID, Code: shutdown.CodeHandlerNotReturned,
			Message: fmt.Sprintf("handler %q attempt %d (token %d) not returned: %s; started %s",
				st.Handler, st.Attempt, st.Token, state, st.Start.UTC().Format(time.RFC3339Nano))})
	}
	return out
}

// shutdownJournal appends the shutdown records through the runner (the
// engine is the journal's only writer) and closes the journal.
type shutdownJournal struct{ e *Engine }

var _ shutdown.Journal = shutdownJournal{}

func (s shutdownJournal) Append(ctx context.Context, ev shutdown.Event) error {
	b := shutdownBody(ev)
	if b == nil {
		return fmt.Errorf("quire: unknown shutdown event %s", ev.Kind())
	}
	if ps, ok := ev.(shutdown.PhaseStarted); ok {
		s.beforePhase(ctx, ps.Phase)
	}
	done := make(chan error, 1)
	go func() { done <- s.e.r.Note(context.Background(), b) }()
	select {
	case err := <-done:
		if ps, ok := ev.(shutdown.PhaseStarted); ok && err == nil && testHookPhaseStarted != nil {
			testHookPhaseStarted(int(ps.Phase))
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// beforePhase does on the loop what must precede a phase's
// shutdown_phase_started in the journal (SD-12): the dispatcher stops
// before phase 1's record, so no attempt_started follows it, and pause,
// cancel and bury are cut off before phase 4's, so none of theirs follows
// it. What the loop decided before is appended ahead of the record. A
// stopped runner has nothing left to stop; an ended ctx fails the record's
// append too.
func (s shutdownJournal) beforePhase(ctx context.Context, p shutdown.Phase) {
	e := s.e
	switch p {
	case shutdown.PhaseCloseAdmission:
		_ = e.r.StopAdmission(ctx)
	case shutdown.PhaseCloseEvidence:
		e.closeControl()
	}
}

// closeControl refuses pause, cancel and bury from now on (SD-12). Their
// check runs on the loop, so each one is decided either before this, and
// appended ahead of phase 4's record and evidence, or after, and refused.
func (e *Engine) closeControl() { e.controlClosed.Store(true) }

func (s shutdownJournal) Close(ctx context.Context) error {
	e := s.e
	_ = e.r.Stop(ctx)
	e.snapWG.Wait()
	return e.closeJournal()
}

// shutdownBody maps a shutdown event to its journal record body.
func shutdownBody(ev shutdown.Event) record.Body {
	switch ev := ev.(type) {
	case shutdown.Initiated:
		return &record.ShutdownInitiated{Trigger: ev.Trigger.String(), StartAt: ev.Start.UnixNano(),
			TotalNanos: int64(ev.Total), GracefulAt: ev.G.UnixNano(), HardAt: ev.Hr.UnixNano()}
	case shutdown.ForceRequested:
		return &record.ShutdownForceRequested{Trigger: ev.Trigger.String()}
	case shutdown.PhaseStarted:
		return &record.ShutdownPhaseStarted{Phase: int8(ev.Phase), Name: ev.Phase.String()}
	case shutdown.PhaseFinished:
		b := &record.ShutdownPhaseFinished{Phase: int8(ev.Phase), Name: ev.Phase.String(),
			Graceful: ev.Graceful.String(), Forced: ev.Forced.String()}
		if ev.Phase == shutdown.PhasePublishReport {
			b.Completion = ev.Completion.String() // SD-11: phase 6 records the report's completion
		}
		return b
	case shutdown.ReportPublished:
		return reportRecord(&ev.Report)
	case shutdown.Diagnostic:
		return &record.Debug{Subject: ev.Subject, Code: ev.Code, Message: ev.Message}
	}
	return nil
}

func resourceBits(r shutdown.ResourceReport) uint8 {
	var b uint8
	for i, on := range []bool{r.Owned, r.Started, r.Terminal, r.Succeeded} {
		if on {
			b |= 1 << i
		}
	}
	return b
}

// reportRecord flattens a report into its shutdown_report record (SD-27).
func reportRecord(r *shutdown.Report) *record.ShutdownReport {
	out := &record.ShutdownReport{
		Completion:           r.Completion.String(),
		Forced:               r.Forced,
		Trigger:              r.Trigger.String(),
		InitiatedAt:          r.InitiatedAt.UnixNano(),
		BudgetNanos:          int64(r.Budget),
		ElapsedNanos:         int64(r.Elapsed),
		CoordinatorAccounted: r.CoordinatorAccounted,
		CoordinatorComplete:  r.CoordinatorComplete,
		RuntimeJoined:        r.RuntimeJoined,
		DrainReconciled:      r.DrainReconciled,
		CloseReconciled:      r.CloseReconciled,
		Dependencies: []uint8{
			resourceBits(r.Dependencies.OwnedResources),
			resourceBits(r.Dependencies.SignalMonitor),
			resourceBits(r.Dependencies.Telemetry),
		},
		Drained:           int64(r.Drained),
		ReleasedUnstarted: int64(r.ReleasedUnstarted),
		Released:          int64(r.Released),
		Unresolved:        int64(r.Unresolved),
		Quarantined:       int64(r.Quarantined),
		FailureCode:       r.FailureCode,
	}
	for _, a := range r.Actions {
		out.ActionPhases = append(out.ActionPhases, int8(a.Phase))
		out.ActionComponents = append(out.ActionComponents, a.Component)
		out.ActionGraceful = append(out.ActionGraceful, a.Graceful.String())
		out.ActionForced = append(out.ActionForced, a.Forced.String())
	}
	return out
}
