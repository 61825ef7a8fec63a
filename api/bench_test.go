package api_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/internal/cputime"
	"github.com/quire-dev/quire/internal/walltimer"
)

// BenchmarkBurstMem measures the engine's own work on the path a due job
// takes: dispatch, attempt_started, the handler (a no-op), settlement. Each
// op is a burst on a fresh engine: 500 jobs enqueued while their queue is
// paused (not timed), then resumed and drained (timed). The journal is on
// vfs.NewMem, whose Sync costs nothing, and each op starts from an empty
// store, so no flush or compaction runs: the figure is the engine's CPU,
// not the disk. cmd/qbench's timers workload measures the burst on a disk.
func BenchmarkBurstMem(b *testing.B) {
	benchBurst(b, func(*testing.B) (vfs.FS, string) { return vfs.NewMem(), "bench" })
}

// BenchmarkBurstDisk is BenchmarkBurstMem on the disk, in a temporary
// directory: the loop then works while commits sync, as it does in
// qbench's timers burst.
func BenchmarkBurstDisk(b *testing.B) {
	benchBurst(b, func(b *testing.B) (vfs.FS, string) { return vfs.Default, b.TempDir() })
}

// benchBurst runs the burst of BenchmarkBurstMem on a fresh store from
// store for each op. Besides ns/job it reports cpu-ns/job, the process's
// CPU time per job, and goroutines/op, the goroutines the engine had more
// after the drain than before it: execution goroutines it started, which
// stay parked for later attempts.
func benchBurst(b *testing.B, store func(*testing.B) (vfs.FS, string)) {
	const burst = 500
	for _, workers := range []int{64, 512} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			var cpu time.Duration
			var delays api.StartDelays
			goroutines := 0
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fs, dir := store(b)
				eng := pausedBurst(b, fs, dir, workers, burst)
				g0 := runtime.NumGoroutine()
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
				goroutines += runtime.NumGoroutine() - g0
				delays = addDelays(delays, eng.StartDelays())
				if err := eng.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/job")
			// CPU time moves less than wall time with the machine's other
			// load: the figure to compare builds by.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*burst), "cpu-ns/job")
			b.ReportMetric(float64(goroutines)/float64(b.N), "goroutines/op")
			reportDelays(b, delays)
		})
	}
}

// BenchmarkDrainSlowSync drains 400 ready no-op jobs through a small
// worker pool on an in-memory store whose syncs take 300 µs each
// (slowSyncFS): the pace is then set by the commits, not the CPU. Each
// attempt needs its attempt_started committed before its handler runs and
// its slot back only once its settlement is decided, so commits/job is
// the figure to watch: 0.25 at 4 workers means each commit carries the
// settlements of the attempts the one before it started and as many new
// starts; 0.5 means each slot starts an attempt every other commit.
func BenchmarkDrainSlowSync(b *testing.B) {
	benchDrain(b, func(*testing.B) (vfs.FS, string) {
		return slowSyncFS{FS: vfs.NewMem(), latency: 300 * time.Microsecond}, "bench"
	})
}

// BenchmarkDrainDisk is BenchmarkDrainSlowSync on the disk, in a
// temporary directory: its syncs are the disk's.
func BenchmarkDrainDisk(b *testing.B) {
	benchDrain(b, func(b *testing.B) (vfs.FS, string) { return vfs.Default, b.TempDir() })
}

// benchDrain runs the drain of BenchmarkDrainSlowSync on a fresh store
// from store for each op, and reports ns/job and commits/job.
func benchDrain(b *testing.B, store func(*testing.B) (vfs.FS, string)) {
	const jobs = 400
	for _, workers := range []int{4, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ctx := context.Background()
			var commits uint64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				fs, dir := store(b)
				eng := pausedBurst(b, fs, dir, workers, jobs)
				groups := eng.JournalMetrics().Groups
				b.StartTimer()
				if err := eng.ResumeQueue(ctx, "default"); err != nil {
					b.Fatal(err)
				}
				if err := eng.WaitIdle(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				commits += eng.JournalMetrics().Groups - groups
				if err := eng.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jobs), "ns/job")
			b.ReportMetric(float64(commits)/float64(b.N*jobs), "commits/job")
		})
	}
}

// pausedBurst opens a started engine on a fresh store in dir on fs with n
// no-op jobs enqueued on its paused default queue.
func pausedBurst(b *testing.B, fs vfs.FS, dir string, workers, n int) *api.Engine {
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: dir, FS: fs, Workers: workers})
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

// BenchmarkTimerBurstMem is qbench's timers burst on an in-memory store:
// 500 jobs delayed 100 ms are enqueued at once from 500 goroutines on a
// fresh engine with the default clock, and each handler notes when it
// started. Lateness is the handler's start minus the job's AvailableAt as
// Status reports it while pending. Without the disk's sync latency and its
// noise, what is left is the engine's own path from due timer to handler:
// the figure to compare builds by. p50-ms and p99-ms are medians over ops.
func BenchmarkTimerBurstMem(b *testing.B) {
	for _, workers := range []int{64, 512} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchTimers(b, workers, 500, 100*time.Millisecond, 0, memFS)
		})
	}
}

// BenchmarkTimerBurstSlowSync is BenchmarkTimerBurstMem on an in-memory
// store whose syncs each take 300 µs, about a synced commit's median on a
// disk, slept in the kernel like an fdatasync. Unlike the disk it never
// has a slow sync, so the pace that commits set on the burst shows without
// the disk's noise: at Workers 64 each start waits for the commit in
// flight and then its own. commits/op counts the group commits from the
// first due instant on.
func BenchmarkTimerBurstSlowSync(b *testing.B) {
	for _, workers := range []int{64, 128} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			benchTimers(b, workers, 500, 100*time.Millisecond, 0, func() vfs.FS {
				return slowSyncFS{FS: vfs.NewMem(), latency: 300 * time.Microsecond}
			})
		})
	}
}

