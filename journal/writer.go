package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/journal/record"
)

// IndexEntry sets the terminal-index value of ID (a job or workflow id) in
// the same batch as an append's records: t/<ID> = Value, or a delete when
// Value is nil. The engine keeps a finished job's or workflow's status
// summary there, so that its status is one point read ([Journal.Index]).
type IndexEntry struct {
	ID    string
	Value []byte
}

// The write path (DESIGN.md §3, spec/reliability.md §2.2).
//
// Appenders validate and encode their records in their own goroutine
// (record.Prepare), take one of QueueDepth slots, and join the group being
// built: under buildMu they get consecutive seqs, the monotone At and the
// prevSum chain, and their envelopes, s/ keys and index entries go straight
// into the group's Pebble batch. A group is committed as one batch with
// pebble.Sync by whoever holds the commit token (idle): usually the writer
// goroutine, which takes the whole pending group the moment the previous
// commit returns, so the next group fills while the current one syncs; or,
// when nobody is committing, the appender itself, which saves a lone
// appender two goroutine hand-offs. Taking the pending group and committing
// it both happen under the token, so groups commit one at a time in seq
// order: seq order is commit order (RL-1, RL-3), a group is never committed
// before the one holding the seqs below it was acknowledged, and nothing
// is answered before its group's sync returned. Snapshot writes and
// checkpoints take the token too, so they run between groups. An
// AppendUnits call too large for one group is several requests, joined one
// after the other, each once the previous one was answered (units.go).

// request is one append waiting for its group's commit. Whoever commits
// sets first and err and signals done (buffered, so it never blocks).
type request struct {
	recs []record.Prepared
	// buf holds the encoded bodies of recs, whose Payloads alias it. They
	// are copied into the group's batch when r joins it, so buf is reused
	// from one request to the next.
	buf   []byte
	index []IndexEntry
	bytes int // envelope and index bytes, as GroupBytesMax counts them

	first uint64
	err   error
	done  chan struct{}
}

// requestBufMax bounds the body buffer a recycled request keeps.
const requestBufMax = 64 << 10

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// putRequest recycles r. Only a caller that received r.done may call it:
// afterwards the writer holds no reference.
func putRequest(r *request) {
	clear(r.recs)
	r.recs = r.recs[:0]
	r.buf = r.buf[:0]
	if cap(r.buf) > requestBufMax {
		r.buf = nil // a large append's buffer is not kept for every later one
	}
	r.index, r.err, r.first, r.bytes = nil, nil, 0, 0
	requestPool.Put(r)
}

// writerState is guarded by Journal.buildMu: the last record assigned to a
// group (which runs ahead of the last acknowledged one by at most the
// groups being built and committed) and the group being built.
type writerState struct {
	lastSeq uint64
	lastSum uint32
	lastAt  int64
	cur     *group        // the group being built, nil if none
	taken   chan struct{} // closed when cur is taken for commit; nil until someone waits
}

// group is one batch: its records, their callers and the commit outcome.
type group struct {
	b    *pebble.Batch
	reqs []*request
	// skeys holds the group's s/ keys back to back, each ending at its
	// offset in sends, and index its index entries in request order: both
	// go into b after every e/ key (finishBatch), so that the memtable
	// takes the e/ keys, consecutive and ascending, on its fast path.
	skeys []byte
	sends []int
	index []IndexEntry
	// ikey holds the index key being written: the batch copies it.
	ikey    []byte
	n, size int // records, and bytes as GroupBytesMax counts them
	lastSeq uint64
	at      int64
	err     error
}

var groupPool = sync.Pool{New: func() any { return &group{} }}

// Append appends recs as one atomic append (RL-4) and returns their seqs,
// which are consecutive. Each record is validated and encoded in the
// caller's goroutine before it joins a group, so a bad record fails only
// its own append, with an error wrapping [record.ErrInvalid] or
// [record.ErrTooLarge]. An append larger than GroupRecordsMax or
// GroupBytesMax commits alone, in a group of its own; one larger than
// UnitRecordsMax or UnitBytesMax is ErrTooLarge ([Journal.AppendUnits]
// spreads a large append, cut into atomic units, over several groups).
//
// If ctx ends while the call waits for a queue slot (QueueDepth appends
// are pending) or for room in a group, Append returns ctx's error and
// appends nothing. Once in a group, the append cannot be withdrawn: Append
// returns only after its group's sync (the seqs) or a fail-stop
// ([ErrFailStop], outcome unknown).
func (j *Journal) Append(ctx context.Context, recs ...record.Record) ([]uint64, error) {
	return j.AppendIndexed(ctx, nil, recs...)
}

