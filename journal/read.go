package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/journal/record"
)

// recordError turns a record check failure at seq into a *CorruptError.
// stream is the stream the caller knows independently of the record's
// bytes (a stream scan's id); empty means look it up in the s/ index.
// A record of a newer envelope version is not corruption: its error wraps
// record.ErrNewerVersion instead. The caller holds closeMu shared.
func (j *Journal) recordError(seq uint64, stream string, err error) error {
	if errors.Is(err, record.ErrNewerVersion) {
		return fmt.Errorf("journal: read seq %d: %w", seq, err)
	}
	reason := "record check"
	var re *record.RecordError
	if errors.As(err, &re) {
		reason = re.Op
		if re.Op == "size" {
			if r, ok := j.overCapReason(seq); ok {
				reason = r
			}
		}
	}
	if stream == "" {
		stream = j.streamOf(seq)
	}
	return corruptAt(seq, stream, reason, err)
}

// streamOf returns the stream whose s/ index names seq, or "" if none
// does. It scans the whole index: for error paths only.
func (j *Journal) streamOf(seq uint64) string {
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefixStream), UpperBound: prefixEnd(prefixStream)})
	if err != nil {
		return ""
	}
	defer func() { _ = it.Close() }()
	for ok := it.First(); ok; ok = it.Next() {
		if id, s, ok := parseStreamKey(it.Key()); ok && s == seq {
			return string(id)
		}
	}
	return ""
}

// Get returns acknowledged record seq after the per-record checks of
// spec/reliability.md §4.2 (not the chain, which needs its neighbour: use
// Scan or Verify). Errors wrap [ErrNotFound] for seq 0 or a seq above
// LastSeq, or are a [*CorruptError].
func (j *Journal) Get(seq uint64) (record.Record, error) {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("get"); err != nil {
		return record.Record{}, err
	}
	if last := j.LastSeq(); seq == 0 || seq > last {
		return record.Record{}, fmt.Errorf("journal: get seq %d: %w (last acknowledged seq is %d)", seq, ErrNotFound, last)
	}
	val, closer, err := j.db.Get(record.LogKey(seq))
	if errors.Is(err, pebble.ErrNotFound) {
		return record.Record{}, corruptAt(seq, j.streamOf(seq), "record missing", nil)
	}
	if err != nil {
		return record.Record{}, pebbleError(fmt.Sprintf("get seq %d", seq), err)
	}
	defer func() { _ = closer.Close() }()
	env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
	if err != nil {
		return record.Record{}, j.recordError(seq, "", err)
	}
	key := appendStreamKey(nil, env.Stream, seq)
	_, sc, err := j.db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return record.Record{}, j.missingIndex(seq, env.Stream)
	case err != nil:
		return record.Record{}, pebbleError(fmt.Sprintf("get seq %d", seq), err)
	}
	_ = sc.Close()
	rec, err := env.Decode()
	if err != nil {
		return record.Record{}, j.recordError(seq, env.Stream, err)
	}
	return rec, nil
}

// missingIndex reports a record (which passed its checksum, so its stream
// is trusted) without its s/ entry.
func (j *Journal) missingIndex(seq uint64, stream string) error {
	reason := "record has no s/ index entry"
	if other := j.streamOf(seq); other != "" {
		reason = fmt.Sprintf("record names stream %q, its s/ index entry names %q", stream, other)
	}
	return corruptAt(seq, stream, reason, nil)
}

// Index returns the terminal-index value of id set by
// [Journal.AppendIndexed], and whether there is one. It serves
// acknowledged values only.
func (j *Journal) Index(id string) ([]byte, bool, error) {
	if err := record.ValidateStream(id); err != nil {
		return nil, false, fmt.Errorf("journal: index %q: %w", id, err)
	}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("index"); err != nil {
		return nil, false, err
	}
	j.visMu.RLock()
	val, closer, err := j.db.Get(indexKey(id))
	j.visMu.RUnlock()
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, pebbleError(fmt.Sprintf("index %q", id), err)
	}
	defer func() { _ = closer.Close() }()
	if len(val) > j.opts.RecordBytesMax {
		return nil, false, &CorruptError{Stream: id, Reason: fmt.Sprintf("index value is %d bytes, over RecordBytesMax", len(val))}
	}
	return bytes.Clone(val), true, nil
}

