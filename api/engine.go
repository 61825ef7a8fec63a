package api

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

// Version is the engine version recorded in run_started.
const Version = "0.1.0"

// Lifecycle is an engine's lifecycle state (SD-34).
type Lifecycle uint8

// Lifecycle states.
const (
	Starting Lifecycle = iota
	Recovering
	Ready
	Draining
	Stopped
	Failed
)

func (l Lifecycle) String() string {
	return [...]string{"starting", "recovering", "ready", "draining", "stopped", "failed"}[l]
}

// OpenStats says what Open read to rebuild the state (RL-12).
type OpenStats struct {
	// SnapshotSeq is the seq of the snapshot Open started from, 0 for none.
	SnapshotSeq uint64
	// SnapshotsIgnored counts snapshots that failed their checks and were
	// skipped (a cache miss, never an error).
	SnapshotsIgnored int
	// RecordsReplayed counts records folded after the snapshot.
	RecordsReplayed uint64
	// LastSeq is the journal's last seq at open.
	LastSeq uint64
	// Recovered counts attempts a crash had left open (DL-44).
	Recovered int
	// RunID identifies this run in the journal (run_started).
	RunID string
}

// Engine is an embedded quire engine over one journal directory. Open one,
// register handlers with [Handle], then [Engine.Start] it (or [Engine.Run]
// it in a worker process). All methods are safe for concurrent use.
type Engine struct {
	opts Options
	clk  clock.Clock
	j    *journal.Journal
	m    *scheduler.Machine
	r    *scheduler.Runner

	hmu              sync.RWMutex
	handlers         map[string]*handlerEntry
	workflows        map[string]*scheduler.WorkflowDef
	deadlineHandlers map[string]*deadlineEntry

	mu        sync.Mutex
	lifecycle Lifecycle
	closed    chan struct{}
	closeErr  error
	closeOnce sync.Once
	fatal     error
	stats     OpenStats
	snapWG    sync.WaitGroup
}

// Open opens (or creates) the journal in opts.Dir, replays it from the
// newest valid snapshot, recovers attempts a crash left open (DL-44) and
// appends run_started. Options are validated first: an invalid one returns
// an [*OptionError] and touches nothing. A journal written by a newer
// version, or one that fails its checks, refuses to open with the reason.
// The engine starts no attempt until [Engine.Start] or [Engine.Run].
func Open(ctx context.Context, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("quire: open %s: %w", opts.Dir, err)
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.System()
	}
	entropy := opts.Entropy
	if entropy == nil {
		entropy = ulid.Monotonic(crand.Reader, 0)
	}
	src := opts.Rand
	if src == nil {
		var seed [16]byte
		if _, err := io.ReadFull(crand.Reader, seed[:]); err != nil {
			return nil, fmt.Errorf("quire: seed jitter source: %w", err)
		}
		src = rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))
	}
	rng := rand.New(src)

	j, err := journal.Open(opts.Dir, journal.Options{FS: opts.FS, Clock: clk, RecordBytesMax: opts.RecordBytesMax})
	if err != nil {
		return nil, fmt.Errorf("quire: open journal %s: %w", opts.Dir, err)
	}
	e := &Engine{opts: opts, clk: clk, j: j, closed: make(chan struct{}), lifecycle: Recovering,
		handlers: make(map[string]*handlerEntry), workflows: make(map[string]*scheduler.WorkflowDef),
		deadlineHandlers: make(map[string]*deadlineEntry)}
	st, err := e.load()
	if err != nil {
		j.Close()
		return nil, err
	}
	newID := func(prefix string, now time.Time) string {
		return prefix + ulid.MustNew(ulid.Timestamp(now), entropy).String()
	}
	e.m = scheduler.NewMachine(scheduler.Config{
		Workers:         opts.Workers,
		DeliveryTimeout: opts.DeliveryTimeout,
		QueueOrder:      opts.Queues,
		RegisteredFunc:  func(h string) bool { return e.handler(h) != nil },
		NewIDFunc:       newID,
		PickFunc:        func(n int) int { return rng.IntN(n) },
		WorkflowFunc:    e.workflowDef,
		LookupFunc:      e.lookupWorkflow,
		IdempotencyFunc: e.lookupIdempotency,
	}, st)
	e.r = scheduler.NewRunner(scheduler.RunnerConfig{
		Clock:                 clk,
		Appender:              journalAppender{j},
		Execute:               e.run,
		OnFatal:               e.onFatal,
		SnapshotEvery:         uint64(opts.SnapshotEvery),
		SnapshotFunc:          e.writeSnapshot,
		DeadlineFunc:          e.runDeadline,
		HandlerTimeout:        opts.DeliveryTimeout,
		DeadlineCheckInterval: opts.DeadlineCheckInterval,
		SettlementTimeout:     opts.SettlementTimeout,
	}, e.m)
	e.r.Start()
	runID := newID("run_", clk.Now())
	err = e.r.Submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		d, lost := m.Recover(now, runID, Version)
		e.stats.Recovered = lost
		return d, nil
	})
	if err != nil {
		e.r.Stop(context.Background())
		e.closeJournal()
		return nil, fmt.Errorf("quire: recover %s: %w", opts.Dir, err)
	}
	e.stats.RunID = runID
	e.setLifecycle(Ready)
	return e, nil
}

