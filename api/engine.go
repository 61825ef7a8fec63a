package api

import (
	"cmp"
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
	"github.com/quire-dev/quire/shutdown"
)

// noop is a loop op that decides nothing: its acknowledgement is a barrier
// behind everything decided before it.
func noop(*scheduler.Machine, time.Time) (scheduler.Decision, error) {
	return scheduler.Decision{}, nil
}

// Version is the engine version recorded in run_started.
const Version = "0.1.0"

// Lifecycle is an engine's lifecycle state (SD-34). An engine that is
// open but not started is Ready: admission is open, Enqueue and Dispatch
// are accepted; [Engine.Ready] is still false until its dispatcher runs
// (Start, Run or RunOnce).
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

// Live reports whether an engine in state l is alive (SD-34): true from
// Starting through Draining, false once it is Stopped or Failed. A process
// whose engine is not live should exit and restart; restarting replays the
// journal.
func (l Lifecycle) Live() bool { return l <= Draining }

// String returns the lifecycle's name: "starting", "recovering", "ready",
// "draining", "stopped" or "failed", and "lifecycle(N)" for a value that
// is none of them.
func (l Lifecycle) String() string {
	if l > Failed {
		return fmt.Sprintf("lifecycle(%d)", uint8(l))
	}
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
	// Quarantined lists the streams set aside because a record of theirs
	// is damaged, in stream order (spec/reliability.md §4.4; see
	// [QuarantinedStream]). Empty when the journal is sound.
	Quarantined []QuarantinedStream
}

// Engine is an embedded quire engine over one journal directory. Open one,
// register handlers with [Handle], then [Engine.Start] it (or [Engine.Run]
// it in a worker process). All methods are safe for concurrent use.
//
// The calls that append ([Engine.Enqueue], [Engine.Dispatch],
// [Engine.Signal], [Engine.Bury], [Engine.Retry], [Engine.RetryBuried],
// [Engine.PauseQueue], [Engine.ResumeQueue], [Engine.PauseWorkflow],
// [Engine.ResumeWorkflow], [Engine.CancelWorkflow], [Engine.RetryWorkflow])
// treat ctx alike. A call its own checks refuse (a closed engine, an
// invalid argument) returns that error. Otherwise, if ctx has ended when
// the call is made, or ends before the engine takes the call, the call
// returns an error matching ctx's (errors.Is with [context.Canceled] or
// [context.DeadlineExceeded]) and appends nothing. Once the engine has
// taken the call, ctx no longer stops it: the call waits for its append
// to be synced and returns that outcome, which may be a success although
// ctx ended meanwhile. So an error matching ctx's always means nothing
// was appended, and a success always means the append is durable.
//
// Every call that takes a ctx, these and the others ([Open], [Engine.Start],
// [Engine.Run], [Engine.Shutdown], [Engine.Close], [Engine.Status], ...),
// refuses a nil ctx before it does anything else, with an [*OptionError]
// whose Field is "ctx" (it matches [ErrInvalidOption]): the call appends
// nothing and leaves the engine as it was.
type Engine struct {
	opts Options
	clk  clock.Clock
	j    *journal.Journal
	m    *scheduler.Machine
	r    *scheduler.Runner
	// snapshots counts the snapshot writes ([Engine.SnapshotStats]).
	snapshots snapshotCounts
	// snapScale is, on the runner's loop, the true size of the last
	// snapshot refused as over SnapshotBytesMax divided by its state's
	// replay.SizeHint; 0 once one fits.
	snapScale float64

	hmu              sync.RWMutex
	handlers         map[string]*handlerEntry
	workflows        map[string]*scheduler.WorkflowDef
	deadlineHandlers map[string]*deadlineEntry

	mu        sync.Mutex
	lifecycle Lifecycle
	// dispatching is set once Start, Run or RunOnce turned the dispatcher
	// on; with lifecycle Ready it makes the engine ready (SD-34).
	dispatching bool
	// mode is the worker mode the first Start, Run or RunOnce claimed
	// (JB-9): a RunOnce refuses an engine started long-running, and a
	// Start refuses one a RunOnce is working off and will close.
	mode       workerMode
	closed     chan struct{}
	closeErr   error
	closeOnce  sync.Once
	fatal      error
	stats      OpenStats
	quarantine quarantine // fixed once Open has replayed
	snapWG     sync.WaitGroup
	// snapPrev is closed when the newest snapshot goroutine launched is
	// done; the next one waits for it, so that snapshots are checked and
	// written one at a time, in seq order. Set on the runner's loop,
	// where the writes are launched in seq order.
	snapPrev <-chan struct{}
	// crashed is set when Close abandoned the engine without a shutdown
	// (an already-ended ctx before any initiation).
	crashed bool

	coord *shutdown.Coordinator
	// signals counts the signals Run's listener received (SD-20); only
	// that goroutine touches it.
	signals    int
	runStarted bool // run_started is acknowledged (set once, in Open)
	counts     settleCounts
	initiated  atomic.Bool // the engine installed a shutdown root
	// controlClosed is set when a shutdown's phase 4 starts, before its
	// record is decided: pause, cancel and bury are refused from then on
	// (SD-12).
	controlClosed atomic.Bool
	started       chan struct{}
	startedOnce   sync.Once
	finishOnce    sync.Once
}

