package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/journal/record"
)

// Snapshot envelope (spec/reliability.md §4.3), stored under x/+u64be(seq):
//
//	magic u16 | version u8 | seq u64 | recordSum u32 | stateLen uvarint | state | crc u32
//
// recordSum is the crc of record seq, so a snapshot cannot outlive a
// rewritten log; crc is CRC32C over the key and every byte before it.
const (
	snapMagic       uint16 = 0x5153 // "QS"
	snapVersion     uint8  = 1
	snapHeaderBytes        = 2 + 1 + 8 + 4
)

func appendSnapEnvelope(dst []byte, seq uint64, recordSum uint32, state []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, snapMagic)
	dst = append(dst, snapVersion)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, recordSum)
	dst = binary.AppendUvarint(dst, uint64(len(state)))
	dst = append(dst, state...)
	crc := record.Checksum(append(appendSnapKey(nil, seq), dst[start:]...))
	return binary.BigEndian.AppendUint32(dst, crc)
}

// parseSnapEnvelope checks a snapshot value stored under the key of seq
// and returns its record sum and state (aliasing val).
func parseSnapEnvelope(seq uint64, val []byte, bytesMax int) (uint32, []byte, error) {
	if len(val) > bytesMax+snapHeaderBytes+10+4 {
		return 0, nil, fmt.Errorf("value is %d bytes, over SnapshotBytesMax", len(val))
	}
	if len(val) < snapHeaderBytes+1+4 {
		return 0, nil, fmt.Errorf("value is %d bytes, shorter than the minimum", len(val))
	}
	body := val[:len(val)-4]
	want := binary.BigEndian.Uint32(val[len(val)-4:])
	if got := record.Checksum(append(appendSnapKey(nil, seq), body...)); got != want {
		return 0, nil, fmt.Errorf("crc %08x, stored %08x", got, want)
	}
	if m := binary.BigEndian.Uint16(body); m != snapMagic {
		return 0, nil, fmt.Errorf("magic %04x", m)
	}
	if v := body[2]; v != snapVersion {
		if v > snapVersion {
			return 0, nil, fmt.Errorf("%w: snapshot version %d", record.ErrNewerVersion, v)
		}
		return 0, nil, fmt.Errorf("snapshot version %d", v)
	}
	if s := binary.BigEndian.Uint64(body[3:11]); s != seq {
		return 0, nil, fmt.Errorf("header seq %d under key seq %d", s, seq)
	}
	sum := binary.BigEndian.Uint32(body[11:15])
	rest := body[snapHeaderBytes:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n != uint64(len(rest)-w) || n > uint64(bytesMax) {
		return 0, nil, fmt.Errorf("state length does not match the bytes before the crc")
	}
	return sum, rest[w:], nil
}

// WriteSnapshot stores state as the snapshot after record seq, which must
// be acknowledged. It is committed between groups and synced like an
// append; a commit failure fail-stops. The caller is expected to have
// verified state (e.g. by folding the tail again, spec §4.3). Errors wrap
// [ErrNotFound] for an unacknowledged seq, [record.ErrTooLarge] for a state
// over SnapshotBytesMax, [*CorruptError] if record seq fails its check.
func (j *Journal) WriteSnapshot(ctx context.Context, seq uint64, state []byte) error {
	if j.opts.ReadOnly {
		return fmt.Errorf("journal: write snapshot: %w", ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("journal: write snapshot at seq %d: %w", seq, err)
	}
	if len(state) > j.opts.SnapshotBytesMax {
		return fmt.Errorf("journal: write snapshot at seq %d: %w: %d bytes, SnapshotBytesMax is %d",
			seq, record.ErrTooLarge, len(state), j.opts.SnapshotBytesMax)
	}
	env, err := j.envelopeAt(seq, "write snapshot")
	if err != nil {
		return err
	}
	key := appendSnapKey(nil, seq)
	val := appendSnapEnvelope(make([]byte, 0, snapHeaderBytes+10+len(state)+4), seq, env.Sum, state)
	return j.commitOne(ctx, "write snapshot", func(b *pebble.Batch) { _ = b.Set(key, val, nil) })
}

// envelopeAt reads and checks the envelope of acknowledged record seq.
func (j *Journal) envelopeAt(seq uint64, op string) (record.Envelope, error) {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin(op); err != nil {
		return record.Envelope{}, err
	}
	if last := j.LastSeq(); seq == 0 || seq > last {
		return record.Envelope{}, fmt.Errorf("journal: %s: seq %d: %w (last acknowledged seq is %d)", op, seq, ErrNotFound, last)
	}
	val, closer, err := j.db.Get(record.LogKey(seq))
	if errors.Is(err, pebble.ErrNotFound) {
		return record.Envelope{}, corruptAt(seq, j.streamOf(seq), "record missing", nil)
	}
	if err != nil {
		return record.Envelope{}, pebbleError(op, err)
	}
	defer func() { _ = closer.Close() }()
	env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
	if err != nil {
		return record.Envelope{}, j.recordError(seq, "", err)
	}
	env.Payload = nil // aliases val
	return env, nil
}

// DeleteSnapshotsBefore deletes every snapshot at a seq below seq, so that
// snapshots stay bounded. Like WriteSnapshot it commits between groups.
func (j *Journal) DeleteSnapshotsBefore(ctx context.Context, seq uint64) error {
	if j.opts.ReadOnly {
		return fmt.Errorf("journal: delete snapshots: %w", ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("journal: delete snapshots before seq %d: %w", seq, err)
	}
	return j.commitOne(ctx, "delete snapshots", func(b *pebble.Batch) {
		_ = b.DeleteRange(appendSnapKey(nil, 0), appendSnapKey(nil, seq), nil)
	})
}

// Snapshot is one stored snapshot. Err is nil for a snapshot that passed
// its checks; otherwise it is a [*CorruptError] (Seq = the snapshot's seq)
// saying why the snapshot must be ignored, and State is nil. A bad
// snapshot is a cache miss: log it and fall back to the next, older one.
type Snapshot struct {
	Seq   uint64
	State []byte
	Err   error
}

// SnapshotIter walks the snapshots newest first. Use it like [Iter]:
//
//	it := j.Snapshots()
//	defer it.Close()
//	for it.Next() {
//		s := it.Snapshot()
//		if s.Err != nil {
//			log.Printf("snapshot at seq %d ignored: %v", s.Seq, s.Err)
//			continue
//		}
//		return s // the newest valid one
//	}
//	return it.Err() // nil: no usable snapshot, replay from seq 1
type SnapshotIter struct {
	j    *Journal
	it   *pebble.Iterator
	cur  Snapshot
	err  error
	init bool
	done bool
}

// Snapshots returns an iterator over the acknowledged snapshots, newest
// first. Each one is checked (envelope, own crc, and the crc of record
// Seq) as the iterator reaches it; only one state is held at a time.
func (j *Journal) Snapshots() *SnapshotIter {
	s := &SnapshotIter{j: j}
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("snapshots"); err != nil {
		s.err, s.done = err, true
		return s
	}
	j.visMu.RLock()
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefixSnap), UpperBound: prefixEnd(prefixSnap)})
	j.visMu.RUnlock()
	if err != nil {
		s.err, s.done = pebbleError("snapshots", err), true
		return s
	}
	s.it = it
	j.register(s)
	return s
}

