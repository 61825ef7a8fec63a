package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/internal/cputime"
)

const (
	chainDefault = 1000
	chainSteps   = 3
	chainTarget  = 3000.0 // chains/s on 2 cores
)

// chain measures three-step chains: each step's handler enqueues the next
// step with Delivery.Enqueue, atomically with its own success.
func (b *bench) chain(ctx context.Context) error {
	return b.sweep(ctx, sweepSpec{
		workload: "chain", size: "chains", def: chainDefault, rate: "chains_per_sec", target: chainTarget,
		once: b.chainOnce, summary: []string{"p50_ms", "p99_ms"},
	})
}

func (b *bench) chainOnce(ctx context.Context, n, workers int) (*obj, error) {
	eng, closeEng, err := b.openEngine(ctx, "chain", workers)
	if err != nil {
		return nil, err
	}
	var (
		cd     = newCountdown(n)
		begins = make([]time.Time, n)
		ends   = make([]time.Time, n)
	)
	err = api.Handle(eng, "step", func(ctx context.Context, d *api.Delivery, in payload) error {
		if in.Step < chainSteps {
			return d.Enqueue("step", payload{I: in.I, Step: in.Step + 1})
		}
		ends[in.I] = time.Now()
		cd.done()
		return nil
	})
	if err == nil {
		err = eng.Start(ctx)
	}
	if err != nil {
		closeEng()
		return nil, err
	}
	ids := make([]string, n)
	stopProfile := b.profile("chain", fmt.Sprintf("w%d", workers))
	start, cpu0 := time.Now(), cputime.Process()
	err = produce(b.cfg.producers, n, func(i int) error {
		begins[i] = time.Now()
		id, err := eng.Enqueue(ctx, "step", payload{I: int32(i), Step: 1})
		ids[i] = id
		return err
	})
	end, cpu1, shape, err := finishRun(ctx, eng, cd, ids, stopProfile, closeEng, err)
	if err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	for i := range n {
		if ends[i].IsZero() {
			return nil, fmt.Errorf("chain %d has no end", i)
		}
		lat[i] = ends[i].Sub(begins[i])
	}
	slices.Sort(lat)
	secs := end.Sub(start).Seconds()
	o := newObj(
		"workload", "chain", "chains", n, "steps", chainSteps, "workers", workers, "producers", b.cfg.producers,
		"seconds", round(secs, 4),
		"chains_per_sec", round(float64(n)/secs, 1),
		"jobs_per_sec", round(float64(n*chainSteps)/secs, 1),
		"p50_ms", ms(percentile(lat, 50)),
		"p99_ms", ms(percentile(lat, 99)),
		"max_ms", ms(lat[n-1]),
	)
	o.set("cpu_us_per_job", round(float64((cpu1-cpu0).Microseconds())/float64(n*chainSteps), 1))
	shape.set(o)
	return o, nil
}
