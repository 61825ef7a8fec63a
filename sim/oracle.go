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
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/shutdown"
)

// ack is what the oracle knows of a transition: acknowledged to the
// caller, maybe (submitted, unanswered when the instance died), or never
// submitted.
type ack uint8

const (
	never ack = iota
	maybe
	acked
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
	// phase is the last shutdown phase started in the current run, 0
	// before any: no attempt starts from phase 1 on, and no pause or
	// cancel is appended from phase 4 on (SD-12).
	phase int8

	recs  []record.Record
	shown []string
	st    *replay.State

	jobs map[string]ack
	wfs  map[string]ack

	avail      map[string]int64  // job -> earliest start
	open       map[string]uint64 // job -> open attempt token
	starts     map[uint64]string // token -> job
	settled    map[uint64]uint64 // token -> settlement seq
	deadline   map[string]int64  // workflow -> deadline instant
	expired    map[string]int    // workflow -> expiries in this run
	delayed    map[string][2]int64
	started    map[string]bool // "job#attempt" of every acknowledged attempt_started
	budget     map[uint64]deadlines.Budget
	root       deadlines.Root    // the current run's shutdown root, if any
	liveJobs   map[string]uint64 // unfinished job -> seq that made it known
	doneJobs   map[string]uint64 // finished job -> seq that finished it
	jobWf      map[string]string // step job -> its workflow
	buried     map[string]bool   // job -> buried and not requeued since
	retriedAt  map[string]uint64 // workflow -> seq of its last workflow_retried
	liveWfs    map[string]uint64
	doneWfs    map[string]uint64
	violations []string

	mu    sync.Mutex // guards epoch and calls, appended from handler goroutines
	epoch int        // the current instance
	calls []string   // "job#attempt" of handler calls not yet checked
}

// called notes a handler call by the instance of epoch; it runs on the
// handler's goroutine. Calls by an instance that has crashed or stopped
// are not the current journal's to answer for and are dropped.
func (o *oracle) called(epoch int, job string, attempt int) {
	o.mu.Lock()
	if epoch == o.epoch {
		o.calls = append(o.calls, fmt.Sprintf("%s#%d", job, attempt))
	}
	o.mu.Unlock()
}

