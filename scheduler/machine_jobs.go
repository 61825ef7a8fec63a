package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// EnqueueRequest is a validated job to enqueue (JB-1). The api validates
// every field before the machine sees it.
type EnqueueRequest struct {
	Handler         string
	Queue           string
	Priority        uint8
	Delay           time.Duration
	Retry           record.RetryPolicy
	DeliveryTimeout time.Duration
	Unique          bool
	Payload         []byte
	// WorkflowID, Step and Branch tie a step job to its workflow.
	WorkflowID string
	Step       int32
	Branch     int32
}

// UniqueKey returns the JB-5 key of a job: the handler name plus the
// SHA-256 of the payload's canonical encoding, every map's keys sorted
// ([record.SortedValue]), so that a struct and a map with its fields are
// one payload.
func UniqueKey(handler string, payload []byte) string {
	return payloadKey(handler, record.SortedValue(payload))
}

// legacyUniqueKey is the key earlier builds journaled: the SHA-256 of the
// payload as encoded, struct fields in declaration order. A job pending
// under it still holds its payload's key (JB-5).
func legacyUniqueKey(handler string, payload []byte) string {
	return payloadKey(handler, payload)
}

func payloadKey(handler string, b []byte) string {
	sum := sha256.Sum256(b)
	return handler + ":" + hex.EncodeToString(sum[:])
}

// Enqueue decides a job_enqueued for req and returns the job id. A unique
// job whose key a pending or processing job holds returns that job's id and
// decides nothing (JB-5).
func (m *Machine) Enqueue(now time.Time, req EnqueueRequest) (Decision, string) {
	var d Decision
	id := m.enqueue(&d, now, req)
	return d, id
}

func (m *Machine) enqueue(d *Decision, now time.Time, req EnqueueRequest) string {
	key := ""
	if req.Unique {
		key = UniqueKey(req.Handler, req.Payload)
		if id, ok := m.st.Unique[key]; ok {
			return id
		}
		if old := legacyUniqueKey(req.Handler, req.Payload); old != key {
			if id, ok := m.st.Unique[old]; ok {
				return id
			}
		}
	}
	id := m.cfg.NewIDFunc("job_", now)
	stream := id
	if req.WorkflowID != "" {
		stream = req.WorkflowID
	}
	m.emit(d, stream, &record.JobEnqueued{
		JobID: id, Handler: req.Handler, Queue: req.Queue, Priority: req.Priority,
		AvailableAt: deadlines.InstantAfter(now, req.Delay), Retry: req.Retry,
		DeliveryTimeoutNanos: int64(req.DeliveryTimeout), UniqueKey: key, Payload: req.Payload,
		WorkflowID: req.WorkflowID, Step: req.Step, Branch: req.Branch,
	})
	return id
}

// Class says whether a failure may be retried.
type Class uint8

// Failure classes.
const (
	Retryable Class = 0
	Permanent Class = 1
)

func (c Class) String() string {
	if c == Permanent {
		return "permanent"
	}
	return "retryable"
}

// Failure describes why an attempt did not succeed.
type Failure struct {
	Code    string
	Message string
	Class   Class
	Stack   string
	// Release is set when the attempt was interrupted by a reason that
	// consumes nothing (DL-6, DL-23): it settles as attempt_released.
	Release bool
}

// Result is how an attempt ended, reported by the runner.
type Result struct {
	Token uint64
	// Failure is nil on success.
	Failure *Failure
	Output  []byte
	// FollowUps are jobs to enqueue atomically with a successful settlement.
	FollowUps []EnqueueRequest
	// Reason and ReasonAt are the attempt's first cancellation reason (DL-16).
	Reason   string
	ReasonAt time.Time
	// Joined reports whether the execution goroutine returned (DL-37).
	Joined bool
}

