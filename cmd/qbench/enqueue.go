package main

import (
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/internal/cputime"
)

const (
	enqueueDefault = 10_000
	enqueueTarget  = 15_000.0 // jobs/s on 2 cores
	drainTimeout   = 2 * time.Minute
)

// enqueue measures enqueue-then-drain throughput of no-op jobs for each
// size and Workers value, and names the best Workers value.
func (b *bench) enqueue(ctx context.Context) error {
	return b.sweep(ctx, sweepSpec{
		workload: "enqueue", size: "jobs", def: enqueueDefault, rate: "jobs_per_sec", target: enqueueTarget,
		once: b.enqueueOnce,
	})
}

func (b *bench) enqueueOnce(ctx context.Context, n, workers int) (*obj, error) {
	eng, closeEng, err := b.openEngine(ctx, "enqueue", workers)
	if err != nil {
		return nil, err
	}
	cd := newCountdown(n)
	err = api.Handle(eng, "noop", func(ctx context.Context, d *api.Delivery, in payload) error {
		cd.done()
		return nil
	})
	if err != nil {
		closeEng()
		return nil, err
	}
	ids := make([]string, n)
	stopProfile := b.profile("enqueue", fmt.Sprintf("w%d", workers))
	start, cpu0 := time.Now(), cputime.Process()
	err = produce(b.cfg.producers, n, func(i int) error {
		id, err := eng.Enqueue(ctx, "noop", payload{I: int32(i)})
		ids[i] = id
		return err
	})
	enqueued, cpuMid := time.Now(), cputime.Process()
	if err == nil {
		err = eng.Start(ctx)
	}
	end, cpu1, shape, err := finishRun(ctx, eng, cd, ids, stopProfile, closeEng, err)
	if err != nil {
		return nil, err
	}
	secs := end.Sub(start).Seconds()
	o := newObj(
		"workload", "enqueue", "jobs", n, "workers", workers, "producers", b.cfg.producers,
		"seconds", round(secs, 4),
		"jobs_per_sec", round(float64(n)/secs, 1),
		"enqueue_seconds", round(enqueued.Sub(start).Seconds(), 4),
		"enqueue_per_sec", round(float64(n)/enqueued.Sub(start).Seconds(), 1),
		"drain_seconds", round(end.Sub(enqueued).Seconds(), 4),
		"drain_per_sec", round(float64(n)/end.Sub(enqueued).Seconds(), 1),
	)
	perJob := func(d time.Duration) float64 { return round(float64(d.Microseconds())/float64(n), 1) }
	o.set("cpu_us_per_job", perJob(cpu1-cpu0))
	o.set("enqueue_cpu_us_per_job", perJob(cpuMid-cpu0))
	o.set("drain_cpu_us_per_job", perJob(cpu1-cpuMid))
	shape.set(o)
	// The enqueue phase appended run_started and the n job_enqueued
	// records: seqs 1..n+1.
	if recs, apps := shape.appendsThrough(uint64(n) + 1); apps > 0 {
		o.set("enqueue_appends", float64(apps))
		o.set("enqueue_records_per_append", round(float64(recs)/float64(apps), 2))
	}
	return o, nil
}
