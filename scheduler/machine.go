package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Errors the machine returns for refused inputs. Nothing is decided or
// appended for a refused input.
var (
	ErrNotFound     = errors.New("scheduler: not found")
	ErrState        = errors.New("scheduler: not in a state that allows this")
	ErrStaleToken   = errors.New("scheduler: attempt token is revoked or unknown")
	ErrNotRecovered = errors.New("scheduler: recovery has not run")
)

// Config is what the machine needs besides state. Functions are injected
// so that the machine stays pure: ids and jitter come from seeded sources.
type Config struct {
	// Workers bounds attempts in flight. Must be >= 1.
	Workers int
	// DeliveryTimeout is used for jobs that recorded no timeout of their own.
	DeliveryTimeout time.Duration
	// QueueJobFunc returns the retry policy and the delivery timeout (0:
	// DeliveryTimeout) of a job of queue that sets none of its own: the
	// queue's options over the engine's (DL-2, DL-4). A sub-workflow's step
	// job that runs on the queue it inherits from its parent takes them
	// where its step sets none (WF-8, WF-22). Nil: the step's own resolution
	// stands.
	QueueJobFunc func(queue string) (record.RetryPolicy, time.Duration)
	// QueueOrder lists queues to serve first, in order; other queues follow
	// in name order (JB-2).
	QueueOrder []string
	// RegisteredFunc reports whether a handler name is registered. Jobs of
	// unregistered handlers are parked, never started.
	RegisteredFunc func(handler string) bool
	// NewIDFunc returns a fresh id with the given prefix ("job_").
	NewIDFunc func(prefix string, now time.Time) string
	// PickFunc returns a uniform integer in [0, n) from a seeded source;
	// it chooses among backoff jitter candidates (DL-5).
	PickFunc func(n int) int
	// WorkflowFunc returns the registered definition of a workflow name,
	// or nil. Workflows whose definition is not registered wait for it.
	WorkflowFunc func(name string) *WorkflowDef
	// LookupFunc returns the summary of a workflow that left the state
	// (completed or cancelled), read from the journal's terminal index.
	LookupFunc func(id string) (WorkflowSummary, bool)
	// IdempotencyFunc returns the workflow that used an idempotency key
	// whose workflow left the state (WF-14).
	IdempotencyFunc func(key string) (replay.Idempotent, bool)
	// StateBytesMax bounds a workflow's public state and the output a step
	// completes with (merged branches, a wait's result, a child's state):
	// past it the workflow fails instead of going on, since its state is
	// carried by records and by its terminal-index entry, which the
	// journal bounds (RL-11). Zero means no bound.
	StateBytesMax int
	// UnitRecordsMax and UnitBytesMax are the journal's caps on one atomic
	// append (RL-4), counted as the journal counts them. A workflow that
	// finishes reacts for its waiters in its own append (WF-11) while
	// that append holds under half of either cap; the reactions that
	// would take it past follow in appends of their own, since an append
	// the journal refuses stops the engine (RL-2). Zero means no bound.
	UnitRecordsMax, UnitBytesMax int
	// RecordBytesMax bounds one record and one index value, as the
	// journal does; with it, a unit too small to reach half of
	// UnitBytesMax is not encoded to be sized. Zero means unknown.
	RecordBytesMax int
}

// IndexEntry sets the terminal-index value of an id in the same append as
// the records of a [Decision].
type IndexEntry struct {
	ID    string
	Value []byte
}

// Start is an attempt to run once its attempt_started is acknowledged.
type Start struct {
	Token uint64
	Job   replay.Job // a copy as of the start
	// State is the public state of a step job's workflow at the start, and
	// WorkflowName its workflow's name; both empty for plain jobs.
	State        []byte
	WorkflowName string
	// Budget of the attempt (DL-7, DL-9).
	S, H, P time.Time
}