// load rebuilds the state: the newest snapshot that passes its checks,
// then the records after it.
func (e *Engine) load() (*replay.State, error) {
	st := replay.New()
	snaps := e.j.Snapshots()
	for snaps.Next() {
		s := snaps.Snapshot()
		if s.Err != nil {
			e.stats.SnapshotsIgnored++
			continue
		}
		dec, err := replay.Decode(s.State)
		if err != nil || dec.LastSeq != s.Seq {
			e.stats.SnapshotsIgnored++
			continue
		}
		st = dec
		e.stats.SnapshotSeq = s.Seq
		break
	}
	err := snaps.Err()
	snaps.Close()
	if err != nil {
		return nil, fmt.Errorf("quire: read snapshots: %w", err)
	}
	if e.j.LastSeq() <= st.LastSeq {
		e.stats.LastSeq = st.LastSeq
		return st, nil
	}
	it := e.j.Scan(st.LastSeq+1, e.j.LastSeq())
	defer it.Close()
	for it.Next() {
		if err := replay.Apply(st, it.Record()); err != nil {
			return nil, fmt.Errorf("quire: replay %s: %w", e.opts.Dir, err)
		}
		e.stats.RecordsReplayed++
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("quire: replay %s: %w", e.opts.Dir, err)
	}
	e.stats.LastSeq = st.LastSeq
	return st, nil
}

// writeSnapshot runs on the runner's loop with the state at st.LastSeq. It
// encodes there and returns the write, which the runner calls on its loop
// once that seq is acknowledged and before its next append is submitted,
// so the snapshot lands at most one group behind (RL-12). The encoding is
// then verified in the background (Digest(st) is the SHA-256 of these
// very bytes, so a decode that digests the same proves the round trip); a
// snapshot that fails is deleted, and older ones are pruned only after a
// newer one passed.
func (e *Engine) writeSnapshot(st *replay.State) func() {
	b, err := replay.Encode(st)
	if err != nil {
		return nil
	}
	seq := st.LastSeq
	return func() {
		if err := e.j.WriteSnapshot(context.Background(), seq, b); err != nil {
			return
		}
		e.snapWG.Add(1)
		go func() {
			defer e.snapWG.Done()
			dec, err := replay.Decode(b)
			if err != nil || replay.Digest(dec) != sha256.Sum256(b) {
				e.j.DeleteSnapshot(context.Background(), seq)
				return
			}
			e.j.DeleteSnapshotsBefore(context.Background(), seq)
		}()
	}
}