// Open opens (or creates) the journal in opts.Dir, replays it from the
// newest valid snapshot, recovers attempts a crash left open (DL-44) and
// appends run_started. Options are validated first: an invalid one, or a
// nil ctx, returns an [*OptionError] and touches nothing, and the engine
// owns nothing. Once the options are accepted the engine owns
// [Options.OwnedResources]: if a later step fails or ctx ends, Open rolls
// back as a shutdown with trigger startup_failure and returns a
// [*StartupError] carrying its report (SD-35). A journal written by a
// newer version, or one that fails its checks, refuses to open with the
// reason ([ErrNewerVersion], [ErrCorrupt]), a directory that holds files
// but no journal with [ErrNotJournal], and one another engine or qctl has
// open with [ErrLocked]. Refusing the journal leaves opts.Dir as Open
// found it, unless its store fail-stopped while opening ([ErrFailStop]): a
// directory that holds no journal gets no LOCK file, and a directory Open
// created is removed. The engine starts no attempt until [Engine.Start] or
// [Engine.Run].
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	clk := opts.Clock
	if clk == nil {
		clk = systemClock{clock.System()}
	}
	e := &Engine{opts: opts, clk: clk, closed: make(chan struct{}), started: make(chan struct{}), lifecycle: Recovering,
		handlers: make(map[string]*handlerEntry), workflows: make(map[string]*scheduler.WorkflowDef),
		deadlineHandlers: make(map[string]*deadlineEntry)}
	// From here on every failure rolls back (SD-35).
	if err := ctx.Err(); err != nil {
		return nil, e.rollBack("open", fmt.Errorf("quire: open %s: %w", opts.Dir, err))
	}
	entropy := opts.Entropy
	if entropy == nil {
		entropy = ulid.Monotonic(crand.Reader, 0)
	}
	src := opts.Rand
	if src == nil {
		var seed [16]byte
		if _, err := io.ReadFull(crand.Reader, seed[:]); err != nil {
			return nil, e.rollBack("seed", fmt.Errorf("quire: seed jitter source: %w", err))
		}
		src = rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:]))
	}
	rng := rand.New(src)

	jopts := journal.Options{
		FS: opts.FS, Clock: clk, RecordBytesMax: opts.RecordBytesMax, DiskSlowThreshold: opts.DiskSlowThreshold,
		GroupBytesMax: groupBytesMax(opts.RecordBytesMax), UnitBytesMax: unitBytesMax(opts.RecordBytesMax),
		UnitRecordsMax: journal.UnitRecordsMaxDefault, SnapshotBytesMax: opts.SnapshotBytesMax,
	}
	if n := opts.unitRecordsMax; n > 0 {
		jopts.GroupRecordsMax, jopts.UnitRecordsMax = min(n, journal.GroupRecordsMaxDefault), n
	}
	if n := opts.unitBytesMax; n > 0 {
		jopts.GroupBytesMax, jopts.UnitBytesMax = min(n, jopts.GroupBytesMax), n
	}
	// The replay runs on the journal's read-only look, before its
	// read-write open changes the store: a journal refused for damage or
	// for a newer version is left as it was. Its state is kept if the
	// read-write open finds the same log.
	var (
		probed    *replay.State
		probedAt  uint64
		replayErr error
	)
	jopts.Probe = func(pj *journal.Journal) error {
		probed, replayErr = e.load(pj)
		probedAt = pj.LastSeq()
		return replayErr
	}
	j, err := journal.Open(opts.Dir, jopts)
	if err != nil {
		if replayErr != nil {
			return nil, e.rollBack("replay", replayErr)
		}
		return nil, e.rollBack("open journal", fmt.Errorf("quire: open journal %s: %w", opts.Dir, err))
	}
	e.j = j
	if err := startupStep("replay"); err != nil {
		return nil, e.rollBack("replay", err)
	}
	st := probed
	if st == nil || j.LastSeq() != probedAt {
		e.stats = OpenStats{}
		if st, err = e.load(j); err != nil {
			return nil, e.rollBack("replay", err)
		}
	}
	e.noteQuarantine(st)
	newID := (&idSource{entropy: entropy}).next
	e.m = scheduler.NewMachine(scheduler.Config{
		Workers:         opts.Workers,
		DeliveryTimeout: opts.DeliveryTimeout,
		QueueJobFunc:    e.queueJob,
		QueueOrder:      opts.Queues,
		RegisteredFunc:  func(h string) bool { return e.handler(h) != nil },
		NewIDFunc:       newID,
		PickFunc:        func(n int) int { return rng.IntN(n) },
		WorkflowFunc:    e.workflowDef,
		LookupFunc:      e.lookupWorkflow,
		IdempotencyFunc: e.lookupIdempotency,
		StateBytesMax:   opts.PayloadBytesMax,
		UnitRecordsMax:  jopts.UnitRecordsMax,
		UnitBytesMax:    jopts.UnitBytesMax,
		RecordBytesMax:  opts.RecordBytesMax,
	}, st)
	rcfg := scheduler.RunnerConfig{
		Clock:                 clk,
		Appender:              &journalAppender{j: j, counts: &e.counts},
		Execute:               e.run,
		OnFatal:               e.onFatal,
		SnapshotEvery:         uint64(opts.SnapshotEvery),
		SnapshotSlack:         uint64(max(jopts.GroupRecordsMax, journal.GroupRecordsMaxDefault)),
		SnapshotSeq:           e.stats.SnapshotSeq,
		SnapshotFunc:          e.writeSnapshot,
		DeadlineFunc:          e.runDeadline,
		HandlerTimeout:        opts.DeliveryTimeout,
		DeadlineCheckInterval: opts.DeadlineCheckInterval,
		SettlementTimeout:     opts.SettlementTimeout,
		HoldForResults:        opts.Clock == nil,
	}
	if lead := cmp.Or(opts.TimerWarmup, journal.WarmLead); opts.Clock == nil && lead > 0 {
		// A failed warm fail-stops the journal, which the next append
		// reports: there is nothing to do with its error here.
		rcfg.Warm, rcfg.WarmLead = func() { _ = j.Warm() }, lead
	}
	e.r = scheduler.NewRunner(rcfg, e.m)
	owned, telemetry := opts.owned()
	e.coord, err = shutdown.New(shutdown.Options{
		Clock:             clk,
		Engine:            shutdownEngine{e},
		Journal:           shutdownJournal{e},
		ShutdownTimeout:   opts.ShutdownTimeout,
		SettlementTimeout: opts.SettlementTimeout,
		OwnedResources:    owned,
		Telemetry:         telemetry,
	})
	if err != nil {
		// Unreachable: the options were validated.
		return nil, e.rollBack("shutdown options", fmt.Errorf("quire: shutdown options: %w", err))
	}
	e.r.Start()
	runID := newID("run_", clk.Now())
	if err := startupStep("recover"); err != nil {
		return nil, e.rollBack("recover", err)
	}
	err = e.r.Submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		var notes []record.Body
		if prev := m.State().LastRun(); prev != nil && prev.Shutdown.Initiated != nil && prev.Shutdown.Report == nil {
			// SD-36: say so, invent no report; attempts it left open are
			// handled by Recover (DL-44). In run_started's own append: the
			// next run would see this one, not prev.
			notes = append(notes, &record.Debug{Subject: prev.RunID, Code: CodeShutdownInterrupted,
				Message: fmt.Sprintf("run %s initiated a shutdown (%s) and has no shutdown report", prev.RunID, prev.Shutdown.Initiated.Trigger)})
		}
		d, lost := m.Recover(now, runID, Version, notes...)
		e.stats.Recovered = lost
		return d, nil
	})
	if err != nil {
		return nil, e.rollBack("recover", fmt.Errorf("quire: recover %s: %w", opts.Dir, err))
	}
	// run_started is acknowledged: the journal holds this run, and the
	// shutdown records of a rollback belong to it.
	e.runStarted = true
	if err := startupStep("ready"); err != nil {
		return nil, e.rollBack("ready", err)
	}
	e.stats.RunID = runID
	e.setLifecycle(Ready)
	return e, nil
}

