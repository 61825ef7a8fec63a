package shutdown

import (
	"context"
	"time"

	"github.com/quire-dev/quire/deadlines"
)

// Engine is what the coordinator drives: the engine's admission, attempts,
// dispatcher, timers and queues. The api package implements it.
//
// Methods come in two kinds. Acts (InstallRoot, CloseAdmission,
// ForceAttempts, Revoke, Counters) change state or read it and never block: they
// are called on the coordinator's goroutine and, for InstallRoot, from the
// goroutine that initiates or shortens the shutdown. Waits (Drain,
// AwaitJoin, CloseEvidence) run on a goroutine of their own while the
// coordinator watches the clock; they must return promptly once their ctx
// ends, because the coordinator joins them before the next phase so that
// phases never overlap. A wait's ctx carries no Deadline (time is the
// injected clock's); it ends when the path's budget ends.
//
// The coordinator calls each method at most once per shutdown, except
// InstallRoot and Counters.
type Engine interface {
	// InstallRoot installs root over the engine's current root with
	// [deadlines.Root.Install], so that calls commute and cutoffs only
	// shorten (SD-5): every running attempt's budget is capped to Hr and its
	// handler deadline becomes min(P, G) (SD-8), and every waiter re-arms.
	// It is called at the first initiation and at every later install.
	InstallRoot(root deadlines.Root)

	// CloseAdmission is phase 1 (SD-12): readiness false first; then every
	// call that would create runnable work is refused with a typed error;
	// the dispatcher stops claiming, timers stop dispatching and the
	// workflow deadline check stops. Buffered work that never started is
	// dropped (DL-43); the result is how many attempts were dropped. It
	// records no reason on running attempts (DL-19). It is also called
	// when G has passed or force was requested: it must always close.
	CloseAdmission() (releasedUnstarted int)

	// Drain is phase 2, the drain's graceful path (SD-13). It returns nil
	// only once every started attempt is settled or released, every
	// attempt, cleanup and hook goroutine has returned and every attempt
	// scope is closed; zero counters alone are not that evidence. It
	// returns an error when ctx ends (at G, or on force) and must then
	// neither cancel nor abandon anything: the force path does that.
	Drain(ctx context.Context) error

	// ForceAttempts starts the drain's force path (SD-14, SD-22): it
	// publishes reason, stamped at (DL-16), to every running attempt that
	// has no reason yet, synchronously (DL-18), which starts their
	// cooperative windows (DL-22) and cleanup cutoffs (DL-30). It returns
	// the latest owner cutoff O of the attempts still running (DL-21,
	// [deadlines.Budget.OwnerCutoff]), or the zero time if none is.
	ForceAttempts(reason deadlines.Reason, at time.Time) (latestOwnerCutoff time.Time)

	// AwaitJoin is the waiting part of the drain's force path (SD-14): it
	// observes attempts settling in their cooperative windows and cleanup
	// (DL-41: force revokes nothing at once), the commit of every
	// settlement, the releases decided by Revoke included, and the real
	// return of every attempt, cleanup and hook goroutine. It returns nil
	// only when all of that is proven; an error when ctx ends (the drain's
	// force deadline) with goroutines still running, which stay
	// quarantined. It runs across the final abort: the coordinator calls
	// Revoke while AwaitJoin waits.
	AwaitJoin(ctx context.Context) error

	// Revoke is the final abort at the forced owner cutoff (SD-14, SD-24,
	// DL-41), called at most once, at that instant, while AwaitJoin waits
	// and before close evidence starts. For every attempt not yet settled,
	// in this order: (1) its settlement authority is revoked, so that
	// neither its owner nor a late return can settle it any more; (2) its
	// remaining execution and cleanup contexts are cancelled, an attempt
	// with no reason yet getting reason stamped at; (3) its token is
	// settled on the coordinator's behalf with attempt_released (or counted
	// Unresolved if the root has expired, DL-39). It is an act: it returns
	// once that is decided, without waiting for the commits or the
	// goroutines, which AwaitJoin observes. An attempt whose settlement
	// append already began is left alone (DL-42).
	Revoke(reason deadlines.Reason, at time.Time)

	// CloseEvidence is phase 4 (SD-15): stop the dispatcher and wait for its
	// acknowledgement until req.DispatcherStopBy (SD-9), join the
	// dispatcher and timer goroutines, close the internal queues, flush
	// and sync the journal. It returns nil only if all of that is proven by
	// real joins and a synced commit. Closing the queues is withheld unless
	// req.DrainReconciled and the joins succeeded (SD-18); a withheld close
	// is an error.
	CloseEvidence(ctx context.Context, req CloseRequest) error

	// Counters returns the engine's shutdown counters (SD-25) and whether
	// every goroutine it started was joined.
	Counters() Counters
}