// lookupWorkflow reads a finished workflow's summary from the terminal
// index, for the machine (it runs on the engine's loop).
func (e *Engine) lookupWorkflow(id string) (scheduler.WorkflowSummary, bool) {
	b, ok, err := e.j.Index(id)
	if err != nil || !ok {
		return scheduler.WorkflowSummary{}, false
	}
	s, err := replay.DecodeWorkflowSummary(b)
	if err != nil {
		return scheduler.WorkflowSummary{}, false
	}
	return scheduler.WorkflowSummary{Status: s.Status.String(), State: s.State, Error: s.Error}, true
}

func (e *Engine) lookupIdempotency(key string) (replay.Idempotent, bool) {
	b, ok, err := e.j.Index(replay.IdempotencyPrefix + key)
	if err != nil || !ok {
		return replay.Idempotent{}, false
	}
	v, err := replay.DecodeIdempotent(b)
	return v, err == nil
}

// Stats returns what Open read to rebuild the state.
func (e *Engine) Stats() OpenStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Lifecycle returns the engine's lifecycle state (SD-34).
func (e *Engine) Lifecycle() Lifecycle {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lifecycle
}

func (e *Engine) setLifecycle(l Lifecycle) {
	e.mu.Lock()
	e.lifecycle = l
	e.mu.Unlock()
}

func (e *Engine) onFatal(err error) {
	e.mu.Lock()
	e.fatal = err
	e.lifecycle = Failed
	e.mu.Unlock()
}

func (e *Engine) handler(name string) *handlerEntry {
	e.hmu.RLock()
	defer e.hmu.RUnlock()
	return e.handlers[name]
}

func (e *Engine) register(h *handlerEntry) error {
	if err := e.admit(); err != nil {
		return err
	}
	e.hmu.Lock()
	if _, dup := e.handlers[h.name]; dup {
		e.hmu.Unlock()
		return &NameError{Kind: "handler", Name: h.name, Err: ErrDuplicate}
	}
	e.handlers[h.name] = h
	e.hmu.Unlock()
	return e.r.Submit(context.Background(), func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		m.Unpark(h.name)
		return scheduler.Decision{}, nil
	})
}

// admit refuses calls that would create runnable work once the engine is
// draining, closed or failed (SD-12).
func (e *Engine) admit() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.lifecycle {
	case Draining:
		return ErrShuttingDown
	case Stopped:
		return ErrClosed
	case Failed:
		return fmt.Errorf("%w: %v", ErrFailStop, e.fatal)
	}
	return nil
}

// live refuses calls on a closed or failed engine; reads keep working while
// draining.
func (e *Engine) live() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.lifecycle {
	case Stopped:
		return ErrClosed
	case Failed:
		return fmt.Errorf("%w: %v", ErrFailStop, e.fatal)
	}
	return nil
}

// submit runs fn on the engine's loop and maps runner errors.
func (e *Engine) submit(ctx context.Context, fn func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error)) error {
	err := e.r.Submit(ctx, fn)
	if errors.Is(err, scheduler.ErrStopped) {
		return ErrClosed
	}
	return err
}

// Start begins starting attempts: jobs become eligible as JB-2 says. It
// returns at once; call [Engine.Close] to stop. Use [Engine.Run] instead in
// a process that should stop on SIGINT or SIGTERM.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.admit(); err != nil {
		return err
	}
	// WD-6: the long-running mode checks workflow deadlines once right
	// after recovery, before the first dispatch, then every
	// DeadlineCheckInterval; the check is decided ahead of any start.
	if err := e.r.EnableDeadlineChecks(ctx); err != nil {
		return err
	}
	return e.r.SetDispatch(ctx, true)
}

func (e *Engine) startOnce(ctx context.Context) error {
	if err := e.admit(); err != nil {
		return err
	}
	return e.r.SetDispatch(ctx, true)
}

