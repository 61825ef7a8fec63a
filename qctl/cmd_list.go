package qctl

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

type jobsCmd struct {
	Queue   string `placeholder:"Q" help:"Only jobs of queue Q."`
	Status  string `placeholder:"S" help:"Only jobs with status S: pending, processing, buried, completed or corrupt (comma-separated for several)."`
	Handler string `placeholder:"H" help:"Only jobs of handler H."`
	Limit   int    `placeholder:"K" help:"Print at most K jobs (0: all)."`
}

func (c *jobsCmd) Help() string {
	return `Lists jobs in enqueue order (JB-2) with status, queue, handler, priority, attempts
consumed of the maximum, when a pending job becomes available, its workflow and
step if it is a step job (wf_...#2: step 2, counting from 1), and its last error.
Completed jobs come from the log. A job whose stream has a damaged record is listed as
corrupt, as of the stream's last good record, with the damage (spec/reliability.md
§4.4): the engine sets that stream aside at open and runs the others, and qctl exits 1.
In JSON, "step" and "step_index" are the journal's 0-based step index.

Examples:
  qctl -d data jobs --status buried
  qctl -d data jobs --queue mail --status pending,processing --json`
}

func (c *jobsCmd) Run(x *runCtx) error {
	statuses := splitList(c.Status)
	for _, s := range statuses {
		if !slices.Contains(jobStatusOrder, s) {
			return usageErr("--status %q: want one of %s", s, strings.Join(jobStatusOrder, ", "))
		}
	}
	if c.Limit < 0 {
		return usageErr("--limit must be >= 0")
	}
	want := func(r jobRow) bool {
		return (len(statuses) == 0 || slices.Contains(statuses, r.Status)) &&
			(c.Queue == "" || r.Queue == c.Queue) && (c.Handler == "" || r.Handler == c.Handler)
	}
	j, err := x.openJournal(x.dir)
	if err != nil {
		return err
	}
	defer j.Close()
	f := newFolder()
	keep := newFirstN(c.Limit, func(r jobRow) uint64 { return r.EnqueueSeq })
	if len(statuses) == 0 || slices.Contains(statuses, "completed") || slices.Contains(statuses, "buried") {
		f.onJobEnd = func(job *replay.Job, r record.Record) func() {
			if row := endedRow(job, r); want(row) {
				return func() { keep.add(row) }
			}
			return nil
		}
	}
	if err := x.foldAll(j, f, "jobs", math.MaxUint64); err != nil {
		return err
	}
	for _, job := range f.st.Jobs {
		if row := rowOf(job); want(row) {
			keep.add(row)
		}
	}
	for _, row := range corruptRows(f.st) {
		if want(row) {
			keep.add(row)
		}
	}
	rows := keep.sorted()
	now := x.nowFor(j.LastAt())
	w := x.env.Stdout
	if x.json {
		for _, r := range rows {
			if err := emit(w, r.json()); err != nil {
				return err
			}
		}
		return quarantineFinding(j, f.st)
	}
	t := newTable(w, jobHeader...)
	for _, r := range rows {
		t.row(r.cells(now)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return quarantineFinding(j, f.st)
}

type workflowsCmd struct {
	Status string `placeholder:"S" help:"Only workflows with status S (running, paused, waiting_for_signal, waiting_for_workflows, failed, completed, cancelled, corrupt; comma-separated for several)."`
	Name   string `placeholder:"N" help:"Only workflows named N."`
	Limit  int    `placeholder:"K" help:"Print at most K workflows (0: all)."`
}

func (c *workflowsCmd) Help() string {
	return `Lists workflows in dispatch order with status, current step, start, deadline_at and
the time remaining before it, and the error of a failed one. STEP counts from 1 (2/3:
the second of three steps; done: all completed). A workflow whose stream has a damaged
record is listed as corrupt, as of the stream's last good record, with the damage
(spec/reliability.md §4.4), and qctl exits 1. In JSON, "step" and "step_index" are the
journal's 0-based step index and "steps" the count.

Examples:
  qctl -d data workflows --status waiting_for_signal
  qctl -d data workflows --name data_import --limit 10 --json`
}

func (c *workflowsCmd) Run(x *runCtx) error {
	statuses := splitList(c.Status)
	for _, s := range statuses {
		if !slices.Contains(wfStatuses, s) {
			return usageErr("--status %q: want one of %s", s, strings.Join(wfStatuses, ", "))
		}
	}
	if c.Limit < 0 {
		return usageErr("--limit must be >= 0")
	}
	j, err := x.openJournal(x.dir)
	if err != nil {
		return err
	}
	defer j.Close()
	want := func(w *wfView) bool {
		return (len(statuses) == 0 || slices.Contains(statuses, w.status())) && (c.Name == "" || w.Name == c.Name)
	}
	f := newFolder()
	keep := newFirstN(c.Limit, func(w *wfView) uint64 { return w.StartSeq })
	f.onWorkflowEnd = func(w *replay.Workflow, r record.Record) func() {
		if v := endedView(w, r); want(v) {
			return func() { keep.add(v) }
		}
		return nil
	}
	if err := x.foldAll(j, f, "workflows", math.MaxUint64); err != nil {
		return err
	}
	for _, w := range f.st.Workflows {
		if v := viewOf(w); want(v) {
			keep.add(v)
		}
	}
	for _, v := range corruptViews(f.st) {
		if want(v) {
			keep.add(v)
		}
	}
	rows := keep.sorted()
	now := x.nowFor(j.LastAt())
	out := x.env.Stdout
	if x.json {
		for _, w := range rows {
			if err := emit(out, w.json(now)); err != nil {
				return err
			}
		}
		return quarantineFinding(j, f.st)
	}
	t := newTable(out, wfHeader...)
	for _, w := range rows {
		t.row(w.cells(now)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return quarantineFinding(j, f.st)
}

// allWorkflows returns the live workflows of st, the ended ones and
// those of the streams st set aside, in dispatch order.
func allWorkflows(st *replay.State, ended []*wfView) []*wfView {
	out := make([]*wfView, 0, len(st.Workflows)+len(ended))
	out = append(out, ended...)
	for _, w := range st.Workflows {
		out = append(out, viewOf(w))
	}
	out = append(out, corruptViews(st)...)
	sort.Slice(out, func(i, k int) bool { return out[i].StartSeq < out[k].StartSeq })
	return out
}
