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
