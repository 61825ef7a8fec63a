package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

type reqKind uint8

const (
	reqAppend reqKind = iota
	reqSnapshot
	reqDeleteSnapshots
	reqCheckpoint
)

// request is one unit of work for the writer goroutine. The caller fills
// it, the writer sets first and err and signals done (buffered, so the
// writer never blocks on a caller).
type request struct {
	kind  reqKind
	recs  []record.Prepared
	index []IndexEntry
	bytes int    // batch bytes this request adds
	key   []byte // snapshot key, or the start of a delete range
	value []byte // snapshot value, or the end of a delete range
	dir   string // checkpoint destination

	first uint64
	err   error
	done  chan struct{}
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

func getRequest(kind reqKind) *request {
	r := requestPool.Get().(*request)
	r.kind = kind
	return r
}

// putRequest recycles r. Only a caller that received r.done may call it:
// afterwards the writer holds no reference.
func putRequest(r *request) {
	clear(r.recs)
	r.recs = r.recs[:0]
	r.index, r.key, r.value, r.dir, r.err, r.first, r.bytes = nil, nil, nil, "", nil, 0, 0
	requestPool.Put(r)
}

// writerState belongs to the builder goroutine (and to Open before it
// starts): the last record assigned to a group, which runs ahead of the
// last acknowledged one by at most the group being committed.
type writerState struct {
	lastSeq uint64
	lastSum uint32
	lastAt  int64
	key     []byte
}

// group is one batch on its way through the writer: built by the builder,
// committed and answered by the committer. A group with special set
// carries one non-append request instead.
type group struct {
	b        *pebble.Batch
	reqs     []*request
	n, size  int // records, batch bytes budgeted
	hasIndex bool
	lastSeq  uint64
	at       int64
	special  *request
}

var groupPool = sync.Pool{New: func() any { return &group{} }}

// batchOverheadPerRecord bounds Pebble's per-entry batch framing (kind,
// two uvarint lengths) plus the s/ key of a record.
const batchOverheadPerRecord = 1 + 2*5 + len(prefixStream) + 1 + record.StreamIDBytesMax + 8 + 1 + 2*5

// Append appends recs as one atomic append (RL-4) and returns their seqs,
// which are consecutive. Each record is validated and encoded in the
// caller's goroutine before it joins a group, so a bad record fails only
// its own append, with an error wrapping [record.ErrInvalid] or
// [record.ErrTooLarge]; an append larger than GroupRecordsMax or
// GroupBytesMax is ErrTooLarge.
//
// If ctx ends while the call waits for queue space, Append returns ctx's
// error and appends nothing. Once queued, the append cannot be withdrawn:
// Append returns only after its group's sync (the seqs) or a fail-stop
// ([ErrFailStop], outcome unknown).
func (j *Journal) Append(ctx context.Context, recs ...record.Record) ([]uint64, error) {
	return j.AppendIndexed(ctx, nil, recs...)
}

// AppendIndexed is [Journal.Append] that also applies index entries in the
// same batch as the records. Index values are not copied before the
// append returns: do not modify them meanwhile.
func (j *Journal) AppendIndexed(ctx context.Context, index []IndexEntry, recs ...record.Record) ([]uint64, error) {
	if j.opts.ReadOnly {
		return nil, fmt.Errorf("journal: append: %w", ErrReadOnly)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("journal: append: %w: no records", record.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("journal: append of %d records to stream %q: %w", len(recs), recs[0].Stream, err)
	}
	if len(recs) > j.opts.GroupRecordsMax {
		return nil, fmt.Errorf("journal: append: %w: %d records, GroupRecordsMax is %d",
			record.ErrTooLarge, len(recs), j.opts.GroupRecordsMax)
	}
	r := getRequest(reqAppend)
	size := 0
	for i, rec := range recs {
		p, err := record.Prepare(rec, j.opts.RecordBytesMax)
		if err != nil {
			putRequest(r)
			return nil, fmt.Errorf("journal: append record %d of %d (stream %q): %w", i+1, len(recs), rec.Stream, err)
		}
		r.recs = append(r.recs, p)
		size += record.LogKeyBytes + p.Size() + batchOverheadPerRecord
	}
	for i, e := range index {
		if err := record.ValidateStream(e.ID); err != nil {
			putRequest(r)
			return nil, fmt.Errorf("journal: append index entry %d of %d: %w", i+1, len(index), err)
		}
		if len(e.Value) > j.opts.RecordBytesMax {
			putRequest(r)
			return nil, fmt.Errorf("journal: append index entry %q: %w: value is %d bytes, RecordBytesMax is %d",
				e.ID, record.ErrTooLarge, len(e.Value), j.opts.RecordBytesMax)
		}
		size += len(prefixIndex) + 1 + len(e.ID) + len(e.Value) + 1 + 2*5
	}
	if size > j.opts.GroupBytesMax {
		putRequest(r)
		return nil, fmt.Errorf("journal: append of %d records: %w: %d batch bytes, GroupBytesMax is %d",
			len(recs), record.ErrTooLarge, size, j.opts.GroupBytesMax)
	}
	r.index, r.bytes = index, size
	if err := j.enqueue(ctx, r, "append"); err != nil {
		putRequest(r)
		return nil, err
	}
	if err := j.await(r, "append"); err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(recs))
	for i := range seqs {
		seqs[i] = r.first + uint64(i)
	}
	putRequest(r)
	return seqs, nil
}

// enqueue hands r to the writer, waiting for queue space until ctx ends.
func (j *Journal) enqueue(ctx context.Context, r *request, op string) error {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return fmt.Errorf("journal: %s: %w", op, ErrClosed)
	}
	if j.isDead() {
		return j.failStopError(op)
	}
	select {
	case j.reqs <- r:
		return nil
	default:
	}
	select {
	case j.reqs <- r:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("journal: %s: waiting for queue space: %w", op, ctx.Err())
	case <-j.dead:
		return j.failStopError(op)
	}
}

