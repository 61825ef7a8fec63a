package shutdown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/quire-dev/quire/deadlines"
)

// pass is the state of the one shutdown run, owned by the coordinator
// goroutine.
type pass struct {
	rep Report
	// expected is the number of actions the run must account for.
	expected int
	// drainJoined is the drain's evidence: Drain or AwaitJoin returned nil.
	drainJoined bool
	// closeProven is the close action's evidence: CloseEvidence returned
	// nil in time.
	closeProven bool
}

// run is the coordinator goroutine: phases 1 to 5, the runtime join, then
// phase 6. It always publishes a report and closes done, also when the
// coordinator's own code panics (the report is then unaccounted, so
// Incomplete).
func (c *Coordinator) run() {
	defer close(c.done)
	defer c.drainForceDone()
	c.mu.Lock()
	trigger := c.trigger
	c.mu.Unlock()
	root := c.view().root
	p := &pass{expected: 3}
	for _, has := range []bool{len(c.owned) > 0, c.sigStop != nil, c.telemetry != nil} {
		if has {
			p.expected++
		}
	}
	p.rep = Report{Trigger: trigger, InitiatedAt: root.Start(), Budget: root.Total()}
	c.emit(Initiated{Trigger: trigger, Start: root.Start(), Total: root.Total(), G: root.G(), Hr: root.Hr()})
	accounted := protect(func() { c.phases(p) })
	p.rep.Elapsed = c.clk.Now().Sub(root.Start())
	c.nameStragglers()
	c.settleRecords()
	rep := c.classify(p, accounted)
	c.pub.Publish(rep)
	c.err = c.publishReport(rep)
}

// nameStragglers appends a diagnostic for each attempt whose handler has
// not returned, when the engine can name them ([StragglerLister]) and its
// counters show any: the report will count them, and an operator needs
// the jobs (SD-37). Appends deferred past Hr go with settleRecords.
func (c *Coordinator) nameStragglers() {
	l, ok := c.eng.(StragglerLister)
	if !ok {
		return
	}
	var (
		n  Counters
		ds []Diagnostic
	)
	if !protect(func() { n = c.eng.Counters() }) || n.Quarantined == 0 && n.Joined {
		return
	}
	if !protect(func() { ds = l.Stragglers() }) {
		return
	}
	for i, d := range ds {
		if i == StragglersMax {
			n, verb := len(ds)-i, "are"
			if n == 1 {
				verb = "is"
			}
			c.emit(Diagnostic{Subject: "drain", Code: CodeHandlerNotReturned,
				Message: fmt.Sprintf("%d more attempt%s whose handler%s had not returned %s not named", n, plural(n), plural(n), verb)})
			break
		}
		d.Message = clip(d.Message, DiagnosticBytesMax)
		c.emit(d)
	}
}

// phases runs phases 1 to 5 strictly in order (SD-11).
func (c *Coordinator) phases(p *pass) {
	c.closeAdmission(p)
	c.drain(p)
	c.closeEvidence(p)
	c.releaseResources(p)
}

// closeAdmission is phase 1 (SD-12). Closing admission is an act that never
// blocks, so it always runs, also after G or force; its force path then
// ends TimedOut if its force deadline had already passed (SD-4).
func (c *Coordinator) closeAdmission(p *pass) {
	c.phaseStarted(PhaseCloseAdmission)
	begin := c.clk.Now()
	v := c.view()
	a := Action{Phase: PhaseCloseAdmission, Component: ComponentAdmission, Graceful: OutcomeCompleted}
	cut := deadlines.Expired(v.gracefulEnd(), begin)
	var released int
	ok := protect(func() { released = c.eng.CloseAdmission() })
	p.rep.ReleasedUnstarted = released
	switch {
	case !cut && ok:
	case !cut:
		a.Graceful = OutcomePanicked
	default:
		a.Graceful = v.interruption()
		a.Forced = OutcomeCompleted
		switch {
		case deadlines.Expired(v.root.ForceDeadline(begin), begin):
			a.Forced = OutcomeTimedOut
		case !ok:
			a.Forced = OutcomePanicked
		}
	}
	p.rep.Actions = append(p.rep.Actions, a)
	c.phaseFinished(PhaseCloseAdmission, a.Graceful, a.Forced, nil)
}

