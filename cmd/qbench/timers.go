package main

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/internal/cputime"
	"github.com/quire-dev/quire/internal/walltimer"
	"github.com/quire-dev/quire/journal"
)

const (
	timersDefault = 500
	timerDelay    = 200 * time.Millisecond
	timerPace     = 10 * time.Millisecond // 100 enqueues/s
	// syncValueBytes is about an attempt_started record's size.
	syncValueBytes = 160
)

// How a timers run is served.
type timerBackend int

const (
	// goTimers: time.AfterFunc alone, no journal. Its lateness is what the
	// Go runtime's timers give on this machine: the baseline.
	goTimers timerBackend = iota
	// syncWrites: the synced writes the spec requires of a delayed job,
	// done per job on raw Pebble with nothing else: a synced Set at
	// enqueue, and at the instant (one precise timer for all jobs, as the
	// engine has) a synced Set before the "handler" (DL-7's
	// attempt_started) and one after it (the settlement), on a goroutine
	// of the job's own. Paced, no design that journals the start before
	// the handler can start earlier on this disk: it is the floor. In a
	// burst it is the per-job way, which group commits can beat.
	syncWrites
	// groupCommits: the same three writes per job on raw Pebble, but made
	// as the engine makes them: one goroutine commits, synced, everything
	// pending when the previous commit returns. A job comes due (one
	// precise timer for all jobs), its start joins the next commit, its
	// "handler" starts when that commit returns, and its settlement joins
	// the commit after. A start that comes due while a commit syncs waits
	// for it and then for its own: in a burst, the floor of any design
	// that journals each start before its handler with one commit at a
	// time, on this disk. Its "handlers" run on the committer and cost
	// nothing, and nothing limits how many run at once.
	groupCommits
	// engine: the engine.
	engine
)

// timers measures how late delayed jobs start, with enqueues paced at
// 100/s and then all at once. Each mode is also run with plain Go timers
// (the baseline: the lateness of the runtime's timers alone) and on the
// synced writes alone (syncWrites), which is what a synced start costs on
// this disk before any engine work.
func (b *bench) timers(ctx context.Context) error {
	for _, n := range b.sizes(timersDefault) {
		for _, mode := range []struct {
			name   string
			paced  bool
			target float64
		}{{"paced", true, 1}, {"burst", false, 2}} {
			if !slices.Contains(b.cfg.timerModes, mode.name) {
				continue
			}
			var runs, base, syncs, groups []*obj
			for range b.cfg.runs {
				o, err := b.timersOnce(ctx, n, mode.paced, goTimers)
				if err != nil {
					return err
				}
				base = append(base, o)
				if o, err = b.timersOnce(ctx, n, mode.paced, syncWrites); err != nil {
					return err
				}
				syncs = append(syncs, o)
				if o, err = b.timersOnce(ctx, n, mode.paced, engine); err != nil {
					return err
				}
				runs = append(runs, o)
				if !mode.paced {
					// Paced, each commit holds one job: the same as
					// syncWrites. In the burst the floor's jobs come due
					// at the engine run's instants, so that both meet
					// the same burst.
					if o, err = b.timersOnce(ctx, n, mode.paced, groupCommits); err != nil {
						return err
					}
					groups = append(groups, o)
				}
			}
			bo := medianObj(base, "p99_ms")
			so := medianObj(syncs, "p99_ms")
			o := medianObj(runs, "p99_ms")
			o.set("variant", mode.name)
			if b.cfg.timerHistory > 0 {
				o.set("history_jobs", b.cfg.timerHistory)
			}
			o.set("per_run_gc_cycles", perRun(runs, "gc_cycles"))
			o.set("per_run_wal_rotations", perRun(runs, "wal_rotations"))
			o.set("per_run_warms", perRun(runs, "warms"))
			o.set("per_run_start_delay_p99_ms", perRun(runs, "start_delay_p99_ms"))
			o.set("baseline", "go_timer_lateness")
			o.set("baseline_p50_ms", bo.num("p50_ms"))
			o.set("baseline_p99_ms", bo.num("p99_ms"))
			o.set("baseline_max_ms", bo.num("max_ms"))
			o.set("p99_over_baseline_ms", round(o.num("p99_ms")-bo.num("p99_ms"), 3))
			o.set("sync_writes", "raw_pebble_synced_enqueue_warm_start_settle_per_job")
			o.set("sync_writes_p50_ms", so.num("p50_ms"))
			o.set("sync_writes_p99_ms", so.num("p99_ms"))
			o.set("sync_writes_max_ms", so.num("max_ms"))
			o.set("p99_over_sync_writes_ms", round(o.num("p99_ms")-so.num("p99_ms"), 3))
			if len(groups) > 0 {
				g := medianObj(groups, "p99_ms")
				o.set("group_commits", "raw_pebble_one_synced_commit_at_a_time_warm_start_then_settle")
				o.set("group_commits_p50_ms", g.num("p50_ms"))
				o.set("group_commits_p99_ms", g.num("p99_ms"))
				o.set("p99_over_group_commits_ms", round(o.num("p99_ms")-g.num("p99_ms"), 3))
			}
			o.set("target_p99_ms", mode.target)
			o.set("target_met", o.num("p99_ms") <= mode.target)
			b.emit(o)
		}
	}
	return nil
}