// Iter iterates records in seq order, checking each one (spec §4.2). It
// holds a Pebble iterator, never the whole range. It is not safe for
// concurrent use; Close it when done. Typical use:
//
//	it := j.Scan(from, math.MaxUint64)
//	defer it.Close()
//	for it.Next() {
//		apply(it.Record())
//	}
//	if err := it.Err(); err != nil { ... } // a *CorruptError names seq and stream
//
// An error ends the iteration: no record is skipped (RL-5).
type Iter struct {
	j      *Journal
	stream string // "" for the global log
	last   uint64 // inclusive, capped at the acknowledged seq
	it     *pebble.Iterator
	aux    *pebble.Iterator // s/ lookups (global), e/ lookups (stream)

	next    uint64 // global scan: the seq expected next
	prevSum uint32
	prevAt  int64
	key     []byte

	env     record.Envelope
	rec     record.Record
	err     error
	started bool
	done    bool

	// quarantine is set by ScanQuarantining: damaged is the current
	// record's damage, and skipChain skips the chain check of the record
	// after one whose bytes failed their checks.
	quarantine bool
	damaged    *CorruptError
	skipChain  bool
}

// Scan iterates the global log over seqs from..to (inclusive; from 0 means
// 1), capped at the LastSeq when Scan is called. Besides each record's
// own checks it checks, in order, seq continuity (a missing seq is an
// error), prevSum against the previous record's crc (the record before
// from included), At monotone, and that the record's s/ entry exists.
func (j *Journal) Scan(from, to uint64) *Iter {
	if from == 0 {
		from = 1
	}
	it := &Iter{j: j, next: from, prevAt: math.MinInt64}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("scan"); err != nil {
		it.err, it.done = err, true
		return it
	}
	it.last = min(to, j.LastSeq())
	if from > it.last {
		it.done = true
		return it
	}
	if from == 1 {
		it.prevSum = j.chainSum
	} else {
		val, closer, err := j.db.Get(record.LogKey(from - 1))
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			it.err = corruptAt(from-1, j.streamOf(from-1), "record missing", nil)
		case err != nil:
			it.err = pebbleError("scan", err)
		default:
			env, perr := record.ParseEnvelope(from-1, val, j.opts.RecordBytesMax)
			if perr != nil {
				it.err = j.recordError(from-1, "", perr)
			}
			it.prevSum, it.prevAt = env.Sum, env.At
			_ = closer.Close()
		}
		if it.err != nil {
			it.done = true
			return it
		}
	}
	it.open(
		&pebble.IterOptions{LowerBound: record.LogKey(from), UpperBound: record.LogKey(it.last + 1)},
		&pebble.IterOptions{LowerBound: []byte(prefixStream), UpperBound: prefixEnd(prefixStream)})
	return it
}

// ScanQuarantining is [Journal.Scan] for a recovery that quarantines
// damaged streams instead of refusing the whole journal (spec/reliability.md
// §4.4). A record that fails its own checks (§4.2) and that the s/ index
// attributes to a stream other than [record.EngineStream] does not end the
// iteration: Next returns true with [Iter.Damaged] set to its
// *CorruptError and [Iter.Record] zero, and the chain check between it and
// the next record is skipped, since a break there is attributed to it.
// Everything else still ends the iteration with an error: damage in the
// engine stream, a record with no s/ entry, a missing record, a chain
// break between two records that each pass their checks, an At that goes
// back, a record of a newer envelope version.
func (j *Journal) ScanQuarantining(from, to uint64) *Iter {
	it := j.Scan(from, to)
	it.quarantine = true
	return it
}