// drain is phases 2 and 3: the drain's graceful path until G or force
// (SD-13), then, unless it completed, its force path (SD-14): force
// published to running attempts stamped at the instant the graceful path
// ended, then real joins until the drain's force deadline
// max(ForceDeadline(e), latest owner cutoff) clamped to Hr (SD-8).
func (c *Coordinator) drain(p *pass) {
	c.phaseStarted(PhaseDrain)
	begin := c.clk.Now()
	v := c.view()
	a := Action{Phase: PhaseDrain, Component: ComponentDrain}
	var e time.Time // when the graceful path ended
	if deadlines.Expired(v.gracefulEnd(), begin) {
		a.Graceful, e = v.interruption(), begin
	} else {
		ctx, cancel := context.WithCancelCause(context.Background())
		cl := c.start(ctx, c.eng.Drain)
		if !c.await(cl.done, view.gracefulEnd) {
			cancel(errGracefulEnded)
			<-cl.done
		}
		cancel(nil)
		v = c.view()
		if cl.at.Before(v.gracefulEnd()) {
			a.Graceful, e = cl.outcome(), cl.at
		} else {
			a.Graceful, e = v.interruption(), deadlines.Latest(begin, v.gracefulEnd())
		}
	}
	c.phaseFinished(PhaseDrain, a.Graceful, OutcomeNotAttempted, nil)

	c.phaseStarted(PhaseForce)
	if a.Graceful != OutcomeCompleted {
		a.Forced = c.forceDrain(e)
	}
	c.drainForceDone() // no attempt is left to tell
	p.drainJoined = a.Graceful == OutcomeCompleted || a.Forced == OutcomeCompleted
	var n Counters
	protect(func() { n = c.eng.Counters() })
	p.rep.DrainReconciled = p.drainJoined && n.Unresolved == 0 && n.Quarantined == 0
	p.rep.Actions = append(p.rep.Actions, a)
	c.phaseFinished(PhaseForce, a.Graceful, a.Forced, nil)
}

