package replay

import (
	"fmt"
	"maps"
	"slices"

	"github.com/quire-dev/quire/journal/record"
)

// Quarantine is a stream set aside because one of its records is damaged
// (spec/reliability.md §4.4). It stops at its last good record: its jobs
// and workflow, as of that record, left [State.Jobs] and
// [State.Workflows], so the scheduler never delivers, times or signals
// them, while their unique and idempotency keys stay reserved. Records of
// the stream after the damage are passed over.
type Quarantine struct {
	Stream string
	// Seq is the first record of the stream that could not be applied;
	// Err says why (the journal's *CorruptError).
	Seq uint64
	Err error
	// Jobs are the stream's jobs as of its last good record, by id, and
	// Workflow the workflow the stream is, if it is one and was active.
	Jobs     map[string]*Job
	Workflow *Workflow
}

// JobIDs returns the ids of q's jobs, sorted.
func (q *Quarantine) JobIDs() []string { return slices.Sorted(maps.Keys(q.Jobs)) }

// QuarantineStream applies record seq, the next one, as the damage of
// stream: the first time, the stream's jobs and workflow are set aside as
// they stand (see [Quarantine]); after that, the record is passed over
// like the stream's other later records. The engine stream cannot be
// quarantined: damage there leaves the order untrustworthy.
func (s *State) QuarantineStream(seq uint64, stream string, cause error) error {
	if seq != s.LastSeq+1 {
		return &ApplyError{Seq: seq, Stream: stream, Err: fmt.Errorf("%w: seq %d after %d", ErrOrder, seq, s.LastSeq)}
	}
	if stream == "" || stream == record.EngineStream {
		return &ApplyError{Seq: seq, Stream: stream, Err: fmt.Errorf("%w: stream %q cannot be quarantined", ErrImpossible, stream)}
	}
	if s.Quarantined[stream] == nil {
		q := &Quarantine{Stream: stream, Seq: seq, Err: cause, Jobs: make(map[string]*Job)}
		set := func(j *Job) {
			if j.Token != 0 {
				delete(s.Tokens, j.Token)
			}
			s.dropJob(j)
			q.Jobs[j.ID] = j
		}
		if j := s.Jobs[stream]; j != nil && j.Stream == stream {
			set(j)
		}
		for _, j := range s.WorkflowJobs(stream) {
			set(j)
		}
		if w := s.Workflows[stream]; w != nil {
			// Not leave: its idempotency key stays reserved.
			delete(s.Workflows, w.ID)
			indexDel(s.byName, w.Name, w.ID)
			q.Workflow = w
			for seq, e := range s.expiries {
				if e.WorkflowID == w.ID {
					delete(s.expiries, seq)
				}
			}
		}
		if s.Quarantined == nil {
			s.Quarantined = make(map[string]*Quarantine)
		}
		s.Quarantined[stream] = q
	}
	s.LastSeq = seq
	return nil
}

// QuarantineOf returns the quarantine that holds job or workflow id, if
// any: the stream of that id, or the one whose jobs include it.
func (s *State) QuarantineOf(id string) (*Quarantine, bool) {
	if q := s.Quarantined[id]; q != nil {
		return q, true
	}
	for _, stream := range slices.Sorted(maps.Keys(s.Quarantined)) {
		if q := s.Quarantined[stream]; q.Jobs[id] != nil {
			return q, true
		}
	}
	return nil, false
}

// RecoveryScan is what [FoldQuarantining] reads: a scan of the journal's
// log that reports a record it read past as damaged (the journal's
// quarantining scan) instead of ending there.
type RecoveryScan interface {
	Next() bool
	// Damage returns the current record's seq, stream and damage, or a
	// nil error when the record is sound and Record holds it.
	Damage() (seq uint64, stream string, err error)
	Record() record.Record
	Err() error
}

// FoldQuarantining applies the records of it to s and returns how many it
// read. A damaged record quarantines its stream and the others fold on
// (spec/reliability.md §4.4); damage the scan cannot attribute ends it
// with its error. A sound record that no longer applies once a stream
// stopped short (it depended on that stream's later records) quarantines
// its own stream too; without a quarantine, its error is returned, as is
// an error in the engine stream.
func FoldQuarantining(s *State, it RecoveryScan) (n uint64, err error) {
	for it.Next() {
		n++
		if seq, stream, derr := it.Damage(); derr != nil {
			if err := s.QuarantineStream(seq, stream, derr); err != nil {
				return n, err
			}
			continue
		}
		r := it.Record()
		err := Apply(s, r)
		if err == nil {
			continue
		}
		if len(s.Quarantined) > 0 && r.Stream != record.EngineStream {
			cause := fmt.Errorf("cannot be applied after a damaged stream was quarantined: %w", err)
			if s.QuarantineStream(r.Seq, r.Stream, cause) == nil {
				continue
			}
		}
		return n, err
	}
	return n, it.Err()
}