// timersOnce runs one mode on one backend.
func (b *bench) timersOnce(ctx context.Context, n int, paced bool, backend timerBackend) (*obj, error) {
	var (
		cd        = newCountdown(n)
		started   = make([]time.Time, n)
		requested = make([]time.Time, n)
		fromState = make([]bool, n)
		enqueue   func(i int) error
		closeEng  func() (journalShape, error)
		eng       *api.Engine
		db        *pebble.DB
		// historyEnd is the last seq of the engine's history (runHistory).
		historyEnd uint64
	)
	switch backend {
	case engine:
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
		if err == nil && b.cfg.timerHistory > 0 {
			err = runHistory(ctx, eng, b.cfg.timerHistory, b.cfg.producers)
			// The journal is fresh: its records so far are seqs 1 to
			// this, and the measured jobs' starts come after them.
			historyEnd = eng.JournalMetrics().Records
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
	case syncWrites:
		var closeDB func()
		var err error
		if db, closeDB, err = b.openPebble("syncwrites"); err != nil {
			return nil, err
		}
		defer closeDB()
		val := make([]byte, syncValueBytes)
		w := b.warmer(db)
		set := func(i, kind int) error {
			defer w.committed()
			return db.Set(timerKey(i, kind), val, pebble.Sync)
		}
		dq := newDueQueue(func(i int) {
			if i < 0 {
				go w.warm()
				return
			}
			go func() {
				if err := set(i, 1); err != nil {
					fatal(err)
				}
				started[i] = time.Now()
				if err := set(i, 2); err != nil {
					fatal(err)
				}
				cd.done()
			}()
		})
		defer dq.stop()
		enqueue = func(i int) error {
			if err := set(i, 0); err != nil {
				return err
			}
			requested[i] = time.Now().Add(timerDelay)
			w.schedule(dq, requested[i])
			dq.add(requested[i], i)
			return nil
		}
	case groupCommits:
		var closeDB func()
		var err error
		if db, closeDB, err = b.openPebble("groupcommits"); err != nil {
			return nil, err
		}
		defer closeDB()
		w := b.warmer(db)
		gc := newGroupCommitter(db, w)
		defer gc.stop()
		// One timer for every job, as the engine has: per-job timers
		// would each sleep their final stretch on a thread of their own,
		// hundreds at once in a burst, and charge the floor for it.
		dq := newDueQueue(func(i int) {
			if i < 0 {
				if !gc.busy() {
					go w.warm()
				}
				return
			}
			gc.add(timerKey(i, 1), func() {
				started[i] = time.Now()
				cd.done()
				gc.add(timerKey(i, 2), nil)
			})
		})
		defer dq.stop()
		// The engine run's due instants, relative to its first: the burst
		// the engine met (b.lastDue, set by the engine run before this).
		due := b.lastDue
		if len(due) != n {
			return nil, fmt.Errorf("timers: the group-commit floor needs the engine run's %d due instants, has %d", n, len(due))
		}
		var base time.Time
		var baseOnce sync.Once
		enqueue = func(i int) error {
			if err := gc.commit(timerKey(i, 0)); err != nil {
				return err
			}
			baseOnce.Do(func() { base = time.Now().Add(timerDelay) })
			requested[i] = base.Add(due[i])
			w.schedule(dq, requested[i])
			dq.add(requested[i], i)
			return nil
		}
	default:
		enqueue = func(i int) error {
			requested[i] = time.Now().Add(timerDelay)
			time.AfterFunc(time.Until(requested[i]), func() {
				started[i] = time.Now()
				cd.done()
			})
			return nil
		}
	}
	isEngine := backend == engine

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
	// Warms are counted over the whole run: paced, most jobs come due
	// while later ones are still being enqueued.
	var warms0 uint64
	if isEngine {
		warms0 = eng.JournalMetrics().Warms
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
	// Every enqueue has returned and nothing is due for timerDelay: the GC
	// cycles from here on ran while the jobs came due and started.
	gc0, cpu0, alloc0 := gcCycles(), cputime.Process(), heapAllocs()
	var (
		wals0   uint64
		delays0 api.StartDelays
	)
	if isEngine {
		wals0, delays0 = eng.JournalMetrics().WALsCreated, eng.StartDelays()
	}
	// The profile covers the same stretch: the jobs coming due and
	// starting, not their enqueues.
	stopProfile := func() {}
	if isEngine {
		stopProfile = b.profile("timers", tag)
	}
	err := errors.Join(errs...)
	if err == nil {
		if isEngine {
			err = cd.wait(ctx, eng, timerDelay+drainTimeout)
		} else {
			select {
			case <-cd.ch:
			case <-time.After(timerDelay + drainTimeout):
				err = errors.New("timers did not fire")
			}
		}
	}
	gcs, cpu, alloc := gcCycles()-gc0, cputime.Process()-cpu0, heapAllocs()-alloc0
	var (
		wals, warms uint64
		delays      api.StartDelays
	)
	if isEngine {
		jm := eng.JournalMetrics()
		wals, warms, delays = jm.WALsCreated-wals0, jm.Warms-warms0, eng.StartDelays().Sub(delays0)
	}
	stopProfile()
	var shape journalShape
	if isEngine {
		var cerr error
		if shape, cerr = closeEng(); err == nil {
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
	if isEngine {
		o.set("workers", b.cfg.timerWorkers)
	}
	o.set("p50_ms", ms(percentile(late, 50)))
	o.set("p99_ms", ms(percentile(late, 99)))
	o.set("max_ms", ms(late[n-1]))
	o.set("min_ms", ms(late[0]))
	if isEngine {
		o.set("requested_from_status", fmt.Sprintf("%d/%d", exact, n))
		if starts, _ := shape.startsAfter(historyEnd); starts != n {
			return nil, fmt.Errorf("timers: %d attempt_started records after seq %d, want one for each of the %d jobs", starts, historyEnd, n)
		}
		shape.setStarts(o, historyEnd)
	}
	o.set("requested_spread_ms", ms(hi.Sub(lo)))
	if isEngine {
		// From each start's acknowledgement to its execution's start, as
		// the engine counts them (bucket bounds: at most a quarter high).
		o.set("start_delay_p50_ms", ms(delays.Quantile(0.5)))
		o.set("start_delay_p99_ms", ms(delays.Quantile(0.99)))
	}
	if isEngine {
		b.lastDue = make([]time.Duration, n)
		for i := range n {
			b.lastDue[i] = requested[i].Sub(lo)
		}
	}
	o.set("gc_cycles", gcs)
	if isEngine {
		o.set("wal_rotations", int(wals))
		// Syncs of no record the engine made before instants
		// (journal.Warm); the floors make theirs the same way.
		o.set("warms", int(warms))
	}
	if isEngine && !paced {
		// The process's CPU from the last enqueue's return to the last
		// start, per job: in the burst that is the starts and most of the
		// settlements, beside a wait for the delay that costs next to
		// nothing. Paced, most jobs started before the last enqueue.
		o.set("fire_cpu_us_per_job", round(float64(cpu.Microseconds())/float64(n), 1))
		// The bytes allocated on the heap over the same stretch, per job:
		// what brings the next GC cycle closer.
		o.set("fire_alloc_bytes_per_job", round(alloc/float64(n), 0))
	}
	return o, nil
}

// timerKey is the key of write kind (0 enqueue, 1 start, 2 settlement) of
// job i on the raw Pebble backends.
func timerKey(i, kind int) []byte {
	key := make([]byte, 9)
	binary.BigEndian.PutUint64(key[:8], uint64(i))
	key[8] = byte(kind)
	return key
}

// groupCommitter commits, synced and one commit at a time, every write
// added while the previous commit ran, then calls each write's after
// func (groupCommits).
type groupCommitter struct {
	db      *pebble.DB
	warmer  *pebbleWarmer
	val     []byte
	mu      sync.Mutex
	pending []groupWrite
	running bool // a commit is in progress
	err     error
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
}

type groupWrite struct {
	key   []byte
	after func()
}

func newGroupCommitter(db *pebble.DB, w *pebbleWarmer) *groupCommitter {
	g := &groupCommitter{db: db, warmer: w, val: make([]byte, syncValueBytes),
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go g.run()
	return g
}

// add queues a write for the next commit; after, if not nil, runs on the
// committer once that commit returned.
func (g *groupCommitter) add(key []byte, after func()) {
	g.mu.Lock()
	g.pending = append(g.pending, groupWrite{key: key, after: after})
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// commit adds a write and waits for its commit.
func (g *groupCommitter) commit(key []byte) error {
	done := make(chan struct{})
	g.add(key, func() { close(done) })
	select {
	case <-done:
	case <-g.done:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *groupCommitter) run() {
	defer close(g.done)
	for {
		select {
		case <-g.wake:
		case <-g.quit:
			return
		}
		for {
			g.mu.Lock()
			ws := g.pending
			g.pending = nil
			g.running = len(ws) > 0
			g.mu.Unlock()
			if len(ws) == 0 {
				break
			}
			b := g.db.NewBatch()
			for _, w := range ws {
				_ = b.Set(w.key, g.val, nil)
			}
			err := b.Commit(pebble.Sync)
			g.warmer.committed()
			if err != nil {
				g.mu.Lock()
				g.err = err
				g.mu.Unlock()
				return
			}
			_ = b.Close()
			for _, w := range ws {
				if w.after != nil {
					w.after()
				}
			}
		}
	}
}

// busy reports whether a commit is in progress or writes wait for one.
func (g *groupCommitter) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running || len(g.pending) > 0
}

// pebbleWarmer is the engine's warm on raw Pebble (journal.Warm, called
// Options.TimerWarmup before an instant by the runner): a synced log-data
// write, skipped when a commit returned within the lead. A lead <= 0
// makes none.
type pebbleWarmer struct {
	db   *pebble.DB
	lead time.Duration
	last atomic.Int64 // when the last commit returned, in Unix ns
}

// warmer returns the floors' warmer, with the lead the engine uses.
func (b *bench) warmer(db *pebble.DB) *pebbleWarmer {
	lead := b.cfg.timerWarmup
	if lead == 0 {
		lead = journal.WarmLead
	}
	return &pebbleWarmer{db: db, lead: lead}
}

// schedule adds a warm for an instant at to q, which fires it as job -1.
func (w *pebbleWarmer) schedule(q *dueQueue, at time.Time) {
	if w.lead > 0 {
		q.add(at.Add(-w.lead), -1)
	}
}

func (w *pebbleWarmer) committed() { w.last.Store(time.Now().UnixNano()) }

func (w *pebbleWarmer) warm() {
	if time.Since(time.Unix(0, w.last.Load())) < w.lead {
		return
	}
	b := w.db.NewBatch()
	_ = b.LogData(nil, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		fatal(err)
	}
	_ = b.Close()
	w.committed()
}

func (g *groupCommitter) stop() {
	close(g.quit)
	<-g.done
}

// dueQueue fires each job at its instant from one goroutine with one
// precise timer for the earliest instant, as the engine's runner does:
// every job due when it wakes fires then, in instant order.
type dueQueue struct {
	mu   sync.Mutex
	h    dueHeap
	fire func(i int)
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
}

type dueItem struct {
	at time.Time
	i  int
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(a, b int) bool { return h[a].at.Before(h[b].at) }
func (h dueHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newDueQueue(fire func(i int)) *dueQueue {
	q := &dueQueue{fire: fire, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// add schedules job i to fire at at.
func (q *dueQueue) add(at time.Time, i int) {
	q.mu.Lock()
	heap.Push(&q.h, dueItem{at: at, i: i})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *dueQueue) run() {
	defer close(q.done)
	var due []int
	for {
		q.mu.Lock()
		now := time.Now()
		due = due[:0]
		for len(q.h) > 0 && !q.h[0].at.After(now) {
			due = append(due, heap.Pop(&q.h).(dueItem).i)
		}
		var next time.Time
		if len(q.h) > 0 {
			next = q.h[0].at
		}
		q.mu.Unlock()
		for _, i := range due {
			q.fire(i)
		}
		if len(due) > 0 {
			continue
		}
		var timerC <-chan time.Time
		var t *walltimer.Timer
		if !next.IsZero() {
			t = walltimer.At(next)
			timerC = t.C()
		}
		select {
		case <-timerC:
		case <-q.wake:
		case <-q.quit:
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
		}
	}
}

func (q *dueQueue) stop() {
	close(q.quit)
	<-q.done
}
