package qctl

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

type showCmd struct {
	ID string `arg:"" placeholder:"ID" help:"A job id (job_...) or workflow id (wf_...)."`
}

func (c *showCmd) Help() string {
	return `Prints one workflow or job: its status, the attempts with their budgets (S, P, H),
cancellation reason and disposition, waits, deadline_at and the time remaining or
overdue, the error if it failed, why it is not progressing if it is stuck, and its
timeline, one line per record, with times relative to dispatch. Steps count from 1
("step 2 of 3"); JSON's "step" and "step_index", and the timeline's record fields, keep
the journal's 0-based index. An id the journal holds no record of exits 3 (not found).

Examples:
  qctl -d data show job_01KE3T5W2C8F0000000000000B
  qctl -d data show wf_01KE3T5W2C8F0000000000000W --json`
}

// loadState returns the state at the end of the log: the newest snapshot
// that passes its checks, then the records after it; or, with
// fromSnapshot false, the fold of the whole log.
func (x *runCtx) loadState(j *journal.Journal, fromSnapshot bool) (*folder, error) {
	f := newFolder()
	if !fromSnapshot {
		if err := x.foldAll(j, f, "show", math.MaxUint64); err != nil {
			return nil, err
		}
		return f, nil
	}
	snaps := j.Snapshots()
	for snaps.Next() {
		s := snaps.Snapshot()
		if s.Err != nil {
			continue
		}
		if st, err := replay.Decode(s.State); err == nil && st.LastSeq == s.Seq {
			f.st = st
			break
		}
	}
	err := snaps.Err()
	snaps.Close()
	if err != nil {
		return nil, readError(j, err)
	}
	if _, err := x.foldFrom(j, f, "show", f.st.LastSeq+1, math.MaxUint64); err != nil {
		return nil, err
	}
	return f, nil
}

// streamRecords returns the records of stream, or of job id only when
// id is a step job in its workflow's stream. In a stream st set aside
// (spec/reliability.md §4.4), a record that fails its checks ends them:
// the records before it are returned, and it is shown as the damage.
func streamRecords(j *journal.Journal, st *replay.State, stream, id string) ([]record.Record, error) {
	var out []record.Record
	it := j.ScanStream(stream, 0)
	defer it.Close()
	for it.Next() {
		r := it.Record()
		if stream == id || jobIDOf(r.Body) == id {
			out = append(out, r)
		}
	}
	if err := it.Err(); err != nil {
		var ce *journal.CorruptError
		if q := st.Quarantined[stream]; q != nil && errors.As(err, &ce) && ce.Stream == stream && ce.Seq >= q.Seq {
			return out, nil
		}
		return nil, readError(j, err)
	}
	return out, nil
}

// attempt is one delivery attempt as the timeline shows it (DL-38).
type attempt struct {
	Job         string
	N           int32
	Token       uint64
	S, H, P     int64
	Disposition string // succeeded, retry_scheduled, buried, released, running, lost
	SettledAt   int64
	Code, Class string
	Error       string
	Reason      string
	ReasonAt    int64
	Joined      bool
	AvailableAt int64
}

func attemptsOf(recs []record.Record) []*attempt {
	var out []*attempt
	byToken := map[uint64]*attempt{}
	settle := func(r record.Record, o *record.Outcome, disp string, avail int64) {
		a := byToken[o.Token]
		if a == nil {
			return
		}
		a.Disposition, a.SettledAt = disp, r.At
		a.Code, a.Class, a.Error, a.Reason, a.ReasonAt, a.Joined = o.Code, o.Class, o.Error, o.Reason, o.ReasonAt, o.Joined
		a.AvailableAt = avail
	}
	for _, r := range recs {
		switch b := r.Body.(type) {
		case *record.AttemptStarted:
			a := &attempt{Job: b.JobID, N: b.Attempt, Token: r.Seq, S: b.StartAt, H: b.HardAt, P: b.NormalAt}
			out = append(out, a)
			byToken[r.Seq] = a
		case *record.AttemptSucceeded:
			settle(r, &b.Outcome, "succeeded", 0)
		case *record.AttemptRetryScheduled:
			settle(r, &b.Outcome, "retry_scheduled", b.AvailableAt)
		case *record.AttemptBuried:
			settle(r, &b.Outcome, "buried", 0)
		case *record.AttemptReleased:
			settle(r, &b.Outcome, "released", b.AvailableAt)
		}
	}
	return out
}