// AppendIndexed is [Journal.Append] that also applies index entries in the
// same batch as the records.
func (j *Journal) AppendIndexed(ctx context.Context, index []IndexEntry, recs ...record.Record) ([]uint64, error) {
	return j.AppendUnits(ctx, index, recs, nil)
}

// complete has the group r joined committed and waits for the answer,
// then gives back r's queue slot. After an error r must be abandoned (the
// writer may still hold it); after success r.first is set.
func (j *Journal) complete(r *request) error {
	// Commit now if nobody is committing; otherwise the writer takes
	// the group as soon as its current commit returns.
	select {
	case <-j.idle:
		j.commitPending()
		j.idle <- struct{}{}
		j.buildMu.Lock()
		more := j.w.cur != nil // appenders who found the token taken
		j.buildMu.Unlock()
		if more {
			j.signalWork()
		}
	default:
		j.signalWork()
	}
	err := j.await(r)
	<-j.slots
	return err
}

// join takes a queue slot and adds r to the group being built, waiting
// (until ctx ends) for a slot, or for the writer to take a full group.
// later is set for the second and later requests of a split
// [Journal.AppendUnits] call, which Close waits for (j.splits): they are
// admitted after Close began, since part of their call is already
// appended.
func (j *Journal) join(ctx context.Context, r *request, later bool) error {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock() // Close waits for joins in progress
	if later {
		if j.isDead() {
			return j.failStopError("append")
		}
	} else if err := j.writeBegin("append"); err != nil {
		return err
	}
	select {
	case j.slots <- struct{}{}:
	default:
		select {
		case j.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("journal: append: waiting for queue space (%d appends pending): %w", j.opts.QueueDepth, ctx.Err())
		case <-j.dead:
			return j.failStopError("append")
		}
	}
	for {
		j.buildMu.Lock()
		if j.isDead() {
			j.buildMu.Unlock()
			<-j.slots
			return j.failStopError("append")
		}
		g := j.w.cur
		if g == nil {
			g = j.newGroup()
			j.w.cur = g
		}
		if g.n == 0 || (g.n+len(r.recs) <= j.opts.GroupRecordsMax && g.size+r.bytes <= j.opts.GroupBytesMax) {
			j.addToGroup(g, r)
			j.buildMu.Unlock()
			j.m.taken.Add(1)
			return nil
		}
		if j.w.taken == nil {
			j.w.taken = make(chan struct{})
		}
		taken := j.w.taken
		j.buildMu.Unlock()
		j.signalWork()
		select {
		case <-taken:
		case <-ctx.Done():
			<-j.slots
			return fmt.Errorf("journal: append: waiting for room in a group: %w", ctx.Err())
		case <-j.dead:
			<-j.slots
			return j.failStopError("append")
		}
	}
}

// writeBegin checks that a write may start. The caller holds closeMu
// shared.
func (j *Journal) writeBegin(op string) error {
	if j.closed {
		return fmt.Errorf("journal: %s: %w", op, ErrClosed)
	}
	if j.isDead() {
		return j.failStopError(op)
	}
	return nil
}

func (j *Journal) signalWork() {
	select {
	case j.work <- struct{}{}:
	default:
	}
}

// await waits for the answer to a request in a group. On a fail-stop it
// returns at once (the outcome is unknown either way) unless the answer is
// already there; r is then abandoned, never recycled.
func (j *Journal) await(r *request) error {
	select {
	case <-r.done:
	case <-j.dead:
		select {
		case <-r.done:
		default:
			return j.failStopError("append")
		}
	}
	return r.err
}

// metaAckedKey is metaAcked, allocated once.
var metaAckedKey = []byte(metaAcked)

func (j *Journal) newGroup() *group {
	g := groupPool.Get().(*group)
	g.b = j.db.NewBatchWithSize(64 << 10)
	var acked [8]byte
	binary.BigEndian.PutUint64(acked[:], j.lastSeq.Load())
	_ = g.b.Set(metaAckedKey, acked[:], nil)
	g.at = j.clock.Now().UnixNano()
	if g.at < j.w.lastAt {
		g.at = j.w.lastAt // RL-9: journal time is monotone
	}
	return g
}