// Next moves to the next older snapshot and reports whether there is one.
func (s *SnapshotIter) Next() bool {
	if s.done {
		return false
	}
	j := s.j
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if err := j.readBegin("snapshots"); err != nil {
		s.err, s.done = err, true
		return false
	}
	var ok bool
	if !s.init {
		s.init = true
		ok = s.it.Last()
	} else {
		ok = s.it.Prev()
	}
	if !ok {
		if err := s.it.Error(); err != nil {
			s.err = pebbleError("snapshots", err)
		}
		s.done = true
		return false
	}
	s.cur = j.checkSnapshot(s.it)
	return true
}

// checkSnapshot checks the snapshot under the iterator's position.
func (j *Journal) checkSnapshot(it *pebble.Iterator) Snapshot {
	seq, ok := parseSnapKey(it.Key())
	if !ok {
		return Snapshot{Err: &CorruptError{Reason: fmt.Sprintf("malformed snapshot key %x", it.Key())}}
	}
	bad := func(reason string, err error) Snapshot {
		return Snapshot{Seq: seq, Err: &CorruptError{Seq: seq, Reason: "snapshot: " + reason, Err: err}}
	}
	val, err := it.ValueAndErr()
	if err != nil {
		return Snapshot{Seq: seq, Err: pebbleError("snapshot", err)}
	}
	sum, state, err := parseSnapEnvelope(seq, val, j.opts.SnapshotBytesMax)
	if err != nil {
		return bad("envelope", fmt.Errorf("%w: %w", ErrCorrupt, err))
	}
	rv, closer, err := j.db.Get(record.LogKey(seq))
	if errors.Is(err, pebble.ErrNotFound) {
		return bad("its record is missing", ErrCorrupt)
	}
	if err != nil {
		return Snapshot{Seq: seq, Err: pebbleError("snapshot", err)}
	}
	defer func() { _ = closer.Close() }()
	env, err := record.ParseEnvelope(seq, rv, j.opts.RecordBytesMax)
	if err != nil {
		return bad("its record fails its check", err)
	}
	if env.Sum != sum {
		return bad(fmt.Sprintf("taken after a record with crc %08x, the log holds %08x", sum, env.Sum), ErrCorrupt)
	}
	return Snapshot{Seq: seq, State: bytes.Clone(state)}
}

// Snapshot returns the current snapshot.
func (s *SnapshotIter) Snapshot() Snapshot { return s.cur }

// Err returns the error that ended the iteration, if any (not a bad
// snapshot: those are reported through [Snapshot.Err]).
func (s *SnapshotIter) Err() error { return s.err }

// Close releases the iterator. It is idempotent.
func (s *SnapshotIter) Close() error {
	j := s.j
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	s.done = true
	if s.it == nil {
		return nil
	}
	j.unregister(s)
	if j.closed || j.isDead() {
		s.it = nil
		return nil
	}
	s.release(nil)
	return nil
}

func (s *SnapshotIter) release(err error) {
	if !s.done && s.err == nil {
		s.err = err
	}
	if s.it != nil {
		_ = s.it.Close()
		s.it = nil
	}
	s.done = true
}
