package qctl

import (
	"fmt"
	"math"
)

type timersCmd struct{}

func (c *timersCmd) Help() string {
	return `Lists what the engine will act on next, earliest first: jobs waiting for their
available_at (a delay or a retry backoff; the record that set it is named), Delay steps
of running workflows, and the delivery cutoff P of open attempts. IN is measured against
--now, or the current time. A stream with a damaged record gets no timers, as the
engine sets it aside at open (spec/reliability.md §4.4); qctl then exits 1.

Examples:
  qctl -d data timers
  qctl -d data timers --now 2026-01-05T12:00:00Z --json`
}

func (c *timersCmd) Run(x *runCtx) error {
	j, err := x.openJournal(x.dir)
	if err != nil {
		return err
	}
	defer j.Close()
	f := newFolder()
	if err := x.foldAll(j, f, "timers", math.MaxUint64); err != nil {
		return err
	}
	now := x.nowFor(j.LastAt())
	ts := timersOf(f)
	if x.json {
		for _, t := range ts {
			if err := emit(x.env.Stdout, t.json(now)); err != nil {
				return err
			}
		}
		return quarantineFinding(j, f.st)
	}
	t := newTable(x.env.Stdout, "AT", "IN", "KIND", "ID", "DETAIL")
	for _, tm := range ts {
		t.row(fmtTime(tm.At), until(tm.At, now), tm.Kind, tm.ID, tm.Detail)
	}
	if err := t.flush(); err != nil {
		return err
	}
	return quarantineFinding(j, f.st)
}

type deadlinesCmd struct{}

func (c *deadlinesCmd) Help() string {
	return `Lists the deadlines of workflows that can still expire (running, paused, waiting),
by deadline_at, with the time remaining or overdue (WD-18). A running workflow past its
deadline is failed by the next deadline check. On-deadline handlers that have not
finished are listed after them (WD-10). A workflow whose stream has a damaged record
has none, as the engine sets it aside at open (spec/reliability.md §4.4); qctl then
exits 1.

Examples:
  qctl -d data deadlines
  qctl -d data deadlines --now 2026-01-06T09:00:00Z --json`
}

func (c *deadlinesCmd) Run(x *runCtx) error {
	j, err := x.openJournal(x.dir)
	if err != nil {
		return err
	}
	defer j.Close()
	f := newFolder()
	if err := x.foldAll(j, f, "deadlines", math.MaxUint64); err != nil {
		return err
	}
	now := x.nowFor(j.LastAt())
	ds := deadlinesOf(f.st)
	hs := f.st.Expiries()
	out := x.env.Stdout
	if x.json {
		for _, d := range ds {
			if err := emit(out, d.json(now)); err != nil {
				return err
			}
		}
		for _, h := range hs {
			if err := emit(out, object{{"type", "deadline_handler"}, {"workflow_id", h.WorkflowID}, {"name", h.Name},
				{"handler", h.Handler}, {"expiry_seq", h.Seq}}); err != nil {
				return err
			}
		}
		return quarantineFinding(j, f.st)
	}
	t := newTable(out, "DEADLINE_AT", "REMAINING", "WORKFLOW", "NAME", "STATUS")
	for _, d := range ds {
		t.row(fmtTime(d.At), remaining(d.At, now), d.ID, d.Name, d.Status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(hs) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "UNFINISHED HANDLER", "WORKFLOW", "NAME", "EXPIRY SEQ")
		for _, h := range hs {
			t.row(h.Handler, h.WorkflowID, h.Name, fmt.Sprint(h.Seq))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return quarantineFinding(j, f.st)
}