// Decision is the output of one machine step: records to append, index
// values to set with them, and attempts to start after the append is
// acknowledged (never before: RL-1).
type Decision struct {
	Records []record.Record
	Index   []IndexEntry
	// Units splits Records and Index, in order, into atomic units: each
	// unit's records and index entries survive a crash together or not at
	// all (RL-4), and units may go in different group commits when they do
	// not fit in one (RL-11). The records and index entries after the last
	// unit form one more unit, so a Decision with no Units is atomic as a
	// whole. A decision that holds independent transitions (a start per
	// job, an expiry per workflow) cuts a unit after each, so that no
	// number of them can outgrow a group.
	Units []Unit
	// Starts are allocated one by one: merging decisions moves pointers,
	// and each becomes its attempt's Start without a copy.
	Starts []*Start
	// DeadlineRuns are on-deadline handlers to call (WD-10).
	DeadlineRuns []DeadlineRun

	// unitRecords and unitIndex count the records and index entries that
	// Units covers.
	unitRecords, unitIndex int
	// sizedBytes counts the bytes of the unit that starts at record
	// sizedFrom, up to record sizedRecords and index entry sizedIndex
	// (unitSize).
	sizedFrom, sizedRecords, sizedIndex, sizedBytes int
}

// Unit is the next Records records and Index index entries of a
// [Decision], appended atomically.
type Unit struct{ Records, Index int }

// cut ends the unit being decided: the records and index entries decided
// since the previous cut become one unit. Index entries decided with no
// record stay with the next unit's records. Loops over independent
// transitions cut before each: a decision of one transition then records
// no unit at all.
func (d *Decision) cut() {
	recs := len(d.Records) - d.unitRecords
	if recs == 0 {
		return
	}
	idx := len(d.Index) - d.unitIndex
	d.Units = append(d.Units, Unit{Records: recs, Index: idx})
	d.unitRecords, d.unitIndex = len(d.Records), len(d.Index)
}

// unitSize returns the records and bytes of the unit being decided, as
// the journal counts them against its caps on one append: envelopes, and
// index ids and values. Bytes are counted once per record, however often
// it is called. buf is scratch space for encoding, returned grown.
func (d *Decision) unitSize(buf []byte) (recs, bytes int, _ []byte) {
	if d.sizedFrom != d.unitRecords || d.sizedRecords < d.unitRecords || d.sizedIndex < d.unitIndex {
		d.sizedFrom, d.sizedRecords, d.sizedIndex, d.sizedBytes = d.unitRecords, d.unitRecords, d.unitIndex, 0
	}
	for ; d.sizedRecords < len(d.Records); d.sizedRecords++ {
		// The machine only decides records replay accepts, and the journal
		// refuses one over its own cap: size alone matters here.
		p, out, err := record.PrepareAppend(buf[:0], d.Records[d.sizedRecords], math.MaxInt)
		if err == nil {
			d.sizedBytes += p.Size()
			buf = out
		}
	}
	for ; d.sizedIndex < len(d.Index); d.sizedIndex++ {
		e := d.Index[d.sizedIndex]
		d.sizedBytes += len(e.ID) + len(e.Value)
	}
	return len(d.Records) - d.unitRecords, d.sizedBytes, buf
}

// AllUnits ends the unit being decided and returns every unit of d, or nil
// when d is one unit.
func (d *Decision) AllUnits() []Unit {
	d.cut()
	if len(d.Units) <= 1 {
		return nil
	}
	return d.Units
}

// merge appends o to d, o's units after d's: each decision merged stays
// atomic. o must not be used afterwards: where d has nothing yet, it
// takes o's slices instead of copying them.
func (d *Decision) merge(o Decision) {
	d.cut()
	recs, idx := d.unitRecords, d.unitIndex
	d.Records = appendOrTake(d.Records, o.Records)
	d.Index = appendOrTake(d.Index, o.Index)
	d.Units = appendOrTake(d.Units, o.Units)
	d.unitRecords, d.unitIndex = recs+o.unitRecords, idx+o.unitIndex
	d.Starts = appendOrTake(d.Starts, o.Starts)
	d.DeadlineRuns = appendOrTake(d.DeadlineRuns, o.DeadlineRuns)
}

// appendOrTake appends o to d, or returns o itself if d is empty and has
// no room for it.
func appendOrTake[T any](d, o []T) []T {
	if len(d) == 0 && cap(d) < len(o) {
		return o
	}
	return append(d, o...)
}

// Empty reports whether d appends nothing and starts nothing.
func (d Decision) Empty() bool {
	return len(d.Records) == 0 && len(d.Starts) == 0 && len(d.DeadlineRuns) == 0
}

