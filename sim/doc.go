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
// sim imports only api, clock, clocktest, deadlines, journal,
// journal/record, replay, shutdown and Pebble's vfs packages; it never
// reaches into scheduler or the engine's internals (the hooks it uses,
// [api.SimJournal] and [api.SimLive], read the journal and the ids the
// engine holds in memory).
//
// # Usage
//
//	func TestPayment(t *testing.T) {
//		sim.Run(t, 20, func(w *sim.World) {
//			w.Register(registerPayment(w)) // the application's handlers and workflows
//			id := w.Dispatch("payment", api.State{"amount": 100})
//			w.Crash()
//			w.Advance(30 * time.Minute)
//			w.Signal(id, "approved", nil) // within the 2 h deadline
//			w.Advance(3 * time.Hour)
//			// What holds on every seed: approved in time, the payment never
//			// expires; it completes, or fails because the flaky bank call
//			// ran out of attempts (the seed decides).
//			switch info := w.Workflow(id); {
//			case info.Status == api.WorkflowCompleted:
//			case info.Status == api.WorkflowFailed && info.Error != api.MessageDeadlineExceeded:
//			default:
//				w.T().Fatalf("payment %s: %s %q", id, info.Status, info.Error) // the seed's subtest, not t
//			}
//		})
//	}
//
// A scenario asserts through [World.T], the subtest of its seed (or
// passes it to helpers that take a testing.TB): a failure there is the
// seed's, reported as "Reproduction" describes, and [Run] stops at it.
// (World.T is nil for a world built by [New] without [WithT]; [Run] and
// [Check] always give one.) A
// handler may assert through [World.T] too (Errorf; Fatalf ends only the
// handler's goroutine): the world reports the failure at the end of the
// step the handler ran in, naming that step, and stops the scenario
// there. A failure of the outer t during a seed is charged to the seed
// too, but t.Fatalf there also ends the whole test, which the testing
// package reports as a subtest calling FailNow on its parent.
//
// # Steps
//
// A scenario is a sequence of steps, run on the caller's goroutine:
// [World.Enqueue], [World.Dispatch], [World.Signal], [World.Do] (any
// other API call), [World.Advance] and [World.AdvanceTo] (the clock moves
// from instant to instant, stopping at every engine timer and at the end
// of every parked work, so each fires at its own instant; an advance that
// would need more than [AdvanceStopsMax] stops, 1<<20 by default, fails
// the world rather than jump), [World.Jump]
// and [World.JumpBack] (clock jumps), [World.Crash] and [World.CrashWith]
// (kill and reopen on a crash image), [World.Shutdown] and
// [World.Restart] (graceful), [World.BeginShutdown], [World.Force] and
// [World.ForceShutdown] (a shutdown that runs while the clock moves,
// forced after a while or at once), [World.DiskFault] (a failed WAL
// commit: fail-stop, crash, reopen), and [World.At] + [World.Run], an
// event loop over a heap keyed by (instant, scheduling order). Handlers
// decide their outcome from the seed with [World.Fails], never from
// scheduling. Each step ends at a quiescent point; then the oracle checks
// it and the step is mixed into the trace hash: its name, instant and
// live state digest, and every journal record it appended (so the trace
// also sees work that has finished, which the digest no longer covers).
//
// Steps and the engine accessors ([World.Job], [World.Workflow],
// [World.Engine]) belong to the scenario's goroutine. A handler, guard,
// middleware or hook that calls one while a step runs fails the world,
// at that step, with a message saying so (it would otherwise wait for
// itself); handlers use only [World.Take], [World.Fails], [World.Now],
// [World.Seed] and [World.T]. After [World.Finish], every step and engine
// accessor fails the world: none reopens the engine.
//
// # Simulated durations
//
// A handler, guard, middleware or termination hook "takes" simulated
// time with [World.Take](ctx, key, d, mode): it parks in the world until
// the clock has moved d past the instant of the call. With [Cooperate] it
// returns early, with the context's cause, once the engine cancels its
// context (an attempt's at its notification instant, a hook's at its
// fair-share deadline); with [Ignore] it runs to its end and the engine
// may abandon it meanwhile (DL-26). Only the world wakes parked work, one
// at a time and only at quiescent points, in key order; each wake-up is a
// step of its own in the trace, checked by the oracle. [World.Works]
// lists every take with its start and end instants, so tests read hook
// deadlines from it and the rest from the journal ([World.Records]). A
// crash ends the parked work of the dead instance: its goroutine exits
// without returning, as a killed process's would. Take is for code the
// engine runs during a step; called from the scenario it fails the
// world (nothing could wake it). TestDL21_DL22_*,
// TestDL22_DL23_*, TestDL34_* and TestSD10_* replay the worked examples
// of spec/delivery.md and spec/shutdown.md this way.
//
// # Step mode
//
// The engine's loop, committer and handlers run on goroutines of their
// own, so the world decides when to act by finding quiescent points. In
// step mode ([StepMode], and in every world once work has been parked in
// Take or while a shutdown runs) a quiescent point is one where every
// goroutine of the process other than the world's waits for another
// goroutine (a channel, select, lock or cond), read from one
// stop-the-world goroutine dump: the engine never waits on real time, so
// nothing can happen until the world acts. The world is then the only
// source of events (an API call, a clock move, one wake-up), and each
// event's consequences run to the next quiescent point before the next
// event. So:
//
//   - Crashes land only between steps: crash images are taken only at
//     quiescent points, where no commit, open, flush or checkpoint is in
//     progress, and every record decided is acknowledged. So a crash
//     ([World.Crash], [World.CrashWith]) interrupts only handlers parked
//     in [World.Take]: a handler that does a side effect and returns at
//     once has always returned, and its settlement is durable, when the
//     crash lands, so its lack of idempotence is never exposed. To expose
//     it, make the handler take time after the side effect (side effect,
//     then w.Take(...)) and crash while it is parked: the attempt dies
//     unsettled and runs again after the reopen ([World.Take]'s example).
//   - For the same reason the share of unsynced data a crash keeps
//     changes nothing today: the journal acknowledges a record only once
//     its commit is synced, so at a quiescent point nothing it wrote is
//     unsynced, and CrashWith(0), CrashWith(37) and CrashWith(100) reopen
//     on the same records. The share matters only for data some future
//     engine or Pebble version would leave unsynced at a quiescent point.
//   - Group commit boundaries are those the engine's own decisions make
//     from one event, so they repeat with the seed; they never depend on
//     two sources racing the committer. (We chose quiescence over having
//     the harness hold each WAL sync: holding a commit blocks the API
//     call that waits for it on the world's own goroutine.)
//   - Outside step mode a quiescent point is the engine's WaitIdle
//     (nothing running, everything acknowledged), which is equivalent
//     while no work is parked and no shutdown runs, and cheaper: the dump
//     grows with the goroutines of fail-stopped instances, which keep
//     Pebble open by design (RL-2).
//
// # Oracle
//
// The oracle is fed only what the engine acknowledged: ids returned by API
// calls and journal records made durable at quiescent points (all of a
// shutdown's records once it returned). A record found after a crash
// beyond the last acknowledged seq is a "maybe" and is adopted; an
// acknowledged one must be present and unchanged; one never submitted
// cannot appear. After every step and wake-up it checks: nothing
// acknowledged lost (jobs, workflows, records; so shutdown reports never
// change); seqs gap-free and instants monotone; at most one settlement
// per attempt token, only for the job's open attempt (fencing; a new run
// revokes the attempts the last one left open, DL-44); no handler call
// without an acknowledged attempt_started (RL-10); no attempt before its
// job is available and no delay step completed before its instant
// (timers never early); each workflow deadline expiring at most once per
// run, never early and never moved; every attempt deadline firing once
// and never early: a deadline-driven reason stamped with its notification
// instant N (DL-16), an abandonment no earlier than the cooperative
// deadline C (DL-22), and no attempt still open at its hard cutoff H
// (under the shutdown root the journal shows); budgets never negative;
// memory holding exactly the unfinished work (every job until its
// attempt_succeeded or a final burial: a job_buried or attempt_buried
// marked Final, or, for a buried step job, its workflow's
// workflow_completed or workflow_cancelled marked ArchiveBuried; every
// workflow until completed or cancelled: the engine's ids,
// [api.SimLive], against the journal); no running or paused workflow
// whose step's current entry has a buried job (WF-20; the buried jobs of
// an entry before a retry, WF-18, are not the step's); live state digest
// equal to the fold of the acknowledged records. Before every reopen it
// audits the journal read-only. When a shutdown returns, the world checks
// that a second Shutdown gives the same result, that the published report
// does not change and that the journaled report is the returned one
// (SD-21, SD-26, SD-33); [World.LastShutdown] keeps it.
//
// # Failures
//
// A world keeps its first failure, which [World.Err] returns (and [WithT]
// reports to the test); every step after it does nothing. Its message
// names the seed, the step and the instant. It wraps [ErrViolation] when
// the engine broke a guarantee, [ErrMisuse] when the scenario or a handler
// used the world wrongly (a step from a handler or after [World.Finish], a
// nil function, a negative duration, an option the world cannot honour, a
// [World.Do] that shuts the engine down or closes it),
// and the engine's own error when it reports one, so errors.Is(w.Err(),
// api.ErrUnknownHandler) holds for an enqueue of an unknown handler.
// Steps that return an error ([World.Do], [World.Signal],
// [World.Shutdown], [World.ForceShutdown]) return the world's failure
// when they do not run, never nil.
//
// # Reproduction
//
// With [WithT], a world logs its seed, and a failure, the world's own (an
// oracle violation, an unexpected error) or the test's while the world
// runs (an assertion through [World.T]), reports the seed, step, trace
// hash, the journal images and the command to rerun the seed alone, from
// the package's directory with a -run pattern anchored at every level:
//
//	cd <package directory> && QUIRE_SEED=0x... go test -run '^TestX$/^seed=0x...$' .
//
// The images are copied under $QUIRE_SIM_OUT/quire-sim-<test>-0x<seed>
// (default the OS temp directory; <test> is the test's full name with
// every character other than letters, digits, '.', '_' and '-' replaced
// by '_', so that two tests failing on one seed keep their own):
// current/ is the journal at the failure with every write kept (what a
// process killed there leaves on a disk that loses nothing), and
// last-crash-image/ what the world's last crash left, which the engine
// reopened on. Each is printed as the qctl command that inspects it
// ("qctl --now <instant> inspect <dir>", measuring timers and deadlines
// against the world's simulated instant), once it has opened read-only
// as a journal, or
// with the reason there is none. [Seeds] reads
// QUIRE_SEEDS=N (seed count per test, e.g. 10000 for a soak) and
// QUIRE_SEED=S; -short divides the default count by 10. [Run] runs a
// scenario per seed; [Check] is the determinism check (T9): three runs per
// seed, the last under GOMAXPROCS=1, equal step traces and final digests.
// A divergence names the first step that differs and the first journal
// record that differs (seq, kind, stream, both versions). A world built by
// [New] without [WithT] has no test to log to: its seed is the one the
// caller passed to New, which the caller prints (RL-8), and the message of
// [World.Err] begins with it.
//
// # Limits
//
//   - Kill points inside an append are api's TestEngineCrash_* tests
//     (after-append hook); a world crashes only at quiescent points, so
//     "maybe" records only arise from images that keep unsynced data,
//     which the journal does not leave there today (see "Step mode").
//   - Handlers that block on anything but [World.Take] (a channel of the
//     test's, real IO) look quiescent in a world made with [StepMode], where
//     the goroutine dump alone finds quiescent points, and stall in any
//     other, which waits for the engine to be idle first; the watchdog
//     fails such a world after 60 s of real time.
//   - A quiescent point in step mode needs every goroutine of the test
//     binary to wait, the world's or not. Worlds in tests run with
//     t.Parallel take turns looking for theirs (one waits on a lock while
//     another looks), so they pass, though no faster than one after the
//     other. A goroutine of another test that computes, sleeps or stays in
//     a system call holds back every quiescent point until it stops, and
//     after 60 s of it the watchdog fails the world, listing the
//     goroutines that were not waiting. (The receiver goroutine that the
//     process's first signal.Notify starts, Engine.Run's included, waits
//     for a signal in a system call and counts as waiting; so do the CPU
//     profile's writer and the execution trace's reader that go test
//     -cpuprofile and -trace start.)
//   - Engine-internal concurrency that one event starts (a quarantined
//     execution returning while hooks run) can still order its records
//     differently between runs; T9 covers the workloads here, including
//     durations and shutdowns. On-deadline handlers (WD-10) are not such
//     concurrency: the engine starts one beside whatever attempt the same
//     event made runnable, and the world holds it until the next
//     quiescent point, then runs it in a turn of its own (a step of the
//     trace, "turn deadline/<workflow id>/<expiry seq>", not a [Work]).
//   - Disk faults are one kind: [World.DiskFault] fails the WAL commit of
//     one enqueue (fail-stop, then a crash image and a reopen). Bit flips
//     and truncations of images are journal's T5 and T6. [SlowDisk] adds
//     real write latency, which must not change the trace (T15).
//   - A partial crash image (1..99 %) is built by the harness from two
//     CrashClone images, block by block in sorted path order, so it
//     reproduces; it keeps or drops whole unsynced files, not directory
//     entries separately.
//   - A world runs one worker by default. With more (Options.Workers set
//     by [EngineOptions] to 2 or more, or to zero, the engine's default
//     of 16) as many attempts start together and overlap in simulated
//     time, but their code runs one at a time: each first waits, in the
//     world's middleware, for a turn of its own (a trace step "turn
//     attempt/<job id>/<attempt>"), so the order of their records and of
//     the ULID and jitter draws they cause, hence the trace, repeats.
//     Such a world finds its quiescent points in step mode from its first
//     attempt, which costs more per step. Goroutines a handler starts
//     itself are outside the turns.
//   - Snapshots are disabled (SnapshotEvery at its maximum) because they
//     are written in the background; snapshot + tail is covered by the
//     replay properties.
//   - testing/synctest cannot host a world: [New] called inside a bubble
//     fails the world at once. The goroutine that runs the bubble waits
//     in a state (synctest.Run) that step mode cannot count as blocked, so
//     no quiescent point would come, and the watchdog's timer would run on
//     the bubble's clock, which does not move while the world polls: the
//     world would hang until go test's timeout. (The journal also pools
//     channels, which a bubble would own.) A world has its own fake clock.
//   - Each [World.DiskFault] leaves the fail-stopped instance's Pebble
//     open, since the engine makes no further call into it, Close
//     included (RL-2): about eight blocked goroutines of Pebble's stay in
//     the process after [World.Finish], until the test binary exits, and
//     make every later step-mode dump of the process longer.
package sim