// load rebuilds the state: the newest snapshot that passes its checks,
// then the records after it.
func (e *Engine) load(j *journal.Journal) (*replay.State, error) {
	st := replay.New()
	snaps := j.Snapshots()
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
	if j.LastSeq() <= st.LastSeq {
		e.stats.LastSeq = st.LastSeq
		return st, nil
	}
	it := j.ScanQuarantining(st.LastSeq+1, j.LastSeq())
	defer it.Close()
	n, err := replay.FoldQuarantining(st, it)
	e.stats.RecordsReplayed += n
	if err != nil {
		return nil, fmt.Errorf("quire: replay %s: %w", e.opts.Dir, err)
	}
	e.stats.LastSeq = st.LastSeq
	return st, nil
}

// writeSnapshot runs on the runner's loop with the state at st.LastSeq. It
// encodes there and returns the write, which the runner calls on its loop
// once that seq is acknowledged and before its next append is submitted,
// so the snapshot lands at most one group behind (RL-12). The encoding is
// verified in the background before it is written (Digest(st) is the
// SHA-256 of these very bytes, so a decode that digests the same proves
// the round trip); a snapshot that fails is not written, and older ones
// are pruned only after a newer one was written. A snapshot that cannot be encoded, written (a state
// over Options.SnapshotBytesMax) or verified stops nothing, since the
// journal alone is the truth, but it is counted with its error in
// [Engine.SnapshotStats]: until one succeeds, restart replays from the
// previous snapshot.
func (e *Engine) writeSnapshot(st *replay.State) func(stored func(bool)) {
	seq := st.LastSeq
	if n := len(st.Quarantined); n > 0 {
		// A snapshot would hide the damage from the next Open, which
		// must quarantine the stream again (spec/reliability.md §4.4).
		e.snapshots.failed(seq, fmt.Errorf("quire: snapshot at seq %d: not written while %d stream(s) are quarantined", seq, n))
		return nil
	}
	limit := e.opts.SnapshotBytesMax
	if e.snapScale > 0 {
		// The last snapshot was over SnapshotBytesMax: encoding the
		// state again costs as much as that one did, so it waits until
		// the state, as its size hint scaled by that snapshot's true
		// size says, fits again.
		if want := int64(float64(replay.SizeHint(st)) * e.snapScale); want > int64(limit) {
			e.snapshots.failed(seq, fmt.Errorf("quire: snapshot at seq %d: not taken: the state would encode to about %d bytes, over SnapshotBytesMax (%d): %w",
				seq, want, limit, record.ErrTooLarge))
			return nil
		}
	}
	b, err := replay.Encode(st)
	if err != nil {
		e.snapshots.failed(seq, fmt.Errorf("quire: snapshot at seq %d: encode: %w", seq, err))
		return nil
	}
	if len(b) > limit {
		// Refused here, before its round-trip check and write.
		e.snapScale = float64(len(b)) / float64(max(replay.SizeHint(st), 1))
		e.snapshots.failed(seq, fmt.Errorf("quire: snapshot at seq %d: %w: %d bytes, over SnapshotBytesMax (%d)",
			seq, record.ErrTooLarge, len(b), limit))
		return nil
	}
	e.snapScale = 0
	return func(stored func(bool)) {
		// Written and checked off the loop: a snapshot holds every active
		// job, and its synced write would stall dispatch and settlement.
		// Each waits for the one launched before it, so that a later
		// snapshot is never written before an earlier one (which would
		// then be the newest written, and delete the later one's
		// predecessors but not the later one); Stop and Close wait for
		// snapWG before closing the journal. The runner holds appends
		// that would outrun RL-12's bound until stored is called.
		prev, done := e.snapPrev, make(chan struct{})
		e.snapPrev = done
		e.snapWG.Add(1)
		go func() {
			defer e.snapWG.Done()
			defer close(done)
			if h := testHookSnapshotStart; h != nil {
				h(seq)
			}
			if prev != nil {
				<-prev
			}
			if h := testHookSnapshotWrite; h != nil {
				h(seq)
			}
			// Checked before it is written: a snapshot is never stored,
			// nor counted by the runner as stored, unless it decodes to
			// the state it was encoded from.
			dec, err := replay.Decode(b)
			if err != nil || replay.Digest(dec) != sha256.Sum256(b) {
				stored(false)
				if err == nil {
					err = errors.New("decoded state digests differently")
				}
				e.snapshots.failed(seq, fmt.Errorf("quire: snapshot at seq %d failed its round-trip check and was not written: %w", seq, err))
				return
			}
			err = e.j.WriteSnapshot(context.Background(), seq, b)
			stored(err == nil)
			if err != nil {
				e.snapshots.failed(seq, fmt.Errorf("quire: snapshot: %w", err))
				e.journalFailed(err)
				return
			}
			e.journalFailed(e.j.DeleteSnapshotsBefore(context.Background(), seq))
			e.snapshots.written(seq)
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
	return scheduler.SummaryOf(s), true
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

// Live reports whether the engine is alive (SD-34): its lifecycle is
// Starting, Recovering, Ready or Draining. It is false once the engine is
// Stopped or Failed; a liveness probe that sees false should restart the
// process.
func (e *Engine) Live() bool { return e.Lifecycle().Live() }

// Ready reports whether the engine is ready (SD-34): its lifecycle is Ready
// (admission open, no shutdown initiated) and its dispatcher runs, that is
// [Engine.Start], [Engine.Run] or [Engine.RunOnce] was called. An engine
// that is only open accepts Enqueue and Dispatch but starts nothing, so it
// is not ready. A readiness probe is its natural caller.
func (e *Engine) Ready() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ready()
}

// ready is Ready with e.mu held.
func (e *Engine) ready() bool { return e.lifecycle == Ready && e.dispatching }

func (e *Engine) setLifecycle(l Lifecycle) {
	e.mu.Lock()
	e.lifecycle = l
	e.mu.Unlock()
}

// onFatal stops the engine after its journal fail-stopped (RL-2, SD-23).
// The runner calls it when an append fails; journalFailed when a commit
// made off the runner's loop did. The first failure is the one kept.
func (e *Engine) onFatal(err error) {
	e.mu.Lock()
	if e.lifecycle == Failed {
		e.mu.Unlock()
		return
	}
	starting := e.lifecycle == Recovering
	e.fatal = err
	e.lifecycle = Failed
	e.mu.Unlock()
	if starting {
		return // Open rolls back, with trigger startup_failure (SD-35)
	}
	// On the runner's loop: the coordinator's first act calls the runner,
	// so it runs on a goroutine of its own (SD-23).
	go e.coord.Fail(CodeJournalCommitFailed)
}

// journalFailed stops the engine as a failed append does when err is a
// fail-stop of the journal met by a commit made off the runner's loop: a
// snapshot's write or delete, or a checkpoint (RL-2, SD-23). Such a failure
// stops the journal as surely as a failed append, but the runner would
// learn of it only at its next append, and an idle engine may make none
// for a long time: it would stay live and ready on a journal that accepts
// nothing (SD-34).
func (e *Engine) journalFailed(err error) {
	if errors.Is(err, journal.ErrFailStop) {
		e.onFatal(err)
	}
}

// beginDraining closes admission (SD-12) unless the engine failed.
func (e *Engine) beginDraining() {
	e.mu.Lock()
	if e.lifecycle != Failed && e.lifecycle != Stopped {
		e.lifecycle = Draining
	}
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
	return e.unpark(h.name)
}

// unpark lets the jobs parked on a newly registered handler start.
func (e *Engine) unpark(handler string) error {
	return e.submit(context.Background(), func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		m.Unpark(handler)
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

// untilCloseEvidence wraps fn, a pause, cancel or bury, which SD-12
// accepts during a shutdown until its phase 4 starts. The check runs on
// the loop, where the cutoff is set before phase 4's record is decided, so
// no such record follows it.
func (e *Engine) untilCloseEvidence(fn func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error)) func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
	return func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		if e.controlClosed.Load() {
			return scheduler.Decision{}, fmt.Errorf("%w: the shutdown is closing the journal (phase 4)", ErrShuttingDown)
		}
		return fn(m, now)
	}
}

// submit runs fn on the engine's loop and maps runner errors. It is the
// one path of every call that appends, and it keeps their ctx contract: if
// ctx ended before the loop took fn (before the call, or while it waited),
// the call returns an error matching ctx's, prefixed "quire: ", and fn
// never ran, so nothing was appended; once the loop took fn, the call
// returns fn's outcome whatever ctx does. An error matching ctx's thus
// never hides an append.
func (e *Engine) submit(ctx context.Context, fn func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error)) error {
	err := e.r.Submit(ctx, fn)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, scheduler.ErrStopped):
		return ErrClosed
	case err == ctx.Err():
		// Runner.Submit returns ctx.Err() itself only when the loop never
		// took fn; fn and the appender never return ctx's error.
		return fmt.Errorf("quire: %w", err)
	}
	return err
}