// CloseRequest is the input of [Engine.CloseEvidence].
type CloseRequest struct {
	// DispatcherStopBy bounds the wait for the dispatcher's stop
	// acknowledgement: Hr − min((Hr − now)/4, 250 ms) (SD-9,
	// [deadlines.Root.DispatcherStopDeadline]).
	DispatcherStopBy time.Time
	// DrainReconciled is the report's DrainReconciled: when false the
	// internal queues' barrier is closed (SD-18).
	DrainReconciled bool
}

// StragglerLister is implemented by an [Engine] that can name the
// attempts whose handlers have not returned. After phase 5 the
// coordinator asks it, when the engine's counters show goroutines not
// returned, and appends one [Diagnostic] per attempt (at most
// [StragglersMax]) before the report, which only counts them (SD-25,
// SD-37).
type StragglerLister interface {
	// Stragglers returns one diagnostic per attempt whose handler has
	// not returned, Code [CodeHandlerNotReturned], in a stable order.
	Stragglers() []Diagnostic
}

// Counters are the engine's counts for the report (SD-25), read after the
// drain and again at classification.
type Counters struct {
	// Drained counts attempts settled during shutdown.
	Drained int
	// Released counts attempt_released settlements, revoked tokens
	// included ("pending redelivery").
	Released int
	// Unresolved counts settlement appends begun but not confirmed (DL-39,
	// DL-42).
	Unresolved int
	// Quarantined counts attempt, cleanup and hook goroutines the engine
	// stopped waiting for that have not returned (DL-26).
	Quarantined int
	// Joined is true if every attempt, cleanup and hook goroutine the engine
	// started was observed to return: a real join, not a zero counter.
	Joined bool
}

// Journal appends the shutdown records (SD-11, SD-17). The api implements
// it on the engine's journal. Each call gets a ctx that ends after
// SettlementTimeout on the injected clock and must return promptly once it
// ends. After the first error the coordinator appends nothing more: the
// remaining records are skipped, the phases still run, and the report has
// CloseReconciled = false (or, for an error in phase 6, the result of
// Shutdown carries it).
type Journal interface {
	// Append appends and syncs the record of e.
	Append(ctx context.Context, e Event) error
	// Close closes the journal at the end of phase 6, after the report's
	// append (SD-17, SD-18). It is called even if an append failed.
	Close(ctx context.Context) error
}

// OwnedResource is a resource the application handed the engine to own and
// dispose (SD-16, SD-19). Phase 5 closes owned resources once each, in
// reverse order of hand-over, behind the barrier of SD-18.
type OwnedResource struct {
	// Name identifies the resource in diagnostics.
	Name string
	// CloseFunc disposes the resource. When its turn comes at now it gets
	// the fair share now + (Hr − now)/k of the root time left, where k
	// counts the calls of phase 5 not yet run, this one included (SD-9);
	// its ctx ends when that share or the action's force deadline ends; a
	// CloseFunc still running then is abandoned (quarantined), and the
	// resources handed over before it are not closed, since it may still
	// use them (SD-37).
	CloseFunc func(ctx context.Context) error
}

// Telemetry is telemetry the engine owns: flushed, then closed, last in
// phase 5 (SD-16, SD-18). Either function may be nil, not both.
type Telemetry struct {
	// FlushFunc flushes what the telemetry buffers.
	FlushFunc func(ctx context.Context) error
	// CloseFunc closes the telemetry and joins its worker goroutines.
	CloseFunc func(ctx context.Context) error
}
