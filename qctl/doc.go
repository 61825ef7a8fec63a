// Package qctl is the command logic of the qctl tool (docs/DESIGN.md §7): it
// answers "what happened, what is stuck, what will fire next, did the last
// shutdown succeed" from a journal directory alone, with no engine running.
//
// It owns the command line (kong), the commands (inspect, workflows, jobs,
// show, events, timers, deadlines, shutdowns, verify, state) and their two
// output forms: aligned tables for people and one JSON object per line for
// machines. Every command writes to the io.Writers of its [Env]; the
// program in cmd/qctl only wires the process to [Main].
//
// It reads through journal, journal/record and replay, and imports neither
// api nor scheduler: journals are opened read-only (journal.Options), and
// commands that change a journal belong to api. Read-only still takes the
// journal's lock, so that no engine opens a directory qctl reads: that
// creates the LOCK file where there is none and rewrites it. It never reads the wall clock: the
// instant that remaining and overdue times are measured against comes in
// through [Env.Now] (or --now), and progress pacing through
// [Env.ElapsedFunc].
//
// Commands that replay the log fold it as the engine's Open does
// (replay.FoldQuarantining over the journal's quarantining scan): a
// record that fails its checks and that the journal's index attributes to
// one job's or workflow's stream sets that stream aside
// (spec/reliability.md §4.4). They print the other streams in full and
// that stream's jobs and workflow with status corrupt, as of its last
// good record; inspect lists what was set aside, and they exit 1. events,
// which lists records without replaying them, reads past such a record
// through the same scan, lists it with kind unknown and the damage, and
// exits 1 too. Damage that leaves the order in doubt (in the engine's
// stream, a missing record, a record the index does not name, a chain
// broken between two sound records) refuses the journal, as Open does.
//
// Exit codes are stable, and mean the same for every command, so that a
// script can branch on them:
//
//   - 0 [ExitOK]: the command ran and found nothing wrong.
//   - 1 [ExitFindings]: the output is complete and shows a problem: verify
//     found one, replay refused a record or set a damaged stream aside,
//     events listed a damaged record, shutdowns listed a shutdown that did
//     not succeed (SD-26, SD-30).
//   - 2 [ExitUsage]: bad flags or arguments.
//   - 3 [ExitNotFound]: no job or workflow with show's id, no seq --at.
//   - 4 [ExitLocked]: an engine or another qctl holds the directory
//     (journal.ErrLocked).
//   - 5 [ExitUnreadable]: the journal cannot be opened or read: a missing
//     directory, a file, no journal, a newer format, no permission, damage
//     that leaves the order in doubt.
//   - 6 [ExitAborted]: interrupted, or the output could not be written.
//
// Inside the package a failure is an *exitError that carries its code and
// the error behind it; codes are chosen from the journal's typed errors
// (errors.Is on journal.ErrLocked, journal.ErrCorrupt, ...), never from
// message text.
//
// # Usage
//
//	code := qctl.Main(ctx, []string{"inspect", "data"}, qctl.Env{
//		Stdout: os.Stdout,
//		Stderr: os.Stderr,
//		Now:    now, // the caller's clock
//	})
//	os.Exit(code)
package qctl