// addToGroup assigns seqs to r's records and writes them (e/ and s/ keys)
// and r's index entries into g's batch. The caller holds buildMu.
func (j *Journal) addToGroup(g *group, r *request) {
	w := &j.w
	seq, sum := w.lastSeq, w.lastSum
	r.first = seq + 1
	for i := range r.recs {
		p := r.recs[i]
		seq++
		vlen := p.Size()
		op := g.b.SetDeferred(record.LogKeyBytes, vlen)
		record.AppendLogKey(op.Key[:0], seq)
		var v []byte
		v, sum = record.AppendEnvelope(op.Value[:0:vlen], seq, sum, g.at, p)
		if len(v) != vlen || &v[0] != &op.Value[0] {
			panic(fmt.Sprintf("journal: envelope of seq %d is %d bytes, Prepared.Size said %d", seq, len(v), vlen))
		}
		if err := op.Finish(); err != nil {
			// Only an invariant violation inside Pebble gets here; the
			// batch is unusable, so stop rather than commit half a group.
			panic(fmt.Sprintf("journal: build batch: %v", err))
		}
		g.skeys = appendStreamKey(g.skeys, p.Stream, seq)
		g.sends = append(g.sends, len(g.skeys))
	}
	g.index = append(g.index, r.index...)
	w.lastSeq, w.lastSum, w.lastAt = seq, sum, g.at
	g.lastSeq = seq
	g.reqs = append(g.reqs, r)
	g.n += len(r.recs)
	g.size += r.bytes
}

// takePending detaches the group being built, if any.
func (j *Journal) takePending() *group {
	j.buildMu.Lock()
	defer j.buildMu.Unlock()
	g := j.w.cur
	if g != nil {
		j.w.cur = nil
		if j.w.taken != nil {
			close(j.w.taken)
			j.w.taken = nil
		}
	}
	return g
}

// commitPending commits the group being built, if any, and answers its
// callers. The caller holds the commit token.
func (j *Journal) commitPending() {
	if g := j.takePending(); g != nil {
		j.commitGroup(g)
		j.answer(g)
	}
}

// run is the writer goroutine: whenever a group is pending it takes the
// commit token and commits the group; a Close ends it after the last one.
// A second goroutine answers the callers of its groups.
func (j *Journal) run() {
	answers := make(chan *group, 4)
	answered := make(chan struct{})
	go j.answerLoop(answers, answered)
	defer func() {
		close(answers)
		<-answered
		close(j.writerDone)
	}()
	for {
		select {
		case <-j.work:
		case <-j.quit:
			// Close admits no more appends; commit what joined before.
			<-j.idle
			for {
				g := j.takePending()
				if g == nil {
					break
				}
				j.commitGroup(g)
				j.answer(g)
			}
			j.idle <- struct{}{}
			return
		}
		<-j.idle
		g := j.takePending()
		if g != nil {
			j.commitGroup(g)
		}
		j.idle <- struct{}{}
		if g != nil {
			// Another goroutine answers the callers, so that the next
			// group can start committing right away.
			answers <- g
		}
	}
}

// answerLoop answers the callers of the groups the writer committed.
func (j *Journal) answerLoop(answers <-chan *group, done chan<- struct{}) {
	defer close(done)
	for g := range answers {
		j.answer(g)
	}
}

// commitGroup commits g with pebble.Sync and sets g.err. The caller holds
// the commit token. A commit error fail-stops the journal (RL-2): the
// group's callers and every later call get ErrFailStop, and the failed
// batch is never retried; groups built behind it are answered without
// being committed.
func (j *Journal) commitGroup(g *group) {
	if j.isDead() {
		g.err = j.failStopError("append")
		return
	}
	g.finishBatch()
	batchBytes := g.b.Len()
	if len(g.index) > 0 {
		j.visMu.Lock()
	}
	g.err = j.commitSync(g.b, "append")
	if g.err == nil {
		j.publish(g.lastSeq, g.at)
	}
	if len(g.index) > 0 {
		j.visMu.Unlock()
	}
	if g.err == nil {
		_ = g.b.Close()
		j.m.groups.Add(1)
		j.m.records.Add(uint64(g.n))
		j.m.bytes.Add(uint64(batchBytes))
	}
}

// finishBatch writes g's s/ keys and index entries into its batch, after
// its e/ keys. Within one batch the order changes nothing but the
// memtable's work: the keys are distinct, and index entries keep their
// order, so a later entry for an id still wins.
func (g *group) finishBatch() {
	start := 0
	for _, end := range g.sends {
		_ = g.b.Set(g.skeys[start:end], nil, nil)
		start = end
	}
	for _, e := range g.index {
		g.ikey = appendIndexKey(g.ikey[:0], e.ID)
		if e.Value == nil {
			_ = g.b.Delete(g.ikey, nil)
		} else {
			_ = g.b.Set(g.ikey, e.Value, nil)
		}
	}
}

// answer replies to every caller of g with g's outcome and recycles g.
func (j *Journal) answer(g *group) {
	for _, r := range g.reqs {
		r.err = g.err
		r.done <- struct{}{}
	}
	clear(g.reqs)
	clear(g.index)
	*g = group{reqs: g.reqs[:0], skeys: g.skeys[:0], sends: g.sends[:0], index: g.index[:0], ikey: g.ikey[:0]}
	groupPool.Put(g)
}