// await waits for the writer's answer to a queued request. On a fail-stop
// it returns at once (the outcome is unknown either way) unless the answer
// is already there; r is then abandoned, never recycled.
func (j *Journal) await(r *request, op string) error {
	select {
	case <-r.done:
	case <-j.dead:
		select {
		case <-r.done:
		default:
			return j.failStopError(op)
		}
	}
	if r.err != nil {
		err := r.err
		putRequest(r)
		return err
	}
	return nil
}

// run is the writer: a builder goroutine (this one) and a committer
// goroutine, so that the next group is gathered and encoded while the
// current one syncs. The builder takes requests in queue order, assigns
// consecutive seqs, stamps At and chains prevSum as it adds each append to
// the group it is building, and hands that group to the committer as soon
// as the committer is free (up to GroupRecordsMax records and
// GroupBytesMax bytes). The committer commits groups one at a time, in
// order, each as one batch with pebble.Sync, and only then answers their
// callers. Other requests (snapshots, checkpoints) pass between groups.
// Seq order is therefore commit order (RL-1, RL-3), and a group is never
// committed before the one holding the seqs below it was acknowledged.
func (j *Journal) run() {
	items := make(chan *group) // unbuffered: a send succeeds when the committer is free
	committed := make(chan struct{})
	go j.commitLoop(items, committed)
	defer func() {
		close(items)
		<-committed
		close(j.writerDone)
	}()
	var cur *group      // the group being built
	var pending *request // taken from the queue but not in cur yet
	reqs := j.reqs
	for {
		if pending != nil && cur == nil {
			r := pending
			pending = nil
			if j.isDead() {
				j.reply(r, j.failStopError(opName(r.kind)))
				continue
			}
			if r.kind != reqAppend {
				items <- &group{special: r}
				continue
			}
			cur = j.newGroup()
			j.addToGroup(cur, r)
		}
		if cur == nil {
			if reqs == nil {
				return
			}
			r, ok := <-reqs
			if !ok {
				return
			}
			j.m.taken.Add(1)
			pending = r
			continue
		}
		recv := reqs
		if pending != nil || cur.n >= j.opts.GroupRecordsMax {
			recv = nil // cur is closed to new requests: wait for the committer
		}
		select {
		case items <- cur:
			cur = nil
		case r, ok := <-recv:
			if ok {
				j.m.taken.Add(1)
			}
			switch {
			case !ok:
				reqs = nil
			case r.kind == reqAppend && cur.n+len(r.recs) <= j.opts.GroupRecordsMax && cur.size+r.bytes <= j.opts.GroupBytesMax:
				j.addToGroup(cur, r)
			default:
				pending = r
			}
		}
	}
}

func opName(k reqKind) string {
	switch k {
	case reqAppend:
		return "append"
	case reqSnapshot:
		return "write snapshot"
	case reqDeleteSnapshots:
		return "delete snapshots"
	default:
		return "checkpoint"
	}
}

func (j *Journal) reply(r *request, err error) {
	r.err = err
	r.done <- struct{}{}
}

func (j *Journal) newGroup() *group {
	g := groupPool.Get().(*group)
	g.b = j.db.NewBatchWithSize(64 << 10)
	g.at = j.clock.Now().UnixNano()
	if g.at < j.w.lastAt {
		g.at = j.w.lastAt // RL-9: journal time is monotone
	}
	return g
}