// setEpoch makes the instance of epoch the current one.
func (o *oracle) setEpoch(epoch int) {
	o.mu.Lock()
	o.epoch = epoch
	o.calls = nil
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
	o := &oracle{jobs: map[string]ack{}, wfs: map[string]ack{}}
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
	o.budget = map[uint64]deadlines.Budget{}
	o.root, o.phase = deadlines.Root{}, 0
	o.liveJobs, o.doneJobs = map[string]uint64{}, map[string]uint64{}
	o.jobWf, o.buried, o.retriedAt = map[string]string{}, map[string]bool{}, map[string]uint64{}
	o.liveWfs, o.doneWfs = map[string]uint64{}, map[string]uint64{}
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

func (o *oracle) ackJob(id string)      { o.jobs[id] = acked }
func (o *oracle) ackWorkflow(id string) { o.wfs[id] = acked }

// crashed and stopped note that the instance ended. Every call of the sim
// driver returns before a crash, so there are no maybes among API calls;
// records the journal holds beyond the last acknowledged seq are maybes.
func (o *oracle) crashed() {}
func (o *oracle) stopped() {}

// observe reads the records the live engine acknowledged since the last
// step, checks them, and compares the live state with their replay.
func (o *oracle) observe(ctx context.Context, e *api.Engine, now time.Time) ([32]byte, bool) {
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
	if !o.checkMemory(ctx, e) {
		return live, false
	}
	o.checkSteps()
	o.checkOverdue(now)
	return live, len(o.violations) == 0
}

// checkSteps checks WF-20 on the replayed state: a buried job of the step
// a workflow is at means the workflow failed in the same append, so no
// running or paused workflow has one. Only the step's current entry
// counts: a retry (WF-18) re-enters the step with new jobs, and the
// buried jobs of the entry before it stay buried, in the state, until the
// workflow leaves it (ArchiveBuried). A job enqueued before the
// workflow's last workflow_retried belongs to such an earlier entry.
func (o *oracle) checkSteps() {
	for _, id := range o.st.JobIDs() {
		j := o.st.Jobs[id]
		if j.WorkflowID == "" || j.Status != replay.JobBuried || j.EnqueueSeq < o.retriedAt[j.WorkflowID] {
			continue
		}
		if w := o.st.Workflows[j.WorkflowID]; w != nil && w.Step == j.Step &&
			(w.Status == replay.WorkflowRunning || w.Status == replay.WorkflowPaused) {
			o.violate("WF-20: step job %s of workflow %s is buried, and the workflow is %s at that step", id, w.ID, w.Status)
			return
		}
	}
}

// testHookLive, when set by a test, rewrites what the engine reports it
// holds in memory before the oracle checks it: the planted-bug tests add a
// finished job there, as an engine that forgets to drop one would.
var testHookLive func(jobs, workflows []string) ([]string, []string)

// checkMemory checks that the engine holds in memory exactly the work the
// journal shows unfinished: every job until its attempt_succeeded or a
// final burial (job_buried or attempt_buried with Final, or, for a buried
// step job, its workflow's workflow_completed or workflow_cancelled with
// ArchiveBuried), every workflow until workflow_completed or
// workflow_cancelled. Finished work lives only in the journal's terminal
// index (RL-11).
func (o *oracle) checkMemory(ctx context.Context, e *api.Engine) bool {
	jobs, wfs, err := api.SimLive(ctx, e)
	if err != nil {
		o.violate("read the engine's memory: %v", err)
		return false
	}
	if h := testHookLive; h != nil {
		jobs, wfs = h(jobs, wfs)
	}
	return o.checkHeld(jobs, wfs)
}

// checkHeld checks the ids of the jobs and workflows the engine holds in
// memory against the unfinished work of the model.
func (o *oracle) checkHeld(jobs, wfs []string) bool {
	diff := func(kind string, got []string, live, done map[string]uint64) bool {
		in := make(map[string]bool, len(got))
		for _, id := range got {
			in[id] = true
			if _, ok := live[id]; ok {
				continue
			}
			if seq, ok := done[id]; ok {
				o.violate("memory holds %s %s, which the journal finished at seq %d", kind, id, seq)
			} else {
				o.violate("memory holds %s %s, which the journal does not know", kind, id)
			}
			return false
		}
		for _, id := range sortedSeqKeys(live) {
			if !in[id] {
				o.violate("memory lacks unfinished %s %s (known since seq %d)", kind, id, live[id])
				return false
			}
		}
		return true
	}
	return diff("job", jobs, o.liveJobs, o.doneJobs) && diff("workflow", wfs, o.liveWfs, o.doneWfs)
}

// checkOverdue checks, at a quiescent point of a live engine, that no
// attempt is still open at or after its hard cutoff H (capped by the
// shutdown root): every attempt deadline fires, at the latest at H.
func (o *oracle) checkOverdue(now time.Time) {
	for _, job := range sortedSeqKeys(o.open) {
		tok := o.open[job]
		b, ok := o.budget[tok]
		if !ok {
			continue
		}
		if h := b.CapRoot(o.root).H; !now.Before(h) {
			o.violate("deadline missed: attempt %d (token %d) of job %s is still open at %v, its hard cutoff was %v",
				o.attemptOf(tok), tok, job, now.UTC(), h.UTC())
			return
		}
	}
}

// attemptOf returns the attempt number token started, for messages.
func (o *oracle) attemptOf(tok uint64) int {
	if int(tok) <= len(o.recs) {
		if s, ok := o.recs[tok-1].Body.(*record.AttemptStarted); ok {
			return int(s.Attempt)
		}
	}
	return 0
}

// checkReport checks that the newest shutdown report in the journal is
// the one the engine returned (SD-33); it never changes afterwards, since
// every acknowledged record must stay as it was.
func (o *oracle) checkReport(rep *shutdown.Report) bool {
	var jr *record.ShutdownReport
	for i := len(o.recs) - 1; i >= 0 && jr == nil; i-- {
		jr, _ = o.recs[i].Body.(*record.ShutdownReport)
	}
	if jr == nil {
		o.violate("SD-33: the shutdown returned a report the journal does not hold")
		return false
	}
	if jr.Completion != rep.Completion.String() || jr.Trigger != rep.Trigger.String() || jr.Forced != rep.Forced ||
		jr.InitiatedAt != rep.InitiatedAt.UnixNano() || jr.BudgetNanos != int64(rep.Budget) ||
		jr.ElapsedNanos != int64(rep.Elapsed) || jr.DrainReconciled != rep.DrainReconciled ||
		jr.CloseReconciled != rep.CloseReconciled || jr.RuntimeJoined != rep.RuntimeJoined ||
		jr.Drained != int64(rep.Drained) || jr.Released != int64(rep.Released) ||
		jr.Quarantined != int64(rep.Quarantined) || jr.Unresolved != int64(rep.Unresolved) ||
		len(jr.ActionPhases) != len(rep.Actions) {
		o.violate("SD-33: the journaled report %+v is not the returned one %+v", *jr, *rep)
		return false
	}
	return true
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
	o.checkFired(r, out)
}

// checkFired checks the attempt deadlines a settlement shows fired, each
// once (one settlement per token) and never early, under the run's root
// as the journal shows it: a deadline-driven reason is stamped with its
// notification instant N (DL-16, DL-18), and an abandoned execution is
// settled no earlier than its cooperative deadline C (DL-22, DL-26).
func (o *oracle) checkFired(r record.Record, out record.Outcome) {
	b, ok := o.budget[out.Token]
	if !ok || out.Reason == "" {
		if out.Execution == "abandoned" {
			o.violate("DL-26: seq %d abandons attempt %d of job %s without a reason", r.Seq, out.Token, out.JobID)
		}
		return
	}
	reason, ok := deadlines.ParseReason(out.Reason)
	if !ok {
		o.violate("seq %d settles job %s with an unknown reason %q", r.Seq, out.JobID, out.Reason)
		return
	}
	at := time.Unix(0, out.ReasonAt)
	if out.ReasonAt > r.At {
		o.violate("early: seq %d at %d settles job %s with reason %s recorded later, at %d", r.Seq, r.At, out.JobID, out.Reason, out.ReasonAt)
		return
	}
	switch reason {
	case deadlines.ReasonDeliveryTimeout, deadlines.ReasonShutdownDeadline:
		// N without the root (the reason fired before the shutdown) or
		// with it; the instant is the deadline's, never the observation's.
		n0, why0 := b.Notification(deadlines.Root{})
		n1, why1 := b.Notification(o.root)
		if !(why0 == reason && at.Equal(n0)) && !(o.root.Installed() && why1 == reason && at.Equal(n1)) {
			want := fmt.Sprintf("%v (%s)", n0.UTC(), why0)
			if o.root.Installed() {
				want += fmt.Sprintf(", or %v (%s) under the shutdown root", n1.UTC(), why1)
			}
			o.violate("DL-16: seq %d: %s of job %s recorded at %v, its notification instant is %s",
				r.Seq, reason, out.JobID, at.UTC(), want)
			return
		}
	}
	if out.Execution == "abandoned" {
		c := deadlines.CooperativeDeadline(at, b.OwnerCutoff(reason, at, o.root), o.root)
		if r.At < c.UnixNano() {
			o.violate("early: seq %d abandons the attempt (token %d) of job %s at %v, before its cooperative deadline %v",
				r.Seq, out.Token, out.JobID, time.Unix(0, r.At).UTC(), c.UTC())
		}
	}
}

func (o *oracle) checkRecord(r record.Record) {
	switch b := r.Body.(type) {
	case *record.RunStarted:
		// DL-44: a new run revokes every attempt the last one left open;
		// none of them may settle afterwards, and no deadline of theirs
		// is due any more.
		o.root = deadlines.Root{}
		clear(o.open)
		o.phase = 0
	case *record.ShutdownPhaseStarted:
		o.phase = b.Phase
	case *record.WorkflowPaused, *record.QueuePaused:
		o.checkControl(r)
	case *record.ShutdownInitiated:
		o.root = deadlines.NewRoot(time.Unix(0, b.StartAt), time.Duration(b.TotalNanos))
		if o.root.G().UnixNano() != b.GracefulAt || o.root.Hr().UnixNano() != b.HardAt {
			o.violate("SD-4: seq %d: root of %v from %d has G %d and Hr %d, want %d and %d", r.Seq,
				time.Duration(b.TotalNanos), b.StartAt, b.GracefulAt, b.HardAt, o.root.G().UnixNano(), o.root.Hr().UnixNano())
		}
	case *record.JobEnqueued:
		o.avail[b.JobID] = b.AvailableAt
		if _, ok := o.liveJobs[b.JobID]; !ok {
			o.liveJobs[b.JobID] = r.Seq
		}
		if b.WorkflowID != "" {
			o.jobWf[b.JobID] = b.WorkflowID
		}
	case *record.AttemptStarted:
		if o.phase >= int8(shutdown.PhaseCloseAdmission) {
			o.violate("SD-12: attempt %d of job %s starts at seq %d, after shutdown phase %d started", b.Attempt, b.JobID, r.Seq, o.phase)
		}
		if r.At < o.avail[b.JobID] {
			o.violate("early: attempt %d of job %s starts at %d, the job is available at %d", b.Attempt, b.JobID, r.At, o.avail[b.JobID])
		}
		if b.HardAt < b.StartAt || b.NormalAt > b.HardAt {
			o.violate("negative budget: attempt %d of job %s: start %d, normal %d, hard %d", b.Attempt, b.JobID, b.StartAt, b.NormalAt, b.HardAt)
		}
		o.starts[r.Seq] = b.JobID
		o.open[b.JobID] = r.Seq
		o.budget[r.Seq] = deadlines.Budget{S: time.Unix(0, b.StartAt), H: time.Unix(0, b.HardAt), P: time.Unix(0, b.NormalAt)}
		o.started[fmt.Sprintf("%s#%d", b.JobID, b.Attempt)] = true
	case *record.AttemptSucceeded:
		o.settle(r, b.Outcome)
		o.finishJob(b.JobID, r.Seq)
	case *record.AttemptBuried:
		o.settle(r, b.Outcome)
		o.bury(b.JobID, b.Final, r.Seq)
	case *record.JobBuried:
		o.bury(b.JobID, b.Final, r.Seq)
	case *record.JobRequeued:
		delete(o.buried, b.JobID)
		// JB-7: a requeued job is available from the requeue's instant,
		// whatever its enqueue or last retry said.
		o.avail[b.JobID] = b.AvailableAt
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
		o.liveWfs[b.WorkflowID] = r.Seq
	case *record.WorkflowCompleted:
		delete(o.liveWfs, b.WorkflowID)
		o.doneWfs[b.WorkflowID] = r.Seq
		if b.ArchiveBuried {
			o.archiveBuried(b.WorkflowID, r.Seq)
		}
	case *record.WorkflowCancelled:
		o.checkControl(r)
		delete(o.liveWfs, b.WorkflowID)
		o.doneWfs[b.WorkflowID] = r.Seq
		if b.ArchiveBuried {
			o.archiveBuried(b.WorkflowID, r.Seq)
		}
	case *record.WorkflowRetried:
		o.expired[b.WorkflowID] = 0
		o.retriedAt[b.WorkflowID] = r.Seq
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

// finishJob notes that seq finished job: it leaves the engine's memory,
// its summary going to the terminal index (RL-11).
func (o *oracle) finishJob(job string, seq uint64) {
	if _, ok := o.liveJobs[job]; ok {
		delete(o.liveJobs, job)
		delete(o.buried, job)
		delete(o.jobWf, job)
		o.doneJobs[job] = seq
	}
}

// bury notes the burial of job at seq. A final one (a step job whose
// workflow has left, or leaves in the same append, WF-17, WF-20) finishes
// it; any other keeps it in memory, where a requeue (JB-7) or its
// workflow's leaving with ArchiveBuried may find it.
func (o *oracle) bury(job string, final bool, seq uint64) {
	if final {
		o.finishJob(job, seq)
		return
	}
	if _, ok := o.liveJobs[job]; ok {
		o.buried[job] = true
	}
}

// archiveBuried finishes, at seq, the buried step jobs of workflow wf,
// which leaves the engine with them (WF-18: the jobs of a step that
// failed before a retry; RL-11).
func (o *oracle) archiveBuried(wf string, seq uint64) {
	for job := range o.buried {
		if o.jobWf[job] == wf {
			o.finishJob(job, seq)
		}
	}
}

// checkControl checks a record only an API call appends (pause, cancel):
// SD-12 accepts those calls during a shutdown until phase 4 starts.
func (o *oracle) checkControl(r record.Record) {
	if o.phase >= int8(shutdown.PhaseCloseEvidence) {
		o.violate("SD-12: %s at seq %d, after shutdown phase %d started", r.Kind(), r.Seq, o.phase)
	}
}

func sortedSeqKeys(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]ack) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
