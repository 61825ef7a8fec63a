package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
)

// runDelayed runs jobs delayed by 30, 60, 90 ms... on eng and waits for
// them (on a clocktest clock, advancing it past them all).
func runDelayed(t *testing.T, eng *api.Engine, clk *clocktest.Clock, n int) {
	t.Helper()
	ctx := t.Context()
	if err := api.Handle(eng, "noop", func(context.Context, *api.Delivery, struct{}) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		ids []string
		due []time.Time
	)
	for i := range n {
		id, err := eng.Enqueue(ctx, "noop", struct{}{}, api.Delay(time.Duration(i+1)*30*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		j, err := eng.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ids, due = append(ids, id), append(due, j.AvailableAt)
	}
	for i, id := range ids {
		if clk != nil {
			// A stop a millisecond before the instant, where a warm
			// would come due, then the instant.
			clk.Set(due[i].Add(-time.Millisecond))
			if err := eng.WaitIdle(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Set(due[i])
		}
		if j, err := eng.AwaitJob(ctx, id); err != nil || j.Status != api.JobCompleted {
			t.Fatalf("job %s: %+v, %v", id, j, err)
		}
	}
}

// On the wall clock an idle engine warms the journal before a delayed
// job's instant, so that the start's synced append (DL-7) meets a device
// that has just synced; a warm writes no record. Each of the three jobs
// comes due after 30 ms of idle: at least one warm, however loaded the
// machine, and no more than one per job.
func TestEngineWarmsTheJournalBeforeADelayedStart(t *testing.T) {
	eng, err := api.Open(t.Context(), api.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	before := eng.JournalMetrics()
	runDelayed(t, eng, nil, 3)
	m := eng.JournalMetrics()
	if w := m.Warms - before.Warms; w < 1 || w > 3 {
		t.Fatalf("warms for 3 delayed jobs: %d, want 1..3", w)
	}
	if m.Records-before.Records != 9 { // enqueue, start, success per job
		t.Fatalf("records for 3 jobs: %d, want 9", m.Records-before.Records)
	}
}

// Under a clock the application moves (Options.Clock, sim), nothing
// warms: the warm's timer would be one more instant for the test to step
// through.
func TestEngineOnAnApplicationClockDoesNotWarm(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	eng, err := api.Open(t.Context(), api.Options{Dir: "db", FS: vfs.NewMem(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	runDelayed(t, eng, clk, 3)
	if w := eng.JournalMetrics().Warms; w != 0 {
		t.Fatalf("warms on an application clock: %d", w)
	}
}

// Options.TimerWarmup negative turns warming off, on the wall clock too.
func TestTimerWarmupOffMakesNoWarm(t *testing.T) {
	eng, err := api.Open(t.Context(), api.Options{Dir: "db", FS: vfs.NewMem(), TimerWarmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	runDelayed(t, eng, nil, 3)
	if w := eng.JournalMetrics().Warms; w != 0 {
		t.Fatalf("warms with TimerWarmup off: %d", w)
	}
}

// TimerWarmup: zero (default) and negative (off) open, 100 µs..100 ms
// open, values outside are refused with an *OptionError naming the field,
// before anything is created.
func TestTimerWarmupRange(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, true}, {-1, true}, {api.TimerWarmupMin, true}, {api.TimerWarmupMax, true},
		{api.TimerWarmupMin - 1, false}, {api.TimerWarmupMax + 1, false}, {1, false},
	} {
		fs := vfs.NewMem()
		eng, err := api.Open(t.Context(), api.Options{Dir: "db", FS: fs, TimerWarmup: tc.d})
		if tc.ok {
			if err != nil {
				t.Fatalf("TimerWarmup %v: %v", tc.d, err)
			}
			eng.Close(context.Background())
			continue
		}
		var oe *api.OptionError
		if !errors.As(err, &oe) || oe.Field != "Options.TimerWarmup" || oe.Value != tc.d || !errors.Is(err, api.ErrInvalidOption) {
			t.Fatalf("TimerWarmup %v: err = %v, want an OptionError naming Options.TimerWarmup", tc.d, err)
		}
		if names, _ := fs.List("db"); len(names) != 0 {
			t.Fatalf("TimerWarmup %v: refused, but db holds %v", tc.d, names)
		}
	}
}

// The engine warms TimerWarmup ahead: with a lead longer than every job's
// delay, each instant is nearer than the lead when its job is enqueued,
// and nothing warms.
func TestTimerWarmupLongerThanTheDelayMakesNoWarm(t *testing.T) {
	eng, err := api.Open(t.Context(), api.Options{Dir: "db", FS: vfs.NewMem(), TimerWarmup: api.TimerWarmupMax})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	runDelayed(t, eng, nil, 3) // 30, 60, 90 ms < 100 ms
	if w := eng.JournalMetrics().Warms; w != 0 {
		t.Fatalf("warms with a lead longer than every delay: %d", w)
	}
}