// addToGroup assigns seqs to r's records and writes them (e/ and s/ keys)
// and r's index entries into g's batch.
func (j *Journal) addToGroup(g *group, r *request) {
	w := &j.w
	if j.isDead() {
		j.reply(r, j.failStopError("append"))
		return
	}
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
		w.key = appendStreamKey(w.key[:0], p.Stream, seq)
		_ = g.b.Set(w.key, nil, nil)
	}
	for _, e := range r.index {
		g.hasIndex = true
		if e.Value == nil {
			_ = g.b.Delete(indexKey(e.ID), nil)
		} else {
			_ = g.b.Set(indexKey(e.ID), e.Value, nil)
		}
	}
	w.lastSeq, w.lastSum, w.lastAt = seq, sum, g.at
	g.lastSeq = seq
	g.reqs = append(g.reqs, r)
	g.n += len(r.recs)
	g.size += r.bytes
}

// commitLoop is the committer goroutine. A commit error fail-stops the
// journal (RL-2): the group's callers and every later call get
// ErrFailStop, the failed batch is never retried, and groups already built
// behind it are answered without being committed.
func (j *Journal) commitLoop(items <-chan *group, done chan<- struct{}) {
	defer close(done)
	for g := range items {
		if g.special != nil {
			if j.isDead() {
				j.reply(g.special, j.failStopError(opName(g.special.kind)))
			} else {
				j.runOther(g.special)
			}
			continue
		}
		if len(g.reqs) == 0 { // every request was refused while building
			_ = g.b.Close()
			j.putGroup(g)
			continue
		}
		var err error
		if j.isDead() {
			err = j.failStopError("append")
		} else {
			batchBytes := g.b.Len()
			if g.hasIndex {
				j.visMu.Lock()
			}
			err = j.commitSync(g.b, "append")
			if err == nil {
				j.publish(g.lastSeq, g.at)
			}
			if g.hasIndex {
				j.visMu.Unlock()
			}
			if err == nil {
				_ = g.b.Close()
				j.m.groups.Add(1)
				j.m.records.Add(uint64(g.n))
				j.m.bytes.Add(uint64(batchBytes))
			}
		}
		j.answerGroup(g.reqs, err)
		j.putGroup(g)
	}
}

func (j *Journal) putGroup(g *group) {
	clear(g.reqs)
	*g = group{reqs: g.reqs[:0]}
	groupPool.Put(g)
}

func (j *Journal) answerGroup(g []*request, err error) {
	for _, r := range g {
		j.reply(r, err)
	}
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

// runOther serves a non-append request between groups.
func (j *Journal) runOther(r *request) {
	switch r.kind {
	case reqSnapshot, reqDeleteSnapshots:
		b := j.db.NewBatch()
		if r.kind == reqSnapshot {
			_ = b.Set(r.key, r.value, nil)
		} else {
			_ = b.DeleteRange(r.key, r.value, nil)
		}
		size := b.Len()
		j.visMu.Lock()
		err := j.commitSync(b, opName(r.kind))
		j.visMu.Unlock()
		if err == nil {
			_ = b.Close()
			j.m.bytes.Add(uint64(size))
		}
		j.reply(r, err)
	case reqCheckpoint:
		err := guard(func() error { return j.db.Checkpoint(r.dir, pebble.WithFlushedWAL()) })
		switch {
		case errors.Is(err, errFatal):
			err = j.failStopError("checkpoint")
		case err != nil:
			err = pebbleError("checkpoint to "+r.dir, err)
		}
		j.reply(r, err)
	}
}

// Checkpoint writes a consistent copy of the journal to dir (on the same
// FS), which must not exist yet. It runs on the writer goroutine between
// groups, so the copy holds exactly the records acknowledged so far; the
// copy opens as a journal, read-only or read-write. On a read-only journal
// it copies the store as opened.
func (j *Journal) Checkpoint(dir string) error {
	if j.opts.ReadOnly {
		j.closeMu.RLock()
		defer j.closeMu.RUnlock()
		if err := j.readBegin("checkpoint"); err != nil {
			return err
		}
		if err := guard(func() error { return j.db.Checkpoint(dir) }); err != nil {
			if errors.Is(err, errFatal) {
				return j.failStopError("checkpoint")
			}
			return pebbleError("checkpoint to "+dir, err)
		}
		return nil
	}
	r := getRequest(reqCheckpoint)
	r.dir = dir
	return j.submit(context.Background(), r)
}

// submit queues a non-append request and waits for its answer.
func (j *Journal) submit(ctx context.Context, r *request) error {
	op := opName(r.kind)
	if err := j.enqueue(ctx, r, op); err != nil {
		putRequest(r)
		return err
	}
	if err := j.await(r, op); err != nil {
		return err
	}
	putRequest(r)
	return nil
}