// openDisposition names an attempt without settlement: running if it is
// its job's open token, corrupt if its job's stream was set aside before
// it settled (spec/reliability.md §4.4), else lost (a crash left it open,
// DL-44).
func openDisposition(a *attempt, st *replay.State) string {
	if j := st.Jobs[a.Job]; j != nil && j.Status == replay.JobProcessing && j.Token == a.Token {
		return "running"
	}
	if q, ok := st.QuarantineOf(a.Job); ok {
		if j := q.Jobs[a.Job]; j != nil && j.Status == replay.JobProcessing && j.Token == a.Token {
			return statusCorrupt
		}
	}
	return "lost"
}

var attemptHeader = []string{"ATTEMPT", "TOKEN", "S", "P", "H", "BUDGET", "DISPOSITION", "AT", "REASON", "ERROR"}

func (a *attempt) cells(base int64, withJob bool) []string {
	settled := ""
	if a.SettledAt != 0 {
		settled = fmtRel(a.SettledAt, base)
	}
	reason := a.Reason
	if reason != "" && a.ReasonAt != 0 {
		reason += " at " + fmtRel(a.ReasonAt, base)
	}
	text := errText(a.Code, a.Error)
	if a.Class != "" && text != "" {
		text += " (" + a.Class + ")"
	}
	cells := []string{fmt.Sprint(a.N), fmt.Sprint(a.Token), fmtRel(a.S, base), fmtRel(a.P, base), fmtRel(a.H, base),
		fmtDur(time.Duration(a.H - a.S)), a.Disposition, settled, reason, truncate(text, 64)}
	if withJob {
		cells = append([]string{a.Job}, cells...)
	}
	return cells
}

func (a *attempt) json() object {
	o := object{
		{"type", "attempt"}, {"job_id", a.Job}, {"attempt", a.N}, {"token", a.Token},
		{"s", jsonTime(a.S)}, {"p", jsonTime(a.P)}, {"h", jsonTime(a.H)}, {"budget_ns", a.H - a.S},
		{"disposition", a.Disposition}, {"settled_at", jsonTime(a.SettledAt)},
	}
	if a.Code != "" || a.Error != "" {
		o = append(o, member{"code", a.Code}, member{"class", a.Class}, member{"error", a.Error})
	}
	if a.Reason != "" {
		o = append(o, member{"reason", a.Reason}, member{"reason_at", jsonTime(a.ReasonAt)})
	}
	if a.SettledAt != 0 {
		o = append(o, member{"joined", a.Joined})
	}
	if a.AvailableAt != 0 {
		o = append(o, member{"available_at", jsonTime(a.AvailableAt)})
	}
	return o
}

func (c *showCmd) Run(x *runCtx) error {
	// Arguments first: a bad id is a usage error whatever the journal's
	// state.
	if err := record.ValidateStream(c.ID); err != nil {
		return usageErr("%q is not a job or workflow id: %v", c.ID, err)
	}
	j, err := x.openJournal(x.dir)
	if err != nil {
		return err
	}
	defer j.Close()
	// From the newest snapshot, as the engine's Open reads the log; but
	// a stream damaged before the snapshot reads as set aside, as every
	// command that folds the whole log shows it, so a damaged record met
	// in id's stream has show fold the whole log instead.
	v, err := c.view(x, j, true)
	if ce := (*journal.CorruptError)(nil); errors.As(err, &ce) && ce.File == "" {
		v, err = c.view(x, j, false)
	}
	if err != nil {
		return err
	}
	if err := v.show(j, v.wfSum); err != nil {
		return err
	}
	if len(v.recs) == 0 && v.damage == nil {
		return notFoundErr("%s holds no job or workflow %s", j.Dir(), c.ID)
	}
	return quarantineFinding(j, v.st)
}