// Machine decides the engine's transitions from replayed state, the time
// and an input, and applies its own decisions to the state at once, with
// the seqs the journal will assign. The caller must append the records of
// every Decision in order, as the only writer of the journal, and act on a
// Decision only after its append is acknowledged. A failed append leaves
// the machine ahead of the journal: the instance must stop (RL-2).
//
// A Machine is not safe for concurrent use and performs no I/O.
type Machine struct {
	cfg       Config
	st        *replay.State
	x         *index
	nextSeq   uint64
	inflight  int
	recovered bool
	// waiters maps a workflow id to the workflows waiting on it (WF-7);
	// entries are checked on use, so stale ones are harmless, and swept
	// (addWaiter). waiterEntries counts them, waitersSwept as of the last
	// sweep.
	waiters                     map[string][]string
	waiterEntries, waitersSwept int
	// tallies holds the wait tallies of workflows waiting for workflows,
	// made on first use (tally), dropped when the wait settles or by the
	// sweep.
	tallies map[string]*waitTally
	// waitIDsRead counts the ids that waits for workflows were read
	// over, in tallies and full decisions: what tests hold to O(1) per
	// dependency finishing.
	waitIDsRead int
	// expiriesStarted is the seq of the newest expiry whose handler this
	// process started (WD-10): every older one is running or done.
	// expiriesNew queues, in seq order, the obligations to start: every
	// outstanding one at Recover, then each new expiry's.
	expiriesStarted uint64
	expiriesNew     []uint64
	// recent holds the summaries of workflows that left the state in
	// decisions whose append may not be acknowledged yet, so lookups never
	// miss them before the terminal index serves them (RL-1).
	recent     map[string]recentWorkflow
	recentIdem map[string]recentIdem
	// queueBuf is queues' result, reused by every Dispatch.
	queueBuf []string
	// queueRank is each QueueOrder queue's place in it, its first one.
	queueRank map[string]int
	// deferred holds, in order, the waiters whose reaction to a finished
	// workflow did not fit in its append (react); Dispatch settles each
	// in an append of its own. deferredSet holds the same ids. Those left
	// when a run ends are settled in the next, when their definition is
	// registered ([Machine.WorkflowRegistered] checks every wait).
	deferred    []string
	deferredSet map[string]bool
	// sizeBuf is unitSize's scratch space.
	sizeBuf []byte
}

type recentWorkflow struct {
	seq uint64
	sum WorkflowSummary
}

type recentIdem struct {
	seq uint64
	v   replay.Idempotent
}

// Acked tells the machine that every record up to seq is acknowledged.
func (m *Machine) Acked(seq uint64) {
	for id, r := range m.recent {
		if r.seq <= seq {
			delete(m.recent, id)
		}
	}
	for k, r := range m.recentIdem {
		if r.seq <= seq {
			delete(m.recentIdem, k)
		}
	}
}

// NewMachine returns a machine over st, the state replayed from a journal
// whose last seq is st.LastSeq.
func NewMachine(cfg Config, st *replay.State) *Machine {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	m := &Machine{cfg: cfg, st: st, x: newIndex(), nextSeq: st.LastSeq + 1,
		waiters: make(map[string][]string), tallies: make(map[string]*waitTally),
		recent: make(map[string]recentWorkflow), recentIdem: make(map[string]recentIdem),
		deferredSet: make(map[string]bool)}
	for i, q := range cfg.QueueOrder {
		if _, dup := m.queueRank[q]; !dup {
			if m.queueRank == nil {
				m.queueRank = make(map[string]int, len(cfg.QueueOrder))
			}
			m.queueRank[q] = i
		}
	}
	for _, id := range st.JobIDs() {
		m.place(st.Jobs[id])
	}
	for _, id := range st.WorkflowIDs() {
		w := st.Workflows[id]
		if w.DelayFireAt != 0 {
			m.armDelay(w)
		}
		if w.Wait != nil {
			m.addWaiter(w.ID, w.Wait.Workflows)
		}
	}
	return m
}

// State returns the machine's state, which includes decided records that
// may not be acknowledged yet. Callers serving reads must wait for the
// acknowledgement of NextSeq()-1 first.
func (m *Machine) State() *replay.State { return m.st }

// NextSeq returns the seq the next decided record will get.
func (m *Machine) NextSeq() uint64 { return m.nextSeq }

// Inflight returns the number of attempts started and not yet settled in
// this run.
func (m *Machine) Inflight() int { return m.inflight }

// SlotFree reports whether a worker slot is free for a start.
func (m *Machine) SlotFree() bool { return m.inflight < m.cfg.Workers }

