package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// readShape tells groups apart by their At and counts the groups that
// carried attempt_started records, which is how the timers workload
// reports the batching of its starts.
func TestReadShapeCountsStartAppends(t *testing.T) {
	dir := t.TempDir()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	j, err := journal.Open(dir, journal.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	started := func(job string) record.Record {
		return record.Record{Stream: job, Body: &record.AttemptStarted{JobID: job, Attempt: 1}}
	}
	succeeded := func(job string) record.Record {
		return record.Record{Stream: job, Body: &record.AttemptSucceeded{Outcome: record.Outcome{JobID: job, Token: 1}}}
	}
	ctx := context.Background()
	for _, recs := range [][]record.Record{
		{started("a"), started("b")},
		{succeeded("a")},
		{succeeded("b"), started("c"), started("d"), started("e")},
	} {
		if _, err := j.Append(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := readShape(dir)
	if err != nil {
		t.Fatal(err)
	}
	if starts, appends := s.startsAfter(0); s.records != 7 || s.appends != 3 || starts != 5 || appends != 2 {
		t.Fatalf("shape = %d records in %d appends, %d starts in %d appends; want 7 in 3, 5 in 2",
			s.records, s.appends, starts, appends)
	}
	// After seq 2 (the first group, with a history's starts), the starts
	// of the third group alone.
	if starts, appends := s.startsAfter(2); starts != 3 || appends != 1 {
		t.Fatalf("startsAfter(2) = %d starts in %d appends, want 3 in 1", starts, appends)
	}
	if got, want := s.groupEnds, []uint64{2, 3, 7}; !slices.Equal(got, want) {
		t.Fatalf("groupEnds = %v, want %v", got, want)
	}
	o := newObj()
	s.setStarts(o, 0)
	if o.num("start_appends") != 2 || o.num("starts_per_start_append") != 2.5 {
		t.Fatalf("setStarts gave start_appends %v, starts_per_start_append %v; want 2 and 2.5",
			o.num("start_appends"), o.num("starts_per_start_append"))
	}
}