// memFS is an in-memory FS whose syncs cost nothing.
func memFS() vfs.FS { return vfs.NewMem() }

// slowSyncFS is an in-memory FS whose files' syncs take latency each.
type slowSyncFS struct {
	vfs.FS
	latency time.Duration
}

func (fs slowSyncFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return slowSyncFile{File: f, latency: fs.latency}, nil
}

func (fs slowSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs slowSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs slowSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

type slowSyncFile struct {
	vfs.File
	latency time.Duration
}

// wait sleeps the latency in the kernel (walltimer's final stretch),
// as precisely as an fdatasync returns, not in the runtime's timers.
func (f slowSyncFile) wait() { <-walltimer.New(f.latency).C() }

func (f slowSyncFile) Sync() error     { f.wait(); return f.File.Sync() }
func (f slowSyncFile) SyncData() error { f.wait(); return f.File.SyncData() }
func (f slowSyncFile) SyncTo(length int64) (bool, error) {
	f.wait()
	return f.File.SyncTo(length)
}

// BenchmarkTimerPacedMem is qbench's paced timers on an in-memory store:
// 100 jobs delayed 50 ms, enqueued 3 ms apart, so that each comes due
// alone. Its lateness is the fixed cost of the path from a due timer to its
// handler: the timer's wake-up, the start's append and the handoff to an
// execution goroutine, with a commit that costs nothing. Each op takes
// about 350 ms of real time.
func BenchmarkTimerPacedMem(b *testing.B) {
	benchTimers(b, 64, 100, 50*time.Millisecond, 3*time.Millisecond, memFS)
}

// benchTimers runs b.N ops of n jobs delayed by delay on a fresh engine
// over a store on newFS, enqueued pace apart (all at once, each from its
// own goroutine, when pace is 0), and reports the medians over ops of the
// p50 and p99 lateness in milliseconds and, for a burst, of the group
// commits made from the first due instant on.
func benchTimers(b *testing.B, workers, n int, delay, pace time.Duration, newFS func() vfs.FS) {
	ctx := context.Background()
	var p50s, p99s, commits []float64
	var delays api.StartDelays
	for range b.N {
		eng, err := api.Open(ctx, api.Options{Dir: "bench", FS: newFS(), Workers: workers})
		if err != nil {
			b.Fatal(err)
		}
		started := make([]time.Time, n)
		var wg sync.WaitGroup
		wg.Add(n)
		if err := api.Handle(eng, "timer", func(_ context.Context, _ *api.Delivery, m msg) error {
			started[m.N] = time.Now()
			wg.Done()
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			b.Fatal(err)
		}
		requested := make([]time.Time, n)
		enqueue := func(i int) error {
			id, err := eng.Enqueue(ctx, "timer", msg{N: i}, api.Delay(delay))
			if err != nil {
				return err
			}
			st, err := eng.Status(ctx, id)
			if err == nil && st.Status != api.JobPending {
				err = fmt.Errorf("job %d is %v before its delay passed", i, st.Status)
			}
			requested[i] = st.AvailableAt
			return err
		}
		if pace > 0 {
			t0 := time.Now()
			for i := range n {
				time.Sleep(time.Until(t0.Add(time.Duration(i) * pace)))
				if err := enqueue(i); err != nil {
					b.Fatal(err)
				}
			}
		} else {
			var enq sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				enq.Go(func() {
					if err := enqueue(i); err != nil {
						errs <- err
					}
				})
			}
			enq.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		}
		// In a burst every Enqueue returned after its commit and nothing
		// is due yet: the commits from here on are the starts' and
		// settlements'.
		groups := eng.JournalMetrics().Groups
		wg.Wait()
		if err := eng.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		commits = append(commits, float64(eng.JournalMetrics().Groups-groups))
		delays = addDelays(delays, eng.StartDelays())
		if err := eng.Close(ctx); err != nil {
			b.Fatal(err)
		}
		late := make([]float64, n)
		for i := range n {
			late[i] = float64(started[i].Sub(requested[i])) / 1e6
		}
		slices.Sort(late)
		p50s = append(p50s, late[n/2])
		p99s = append(p99s, late[n*99/100])
	}
	slices.Sort(p50s)
	slices.Sort(p99s)
	slices.Sort(commits)
	b.ReportMetric(p50s[len(p50s)/2], "p50-ms")
	b.ReportMetric(p99s[len(p99s)/2], "p99-ms")
	reportDelays(b, delays)
	if pace == 0 { // paced, the first jobs come due while others are enqueued
		b.ReportMetric(commits[len(commits)/2], "commits/op")
	}
}

// addDelays adds the start delays of another engine to sum.
func addDelays(sum, d api.StartDelays) api.StartDelays {
	if sum.Counts == nil {
		return api.StartDelays{Bounds: d.Bounds, Counts: slices.Clone(d.Counts)}
	}
	for i, c := range d.Counts {
		sum.Counts[i] += c
	}
	return sum
}

// reportDelays reports the p50 and p99 of the start delays of all ops
// (Engine.StartDelays: from a start's acknowledgement to its execution's
// start; bucket bounds, at most a quarter above the delay).
func reportDelays(b *testing.B, d api.StartDelays) {
	b.ReportMetric(float64(d.Quantile(0.5))/1e6, "start-delay-p50-ms")
	b.ReportMetric(float64(d.Quantile(0.99))/1e6, "start-delay-p99-ms")
}