// emit assigns the next seq to a record, applies it to the state and
// maintains the index. A record the state refuses is a programming error
// in the machine: it panics rather than append something replay rejects.
func (m *Machine) emit(d *Decision, stream string, b record.Body) uint64 {
	r := record.Record{Seq: m.nextSeq, Stream: stream, Body: b}
	var wake string
	if jb, ok := b.(*record.JobBuried); ok {
		if j := m.st.Jobs[jb.JobID]; j != nil && m.st.PausedQueues[j.Queue] {
			// A paused queue's heap is not scanned until the queue
			// resumes; the burial may leave it only stale entries, so
			// it is looked at once more (RL-11).
			wake = j.Queue
		}
	}
	if err := replay.Apply(m.st, r); err != nil {
		panic(fmt.Sprintf("scheduler: machine decided a record replay refuses: %v", err))
	}
	m.nextSeq++
	d.Records = append(d.Records, r)
	m.reindex(b)
	if wake != "" {
		m.x.wake(wake)
	}
	return r.Seq
}

// reindex updates the derived views after a record touching one job.
func (m *Machine) reindex(b record.Body) {
	var id string
	switch b := b.(type) {
	case *record.JobEnqueued:
		id = b.JobID
	case *record.AttemptStarted:
		id = b.JobID
	case *record.AttemptSucceeded:
		id = b.JobID
	case *record.AttemptRetryScheduled:
		id = b.JobID
	case *record.AttemptBuried:
		id = b.JobID
	case *record.AttemptReleased:
		id = b.JobID
	case *record.JobBuried:
		id = b.JobID
	case *record.JobRequeued:
		id = b.JobID
	case *record.RunStarted:
		for _, jid := range m.st.JobIDs() {
			m.place(m.st.Jobs[jid])
		}
		return
	default:
		return
	}
	j, ok := m.st.Jobs[id]
	if !ok {
		m.x.forget(id)
		return
	}
	m.place(j)
}

// place files a job in the right view for its status.
func (m *Machine) place(j *replay.Job) {
	gen := m.x.touch(j.ID)
	if j.Status != replay.JobPending {
		return
	}
	if m.cfg.RegisteredFunc != nil && !m.cfg.RegisteredFunc(j.Handler) {
		m.x.parked[j.Handler] = append(m.x.parked[j.Handler], j.ID)
		return
	}
	m.x.pushDelayed(j, gen)
}

