package qctl_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

var (
	largeDir     = flag.String("large", "", "build a journal of -large-records records in this new directory, to measure inspect and verify on (see TestBuildLargeJournal)")
	largeRecords = flag.Int("large-records", 1_000_000, "records the -large journal holds")
)

// TestBuildLargeJournal builds, only when -large is given, a journal of
// completed jobs (job_enqueued, attempt_started, attempt_succeeded and its
// terminal-index entry per job) that replay accepts. Measure with:
//
//	go test ./qctl -run TestBuildLargeJournal -large /tmp/j1m -timeout 30m
//	go build -o /tmp/qctl ./cmd/qctl
//	/usr/bin/time -v /tmp/qctl inspect /tmp/j1m
//	/usr/bin/time -v /tmp/qctl verify /tmp/j1m
func TestBuildLargeJournal(t *testing.T) {
	if *largeDir == "" {
		t.Skip("set -large=DIR to build a large journal")
	}
	f := newFx(t, vfs.Default, *largeDir)
	defer f.close()
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_large", Version: "0.1.0", At: f.now()}))
	const jobsPerAppend = 333
	recs := make([]record.Record, 0, 3*jobsPerAppend)
	idx := make([]journal.IndexEntry, 0, jobsPerAppend)
	n := 0
	for left := *largeRecords - 1; left >= 3; {
		f.clk.Advance(time.Millisecond)
		now := f.now()
		seq := f.next()
		recs, idx = recs[:0], idx[:0]
		for k := 0; k < jobsPerAppend && left >= 3; k++ {
			id := fmt.Sprintf("job_%026d", n)
			n++
			recs = append(recs,
				rec(id, &record.JobEnqueued{JobID: id, Handler: "work", Queue: "default", AvailableAt: now,
					Retry: defaultRetry, DeliveryTimeoutNanos: int64(deliveryTTL), Payload: value(t, map[string]any{"n": n})}),
				rec(id, &record.AttemptStarted{JobID: id, Attempt: 1, StartAt: now, HardAt: now + int64(deliveryTTL), NormalAt: now + int64(deliveryTTL-time.Second)}),
				rec(id, &record.AttemptSucceeded{Outcome: record.Outcome{JobID: id, Token: seq + 1, Joined: true}}))
			sum, err := replay.EncodeSummary(replay.JobSummary{ID: id, Handler: "work", Queue: "default", Status: replay.JobCompleted,
				Attempts: 1, Consumed: 1, FinishedAt: now, Seq: seq + 2})
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, journal.IndexEntry{ID: id, Value: sum})
			seq += 3
			left -= 3
		}
		f.append(idx, recs...)
	}
	t.Logf("%s: %d records, %d jobs", *largeDir, f.j.LastSeq(), n)
}
