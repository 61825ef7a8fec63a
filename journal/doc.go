// Package journal is quire's append-only event log, stored in one Pebble
// store (DESIGN.md §3, spec/reliability.md).
//
// It owns: the key layout (e/ records, s/ per-stream index, x/ snapshots,
// t/ terminal index, m/ metadata); the write path, which groups concurrent
// appends into one synced batch, assigns consecutive seqs, stamps monotone
// times and chains each record to the previous one's checksum, and commits
// groups one at a time in seq order (writer.go says how); the read paths (Get, Scan, ScanStream, Index, Snapshots,
// Wait), which serve acknowledged data only and check every byte they read
// as hostile input; Checkpoint and Verify; and fail-stop: after a failed
// commit, a Pebble fatal error or detected corruption, every call returns
// ErrFailStop and the store is not touched again.
//
// It imports only journal/record, clock, Pebble (and cockroachdb/errors,
// to read Pebble's corruption marks at this boundary) and ulid, for the
// journal's engine id. It must not import
// replay, scheduler or api, and never reads the system clock: time comes
// from Options.Clock.
//
// # Usage
//
//	j, err := journal.Open("data/journal", journal.Options{Clock: clk})
//	if err != nil {
//		return err // *OptionError, ErrNotJournal, *CorruptError, ...
//	}
//	defer j.Close()
//
//	seqs, err := j.Append(ctx, record.Record{
//		Stream: "wf_01J...",
//		Body:   &record.WorkflowStarted{WorkflowID: "wf_01J...", Name: "import"},
//	})
//	if errors.Is(err, journal.ErrFailStop) {
//		// outcome unknown: stop the engine, reopen and replay
//	}
//
//	it := j.Scan(1, math.MaxUint64)
//	defer it.Close()
//	for it.Next() {
//		apply(it.Record())
//	}
//	if err := it.Err(); err != nil {
//		var ce *journal.CorruptError
//		if errors.As(err, &ce) {
//			log.Printf("seq %d of stream %q: %s", ce.Seq, ce.Stream, ce.Reason)
//		}
//	}
//
//	last, err := j.Wait(ctx, seqs[0]) // a follower: wait for more, then Scan
package journal