// commitSync commits b with pebble.Sync; any failure fail-stops. After a
// failure b is left alone: the pipeline is unusable and b may already be
// readable.
func (j *Journal) commitSync(b *pebble.Batch, op string) error {
	err := guard(func() error { return b.Commit(pebble.Sync) })
	j.m.fsyncs.Add(1)
	if err != nil {
		j.broken.Store(true)
		if !errors.Is(err, errFatal) {
			j.failStop(fmt.Errorf("journal: %s: commit: %w", op, pebbleError("commit", err)))
		}
		return j.failStopError(op)
	}
	return nil
}

// exclusive runs f between groups: it takes the commit token (waiting
// until ctx ends) so that no group commits meanwhile.
func (j *Journal) exclusive(ctx context.Context, op string, f func() error) error {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.writeBegin(op); err != nil {
		return err
	}
	select {
	case <-j.idle:
	case <-ctx.Done():
		return fmt.Errorf("journal: %s: waiting for the writer: %w", op, ctx.Err())
	case <-j.dead:
		return j.failStopError(op)
	}
	defer func() { j.idle <- struct{}{} }()
	if j.isDead() {
		return j.failStopError(op)
	}
	return f()
}

// commitOne commits a batch holding one x/ key operation (a snapshot write
// or delete) between groups.
func (j *Journal) commitOne(ctx context.Context, op string, fill func(b *pebble.Batch)) error {
	return j.exclusive(ctx, op, func() error {
		b := j.db.NewBatch()
		fill(b)
		size := b.Len()
		j.visMu.Lock()
		err := j.commitSync(b, op)
		j.visMu.Unlock()
		if err == nil {
			_ = b.Close()
			j.m.bytes.Add(uint64(size))
		}
		return err
	})
}

// Checkpoint writes a consistent copy of the journal to dir (on the same
// FS), which must not exist yet. It runs between groups, so the copy holds
// exactly the records acknowledged so far; the copy opens as a journal,
// read-only or read-write. On a read-only journal it copies the store as
// opened.
func (j *Journal) Checkpoint(dir string) error {
	run := func(opts ...pebble.CheckpointOption) error {
		err := guard(func() error { return j.db.Checkpoint(dir, opts...) })
		switch {
		case errors.Is(err, errFatal):
			return j.failStopError("checkpoint")
		case err != nil:
			return pebbleError("checkpoint to "+dir, err)
		}
		return nil
	}
	if j.opts.ReadOnly {
		j.closeMu.RLock()
		defer j.closeMu.RUnlock()
		if err := j.readBegin("checkpoint"); err != nil {
			return err
		}
		return run()
	}
	return j.exclusive(context.Background(), "checkpoint", func() error {
		return run(pebble.WithFlushedWAL())
	})
}

// WarmLead is how long before a commit whose latency matters
// [Journal.Warm] is best called: long enough for the warming sync to have
// returned by then, short enough that the device has not gone idle again.
// On the disks measured (docs/performance.md), a sync 1.5 ms after another
// took about two thirds of one after 10 ms of idle; 6 ms after, about half
// of that gain was gone; and with under 1 ms the warming sync was at times
// still running when the commit that mattered came, which then waited.
const WarmLead = 1500 * time.Microsecond

// Warm commits a synced write that holds no record and returns once it is
// synced. Some devices answer a sync that follows an idle spell markedly
// slower than one that follows another sync; an engine that knows a commit
// is about to matter, such as the start of a delayed job, which DL-7 puts
// between the job's instant and its handler, calls Warm [WarmLead] before
// it so that the commit meets a device that has just synced.
//
// The write is a Pebble log-data entry: it sets no key and takes no seq,
// so no reader, Verify or replay sees it. If a commit is in progress the
// device is busy already, and Warm returns at once having written
// nothing. It fails like an append: [ErrReadOnly], [ErrClosed] after
// Close, and a failed sync fail-stops the journal (RL-2).
func (j *Journal) Warm() error {
	if j.opts.ReadOnly {
		return fmt.Errorf("journal: warm: %w", ErrReadOnly)
	}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.writeBegin("warm"); err != nil {
		return err
	}
	select {
	case <-j.idle:
	default:
		return nil
	}
	defer func() { j.idle <- struct{}{} }()
	if j.isDead() {
		return j.failStopError("warm")
	}
	b := j.db.NewBatch()
	_ = b.LogData(nil, nil)
	if err := j.commitSync(b, "warm"); err != nil {
		return err
	}
	_ = b.Close()
	j.m.warms.Add(1)
	return nil
}
