package shutdown

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
)

// Coordinator runs one controlled shutdown of an [Engine]: one root budget
// anchored at the first initiation, six ordered and journaled phases,
// force, and the write-once [Report] (spec/shutdown.md). Create it with
// [New] when the engine starts; it does nothing until the first
// initiation ([Coordinator.Initiate], [Coordinator.Shutdown],
// [Coordinator.Fail]).
//
// The phases run on a goroutine of the coordinator's own, which starts at
// the first initiation and returns after phase 6; that return is the
// runtime join of SD-26. All methods are safe for concurrent use.
type Coordinator struct {
	clk       clock.Clock
	eng       Engine
	jrn       Journal
	total     time.Duration
	settle    time.Duration
	owned     []OwnedResource
	sigStop   func(context.Context) error
	telemetry *Telemetry

	mu        sync.Mutex
	initiated bool
	trigger   Trigger
	// root is the root in effect; before the first initiation, the root a
	// harness installed, if any.
	root        deadlines.Root
	force       forceState
	failureCode string
	// changed is closed and replaced whenever root or force changes, to
	// wake the coordinator's waits (SD-5).
	changed chan struct{}

	done chan struct{}
	// drainForced is closed once the drain's force path has published its
	// reason to the running attempts, or the drain ended without it.
	drainForced     chan struct{}
	drainForcedOnce sync.Once
	err             error // the shared result; written before done is closed
	pub             Published

	// Owned by the coordinator goroutine.
	journalErr error
	forceSeen  bool
	abandoned  []*call
	// behind is an append of a record of phases 1 to 5 whose wait ended
	// at Hr while it still ran, and deferred the records emitted after it
	// or once Hr had passed: settled before the report ([settleRecords]).
	behind   *inFlight
	deferred []Event
}

// inFlight is an append left running when its wait ended at Hr.
type inFlight struct {
	cl     *call
	cancel context.CancelCauseFunc
}

// forceState is the first force: explicit (SD-22) or by a runtime failure
// (SD-23).
type forceState struct {
	set     bool
	at      time.Time
	trigger Trigger
	// requested is true once force was requested explicitly, first at
	// requestedAt; a runtime failure alone forces with
	// ReasonRuntimeFailure (DL-18).
	requested   bool
	requestedAt time.Time
}

// requestedBy reports whether force was requested explicitly at or before
// at.
func (f forceState) requestedBy(at time.Time) bool {
	return f.requested && !f.requestedAt.After(at)
}

// view is a consistent snapshot of what the coordinator's waits depend on.
type view struct {
	root    deadlines.Root
	force   forceState
	changed <-chan struct{}
}

// gracefulEnd returns the instant graceful paths end: G, or the first
// force if that came earlier (SD-6, SD-22).
func (v view) gracefulEnd() time.Time {
	if v.force.set {
		return deadlines.Earliest(v.root.G(), v.force.at)
	}
	return v.root.G()
}

// interruption returns the graceful outcome of a path cut off at
// gracefulEnd: CancelledByForce if force came before G, TimedOut otherwise
// (G is reached at G: DL-1).
func (v view) interruption() Outcome {
	if v.force.set && v.force.at.Before(v.root.G()) {
		return OutcomeCancelledByForce
	}
	return OutcomeTimedOut
}

// New returns a coordinator for opts, which it checks once. It starts
// nothing.
func New(opts Options) (*Coordinator, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Coordinator{
		clk:       opts.Clock,
		eng:       opts.Engine,
		jrn:       opts.Journal,
		total:     opts.ShutdownTimeout,
		settle:    opts.SettlementTimeout,
		owned:     slices.Clone(opts.OwnedResources),
		sigStop:   opts.SignalMonitorStopFunc,
		telemetry: opts.Telemetry,
		changed:   make(chan struct{}),
		done:      make(chan struct{}),

		drainForced: make(chan struct{}),
	}, nil
}

// SetSignalMonitor hands the coordinator the stop function of an OS signal
// listener started after New (the run entry point's, SD-20), as
// Options.SignalMonitorStopFunc would: phase 5 stops it and the report
// accounts for it (SD-16). It reports false, and changes nothing, once a
// shutdown was initiated: the phases may already have passed it by.
func (c *Coordinator) SetSignalMonitor(stop func(ctx context.Context) error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initiated {
		return false
	}
	c.sigStop = stop
	return true
}

// Initiate requests a shutdown by t and reports whether this call was the
// first initiation. The first one anchors the root at the current instant
// (SD-3): Hr = now + ShutdownTimeout, G = max(Hr − min(total/4, 2 s), now)
// (SD-4), installs it in the engine and starts the phases; later calls
// change nothing, and never renew the root. Triggers after the first are
// not recorded; call [Coordinator.Force] for a second signal.
//
// [TriggerSigquit] initiates and forces at once (SD-20); so does
// [TriggerRuntimeFailure], with ReasonRuntimeFailure (SD-23), but
// [Coordinator.Fail] also records the failure's code. Other triggers are
// graceful requests.
func (c *Coordinator) Initiate(t Trigger) bool {
	switch t {
	case TriggerSigquit:
		return c.initiate(t, true, true, "")
	case TriggerRuntimeFailure:
		return c.initiate(t, true, false, "")
	}
	return c.initiate(t, false, false, "")
}