// Run starts the engine and blocks until ctx is cancelled or the process
// gets SIGINT or SIGTERM, then closes the engine gracefully within
// ShutdownTimeout and returns Close's result. It returns early with the
// error if the engine fails (ErrFailStop): the process should then exit
// and restart, which replays the journal.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.Start(ctx); err != nil {
		return err
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-ctx.Done():
	case <-sig:
	case <-e.r.Done():
	}
	cctx, cancel := context.WithTimeout(context.Background(), e.opts.ShutdownTimeout)
	defer cancel()
	return e.Close(cctx)
}

// Close stops admission, waits for running attempts to settle (until ctx
// ends), stops the engine and closes the journal. Attempts still running
// when ctx ends are abandoned and redelivered at the next Open (DL-44).
// Later calls return the first call's result.
func (e *Engine) Close(ctx context.Context) error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		failed := e.lifecycle == Failed
		if !failed {
			e.lifecycle = Draining
		}
		e.mu.Unlock()
		var err error
		if !failed {
			err = e.r.Drain(ctx)
			if errors.Is(err, scheduler.ErrStopped) {
				err = nil
			}
		}
		e.r.Stop(context.Background())
		e.snapWG.Wait()
		if cerr := e.closeJournal(); err == nil {
			err = cerr
		}
		e.mu.Lock()
		if e.lifecycle != Failed {
			e.lifecycle = Stopped
		} else if err == nil {
			err = fmt.Errorf("%w: %v", ErrFailStop, e.fatal)
		}
		e.mu.Unlock()
		e.closeErr = err
		close(e.closed)
	})
	<-e.closed
	return e.closeErr
}

func (e *Engine) closeJournal() error {
	err := e.j.Close()
	if errors.Is(err, journal.ErrFailStop) {
		return nil // reported through the fail-stop cause
	}
	return err
}

// Checkpoint writes a consistent copy of the journal to dir, which must
// not exist. Inspect it with qctl while the engine runs.
func (e *Engine) Checkpoint(dir string) error {
	if err := e.live(); err != nil {
		return err
	}
	return e.j.Checkpoint(dir)
}

type journalAppender struct{ j *journal.Journal }

func (a journalAppender) Append(ctx context.Context, idx []scheduler.IndexEntry, recs ...record.Record) ([]uint64, error) {
	var entries []journal.IndexEntry
	if len(idx) > 0 {
		entries = make([]journal.IndexEntry, len(idx))
		for i, x := range idx {
			entries[i] = journal.IndexEntry{ID: x.ID, Value: x.Value}
		}
	}
	// The machine predicted each record's seq: the engine is the journal's
	// only writer, so the journal must assign exactly those.
	want := make([]uint64, len(recs))
	out := make([]record.Record, len(recs))
	for i, r := range recs {
		want[i] = r.Seq
		r.Seq = 0
		out[i] = r
	}
	seqs, err := a.j.AppendIndexed(ctx, entries, out...)
	if err != nil {
		return nil, err
	}
	if h := testHookAfterAppend; h != nil {
		h(seqs)
	}
	for i := range seqs {
		if seqs[i] != want[i] {
			return nil, fmt.Errorf("quire: journal assigned seq %d to a record decided as seq %d: another writer appended", seqs[i], want[i])
		}
	}
	return seqs, nil
}

var _ scheduler.Appender = journalAppender{}

// RunOnce starts the engine, processes the work that is eligible at the
// clock's current instant until nothing more is (JB-9), then closes the
// engine. It never runs the periodic workflow deadline check. Jobs that
// become available later stay pending in the journal.
func (e *Engine) RunOnce(ctx context.Context) error {
	if err := e.startOnce(ctx); err != nil {
		return err
	}
	if err := e.WaitIdle(ctx); err != nil {
		e.Close(context.Background())
		return err
	}
	return e.Close(ctx)
}
