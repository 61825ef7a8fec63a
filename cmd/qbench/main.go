// Command qbench measures quire's throughput and timer lateness on a real
// directory, with the real clock and synced appends (the engine always
// commits with pebble.Sync), and prints one JSON object per result on
// stdout (progress and profile names go to stderr). Absolute figures
// depend on the disk's fsync latency and on the machine's other load, so
// each figure is also given against a baseline measured in the same
// process (DESIGN §9): raw Pebble synced commits for throughput, plain Go
// timers for lateness.
//
// Reproduce the figures reported for a change with:
//
//	go run ./cmd/qbench -workload all -runs 3
//
// and profile the engine under one workload with, for example:
//
//	go run ./cmd/qbench -workload enqueue -workers 256 -runs 3 -cpuprofile /tmp/cpu.pprof
//	go tool pprof -top /tmp/cpu.enqueue.w256.r*.pprof
//
// Usage:
//
//	qbench [flags]
//
//	-workload all|baseline|enqueue|chain|timers
//	                 what to run (default all); enqueue and chain run the
//	                 baseline first unless -no-baseline
//	-n LIST          comma-separated sizes, each run separately (defaults:
//	                 enqueue 10000 jobs, chain 1000 chains, timers 500 jobs;
//	                 with -workload baseline, the commits of each variant,
//	                 else baseline 2000 sequential and 64×500 concurrent)
//	-workers LIST    Options.Workers values tried by enqueue and chain
//	                 (default 16,64,256); a summary line names the best
//	-timer-workers N Options.Workers of the timers workload (default 64)
//	-timer-history N no-op jobs run through each engine of the timers
//	                 workload before its measured jobs (default 0): the
//	                 measured jobs then meet a journal with history
//	-timer-warmup D  Options.TimerWarmup of every engine (default 0, the
//	                 engine's 1.5 ms; negative turns warming off), and the
//	                 lead of the timers references' warms
//	-timer-modes L   the timers modes to run: paced, burst or both
//	                 (default paced,burst); the paced mode takes about 15 s
//	                 a run, the burst under a second
//	-producers N     goroutines that call Enqueue concurrently (default 64)
//	-runs N          repeat each measurement N times and report the median
//	                 of every figure, with the primary figure of each run
//	                 in per_run_* (default 1)
//	-dir DIR         parent of the temporary journal directories (default
//	                 the system temp dir; put it on the disk to measure)
//	-no-baseline     skip the Pebble baseline (no ratios)
//	-timeout D       abort, printing every goroutine's stack, if the whole
//	                 run takes longer than D (default 10m)
//	-cpuprofile F    write a CPU profile of each measured section (from the
//	                 first Enqueue to the drain; Open, Close and the journal
//	                 read-back excluded), one file per section named after
//	                 F: cpu.pprof gives cpu.enqueue.w64.r1.pprof, ...;
//	                 go tool pprof merges the files given together
//
// Workloads:
//
//   - baseline: raw Pebble (FormatNewest, as the journal) on a temporary
//     directory, Set of a 200-byte value with pebble.Sync, sequentially
//     and from 64 goroutines (Pebble's commit pipeline then shares
//     fsyncs); commits/s and commit latency p50/p99. The 64-goroutine
//     figure is the baseline of the ratios ("ratio"; "ratio_vs_sequential"
//     uses the other).
//   - enqueue: N no-op jobs enqueued from -producers goroutines (each
//     Enqueue returns after its fsync, so the engine batches concurrent
//     calls into one append), then Start and drain until every handler ran
//     and WaitIdle returned; a sample is checked completed through Status.
//     jobs/s over enqueue+drain, and each phase alone. Target on 2 cores:
//     >= 15,000 jobs/s.
//   - chain: the engine is started, then N chains of three steps are
//     enqueued from -producers goroutines; steps 1 and 2 enqueue the next
//     step with Delivery.Enqueue, atomically with their success; chains/s,
//     and p50/p99 of each chain's latency from its first Enqueue call to
//     the return of its third handler. Target >= 3,000 chains/s.
//   - timers: N jobs delayed 200 ms, (a) paced at 100 enqueues/s and (b)
//     enqueued all at once; lateness is the handler's start minus the
//     job's AvailableAt as Status reports it while the job is pending;
//     p50/p99/max in ms. Two references run the same pattern: the
//     baseline, time.AfterFunc alone (the runtime's timer lateness), and
//     sync_writes, the synced writes the spec requires of a delayed job,
//     per job, on raw Pebble with nothing else (a synced Set at enqueue;
//     at the instant, on one timer for all jobs as precise as the
//     engine's, a synced Set before the "handler" and one after it), and
//     the engine's warm: a synced write of no key Options.TimerWarmup
//     before the instant unless a commit returned within that lead
//     (journal.Warm). Paced, sync_writes is the
//     floor: no engine that syncs a start before the handler (DL-7) can
//     beat it on the same disk; in the burst the engine batches starts
//     into group commits and may. The burst adds group_commits, the same
//     writes made the engine's way on raw Pebble: one synced commit at a
//     time of everything pending when the previous one returned, each
//     "handler" started when its start's commit returns and its
//     settlement joining the next. A start that comes due while a commit
//     syncs waits for it and then for its own, so this is the burst's
//     floor for one commit at a time on the same disk (its "handlers"
//     run on the committer, cost nothing, and are not limited in number).
//     Its jobs come due at the instants the engine's jobs came due in the
//     run before it, and it warms as sync_writes does. The profile of -cpuprofile covers the same stretch as
//     the lateness: from the last enqueue's return to the last start.
//     Targets p99 <= 1 ms paced, <= 2 ms burst.
//     The engine's runs also give start_appends, the synced commits that
//     carried attempt_started records, and starts_per_start_append: at
//     Workers 64 a burst's starts go about 25-28 to a commit, since each
//     start waits for the commit in flight when its slot frees. Each run
//     also gives gc_cycles, the Go GC cycles that ran from the last
//     enqueue's return to the last start (per_run_gc_cycles beside
//     per_run_p99_ms): a cycle during a burst takes CPU from the starts.
//     wal_rotations (per run in per_run_wal_rotations) counts the
//     write-ahead logs Pebble started over the same stretch: each is a
//     memtable rotation inside one of the engine's commits, which then
//     also syncs the old log and the directory. warms (per run in
//     per_run_warms) counts the engine's warms (JournalMetrics.Warms) over
//     the whole run, enqueues included.
//     start_delay_p50_ms and start_delay_p99_ms (per run in
//     per_run_start_delay_p99_ms) are the engine's Engine.StartDelays over
//     the run's jobs: from the return of the commit that acknowledged a
//     job's attempt_started to the start of its execution, the part of
//     the lateness after the commits (bucket bounds, at most a quarter
//     above the delay).
//     The burst also gives fire_cpu_us_per_job, the process's CPU over
//     that stretch per job: the starts and most settlements, on 2 cores
//     beside the 60 000-odd jobs a second the burst comes due at, and
//     fire_alloc_bytes_per_job, the heap bytes allocated over it per job.
//     Each run opens a fresh journal, whose memtables start at 256 KB and
//     double at each rotation. With -timer-history N the engine first runs
//     N no-op jobs (history_jobs in the output), so that the measured jobs
//     meet a journal with history, as a long-running engine's is: grown
//     memtables, and the flushes and compactions the history set off,
//     which may run during the measured stretch. The references run
//     without history.
//
// The first and last lines ("workload":"env") give the load average and
// the kernel's CPU and I/O pressure (PSI some avg10, in %): figures from a
// run where other processes kept the CPUs busy are not comparable with
// quiet ones.
//
// Besides wall-clock figures, enqueue and chain report cpu_us_per_job, the
// process CPU time per job, which the machine's other load hardly moves,
// and the journal's shape, read back from the closed journal: records and
// synced group commits ("appends"; the records of one group share their
// At), so records_per_append shows how well the engine batches.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	workload     string
	sizes        []int
	workers      []int
	timerWorkers int
	timerHistory int
	timerWarmup  time.Duration
	timerModes   []string
	producers    int
	runs         int
	dir          string
	cpuprofile   string
	noBaseline   bool
	timeout      time.Duration
}

