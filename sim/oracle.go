package sim

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Ack is what the oracle knows of a transition: acknowledged to the
// caller, maybe (submitted, unanswered when the instance died), or never
// submitted.
type Ack uint8

// Ack values.
const (
	Never Ack = iota
	Maybe
	Acked
)

// oracle is a plain-Go model fed only what the engine acknowledged: the
// ids its API calls returned and the journal records it had made durable
// at quiescent points. It checks, after every step:
//
//   - nothing acknowledged is lost: every acknowledged job and workflow is
//     known to the engine, and every acknowledged record is present,
//     unchanged, at its seq after a crash (which also means shutdown
//     reports never change);
//   - the journal is a gap-free prefix with monotone instants;
//   - each attempt token settles at most once, only as its job's open
//     attempt (fencing), never before it started;
//   - no attempt starts before its job is available (timers and retry
//     delays never fire early); every delay step completes no earlier than
//     its fire instant; each workflow deadline expires at most once per
//     run of the workflow, never before it and never moved;
//   - budgets are never negative (hard deadline at or after the start,
//     normal exit at or before the hard one, retry delays >= 0);
//   - live state equals the replay of the acknowledged records.
type oracle struct {
	recs  []record.Record
	shown []string
	st    *replay.State

	jobs map[string]Ack
	wfs  map[string]Ack

	avail      map[string]int64  // job -> earliest start
	open       map[string]uint64 // job -> open attempt token
	starts     map[uint64]string // token -> job
	settled    map[uint64]uint64 // token -> settlement seq
	deadline   map[string]int64  // workflow -> deadline instant
	expired    map[string]int    // workflow -> expiries in this run
	delayed    map[string][2]int64
	started    map[string]bool // "job#attempt" of every acknowledged attempt_started
	violations []string

	mu    sync.Mutex // guards calls, appended from handler goroutines
	calls []string   // "job#attempt" of handler calls not yet checked
}

// called notes a handler call; it runs on the handler's goroutine.
func (o *oracle) called(job string, attempt int) {
	o.mu.Lock()
	o.calls = append(o.calls, fmt.Sprintf("%s#%d", job, attempt))
	o.mu.Unlock()
}

// checkCalls checks that every handler call since the last step had its
// attempt_started acknowledged (RL-10).
func (o *oracle) checkCalls() {
	o.mu.Lock()
	calls := o.calls
	o.calls = nil
	o.mu.Unlock()
	for _, c := range calls {
		if !o.started[c] {
			o.violate("RL-10: handler call %s without an acknowledged attempt_started", c)
		}
	}
}

func newOracle() *oracle {
	o := &oracle{jobs: map[string]Ack{}, wfs: map[string]Ack{}}
	o.reset()
	return o
}

func (o *oracle) reset() {
	o.recs, o.shown, o.st = nil, nil, replay.New()
	o.avail, o.open = map[string]int64{}, map[string]uint64{}
	o.starts, o.settled = map[uint64]string{}, map[uint64]uint64{}
	o.deadline, o.expired = map[string]int64{}, map[string]int{}
	o.delayed = map[string][2]int64{}
	o.started = map[string]bool{}
}

func (o *oracle) violate(format string, args ...any) {
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
}

func (o *oracle) first() string {
	if len(o.violations) == 0 {
		return "no violation"
	}
	return o.violations[0]
}

func (o *oracle) ackJob(id string)      { o.jobs[id] = Acked }
func (o *oracle) ackWorkflow(id string) { o.wfs[id] = Acked }

// crashed and stopped note that the instance ended. Every call of the sim
// driver returns before a crash, so there are no maybes among API calls;
// records the journal holds beyond the last acknowledged seq are maybes.
func (o *oracle) crashed() {}
func (o *oracle) stopped() {}

// observe reads the records the live engine acknowledged since the last
// step, checks them, and compares the live state with their replay.
func (o *oracle) observe(ctx context.Context, e *api.Engine) ([32]byte, bool) {
	live, seq, err := e.StateDigest(ctx)
	if err != nil {
		o.violate("state digest: %v", err)
		return live, false
	}
	j := api.SimJournal(e)
	if n := uint64(len(o.recs)); seq > n {
		if !o.scan(j, n+1, seq) {
			return live, false
		}
	}
	o.checkCalls()
	if o.st.LastSeq != seq {
		o.violate("live state is at seq %d, the journal's acknowledged records end at %d", seq, o.st.LastSeq)
		return live, false
	}
	if got := replay.Digest(o.st); got != live {
		o.violate("RL-7: live state digest %x != replay of the acknowledged records %x at seq %d", live[:8], got[:8], seq)
		return live, false
	}
	for _, id := range sortedKeys(o.jobs) {
		if _, err := e.Status(ctx, id); err != nil {
			o.violate("RL-1: acknowledged job %s lost: %v", id, err)
			return live, false
		}
	}
	for _, id := range sortedKeys(o.wfs) {
		if _, err := e.Workflow(ctx, id); err != nil {
			o.violate("RL-1: acknowledged workflow %s lost: %v", id, err)
			return live, false
		}
	}
	return live, len(o.violations) == 0
}

func (o *oracle) scan(j *journal.Journal, from, to uint64) bool {
	it := j.Scan(from, to)
	defer it.Close()
	for it.Next() {
		o.ingest(it.Record())
	}
	if err := it.Err(); err != nil {
		o.violate("scan journal %d..%d: %v", from, to, err)
	}
	return len(o.violations) == 0
}

