package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Appender is what the runner needs from the journal: a synced append of
// records with terminal-index values, in units that are each atomic (RL-4;
// nil units: the whole append is one). Units must keep their order and
// stay whole, and may go in different group commits.
type Appender interface {
	Append(ctx context.Context, index []IndexEntry, recs []record.Record, units []Unit) ([]uint64, error)
}

// ExecuteFunc runs one attempt's pipeline on its execution goroutine and
// reports how it ended. ctx is a.Context(): cancelled with a
// [*CancelReason] cause at the attempt's notification instant. It should
// recover panics into a Failure; the runner recovers what escapes.
type ExecuteFunc func(ctx context.Context, a *Attempt) Result

// Codes the runner records (DL-23, DL-36).
const (
	// CodeDeliveryTimeout settles an attempt interrupted at its timeout.
	CodeDeliveryTimeout = "DELIVERY_TIMEOUT"
	// CodeDeliveryInterrupted settles an attempt interrupted by any other
	// reason; it is released, never consumed (DL-6).
	CodeDeliveryInterrupted = "DELIVERY_INTERRUPTED"
	// CodeHandlerPanicked is recorded for a panic the ExecuteFunc did not
	// recover itself.
	CodeHandlerPanicked = "HANDLER_PANICKED"
	// CodeHandlerExited is recorded when the execution goroutine ended
	// without returning (runtime.Goexit).
	CodeHandlerExited = "HANDLER_EXITED"
	// Cleanup failure codes of DL-36, all retryable.
	CodeTerminationCleanupFailed = "DELIVERY_TERMINATION_CLEANUP_FAILED"
	CodeScopeCleanupTimedOut     = "DELIVERY_SCOPE_CLEANUP_TIMED_OUT"
	CodeScopeCleanupFailed       = "DELIVERY_SCOPE_CLEANUP_FAILED"
	CodeScopeCleanupPanicked     = "DELIVERY_SCOPE_CLEANUP_PANICKED"
	CodeScopeResultUnobserved    = "DELIVERY_SCOPE_RESULT_UNOBSERVED"
	CodeResourceReleasePanicked  = "DELIVERY_RESOURCE_RELEASE_PANICKED"
)

// Errors of the runner.
var (
	// ErrStopped is returned by Submit once the runner stopped accepting work.
	ErrStopped = errors.New("scheduler: runner stopped")
)

// resultsPerPass bounds the attempts' results the loop takes in one pass
// before it decides and flushes.
const resultsPerPass = 64

// batchRecordsMax bounds the records of one append built from several
// decisions. A single larger decision still goes alone, atomically.
const batchRecordsMax = 512

// intakeFull reports whether the loop stops taking new ops: a full batch
// (batchRecordsMax records) waits behind the one being committed. Callers
// then wait in Submit and the calls built on it until an append is
// acknowledged and the batch goes to the committer (or their ctx ends:
// nothing is appended then). Attempts' results, acknowledgements, timers
// and calls (Do, which decide no record) are still taken.
//
// Every start and settlement decided joins the end of the pending queue.
// With producers enough to keep it growing, each attempt waited behind
// all the enqueues taken before its start, and the drain fell to a
// trickle (8 192 producers: 122 starts/s against 13 556 enqueues/s).
// Bounded, a start waits for at most the commit in flight and one full
// batch, so the drain scales with Workers again. The committer still
// finds a full batch waiting whenever a commit returns, so enqueues lose
// no throughput.
func (r *Runner) intakeFull() bool {
	n := len(r.pending)
	return n > 1 || n == 1 && len(r.pending[0].d.Records) >= batchRecordsMax
}

// RunnerConfig configures a [Runner].
type RunnerConfig struct {
	Clock    clock.Clock
	Appender Appender
	Execute  ExecuteFunc
	// OnFatal is called once, from the runner's goroutine, when an append
	// fails: the instance must stop (RL-2).
	OnFatal func(error)
	// SnapshotEvery and SnapshotFunc: when at least SnapshotEvery records
	// were decided since the last snapshot, SnapshotFunc is called on the
	// loop with the state, which is the state at st.LastSeq; it must not
	// keep st past its return. The func it returns is called on the loop
	// once st.LastSeq is acknowledged, to write the snapshot (RL-12); nil
	// means none this time, and the next call comes SnapshotEvery records
	// later. write must call stored exactly once, from any goroutine, when
	// the snapshot is stored (true) or given up (false).
	//
	// While a snapshot is on its way, appends that would take the journal
	// more than SnapshotEvery + SnapshotSlack records past the newest
	// stored snapshot wait for it: a crash then never leaves more than
	// that for the next Open to replay (RL-12). SnapshotSeq is the seq of
	// the newest stored snapshot at open, 0 for none.
	SnapshotEvery uint64
	SnapshotSlack uint64
	SnapshotSeq   uint64
	SnapshotFunc  func(st *replay.State) (write func(stored func(ok bool)))
	// DeadlineFunc runs an on-deadline handler (WD-10) and returns its
	// outcome (HandlerOK, HandlerFailed, HandlerPanicked or
	// HandlerNotRegistered) and, unless ok, a message for the debug record.
	// ctx is cancelled at the handler's deadline.
	DeadlineFunc func(ctx context.Context, run DeadlineRun) (outcome, msg string)
	// HandlerTimeout bounds an on-deadline handler (DeliveryTimeout).
	HandlerTimeout time.Duration
	// DeadlineCheckInterval is the period of the workflow deadline check
	// (WD-6), once enabled with EnableDeadlineChecks.
	DeadlineCheckInterval time.Duration
	// SettlementTimeout caps the wait for one settlement append (DL-3,
	// DL-39). Zero means 5 s.
	SettlementTimeout time.Duration
	// Root is the shutdown root in effect at start; the zero Root means
	// none. [Runner.InstallRoot] installs one later.
	Root deadlines.Root
	// HoldForResults lets the append after an acknowledgement wait for the
	// results of the attempts it launched (resultsHold). Set it only with a
	// clock that moves by itself: the hold ends when the results are in
	// or at an instant, and under a clock a test moves, results that wait
	// on the test would hold the append until it next moves the clock.
	HoldForResults bool
	// Warm, if set, is called WarmLead before the instant of the
	// machine's earliest timer (a delayed job coming due, a retry, a
	// workflow's delay) while nothing is being appended: no append pending
	// or in flight, and none acknowledged within WarmLead. It is meant for
	// the journal's Warm, a synced write of no record, so that the
	// start's commit, which DL-7 puts between the instant and the handler,
	// meets a device that has just synced. It runs on a goroutine of the
	// runner's own, one call at a time; a call that comes due while the
	// previous one runs is skipped. Like HoldForResults, set it only with
	// a clock that moves by itself: under a clock a test moves, its timer
	// would be one more instant to step through. WarmLead <= 0 disables it.
	Warm     func()
	WarmLead time.Duration
}