// view folds the log (from the newest snapshot, or whole) and reads the
// records of c.ID. A damaged record in its stream that the fold did not
// set aside is returned as readError's *exitError, which wraps the
// *journal.CorruptError.
func (c *showCmd) view(x *runCtx, j *journal.Journal, fromSnapshot bool) (*showView, error) {
	f, err := x.loadState(j, fromSnapshot)
	if err != nil {
		return nil, err
	}
	now := x.nowFor(j.LastAt())
	st := f.st
	loc, err := locate(j, st, c.ID)
	if err != nil {
		return nil, err
	}
	recs, err := streamRecords(j, st, loc.stream, c.ID)
	if err != nil {
		return nil, err
	}
	v := &showView{x: x, dir: j.Dir(), st: st, now: now, id: c.ID, stream: loc.stream, recs: recs, summary: loc.summary, wfSum: loc.wfSum}
	if loc.quarantine != nil {
		v.damage = damageOf(loc.quarantine)
	}
	return v, nil
}

// location says where the records of a job or workflow id are.
type location struct {
	stream     string                  // the stream that holds them: id, or a step job's workflow
	summary    *replay.JobSummary      // a finished job's terminal-index summary
	wfSum      *replay.WorkflowSummary // a finished workflow's
	quarantine *replay.Quarantine      // the quarantine that set id's stream aside
}

// locate finds the stream that holds id's records in st, the state at the
// end of j's log: a live job's own stream (its id, or its workflow's), a
// live workflow's, a quarantined one's, or, for a job or workflow that
// finished, what its terminal-index summary says. An id st and the index
// know nothing of is its own stream.
func locate(j *journal.Journal, st *replay.State, id string) (*location, error) {
	loc := &location{stream: id}
	if q, corrupt := st.QuarantineOf(id); corrupt {
		loc.quarantine = q
	}
	switch job := st.Jobs[id]; {
	case job != nil:
		loc.stream = job.Stream
	case loc.quarantine != nil:
		loc.stream = loc.quarantine.Stream
	case st.Workflows[id] == nil:
		b, ok, err := j.Index(id)
		if err != nil {
			return nil, readError(j, err)
		}
		if !ok {
			break
		}
		if s, err := replay.DecodeSummary(b); err == nil {
			loc.summary = &s
			if s.WorkflowID != "" {
				loc.stream = s.WorkflowID
			}
		} else if ws, werr := replay.DecodeWorkflowSummary(b); werr == nil {
			loc.wfSum = &ws
		} else {
			return nil, unreadableErr(err, "terminal-index entry of %s does not decode: %v (qctl verify lists every problem)", id, err)
		}
	}
	return loc, nil
}

// show prints the view of v's id: a workflow, a job, or another stream.
func (v *showView) show(j *journal.Journal, wfSum *replay.WorkflowSummary) error {
	st, recs, stream := v.st, v.recs, v.stream
	switch {
	case len(recs) == 0:
		if v.damage == nil {
			return nil
		}
		// Its first record is the damaged one: nothing says what it was.
		return v.other()
	case stream == v.id:
		if _, ok := recs[0].Body.(*record.WorkflowStarted); ok {
			v.wf = workflowView(st, v.id, wfSum, recs)
			return v.workflow(j)
		}
	}
	if jobIDOf(recs[0].Body) == v.id {
		if stream != v.id {
			// A step job: its workflow's status decides whether it may start.
			var ws *replay.WorkflowSummary
			if st.Workflows[stream] == nil {
				if b, ok, err := j.Index(stream); err == nil && ok {
					if s, err := replay.DecodeWorkflowSummary(b); err == nil {
						ws = &s
					}
				}
			}
			v.wf = workflowView(st, stream, ws, nil)
		}
		return v.job()
	}
	return v.other()
}

// jobSummary returns the terminal-index summary of job id, or nil if it
// has none or it does not decode (verify reports both).
func jobSummary(j *journal.Journal, id string) *replay.JobSummary {
	b, ok, err := j.Index(id)
	if err != nil || !ok {
		return nil
	}
	s, err := replay.DecodeSummary(b)
	if err != nil {
		return nil
	}
	return &s
}

