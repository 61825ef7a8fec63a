package scheduler

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// RL-12: a snapshot that comes to nothing (its state could not be
// encoded) is tried again SnapshotEvery records later, not on every pass
// of the loop: encoding a large state on each would stall the engine.
func TestRL12_FailedSnapshotIsTriedAgainSnapshotEveryRecordsLater(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(t0)
	m := NewMachine(Config{
		Workers: 4, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: seqIDs(),
	}, replay.New())
	var calls atomic.Int64
	const every, records = 10, 200
	r := NewRunner(RunnerConfig{
		Clock: clk, Appender: &timedAppender{clk: clk},
		SnapshotEvery: every,
		SnapshotFunc: func(*replay.State) func(func(bool)) {
			calls.Add(1)
			return nil // could not be encoded
		},
	}, m)
	startRecovered(t, r)
	for range records {
		if err := r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
			d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
			return d, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got, max := calls.Load(), int64(records/every+1); got == 0 || got > max {
		t.Fatalf("%d snapshot tries over %d records, want 1 to %d", got, records, max)
	}
}

// RL-12: a snapshot whose write failed stores nothing, so the restart bound
// still counts from the newest snapshot stored: with none stored, every
// 10, slack 15, a batch past seq 25 waits for the snapshot on its way,
// although the failed one was taken at seq 10.
func TestRL12_FailedSnapshotWriteMovesNoBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMachine(Config{Workers: 1, DeliveryTimeout: deliveryTimeout}, replay.New())
		writes := make(chan func(bool), 2)
		r := NewRunner(RunnerConfig{
			Clock: clocktest.New(t0), Appender: &memAppender{},
			SnapshotEvery: 10, SnapshotSlack: 15,
			SnapshotFunc: func(*replay.State) func(func(bool)) {
				return func(stored func(bool)) { writes <- stored }
			},
		}, m)
		startRecovered(t, r) // seq 1
		ctx := context.Background()
		note := func() error { return r.Note(ctx, &record.Debug{Code: "TEST"}) }
		for range 9 { // seqs 2..10: the first snapshot, at 10
			if err := note(); err != nil {
				t.Fatal(err)
			}
		}
		(<-writes)(false)
		synctest.Wait()
		for range 15 { // seqs 11..25, within the bound; the second snapshot at 20
			if err := note(); err != nil {
				t.Fatal(err)
			}
		}
		stored := <-writes
		noted := make(chan error, 1)
		go func() { noted <- note() }() // seq 26
		synctest.Wait()
		select {
		case err := <-noted:
			t.Fatalf("seq 26 was appended (%v) past the bound of no snapshot stored", err)
		default:
		}
		if held, err := r.SnapshotHeld(ctx); err != nil || !held {
			t.Fatalf("SnapshotHeld = %v, %v; want true", held, err)
		}
		stored(true)
		if err := <-noted; err != nil {
			t.Fatal(err)
		}
	})
}

// RL-12: a state SnapshotEvery records past the newest snapshot when the
// runner starts, with nothing being appended, is written at once, not
// only once some later append is acknowledged.
func TestRL12_SnapshotDueAtStartIsWrittenAtOnce(t *testing.T) {
	var j journal
	for i := range 10 {
		j.enqueue("job_"+strconv.Itoa(i), defaultRetry)
	}
	m := NewMachine(Config{Workers: 1, DeliveryTimeout: deliveryTimeout}, foldAll(t, j.recs))
	writes := make(chan func(bool), 1)
	r := NewRunner(RunnerConfig{
		Clock: clocktest.New(t0), Appender: &memAppender{},
		SnapshotEvery: 10,
		SnapshotFunc: func(st *replay.State) func(func(bool)) {
			return func(stored func(bool)) { writes <- stored }
		},
	}, m)
	r.Start()
	t.Cleanup(func() { r.Stop(context.Background()) })
	if err := r.Do(context.Background(), func(time.Time) {}); err != nil { // after the loop's first pass
		t.Fatal(err)
	}
	select {
	case stored := <-writes:
		stored(true)
	default:
		t.Fatal("the snapshot due at start was not written")
	}
}