// forceDrain is the drain's force path starting at e; it returns its
// outcome. Force is published first (ForceAttempts); the joins are then
// awaited until the drain's force deadline, and the final abort (Revoke)
// comes at the forced owner cutoff in between (SD-14, SD-24, DL-41), so
// that close evidence starts only after the revocation, the releases and
// the joins (or the force deadline).
func (c *Coordinator) forceDrain(e time.Time) Outcome {
	v := c.view()
	// The reason is the one due at e (DL-18): a request that came after the
	// graceful path ended at G does not turn it into ReasonForcedShutdown.
	reason := deadlines.ForceReason(v.force.requestedBy(e), v.root, e)
	var latest time.Time
	ok := protect(func() { latest = c.eng.ForceAttempts(reason, e) })
	c.drainForceDone()
	if !ok {
		return OutcomePanicked
	}
	end := func(v view) time.Time { return v.root.DrainForceDeadline(e, latest) }
	abort := func(v view) time.Time { return abortAt(v.root, e, latest, end(v)) }
	revoke := func() bool {
		return protect(func() { c.eng.Revoke(reason, deadlines.Earliest(abort(c.view()), c.clk.Now())) })
	}
	if deadlines.Expired(end(c.view()), c.clk.Now()) {
		// Force is published, but no forced cleanup is waited for (SD-4);
		// nothing may settle after close evidence starts, though.
		revoke()
		return OutcomeTimedOut
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cl := c.start(ctx, c.eng.AwaitJoin)
	if !c.awaitCall(cl.done, abort) {
		if !revoke() {
			cancel(errPanicked)
			<-cl.done
			return OutcomePanicked
		}
		if !c.awaitCall(cl.done, end) {
			cancel(errForceDeadline)
			<-cl.done
		}
	}
	if !cl.at.Before(end(c.view())) {
		return OutcomeTimedOut
	}
	return cl.outcome()
}

// abortAt returns the instant of the final abort of a drain forced at e
// (SD-14, DL-41): the forced owner cutoff max(F(e), latest), where F(e) is
// the owner cutoff of an attempt forced at e and latest the latest owner
// cutoff of the attempts running then (an attempt notified earlier, for
// its own timeout, may end later), clamped to Hr and to the drain's force
// deadline end. Example, 30 s root: force at 5 → 6; G = 28 → 29.
func abortAt(root deadlines.Root, e, latest, end time.Time) time.Time {
	return deadlines.Earliest(root.Cap(deadlines.Latest(root.OwnerCutoff(e), latest)), end)
}

// closeEvidence is phase 4 (SD-15). It starts once the drain's outcome is
// final; its wait for the dispatcher keeps min(remaining/4, 250 ms) for
// closing queues and syncing the journal (SD-9).
func (c *Coordinator) closeEvidence(p *pass) {
	c.phaseStarted(PhaseCloseEvidence)
	req := CloseRequest{
		DispatcherStopBy: c.view().root.DispatcherStopDeadline(c.clk.Now()),
		DrainReconciled:  p.rep.DrainReconciled,
	}
	run := c.runAction([]func(context.Context) error{
		func(ctx context.Context) error { return c.eng.CloseEvidence(ctx, req) },
	}, true, nil)
	if run.calls[0].returned && errors.Is(run.calls[0].err, ErrWithheld) {
		// SD-18: a withheld close waited for a barrier that never opens.
		run.graceful, run.forced = withheldOutcome(run.graceful), withheldOutcome(run.forced)
	}
	a := Action{Phase: PhaseCloseEvidence, Component: ComponentClose, Graceful: run.graceful, Forced: run.forced}
	p.closeProven = a.Complete()
	p.rep.Actions = append(p.rep.Actions, a)
	c.phaseFinished(PhaseCloseEvidence, a.Graceful, a.Forced, nil)
}

// withheldOutcome is o for a path that withheld its close: TimedOut where
// the call's error made it Failed.
func withheldOutcome(o Outcome) Outcome {
	if o == OutcomeFailed {
		return OutcomeTimedOut
	}
	return o
}

// closeReconciled is CloseReconciled as of now: DrainReconciled, close
// evidence, and every record so far written (SD-11, SD-15).
func (c *Coordinator) closeReconciled(p *pass) bool {
	return p.rep.DrainReconciled && p.closeProven && c.journalErr == nil
}

// releaseResources is phase 5 (SD-16): owned resources in reverse order of
// hand-over, then the signal monitor, then owned telemetry, each behind its
// barrier (SD-18). A barrier's inputs are final when its action's turn
// comes (joins that failed are not retried, calls abandoned are not waited
// for again), so a closed barrier never opens: the action is withheld at
// once, graceful TimedOut, and its resource stays undisposed
// (Owned = true, Started = false). Each call gets its fair share of the
// root time left ([shares]); an owned close still running at the end of
// its share is abandoned, and the resources handed over before it are
// not closed, since it may still use them (SD-37).
func (c *Coordinator) releaseResources(p *pass) {
	c.phaseStarted(PhaseReleaseResources)
	var actions []Action
	deps := &p.rep.Dependencies
	withheld := func(component string) Action {
		return Action{Phase: PhaseReleaseResources, Component: component, Graceful: OutcomeTimedOut}
	}
	var telemetry []func(context.Context) error
	var telemetryNames []string
	if t := c.telemetry; t != nil {
		for i, f := range []func(context.Context) error{t.FlushFunc, t.CloseFunc} {
			if f != nil {
				telemetry = append(telemetry, f)
				telemetryNames = append(telemetryNames, ComponentTelemetry+"/"+[]string{"flush", "close"}[i])
			}
		}
	}
	sh := &shares{left: len(c.owned) + len(telemetry)}
	if c.sigStop != nil {
		sh.left++
	}

	if len(c.owned) > 0 {
		deps.OwnedResources.Owned = true
		if !c.closeReconciled(p) {
			sh.skip(len(c.owned))
			actions = append(actions, withheld(ComponentOwnedResources))
		} else {
			fns := make([]func(context.Context) error, 0, len(c.owned))
			names := make([]string, 0, len(c.owned))
			for _, r := range slices.Backward(c.owned) {
				fns = append(fns, r.CloseFunc)
				names = append(names, ComponentOwnedResources+"/"+r.Name)
			}
			actions = append(actions, c.release(ComponentOwnedResources, names, fns, sh, &deps.OwnedResources, CodeOwnedResourceCloseFailed))
		}
	}

	// The signal monitor's barrier is the end of the owned-resources
	// action, which has ended here.
	if c.sigStop != nil {
		deps.SignalMonitor.Owned = true
		fns := []func(context.Context) error{c.sigStop}
		names := []string{ComponentSignalMonitor}
		actions = append(actions, c.release(ComponentSignalMonitor, names, fns, sh, &deps.SignalMonitor, CodeSignalMonitorStopFailed))
	}

	if telemetry != nil {
		deps.Telemetry.Owned = true
		confirmed := c.closeReconciled(p) && deps.OwnedResources.Reconciled() &&
			deps.SignalMonitor.Reconciled() && c.outstanding() == 0
		if !confirmed {
			actions = append(actions, withheld(ComponentTelemetry))
		} else {
			actions = append(actions, c.release(ComponentTelemetry, telemetryNames, telemetry, sh, &deps.Telemetry, CodeTelemetryCloseFailed))
		}
	}

	graceful, forced := OutcomeCompleted, OutcomeNotAttempted
	for _, a := range actions {
		graceful, forced = worse(graceful, a.Graceful), worse(forced, a.Forced)
	}
	p.rep.Actions = append(p.rep.Actions, actions...)
	c.phaseFinished(PhaseReleaseResources, graceful, forced, slices.Clone(actions))
}

// release runs one phase-5 action over user functions, which are abandoned
// rather than joined at their force deadline or the end of their share
// (SD-37), and fills its resource report: Started if any call started,
// Terminal if every call returned, Succeeded if every call returned nil
// (SD-29). A call that returned an error or panicked sets code as the
// failure code, unless an earlier failure set one. Its error or panic text,
// which the report never holds, goes to a debug record naming the call
// (names[i], SD-28), as does the abandonment of a call.
func (c *Coordinator) release(component string, names []string, fns []func(context.Context) error, sh *shares, rr *ResourceReport, code string) Action {
	run := c.runAction(fns, false, sh)
	if run.abandoned != nil {
		c.abandoned = append(c.abandoned, run.abandoned)
	}
	rr.Terminal, rr.Succeeded = true, true
	for i, r := range run.calls {
		rr.Started = rr.Started || r.started
		rr.Terminal = rr.Terminal && r.returned
		rr.Succeeded = rr.Succeeded && r.ok()
		if r.returned && !r.ok() {
			c.setFailureCode(code)
		}
		if d, ok := diagnostic(names[i], code, r); ok {
			c.emit(d)
		}
	}
	return Action{Phase: PhaseReleaseResources, Component: component, Graceful: run.graceful, Forced: run.forced}
}

// diagnostic returns the debug record of a call that failed, panicked or
// was abandoned, and false for one that succeeded or never started.
func diagnostic(subject, code string, r callResult) (Diagnostic, bool) {
	d := Diagnostic{Subject: subject, Code: code}
	switch {
	case r.abandoned:
		d.Code = CodeCloseAbandoned
		d.Message = "did not return by its deadline (its share of the budget or the force deadline); abandoned, still running (SD-37)"
	case r.panicked:
		d.Message = "panicked: " + r.panicText
	case r.returned && r.err != nil:
		d.Message = "failed: " + r.err.Error()
	default:
		return Diagnostic{}, false
	}
	d.Message = clip(d.Message, DiagnosticBytesMax)
	return d, true
}

// outstanding counts the abandoned calls that have not returned yet.
func (c *Coordinator) outstanding() int {
	n := 0
	for _, cl := range c.abandoned {
		if !cl.returned() {
			n++
		}
	}
	return n
}

// classify completes the report after the runtime join and classifies it
// once (SD-30). accounted is false if the coordinator's own code panicked.
func (c *Coordinator) classify(p *pass, accounted bool) Report {
	rep := p.rep
	var n Counters
	protect(func() { n = c.eng.Counters() })
	rep.Drained, rep.Released, rep.Unresolved = n.Drained, n.Released, n.Unresolved
	outstanding := c.outstanding()
	rep.Quarantined = n.Quarantined + outstanding
	rep.RuntimeJoined = n.Joined && n.Quarantined == 0 && outstanding == 0
	rep.CloseReconciled = c.closeReconciled(p)
	rep.CoordinatorAccounted = accounted && len(rep.Actions) == p.expected
	rep.CoordinatorComplete = len(rep.Actions) > 0
	rep.Forced = c.forceSeen
	for _, a := range rep.Actions {
		rep.CoordinatorComplete = rep.CoordinatorComplete && a.Complete()
		rep.Forced = rep.Forced || a.Forced != OutcomeNotAttempted
	}
	c.mu.Lock()
	rep.FailureCode = c.failureCode
	c.mu.Unlock()
	rep.Actions = slices.Clone(rep.Actions)
	rep.Completion = Classify(rep)
	return rep
}

// publishReport is phase 6 (SD-17), after the report is published in
// memory: append it between the phase's records, then close the journal.
// Phase 6 waits only for these, each bounded by SettlementTimeout alone,
// so the report is still written when phase 5 ran until Hr (SD-10). It
// returns the shared result of the shutdown.
func (c *Coordinator) publishReport(rep Report) error {
	c.emitReport(PhaseStarted{Phase: PhasePublishReport, At: c.clk.Now()})
	c.emitReport(ReportPublished{Report: *rep.Clone()})
	// Completed is the only status phase 6 can journal: once an append
	// failed (the report's or any before it) nothing more is appended, its
	// finished record included, and Shutdown returns that error (SD-17).
	c.emitReport(PhaseFinished{Phase: PhasePublishReport, At: c.clk.Now(), Graceful: OutcomeCompleted, Forced: OutcomeNotAttempted, Completion: rep.Completion})
	jerr := c.journalErr
	if c.jrn != nil {
		if err := c.bounded(c.clk.Now().Add(c.settle), c.jrn.Close); err != nil && jerr == nil {
			jerr = err
		}
	}
	if rep.IsSuccess() && jerr == nil {
		return nil
	}
	return &Error{Completion: rep.Completion, FailureCode: rep.FailureCode, Detail: detail(rep), Err: jerr}
}