// Fail reports a fatal error of an engine goroutine with its stable code
// (SD-23): it initiates the shutdown with [TriggerRuntimeFailure] if none
// is in progress, switches to the force paths, forcing running attempts
// with ReasonRuntimeFailure unless force was requested (DL-18), and makes
// code the report's FailureCode unless an earlier failure set one. It
// reports whether this call was the first initiation. A failure after the
// report was classified changes nothing.
func (c *Coordinator) Fail(code string) bool {
	return c.initiate(TriggerRuntimeFailure, true, false, code)
}

// RollBack initiates the rollback of a startup that failed part-way
// (SD-35): a shutdown with [TriggerStartupFailure], anchored at the
// current instant (the failure) with the same ShutdownTimeout as any
// shutdown, which closes admission, drains and closes what started and
// disposes the owned resources. code is the failure's stable code and
// becomes the report's FailureCode unless an earlier failure set one, so
// the report is never a success. It is a graceful request: nothing is
// running yet that force would stop. It reports whether this call was the
// first initiation; a rollback requested after another initiation only
// records code.
func (c *Coordinator) RollBack(code string) bool {
	return c.initiate(TriggerStartupFailure, false, false, code)
}

func (c *Coordinator) initiate(t Trigger, force, requested bool, code string) bool {
	c.mu.Lock()
	now := c.clk.Now()
	first := !c.initiated
	if first {
		c.initiated = true
		c.trigger = t
		// An earlier root (a harness's, SD-4) keeps its start; a later
		// install only shortens (SD-5).
		c.root = c.root.Install(deadlines.NewRoot(now, c.total))
	}
	if force {
		c.setForceLocked(t, now, requested)
	}
	if code != "" && c.failureCode == "" {
		c.failureCode = code
	}
	root := c.root
	c.mu.Unlock()
	if first {
		c.eng.InstallRoot(root)
		go c.run()
	}
	return first
}

// Force requests force by t (SD-22): the current and remaining actions
// switch to their force paths and running attempts get
// ReasonForcedShutdown (DL-18). Force does not renew the root. It returns
// [ErrNotInitiated] before the first initiation; a first SIGQUIT is
// Initiate(TriggerSigquit). Requests after the first force, or after phase
// 5, change nothing and return nil.
func (c *Coordinator) Force(t Trigger) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initiated {
		return ErrNotInitiated
	}
	c.setForceLocked(t, c.clk.Now(), true)
	return nil
}

func (c *Coordinator) setForceLocked(t Trigger, now time.Time, requested bool) {
	if requested && !c.force.requested {
		c.force.requested, c.force.requestedAt = true, now
	}
	if c.force.set {
		return
	}
	c.force.set = true
	c.force.at = now
	c.force.trigger = t
	c.signalLocked()
}

// signalLocked wakes every wait of the coordinator.
func (c *Coordinator) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Install installs root over the current root: G and Hr only shorten
// (SD-5), the start and the budget stay those of the first initiation
// (SD-3), and every wait re-arms against its same pending operation. After
// the first initiation the engine gets the result too
// ([Engine.InstallRoot]). Before it, root is kept and the initiation
// installs its own root over it; a test harness installs
// deadlines.NewRoot(start, 0) this way for a zero-length root (SD-4).
func (c *Coordinator) Install(root deadlines.Root) {
	if !root.Installed() {
		return
	}
	c.mu.Lock()
	c.root = c.root.Install(root)
	next, initiated := c.root, c.initiated
	c.signalLocked()
	c.mu.Unlock()
	select {
	case <-c.done:
		return // the engine's shutdown is over
	default:
	}
	if initiated {
		c.eng.InstallRoot(next)
	}
}

// Root returns the root in effect, or the zero Root before the first
// initiation.
func (c *Coordinator) Root() deadlines.Root {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initiated {
		return deadlines.Root{}
	}
	return c.root
}

// Shutdown requests a graceful shutdown ([TriggerAPI]) and waits for its
// result (SD-21): nil if the report is a success and the journal confirmed
// it, otherwise an [*Error]. If ctx ends first it returns ctx.Err() while
// the shutdown carries on under its root; cancelling an observer never
// aborts, detaches or renews anything. Every caller gets the same result.
func (c *Coordinator) Shutdown(ctx context.Context) error {
	c.Initiate(TriggerAPI)
	return c.Wait(ctx)
}

// Wait waits for the end of phase 6 and returns the shared result, as
// Shutdown does, without initiating anything. It returns ctx.Err() if ctx
// ends first.
func (c *Coordinator) Wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done returns a channel that is closed after phase 6, when the result is
// final.
func (c *Coordinator) Done() <-chan struct{} { return c.done }

