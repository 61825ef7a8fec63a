package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

// QuarantinedStream is a stream Open set aside because a record of it is
// damaged (spec/reliability.md §4.4). The stream stops at its last good
// record: its jobs and workflow read as [JobCorrupt] and [WorkflowCorrupt]
// and get no deliveries, timers or signals, and their unique and
// idempotency keys stay reserved. The other streams run. Calls that would
// change them return an error matching journal.ErrCorrupt.
//
// While a stream is quarantined the engine writes no snapshot, so each
// Open reads the journal from before the damage and finds it again: the
// bound on what Open reads (RL-12) holds again once the journal is
// repaired. `qctl verify` names the damage.
type QuarantinedStream struct {
	// Stream is the stream's id: a job's id, or a workflow's (whose step
	// jobs share it).
	Stream string
	// Err is the damage: its Seq is the first record of the stream that
	// could not be applied. A record of a sound stream that could not be
	// applied after an earlier quarantine quarantines its stream too; its
	// Err then wraps the replay error.
	Err *journal.CorruptError
	// Jobs are the ids of the stream's jobs as of its last good record,
	// sorted; Workflow is the workflow's id if the stream is one that had
	// started, else "".
	Jobs     []string
	Workflow string
}

// quarantine is what Open quarantined, fixed once Open has replayed: by
// stream, and by job id.
type quarantine struct {
	streams map[string]*QuarantinedStream
	jobs    map[string]*QuarantinedStream
}

// noteQuarantine records the streams st quarantined in e's open report and
// in the index the calls consult.
func (e *Engine) noteQuarantine(st *replay.State) {
	e.stats.Quarantined = nil
	e.quarantine = quarantine{}
	if len(st.Quarantined) == 0 {
		return
	}
	e.quarantine = quarantine{streams: map[string]*QuarantinedStream{}, jobs: map[string]*QuarantinedStream{}}
	for _, stream := range slices.Sorted(maps.Keys(st.Quarantined)) {
		q := st.Quarantined[stream]
		out := &QuarantinedStream{Stream: stream, Jobs: q.JobIDs()}
		if !errors.As(q.Err, &out.Err) {
			// A sound record that no longer applied after a quarantine.
			out.Err = &journal.CorruptError{Seq: q.Seq, Stream: stream, Reason: "quarantined", Err: q.Err}
		}
		if q.Workflow != nil {
			out.Workflow = q.Workflow.ID
		}
		e.stats.Quarantined = append(e.stats.Quarantined, *out)
		e.quarantine.streams[stream] = out
		for _, id := range out.Jobs {
			e.quarantine.jobs[id] = out
		}
	}
}

// of returns the quarantined stream that holds job or workflow id: the
// stream of a job it set aside, or the stream named id; nil for none.
func (q quarantine) of(id string) *QuarantinedStream {
	if s := q.jobs[id]; s != nil {
		return s
	}
	return q.streams[id]
}

// quarantinedErr returns the error of a call on kind id when id is in a
// quarantined stream, else nil.
func (e *Engine) quarantinedErr(kind, id string) error {
	q := e.quarantine.of(id)
	if q == nil {
		return nil
	}
	return fmt.Errorf("quire: %s %s is quarantined: %w", kind, id, q.Err)
}

// quarantinedJob is the status of job id, which is in a quarantined stream.
func (e *Engine) quarantinedJob(ctx context.Context, q *QuarantinedStream, id string) (Job, error) {
	out := Job{ID: id}
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		if rq := m.State().Quarantined[q.Stream]; rq != nil && rq.Jobs[id] != nil {
			out = jobFromState(rq.Jobs[id])
			out.AvailableAt = time.Time{}
		}
		return scheduler.Decision{}, nil
	})
	out.Status, out.Corrupt = JobCorrupt, q.Err
	return out, err
}
