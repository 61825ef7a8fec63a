package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// benchPayload is a small msgpack map, like a job's encoded input.
var benchPayload = []byte{0x81, 0xa1, 'n', 0x01}

// BenchmarkMachineJob is one job's way through the Machine alone: its
// enqueue, its start, its success, each decision acknowledged. It is the
// decisions' share of the loop's work per job, without the runner, the
// journal or the attempt's goroutine.
func BenchmarkMachineJob(b *testing.B) {
	m := NewMachine(Config{
		Workers: 1, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: seqIDs(),
	}, replay.New())
	now := t0
	d, _ := m.Recover(now, "run_1", "bench")
	ack := func(d Decision) {
		if n := len(d.Records); n > 0 {
			m.Acked(d.Records[n-1].Seq)
		}
	}
	ack(d)
	b.ReportAllocs()
	for b.Loop() {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: benchPayload})
		ack(d)
		d = m.Dispatch(now)
		if len(d.Starts) != 1 {
			b.Fatalf("%d starts, want 1", len(d.Starts))
		}
		ack(d)
		d, err := m.Settle(now, Result{Token: d.Starts[0].Token, Joined: true})
		if err != nil {
			b.Fatal(err)
		}
		ack(d)
	}
}

// discardAppender acknowledges every append at once and keeps nothing.
type discardAppender struct{}

func (discardAppender) Append(_ context.Context, _ []IndexEntry, recs []record.Record, _ []Unit) ([]uint64, error) {
	return seqsOf(recs), nil
}

// BenchmarkRunnerDrain drains 500 ready jobs whose executions return at
// once through a Runner at Workers 64, on an appender that acknowledges at
// once and a clock that does not move: the loop's, the committer's and
// the executions' own work per job, without the journal.
func BenchmarkRunnerDrain(b *testing.B) {
	const jobs = 500
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		m := NewMachine(Config{
			Workers: 64, DeliveryTimeout: deliveryTimeout,
			NewIDFunc: seqIDs(),
		}, replay.New())
		r := NewRunner(RunnerConfig{
			Clock: clocktest.New(t0), Appender: discardAppender{},
			Execute: func(context.Context, *Attempt) Result { return Result{} },
		}, m)
		r.Start()
		if err := r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
			d, _ := m.Recover(now, "run_1", "bench")
			for range jobs {
				e, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: benchPayload})
				d.merge(e)
			}
			return d, nil
		}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := r.SetDispatch(ctx, true); err != nil {
			b.Fatal(err)
		}
		if err := r.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if n := len(m.State().Jobs); n != 0 {
			b.Fatalf("%d jobs left after the drain", n)
		}
		if err := r.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jobs), "ns/job")
}