// workflowView returns workflow id: live from st, else from its summary,
// else from its own records (an ended workflow without a summary, which
// verify reports), else nil.
func workflowView(st *replay.State, id string, sum *replay.WorkflowSummary, recs []record.Record) *wfView {
	if w := st.Workflows[id]; w != nil {
		return viewOf(w)
	}
	if q := st.Quarantined[id]; q != nil && q.Workflow != nil {
		return corruptView(q.Workflow, damageOf(q))
	}
	var b *record.WorkflowStarted
	if len(recs) > 0 {
		b, _ = recs[0].Body.(*record.WorkflowStarted)
	}
	if sum != nil {
		v := summaryView(*sum)
		if b != nil {
			// The summary has no start seq; its workflow_started has.
			v.StartSeq = recs[0].Seq
		}
		return v
	}
	if b == nil {
		return nil
	}
	v := &wfView{ID: id, Name: b.Name, Steps: b.Steps, StartSeq: recs[0].Seq, StartedAt: b.At, DeadlineAt: b.DeadlineAt, ParentID: b.ParentID}
	for _, r := range recs {
		switch b := r.Body.(type) {
		case *record.StepCompleted:
			v.Step = b.Next
		case *record.WorkflowFailed:
			v.Error, v.FailedAt = b.Error, b.At
		case *record.WorkflowCompleted:
			v.Status, v.EndedAt, v.EndSeq = replay.WorkflowCompleted, r.At, r.Seq
		case *record.WorkflowCancelled:
			v.Status, v.EndedAt, v.EndSeq = replay.WorkflowCancelled, r.At, r.Seq
		}
	}
	return v
}

type showView struct {
	x       *runCtx
	dir     string // the journal's
	st      *replay.State
	now     time.Time
	id      string
	stream  string
	recs    []record.Record
	summary *replay.JobSummary
	wfSum   *replay.WorkflowSummary // an ended workflow's terminal-index summary
	wf      *wfView                 // the workflow shown, or a step job's workflow
	// damage, when set, is why the shown id's stream was set aside
	// (spec/reliability.md §4.4): it is corrupt, and recs end before the
	// damaged record.
	damage *damage
}

func (v *showView) out() io.Writer { return v.x.env.Stdout }

