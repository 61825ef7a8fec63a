package qctl

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

type stateCmd struct {
	Path string  `arg:"" optional:"" name:"dir" placeholder:"DIR" help:"Journal directory (default: --dir)."`
	At   *uint64 `placeholder:"SEQ" help:"Fold records 1..SEQ, SEQ >= 1 (default: the last seq)."`
}

func (c *stateCmd) Help() string {
	return `Folds the log from seq 1 up to --at and prints the state the engine would hold there:
its digest (equal to the live engine's at that seq, RL-7), jobs by status with every
job that is not completed, paused queues, runs, and workflows. A stream with a damaged
record is set aside as the engine sets it aside at open (spec/reliability.md §4.4): its
jobs and workflow are listed as corrupt, and qctl exits 1. An --at past the last seq
exits 3 (not found).

Examples:
  qctl state data --at 1200
  qctl state data --json`
}

func (c *stateCmd) Run(x *runCtx) error {
	if c.At != nil && *c.At == 0 {
		return usageErr("--at 0: seqs start at 1 (leave --at out for the last seq)")
	}
	j, err := x.openJournal(x.pick(c.Path))
	if err != nil {
		return err
	}
	defer j.Close()
	last := j.LastSeq()
	at := last
	if c.At != nil {
		at = *c.At
	}
	if at > last {
		return notFoundErr("%s ends at seq %d; there is no seq %d", j.Dir(), last, at)
	}
	f := newFolder()
	var ended []*wfView
	f.onWorkflowEnd = func(w *replay.Workflow, r record.Record) func() {
		v := endedView(w, r)
		return func() { ended = append(ended, v) }
	}
	// Buried step jobs that left the state with their workflow are not
	// completed: they are listed with the jobs that are still in it.
	var archived []jobRow
	f.onJobEnd = func(job *replay.Job, r record.Record) func() {
		if endedStatus(r) != replay.JobBuried {
			return nil
		}
		row := endedRow(job, r)
		return func() { archived = append(archived, row) }
	}
	// The time of seq at, or of the last sound record before it when at
	// is damaged.
	atNs, err := x.foldFrom(j, f, "state", 1, at)
	if err != nil {
		return err
	}
	st := f.st
	now := x.now
	if !x.nowSet {
		now = time.Unix(0, atNs).UTC()
	}
	digest := replay.Digest(st)
	jobs := make([]jobRow, 0, len(st.Jobs))
	for _, id := range st.JobIDs() {
		jobs = append(jobs, rowOf(st.Jobs[id]))
	}
	jobs = append(jobs, archived...)
	jobs = append(jobs, corruptRows(st)...)
	sort.SliceStable(jobs, func(i, k int) bool { return jobs[i].EnqueueSeq < jobs[k].EnqueueSeq })
	wfs := allWorkflows(f.st, ended)
	counts := jobCounts(f)
	paused := pausedQueues(st)
	out := x.env.Stdout
	if x.json {
		runs := make([]object, 0, len(st.Runs))
		for _, r := range st.Runs {
			runs = append(runs, object{{"run_id", r.RunID}, {"start_seq", r.StartSeq}, {"started_at", jsonTime(r.StartedAt)}, {"shut_down", r.Shutdown.Report != nil}})
		}
		o := object{
			{"type", "state"}, {"seq", st.LastSeq}, {"at", jsonTime(atNs)}, {"digest", hex.EncodeToString(digest[:])},
			{"jobs", countsJSON(counts, jobStatusOrder)}, {"paused_queues", nonNil(paused)},
			{"open_attempts", len(st.Tokens)}, {"unique_keys", len(st.Unique)},
			{"runs", runs}, {"workflows", countsJSON(wfCounts(st), wfStatuses)},
		}
		if err := emit(out, o); err != nil {
			return err
		}
		for _, r := range jobs {
			if err := emit(out, r.json()); err != nil {
				return err
			}
		}
		for _, w := range wfs {
			if err := emit(out, w.json(now)); err != nil {
				return err
			}
		}
		return quarantineFinding(j, st)
	}
	runText := "none"
	if r := st.LastRun(); r != nil {
		runText = fmt.Sprintf("%d (newest %s, started %s)", len(st.Runs), r.RunID, fmtTime(r.StartedAt))
	}
	if err := kv(out,
		"state at", fmt.Sprintf("seq %d (%s); the log goes on to seq %d", st.LastSeq, fmtTime(atNs), last),
		"digest", hex.EncodeToString(digest[:]),
		"jobs", countsText(counts, jobStatusOrder),
		"open attempts", fmt.Sprint(len(st.Tokens)),
		"paused queues", orDash(strings.Join(paused, ", ")),
		"runs", runText,
		"workflows", countsText(wfCounts(st), wfStatuses),
	); err != nil {
		return err
	}
	if len(jobs) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, jobHeader...)
		for _, r := range jobs {
			t.row(r.cells(now)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(wfs) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, wfHeader...)
		for _, w := range wfs {
			t.row(w.cells(now)...)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return quarantineFinding(j, st)
}