// DrainForced returns a channel that is closed once the drain's force path
// has published its reason to every running attempt (DL-18), or the drain
// ended without needing it. A caller of [Coordinator.Force] waits on it to
// find the attempts already told.
func (c *Coordinator) DrainForced() <-chan struct{} { return c.drainForced }

func (c *Coordinator) drainForceDone() { c.drainForcedOnce.Do(func() { close(c.drainForced) }) }

// Report returns a fresh copy of the published report, or nil until it is
// published, after the runtime join (SD-26). The report is written once
// (SD-32).
func (c *Coordinator) Report() *Report { return c.pub.Load() }

func (c *Coordinator) view() view {
	c.mu.Lock()
	defer c.mu.Unlock()
	return view{root: c.root, force: c.force, changed: c.changed}
}

// setFailureCode records code unless an earlier failure recorded one.
func (c *Coordinator) setFailureCode(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failureCode == "" {
		c.failureCode = code
	}
}

// emit appends e, a record of phases 1 to 5 (shutdown_force_requested and
// debug included), unless the journal already failed: from the first
// failure on, records are skipped and the phases go on (SD-11).
//
// Its wait ends at min(now + SettlementTimeout, Hr), Hr as the root in
// effect says while it waits (SD-2, SD-5). An append still running at Hr
// is not given up: the phases go on without waiting for it, and it and
// every record after it (and every record emitted once Hr has passed,
// such as the closing records of a phase cut at Hr) are settled before
// the report, within one SettlementTimeout (settleRecords, SD-17). So a
// root cut short while a healthy journal commits a record costs no
// record, and a hung journal holds no phase past Hr.
func (c *Coordinator) emit(e Event) {
	if c.jrn == nil || c.journalErr != nil {
		return
	}
	now := c.clk.Now()
	if c.behind != nil || len(c.deferred) > 0 || c.view().root.Expired(now) {
		c.deferred = append(c.deferred, e)
		return
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cl := c.start(ctx, c.appendFn(e))
	settleAt := now.Add(c.settle)
	if c.await(cl.done, func(v view) time.Time { return v.root.Cap(settleAt) }) {
		cancel(nil)
		c.noteAppend(cl)
		return
	}
	if !c.view().root.Hr().Before(settleAt) {
		// SettlementTimeout ended it, before Hr.
		cancel(errAppendTimeout)
		<-cl.done
		c.noteAppend(cl)
		return
	}
	c.behind = &inFlight{cl: cl, cancel: cancel}
}

// settleRecords waits for the append left running at Hr, then appends
// the records deferred behind it, all within one SettlementTimeout from
// now (SD-17). It runs once phases 1 to 5 are over, before the report is
// classified, so that CloseReconciled counts these records too.
func (c *Coordinator) settleRecords() {
	end := c.clk.Now().Add(c.settle)
	if b := c.behind; b != nil {
		c.behind = nil
		if !c.await(b.cl.done, func(view) time.Time { return end }) {
			b.cancel(errAppendTimeout)
			<-b.cl.done
		}
		b.cancel(nil)
		c.noteAppend(b.cl)
	}
	deferred := c.deferred
	c.deferred = nil
	for _, e := range deferred {
		c.appendWithin(e, end)
	}
}

// emitReport appends e, a record of phase 6, which waits only for its
// appends, each bounded by SettlementTimeout (SD-17): the report is
// published after Hr if phase 5 ran until it (SD-10).
func (c *Coordinator) emitReport(e Event) { c.appendWithin(e, c.clk.Now().Add(c.settle)) }

// appendWithin appends e, given up at end, unless the journal already
// failed.
func (c *Coordinator) appendWithin(e Event, end time.Time) {
	if c.jrn == nil || c.journalErr != nil {
		return
	}
	if err := c.bounded(end, c.appendFn(e)); err != nil {
		c.journalErr = err
	}
}

func (c *Coordinator) appendFn(e Event) func(context.Context) error {
	return func(ctx context.Context) error { return c.jrn.Append(ctx, e) }
}

// noteAppend records the outcome of a returned append.
func (c *Coordinator) noteAppend(cl *call) {
	switch {
	case cl.panicked:
		c.journalErr = errPanicked
	case cl.err != nil:
		c.journalErr = cl.err
	}
}

// noteForce records shutdown_force_requested once, the first time the
// coordinator sees force: while it waits for an action's call
// (awaitCall), or else before the phase record it is about to write.
func (c *Coordinator) noteForce() {
	if c.forceSeen {
		return
	}
	v := c.view()
	if !v.force.set {
		return
	}
	c.forceSeen = true
	c.emit(ForceRequested{Trigger: v.force.trigger, At: v.force.at})
}

func (c *Coordinator) phaseStarted(p Phase) {
	c.noteForce()
	c.emit(PhaseStarted{Phase: p, At: c.clk.Now()})
}

func (c *Coordinator) phaseFinished(p Phase, graceful, forced Outcome, actions []Action) {
	c.noteForce()
	c.emit(PhaseFinished{Phase: p, At: c.clk.Now(), Graceful: graceful, Forced: forced, Actions: actions})
}
