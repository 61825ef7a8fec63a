package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quire-dev/quire/api"
)

const (
	timersDefault = 500
	timerDelay    = 200 * time.Millisecond
	timerPace     = 10 * time.Millisecond // 100 enqueues/s
)

// timers measures how late delayed jobs start, with enqueues paced at
// 100/s and then all at once. Each mode is first run with plain Go timers
// (time.AfterFunc, same pattern, no engine): their lateness is the floor
// the machine's scheduler and clock allow, reported as the baseline.
func (b *bench) timers(ctx context.Context) error {
	for _, n := range b.sizes(timersDefault) {
		for _, mode := range []struct {
			name   string
			paced  bool
			target float64
		}{{"paced", true, 1}, {"burst", false, 2}} {
			var runs, base []*obj
			for range b.cfg.runs {
				o, err := b.timersOnce(ctx, n, mode.paced, false)
				if err != nil {
					return err
				}
				base = append(base, o)
				if o, err = b.timersOnce(ctx, n, mode.paced, true); err != nil {
					return err
				}
				runs = append(runs, o)
			}
			bo := medianObj(base, "p99_ms")
			o := medianObj(runs, "p99_ms")
			o.set("variant", mode.name)
			o.set("baseline", "go_timer_lateness")
			o.set("baseline_p50_ms", bo.num("p50_ms"))
			o.set("baseline_p99_ms", bo.num("p99_ms"))
			o.set("baseline_max_ms", bo.num("max_ms"))
			o.set("p99_over_baseline_ms", round(o.num("p99_ms")-bo.num("p99_ms"), 3))
			o.set("target_p99_ms", mode.target)
			o.set("target_met", o.num("p99_ms") <= mode.target)
			b.emit(o)
		}
	}
	return nil
}

// timersOnce runs one mode, on the engine or (engine false) on Go timers.
func (b *bench) timersOnce(ctx context.Context, n int, paced, engine bool) (*obj, error) {
	var (
		cd        = newCountdown(n)
		started   = make([]time.Time, n)
		requested = make([]time.Time, n)
		fromState = make([]bool, n)
		enqueue   func(i int) error
		closeEng  func() (journalShape, error)
		eng       *api.Engine
	)
	if engine {
		var err error
		eng, closeEng, err = b.openEngine(ctx, "timers", b.cfg.timerWorkers)
		if err != nil {
			return nil, err
		}
		err = api.Handle(eng, "timer", func(ctx context.Context, d *api.Delivery, in payload) error {
			started[in.I] = time.Now()
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
		// The requested instant is the job's AvailableAt as Status reports
		// it while the job is pending (the engine's own enqueue instant
		// plus the delay), else the call's start plus the delay.
		enqueue = func(i int) error {
			t := time.Now()
			id, err := eng.Enqueue(ctx, "timer", payload{I: int32(i)}, api.Delay(timerDelay))
			if err != nil {
				return err
			}
			requested[i] = t.Add(timerDelay)
			st, err := eng.Status(ctx, id)
			if err != nil {
				return err
			}
			if st.Status == api.JobPending && !st.AvailableAt.IsZero() {
				requested[i], fromState[i] = st.AvailableAt, true
			}
			return nil
		}
	} else {
		enqueue = func(i int) error {
			requested[i] = time.Now().Add(timerDelay)
			time.AfterFunc(time.Until(requested[i]), func() {
				started[i] = time.Now()
				cd.done()
			})
			return nil
		}
	}

	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		errs  []error
	)
	gate := make(chan struct{})
	tag := "burst"
	if paced {
		tag = "paced"
	}
	stopProfile := func() {}
	if engine {
		stopProfile = b.profile("timers", tag)
	}
	t0 := time.Now()
	for i := range n {
		if paced {
			time.Sleep(time.Until(t0.Add(time.Duration(i) * timerPace)))
		}
		wg.Go(func() {
			if !paced {
				<-gate
			}
			if err := enqueue(i); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	close(gate)
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		if engine {
			err = cd.wait(ctx, eng, timerDelay+drainTimeout)
		} else {
			select {
			case <-cd.ch:
			case <-time.After(timerDelay + drainTimeout):
				err = errors.New("go timers did not fire")
			}
		}
	}
	stopProfile()
	if engine {
		if _, cerr := closeEng(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, err
	}

	late := make([]time.Duration, n)
	exact := 0
	lo, hi := requested[0], requested[0]
	for i := range n {
		late[i] = started[i].Sub(requested[i])
		if fromState[i] {
			exact++
		}
		if requested[i].Before(lo) {
			lo = requested[i]
		}
		if requested[i].After(hi) {
			hi = requested[i]
		}
	}
	slices.Sort(late)
	o := newObj("workload", "timers", "variant", tag, "jobs", n, "delay_ms", ms(timerDelay))
	if engine {
		o.set("workers", b.cfg.timerWorkers)
	}
	o.set("p50_ms", ms(percentile(late, 50)))
	o.set("p99_ms", ms(percentile(late, 99)))
	o.set("max_ms", ms(late[n-1]))
	o.set("min_ms", ms(late[0]))
	if engine {
		o.set("requested_from_status", fmt.Sprintf("%d/%d", exact, n))
	}
	o.set("requested_spread_ms", ms(hi.Sub(lo)))
	return o, nil
}