type handlerDone struct {
	run     DeadlineRun
	outcome string
	msg     string
	// interrupted: the handler failed after a shutdown cancelled its
	// context (G reached, or force). Its obligation stays outstanding and
	// runs again after the next start (WD-10).
	interrupted bool
}

// handlerRun is a running on-deadline handler: its context, bounded by
// DeliveryTimeout and, once a shutdown's root is installed, by G (WD-10).
type handlerRun struct {
	ctx      *attemptContext
	cancel   context.CancelCauseFunc
	deadline time.Time
	reason   deadlines.Reason // recorded when deadline is reached
}

// lowerTo brings h's deadline down to at, for reason, if that is not
// later, and returns whether it did. It is called only with shutdown's G:
// a G on the handler's own deadline takes it over, as DL-18 gives ties to
// shutdown, so a handler ended there is unfinished at shutdown (WD-10).
func (h *handlerRun) lowerTo(at time.Time, reason deadlines.Reason) bool {
	if at.After(h.deadline) || at.Equal(h.deadline) && h.reason == reason {
		return false
	}
	h.deadline, h.reason = at, reason
	h.ctx.lower(at)
	return true
}

type batch struct {
	d Decision
	// units are d's units as the committer appends them (AllUnits).
	units   []Unit
	replies []chan error
	// holdUntil is the instant of the start the batch waits for, once
	// held (holdFor).
	holdUntil time.Time
}

type ack struct {
	b   *batch
	err error
	// took is how long the append took on the clock, and done when it
	// returned.
	took time.Duration
	done time.Time
}

// holdMax bounds the commit estimate, and so the longest a batch is held
// for a start (holdFor).
const holdMax = time.Millisecond

type op struct {
	fn   func(m *Machine, now time.Time) (Decision, error)
	done chan error
}

// Event kinds on the runner's heap.
const (
	evAttempt uint8 = 1 // an attempt's next supervision instant
	evSettle  uint8 = 2 // a settlement wait's cap (DL-39); token is the record's seq
	evHandler uint8 = 3 // an on-deadline handler's deadline; token is its expiry
)

// event is an instant at which the loop must look at something, ordered
// by (instant, token, kind). Events are never removed: a stale one finds
// nothing due and is dropped.
type event struct {
	at    int64
	token uint64
	kind  uint8
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].token != h[j].token {
		return h[i].token < h[j].token
	}
	return h[i].kind < h[j].kind
}

// Runner executes a Machine's decisions: it owns the single loop goroutine
// that calls the machine, the committer that appends decisions in order
// (one append per group of decisions: the engine's explicit group commit),
// the attempts' execution, hook and scope goroutines, and one clock timer
// for the earliest instant of the machine's timer heap and the attempts'
// deadlines (never one goroutine per timer). Nothing is acted on before
// its append is acknowledged (RL-1).
//
// Each started attempt has an owner on the loop (DL-29) that notifies it
// at N, waits for the same execution until C, abandons it then, runs the
// eligible termination hooks and closes the attempt scope inside the
// cleanup cutoff, and settles the token once (DL-20..DL-40).
type Runner struct {
	cfg RunnerConfig
	m   *Machine

	ops      chan op // Submit's: they decide records, and wait at the intake bound
	calls    chan op // call's: they decide none, and are always taken
	results  *mailbox[Result]
	owner    chan ownerEvent
	hdone    chan handlerDone
	commitCh chan *batch
	acks     chan ack
	stopCh   chan struct{}
	loopDone chan struct{}

	mu       sync.Mutex
	stopping bool
	fatal    error

	q quarantine

	// loop-owned
	pending    []*batch
	committing *batch
	attempts   map[uint64]*attempt
	owners     []*attempt                // settled owners for reuse (newOwner)
	retired    []*attempt                // owners settled in this pass, reused from the next
	lost       map[uint64]*lostExecution // abandoned executions not yet returned
	settling   map[uint64]settleWait     // settlement appends in flight, by record seq
	root       deadlines.Root
	runtime    *Signal
	hookGen    uint64
	events     eventHeap
	compactAt  int // heap size at which compactEvents next runs
	timer      clock.Timer
	timerAt    time.Time
	warmTimer  clock.Timer   // RunnerConfig.Warm's: WarmLead before the next due instant
	warmAt     time.Time     // when warmTimer fires
	warmCh     chan struct{} // the warmer's requests; nil without Warm
	warmDone   chan struct{} // closed when the warmer has returned
	lastAck    time.Time     // when the last append was acknowledged
	commitEst  time.Duration // moving average of an append's duration (holdFor)
	execEst    time.Duration // moving average of an execution's launch to its result (resultsHold)
	ackGen     uint64        // acknowledgements acted on
	rhold      resultsHold   // the next append's wait for the results of launched attempts
	spare      *batch        // an acknowledged batch kept for reuse (recycle)
	dispatch   bool
	lastSnap   uint64
	snapSeq    uint64                 // seq of a snapshot on its way: encoded, not yet stored or given up
	snapWrite  func(func(bool))       // its write, until its seq is acknowledged
	snapBusy   int                    // snapshot writes on their way: not yet stored or given up
	snapStored uint64                 // seq of the newest snapshot stored
	snapDone   *mailbox[snapResult]   // outcomes of snapshot writes, from their goroutines
	snapTaken  []snapResult           // the loop's buffer for them
	taken      []Result               // the loop's buffer for results
	handlers   map[uint64]*handlerRun // running on-deadline handlers by expiry
	checkAt    time.Time              // next deadline check, zero when off
	// checkWait is the last seq of a deadline check's decision that left
	// expiries for the next (RL-12): the check goes on once that seq is
	// acknowledged, so that the snapshot due after it can be encoded
	// between the two. 0 when no check is waiting.
	checkWait uint64
	drainWait []chan struct{}
	idleWait  []chan struct{}
	quarWait  []chan struct{}
	execWG    sync.WaitGroup
	// startDelays counts, for each execution, the time from the return
	// of the append that acknowledged its attempt_started to its start.
	startDelays delayHistogram
	execs       *execPool[*Attempt]
	// abortDeferred: the final abort of a shutdown is the caller's
	// (DeferFinalAbort, DL-41); held are the attempts whose owners reached
	// their forced owner cutoff unsettled and wait for it (Revoke).
	abortDeferred bool
	held          map[uint64]*attempt
	// watch wakes callers waiting for a stream's next record (Watch).
	watch watches
}

