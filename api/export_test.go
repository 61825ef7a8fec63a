package api

import (
	"context"
	"os"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/scheduler"
	"github.com/quire-dev/quire/shutdown"
)

// JournalOf exposes an engine's journal to tests in package api_test.
func JournalOf(e *Engine) *journal.Journal { return e.j }

// SetAfterAppendHook installs f as the after-append hook for the engines
// opened afterwards; nil removes it. Tests using it must not run in parallel.
func SetAfterAppendHook(f func(seqs []uint64)) { testHookAfterAppend = f }

// InstallRoot installs a shutdown root on the engine's runner (DL-10,
// DL-25, SD-8), as the shutdown coordinator will.
func InstallRoot(e *Engine, root deadlines.Root) error {
	return e.r.InstallRoot(context.Background(), root)
}

// Force publishes reason to the engine's running attempts (DL-18).
func Force(e *Engine, reason deadlines.Reason) error {
	return e.r.Force(context.Background(), reason)
}

// Sync returns once the engine has acted on every deadline due at its
// clock's instant, without waiting for blocked handlers.
func Sync(e *Engine) error { return e.r.Sync(context.Background()) }

// Observe returns once the engine has acted on every deadline due at its
// clock's instant, without waiting for appends in flight (DL-39).
func Observe(e *Engine) error { return e.r.Observe(context.Background()) }

// WaitQuarantine returns once no abandoned goroutine or scope remains.
func WaitQuarantine(e *Engine) error { return e.r.WaitQuarantine(context.Background()) }

// QuarantineOf returns the engine's quarantine counts (DL-26).
func QuarantineOf(e *Engine) scheduler.QuarantineStats { return e.r.Quarantine() }

// CloseAdmission stops starting attempts, as shutdown phase 1 does (SD-12).
func CloseAdmission(e *Engine) error { return e.r.SetDispatch(context.Background(), false) }

// CloseEvidence runs shutdown phase 4's action alone (SD-15), without its
// record, as when the record waits behind one still being appended at Hr.
func CloseEvidence(e *Engine) error {
	return shutdownEngine{e}.CloseEvidence(context.Background(), shutdown.CloseRequest{DrainReconciled: true})
}

// Signal delivers s to the engine as Run's listener does (SD-20), without
// the operating system: the first SIGINT or SIGTERM initiates, a later
// signal forces. It reports whether the listener would stop.
func Signal(e *Engine, s os.Signal) bool { return e.signal(s) }

// SetStartupHook installs f as the startup-step hook for the engines opened
// or started afterwards; nil removes it. Tests using it must not run in
// parallel.
func SetStartupHook(f func(step string) error) { testHookStartup = f }

// Decided returns the seq of the last record the engine decided,
// acknowledged or not.
func Decided(e *Engine) (uint64, error) { return e.r.Decided(context.Background()) }

// SetPhaseStartedHook installs f to run after each shutdown phase's
// shutdown_phase_started is acknowledged; nil removes it. Tests using it
// must not run in parallel.
func SetPhaseStartedHook(f func(phase int)) { testHookPhaseStarted = f }

// SetUnitCaps lowers the journal's caps on one append, and on one group
// commit, to records and bytes (0 keeps a default) for an engine opened
// with o.
func SetUnitCaps(o *Options, records, bytes int) { o.unitRecordsMax, o.unitBytesMax = records, bytes }

// EffectiveOptions returns the options e runs with, defaults applied.
func EffectiveOptions(e *Engine) Options { return e.opts }

// SetSnapshotWriteHook installs f to run before each snapshot is written,
// for the engines opened afterwards; nil removes it. Tests using it must
// not run in parallel.
func SetSnapshotWriteHook(f func(seq uint64)) { testHookSnapshotWrite = f }

// SetSnapshotStartHook installs f to run as each snapshot goroutine
// starts, before it waits for the one before it, for the engines opened
// afterwards; nil removes it. Tests using it must not run in parallel.
func SetSnapshotStartHook(f func(seq uint64)) { testHookSnapshotStart = f }

// SnapshotHeld reports whether the engine's next append waits for a
// snapshot being written (RL-12).
func SnapshotHeld(e *Engine) (bool, error) { return e.r.SnapshotHeld(context.Background()) }

// SetInitiatedHook sets testHookInitiated; nil clears it.
func SetInitiatedHook(f func()) { testHookInitiated = f }

// ErrQueuesWithheld is close evidence's error when the drain was not
// reconciled.
var ErrQueuesWithheld = errQueuesWithheld

// SetDrainJoinHook sets testHookDrainJoin; nil clears it. Tests using it
// must not run in parallel.
func SetDrainJoinHook(f func()) { testHookDrainJoin = f }

// Watchers returns how many AwaitJob and AwaitWorkflow calls are waiting
// on a stream.
func Watchers(e *Engine) int { return e.r.Watchers() }

// JournalFailure reports err to the engine as a journal failure met off
// the runner's loop (a snapshot's commit, a checkpoint) reports it
// (RL-2, SD-23): a fail-stop of the journal stops the engine.
func JournalFailure(e *Engine, err error) { e.journalFailed(err) }