// Settle decides the one settlement of an attempt (DL-38, DL-40). A token
// that is not the job's open attempt is refused with [ErrStaleToken] and
// decides nothing (RL-10). Before [Machine.Recover] every token is refused
// with [ErrNotRecovered]: the open tokens of the replayed state belong to
// attempts a crash lost, which never settle (DL-44).
func (m *Machine) Settle(now time.Time, res Result) (Decision, error) {
	var d Decision
	if !m.recovered {
		return d, fmt.Errorf("%w: settle token %d", ErrNotRecovered, res.Token)
	}
	id, ok := m.st.Tokens[res.Token]
	if !ok {
		return d, fmt.Errorf("%w: token %d", ErrStaleToken, res.Token)
	}
	j := m.st.Jobs[id]
	m.inflight--
	out := record.Outcome{JobID: j.ID, Token: res.Token, Joined: res.Joined, Reason: res.Reason}
	if !res.ReasonAt.IsZero() {
		out.ReasonAt = res.ReasonAt.UnixNano()
	}
	w, live := m.stepOf(j)
	f := res.Failure
	if f == nil {
		summary := replay.Summarize(j)
		summary.Status = replay.JobCompleted
		m.emit(&d, j.Stream, &record.AttemptSucceeded{Outcome: out, Output: res.Output})
		summary.Seq = m.nextSeq - 1
		summary.FinishedAt = now.UnixNano()
		if v, err := replay.EncodeSummary(summary); err == nil {
			d.Index = append(d.Index, IndexEntry{ID: j.ID, Value: v})
		}
		// WD-7: a branch succeeding at or after deadline_at expires the
		// workflow, whether or not it was the step's last, as a failing
		// one does: its siblings' pending jobs are buried, not run past
		// the deadline.
		expired := live && w.DeadlineAt != 0 && !now.Before(time.Unix(0, w.DeadlineAt))
		// WF-20: a late step success enqueues nothing, follow-ups
		// included; nor does one past deadline_at, whose output is
		// discarded as a late one's is (WD-7, WD-9), whichever of the
		// check and the settlement notices the expiry first.
		if j.WorkflowID == "" || live && !expired {
			for _, fu := range res.FollowUps {
				m.enqueue(&d, now, fu)
			}
		}
		switch {
		case expired:
			m.expire(&d, now, w, DetectedByStepBoundary)
		case live:
			m.stepSucceeded(&d, now, w)
		}
		return d, nil
	}
	out.Code, out.Error, out.Class, out.Stack = f.Code, f.Message, f.Class.String(), f.Stack
	switch {
	case j.WorkflowID != "" && !live:
		// WF-20, WD-9: the workflow moved on; a failure is buried with the
		// workflow's error instead of being retried, and so is a release
		// (DL-23), which would make the job pending again: held for good
		// once the workflow left the state, or run beside the job a retry
		// of the workflow enqueues for its branch. A workflow that left
		// the state (completed, cancelled) can never run the job again:
		// it leaves the state too, its summary going to the terminal
		// index (RL-11).
		out.Error = workflowError(w)
		final := m.st.Workflows[j.WorkflowID] == nil
		sum := replay.Summarize(j)
		m.emit(&d, j.Stream, &record.AttemptBuried{Outcome: out, Final: final})
		if final {
			sum.Status, sum.LastCode, sum.LastError = replay.JobBuried, out.Code, out.Error
			sum.Attempts, sum.Consumed = j.Attempts, j.Consumed
			m.indexJob(&d, now, sum, m.nextSeq-1)
		}
	case f.Release:
		m.emit(&d, j.Stream, &record.AttemptReleased{Outcome: out, AvailableAt: now.UnixNano()})
	case live && w.DeadlineAt != 0 && !now.Before(time.Unix(0, w.DeadlineAt)):
		// WD-7: a step failing at or after deadline_at is not retried.
		out.Code, out.Error = CodeDeadlineExceeded, MsgDeadlineExceeded
		m.emit(&d, j.Stream, &record.AttemptBuried{Outcome: out})
		m.expire(&d, now, w, DetectedByStepBoundary)
	case f.Class == Permanent || j.Consumed >= j.Retry.MaxAttempts:
		m.emit(&d, j.Stream, &record.AttemptBuried{Outcome: out})
		if live {
			m.fail(&d, now, w, f.Message) // WF-20
		}
	default:
		delay := retryDelay(j.Retry, j.Consumed, m.cfg.PickFunc)
		m.emit(&d, j.Stream, &record.AttemptRetryScheduled{
			Outcome: out, DelayNanos: int64(delay), AvailableAt: deadlines.InstantAfter(now, delay),
		})
	}
	return d, nil
}

// stepSucceeded completes the current step of w once every branch of it
// has succeeded (WF-3, WF-4).
func (m *Machine) stepSucceeded(d *Decision, now time.Time, w *replay.Workflow) {
	// The branches are those of w's own step. A parked w cannot get here:
	// its step jobs do not start (eligible), and a registration is never
	// undone within a process.
	def := m.defOf(w)
	if def == nil || int(w.Step) >= len(def.Steps) {
		return
	}
	// One pass over the outputs, not one per branch: a wide step's
	// successes each cost O(branches), not O(branches²).
	n := len(def.Steps[w.Step].Handlers)
	if len(w.Branches) < n {
		return
	}
	if _, left := doneBranches(w, n); left > 0 {
		return
	}
	m.completeBranches(d, now, w)
}