// NewRunner returns a runner over m. Call Start to begin.
func NewRunner(cfg RunnerConfig, m *Machine) *Runner {
	if cfg.SettlementTimeout <= 0 {
		cfg.SettlementTimeout = deadlines.SettlementTimeoutDefault
	}
	r := &Runner{
		cfg: cfg, m: m,
		ops:        make(chan op),
		calls:      make(chan op),
		results:    newMailbox[Result](),
		owner:      make(chan ownerEvent, 64),
		hdone:      make(chan handlerDone, 16),
		commitCh:   make(chan *batch, 1),
		acks:       make(chan ack, 1),
		stopCh:     make(chan struct{}),
		loopDone:   make(chan struct{}),
		attempts:   make(map[uint64]*attempt),
		lost:       make(map[uint64]*lostExecution),
		settling:   make(map[uint64]settleWait),
		root:       cfg.Root,
		runtime:    newSignal(nil),
		handlers:   make(map[uint64]*handlerRun),
		lastSnap:   cfg.SnapshotSeq,
		snapStored: cfg.SnapshotSeq,
		snapDone:   newMailbox[snapResult](),
	}
	r.execs = newExecPool(r.loopDone, r.execute)
	return r
}

// Start launches the loop and the committer.
func (r *Runner) Start() {
	if r.cfg.Warm != nil && r.cfg.WarmLead > 0 {
		r.warmCh, r.warmDone = make(chan struct{}, 1), make(chan struct{})
		go func() {
			defer close(r.warmDone)
			for range r.warmCh {
				r.cfg.Warm()
			}
		}()
	}
	go r.commit()
	go r.loop()
}

// Submit runs fn on the loop goroutine with the machine and the current
// time, appends the Decision it returns, and returns once that append is
// acknowledged, or fn's error (nothing appended), or the fatal append
// error. A Decision with no records is acknowledged once everything decided
// before it is: reads through Submit never see unacknowledged state. The
// Decision belongs to the runner once fn returns it.
//
// ctx bounds only the wait for the loop to take the op, which under load
// includes the wait for room behind the appends already decided
// (intakeFull). If ctx has ended before the call, or ends before the
// loop takes the op, Submit returns ctx.Err() unwrapped, fn never runs
// and nothing is appended. Once the loop has taken the op, Submit waits
// for its outcome whatever ctx does,
// so that an acknowledged transition is never reported as failed: a
// ctx.Err() from Submit always means nothing was appended.
func (r *Runner) Submit(ctx context.Context, fn func(m *Machine, now time.Time) (Decision, error)) error {
	return r.send(ctx, r.ops, op{fn: fn, done: make(chan error, 1)})
}

// call runs fn on the loop and returns once it ran, without waiting for
// appends in flight: what fn does takes effect at once (DL-18, DL-25).
// fn decides no record, so the intake bound does not hold it back: a
// shutdown's cancellations and reads of the loop's state go through
// however many enqueues wait. ctx is treated as Submit treats it.
func (r *Runner) call(ctx context.Context, fn func(now time.Time)) error {
	return r.send(ctx, r.calls, op{fn: func(m *Machine, now time.Time) (Decision, error) { fn(now); return Decision{}, nil },
		done: make(chan error, 1)})
}

// Do runs fn on the loop and returns once it ran, without waiting for
// the appends in flight: what the loop decides after fn sees its effect,
// and what it decided before is appended ahead of anything decided after.
// ctx is treated as Submit treats it.
func (r *Runner) Do(ctx context.Context, fn func(now time.Time)) error { return r.call(ctx, fn) }

// send hands o to the loop on ch and waits for its outcome (Submit).
func (r *Runner) send(ctx context.Context, ch chan<- op, o op) error {
	// Checked first: select picks at random among ready cases, and the
	// loop is usually ready to take an op, so an ended ctx alone would
	// stop only some of the ops it should stop.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case ch <- o:
	case <-r.loopDone:
		return r.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once the op is in, its outcome is decided by the loop; the caller
	// waits for it so that an acknowledged transition is never reported
	// as failed.
	return <-o.done
}

func (r *Runner) stoppedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal != nil {
		return r.fatal
	}
	return ErrStopped
}

// Fatal returns the append error that stopped the runner, if any.
func (r *Runner) Fatal() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// Drain stops starting attempts and waits until every attempt in flight
// has settled and every decided record is acknowledged, or ctx ends.
// Closing admission records no cancellation reason (DL-19).
func (r *Runner) Drain(ctx context.Context) error {
	return r.await(ctx, func(w chan struct{}) {
		r.dispatch = false
		r.drainWait = append(r.drainWait, w)
	})
}

