package journal

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/journal/record"
)

// ProblemsMax bounds the problems a [Report] keeps; further ones are
// counted in Report.Dropped.
const ProblemsMax = 1000

// Problem is one defect found by [Journal.Verify]. Stream is empty where
// no independent copy of it exists.
type Problem struct {
	Seq    uint64
	Stream string
	Reason string
}

// Report is the result of [Journal.Verify].
type Report struct {
	FirstSeq     uint64 // first seq in the log (0 if empty)
	LastSeq      uint64 // last seq checked (the acknowledged seq when Verify started)
	Records      int    // records that passed their own checks
	Bytes        int64  // envelope bytes read
	Streams      int    // distinct streams in the s/ index
	Snapshots    int    // snapshots that passed their checks
	IndexEntries int    // terminal-index entries
	Problems     []Problem
	Dropped      int // problems found beyond ProblemsMax
}

// OK reports whether Verify found no problem.
func (r Report) OK() bool { return len(r.Problems) == 0 && r.Dropped == 0 }

func (r *Report) add(seq uint64, stream, reason string) {
	if len(r.Problems) >= ProblemsMax {
		r.Dropped++
		return
	}
	r.Problems = append(r.Problems, Problem{Seq: seq, Stream: stream, Reason: reason})
}

// Verify makes one streaming pass over the whole journal up to the
// acknowledged seq, in bounded memory: every record's envelope checks and
// decode, seq continuity from 1, the prevSum chain, At monotone, each
// record's s/ entry and, in reverse, each s/ entry's record and stream;
// snapshot envelopes; terminal-index keys. It returns the report and, if
// the report is not OK, a [*CorruptError] for the first problem; any other
// error means the pass could not finish.
func (j *Journal) Verify() (Report, error) {
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	var rep Report
	if err := j.readBegin("verify"); err != nil {
		return rep, err
	}
	rep.LastSeq = j.LastSeq()
	bounds := func(p string) *pebble.IterOptions {
		return &pebble.IterOptions{LowerBound: []byte(p), UpperBound: prefixEnd(p)}
	}
	// Create every iterator at once, under visMu, so that they share one
	// view holding no unacknowledged t/ or x/ value.
	var its [5]*pebble.Iterator
	opts := []*pebble.IterOptions{bounds(prefixLog), bounds(prefixStream), bounds(prefixLog), bounds(prefixSnap), bounds(prefixIndex)}
	j.visMu.RLock()
	var err error
	for i := range its {
		if its[i], err = j.db.NewIter(opts[i]); err != nil {
			break
		}
	}
	j.visMu.RUnlock()
	defer func() {
		for _, it := range its {
			if it != nil && !j.isDead() {
				_ = it.Close()
			}
		}
	}()
	if err != nil {
		return rep, pebbleError("verify", err)
	}
	v := verifier{j: j, rep: &rep, unattributed: map[uint64]int{}}
	for _, pass := range []func() error{
		func() error { return v.log(its[0], its[1]) },
		func() error { return v.streams(its[1], its[2]) },
		func() error { return v.snapshots(its[3], its[2]) },
		func() error { return v.index(its[4]) },
	} {
		if err := pass(); err != nil {
			return rep, err
		}
		if j.isDead() {
			return rep, j.failStopError("verify")
		}
	}
	if !rep.OK() {
		if len(rep.Problems) == 0 {
			return rep, &CorruptError{Reason: fmt.Sprintf("%d problems", rep.Dropped)}
		}
		p := rep.Problems[0]
		return rep, &CorruptError{Seq: p.Seq, Stream: p.Stream, Reason: p.Reason}
	}
	return rep, nil
}

type verifier struct {
	j   *Journal
	rep *Report
	// unattributed maps the seq of a problem whose stream was unknown in
	// the log pass to its index in rep.Problems, so the s/ pass can name
	// the stream. Bounded by ProblemsMax.
	unattributed map[uint64]int
}

func (v *verifier) problem(seq uint64, stream, reason string) {
	if stream == "" && len(v.rep.Problems) < ProblemsMax {
		v.unattributed[seq] = len(v.rep.Problems)
	}
	v.rep.add(seq, stream, reason)
}

