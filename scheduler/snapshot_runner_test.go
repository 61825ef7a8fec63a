package scheduler

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/replay"
)

// RL-12: a snapshot that comes to nothing (its state could not be
// encoded) is tried again SnapshotEvery records later, not on every pass
// of the loop: encoding a large state on each would stall the engine.
func TestRL12_FailedSnapshotIsTriedAgainSnapshotEveryRecordsLater(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(t0)
	ids := 0
	m := NewMachine(Config{
		Workers: 4, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: func(prefix string, _ time.Time) string { ids++; return prefix + strconv.Itoa(ids) },
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