// await registers a waiter on the loop with register and blocks until the
// loop closes it, the loop ends or ctx ends.
func (r *Runner) await(ctx context.Context, register func(w chan struct{})) error {
	w := make(chan struct{})
	err := r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		register(w)
		return Decision{}, nil
	})
	if err != nil {
		return err
	}
	select {
	case <-w:
		return nil
	case <-r.loopDone:
		return r.stoppedErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop ends the loop after the appends in flight are acknowledged. Attempts
// still running are abandoned: their results are discarded by fencing and
// their jobs are redelivered at the next start (DL-44); their cleanup
// first gets a final window of at most 100 ms on the clock (DL-30).
// Goroutines that have not returned stay counted by [Runner.Quarantined].
// It waits for the loop to end or ctx.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.stopping {
		r.stopping = true
		close(r.stopCh)
	}
	r.mu.Unlock()
	select {
	case <-r.loopDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the loop has ended.
func (r *Runner) Done() <-chan struct{} { return r.loopDone }

func (r *Runner) commit() {
	for b := range r.commitCh {
		t := r.cfg.Clock.Now()
		_, err := r.cfg.Appender.Append(context.Background(), b.d.Index, b.d.Records, b.units)
		done := r.cfg.Clock.Now()
		r.acks <- ack{b: b, err: err, took: done.Sub(t), done: done}
	}
}

func (r *Runner) loop() {
	defer close(r.loopDone)
	defer close(r.commitCh)
	defer r.stopWarmer()
	stopping := false
	for {
		r.reuseOwners()
		r.step()
		if stopping && r.committing == nil && len(r.pending) == 0 && r.tearDown() {
			return
		}
		var timerC, warmC <-chan time.Time
		if r.timer != nil {
			timerC = r.timer.C()
		}
		if r.warmTimer != nil {
			warmC = r.warmTimer.C()
		}
		stopC := r.stopCh
		if stopping {
			stopC = nil
		}
		opsC := r.ops
		if r.intakeFull() {
			opsC = nil
		}
		select {
		case o := <-r.calls:
			if stopping {
				o.done <- ErrStopped
				continue
			}
			_, err := o.fn(r.m, r.cfg.Clock.Now())
			o.done <- err
		case o := <-opsC:
			if stopping {
				o.done <- ErrStopped
				continue
			}
			now := r.cfg.Clock.Now()
			d, err := o.fn(r.m, now)
			if err != nil {
				o.done <- err
				continue
			}
			r.enqueue(d, o.done)
		case <-r.results.note:
			// Results that are already waiting are taken in the same
			// pass: in a burst, a pass of the loop for each one cost as
			// much as the settlements themselves.
			r.taken = r.results.take(r.taken[:0], resultsPerPass)
			for i, res := range r.taken {
				// Deadlines due now come first: a result the loop
				// observes after C is fenced out (DL-24), unless its
				// execution returned before C (DL-23).
				r.fire()
				r.onResult(res)
				r.taken[i] = Result{}
			}
		case ev := <-r.owner:
			r.fire()
			r.onOwner(ev)
		case h := <-r.hdone:
			delete(r.handlers, h.run.Expiry)
			if h.interrupted {
				// No deadline_handler_finished: the obligation runs
				// again after the next start (WD-10).
				r.enqueue(r.m.Note(&record.Debug{Subject: h.run.WorkflowID, Code: CodeDeadlineHandlerInterrupted,
					Message: clip(fmt.Sprintf("expiry %d: %s", h.run.Expiry, h.msg), FailureMessageBytesMax)}), nil)
				continue
			}
			r.enqueue(r.m.DeadlineHandlerDone(h.run, h.outcome, h.msg), nil)
		case a := <-r.acks:
			// A settlement's cap due now comes first: a commit observed
			// at or after it is Unresolved (DL-39).
			r.fire()
			if !r.acked(a) {
				return
			}
		case <-r.snapDone.note:
			r.snapTaken = r.snapDone.take(r.snapTaken[:0], 0)
			for _, res := range r.snapTaken {
				r.snapBusy--
				if res.ok {
					r.snapStored = max(r.snapStored, res.seq)
				}
			}
		case <-timerC:
			r.timer = nil
			r.fire()
		case <-warmC:
			r.warmTimer = nil
			r.warm(r.cfg.Clock.Now())
		case <-stopC:
			stopping = true
			r.dispatch = false
		}
	}
}

// enqueue adds a decision to the pending batches; done (if not nil) is
// answered when it is acknowledged.
func (r *Runner) enqueue(d Decision, done chan error) {
	if d.Empty() && done == nil {
		return
	}
	if d.Empty() {
		switch {
		case len(r.pending) > 0:
			last := r.pending[len(r.pending)-1]
			last.replies = append(last.replies, done)
		case r.committing != nil:
			r.committing.replies = append(r.committing.replies, done)
		default:
			if done != nil {
				done <- nil
			}
		}
		return
	}
	var last *batch
	if n := len(r.pending); n > 0 {
		last = r.pending[n-1]
	}
	if last == nil || len(last.d.Records)+len(d.Records) > batchRecordsMax {
		last = r.newBatch()
		r.pending = append(r.pending, last)
	}
	last.d.merge(d)
	if done != nil {
		last.replies = append(last.replies, done)
	}
}

// step dispatches what the machine allows, flushes the next batch to the
// committer and re-arms the timer.
//
// The attempts' deadlines due at now are acted on before the machine
// decides at now, whatever woke the loop. A pass woken by a call or an op
// after the clock moved, before the timer's fire is taken, would otherwise
// decide at the new instant first: after a jump, a workflow's deadline
// check could come before the settlement of an attempt whose deadline fell
// earlier, against RL-9's order (fire instant, then seq), and the order
// would hang on which channel the loop took first (RL-8).
func (r *Runner) step() {
	now := r.cfg.Clock.Now()
	r.fireAt(now)
	r.decide(now)
	r.flush()
	r.checkDrained()
	r.checkIdle()
	r.checkQuarantine()
	r.snapshot()
	r.compactEvents()
	r.arm(now)
}

// decide decides what is due at now: the periodic deadline check, the
// starts the machine allows, the on-deadline handlers.
func (r *Runner) decide(now time.Time) {
	// A cancelled runtime starts nothing: every new attempt would inherit
	// its reason (DL-17) and be released without running.
	if !r.dispatch || r.runtime.IsCancelled() {
		return
	}
	if !r.checkAt.IsZero() && !now.Before(r.checkAt) && r.checkWait == 0 {
		// WD-6: checks never overlap: this one is decided in full before
		// the next is scheduled, one interval later. A check with more
		// expiries than one batch decides a batch's worth and goes on
		// once that is acknowledged (checkAt stays due), so that a
		// snapshot can come between its appends (RL-12).
		d, more := r.m.CheckDeadlinesUpTo(now, batchRecordsMax)
		r.enqueue(d, nil)
		if n := len(d.Records); more && n > 0 {
			r.checkWait = d.Records[n-1].Seq
		} else {
			r.checkAt = now.Add(r.cfg.DeadlineCheckInterval)
		}
	}
	if d := r.m.Dispatch(now); !d.Empty() {
		r.enqueue(d, nil)
	}
	if d := r.m.StartDeadlineHandlers(); !d.Empty() {
		r.enqueue(d, nil)
	}
}

// eventsCompactMin is the heap size below which stale events are left for
// fire to drop.
const eventsCompactMin = 1024

// compactEvents drops the events whose subject is gone (an attempt that
// settled, a settlement acknowledged or expired, a deadline handler that
// returned) once the heap has doubled since the last compaction. Events
// are never removed when their subject ends, and an attempt's notification
// lies up to DeliveryTimeout (at most 900 s) ahead: under sustained load
// the heap would otherwise hold about rate × DeliveryTimeout entries,
// nearly all stale. fire would drop each of them unseen, so dropping them
// early changes nothing but the heap's size and the timer's wake-ups for
// them. Amortized O(1) per event.
func (r *Runner) compactEvents() {
	if len(r.events) < max(eventsCompactMin, r.compactAt) {
		return
	}
	live := r.events[:0]
	for _, e := range r.events {
		if r.eventLive(e) {
			live = append(live, e)
		}
	}
	clear(r.events[len(live):])
	r.events = live
	heapInit(r.events)
	r.compactAt = 2 * len(r.events)
}

// eventLive reports whether fire could still act on e: its attempt,
// settlement wait or deadline handler still exists.
func (r *Runner) eventLive(e event) bool {
	switch e.kind {
	case evAttempt:
		_, ok := r.attempts[e.token]
		return ok
	case evSettle:
		_, ok := r.settling[e.token]
		return ok
	case evHandler:
		_, ok := r.handlers[e.token]
		return ok
	}
	return true
}

// SetDispatch turns starting attempts on or off. A new runner starts with
// it off, so that an engine can recover and register handlers first.
// Turning it off cancels nothing (DL-19).
func (r *Runner) SetDispatch(ctx context.Context, on bool) error {
	return r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		r.dispatch = on
		return Decision{}, nil
	})
}

