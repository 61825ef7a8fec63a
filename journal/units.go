package journal

import (
	"context"
	"fmt"

	"github.com/quire-dev/quire/journal/record"
)

// Unit is one atomic part of an [Journal.AppendUnits] call: the next
// Records records and the next Index index entries, in order.
type Unit struct{ Records, Index int }

// AppendUnits appends recs and index as consecutive atomic units (RL-4)
// and returns the seqs of recs, in order. units partitions recs and index
// in order: the first unit holds the first units[0].Records records and
// the first units[0].Index index entries, the next unit the following
// ones, and so on. Every unit holds at least one record (index entries
// always travel with a record), and the counts add up to len(recs) and
// len(index); anything else is an error wrapping [record.ErrInvalid].
// Nil or empty units means one unit holding everything: exactly
// [Journal.AppendIndexed].
//
// Each unit's records and index entries commit in one batch (one group):
// they survive a crash together or not at all. Consecutive units may share
// a group. Units that do not fit in one group together (GroupRecordsMax,
// GroupBytesMax) are packed greedily, in order, into consecutive groups,
// so the call as a whole is not atomic: a crash may keep only a prefix of
// its units. A unit is never split: one larger than a group commits alone,
// in a group of its own, and one with more than UnitRecordsMax records or
// UnitBytesMax bytes (record envelopes plus index IDs and values) fails
// the call with an error wrapping [record.ErrTooLarge] naming the unit.
// Every record is validated and
// encoded, and every unit's size checked, in the caller's goroutine before
// anything joins a group: a bad record or unit fails the whole call, with
// the errors of [Journal.Append], and appends nothing.
//
// A call that fits in one group is one append, at the cost of
// AppendIndexed. A larger call joins its groups one after the other, each
// once the previous one's sync returned, so it holds at most one queue
// slot at a time and other appends may take seqs between its groups: the
// seqs are consecutive when the caller is the journal's only writer.
//
// If ctx ends while the call waits for a queue slot or for room in a group
// before its first group is joined, AppendUnits returns ctx's error and
// appends nothing. Once anything joined, the call cannot be withdrawn: it
// no longer watches ctx, and returns only after the sync of its last group
// (the seqs) or a fail-stop ([ErrFailStop], outcome unknown: any prefix of
// the units may be in the journal). Close waits for such a call to end.
func (j *Journal) AppendUnits(ctx context.Context, index []IndexEntry, recs []record.Record, units []Unit) ([]uint64, error) {
	if j.opts.ReadOnly {
		return nil, fmt.Errorf("journal: append: %w", ErrReadOnly)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("journal: append: %w: no records", record.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("journal: append of %d records to stream %q: %w", len(recs), recs[0].Stream, err)
	}
	if len(units) == 0 && len(recs) > j.opts.UnitRecordsMax {
		return nil, fmt.Errorf("journal: append: %w: %d records, UnitRecordsMax is %d",
			record.ErrTooLarge, len(recs), j.opts.UnitRecordsMax)
	}
	if err := j.checkUnits(len(index), len(recs), units); err != nil {
		return nil, err
	}
	r := requestPool.Get().(*request)
	size := 0
	for i, rec := range recs {
		p, buf, err := record.PrepareAppend(r.buf, rec, j.opts.RecordBytesMax)
		r.buf = buf
		if err != nil {
			putRequest(r)
			return nil, fmt.Errorf("journal: append record %d of %d (stream %q): %w", i+1, len(recs), rec.Stream, err)
		}
		r.recs = append(r.recs, p)
		size += p.Size()
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
		size += indexEntryBytes(e)
	}
	if len(units) > 1 && (len(recs) > j.opts.GroupRecordsMax || size > j.opts.GroupBytesMax) {
		return j.appendSplit(ctx, r, index, units)
	}
	// One unit: in one group, alone if it is larger than a group.
	if size > j.opts.UnitBytesMax {
		putRequest(r)
		return nil, fmt.Errorf("journal: append of %d records: %w: %d bytes, UnitBytesMax is %d",
			len(recs), record.ErrTooLarge, size, j.opts.UnitBytesMax)
	}
	r.index, r.bytes = index, size
	if err := j.join(ctx, r, false); err != nil {
		putRequest(r)
		return nil, err
	}
	if err := j.complete(r); err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(recs))
	for i := range seqs {
		seqs[i] = r.first + uint64(i)
	}
	putRequest(r)
	return seqs, nil
}

// indexEntryBytes is what an index entry counts against GroupBytesMax.
func indexEntryBytes(e IndexEntry) int { return len(e.ID) + len(e.Value) }

