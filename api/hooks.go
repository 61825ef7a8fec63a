package api

// testHookAfterAppend, when set by a test before Open, runs on the
// committer goroutine after each acknowledged append, before the engine
// learns of it: a crash test takes its crash image there, while no commit
// is in flight.
var testHookAfterAppend func(seqs []uint64)

// testHookStartup, when set by a test, runs at named startup steps
// ("replay", "recover", "ready", "start"); an error it returns fails the
// step, as an injected startup failure (SD-35).
var testHookStartup func(step string) error

// testHookPhaseStarted, when set by a test, runs after a shutdown phase's
// shutdown_phase_started is acknowledged, before the phase acts: a test
// makes work due there, in the window between the record and the phase's
// first action.
var testHookPhaseStarted func(phase int)

// testHookInitiated, when set by a test, runs once a shutdown's root is
// installed and ShutdownStarted is closed, before the coordinator goes on
// to phase 1: a test makes work startable in that window.
var testHookInitiated func()

// testHookSnapshotWrite, when set by a test before Open, runs on the
// snapshot goroutine before the snapshot at seq is written: a test blocks
// it there to hold a snapshot on its way.
var testHookSnapshotWrite func(seq uint64)

// testHookSnapshotStart, when set by a test before Open, runs on a
// snapshot goroutine as it starts, before it waits for the snapshot
// launched before it.
var testHookSnapshotStart func(seq uint64)

// testHookDrainJoin, when set by a test, runs when a shutdown's drain has
// seen every started attempt settled and goes on to wait for the
// goroutines that have not returned yet (SD-13): a test releases one
// there, while the drain waits for it.
var testHookDrainJoin func()