// ScanStream iterates the records of one stream with seq >= from, in seq
// order, through the s/ index, capped at the LastSeq when it is called.
// Each record is checked (§4.2) and must name the stream; At must not
// decrease.
func (j *Journal) ScanStream(id string, from uint64) *Iter {
	it := &Iter{j: j, stream: id, prevAt: math.MinInt64}
	if err := record.ValidateStream(id); err != nil {
		it.err, it.done = fmt.Errorf("journal: scan stream %q: %w", id, err), true
		return it
	}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("scan stream"); err != nil {
		it.err, it.done = err, true
		return it
	}
	it.last = j.LastSeq()
	if from > it.last {
		it.done = true
		return it
	}
	it.open(
		&pebble.IterOptions{LowerBound: appendStreamKey(nil, id, from), UpperBound: appendStreamKey(nil, id, it.last+1)},
		&pebble.IterOptions{LowerBound: []byte(prefixLog), UpperBound: prefixEnd(prefixLog)})
	return it
}

// open creates the two Pebble iterators; the caller holds closeMu shared.
func (it *Iter) open(main, aux *pebble.IterOptions) {
	var err error
	if it.it, err = it.j.db.NewIter(main); err == nil {
		if it.aux, err = it.j.db.NewIter(aux); err != nil {
			_ = it.it.Close()
			it.it = nil
		}
	}
	if err != nil {
		it.err, it.done = pebbleError("scan", err), true
		return
	}
	it.j.register(it)
}

// Next advances to the next record and reports whether there is one. It
// returns false at the end or on an error; see Err.
func (it *Iter) Next() bool {
	if it.done {
		return false
	}
	j := it.j
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("scan"); err != nil {
		it.err, it.done = err, true
		return false
	}
	it.damaged = nil
	var ok bool
	if !it.started {
		it.started = true
		ok = it.it.First()
	} else {
		ok = it.it.Next()
	}
	if !ok {
		if err := it.it.Error(); err != nil {
			it.err = pebbleError("scan", err)
		} else if it.stream == "" && it.next <= it.last {
			it.err = corruptAt(it.next, j.streamOf(it.next), "record missing", nil)
		}
		it.done = true
		return false
	}
	var err error
	if it.stream == "" {
		err = it.stepLog()
	} else {
		err = it.stepStream()
	}
	if err != nil {
		it.err, it.done = err, true
		return false
	}
	return true
}

func (it *Iter) stepLog() error {
	j := it.j
	seq, ok := record.ParseLogKey(it.it.Key())
	if !ok {
		return corruptAt(it.next, j.streamOf(it.next), fmt.Sprintf("malformed log key %x", it.it.Key()), nil)
	}
	if seq != it.next {
		return corruptAt(it.next, j.streamOf(it.next), fmt.Sprintf("record missing (next present is seq %d)", seq), nil)
	}
	val, err := it.it.ValueAndErr()
	if err != nil {
		return pebbleError("scan", err)
	}
	env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
	if err != nil {
		if err := it.damage(seq, j.recordError(seq, "", err)); err != nil {
			return err
		}
		it.skipChain = true // its own crc is not to be trusted
		return nil
	}
	if it.skipChain {
		it.skipChain = false
	} else if env.PrevSum != it.prevSum {
		return corruptAt(seq, env.Stream, fmt.Sprintf("chain: prevSum %08x, record %d has crc %08x", env.PrevSum, seq-1, it.prevSum), nil)
	}
	if env.At < it.prevAt {
		return corruptAt(seq, env.Stream, fmt.Sprintf("at %d before the previous record's %d", env.At, it.prevAt), nil)
	}
	it.key = appendStreamKey(it.key[:0], env.Stream, seq)
	if !it.aux.SeekGE(it.key) || !bytes.Equal(it.aux.Key(), it.key) {
		if err := it.aux.Error(); err != nil {
			return pebbleError("scan", err)
		}
		return j.missingIndex(seq, env.Stream)
	}
	return it.accept(env)
}

