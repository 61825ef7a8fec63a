// Package shutdown owns quire's controlled shutdown (spec/shutdown.md): the
// root budget anchored at the first initiation, the six ordered and
// journaled phases, force, and the immutable report with its
// classification.
//
// A [Coordinator] drives the engine through the small [Engine] interface,
// which package api implements, and writes its records through a
// [Journal] as [Event] values, which api maps to journal records. The
// phases run strictly in order on the coordinator's goroutine (SD-11):
//
//	1 close_admission    Engine.CloseAdmission
//	2 drain              Engine.Drain until G or force
//	3 force              Engine.ForceAttempts, Engine.AwaitJoin until the drain's force deadline,
//	                     Engine.Revoke at the forced owner cutoff in between (DL-41)
//	4 close_evidence     Engine.CloseEvidence
//	5 release_resources  owned resources (reverse hand-over), signal monitor, telemetry,
//	                     each call with its fair share of the root time left
//	6 publish_report     classify, publish in memory, append, close the journal
//
// Every deadline is an absolute instant of the injected clock, derived from
// one [deadlines.Root] (SD-2..SD-8): graceful paths run until G, force
// paths until min(now + reserve', Hr), and a phase waits for the append
// of one of the shutdown's own records until min(now + SettlementTimeout,
// Hr), following Hr as installs shorten it (SD-5). An append still running
// at Hr is left to finish: the records after it, and those written once Hr
// has passed (the closing records of a phase cut at Hr), wait behind it.
// Nothing waits past Hr except the joins of quire's own waits, which
// return once their context ends, and the end of the shutdown: before the
// report, the records left behind are settled within one
// SettlementTimeout, and phase 6's appends and journal close are each
// bounded by SettlementTimeout alone (SD-17).
// Outcomes are decided by comparing the instant a call returned with its
// path's deadline, so a late observation never changes them. User code
// (owned resources, the signal monitor's stop, telemetry) that overruns its
// force deadline or its share of phase 5 is abandoned and tracked as
// quarantined: the report is then Incomplete and nothing it may use is
// disposed (SD-37).
//
// A startup that fails part-way rolls back through the same coordinator
// ([Coordinator.RollBack], SD-35): one root, the same phases, trigger
// startup_failure.
//
// The [Report] is classified once by [Classify] (SD-30) and stored in a
// write-once [Published]; accessors hand out fresh copies (SD-32).
//
// It must not import any quire package but deadlines and clock.
//
// # Usage
//
//	c, err := shutdown.New(shutdown.Options{
//		Clock:           clk,
//		Engine:          eng, // the api's shutdown.Engine
//		Journal:         jrn, // the api's shutdown.Journal
//		ShutdownTimeout: 30 * time.Second,
//		OwnedResources:  []shutdown.OwnedResource{{Name: "db", CloseFunc: closeDB}},
//	})
//	if err != nil {
//		return err
//	}
//
//	// First SIGTERM: initiate (the root starts now); a second signal forces.
//	c.Initiate(shutdown.TriggerSigterm)
//	_ = c.Force(shutdown.TriggerSigterm)
//
//	// Any number of observers share one result.
//	err = c.Shutdown(ctx)
//	if rep := c.Report(); rep != nil {
//		log.Printf("completion=%s success=%t", rep.Completion, rep.IsSuccess())
//	}
package shutdown