func main() {
	var (
		cfg        config
		sizes      string
		workers    string
		timerModes string
	)
	flag.StringVar(&cfg.workload, "workload", "all", "all|baseline|enqueue|chain|timers")
	flag.StringVar(&sizes, "n", "", "comma-separated sizes for the selected workloads (default per workload)")
	flag.StringVar(&workers, "workers", "16,64,256", "comma-separated Options.Workers values for enqueue and chain")
	flag.IntVar(&cfg.timerWorkers, "timer-workers", 64, "Options.Workers of the timers workload")
	flag.IntVar(&cfg.timerHistory, "timer-history", 0, "no-op jobs run through the engine before each timers run")
	flag.DurationVar(&cfg.timerWarmup, "timer-warmup", 0, "Options.TimerWarmup of every engine, and the lead of the timers floors' warms (0 the default, negative off)")
	flag.StringVar(&timerModes, "timer-modes", "paced,burst", "comma-separated timers modes to run: paced, burst")
	flag.IntVar(&cfg.producers, "producers", 64, "goroutines calling Enqueue concurrently")
	flag.IntVar(&cfg.runs, "runs", 1, "repetitions of each measurement; the median is reported")
	flag.StringVar(&cfg.dir, "dir", "", "parent of the temporary journal directories (default: system temp dir)")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of each measured section to a file named after this path")
	flag.BoolVar(&cfg.noBaseline, "no-baseline", false, "skip the Pebble baseline (ratios are then omitted)")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "abort with every goroutine's stack if the whole run takes longer")
	flag.Parse()

	var err error
	if cfg.sizes, err = parseList(sizes); err != nil {
		fatal(fmt.Errorf("-n: %w", err))
	}
	if cfg.workers, err = parseList(workers); err != nil {
		fatal(fmt.Errorf("-workers: %w", err))
	}
	if len(cfg.workers) == 0 {
		fatal(errors.New("-workers: need at least one value"))
	}
	for m := range strings.SplitSeq(timerModes, ",") {
		if m != "paced" && m != "burst" {
			fatal(fmt.Errorf("-timer-modes: unknown mode %q (want paced or burst)", m))
		}
		if !slices.Contains(cfg.timerModes, m) {
			cfg.timerModes = append(cfg.timerModes, m)
		}
	}
	if cfg.runs < 1 || cfg.producers < 1 || cfg.timerWorkers < 1 {
		fatal(errors.New("-runs, -producers and -timer-workers must be >= 1"))
	}
	if cfg.timerHistory < 0 {
		fatal(errors.New("-timer-history must be >= 0"))
	}
	// A hung engine must not hang the benchmark: dump the goroutines,
	// which show where it stopped, and fail.
	time.AfterFunc(cfg.timeout, func() {
		fmt.Fprintf(os.Stderr, "qbench: still running after -timeout %v; goroutines:\n", cfg.timeout)
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		os.Exit(2)
	})
	if err := run(context.Background(), cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "qbench:", err)
	os.Exit(1)
}

