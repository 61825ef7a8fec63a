package qctl

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// jobRow is one job as the listings show it.
type jobRow struct {
	ID          string
	Status      string
	Queue       string
	Handler     string
	Priority    uint8
	Attempts    int32
	Consumed    int32
	MaxAttempts int32
	AvailableAt int64 // pending jobs only
	EnqueueSeq  uint64
	WorkflowID  string
	Step        int32
	LastCode    string
	LastError   string
	FinishedAt  int64 // completed jobs only
	Lost        bool
	Corrupt     *damage // corrupt jobs only: why their stream was set aside
}

func rowOf(j *replay.Job) jobRow {
	r := jobRow{
		ID: j.ID, Status: j.Status.String(), Queue: j.Queue, Handler: j.Handler, Priority: j.Priority,
		Attempts: j.Attempts, Consumed: j.Consumed, MaxAttempts: j.Retry.MaxAttempts,
		EnqueueSeq: j.EnqueueSeq, WorkflowID: j.WorkflowID, Step: j.Step,
		LastCode: j.LastCode, LastError: j.LastError, Lost: j.Lost,
	}
	if j.Status == replay.JobPending {
		r.AvailableAt = j.AvailableAt
	}
	return r
}

// endedRow is j as r, a record [folder.onJobEnd] is called with, leaves
// it, as its terminal-index summary records it: completed by
// attempt_succeeded, with the last failure, if any, kept
// (replay.Summarize of the job before r), or buried for good when its
// workflow took it along; so that jobs says what show and api.Status say.
func endedRow(j *replay.Job, r record.Record) jobRow {
	row := rowOf(j)
	row.Status = endedStatus(r).String()
	row.AvailableAt, row.FinishedAt = 0, r.At
	row.Lost = false
	return row
}

func (r jobRow) errorText() string { return errText(r.LastCode, r.LastError) }

// errText joins an error code and its message for people, showing the
// code once: a message recorded as a handler error's Error() ("permanent
// CODE: message") carries the code already. JSON keeps both as recorded.
func errText(code, msg string) string {
	if code == "" {
		return msg
	}
	for _, class := range []string{"permanent ", "retryable ", ""} {
		if rest, ok := strings.CutPrefix(msg, class+code); ok && (rest == "" || strings.HasPrefix(rest, ": ")) {
			msg = strings.TrimPrefix(rest, ": ")
			break
		}
	}
	if msg == "" {
		return code
	}
	return code + ": " + msg
}

func (r jobRow) json() object {
	o := object{
		{"type", "job"}, {"id", r.ID}, {"status", r.Status}, {"queue", r.Queue}, {"handler", r.Handler},
		{"priority", r.Priority}, {"attempts", r.Attempts}, {"consumed", r.Consumed}, {"max_attempts", r.MaxAttempts},
		{"available_at", jsonTime(r.AvailableAt)}, {"enqueue_seq", r.EnqueueSeq},
	}
	if r.WorkflowID != "" {
		// step is kept for scripts that read it; step_index names what
		// both are: the journal's 0-based index (tables count from 1).
		o = append(o, member{"workflow_id", r.WorkflowID}, member{"step", r.Step}, member{"step_index", r.Step})
	}
	if r.LastCode != "" || r.LastError != "" {
		o = append(o, member{"last_code", r.LastCode}, member{"last_error", r.LastError})
	}
	if r.FinishedAt != 0 {
		o = append(o, member{"finished_at", jsonTime(r.FinishedAt)})
	}
	if r.Lost {
		o = append(o, member{"lost", true})
	}
	if r.Corrupt != nil {
		o = append(o, member{"corrupt", r.Corrupt.json()})
	}
	return o
}

var jobHeader = []string{"ID", "STATUS", "QUEUE", "HANDLER", "PRI", "ATTEMPTS", "AVAILABLE", "WORKFLOW", "ERROR"}

func (r jobRow) cells(now time.Time) []string {
	avail := ""
	if r.Status == replay.JobPending.String() {
		avail = until(r.AvailableAt, now)
	}
	wf := ""
	if r.WorkflowID != "" {
		wf = fmt.Sprintf("%s#%d", r.WorkflowID, r.Step+1)
	}
	errText := r.errorText()
	if r.Corrupt != nil {
		// Why it is stuck matters more than its last failure, which
		// show gives.
		errText = r.Corrupt.text()
	}
	return []string{
		r.ID, r.Status, r.Queue, r.Handler, priorityText(r.Priority),
		fmt.Sprintf("%d/%d", r.Consumed, r.MaxAttempts), avail, wf, truncate(errText, 48),
	}
}