func (it *Iter) stepStream() error {
	j := it.j
	id, seq, ok := parseStreamKey(it.it.Key())
	if !ok || string(id) != it.stream {
		return corruptAt(0, it.stream, fmt.Sprintf("malformed s/ key %x", it.it.Key()), nil)
	}
	key := record.LogKey(seq)
	if !it.aux.SeekGE(key) || !bytes.Equal(it.aux.Key(), key) {
		if err := it.aux.Error(); err != nil {
			return pebbleError("scan stream", err)
		}
		return corruptAt(seq, it.stream, "s/ index entry without its record", nil)
	}
	val, err := it.aux.ValueAndErr()
	if err != nil {
		return pebbleError("scan stream", err)
	}
	env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
	if err != nil {
		return j.recordError(seq, it.stream, err)
	}
	if env.Stream != it.stream {
		return corruptAt(seq, it.stream, fmt.Sprintf("s/ index entry names stream %q, record names %q", it.stream, env.Stream), nil)
	}
	if env.At < it.prevAt {
		return corruptAt(seq, it.stream, fmt.Sprintf("at %d before the stream's previous record's %d", env.At, it.prevAt), nil)
	}
	return it.accept(env)
}

func (it *Iter) accept(env record.Envelope) error {
	rec, err := env.Decode()
	if err != nil {
		err = it.j.recordError(env.Seq, env.Stream, err)
		if it.stream != "" {
			return err
		}
		if err := it.damage(env.Seq, err); err != nil {
			return err
		}
		// Its checksum held: the chain goes on from it.
		it.prevSum, it.prevAt = env.Sum, env.At
		return nil
	}
	it.env, it.rec = env, rec
	it.prevSum, it.prevAt, it.next = env.Sum, env.At, env.Seq+1
	return nil
}

// damage makes err, the damage of record seq, the current item of a
// quarantining scan, when §4.4 lets its stream be quarantined; otherwise
// it returns err, which ends the iteration.
func (it *Iter) damage(seq uint64, err error) error {
	var (
		ce *CorruptError
		re *record.RecordError
	)
	if !it.quarantine || !errors.As(err, &ce) || ce.Stream == "" || ce.Stream == record.EngineStream ||
		errors.As(err, &re) && re.Op == "size" {
		// A record over RecordBytesMax is refused whole: most often
		// the option was lowered below what the journal holds.
		return err
	}
	it.damaged, it.env, it.rec = ce, record.Envelope{}, record.Record{}
	it.next = seq + 1
	return nil
}

// Damaged returns the current record's damage during a
// [Journal.ScanQuarantining] scan, or nil when the record is sound.
func (it *Iter) Damaged() *CorruptError { return it.damaged }

// Damage is [Iter.Damaged] as replay.FoldQuarantining reads it: the
// damaged record's seq and stream, and its *CorruptError; a nil error
// when the record is sound.
func (it *Iter) Damage() (seq uint64, stream string, err error) {
	if it.damaged == nil {
		return 0, "", nil
	}
	return it.damaged.Seq, it.damaged.Stream, it.damaged
}

// Record returns the current record (valid after Next returned true; it
// does not alias journal memory).
func (it *Iter) Record() record.Record { return it.rec }

// Envelope returns the current record's checked envelope. Its Payload
// aliases Pebble memory and is valid only until the next call to Next or
// Close.
func (it *Iter) Envelope() record.Envelope { return it.env }

// Err returns the error that ended the iteration, or nil at a clean end.
func (it *Iter) Err() error { return it.err }

// Close releases the iterator and returns Err. It is idempotent.
func (it *Iter) Close() error {
	j := it.j
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	it.done = true
	if it.it == nil {
		return it.err
	}
	j.unregister(it)
	if j.closed || j.isDead() {
		it.it, it.aux = nil, nil // no further call into a failed store
		return it.err
	}
	it.release(nil)
	return it.err
}

func (it *Iter) release(err error) {
	if !it.done && it.err == nil {
		it.err = err
	}
	if it.it != nil {
		_ = it.it.Close()
		_ = it.aux.Close()
		it.it, it.aux = nil, nil
	}
	it.done = true
}
