package sim_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// plant installs a before-reopen hook that appends, to the journal the
// engine is about to reopen, what forge returns for the first record it
// accepts: the write a buggy engine would have made before it stopped.
func plant(t *testing.T, forge func(r record.Record) (record.Record, bool)) *bool {
	t.Helper()
	planted := new(bool)
	sim.SetBeforeReopenHook(func(fs vfs.FS) {
		if *planted {
			return
		}
		j, err := journal.Open(sim.Dir, journal.Options{FS: fs, Clock: clocktest.New(sim.T0.Add(1000 * time.Hour))})
		if err != nil {
			t.Errorf("plant: open: %v", err)
			return
		}
		defer j.Close()
		it := j.Scan(1, math.MaxUint64)
		var bad record.Record
		found := false
		for it.Next() && !found {
			bad, found = forge(it.Record())
		}
		if err := it.Err(); err != nil {
			t.Errorf("plant: scan: %v", err)
		}
		it.Close()
		if !found {
			return
		}
		if _, err := j.Append(context.Background(), bad); err != nil {
			t.Errorf("plant: append: %v", err)
			return
		}
		*planted = true
	})
	t.Cleanup(func() { sim.SetBeforeReopenHook(nil) })
	return planted
}

// expectCaught runs a short scenario with one restart and expects the
// oracle to fail naming want.
func expectCaught(t *testing.T, planted *bool, want string) {
	t.Helper()
	w := sim.New(2) // no WithT: the failure is collected, not reported
	register(w)
	w.Enqueue("work", msg{N: 1})
	id := w.Dispatch("flow", api.State{})
	w.Advance(2 * time.Hour)
	w.Signal(id, "go", nil) // past the 1 h deadline: the workflow expires (WD-11)
	w.Advance(time.Minute)
	w.Restart()
	w.Advance(time.Minute)
	err := w.Finish()
	if !*planted {
		t.Fatal("the bug was not planted: no record to forge from")
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the oracle missed the planted bug: err = %v, want %q", err, want)
	}
	t.Logf("caught: %v", err)
}

// TestPlantedBug_SettlementWithoutFencing plants a second settlement of
// an already settled attempt token, as an engine that settles without
// checking the token against the job's open attempt would write it. The
// oracle must catch it at the reopen audit.
func TestPlantedBug_SettlementWithoutFencing(t *testing.T) {
	planted := plant(t, func(r record.Record) (record.Record, bool) {
		s, ok := r.Body.(*record.AttemptSucceeded)
		if !ok {
			return r, false
		}
		dup := *s
		return record.Record{Stream: r.Stream, Body: &dup}, true
	})
	expectCaught(t, planted, "settled twice")
}

// TestPlantedBug_RetryExtendsDeadline plants a workflow expiry whose
// deadline was pushed an hour later, as an engine whose retry re-arms the
// workflow deadline from the retry instant would record it. The oracle
// must catch it: a deadline never moves.
func TestPlantedBug_RetryExtendsDeadline(t *testing.T) {
	planted := plant(t, func(r record.Record) (record.Record, bool) {
		x, ok := r.Body.(*record.WorkflowDeadlineExceeded)
		if !ok {
			return r, false
		}
		moved := *x
		moved.DeadlineAt += int64(time.Hour)
		moved.DetectedAt += int64(time.Hour)
		return record.Record{Stream: r.Stream, Body: &moved}, true
	})
	expectCaught(t, planted, "deadline moved")
}