// jobCounts counts the jobs f folded by status: those in its state;
// completed, the history counter; buried, also the buried step jobs that
// left the state with their workflow (f.archived); and corrupt, the jobs
// of the streams the state set aside.
func jobCounts(f *folder) map[string]int64 {
	st := f.st
	c := map[string]int64{"pending": 0, "processing": 0, "buried": f.archived, "completed": st.Completed, statusCorrupt: 0}
	for _, j := range st.Jobs {
		c[j.Status.String()]++
	}
	for _, q := range st.Quarantined {
		c[statusCorrupt] += int64(len(q.Jobs))
	}
	return c
}

func countsText(c map[string]int64, order []string) string {
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, "  ")
}

func countsJSON(c map[string]int64, order []string) object {
	o := make(object, 0, len(order))
	for _, k := range order {
		o = append(o, member{k, c[k]})
	}
	return o
}

var jobStatusOrder = []string{"pending", "processing", "buried", "completed", statusCorrupt}

func pausedQueues(st *replay.State) []string {
	return sortedKeys(st.PausedQueues)
}

// timer is something the engine will act on at an instant.
type timer struct {
	At     int64
	Kind   string // job_available, step_delay, attempt_timeout
	ID     string
	Detail string
}

func (t timer) json(now time.Time) object {
	return object{
		{"type", "timer"}, {"at", jsonTime(t.At)}, {"in_ns", t.At - now.UnixNano()},
		{"kind", t.Kind}, {"id", t.ID}, {"detail", t.Detail},
	}
}

// timersOf lists the pending timers of a folded journal, earliest first:
// jobs waiting for their available_at (delay, retry backoff), Delay steps
// of workflows, and the delivery cutoff P of open attempts.
func timersOf(f *folder) []timer {
	var out []timer
	for id, j := range f.st.Jobs {
		switch j.Status {
		case replay.JobPending:
			a, ok := f.armed[id]
			if !ok || j.AvailableAt <= a.At {
				continue
			}
			d := fmt.Sprintf("queue=%s handler=%s set by %s", j.Queue, j.Handler, a.Kind)
			if f.st.PausedQueues[j.Queue] {
				d += " (queue paused)"
			}
			out = append(out, timer{At: j.AvailableAt, Kind: "job_available", ID: id, Detail: d})
		case replay.JobProcessing:
			out = append(out, timer{At: j.NormalAt, Kind: "attempt_timeout", ID: id,
				Detail: fmt.Sprintf("attempt %d P; hard cutoff H=%s", j.Attempts, fmtTime(j.HardAt))})
		}
	}
	for id, w := range f.st.Workflows {
		// A Delay fires while paused too: the step completes and enters
		// nothing (WF-15).
		if w.DelayFireAt != 0 && (w.Status == replay.WorkflowRunning || w.Status == replay.WorkflowPaused) {
			out = append(out, timer{At: w.DelayFireAt, Kind: "step_delay", ID: id,
				Detail: fmt.Sprintf("%s step %s", w.Name, stepText(w.Step, w.Steps, " of "))})
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].At != out[k].At {
			return out[i].At < out[k].At
		}
		if out[i].Kind != out[k].Kind {
			return out[i].Kind < out[k].Kind
		}
		return out[i].ID < out[k].ID
	})
	return out
}

// deadline is one workflow deadline that can still fire.
type deadline struct {
	At     int64
	ID     string
	Name   string
	Status string
}

// deadlinesOf lists the deadlines of live workflows (running, paused,
// waiting), earliest first. A failed workflow's deadline is spent until it
// is retried.
func deadlinesOf(st *replay.State) []deadline {
	var out []deadline
	for id, w := range st.Workflows {
		if w.DeadlineAt == 0 || !canExpire(w.Status) {
			continue
		}
		out = append(out, deadline{At: w.DeadlineAt, ID: id, Name: w.Name, Status: w.Status.String()})
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].At != out[k].At {
			return out[i].At < out[k].At
		}
		return out[i].ID < out[k].ID
	})
	return out
}

func (d deadline) json(now time.Time) object {
	return object{
		{"type", "deadline"}, {"deadline_at", jsonTime(d.At)}, {"remaining_ns", d.At - now.UnixNano()},
		{"workflow_id", d.ID}, {"name", d.Name}, {"status", d.Status},
	}
}