func parseList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

var workloads = []string{"baseline", "enqueue", "chain", "timers"}

func run(ctx context.Context, cfg config) error {
	var selected []string
	switch {
	case cfg.workload == "all":
		selected = workloads
	case slices.Contains(workloads, cfg.workload):
		selected = []string{cfg.workload}
	default:
		return fmt.Errorf("-workload %q: want all, %s", cfg.workload, strings.Join(workloads, ", "))
	}
	needBaseline := !cfg.noBaseline && (slices.Contains(selected, "enqueue") || slices.Contains(selected, "chain"))
	if needBaseline && !slices.Contains(selected, "baseline") {
		selected = append([]string{"baseline"}, selected...)
	}
	b := &bench{cfg: cfg, out: json.NewEncoder(os.Stdout), profRuns: map[string]int{}}
	fmt.Fprintf(os.Stderr, "qbench: %s, GOMAXPROCS=%d, runs=%d, workloads %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), cfg.runs, strings.Join(selected, ","))
	b.emit(envObj("start"))
	defer func() { b.emit(envObj("end")) }()
	for _, w := range selected {
		var err error
		switch w {
		case "baseline":
			err = b.baseline(ctx)
		case "enqueue":
			err = b.enqueue(ctx)
		case "chain":
			err = b.chain(ctx)
		case "timers":
			err = b.timers(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	if len(b.profFiles) > 0 {
		fmt.Fprintf(os.Stderr, "qbench: CPU profiles (merge with go tool pprof -top FILES...):\n  %s\n",
			strings.Join(b.profFiles, "\n  "))
	}
	return nil
}

// bench holds what the workloads share: the configuration, the output and
// the baseline measured first.
type bench struct {
	cfg config
	out *json.Encoder
	// lastDue holds the last timers engine run's due instants, each
	// relative to the earliest: the burst the group-commit floor replays.
	lastDue []time.Duration
	// base is Pebble's synced commits/s from 64 goroutines, 0 if not
	// measured; baseSeq is the sequential figure.
	base, baseSeq float64
	// profRuns numbers the profiles of each section; profFiles lists
	// the profiles written.
	profRuns  map[string]int
	profFiles []string
}

func (b *bench) emit(o *obj) {
	if err := b.out.Encode(o); err != nil {
		fatal(err)
	}
}

// sizes returns the -n sizes, or def.
func (b *bench) sizes(def int) []int {
	if len(b.cfg.sizes) > 0 {
		return b.cfg.sizes
	}
	return []int{def}
}

// withRatio adds the baseline and the ratio of value to it.
func (b *bench) withRatio(o *obj, value float64) {
	if b.base == 0 {
		return
	}
	o.set("baseline", "pebble_sync_commits_per_sec_c64")
	o.set("baseline_value", round(b.base, 0))
	o.set("ratio", round(value/b.base, 3))
	if b.baseSeq > 0 {
		o.set("ratio_vs_sequential", round(value/b.baseSeq, 3))
	}
}

// profile starts a CPU profile of one measured section if -cpuprofile is
// set and returns the function that stops it. Each section gets its own
// file, named after -cpuprofile with the workload and tag inserted before
// the extension (cpu.enqueue.w64.r1.pprof); go tool pprof merges several
// files given together. Open, Close and the journal read-back are outside
// the sections.
func (b *bench) profile(workload, tag string) func() {
	if b.cfg.cpuprofile == "" {
		return func() {}
	}
	key := workload + "." + tag
	b.profRuns[key]++
	ext := filepath.Ext(b.cfg.cpuprofile)
	path := fmt.Sprintf("%s.%s.r%d%s", strings.TrimSuffix(b.cfg.cpuprofile, ext), key, b.profRuns[key], ext)
	f, err := os.Create(path)
	if err != nil {
		fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fatal(err)
		}
		b.profFiles = append(b.profFiles, path)
	}
}

// tempDir makes a fresh directory for one measurement and returns it with
// its cleanup.
func (b *bench) tempDir(prefix string) (string, func(), error) {
	d, err := os.MkdirTemp(b.cfg.dir, "qbench-"+prefix+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// sweepSpec describes a throughput workload run for each size and each
// Workers value.
type sweepSpec struct {
	workload string
	size     string // the JSON name of a size ("jobs", "chains")
	def      int    // default size
	rate     string // the JSON name of the measured rate
	target   float64
	once     func(ctx context.Context, n, workers int) (*obj, error)
	summary  []string // extra fields copied into the best-Workers summary
}

// sweep runs s for each size and Workers value, emits the median of the
// runs of each with its ratio against the baseline and target, and names
// the best Workers value.
func (b *bench) sweep(ctx context.Context, s sweepSpec) error {
	for _, n := range b.sizes(s.def) {
		var best *obj
		for _, w := range b.cfg.workers {
			var runs []*obj
			for range b.cfg.runs {
				o, err := s.once(ctx, n, w)
				if err != nil {
					return err
				}
				runs = append(runs, o)
			}
			o := medianObj(runs, s.rate)
			b.withRatio(o, o.num(s.rate))
			o.set("target_"+s.rate, s.target)
			o.set("target_met", o.num(s.rate) >= s.target)
			b.emit(o)
			if best == nil || o.num(s.rate) > best.num(s.rate) {
				best = o
			}
		}
		if len(b.cfg.workers) > 1 {
			sum := newObj("workload", s.workload, "summary", "best_workers", s.size, n,
				"workers", best.vals["workers"], s.rate, best.num(s.rate))
			for _, k := range s.summary {
				sum.set(k, best.num(k))
			}
			sum.set("target_met", best.vals["target_met"])
			b.emit(sum)
		}
	}
	return nil
}