// job shows one job.
func (v *showView) job() error {
	enq, _ := v.recs[0].Body.(*record.JobEnqueued)
	// Times count from the enqueue's decision instant. A record's at is
	// when its group was written, a little after the decision: a job
	// available at once is available from the decision itself, so its
	// available_at and its first attempt's S read "-0s" from the record.
	base := v.recs[0].At
	if enq != nil && enq.AvailableAt < base {
		base = enq.AvailableAt
	}
	atts := attemptsOf(v.recs)
	for _, a := range atts {
		if a.Disposition == "" {
			a.Disposition = openDisposition(a, v.st)
		}
	}
	var row jobRow
	job := v.st.Jobs[v.id]
	q, _ := v.st.QuarantineOf(v.id)
	switch {
	case job != nil:
		row = rowOf(job)
	case q != nil && q.Jobs[v.id] != nil:
		row = corruptRow(q.Jobs[v.id], v.damage)
	case v.summary != nil:
		s := v.summary
		row = jobRow{ID: s.ID, Status: s.Status.String(), Queue: s.Queue, Handler: s.Handler, Priority: s.Priority,
			Attempts: s.Attempts, Consumed: s.Consumed, WorkflowID: s.WorkflowID, LastCode: s.LastCode,
			LastError: s.LastError, FinishedAt: s.FinishedAt, EnqueueSeq: v.recs[0].Seq}
		if enq != nil {
			row.MaxAttempts, row.Step = enq.Retry.MaxAttempts, enq.Step
		}
	case enq != nil:
		// Completed without a terminal-index entry (verify reports it).
		row = jobRow{ID: v.id, Status: replay.JobCompleted.String(), Queue: enq.Queue, Handler: enq.Handler,
			Priority: enq.Priority, MaxAttempts: enq.Retry.MaxAttempts, WorkflowID: enq.WorkflowID, Step: enq.Step,
			Attempts: int32(len(atts)), EnqueueSeq: v.recs[0].Seq, FinishedAt: v.recs[len(v.recs)-1].At}
	}
	stuck := v.jobStuck(job, atts)
	if v.damage != nil {
		stuck = append(stuck, v.corruptLine())
	}
	if v.x.json {
		o := row.json()
		o[0] = member{"type", "show_job"}
		o = append(o, member{"stream", v.stream}, member{"enqueued_at", jsonTime(base)}, member{"stuck", nonNil(stuck)})
		if err := emit(v.out(), o); err != nil {
			return err
		}
		for _, a := range atts {
			if err := emit(v.out(), a.json()); err != nil {
				return err
			}
		}
		return v.timelineJSON(base)
	}
	queue := row.Queue
	if v.st.PausedQueues[row.Queue] {
		queue += " (paused)"
	}
	pairs := []string{
		"job", row.ID,
		"handler", row.Handler,
		"queue", queue,
		"priority", priorityText(row.Priority),
	}
	if row.WorkflowID != "" {
		wf := fmt.Sprintf("%s step %d", row.WorkflowID, row.Step+1)
		if v.wf != nil {
			wf = fmt.Sprintf("%s step %s (%s, %s)", row.WorkflowID, stepText(row.Step, v.wf.Steps, " of "), v.wf.Name, v.wf.status())
		}
		pairs = append(pairs, "workflow", wf)
	}
	pairs = append(pairs,
		"status", row.Status,
		"attempts", fmt.Sprintf("%d consumed of %d (%d started)", row.Consumed, row.MaxAttempts, row.Attempts),
		"enqueued", fmt.Sprintf("%s (seq %d)", fmtTime(base), row.EnqueueSeq))
	if row.Status == replay.JobPending.String() {
		pairs = append(pairs, "available", fmt.Sprintf("%s (%s)", fmtTime(row.AvailableAt), until(row.AvailableAt, v.now)))
	}
	if row.FinishedAt != 0 {
		pairs = append(pairs, "finished", fmt.Sprintf("%s (%s after enqueue)", fmtTime(row.FinishedAt), fmtDur(time.Duration(row.FinishedAt-base))))
	}
	if e := row.errorText(); e != "" {
		pairs = append(pairs, "error", e)
	}
	for i, s := range stuck {
		k := ""
		if i == 0 {
			k = "stuck"
		}
		pairs = append(pairs, k, s)
	}
	if err := kv(v.out(), pairs...); err != nil {
		return err
	}
	if len(atts) > 0 {
		fmt.Fprintln(v.out())
		t := newTable(v.out(), attemptHeader...)
		for _, a := range atts {
			t.row(a.cells(base, false)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return v.timeline(base)
}

// jobStuck says why an active job is not progressing at now.
func (v *showView) jobStuck(job *replay.Job, atts []*attempt) []string {
	if job == nil {
		return nil
	}
	var out []string
	switch job.Status {
	case replay.JobBuried:
		switch {
		case job.WorkflowID == "" || (v.wf != nil && v.wf.Status == replay.WorkflowRunning):
			out = append(out, "buried: nothing runs it until it is retried (Retry requeues it, JB-7)")
		case v.wf != nil && v.wf.Status == replay.WorkflowFailed:
			// Retry refuses a step job of a workflow that is not running.
			out = append(out, fmt.Sprintf("buried: its workflow %s failed; retry the workflow (RetryWorkflow %s re-enters this step, WF-18): Retry refuses a step job while its workflow is not running", job.WorkflowID, job.WorkflowID))
		default:
			status := "gone"
			if v.wf != nil {
				status = v.wf.Status.String()
			}
			out = append(out, fmt.Sprintf("buried: a step of workflow %s, which is %s; Retry requeues a step job only while its workflow is running (JB-7)", job.WorkflowID, status))
		}
	case replay.JobProcessing:
		s := fmt.Sprintf("attempt %d running since %s; delivery cutoff P %s, hard cutoff H %s",
			job.Attempts, fmtTime(job.StartAt), until(job.NormalAt, v.now), until(job.HardAt, v.now))
		out = append(out, s)
		if job.HardAt <= v.now.UnixNano() {
			out = append(out, "its hard cutoff has passed: if no engine runs this journal any more, the next start recovers the attempt and redelivers the job (DL-44)")
		}
	case replay.JobPending:
		if job.Lost {
			out = append(out, fmt.Sprintf("attempt %d was left open by a crash; recovery made the job pending again (DL-44)", job.Attempts))
		}
		if v.wf != nil && v.wf.Status != replay.WorkflowRunning {
			out = append(out, fmt.Sprintf("its workflow %s is %s: step jobs start only while it is running (JB-2)", v.wf.ID, v.wf.Status))
		}
		if v.st.PausedQueues[job.Queue] {
			out = append(out, fmt.Sprintf("queue %s is paused: nothing of it starts until ResumeQueue (JB-8)", job.Queue))
		}
		if job.AvailableAt > v.now.UnixNano() {
			why := "delayed at enqueue"
			if n := len(atts); n > 0 && atts[n-1].AvailableAt == job.AvailableAt {
				why = fmt.Sprintf("backoff after attempt %d (%s)", atts[n-1].N, atts[n-1].Disposition)
			}
			out = append(out, fmt.Sprintf("timer: available at %s (%s), %s", fmtTime(job.AvailableAt), until(job.AvailableAt, v.now), why))
		} else if len(out) == 0 {
			if job.LastCode == "HANDLER_NOT_REGISTERED" {
				out = append(out, fmt.Sprintf("parked on an unregistered handler: %s was not registered when it was last delivered", job.Handler))
			} else {
				out = append(out, fmt.Sprintf("eligible since %s (%s) but not started: no engine is running this journal, handler %s is not registered there (its jobs are parked), or every worker is busy",
					fmtTime(job.AvailableAt), until(job.AvailableAt, v.now), job.Handler))
			}
		}
	}
	return out
}

// workflow shows one workflow.
func (v *showView) workflow(j *journal.Journal) error {
	w := v.wf
	// Times count from the dispatch instant workflow_started records, as
	// the help says and the header's "dispatched" shows, not from the
	// record's at (when its group was written, later).
	base := v.recs[0].At
	if w.StartedAt != 0 {
		base = w.StartedAt
	}
	atts := attemptsOf(v.recs)
	for _, a := range atts {
		if a.Disposition == "" {
			a.Disposition = openDisposition(a, v.st)
		}
	}
	// Step jobs, in enqueue order.
	type stepJob struct {
		row jobRow
		enq *record.JobEnqueued
	}
	var steps []stepJob
	for _, r := range v.recs {
		b, ok := r.Body.(*record.JobEnqueued)
		if !ok {
			continue
		}
		row := jobRow{ID: b.JobID, Status: replay.JobCompleted.String(), Queue: b.Queue, Handler: b.Handler,
			Priority: b.Priority, MaxAttempts: b.Retry.MaxAttempts, WorkflowID: b.WorkflowID, Step: b.Step, EnqueueSeq: r.Seq}
		if job := v.st.Jobs[b.JobID]; job != nil {
			row = rowOf(job)
		} else if q, ok := v.st.QuarantineOf(b.JobID); ok && q.Jobs[b.JobID] != nil {
			row = corruptRow(q.Jobs[b.JobID], damageOf(q))
		} else if sum := jobSummary(j, b.JobID); sum != nil {
			// It left the state: completed, or buried and taken along by
			// its workflow's end (RL-11); its summary says which.
			row.Status, row.Attempts, row.Consumed = sum.Status.String(), sum.Attempts, sum.Consumed
			row.LastCode, row.LastError = sum.LastCode, sum.LastError
		} else {
			// No summary (verify reports it): completed if an attempt
			// succeeded, else buried.
			row.Status = replay.JobBuried.String()
			for _, a := range atts {
				if a.Job == b.JobID {
					row.Attempts, row.Consumed = a.N, a.N
					if a.Disposition == "succeeded" {
						row.Status = replay.JobCompleted.String()
					}
				}
			}
		}
		steps = append(steps, stepJob{row: row, enq: b})
	}
	var stuck []string
	switch w.Status {
	case replay.WorkflowWaitingSignal:
		var names []string
		if w.Wait != nil {
			names = w.Wait.Signals
		}
		stuck = append(stuck, fmt.Sprintf("waiting on signal %s (WF-6)", strings.Join(names, ", ")))
	case replay.WorkflowWaitingWorkflows:
		var ids []string
		mode := ""
		if w.Wait != nil {
			ids, mode = w.Wait.Workflows, w.Wait.Mode
			if mode == "quorum" {
				mode = fmt.Sprintf("quorum %d", w.Wait.Quorum)
			}
		}
		stuck = append(stuck, fmt.Sprintf("waiting on workflows %s (mode %s, WF-7)", strings.Join(ids, ", "), orDash(mode)))
	case replay.WorkflowPaused:
		stuck = append(stuck, "paused: its step jobs do not start until Resume (WF-15, WF-16)")
	case replay.WorkflowFailed:
		stuck = append(stuck, fmt.Sprintf("failed: nothing runs until RetryWorkflow %s (WF-18; deadline_at stays)", w.ID))
	case replay.WorkflowRunning:
		if w.DelayAt != 0 {
			stuck = append(stuck, fmt.Sprintf("timer: Delay step %s fires at %s (%s)", stepText(w.Step, w.Steps, " of "), fmtTime(w.DelayAt), until(w.DelayAt, v.now)))
		}
		if w.Child != "" {
			child := "which has ended: its end settles this step (WF-8)"
			if c := v.st.Workflows[w.Child]; c != nil {
				child = fmt.Sprintf("(%s, %s): its completion completes this step, its failure fails it (WF-8)", c.Name, c.Status)
			} else if _, ok := v.st.QuarantineOf(w.Child); ok {
				child = "(corrupt: its stream was set aside, spec/reliability.md §4.4)"
			}
			stuck = append(stuck, fmt.Sprintf("SubWorkflow step %s waits on child %s %s", stepText(w.Step, w.Steps, " of "), w.Child, child))
		}
		for _, s := range steps {
			job := v.st.Jobs[s.row.ID]
			if job == nil || s.row.Step != w.Step {
				continue
			}
			for _, r := range v.jobStuck(job, atts) {
				stuck = append(stuck, fmt.Sprintf("step job %s (%s, %s): %s", job.ID, job.Handler, job.Status, r))
			}
		}
		if w.DeadlineAt != 0 && w.DeadlineAt <= v.now.UnixNano() {
			stuck = append(stuck, fmt.Sprintf("deadline_at passed %s ago: the next deadline check fails it (WD-5, WD-6)", fmtDur(time.Duration(v.now.UnixNano()-w.DeadlineAt))))
		}
	}
	if (w.Status == replay.WorkflowPaused || w.Status.Waiting()) && w.DeadlineAt != 0 && w.DeadlineAt <= v.now.UnixNano() {
		late := fmtDur(time.Duration(v.now.UnixNano() - w.DeadlineAt))
		if w.Status.Waiting() {
			stuck = append(stuck, fmt.Sprintf("deadline_at passed %s ago: a waiting workflow does not expire, but the step boundary that ends the wait fails it (WD-7, WD-11)", late))
		} else {
			stuck = append(stuck, fmt.Sprintf("deadline_at passed %s ago: a paused workflow does not expire; after Resume the next deadline check fails it (WD-11)", late))
		}
	}
	for _, e := range v.st.Expiries() {
		if e.WorkflowID == w.ID {
			stuck = append(stuck, fmt.Sprintf("on-deadline handler %s of the expiry at seq %d has not finished: the next start runs it again (WD-10)", e.Handler, e.Seq))
		}
	}
	if v.damage != nil {
		// Nothing else moves it until the journal is repaired.
		stuck = []string{v.corruptLine()}
	}
	if v.x.json {
		o := w.json(v.now)
		o[0] = member{"type", "show_workflow"}
		o = append(o, member{"stuck", nonNil(stuck)})
		if err := emit(v.out(), o); err != nil {
			return err
		}
		for _, s := range steps {
			o := s.row.json()
			o[0] = member{"type", "step_job"}
			if err := emit(v.out(), o); err != nil {
				return err
			}
		}
		for _, a := range atts {
			if err := emit(v.out(), a.json()); err != nil {
				return err
			}
		}
		return v.timelineJSON(base)
	}
	dl := "none"
	if w.DeadlineAt != 0 {
		dl = fmtTime(w.DeadlineAt)
		if !w.canExpire() {
			dl += fmt.Sprintf(" (%s after dispatch)", fmtDur(time.Duration(w.DeadlineAt-base)))
		} else {
			if rem := remaining(w.DeadlineAt, v.now); strings.HasPrefix(rem, "overdue") {
				dl += " (" + rem + ")"
			} else {
				dl += " (" + rem + " remaining)"
			}
		}
	}
	pairs := []string{
		"workflow", w.ID,
		"name", w.Name,
		"status", w.status(),
		"step", stepText(w.Step, w.Steps, " of "),
		"dispatched", fmtTime(w.StartedAt),
		"deadline_at", dl,
	}
	if w.ParentID != "" {
		pairs = append(pairs, "parent", w.ParentID)
	}
	if w.Error != "" {
		pairs = append(pairs, "error", fmt.Sprintf("%s (failed at %s)", w.Error, fmtRel(w.FailedAt, base)))
	}
	if w.Signals > 0 {
		pairs = append(pairs, "signals", fmt.Sprintf("%d stored, not consumed yet", w.Signals))
	}
	if w.EndedAt != 0 {
		pairs = append(pairs, "ended", fmt.Sprintf("%s (%s after dispatch)", fmtTime(w.EndedAt), fmtDur(time.Duration(w.EndedAt-base))))
	}
	for i, s := range stuck {
		k := ""
		if i == 0 {
			k = "stuck"
		}
		pairs = append(pairs, k, s)
	}
	if err := kv(v.out(), pairs...); err != nil {
		return err
	}
	if len(steps) > 0 {
		fmt.Fprintln(v.out())
		t := newTable(v.out(), "STEP JOB", "STEP", "BRANCH", "HANDLER", "STATUS", "ATTEMPTS", "ERROR")
		for _, s := range steps {
			t.row(s.row.ID, fmt.Sprint(s.enq.Step+1), fmt.Sprint(s.enq.Branch), s.row.Handler, s.row.Status,
				fmt.Sprintf("%d/%d", s.row.Consumed, s.row.MaxAttempts), truncate(s.row.errorText(), 40))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(atts) > 0 {
		fmt.Fprintln(v.out())
		t := newTable(v.out(), append([]string{"JOB"}, attemptHeader...)...)
		for _, a := range atts {
			t.row(a.cells(base, true)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return v.timeline(base)
}

// stream shows a stream that is neither a job nor a workflow (the
// engine's), or one set aside before any record said which it is.
func (v *showView) other() error {
	var base int64
	if len(v.recs) > 0 {
		base = v.recs[0].At
	}
	if v.x.json {
		o := object{{"type", "show_stream"}, {"stream", v.stream}, {"records", len(v.recs)}}
		if v.damage != nil {
			o = append(o, member{"status", statusCorrupt}, member{"corrupt", v.damage.json()}, member{"stuck", []string{v.corruptLine()}})
		}
		if err := emit(v.out(), o); err != nil {
			return err
		}
		return v.timelineJSON(base)
	}
	pairs := []string{"stream", v.stream, "records", fmt.Sprint(len(v.recs))}
	if v.damage != nil {
		pairs = append(pairs, "status", statusCorrupt, "stuck", v.corruptLine())
	}
	if err := kv(v.out(), pairs...); err != nil {
		return err
	}
	return v.timeline(base)
}

// corruptLine says why the shown id is corrupt and what that means.
func (v *showView) corruptLine() string {
	d := v.damage
	return fmt.Sprintf("corrupt: seq %d of stream %s is damaged (%s); the engine sets the stream aside at open, at its last good record: no deliveries, timers, signals or records until the journal is repaired, and the other streams run (spec/reliability.md §4.4); qctl verify %s lists every problem",
		d.Seq, d.Stream, d.Reason, v.dir)
}

// damagedRow reports whether the timeline ends with a row for the
// damaged record: one that failed its checks, so that recs stop before
// it. A sound record that no longer applied is among recs.
func (v *showView) damagedRow() bool {
	if v.damage == nil {
		return false
	}
	for _, r := range v.recs {
		if r.Seq == v.damage.Seq {
			return false
		}
	}
	return true
}

func (v *showView) timeline(base int64) error {
	fmt.Fprintln(v.out())
	t := newTable(v.out(), "SEQ", "AT", "+T", "KIND", "DETAIL")
	o := recordOpts{tf: func(ns int64) string { return fmtRel(ns, base) }, stream: v.stream}
	for _, r := range v.recs {
		t.row(fmt.Sprint(r.Seq), fmtTime(r.At), fmtRel(r.At, base), r.Kind().String(), kindLine(r, o))
	}
	if v.damagedRow() {
		t.row(fmt.Sprint(v.damage.Seq), "-", "-", "damaged", v.damage.Reason)
	}
	return t.flush()
}

func (v *showView) timelineJSON(base int64) error {
	for _, r := range v.recs {
		o := recordJSON(r)
		o = append(o, member{"rel_ns", r.At - base})
		if err := emit(v.out(), o); err != nil {
			return err
		}
	}
	if v.damagedRow() {
		return emit(v.out(), append(object{{"type", "damaged"}}, v.damage.json()...))
	}
	return nil
}