// checkUnits checks that units partitions nIndex index entries and nRecs
// records, and that no unit has more records than a group takes. Nil units
// is one unit holding everything.
func (j *Journal) checkUnits(nIndex, nRecs int, units []Unit) error {
	recs, index := 0, 0
	for k, u := range units {
		if u.Records < 1 || u.Index < 0 {
			return fmt.Errorf("journal: append unit %d of %d: %w: %d records and %d index entries (a unit holds at least one record)",
				k+1, len(units), record.ErrInvalid, u.Records, u.Index)
		}
		if u.Records > j.opts.UnitRecordsMax {
			return fmt.Errorf("journal: append unit %d of %d: %w: %d records, UnitRecordsMax is %d",
				k+1, len(units), record.ErrTooLarge, u.Records, j.opts.UnitRecordsMax)
		}
		if u.Records > nRecs-recs || u.Index > nIndex-index {
			return fmt.Errorf("journal: append unit %d of %d: %w: units 1 to %d hold more than the %d records and %d index entries of the call",
				k+1, len(units), record.ErrInvalid, k+1, nRecs, nIndex)
		}
		recs += u.Records
		index += u.Index
	}
	if len(units) > 0 && (recs != nRecs || index != nIndex) {
		return fmt.Errorf("journal: append: %w: %d units hold %d records and %d index entries, the call has %d and %d",
			record.ErrInvalid, len(units), recs, index, nRecs, nIndex)
	}
	return nil
}

// splitPart is one request of a split call: the ends (exclusive) of its
// records and index entries in the call's, and its size as GroupBytesMax
// counts it.
type splitPart struct{ recs, index, bytes int }

// appendSplit appends a call that does not fit in one group: r holds the
// call's prepared records (checked against units by checkUnits). It checks
// every unit's size, packs consecutive units greedily into parts within
// the group limits, and submits the parts one after the other, each as r
// holding a window of the records. r.buf, which the Payloads alias, stays
// untouched until the last part joined (joining copies the payloads into
// the group's batch), and r is recycled only at the end.
func (j *Journal) appendSplit(ctx context.Context, r *request, index []IndexEntry, units []Unit) ([]uint64, error) {
	all := r.recs
	var parts []splitPart
	ri, ii, n, size := 0, 0, 0, 0 // n and size: the part being packed
	for k, u := range units {
		us := 0
		for _, p := range all[ri : ri+u.Records] {
			us += p.Size()
		}
		for _, e := range index[ii : ii+u.Index] {
			us += indexEntryBytes(e)
		}
		if us > j.opts.UnitBytesMax {
			err := fmt.Errorf("journal: append unit %d of %d (%d records, stream %q): %w: %d bytes, UnitBytesMax is %d",
				k+1, len(units), u.Records, all[ri].Stream, record.ErrTooLarge, us, j.opts.UnitBytesMax)
			putRequest(r) // not before: all is r's
			return nil, err
		}
		if n > 0 && (n+u.Records > j.opts.GroupRecordsMax || size+us > j.opts.GroupBytesMax) {
			parts = append(parts, splitPart{recs: ri, index: ii, bytes: size})
			n, size = 0, 0
		}
		n += u.Records
		size += us
		ri += u.Records
		ii += u.Index
	}
	parts = append(parts, splitPart{recs: ri, index: ii, bytes: size})

	// Register with Close, which waits for the call once it has begun: the
	// later parts must be able to join after Close refused new appends.
	j.closeMu.RLock()
	err := j.writeBegin("append")
	if err == nil {
		j.splits.Add(1)
	}
	j.closeMu.RUnlock()
	if err != nil {
		putRequest(r)
		return nil, err
	}
	defer j.splits.Done()

	seqs := make([]uint64, len(all))
	ri, ii = 0, 0
	for k, p := range parts {
		r.recs, r.index, r.bytes = all[ri:p.recs], index[ii:p.index], p.bytes
		jctx := ctx
		if k > 0 {
			jctx = context.Background() // part of the call is in: no withdrawing now
		}
		if err := j.join(jctx, r, k > 0); err != nil {
			r.recs = all
			putRequest(r)
			return nil, err
		}
		if err := j.complete(r); err != nil {
			return nil, err // r is abandoned
		}
		for i := range r.recs {
			seqs[ri+i] = r.first + uint64(i)
		}
		ri, ii = p.recs, p.index
	}
	r.recs = all
	putRequest(r)
	return seqs, nil
}