func (r *Runner) snapshot() {
	if r.cfg.SnapshotFunc == nil || r.cfg.SnapshotEvery == 0 || r.snapWrite != nil {
		return
	}
	st := r.m.State()
	if st.LastSeq-r.lastSnap < r.cfg.SnapshotEvery {
		return
	}
	// The state reflects every decided record, acknowledged or not: it is
	// the state at st.LastSeq, so it is encoded now and written once that
	// seq is acknowledged. Waiting for a quiet pipeline instead would let
	// snapshots starve under sustained load (RL-12).
	// The next try is SnapshotEvery records on, whether this one came to
	// anything or not: a state that cannot be encoded would otherwise be
	// encoded again on every pass of the loop.
	r.lastSnap = st.LastSeq
	write := r.cfg.SnapshotFunc(st)
	if write == nil {
		return
	}
	r.snapSeq = st.LastSeq
	if r.committing == nil && len(r.pending) == 0 {
		r.writeSnapshot(write)
		return
	}
	r.snapWrite = write
}

// snapResult is the outcome of a snapshot write.
type snapResult struct {
	seq uint64
	ok  bool
}

// writeSnapshot calls write, which reports its outcome to the loop, from
// any goroutine and without blocking, even once the loop has ended.
func (r *Runner) writeSnapshot(write func(func(bool))) {
	seq := r.snapSeq
	r.snapBusy++
	write(func(ok bool) { r.snapDone.put(snapResult{seq: seq, ok: ok}) })
}

// snapHold reports whether b waits for the snapshot being written:
// appended, it would take the journal past what RL-12 lets a restart
// replay after the newest stored snapshot. Nothing waits for a snapshot
// still waiting for its own seq's acknowledgement, which would wait for
// b in turn, nor without one on its way (one that failed cannot be
// waited for); a batch larger than the slack goes once it is stored.
func (r *Runner) snapHold(b *batch) bool {
	n := len(b.d.Records)
	if r.snapBusy == 0 || n == 0 {
		return false
	}
	return b.d.Records[n-1].Seq > r.snapStored+r.cfg.SnapshotEvery+r.cfg.SnapshotSlack
}

// WaitIdle returns once the runner is quiescent at the clock's current
// instant: no attempt running or in cleanup, nothing due to start, every
// decided record acknowledged. Quarantined goroutines (DL-26) do not
// count. Tests and sim use it after moving a fake clock.
func (r *Runner) WaitIdle(ctx context.Context) error {
	return r.await(ctx, func(w chan struct{}) {
		r.fire() // deadlines due at now, even if the timer's fire is still in flight
		r.idleWait = append(r.idleWait, w)
	})
}

// Sync returns once the loop has acted on every deadline due at the
// clock's current instant and every record decided before the call is
// acknowledged. Unlike WaitIdle it does not wait for attempts: a test
// that moves a fake clock past a deadline calls Sync to know the engine
// has observed it, while a handler is still blocked.
func (r *Runner) Sync(ctx context.Context) error {
	return r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		r.fire()
		return Decision{}, nil
	})
}

func (r *Runner) checkIdle() {
	if len(r.idleWait) == 0 || len(r.attempts) > 0 || len(r.handlers) > 0 || r.committing != nil || len(r.pending) > 0 {
		return
	}
	for _, w := range r.idleWait {
		close(w)
	}
	r.idleWait = nil
}

func (r *Runner) checkDrained() {
	if len(r.drainWait) == 0 || len(r.attempts) > 0 || len(r.held) > 0 || len(r.handlers) > 0 || r.committing != nil || len(r.pending) > 0 {
		return
	}
	for _, w := range r.drainWait {
		close(w)
	}
	r.drainWait = nil
}

// flush hands the oldest pending batch to the committer unless a batch is
// being committed.
func (r *Runner) flush() {
	if r.committing != nil || len(r.pending) == 0 || r.snapHold(r.pending[0]) || r.holdFor(r.pending[0]) || r.holdResults() {
		return
	}
	r.committing = r.pending[0]
	r.pending = r.pending[1:]
	r.committing.units = r.committing.d.AllUnits()
	r.commitCh <- r.committing
}