// workerMode is the worker mode of an engine (JB-9).
type workerMode uint8

const (
	modeNone workerMode = iota // only open: no attempt starts
	modeLong                   // Start or Run: long-running
	modeOnce                   // RunOnce
)

// Start begins starting attempts: jobs become eligible as JB-2 says. It
// returns at once; call [Engine.Close] to stop. Use [Engine.Run] instead in
// a process that should stop on SIGINT or SIGTERM. If starting fails
// part-way or ctx ends, the engine rolls back as a shutdown with trigger
// startup_failure and Start returns a [*StartupError] (SD-35). On an
// engine already started, Start does nothing and returns nil, whatever
// ctx (a nil one is refused, as [Engine] says): it never undoes a start
// that succeeded. While [Engine.RunOnce] works off the engine, which it
// then closes, Start is refused with an error matching [ErrState].
func (e *Engine) Start(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.mode == modeOnce {
		e.mu.Unlock()
		return fmt.Errorf("%w: RunOnce is working off the engine and will close it: Start an engine that is only open", ErrState)
	}
	e.mode = modeLong
	started := e.dispatching
	e.mu.Unlock()
	if started {
		return nil
	}
	// WD-6: the long-running mode checks workflow deadlines once right
	// after recovery, before the first dispatch, then every
	// DeadlineCheckInterval; the check is decided ahead of any start.
	if err := e.r.EnableDeadlineChecks(ctx); err != nil {
		return e.rollBack("start", err)
	}
	if err := startupStep("start"); err != nil {
		return e.rollBack("start", err)
	}
	return e.dispatch(ctx)
}

