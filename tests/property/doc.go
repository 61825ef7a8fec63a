// Package property holds quire's cross-package property tests (rapid
// state machines over the journal, replay and the engine) and indexes the
// fifteen reliability tests of spec/reliability.md §6, wherever they live.
// Rerun a failure with rapid's flags, one package at a time:
// go test ./tests/property -run <Test> -rapid.seed=S (also -rapid.checks,
// -rapid.steps, -rapid.failfile). The sim tests read QUIRE_SEEDS=N for
// long runs and QUIRE_SEED=S for one seed.
//
// | #   | Test(s)                                                          | Package          |
// |-----|------------------------------------------------------------------|------------------|
// | T1  | TestT1_KillDuringAppends; TestT1_JournalModel; TestT1_KillDuringAppends; TestEngineCrash_* | journal; tests/property; sim; api |
// | T2  | TestT2_MultiRecordAtomicity                                      | journal          |
// | T3  | TestT3_WALFaultFailStop (both)                                   | journal; sim     |
// | T4  | TestT4_WriteFaultsEverywhere (a child process per write op)      | journal          |
// | T5  | TestT5_MidJournalBitFlip                                         | journal          |
// | T6  | TestT6_TornFinalRecord                                           | journal          |
// | T7  | TestT7_EnvelopeAndChain                                          | journal          |
// | T8  | TestT8_*, FuzzDecodeRecord, FuzzPrescan                          | journal/record   |
// | T9  | TestT9_Determinism; TestT9_DeterminismWithDurations (step mode)  | sim              |
// | T10 | TestT10_ReplayEqualsLive; TestT10_SnapshotPlusTail; TestRL7_MachineLiveEqualsReplay | sim; tests/property; scheduler |
// | T11 | TestT11_GoldenJournals (images from TestT11_WriteGolden)         | tests/golden     |
// | T12 | TestT12_ClockJumps                                               | sim              |
// | T13 | TestT13_* (budget, caps, root, backoff, extreme inputs)          | deadlines        |
// | T14 | TestT14_ExecutionAndSettlement; TestEngineCrash_*                | sim; api         |
// | T15 | TestT15_SlowDisk (trace); TestT15_DiskSlowReachesMetrics         | sim; journal     |
//
// Other properties here: TestSchedulerModel (random enqueue, dispatch,
// signal, advance, jump, crash and restart against a model of acknowledged
// work, under the sim oracle); TestMixedCrash_Workload,
// TestMixedCrash_ManyWorkers (three workers) and
// TestMixedCrash_Determinism (Parallel, SubWorkflow, WaitForWorkflows,
// signals, delays and deadlines with on-deadline handlers beside workflow
// and queue controls, unique and follow-up jobs, under crashes, shutdowns,
// disk faults and clock jumps, with end-state checks). Replay's own totality property is
// replay's TestRL6_FoldIsTotal.
package property