// holdFor reports whether b, next to commit, waits for a start that comes
// due sooner than an append takes.
//
// Appended now, b would still be committing when the start came due, and
// the start's attempt_started, which must be synced before its handler
// runs (DL-7), would wait for the rest of b's commit and then its own. A
// job delayed to an instant would start up to two commits late whenever
// other work is appended just before it. Held until the start is decided,
// b goes in the same append and the start pays one commit. b's own callers
// wait for less than the commit estimate, which is what the start saves.
//
// A batch is held only while attempts can start (dispatch on, a worker
// slot free), and until that one instant at most: the loop's timer wakes
// it then (arm), and if the start did not come (its job left, its queue
// paused), b goes.
func (r *Runner) holdFor(b *batch) bool {
	if len(b.d.Starts) > 0 || !r.dispatch || r.runtime.IsCancelled() || !r.m.SlotFree() {
		return false
	}
	now := r.cfg.Clock.Now()
	if !b.holdUntil.IsZero() {
		return now.Before(b.holdUntil)
	}
	if r.commitEst <= 0 {
		return false
	}
	next, ok := r.m.NextTimer()
	if !ok {
		return false
	}
	wait := next.Sub(now)
	if wait >= r.commitEst {
		return false
	}
	// Counted from now, not set to next: with the system clock, now
	// carries the monotonic reading, so a step of the wall clock during
	// the hold neither shortens nor stretches it.
	b.holdUntil = now.Add(wait)
	return true
}

// resultsHold is the wait of the next append for the results of the
// attempts the last acknowledgement launched.
//
// A worker slot is taken from an attempt's start until its settlement is
// decided. Appended at once, the next batch carries only the results that
// came in during the last commit, and those of the attempts launched at
// its acknowledgement come in while it commits: their settlements, and
// the starts their slots make room for, wait for that commit and then
// their own. Each slot then starts an attempt every two commits, and with
// handlers that return sooner than a commit takes, a pool drains at half
// the pace its commits allow: 0.50 commits per job on 4 workers in the api
// package's BenchmarkDrainSlowSync. Held until those results are in, the
// batch carries them, and each slot starts an attempt every commit: 0.26.
//
// The hold is taken only when every worker slot is taken after the
// acknowledgement's decisions: with one free, no job due waits for a slot,
// and holding would only delay the batch and the starts it carries (in a
// trace of a burst at Workers 512, the second append waited 0.6 ms for the
// results of the first one's two attempts with 390 starts in it). It is
// taken only when the handlers' results have been coming in within half a
// commit (execEst), so that it is likely to end with them, and it lasts
// half the commit estimate at most: a commit's worth of waiting is all it
// can save. It never holds a caller: a batch any caller waits on goes at
// once, as does everything once dispatch stops, the runtime is cancelled
// or a shutdown's root is installed (whose settlement caps shrink with it,
// DL-39).
type resultsHold struct {
	n     int       // attempts launched by the last acknowledgement whose results are not in
	until time.Time // the end of the hold
}

// mayHoldResults reports whether the append after an acknowledgement that
// started k attempts waits for their results (resultsHold).
func (r *Runner) mayHoldResults(k int) bool {
	return r.cfg.HoldForResults && k > 0 && !r.m.SlotFree() && r.dispatch && !r.runtime.IsCancelled() && !r.root.Installed() &&
		r.commitEst > 0 && 2*r.execEst < r.commitEst && !r.callersWaiting()
}

// holdResults reports whether the next batch still waits for the results
// of the attempts the last acknowledgement launched, and ends the hold
// once it need not.
func (r *Runner) holdResults() bool {
	if r.rhold.n <= 0 {
		return false
	}
	if !r.dispatch || r.runtime.IsCancelled() || r.root.Installed() || r.callersWaiting() ||
		!r.cfg.Clock.Now().Before(r.rhold.until) {
		r.rhold = resultsHold{}
		return false
	}
	return true
}

// callersWaiting reports whether a caller waits on a pending batch.
func (r *Runner) callersWaiting() bool {
	for _, b := range r.pending {
		if len(b.replies) > 0 {
			return true
		}
	}
	return false
}

// noteExecution folds the time from a's launch to its result reaching the
// loop into the execution estimate, and counts a's result in if the hold
// waits for it.
func (r *Runner) noteExecution(a *attempt, now time.Time) {
	r.execEst = foldEstimate(r.execEst, now.Sub(a.launched))
	if a.ackGen == r.ackGen && r.rhold.n > 0 {
		r.rhold.n--
	}
}

// noteCommit folds one append's duration into the commit estimate.
func (r *Runner) noteCommit(took time.Duration) { r.commitEst = foldEstimate(r.commitEst, took) }

// foldEstimate returns est, a moving average over about the last eight
// samples, with sample folded in, between 0 and holdMax. A zero est is
// none yet: the first sample is taken whole.
func foldEstimate(est, sample time.Duration) time.Duration {
	if est == 0 {
		est = sample
	} else {
		est += (sample - est) / 8
	}
	return min(max(est, 0), holdMax)
}

func (r *Runner) acked(a ack) bool {
	r.committing = nil
	r.lastAck = r.cfg.Clock.Now()
	r.noteCommit(a.took)
	if a.err != nil {
		r.mu.Lock()
		r.fatal = a.err
		r.mu.Unlock()
		// OnFatal first: a caller that learns of the failure from its
		// reply finds the owner already told (a fail-stopped engine is
		// not live, SD-34).
		if r.cfg.OnFatal != nil {
			r.cfg.OnFatal(a.err)
		}
		for _, c := range a.b.replies {
			c <- a.err
		}
		for _, b := range r.pending {
			for _, c := range b.replies {
				c <- a.err
			}
		}
		r.pending = nil
		r.abandonAll()
		return false
	}
	if n := len(a.b.d.Records); n > 0 {
		last := a.b.d.Records[n-1].Seq
		r.m.Acked(last)
		if r.checkWait != 0 && last >= r.checkWait {
			r.checkWait = 0 // the check goes on in the decide below
		}
		if r.snapWrite != nil && last >= r.snapSeq {
			write := r.snapWrite
			r.snapWrite = nil
			r.writeSnapshot(write)
		}
		for seq := range r.settling {
			if seq <= last {
				delete(r.settling, seq) // committed within its cap (DL-39)
			}
		}
	}
	// What came due during the append is decided now (arm does not wake
	// the loop for it while an append is in flight), and the next batch
	// goes to the committer before the acknowledged attempts launch:
	// launching a hundred of them takes about a millisecond of the loop,
	// and made ready before the committer, their goroutines would run
	// ahead of it. Unless it waits for their results (resultsHold).
	r.decide(r.cfg.Clock.Now())
	r.ackGen++
	r.rhold = resultsHold{}
	hold := r.mayHoldResults(len(a.b.d.Starts))
	if !hold {
		r.flush()
	}
	launched := 0
	for _, st := range a.b.d.Starts {
		if r.launch(st, a.done) {
			launched++
		}
	}
	if hold {
		if launched > 0 {
			r.rhold = resultsHold{n: launched, until: r.cfg.Clock.Now().Add(r.commitEst / 2)}
		}
		r.flush()
	}
	for _, run := range a.b.d.DeadlineRuns {
		r.launchHandler(run)
	}
	for _, c := range a.b.replies {
		c <- nil
	}
	r.wakeWatchers(a.b.d.Records)
	r.recycle(a.b)
	if launched > 0 {
		// Let the launched executions start before the loop goes on: the
		// goroutine made ready last runs next on this P, but the loop kept
		// the P for the rest of its pass and for the results that came in
		// meanwhile, while the executions, each handing over the next
		// (execPool), waited behind it. Their handlers are late by that
		// much (Engine.StartDelays); the next batch is with the committer
		// already. docs/performance.md: the figures.
		runtime.Gosched()
	}
	return true
}