func (e *Engine) startOnce(ctx context.Context) error {
	if err := e.admit(); err != nil {
		return err
	}
	return e.dispatch(ctx)
}

// dispatch turns the dispatcher on: attempts start from here.
func (e *Engine) dispatch(ctx context.Context) error {
	if err := e.r.SetDispatch(ctx, true); err != nil {
		return e.rollBack("start", err)
	}
	e.mu.Lock()
	e.dispatching = true
	e.mu.Unlock()
	return nil
}

// Run starts the engine and blocks until its shutdown is over (SD-20):
// the first SIGINT or SIGTERM, or the end of ctx, initiates a graceful
// shutdown within ShutdownTimeout; the first SIGQUIT initiates and forces;
// any later signal forces. Signals are counted on their own: a first
// SIGINT after ctx ended (one Ctrl-C seen both through a
// signal.NotifyContext ctx and by Run) does not force. It returns the shutdown's result, an error
// matching ErrFailStop if the engine failed: the process should then exit
// and restart, which replays the journal.
func (e *Engine) Run(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	// The listener is installed before any work starts, so a signal that
	// arrives once work runs is always the engine's to handle (SD-20).
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
	// The listener is the shutdown's signal monitor: phase 5 stops it and
	// joins its goroutine, and the report accounts for it (SD-16). Until
	// then it hears a second signal, which forces.
	var (
		stop     = make(chan struct{})
		stopOnce sync.Once
		monDone  = make(chan struct{})
		started  atomic.Bool
	)
	// Handed over before Start: a shutdown initiated from then on accounts
	// for the monitor. (One initiated earlier could not have; Run's own
	// join below covers its goroutine either way.)
	_ = e.coord.SetSignalMonitor(func(ctx context.Context) error {
		stopOnce.Do(func() { close(stop) })
		if !started.Load() {
			signal.Stop(sig)
			return nil
		}
		select {
		case <-monDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err := e.Start(ctx); err != nil {
		stopOnce.Do(func() { close(stop) })
		signal.Stop(sig)
		return err
	}
	started.Store(true)
	go func() {
		defer close(monDone)
		defer signal.Stop(sig)
		ctxDone := ctx.Done()
		for {
			select {
			case s := <-sig:
				if e.signal(s) {
					return
				}
			case <-ctxDone:
				ctxDone = nil
				e.coord.Initiate(shutdown.TriggerContext)
			case <-stop:
				return
			case <-e.coord.Done():
				return
			}
		}
	}()
	e.coord.Wait(context.Background())
	<-monDone
	return e.finish()
}

// signal acts on one signal Run's listener received (SD-20): the first
// SIGINT or SIGTERM requests a graceful shutdown, a first SIGQUIT
// initiates and forces, and any signal after the first requests force. It
// reports whether force was requested by a later signal: the listener
// then stops and the default handling applies again. "First" counts
// signals, not initiations: a first SIGTERM after Run's context ended (or
// after Shutdown) is a graceful request that finds the shutdown already
// running, not a force, so the one Ctrl-C that both cancels a
// signal.NotifyContext context and reaches this listener cannot force,
// whichever of the two Run sees first.
func (e *Engine) signal(s os.Signal) (stop bool) {
	t := signalTrigger(s)
	e.signals++
	if e.signals == 1 {
		e.coord.Initiate(t) // a first SIGQUIT forces even a running shutdown
		return false
	}
	e.coord.Force(t)
	return true
}

func signalTrigger(s os.Signal) shutdown.Trigger {
	switch s {
	case syscall.SIGTERM:
		return shutdown.TriggerSigterm
	case syscall.SIGQUIT:
		return shutdown.TriggerSigquit
	}
	return shutdown.TriggerSigint
}

// crashResult reports whether the engine was abandoned as if the process
// had crashed and, if so, waits for that to finish and returns its error.
func (e *Engine) crashResult() (bool, error) {
	e.mu.Lock()
	crashed := e.crashed
	e.mu.Unlock()
	if !crashed {
		return false, nil
	}
	<-e.closed
	return true, e.closeErr
}

// Shutdown requests a graceful shutdown and waits for its result (SD-21):
// nil if the report is a success and the journal confirmed it, otherwise
// an error ([*shutdown.Error], or one matching ErrFailStop if the engine
// failed). If ctx ends first it returns ctx.Err() while the shutdown
// carries on under its root; every caller gets the same result. After
// [Engine.Close] abandoned the engine without a shutdown (its ctx had
// ended), it returns an error matching ErrClosed: there is no report.
func (e *Engine) Shutdown(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if crashed, err := e.crashResult(); crashed {
		if err == nil {
			return errAbandoned
		}
		return err
	}
	e.mu.Lock()
	failed := e.lifecycle == Failed && e.fatal != nil
	e.mu.Unlock()
	if failed {
		// The failure came first: onFatal's initiation may still be on
		// its way, and the shutdown's trigger is the failure's (SD-23).
		e.coord.Fail(CodeJournalCommitFailed)
	}
	e.beginDraining()
	e.coord.Initiate(shutdown.TriggerAPI)
	if err := e.coord.Wait(ctx); err != nil {
		select {
		case <-e.coord.Done():
		default:
			return err
		}
	}
	return e.finish()
}

// finish records the end of the shutdown once phase 6 is over: the
// lifecycle and the shared result.
func (e *Engine) finish() error {
	e.finishOnce.Do(func() {
		err := e.coord.Wait(context.Background())
		e.snapWG.Wait()
		e.mu.Lock()
		if e.lifecycle != Failed {
			e.lifecycle = Stopped
		} else {
			err = fmt.Errorf("%w: %v", ErrFailStop, e.fatal)
		}
		e.mu.Unlock()
		e.closeErr = err
		close(e.closed)
	})
	<-e.closed
	return e.closeErr
}

// Close shuts the engine down as [Engine.Shutdown] does. If ctx ends
// before the shutdown is over, force is requested, the attempts still
// running are released at once (DL-41, DL-42: they consume nothing, and
// their jobs are delivered again at the next Open), the root is cut to
// now, and Close returns once the journal is closed. An attempt whose
// termination hooks do not finish within the final cleanup window (DL-30)
// is left unsettled instead, as is every running attempt when ctx has
// already ended and no shutdown was initiated: Close then abandons the
// engine without a shutdown. An unsettled attempt is treated as a crash
// treats it (DL-44): it counts as consumed, and its job is delivered again
// at the next Open, or buried there if that was its last attempt. Later
// calls return the first result.
//
// Close's error reports a failed shutdown ([shutdown.ErrFailed]), a
// fail-stop ([ErrFailStop]) and the journal's failures (an append of the
// shutdown's records or its close that failed, SD-17), but not an
// Incomplete shutdown on its own: one that could not confirm everything
// (a handler that never returned, a cut budget) returns nil from Close
// and the error from [Engine.Shutdown]. Read [Engine.ShutdownReport] to tell them apart,
// or call Shutdown rather than Close where an Incomplete shutdown must not
// go unnoticed.
func (e *Engine) Close(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		e.mu.Lock()
		crash := !e.coord.Root().Installed() && !e.crashed
		if crash {
			e.crashed = true
		}
		e.mu.Unlock()
		if crash {
			e.abandon()
		}
	}
	if crashed, err := e.crashResult(); crashed {
		return err
	}
	err := e.Shutdown(ctx)
	select {
	case <-e.coord.Done():
		return closeResult(e.finish())
	default:
	}
	if err != nil {
		e.coord.Force(shutdown.TriggerAPI)
		e.releaseRunning()
		e.coord.Install(deadlines.NewRoot(e.clk.Now(), 0))
	}
	return closeResult(e.finish())
}

// releaseRunning is Close's final abort when its ctx ends during a
// shutdown: every attempt still running has its settlement authority
// revoked and is released now (DL-41, DL-42), so that it consumes nothing
// and its job is delivered again at the next Open (DL-6). Cutting the root
// first would leave them unsettled, counted as consumed as after a crash
// (DL-39, DL-44): a job on its last attempt would be buried. The releases
// are waited for at most the final cleanup window (DL-30) on the engine's
// clock; what has not settled by then is left to the cut root.
func (e *Engine) releaseRunning() {
	n, err := e.r.Revoke(context.Background(), deadlines.ReasonForcedShutdown, e.clk.Now())
	if err != nil || n == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := e.clk.NewTimer(deadlines.FinalCleanupWindow)
	defer t.Stop()
	go func() {
		select {
		case <-t.C():
			cancel()
		case <-ctx.Done():
		}
	}()
	_ = e.r.Drain(ctx)
}

// closeResult keeps Close's contract: it reports the journal's errors and
// a fail-stop, not an Incomplete classification, which stays readable
// through [Engine.ShutdownReport] and is what [Engine.Shutdown] returns.
func closeResult(err error) error {
	var se *shutdown.Error
	if errors.As(err, &se) && se.Err == nil && se.Completion == shutdown.Incomplete {
		return nil
	}
	return err
}

// errAbandoned is Shutdown's result once Close abandoned the engine.
var errAbandoned = fmt.Errorf("%w: abandoned by Close without a shutdown (its context had ended), as a crash would", ErrClosed)

// abandon stops the engine without a shutdown, as a crash would.
func (e *Engine) abandon() {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		if e.lifecycle != Failed {
			e.lifecycle = Draining
		}
		e.mu.Unlock()
		e.r.Stop(context.Background())
		e.snapWG.Wait()
		err := e.closeJournal()
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
}

func (e *Engine) closeJournal() error {
	err := e.j.Close()
	if errors.Is(err, journal.ErrFailStop) {
		return nil // reported through the fail-stop cause
	}
	return err
}

// Checkpoint writes a consistent copy of the journal to dir, which must
// not exist. Inspect it with qctl while the engine runs. An empty dir is
// refused with an [*OptionError] naming dir, an existing one with an error
// matching fs.ErrExist.
func (e *Engine) Checkpoint(dir string) error {
	if dir == "" {
		return &OptionError{Field: "dir", Value: dir, Reason: "must name the directory to create"}
	}
	if err := e.live(); err != nil {
		return err
	}
	err := e.j.Checkpoint(dir)
	e.journalFailed(err)
	return closedJournal(err)
}

// closedJournal makes a journal error that a shutdown closing the journal
// under a call caused (the engine is not Stopped yet) match ErrClosed, as
// the same call made a moment later would. The journal's error stays in
// the chain.
func closedJournal(err error) error {
	if errors.Is(err, journal.ErrClosed) && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// JournalMetrics are the journal's cumulative counters since Open: group
// commits, records, bytes and fsyncs, slow-disk reports (see
// [Options.DiskSlowThreshold]), Pebble's background and logged errors, the
// write-ahead log files started, the warming writes made before delayed
// jobs' instants (see [Options.TimerWarmup]), and the appends pending now.
type JournalMetrics = journal.Metrics

// JournalMetrics returns the journal's counters so far. It may be called
// at any time, also after the engine stopped.
func (e *Engine) JournalMetrics() JournalMetrics { return e.j.Metrics() }

// journalAppender is the runner's [scheduler.Appender]. The runner's
// committer is its only caller, one append at a time, so it keeps the
// converted slices from one append to the next.
type journalAppender struct {
	j      *journal.Journal
	counts *settleCounts

	entries []journal.IndexEntry
	recs    []record.Record
	units   []journal.Unit
}

func (a *journalAppender) Append(ctx context.Context, idx []scheduler.IndexEntry, recs []record.Record, units []scheduler.Unit) ([]uint64, error) {
	a.entries = a.entries[:0]
	for _, x := range idx {
		a.entries = append(a.entries, journal.IndexEntry{ID: x.ID, Value: x.Value})
	}
	// The machine predicted each record's seq (the engine is the journal's
	// only writer): the journal assigns seqs itself and must assign those.
	a.recs = a.recs[:0]
	for _, r := range recs {
		r.Seq = 0
		a.recs = append(a.recs, r)
	}
	a.units = a.units[:0]
	for _, u := range units {
		a.units = append(a.units, journal.Unit{Records: u.Records, Index: u.Index})
	}
	seqs, err := a.j.AppendUnits(ctx, a.entries, a.recs, a.units)
	clear(a.entries) // hold no payload until the next append
	clear(a.recs)
	if err != nil {
		return nil, err
	}
	if h := testHookAfterAppend; h != nil {
		h(seqs)
	}
	for i := range seqs {
		if seqs[i] != recs[i].Seq {
			return nil, fmt.Errorf("quire: journal assigned seq %d to a record decided as seq %d: another writer appended", seqs[i], recs[i].Seq)
		}
	}
	if a.counts != nil {
		a.counts.count(recs)
	}
	return seqs, nil
}

var _ scheduler.Appender = (*journalAppender)(nil)

// RunOnce starts the engine, processes the work that is eligible at the
// clock's current instant until nothing more is (JB-9), then closes the
// engine. It never runs the periodic workflow deadline check. Jobs that
// become available later stay pending in the journal. It takes an engine
// that is only open: on one already started with [Engine.Start] or
// [Engine.Run], or that another RunOnce works off, it returns an error
// matching [ErrState] and leaves the engine as it was.
func (e *Engine) RunOnce(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.admit(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.mode != modeNone {
		e.mu.Unlock()
		return fmt.Errorf("%w: the engine is already started: RunOnce takes an engine that is only open", ErrState)
	}
	e.mode = modeOnce
	e.mu.Unlock()
	if err := e.startOnce(ctx); err != nil {
		return err
	}
	if err := e.WaitIdle(ctx); err != nil {
		e.Close(context.Background())
		return err
	}
	return e.Close(ctx)
}

// SnapshotStats counts the engine's state snapshots since [Open] (RL-12):
// every SnapshotEvery records the engine encodes its state and writes it
// to the journal, and Open later replays only the records after the
// newest snapshot. A failed snapshot stops nothing, but until one
// succeeds again Open replays ever more records; Failed and LastError
// say so. Written + Failed may lag a snapshot in progress.
type SnapshotStats struct {
	// Written counts snapshots written and verified.
	Written uint64
	// LastWrittenSeq is the seq the newest of them was taken at, 0 for
	// none since Open.
	LastWrittenSeq uint64
	// Failed counts snapshots that could not be encoded, written or
	// verified, most often a state over [Options.SnapshotBytesMax] (the
	// error then wraps [record.ErrTooLarge]).
	Failed uint64
	// LastFailedSeq is the seq the newest failed snapshot was taken at,
	// and LastError its error; 0 and nil while none failed.
	LastFailedSeq uint64
	LastError     error
}

// snapshotCounts is the engine's [SnapshotStats], written by its snapshot
// goroutines and read by any caller.
type snapshotCounts struct {
	mu sync.Mutex
	s  SnapshotStats
}

func (c *snapshotCounts) written(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Written++
	c.s.LastWrittenSeq = seq
}

func (c *snapshotCounts) failed(seq uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Failed++
	c.s.LastFailedSeq, c.s.LastError = seq, err
}

func (c *snapshotCounts) get() SnapshotStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// SnapshotStats returns the engine's snapshot counters so far (see
// [SnapshotStats]). It may be called at any time, also after the engine
// stopped, when they are final: Close waits for a snapshot in progress.
func (e *Engine) SnapshotStats() SnapshotStats { return e.snapshots.get() }
