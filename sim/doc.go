// Package sim is quire's deterministic simulation harness, for quire's own
// reliability tests and for applications that want to test their
// workflows under crashes and a fake clock.
//
// [New](seed, ...) builds a [World]: the production engine (api, journal,
// scheduler, replay) on a crashable in-memory Pebble filesystem, under a
// clocktest manual clock starting at [T0], with ULID entropy, retry
// jitter, crash images and the workload all drawn from the seed through
// separate sources (so draws added to one leave the others unchanged).
// The caller registers handlers and workflows with [Setup] or
// [World.Register]; they are registered again on every instance the
// world opens after a crash or restart.
//
// sim imports only api, clock, clocktest, journal, journal/record, replay,
// deadlines and Pebble's vfs packages; it never reaches into scheduler or
// the engine's internals (the one hook it uses, [api.SimJournal], reads
// the journal).
//
// # Usage
//
//	func TestPayment(t *testing.T) {
//		sim.Run(t, 20, func(w *sim.World) {
//			w.Register(registerPayment(w)) // the application's handlers and workflows
//			id := w.Dispatch("payment", api.State{"amount": 100})
//			w.Crash()
//			w.Advance(30 * time.Minute)
//			w.Signal(id, "approved", nil)
//			w.Advance(3 * time.Hour)
//			if s := w.Workflow(id).Status; s != api.WorkflowCompleted {
//				t.Fatalf("payment %s", s)
//			}
//		})
//	}
//
// # Steps
//
// A scenario is a sequence of steps, run on the caller's goroutine:
// [World.Enqueue], [World.Dispatch], [World.Signal], [World.Do] (any
// other API call), [World.Advance] and [World.AdvanceTo] (the clock moves
// from timer instant to timer instant, so each timer fires at its own
// instant), [World.Jump] and [World.JumpBack] (clock jumps), [World.Crash]
// and [World.CrashWith] (kill and reopen on a crash image),
// [World.Shutdown] and [World.Restart] (graceful), [World.DiskFault]
// (a failed WAL commit: fail-stop, crash, reopen), and [World.At] +
// [World.Run], an event loop over a heap keyed by (instant, scheduling
// order). Handlers decide their outcome from the seed with
// [World.Fails], never from scheduling. Each step ends when the engine is
// quiescent (Engine.WaitIdle); then the oracle checks it and the step is
// mixed into the trace hash.
//
// # Oracle
//
// The oracle is fed only what the engine acknowledged: ids returned by API
// calls and journal records made durable at quiescent points. A record
// found after a crash beyond the last acknowledged seq is a "maybe" and is
// adopted; an acknowledged one must be present and unchanged; one never
// submitted cannot appear. After every step it checks: nothing
// acknowledged lost (jobs, workflows, records; so shutdown reports never
// change); seqs gap-free and instants monotone; at most one settlement per
// attempt token, only for the job's open attempt (fencing); no attempt
// before its job is available and no delay step completed before its
// instant (timers never early); each workflow deadline expiring at most
// once per run, never early and never moved; budgets never negative
// (H >= S, P <= H, retry delays >= 0); live state digest equal to the fold
// of the acknowledged records. Before every reopen it audits the journal
// read-only.
//
// # Reproduction
//
// With [WithT], a world logs its seed, and a failure reports the seed,
// step, trace hash, the directory where the current filesystem and the
// last crash image were copied ($QUIRE_SIM_OUT/quire-sim-0x<seed>, default
// the OS temp directory; open it with qctl), and the command to rerun the
// seed alone: QUIRE_SEED=0x... go test -run <Test> <pkg>. [Seeds] reads
// QUIRE_SEEDS=N (seed count per test, e.g. 10000 for a soak) and
// QUIRE_SEED=S; -short divides the default count by 10. [Run] runs a
// scenario per seed; [Check] is the determinism check (T9): three runs per
// seed, the last under GOMAXPROCS=1, equal step traces and final digests.
//
// # Limits
//
// The engine is not in a step mode: its loop, committer and handlers run
// on their own goroutines, and Pebble has background goroutines. The
// harness gets determinism from barriers instead: one worker (attempts run
// one at a time), handlers that run to completion without blocking on
// time or IO, a quiescent engine at the end of every step, and crash
// images taken only there. So:
//
//   - Group commit boundaries are not drawn from the seed, and crashes and
//     faults happen between steps, never inside a commit; kill points
//     inside an append are api's TestEngineCrash_* tests (after-append
//     hook). Everything submitted is acknowledged at a step boundary, so
//     "maybe" records only arise from images that keep unsynced data.
//   - Handlers have no simulated duration: time spent in a step is
//     modelled with retries and backoff (see TestWD12_Scenarios), and
//     scenarios in which attempts run while the clock moves (the DL-22,
//     DL-34 and SD-10 tables) stay in api's and shutdown's tests.
//   - Disk faults are one kind: [World.DiskFault] fails the WAL commit of
//     one enqueue (fail-stop, then a crash image and a reopen). Bit flips
//     and truncations of images are journal's T5 and T6. [SlowDisk] adds
//     real write latency, which must not change the trace (T15).
//   - A partial crash image (1..99 %) is built by the harness from two
//     CrashClone images, block by block in sorted path order, so it
//     reproduces; it keeps or drops whole unsynced files, not directory
//     entries separately.
//   - Forced shutdown is not a step yet; the SD-10 timelines are api's and
//     shutdown's tests.
//   - Handlers must not use more than one worker's worth of concurrency:
//     with Options.Workers > 1 (via [EngineOptions]) the order of ULID and
//     jitter draws, hence the trace, may vary between runs.
//   - CrashClone is called only at quiescent points, where no commit,
//     open, flush or checkpoint is in progress; snapshots are disabled
//     (SnapshotEvery at its maximum) because they are written in the
//     background. A stuck engine fails the step after 60 s of real time.
package sim