// workflowError is the error a late step failure is buried with (WF-20).
func workflowError(w *replay.Workflow) string {
	switch {
	case w == nil:
		return "workflow ended"
	case w.Error != "":
		return w.Error
	}
	return "workflow is " + w.Status.String()
}

// stepOf returns the workflow of a step job j, and whether j is the
// current job of its branch at the step the workflow is at while it is
// running or paused: only then does what happens to j move the workflow
// (WF-20). A job a retry of the workflow replaced (WF-18) is treated as a
// job of a step the workflow left, so that one requeued before JB-7
// refused it cannot complete or fail the step it was replaced in.
func (m *Machine) stepOf(j *replay.Job) (*replay.Workflow, bool) {
	if j.WorkflowID == "" {
		return nil, false
	}
	w := m.st.Workflows[j.WorkflowID]
	return w, w != nil && (w.Status == replay.WorkflowRunning || w.Status == replay.WorkflowPaused) && m.st.CurrentStepJob(j)
}

// buryJob decides a job_buried for the pending job j outside a settlement
// (an operator's bury, recovery) and, for a step job of its workflow's
// current step, that workflow's failure in the same append (WF-20), as a
// settlement that buries does.
func (m *Machine) buryJob(d *Decision, now time.Time, j *replay.Job, code, msg string) {
	m.emit(d, j.Stream, &record.JobBuried{JobID: j.ID, Code: code, Error: msg})
	if w, live := m.stepOf(j); live {
		m.fail(d, now, w, msg)
	}
}