// Parked returns the handler names that have parked jobs, sorted.
func (m *Machine) Parked() []string {
	var out []string
	for h, ids := range m.x.parked {
		if len(ids) > 0 {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// Unpark re-files the jobs parked on handler, after it was registered.
func (m *Machine) Unpark(handler string) {
	ids := m.x.parked[handler]
	delete(m.x.parked, handler)
	for _, id := range ids {
		if j, ok := m.st.Jobs[id]; ok {
			m.place(j)
		}
	}
}

// NextTimer returns the earliest instant at which a delayed job becomes
// available or a workflow delay fires, if any. The runner arms one real
// timer for it.
func (m *Machine) NextTimer() (time.Time, bool) {
	return m.nextTimer(true)
}

// NextDue is NextTimer without the delayed jobs while no worker slot is
// free: the earliest instant at which Dispatch would decide something.
// A job that becomes available then could not start; the settlement that
// frees a slot is itself a pass of the loop, and Dispatch then promotes
// every job due by that instant.
func (m *Machine) NextDue() (time.Time, bool) {
	return m.nextTimer(m.SlotFree())
}

func (m *Machine) nextTimer(jobs bool) (time.Time, bool) {
	var next int64
	ok := false
	for jobs && m.x.delayed.Len() > 0 {
		e := m.x.delayed[0]
		if m.x.valid(e) {
			next, ok = e.at, true
			break
		}
		heapPop(&m.x.delayed)
	}
	for m.x.delays.Len() > 0 {
		e := m.x.delays[0]
		if _, valid := m.delayValid(e); valid {
			if !ok || e.at < next {
				next, ok = e.at, true
			}
			break
		}
		heapPop(&m.x.delays)
	}
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, next), true
}

// promote moves every delayed job due at now to its queue's ready heap,
// in (instant, seq) order.
func (m *Machine) promote(now time.Time) {
	n := now.UnixNano()
	for m.x.delayed.Len() > 0 {
		e := m.x.delayed[0]
		if !m.x.valid(e) {
			heapPop(&m.x.delayed)
			continue
		}
		if e.at > n {
			return
		}
		heapPop(&m.x.delayed)
		j := m.st.Jobs[e.id]
		m.x.pushReady(j, e.gen)
	}
}

// queues returns the queues with ready work that are not paused, in
// serving order: those of QueueOrder in its order, then the others by name
// (JB-2). On the way it drops the index's entries that hold no pending
// work (RL-11), so that its cost follows the queues with ready work, never
// every queue ever used, nor QueueOrder's length, nor the paused queues
// holding jobs.
//
// The result is valid until the next call.
func (m *Machine) queues() []string {
	out := m.x.readyQueues(m.queueBuf[:0], m.st.PausedQueues) // in name order
	m.x.sweep(m.st.Jobs)
	if len(m.queueRank) > 0 {
		// Ranked queues first, by rank; the others keep their name order.
		slices.SortStableFunc(out, func(a, b string) int {
			ra, oka := m.queueRank[a]
			rb, okb := m.queueRank[b]
			switch {
			case oka && okb:
				return ra - rb
			case oka:
				return -1
			case okb:
				return 1
			}
			return 0
		})
	}
	if cap(out) > shrinkMin && len(out) < cap(out)/4 {
		out = slices.Clone(out) // let a past burst of queues go
	}
	m.queueBuf = out
	return out
}

// Dispatch starts as many eligible jobs as free worker slots allow (JB-2):
// queues in serving order, skipping paused ones; within a queue, higher
// priority first, then enqueue order. S is now: the slot is acquired now.
func (m *Machine) Dispatch(now time.Time) Decision {
	var d Decision
	if !m.recovered {
		return d
	}
	m.fireDelays(&d, now)
	m.settleDeferred(&d, now)
	m.promote(now)
	if m.inflight >= m.cfg.Workers {
		return d
	}
	qs := m.queues()
	ready := 0 // at least the starts: held and stale entries are popped below
	for _, q := range qs {
		if h := m.x.ready[q]; h != nil && !m.st.PausedQueues[q] {
			ready += h.Len()
		}
	}
	if n := min(ready, m.cfg.Workers-m.inflight); n > 0 {
		// A start is one record and one unit: a burst's decision grew
		// each slice by doubling, about twice its size in garbage.
		d.Starts = make([]*Start, 0, n)
		d.Records = slices.Grow(d.Records, n)
		d.Units = slices.Grow(d.Units, n+1)
	}
	for _, q := range qs {
		if m.inflight >= m.cfg.Workers {
			break
		}
		if m.st.PausedQueues[q] {
			continue
		}
		h := m.x.ready[q]
		for h != nil && h.Len() > 0 && m.inflight < m.cfg.Workers {
			e := heapPop(h)
			if !m.x.valid(e) {
				continue
			}
			j := m.st.Jobs[e.id]
			if !m.eligible(j) {
				m.x.held[j.WorkflowID] = append(m.x.held[j.WorkflowID], j.ID)
				continue
			}
			d.cut() // each start is its own unit
			m.start(&d, now, j)
		}
	}
	return d
}

func (m *Machine) start(d *Decision, now time.Time, j *replay.Job) {
	t := time.Duration(j.DeliveryTimeoutNanos)
	if t <= 0 {
		t = m.cfg.DeliveryTimeout
	}
	b := deadlines.NewBudget(now, t, deadlines.Root{})
	tok := m.emit(d, j.Stream, &record.AttemptStarted{
		JobID: j.ID, Attempt: j.Attempts + 1,
		StartAt: b.S.UnixNano(), HardAt: b.H.UnixNano(), NormalAt: b.P.UnixNano(),
	})
	m.inflight++
	st := &Start{Token: tok, Job: *m.st.Jobs[j.ID], S: b.S, H: b.H, P: b.P}
	if w := m.st.Workflows[j.WorkflowID]; w != nil {
		st.State, _ = replay.PublicState(w.State) // WF-3: a copy of the public state
		st.WorkflowName = w.Name
	}
	d.Starts = append(d.Starts, st)
}

// Note decides b as one record on the engine stream, e.g. a shutdown
// record (SD-11) or a diagnostic (SD-36). Like every decision it is
// applied to the state at once and appended by the runner.
func (m *Machine) Note(b record.Body) Decision {
	var d Decision
	m.emit(&d, record.EngineStream, b)
	return d
}