// newBatch returns an empty batch, the recycled one if there is one.
func (r *Runner) newBatch() *batch {
	if b := r.spare; b != nil {
		r.spare = nil
		return b
	}
	return &batch{}
}

// recycle keeps b, acknowledged and acted on, for the next batch: its
// slices keep their room, so a batch merging many decisions grows no
// slice once the loop has seen one as large.
func (r *Runner) recycle(b *batch) {
	clear(b.d.Records)
	clear(b.d.Index)
	clear(b.d.Starts)
	clear(b.d.DeadlineRuns)
	clear(b.replies)
	*b = batch{
		d: Decision{
			Records: b.d.Records[:0], Index: b.d.Index[:0], Units: b.d.Units[:0],
			Starts: b.d.Starts[:0], DeadlineRuns: b.d.DeadlineRuns[:0],
		},
		replies: b.replies[:0],
	}
	r.spare = b
}

// launchHandler runs an on-deadline handler whose start is acknowledged,
// on its own goroutine (WD-10).
func (r *Runner) launchHandler(run DeadlineRun) {
	now := r.cfg.Clock.Now()
	deadline := now.Add(r.cfg.HandlerTimeout)
	ctx, cancel := newAttemptContext(context.Background(), deadline)
	h := &handlerRun{ctx: ctx, cancel: cancel, deadline: deadline, reason: deadlines.ReasonDeliveryTimeout}
	r.handlers[run.Expiry] = h
	if r.root.Installed() {
		h.lowerTo(r.root.G(), deadlines.ReasonShutdownDeadline)
	}
	if reason, at, ok := r.runtime.Reason(); ok {
		cancel(&CancelReason{Reason: reason, At: at}) // started under force
	}
	heapPush(&r.events, event{at: h.deadline.UnixNano(), token: run.Expiry, kind: evHandler})
	r.execWG.Add(1)
	r.q.handlers.Add(1)
	go func() {
		defer r.execWG.Done()
		outcome, msg := HandlerNotRegistered, "no deadline handler runner"
		if r.cfg.DeadlineFunc != nil {
			outcome, msg = r.cfg.DeadlineFunc(ctx, run)
		}
		r.q.handlers.Add(-1) // returned: before the loop hears of it

		interrupted := false
		if cr, ok := context.Cause(ctx).(*CancelReason); ok && outcome != HandlerOK && outcome != HandlerNotRegistered {
			interrupted = cr.Reason != deadlines.ReasonDeliveryTimeout
		}
		cancel(nil)
		select {
		case r.hdone <- handlerDone{run: run, outcome: outcome, msg: msg, interrupted: interrupted}:
		case <-r.loopDone:
		}
	}()
}

// CodeDeadlineHandlerInterrupted is the code of the debug record appended
// when an on-deadline handler fails after a shutdown cancelled its
// context: no deadline_handler_finished is appended, and the obligation
// runs again after the next start (WD-10).
const CodeDeadlineHandlerInterrupted = "DEADLINE_HANDLER_INTERRUPTED"

// boundHandlers lowers every running on-deadline handler's deadline to the
// root's G (WD-10), and cancels at once those whose G has passed.
func (r *Runner) boundHandlers(now time.Time) {
	if !r.root.Installed() {
		return
	}
	for _, exp := range sortedKeys(r.handlers) {
		h := r.handlers[exp]
		if h.lowerTo(r.root.G(), deadlines.ReasonShutdownDeadline) {
			heapPush(&r.events, event{at: h.deadline.UnixNano(), token: exp, kind: evHandler})
		}
		if !now.Before(h.deadline) {
			h.cancel(&CancelReason{Reason: h.reason, At: h.deadline})
		}
	}
}

// EnableDeadlineChecks starts the periodic workflow deadline check of the
// long-running mode (WD-6): one check at once, then one every
// DeadlineCheckInterval. Run-once mode never enables it.
func (r *Runner) EnableDeadlineChecks(ctx context.Context) error {
	return r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		r.checkAt = now
		return Decision{}, nil
	})
}

// DisableDeadlineChecks stops the periodic check (shutdown phase 1, SD-12).
func (r *Runner) DisableDeadlineChecks(ctx context.Context) error {
	return r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		r.checkAt, r.checkWait = time.Time{}, 0
		return Decision{}, nil
	})
}

// fire acts on every event due at the clock's current instant; due
// machine timers are picked up by the next Dispatch.
func (r *Runner) fire() { r.fireAt(r.cfg.Clock.Now()) }

// fireAt acts on every event due at now, in (instant, arming) order.
func (r *Runner) fireAt(now time.Time) {
	n := now.UnixNano()
	for r.events.Len() > 0 && r.events[0].at <= n {
		e := heapPop(&r.events)
		switch e.kind {
		case evHandler: // an on-deadline handler's deadline
			if h, ok := r.handlers[e.token]; ok && !now.Before(h.deadline) {
				h.cancel(&CancelReason{Reason: h.reason, At: h.deadline})
			}
		case evSettle:
			r.settleExpired(e.token, now)
		case evAttempt:
			if a, ok := r.attempts[e.token]; ok {
				a.armed = time.Time{}
				r.supervise(a, now)
			}
		}
	}
}

