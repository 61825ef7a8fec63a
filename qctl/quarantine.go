package qctl

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/replay"
)

// statusCorrupt is the status of a job or workflow whose stream the fold
// set aside because a record of it is damaged (spec/reliability.md §4.4),
// as api.JobCorrupt and api.WorkflowCorrupt name it.
const statusCorrupt = "corrupt"

// damage is why a stream was set aside: the first of its records that
// could not be applied, and the reason, in full (as verify words it) and
// in short (the check that failed).
type damage struct {
	Seq    uint64
	Stream string
	Reason string
	Short  string
}

func damageOf(q *replay.Quarantine) *damage {
	var ce *journal.CorruptError
	if errors.As(q.Err, &ce) && ce.Seq == q.Seq {
		d := corruptDamage(ce)
		d.Stream = q.Stream
		return d
	}
	d := &damage{Seq: q.Seq, Stream: q.Stream}
	if q.Err != nil {
		// A sound record that no longer applied after an earlier
		// quarantine: replay's error says why.
		d.Reason = firstLine(q.Err)
		d.Short, _, _ = strings.Cut(d.Reason, ": ")
	}
	return d
}

// corruptDamage is the damage of a record that failed its checks, as
// the journal reports it: ce's stream is the one the s/ index names.
func corruptDamage(ce *journal.CorruptError) *damage {
	d := &damage{Seq: ce.Seq, Stream: ce.Stream, Reason: ce.Reason, Short: ce.Reason}
	if ce.Err != nil {
		// A record check's error names its check first, as verify
		// shows it: "checksum record seq 10: ...".
		d.Reason = firstLine(ce.Err)
		if !strings.HasPrefix(d.Reason, ce.Reason) {
			d.Reason = ce.Reason + ": " + d.Reason
		}
	}
	return d
}

// text is d in short, for a table cell: "seq 34 damaged (checksum)".
func (d *damage) text() string { return fmt.Sprintf("seq %d damaged (%s)", d.Seq, d.Short) }

func (d *damage) json() object {
	return object{{"seq", d.Seq}, {"stream", d.Stream}, {"reason", d.Reason}}
}

// quarantines returns the streams st set aside, by stream id.
func quarantines(st *replay.State) []*replay.Quarantine {
	out := make([]*replay.Quarantine, 0, len(st.Quarantined))
	for _, id := range sortedKeys(st.Quarantined) {
		out = append(out, st.Quarantined[id])
	}
	return out
}

// corruptRows returns the jobs of the streams st set aside, with status
// corrupt, as of their stream's last good record.
func corruptRows(st *replay.State) []jobRow {
	var out []jobRow
	for _, q := range quarantines(st) {
		d := damageOf(q)
		for _, id := range q.JobIDs() {
			out = append(out, corruptRow(q.Jobs[id], d))
		}
	}
	return out
}

func corruptRow(j *replay.Job, d *damage) jobRow {
	r := rowOf(j)
	r.Status, r.AvailableAt, r.Corrupt = statusCorrupt, 0, d
	return r
}

// corruptViews returns the workflows of the streams st set aside, with
// status corrupt, as of their stream's last good record.
func corruptViews(st *replay.State) []*wfView {
	var out []*wfView
	for _, q := range quarantines(st) {
		if q.Workflow != nil {
			out = append(out, corruptView(q.Workflow, damageOf(q)))
		}
	}
	return out
}

func corruptView(w *replay.Workflow, d *damage) *wfView {
	v := viewOf(w)
	v.Corrupt, v.DelayAt, v.Wait = d, 0, nil
	return v
}

// firstFew names the first three of n items, item(i) naming the i-th, and
// how many more there are: what a finding's one line has room for.
func firstFew(n int, item func(i int) string) []string {
	const shown = 3
	var parts []string
	for i := range min(n, shown) {
		parts = append(parts, item(i))
	}
	if n > shown {
		parts = append(parts, fmt.Sprintf("%d more", n-shown))
	}
	return parts
}

// quarantineFinding is the finding of a fold that set streams aside, or
// nil. The command's output is complete; the exit code (ExitFindings)
// and this line say the journal needs repair.
func quarantineFinding(j *journal.Journal, st *replay.State) error {
	qs := quarantines(st)
	if len(qs) == 0 {
		return nil
	}
	parts := firstFew(len(qs), func(i int) string { return fmt.Sprintf("%s from seq %d", qs[i].Stream, qs[i].Seq) })
	return findingErr("%s has damaged records: %d stream%s set aside as the engine sets them aside at open (%s); their jobs and workflows show as corrupt, the other streams in full; qctl verify %s lists every problem",
		j.Dir(), len(qs), plural(len(qs)), strings.Join(parts, ", "), j.Dir())
}

// quarantineJSON lists the streams st set aside for inspect --json.
func quarantineJSON(st *replay.State) []object {
	out := []object{}
	for _, q := range quarantines(st) {
		d := damageOf(q)
		o := object{{"stream", q.Stream}, {"seq", q.Seq}, {"reason", d.Reason}}
		if q.Workflow != nil {
			o = append(o, member{"workflow", object{{"id", q.Workflow.ID}, {"name", q.Workflow.Name}, {"status", q.Workflow.Status.String()}}})
		}
		jobs := []object{}
		for _, id := range q.JobIDs() {
			j := q.Jobs[id]
			jobs = append(jobs, object{{"id", id}, {"handler", j.Handler}, {"status", j.Status.String()}})
		}
		out = append(out, append(o, member{"jobs", jobs}))
	}
	return out
}

// quarantineSetAside lists what q set aside for people: the workflow and
// the jobs, each with the status it had at the stream's last good record.
// A long list of jobs is cut: inspect --json and jobs list them all.
func quarantineSetAside(q *replay.Quarantine) string {
	var parts []string
	if w := q.Workflow; w != nil {
		parts = append(parts, fmt.Sprintf("workflow %s (%s)", w.Name, w.Status))
	}
	const shown = 4
	ids := q.JobIDs()
	for i, id := range ids {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more jobs", len(ids)-shown))
			break
		}
		j := q.Jobs[id]
		parts = append(parts, fmt.Sprintf("job %s %s (%s)", id, j.Handler, j.Status))
	}
	if len(parts) == 0 {
		return "nothing: no job or workflow had started in it"
	}
	return strings.Join(parts, ", ")
}

// quarantineTable prints the streams st set aside for inspect.
func quarantineTable(w io.Writer, st *replay.State) error {
	qs := quarantines(st)
	if len(qs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "QUARANTINED", "SEQ", "SET ASIDE", "REASON")
	for _, q := range qs {
		t.row(q.Stream, fmt.Sprint(q.Seq), quarantineSetAside(q), damageOf(q).Reason)
	}
	return t.flush()
}
