package api_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/internal/cputime"
)

// BenchmarkBurstMem measures the engine's own work on the path a due job
// takes: dispatch, attempt_started, the handler (a no-op), settlement. Each
// op is a burst on a fresh engine: 500 jobs enqueued while their queue is
// paused (not timed), then resumed and drained (timed). The journal is on
// vfs.NewMem, whose Sync costs nothing, and each op starts from an empty
// store, so no flush or compaction runs: the figure is the engine's CPU,
// not the disk. cmd/qbench's timers workload measures the burst on a disk.
func BenchmarkBurstMem(b *testing.B) {
	const burst = 500
	for _, workers := range []int{64, 512} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				eng := pausedBurst(b, workers, burst)
				b.StartTimer()
				cpu0 := cputime.Process()
				if err := eng.ResumeQueue(ctx, "default"); err != nil {
					b.Fatal(err)
				}
				if err := eng.WaitIdle(ctx); err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - cpu0
				b.StopTimer()
				if err := eng.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
			// CPU time moves less than wall time with the machine's other
			// load: the figure to compare builds by.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*burst), "cpu-ns/job")
		})
	}
}

// pausedBurst opens a started engine on a fresh in-memory store with n
// no-op jobs enqueued on its paused default queue.
func pausedBurst(b *testing.B, workers, n int) *api.Engine {
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: "bench", FS: vfs.NewMem(), Workers: workers})
	if err != nil {
		b.Fatal(err)
	}
	if err := api.Handle(eng, "noop", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := eng.PauseQueue(ctx, "default"); err != nil {
		b.Fatal(err)
	}
	enqueueMany(b, eng, n)
	return eng
}

// enqueueMany enqueues n no-op jobs from 64 goroutines.
func enqueueMany(b *testing.B, eng *api.Engine, n int) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for p := range 64 {
		wg.Go(func() {
			for i := p; i < n; i += 64 {
				if _, err := eng.Enqueue(context.Background(), "noop", msg{N: i}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