// arm sets the one clock timer to the earliest instant of the machine's
// timers and the attempts' deadlines.
func (r *Runner) arm(now time.Time) {
	// The machine's timers matter only while dispatching: with dispatch
	// off, a due one would re-arm at once on every pass of the loop. Nor
	// while an append is in flight: what they decide would wait for it to
	// be acknowledged, and acked decides what is due then. In a burst of
	// timers a few microseconds apart, waking for each cost the loop, and
	// the committer it shares two cores with, several microseconds a job.
	var (
		next time.Time
		ok   bool
	)
	decides := r.dispatch && r.committing == nil
	if decides {
		next, ok = r.m.NextDue()
		r.armWarm(now, next, ok)
	}
	if !r.checkAt.IsZero() && r.checkWait == 0 && decides && (!ok || r.checkAt.Before(next)) {
		next, ok = r.checkAt, true
	}
	// An event whose subject is gone (a settlement acknowledged within its
	// cap, an attempt that settled) would wake the loop for nothing: fire
	// drops it unseen. Dropped here, it arms no timer.
	for r.events.Len() > 0 && !r.eventLive(r.events[0]) {
		heapPop(&r.events)
	}
	if r.events.Len() > 0 {
		e := time.Unix(0, r.events[0].at)
		if !ok || e.Before(next) {
			next, ok = e, true
		}
	}
	if len(r.pending) > 0 && r.committing == nil {
		if h := r.pending[0].holdUntil; !h.IsZero() && (!ok || h.Before(next)) {
			next, ok = h, true
		}
		if h := r.rhold.until; r.rhold.n > 0 && (!ok || h.Before(next)) {
			next, ok = h, true
		}
	}
	if !ok {
		if r.timer != nil {
			r.timer.Stop()
			r.timer = nil
		}
		return
	}
	if r.timer != nil && r.timerAt.Equal(next) {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	// Armed at the instant itself, not relative to the pass's now: the
	// clock may have moved since.
	r.timer = clock.NewTimerAt(r.cfg.Clock, next)
	r.timerAt = next
}

// armWarm sets the warm timer (RunnerConfig.Warm) WarmLead before due,
// the machine's next due instant if ok, or stops it when there is none or
// it is nearer than WarmLead. A warm timer whose instant has passed is
// acted on first.
func (r *Runner) armWarm(now, due time.Time, ok bool) {
	if r.warmCh == nil {
		return
	}
	if r.warmTimer != nil && !r.warmAt.After(now) {
		// Its instant has passed, and this pass came before its fire
		// was taken: act on it here.
		r.warmTimer.Stop()
		r.warmTimer = nil
		r.warm(now)
	}
	at := due.Add(-r.cfg.WarmLead)
	if !ok || !at.After(now) {
		if r.warmTimer != nil {
			r.warmTimer.Stop()
			r.warmTimer = nil
		}
		return
	}
	if r.warmTimer != nil && r.warmAt.Equal(at) {
		return
	}
	if r.warmTimer != nil {
		r.warmTimer.Stop()
	}
	r.warmTimer = clock.NewTimerAt(r.cfg.Clock, at)
	r.warmAt = at
}

// warm asks the warmer for a call of RunnerConfig.Warm, unless the journal
// is busy or has just synced: an append pending or in flight, or one
// acknowledged within WarmLead. A request made while the previous call
// runs is dropped.
func (r *Runner) warm(now time.Time) {
	if !r.dispatch || r.committing != nil || len(r.pending) > 0 || now.Sub(r.lastAck) < r.cfg.WarmLead {
		return
	}
	select {
	case r.warmCh <- struct{}{}:
	default:
	}
}

// stopWarmer stops the warm timer and waits for the warmer to return.
func (r *Runner) stopWarmer() {
	if r.warmTimer != nil {
		r.warmTimer.Stop()
		r.warmTimer = nil
	}
	if r.warmCh != nil {
		close(r.warmCh)
		<-r.warmDone
	}
}

// Note appends b as one engine-stream record ([Machine.Note]) and returns
// once it is acknowledged, like [Runner.Submit].
func (r *Runner) Note(ctx context.Context, b record.Body) error {
	return r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		return m.Note(b), nil
	})
}

// StopAdmission stops starting attempts and the periodic workflow deadline
// check (shutdown phase 1, SD-12). It returns once the loop ran it, without
// waiting for appends in flight, and cancels nothing (DL-19).
func (r *Runner) StopAdmission(ctx context.Context) error {
	return r.call(ctx, func(time.Time) {
		r.dispatch = false
		r.checkAt, r.checkWait = time.Time{}, 0
	})
}

// LatestOwnerCutoff returns the latest owner cutoff O (DL-21) of the
// attempts in flight that have a cancellation reason, or the zero time if
// none has.
func (r *Runner) LatestOwnerCutoff(ctx context.Context) (time.Time, error) {
	var latest time.Time
	err := r.call(ctx, func(time.Time) {
		for _, tok := range r.tokens() {
			a := r.attempts[tok]
			reason, at, ok := a.att.sig.Reason()
			if !ok {
				continue
			}
			if o := a.budget.OwnerCutoff(reason, at, r.root); o.After(latest) {
				latest = o
			}
		}
	})
	return latest, err
}

// InFlight returns how many attempts and on-deadline handlers the loop
// still tracks.
func (r *Runner) InFlight(ctx context.Context) (int, error) {
	var n int
	err := r.call(ctx, func(time.Time) { n = len(r.attempts) + len(r.handlers) })
	return n, err
}

// Decided returns the seq of the last record the machine decided, whether
// or not its append was acknowledged yet: the journal's LastSeq trails it
// by the records being committed and waiting to be.
func (r *Runner) Decided(ctx context.Context) (uint64, error) {
	var seq uint64
	err := r.call(ctx, func(time.Time) { seq = r.m.NextSeq() - 1 })
	return seq, err
}

// SnapshotHeld reports whether the next batch waits for a snapshot being
// written (RL-12): appended, it would outrun the restart bound.
func (r *Runner) SnapshotHeld(ctx context.Context) (bool, error) {
	var held bool
	err := r.call(ctx, func(time.Time) { held = r.committing == nil && len(r.pending) > 0 && r.snapHold(r.pending[0]) })
	return held, err
}

// StartDelays returns how many executions started within each bucket of
// [StartDelayBounds] (and, last, over it) after the append that
// acknowledged their attempt_started returned, since the runner was made:
// the time an acknowledged attempt waited for the loop to launch it and
// for a goroutine and a CPU to run it. Safe from any goroutine.
func (r *Runner) StartDelays() []uint64 { return r.startDelays.snapshot() }