// audit opens the journal on fs read-only, before an instance opens it:
// every acknowledged record must be there unchanged (a crash image may
// add whole maybe records after them, never drop or alter one), and the
// whole journal must pass the record checks. The model then adopts the
// image's records, maybes included.
func (o *oracle) audit(fs vfs.FS, now time.Time) bool {
	if len(o.recs) == 0 {
		if _, err := fs.Stat(Dir); err != nil {
			return true // nothing was ever opened
		}
	}
	j, err := journal.Open(Dir, journal.Options{FS: fs, Clock: clocktest.New(now), ReadOnly: true})
	if err != nil {
		o.violate("open journal read-only: %v", err)
		return false
	}
	defer j.Close()
	old := o.shown
	o.reset()
	if !o.scan(j, 1, math.MaxUint64) {
		return false
	}
	if len(o.shown) < len(old) {
		o.violate("RL-1: acknowledged record seq %d lost (the journal ends at %d)", len(o.shown)+1, len(o.shown))
		return false
	}
	for i, s := range old {
		if o.shown[i] != s {
			o.violate("RL-3: acknowledged record seq %d changed: %s, now %s", i+1, s, o.shown[i])
			return false
		}
	}
	return true
}

func (o *oracle) ingest(r record.Record) {
	n := uint64(len(o.recs))
	if r.Seq != n+1 {
		o.violate("RL-3: record seq %d follows seq %d", r.Seq, n)
	}
	if n > 0 && r.At < o.recs[n-1].At {
		o.violate("RL-9: record seq %d at %d is before seq %d at %d", r.Seq, r.At, n, o.recs[n-1].At)
	}
	o.recs = append(o.recs, r)
	o.shown = append(o.shown, fmt.Sprintf("%d/%d/%s/%s/%+v", r.Seq, r.At, r.Stream, r.Kind(), r.Body))
	o.checkRecord(r)
	if err := replay.Apply(o.st, r); err != nil {
		o.violate("replay refuses acknowledged record seq %d (%s): %v", r.Seq, r.Kind(), err)
	}
}

func (o *oracle) settle(r record.Record, out record.Outcome) {
	job, ok := o.starts[out.Token]
	switch {
	case !ok:
		o.violate("fencing: seq %d settles token %d of job %s, which no attempt_started holds", r.Seq, out.Token, out.JobID)
	case job != out.JobID:
		o.violate("fencing: seq %d settles token %d for job %s, the token is job %s's", r.Seq, out.Token, out.JobID, job)
	case o.settled[out.Token] != 0:
		o.violate("token %d of job %s settled twice: seq %d and seq %d", out.Token, job, o.settled[out.Token], r.Seq)
	case o.open[job] != out.Token:
		o.violate("fencing: seq %d settles token %d of job %s, whose open attempt is %d", r.Seq, out.Token, job, o.open[job])
	}
	o.settled[out.Token] = r.Seq
	if o.open[out.JobID] == out.Token {
		delete(o.open, out.JobID)
	}
}

func (o *oracle) checkRecord(r record.Record) {
	switch b := r.Body.(type) {
	case *record.JobEnqueued:
		o.avail[b.JobID] = b.AvailableAt
	case *record.AttemptStarted:
		if r.At < o.avail[b.JobID] {
			o.violate("early: attempt %d of job %s starts at %d, the job is available at %d", b.Attempt, b.JobID, r.At, o.avail[b.JobID])
		}
		if b.HardAt < b.StartAt || b.NormalAt > b.HardAt {
			o.violate("negative budget: attempt %d of job %s: start %d, normal %d, hard %d", b.Attempt, b.JobID, b.StartAt, b.NormalAt, b.HardAt)
		}
		o.starts[r.Seq] = b.JobID
		o.open[b.JobID] = r.Seq
		o.started[fmt.Sprintf("%s#%d", b.JobID, b.Attempt)] = true
	case *record.AttemptSucceeded:
		o.settle(r, b.Outcome)
	case *record.AttemptBuried:
		o.settle(r, b.Outcome)
	case *record.AttemptRetryScheduled:
		o.settle(r, b.Outcome)
		if b.DelayNanos < 0 {
			o.violate("negative retry delay: seq %d delays job %s by %d to %d", r.Seq, b.JobID, b.DelayNanos, b.AvailableAt)
		}
		o.avail[b.JobID] = b.AvailableAt
	case *record.AttemptReleased:
		o.settle(r, b.Outcome)
		o.avail[b.JobID] = b.AvailableAt
	case *record.WorkflowStarted:
		o.deadline[b.WorkflowID] = b.DeadlineAt
	case *record.WorkflowRetried:
		o.expired[b.WorkflowID] = 0
	case *record.StepDelayed:
		o.delayed[b.WorkflowID] = [2]int64{int64(b.Step), b.FireAt}
	case *record.StepCompleted:
		if d, ok := o.delayed[b.WorkflowID]; ok && d[0] == int64(b.Step) {
			if r.At < d[1] {
				o.violate("early: delay step %d of workflow %s completes at %d, it fires at %d", b.Step, b.WorkflowID, r.At, d[1])
			}
			delete(o.delayed, b.WorkflowID)
		}
	case *record.WorkflowDeadlineExceeded:
		if want := o.deadline[b.WorkflowID]; b.DeadlineAt != want {
			o.violate("deadline moved: workflow %s expires with deadline %d, it was dispatched with %d", b.WorkflowID, b.DeadlineAt, want)
		}
		if b.DetectedAt < b.DeadlineAt || r.At < b.DeadlineAt {
			o.violate("early: workflow %s expires at %d, its deadline is %d", b.WorkflowID, b.DetectedAt, b.DeadlineAt)
		}
		o.expired[b.WorkflowID]++
		if o.expired[b.WorkflowID] > 1 {
			o.violate("workflow %s's deadline fired twice", b.WorkflowID)
		}
	}
}

func sortedKeys(m map[string]Ack) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