// lastShutdown returns the newest run that began a shutdown or published
// a report. A shutdown that began and published no report is the last
// shutdown all the same, never an older run's success (SD-26, SD-33).
func lastShutdown(st *replay.State) *replay.Run {
	for i := len(st.Runs) - 1; i >= 0; i-- {
		if s := st.Runs[i].Shutdown; s.Report != nil || s.Initiated != nil {
			return &st.Runs[i]
		}
	}
	return nil
}

func shutdownText(run *replay.Run) string {
	r := run.Shutdown.Report
	if r == nil {
		return fmt.Sprintf("incomplete: began at %s, no report (the process ended during it) (run %s)",
			fmtTime(run.Shutdown.Initiated.StartAt), run.RunID)
	}
	forced := "not forced"
	if r.Forced {
		forced = "forced"
	}
	return fmt.Sprintf("%s, %s, elapsed %s of %s budget (run %s)", r.Completion, forced,
		fmtDur(time.Duration(r.ElapsedNanos)), fmtDur(time.Duration(r.BudgetNanos)), run.RunID)
}

func (w *wfView) json(now time.Time) object {
	o := object{
		{"type", "workflow"}, {"id", w.ID}, {"name", w.Name}, {"status", w.status()},
		{"step", w.Step}, {"step_index", w.Step}, {"steps", w.Steps}, // step: kept for scripts; both 0-based
		{"started_at", jsonTime(w.StartedAt)}, {"deadline_at", jsonTime(w.DeadlineAt)},
	}
	if w.StartSeq != 0 {
		o = append(o, member{"start_seq", w.StartSeq})
	}
	if w.DeadlineAt != 0 && w.canExpire() {
		o = append(o, member{"remaining_ns", w.DeadlineAt - now.UnixNano()})
	}
	if w.ParentID != "" {
		o = append(o, member{"parent_id", w.ParentID})
	}
	if w.Error != "" {
		o = append(o, member{"error", w.Error}, member{"failed_at", jsonTime(w.FailedAt)})
	}
	if w.EndedAt != 0 {
		o = append(o, member{"ended_at", jsonTime(w.EndedAt)}, member{"end_seq", w.EndSeq})
	}
	if w.DelayAt != 0 {
		o = append(o, member{"delay_fire_at", jsonTime(w.DelayAt)})
	}
	if w.Wait != nil {
		wait := object{}
		if len(w.Wait.Signals) > 0 {
			wait = append(wait, member{"signals", w.Wait.Signals})
		}
		if len(w.Wait.Workflows) > 0 {
			wait = append(wait, member{"workflows", w.Wait.Workflows}, member{"mode", w.Wait.Mode}, member{"quorum", w.Wait.Quorum})
		}
		o = append(o, member{"wait", wait})
	}
	if w.Signals > 0 {
		o = append(o, member{"signals_stored", w.Signals})
	}
	if w.Corrupt != nil {
		o = append(o, member{"corrupt", w.Corrupt.json()})
	}
	return o
}

var wfHeader = []string{"ID", "NAME", "STATUS", "STEP", "STARTED", "DEADLINE", "REMAINING", "ERROR"}

func (w *wfView) cells(now time.Time) []string {
	rem, dl := "", ""
	if w.DeadlineAt != 0 {
		dl = fmtTime(w.DeadlineAt)
		if w.canExpire() {
			rem = remaining(w.DeadlineAt, now)
		}
	}
	errText := w.Error
	if w.Corrupt != nil {
		errText = w.Corrupt.text()
	}
	return []string{w.ID, w.Name, w.status(), stepText(w.Step, w.Steps, "/"), fmtTime(w.StartedAt), dl, rem, truncate(errText, 40)}
}

// stepText shows the 0-based step index of a workflow of steps steps as
// people count: "2/3" or "2 of 3" (sep) for index 1, "done" once every
// step completed (the index is then steps), "2" when steps is unknown.
func stepText(step, steps int32, sep string) string {
	switch {
	case steps <= 0:
		return fmt.Sprint(step + 1)
	case step >= steps:
		return "done"
	}
	return fmt.Sprintf("%d%s%d", step+1, sep, steps)
}

// priorityText names a job priority as the api package does (JB-2): low,
// normal, high or urgent; a value past those, which no engine writes, as
// its number.
func priorityText(p uint8) string {
	if int(p) < len(priorityNames) {
		return priorityNames[p]
	}
	return fmt.Sprint(p)
}

var priorityNames = [...]string{"low", "normal", "high", "urgent"}
