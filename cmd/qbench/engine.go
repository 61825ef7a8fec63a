package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/internal/cputime"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// payload is the job payload of every workload: an index into the
// workload's own tables, and a step for chains.
type payload struct {
	I    int32 `msgpack:"i"`
	Step int8  `msgpack:"s"`
}

// openEngine opens an engine on a fresh temporary directory. The returned
// close function closes the engine, reads the journal's shape back and
// removes the directory.
func (b *bench) openEngine(ctx context.Context, name string, workers int) (*api.Engine, func() (journalShape, error), error) {
	dir, cleanup, err := b.tempDir(name)
	if err != nil {
		return nil, nil, err
	}
	eng, err := api.Open(ctx, api.Options{Dir: dir, Workers: workers, TimerWarmup: b.cfg.timerWarmup})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	closeFn := func() (journalShape, error) {
		defer cleanup()
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := eng.Close(cctx); err != nil {
			return journalShape{}, fmt.Errorf("close engine: %w", err)
		}
		return readShape(dir)
	}
	return eng, closeFn, nil
}

// journalShape is what a closed journal says about how the engine wrote
// it: records, and the synced group commits that carried them.
type journalShape struct {
	records, appends int
	// groupEnds holds the last seq of each group, in order, and
	// groupStarts the attempt_started records of each.
	groupEnds   []uint64
	groupStarts []int
}

// startsAfter returns the attempt_started records in the groups after
// seq, and how many of those groups carried at least one: how many synced
// commits the starts waited for, and so how the engine batched them.
func (s journalShape) startsAfter(seq uint64) (starts, startAppends int) {
	for i, e := range s.groupEnds {
		if e > seq && s.groupStarts[i] > 0 {
			starts += s.groupStarts[i]
			startAppends++
		}
	}
	return starts, startAppends
}

// appendsThrough returns the records and groups up to seq (inclusive).
func (s journalShape) appendsThrough(seq uint64) (records, appends int) {
	for _, e := range s.groupEnds {
		if e > seq {
			break
		}
		appends++
		records = int(e)
	}
	return records, appends
}

func (s journalShape) set(o *obj) {
	o.set("records", float64(s.records))
	o.set("appends", float64(s.appends))
	if s.appends > 0 {
		o.set("records_per_append", round(float64(s.records)/float64(s.appends), 2))
	}
}

// setStarts reports how the starts in the groups after seq were batched:
// the appends that carried attempt_started records and the starts per
// such append.
func (s journalShape) setStarts(o *obj, seq uint64) {
	starts, appends := s.startsAfter(seq)
	o.set("start_appends", float64(appends))
	if appends > 0 {
		o.set("starts_per_start_append", round(float64(starts)/float64(appends), 2))
	}
}

// readShape scans a closed journal. The journal stamps every record of one
// group commit with one At read from the clock (never below the previous
// group's), so a change of At marks a new group; two groups stamped in the
// same nanosecond would count as one.
func readShape(dir string) (journalShape, error) {
	j, err := journal.Open(dir, journal.Options{Clock: wallClock{}, ReadOnly: true})
	if err != nil {
		return journalShape{}, fmt.Errorf("reopen journal read-only: %w", err)
	}
	defer j.Close()
	var (
		s      journalShape
		lastAt int64 = -1
	)
	it := j.Scan(1, j.LastSeq())
	defer it.Close()
	for it.Next() {
		r := it.Record()
		s.records++
		if r.At != lastAt {
			s.appends++
			lastAt = r.At
			s.groupEnds = append(s.groupEnds, r.Seq)
			s.groupStarts = append(s.groupStarts, 0)
		} else {
			s.groupEnds[len(s.groupEnds)-1] = r.Seq
		}
		if r.Kind() == record.KindAttemptStarted {
			s.groupStarts[len(s.groupStarts)-1]++
		}
	}
	return s, it.Err()
}

// wallClock is the clock the read-only journal needs for its options; it
// never stamps anything there.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTimer(d time.Duration) clock.Timer { return &wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (w *wallTimer) C() <-chan time.Time        { return w.t.C }
func (w *wallTimer) Stop() bool                 { return w.t.Stop() }
func (w *wallTimer) Reset(d time.Duration) bool { return w.t.Reset(d) }

var _ clock.Clock = wallClock{}

// countdown is closed by the n-th call of done.
type countdown struct {
	left atomic.Int64
	ch   chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{ch: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) done() {
	if c.left.Add(-1) == 0 {
		close(c.ch)
	}
}

// wait waits for the countdown to reach zero and then for the engine to be
// idle (every settlement acknowledged); each wait fails after timeout.
func (c *countdown) wait(ctx context.Context, eng *api.Engine, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.ch:
	case <-t.C:
		return fmt.Errorf("timed out after %v with %d handler calls missing", timeout, c.left.Load())
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return eng.WaitIdle(wctx)
}

// produce calls fn(i) for i in [0, n) from gos goroutines and returns the
// first error.
func produce(gos, n int, fn func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(gos, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// finishRun ends a run of jobs ids on eng: unless err is set already it
// waits for cd, the jobs' handlers, then stops the profile, checks through
// Status that the jobs completed and closes the engine. It returns when
// the wait ended, the process's CPU time then, and the journal's shape;
// err, if set, comes first among the errors.
func finishRun(ctx context.Context, eng *api.Engine, cd *countdown, ids []string, stopProfile func(),
	closeEng func() (journalShape, error), err error) (time.Time, time.Duration, journalShape, error) {
	if err == nil {
		err = cd.wait(ctx, eng, drainTimeout)
	}
	end, cpu := time.Now(), cputime.Process()
	stopProfile()
	if err == nil {
		err = checkCompleted(ctx, eng, ids)
	}
	shape, cerr := closeEng()
	if err == nil {
		err = cerr
	}
	return end, cpu, shape, err
}

// checkCompleted verifies, through Status, that a sample of ids completed.
func checkCompleted(ctx context.Context, eng *api.Engine, ids []string) error {
	step := max(1, len(ids)/32)
	for i := 0; i < len(ids); i += step {
		st, err := eng.Status(ctx, ids[i])
		if err != nil {
			return fmt.Errorf("status of %s: %w", ids[i], err)
		}
		if st.Status != api.JobCompleted {
			return fmt.Errorf("job %s is %s after the drain, want completed", ids[i], st.Status)
		}
	}
	return nil
}

// historyHandler names the no-op jobs of runHistory.
const historyHandler = "history"

// runHistory runs n no-op jobs through a started engine, enqueued from gos
// goroutines, and returns once the engine is idle. A measurement taken
// after it meets a journal with history, as a long-running engine's is,
// instead of a fresh one: Pebble's memtables, which start at 256 KB and
// double at each rotation, have grown, and the flushes and compactions the
// history set off may still run.
func runHistory(ctx context.Context, eng *api.Engine, n, gos int) error {
	err := api.Handle(eng, historyHandler, func(context.Context, *api.Delivery, payload) error { return nil })
	if err != nil {
		return err
	}
	err = produce(gos, n, func(i int) error {
		_, err := eng.Enqueue(ctx, historyHandler, payload{I: int32(i)})
		return err
	})
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return eng.WaitIdle(ctx)
}