// log checks the e/ keyspace in seq order.
func (v *verifier) log(it, sit *pebble.Iterator) error {
	j, rep := v.j, v.rep
	next := uint64(1)
	prevOK, prevSum, prevAt := true, j.chainSum, int64(-1<<63)
	var key []byte
	for ok := it.First(); ok; ok = it.Next() {
		seq, ok := record.ParseLogKey(it.Key())
		if !ok {
			v.problem(0, "", fmt.Sprintf("malformed log key %x", it.Key()))
			continue
		}
		if seq > rep.LastSeq {
			break // not acknowledged yet
		}
		if rep.FirstSeq == 0 {
			rep.FirstSeq = seq
		}
		if seq != next {
			if seq == next+1 {
				v.problem(next, "", "record missing")
			} else {
				v.problem(next, "", fmt.Sprintf("records %d..%d missing", next, seq-1))
			}
			prevOK = false
		}
		next = seq + 1
		val, err := it.ValueAndErr()
		if err != nil {
			return pebbleError("verify", err)
		}
		rep.Bytes += int64(len(val))
		env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
		if err != nil {
			v.problem(seq, "", err.Error())
			prevOK = false
			continue
		}
		bad := false
		if prevOK && env.PrevSum != prevSum {
			v.problem(seq, env.Stream, fmt.Sprintf("chain: prevSum %08x, record %d has crc %08x", env.PrevSum, seq-1, prevSum))
			bad = true
		}
		if env.At < prevAt {
			v.problem(seq, env.Stream, fmt.Sprintf("at %d before the previous record's %d", env.At, prevAt))
			bad = true
		}
		key = appendStreamKey(key[:0], env.Stream, seq)
		if !sit.SeekGE(key) || !bytes.Equal(sit.Key(), key) {
			if err := sit.Error(); err != nil {
				return pebbleError("verify", err)
			}
			v.problem(seq, env.Stream, "record has no s/ index entry")
			bad = true
		}
		if _, err := env.Decode(); err != nil {
			v.problem(seq, env.Stream, err.Error())
			bad = true
		}
		if !bad {
			rep.Records++
		}
		prevOK, prevSum, prevAt = true, env.Sum, env.At
	}
	if err := it.Error(); err != nil {
		return pebbleError("verify", err)
	}
	if next <= rep.LastSeq {
		v.problem(next, "", fmt.Sprintf("records %d..%d missing", next, rep.LastSeq))
	}
	return nil
}

// streams checks the s/ keyspace: each entry's record exists and names
// the entry's stream. It also attributes log-pass problems to streams.
func (v *verifier) streams(sit, eit *pebble.Iterator) error {
	j, rep := v.j, v.rep
	var prev []byte
	for ok := sit.First(); ok; ok = sit.Next() {
		id, seq, ok := parseStreamKey(sit.Key())
		if !ok {
			v.problem(0, "", fmt.Sprintf("malformed s/ key %x", sit.Key()))
			continue
		}
		if seq > rep.LastSeq {
			// Past the acknowledged tail: an entry of a group committed
			// while the iterators were made has its record in eit's
			// view (made after sit's, one batch holds both). One
			// without it is the index of a record lost from the tail,
			// which the log pass, stopping at LastSeq, cannot see.
			key := record.LogKey(seq)
			if eit.SeekGE(key) && bytes.Equal(eit.Key(), key) {
				continue
			}
			if err := eit.Error(); err != nil {
				return pebbleError("verify", err)
			}
			v.rep.add(seq, string(id), "s/ index entry without its record (past the last record)")
			continue
		}
		if !bytes.Equal(id, prev) {
			rep.Streams++
			prev = append(prev[:0], id...)
		}
		stream := string(id)
		if i, ok := v.unattributed[seq]; ok && rep.Problems[i].Stream == "" {
			rep.Problems[i].Stream = stream
			continue
		}
		key := record.LogKey(seq)
		if !eit.SeekGE(key) || !bytes.Equal(eit.Key(), key) {
			if err := eit.Error(); err != nil {
				return pebbleError("verify", err)
			}
			v.rep.add(seq, stream, "s/ index entry without its record")
			continue
		}
		val, err := eit.ValueAndErr()
		if err != nil {
			return pebbleError("verify", err)
		}
		env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
		if err != nil {
			continue // reported by the log pass
		}
		if env.Stream != stream {
			v.rep.add(seq, stream, fmt.Sprintf("s/ index entry names stream %q, record names %q", stream, env.Stream))
		}
	}
	if err := sit.Error(); err != nil {
		return pebbleError("verify", err)
	}
	return nil
}

func (v *verifier) snapshots(xit, eit *pebble.Iterator) error {
	for ok := xit.First(); ok; ok = xit.Next() {
		s := v.j.checkSnapshot(xit)
		if s.Err != nil {
			v.rep.add(s.Seq, "", s.Err.Error())
			continue
		}
		v.rep.Snapshots++
	}
	if err := xit.Error(); err != nil {
		return pebbleError("verify", err)
	}
	return nil
}

func (v *verifier) index(tit *pebble.Iterator) error {
	for ok := tit.First(); ok; ok = tit.Next() {
		if !parseIndexKey(tit.Key()) {
			v.rep.add(0, "", fmt.Sprintf("malformed index key %x", tit.Key()))
			continue
		}
		v.rep.IndexEntries++
	}
	if err := tit.Error(); err != nil {
		return pebbleError("verify", err)
	}
	return nil
}