// Bury decides a job_buried for a pending job (JB-6); a step job's
// workflow fails with it (WF-20).
func (m *Machine) Bury(now time.Time, id, code, msg string) (Decision, error) {
	var d Decision
	j, ok := m.st.Jobs[id]
	if !ok {
		return d, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if j.Status != replay.JobPending {
		return d, fmt.Errorf("%w: job %s is %s, only a pending job can be buried", ErrState, id, j.Status)
	}
	m.buryJob(&d, now, j, code, msg)
	return d, nil
}

// Requeue decides a job_requeued for a buried job (JB-7). A step job is
// refused unless it is the current job of its branch at its workflow's
// step and the workflow is running: a job a retry of the workflow
// replaced (WF-18) would run that step again, or complete it with its own
// output beside the new job's, whatever the workflow's status.
func (m *Machine) Requeue(now time.Time, id string) (Decision, error) {
	var d Decision
	j, ok := m.st.Jobs[id]
	if !ok {
		return d, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if j.Status != replay.JobBuried {
		return d, fmt.Errorf("%w: job %s is %s, only a buried job can be retried", ErrState, id, j.Status)
	}
	if j.WorkflowID != "" && !m.st.CurrentStepJob(j) {
		return d, fmt.Errorf("%w: job %s is a step of workflow %s that a retry of the workflow replaced: it can never run again, retry the workflow instead", ErrState, id, j.WorkflowID)
	}
	if j.WorkflowID != "" && !m.stepRunning(j) {
		return d, fmt.Errorf("%w: job %s is a step of workflow %s, which is not running: retry the workflow", ErrState, id, j.WorkflowID)
	}
	m.emit(&d, j.Stream, requeued(j, now))
	return d, nil
}

// RequeueBuriedUpTo decides a job_requeued for the buried jobs of queue,
// at most max of them (0: every one), the first in enqueue order, and
// returns how many it requeued (JB-7); more reports whether buried jobs it
// could requeue are left. It skips the step jobs it cannot requeue: those
// of a workflow that is not running, and those a retry of their workflow
// replaced. A caller requeueing a large queue in decisions of a
// bounded size lets a snapshot come between them (RL-12).
func (m *Machine) RequeueBuriedUpTo(now time.Time, queue string, max int) (d Decision, n int, more bool) {
	var ids []*replay.Job
	for _, id := range m.st.JobIDs() {
		j := m.st.Jobs[id]
		if j.Status == replay.JobBuried && j.Queue == queue && (j.WorkflowID == "" || m.stepRunning(j) && m.st.CurrentStepJob(j)) {
			ids = append(ids, j)
		}
	}
	sortBySeq(ids)
	if max > 0 && len(ids) > max {
		ids, more = ids[:max], true
	}
	for _, j := range ids {
		d.cut() // each requeue is its own unit: any number fits the journal
		m.emit(&d, j.Stream, requeued(j, now))
	}
	return d, len(ids), more
}

// requeued is the job_requeued of buried job j at now: a unique job keeps
// its key (JB-5).
func requeued(j *replay.Job, now time.Time) *record.JobRequeued {
	return &record.JobRequeued{JobID: j.ID, AvailableAt: now.UnixNano(), KeepKey: j.UniqueKey != ""}
}

// PauseQueue decides a queue_paused, or nothing if the queue is paused (JB-8).
func (m *Machine) PauseQueue(queue string) Decision {
	var d Decision
	if !m.st.PausedQueues[queue] {
		m.emit(&d, record.EngineStream, &record.QueuePaused{Queue: queue})
	}
	return d
}

// ResumeQueue decides a queue_resumed, or nothing if the queue runs (JB-8).
func (m *Machine) ResumeQueue(queue string) Decision {
	var d Decision
	if m.st.PausedQueues[queue] {
		m.emit(&d, record.EngineStream, &record.QueueResumed{Queue: queue})
		m.x.wake(queue)
	}
	return d
}

// Recover decides the records of startup recovery (DL-44, SD-33): a
// run_started, which makes the jobs of attempts left open by a crash
// pending again, and a job_buried for each of those whose consumed count
// already reached its MaxAttempts, with its workflow's failure for a step
// job (WF-20), or its expiry at or after its deadline_at (WD-7). A lost step job whose workflow has moved on (failed,
// cancelled, or past its step) is buried too, as its attempt's settlement
// would have buried it (WF-20); held, it would stay pending for good.
// Dispatch starts nothing before it. notes are engine-stream records to
// append right after run_started, atomically with it, such as the debug
// record of SD-36: appended later, a crash in between would lose them for
// good, since the next run would find this one, not the one they are
// about.
func (m *Machine) Recover(now time.Time, runID, version string, notes ...record.Body) (Decision, int) {
	var d Decision
	lost := 0
	for _, id := range m.st.JobIDs() {
		if m.st.Jobs[id].Status == replay.JobProcessing {
			lost++
		}
	}
	m.emit(&d, record.EngineStream, &record.RunStarted{RunID: runID, Version: version, At: now.UnixNano(), Recovered: int64(lost)})
	for _, b := range notes {
		m.emit(&d, record.EngineStream, b)
	}
	var bury []*replay.Job
	for _, id := range m.st.JobIDs() {
		j := m.st.Jobs[id]
		if !j.Lost || j.Status != replay.JobPending {
			continue
		}
		if _, live := m.stepOf(j); j.Consumed >= j.Retry.MaxAttempts || j.WorkflowID != "" && !live {
			bury = append(bury, j)
		}
	}
	sortBySeq(bury)
	for _, j := range bury {
		if j.Status != replay.JobPending {
			continue // buried with its workflow by an earlier one
		}
		d.cut() // run_started first, then each burial on its own
		w, live := m.stepOf(j)
		if j.WorkflowID != "" && !live {
			msg := workflowError(w)
			if s, ok := m.lookup(j.WorkflowID); w == nil && ok {
				msg = "workflow is " + s.Status // it left the state: completed or cancelled
			}
			// A workflow that left the state takes its job along, as
			// attempt_buried does (Settle).
			sum := replay.Summarize(j)
			msg = "attempt interrupted by a crash; " + msg
			m.emit(&d, j.Stream, &record.JobBuried{JobID: j.ID, Code: CodeInterruptedByCrash, Error: msg, Final: w == nil})
			if w == nil {
				sum.Status, sum.LastCode, sum.LastError = replay.JobBuried, CodeInterruptedByCrash, msg
				m.indexJob(&d, now, sum, m.nextSeq-1)
			}
			continue
		}
		if live && w.DeadlineAt != 0 && !now.Before(time.Unix(0, w.DeadlineAt)) {
			// WD-7, WD-19: a step attempt lost for good, found at or
			// after deadline_at, is a step failing past the deadline:
			// the workflow fails by its deadline, which buries this job
			// with the others pending (WD-8), as a settlement would.
			m.expire(&d, now, w, DetectedByStepBoundary)
			continue
		}
		m.buryJob(&d, now, j, CodeInterruptedByCrash, "attempt interrupted by a crash and attempts are exhausted")
	}
	m.recovered = true
	// Every outstanding obligation runs again in this process (WD-10); the
	// queue replaces anything an expiry decided before Recover queued.
	m.expiriesNew = m.expiriesNew[:0]
	for _, e := range m.st.Expiries() {
		m.expiriesNew = append(m.expiriesNew, e.Seq)
	}
	m.inflight = 0
	return d, lost
}

// CodeInterruptedByCrash buries a job whose last attempt a crash lost with
// no attempts left (DL-44).
const CodeInterruptedByCrash = "DELIVERY_INTERRUPTED_BY_CRASH"

func sortBySeq(js []*replay.Job) {
	sort.Slice(js, func(a, b int) bool { return js[a].EnqueueSeq < js[b].EnqueueSeq })
}
