package qctl

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

type inspectCmd struct {
	Path string `arg:"" optional:"" name:"dir" placeholder:"DIR" help:"Journal directory (default: --dir)."`
}

func (c *inspectCmd) Help() string {
	return `Reads the whole log once, in bounded memory, and prints: the seq range, record count
and size, jobs and workflows by status, paused queues, pending timers and the next one,
the nearest workflow deadline, and the newest run and shutdown.

A record that fails its checks and that the journal's index attributes to one job's or
workflow's stream sets that stream aside, as the engine does at open
(spec/reliability.md §4.4): inspect lists it under "quarantined" with the damaged seq,
the reason, and the jobs and workflow it stopped (JSON: "quarantined"), counts them as
corrupt, reports the other streams in full, and exits 1. Damage that leaves the order in
doubt (in the engine's stream, a missing record, a record the index does not name, a
broken chain between two sound records) refuses the journal with exit 5, as the engine's
Open does; qctl verify names every problem.

Examples:
  qctl inspect data
  qctl inspect data --json | jq .jobs`
}

// envelopeBytes is the stored size of the current record's envelope.
func envelopeBytes(e record.Envelope) int64 {
	uv := func(n int) int64 { return int64(binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(n))) }
	return 2 + 1 + 2 + 8 + 4 + 8 + uv(len(e.Stream)) + int64(len(e.Stream)) + uv(len(e.Payload)) + int64(len(e.Payload)) + 4
}

// snapshotInfo summarizes the stored snapshots.
type snapshotInfo struct {
	Valid, Bad int
	Newest     uint64
}

func snapshotsOf(j *journal.Journal) (snapshotInfo, error) {
	var s snapshotInfo
	it := j.Snapshots()
	defer it.Close()
	for it.Next() {
		sn := it.Snapshot()
		if sn.Err != nil {
			s.Bad++
			continue
		}
		if s.Valid == 0 {
			s.Newest = sn.Seq
		}
		s.Valid++
	}
	return s, it.Err()
}

func (c *inspectCmd) Run(x *runCtx) error {
	j, err := x.openJournal(x.pick(c.Path))
	if err != nil {
		return err
	}
	defer j.Close()
	f := newFolder()
	var (
		records, damaged, size int64
		firstAt, lastAt        int64
		byKind                 = map[record.Kind]int64{}
	)
	s := x.foldScan(j, f, "inspect", 1, math.MaxUint64)
	s.each = func(it *journal.Iter) {
		records++
		if it.Damaged() != nil {
			damaged++ // its size and kind cannot be trusted
			return
		}
		r := it.Record()
		size += envelopeBytes(it.Envelope())
		byKind[r.Kind()]++
		if firstAt == 0 {
			firstAt = r.At
		}
		lastAt = r.At
	}
	replayErr, err := s.fold()
	if err == nil && replayErr != nil {
		// The state stops at the refused record; the counts go on.
		for s.Next() {
		}
		if serr := s.Err(); serr != nil {
			_, err = s.classify(serr)
		}
	}
	s.close()
	if err != nil {
		return err
	}
	snaps, err := snapshotsOf(j)
	if err != nil {
		return readError(j, err)
	}
	now := x.nowFor(j.LastAt())
	st := f.st
	timers := timersOf(f)
	dls := deadlinesOf(f.st)
	jobs := jobCounts(f)
	wfs := wfCounts(st)
	paused := pausedQueues(st)
	last := st.LastRun()
	shut := lastShutdown(st)
	var firstSeq uint64
	if records > 0 {
		firstSeq = 1
	}

	w := x.env.Stdout
	if x.json {
		o := object{
			{"type", "inspect"}, {"dir", j.Dir()}, {"engine_id", j.EngineID()}, {"format_version", journal.FormatVersion},
			{"first_seq", firstSeq}, {"last_seq", j.LastSeq()}, {"records", records}, {"bytes", size}, {"records_damaged", damaged},
			{"first_at", jsonTime(firstAt)}, {"last_at", jsonTime(lastAt)}, {"now", now.Format(time.RFC3339Nano)},
			{"snapshots", snaps.Valid}, {"snapshot_seq", snaps.Newest}, {"snapshots_bad", snaps.Bad},
			{"jobs", countsJSON(jobs, jobStatusOrder)}, {"paused_queues", nonNil(paused)},
			{"workflows", countsJSON(wfs, wfStatuses)},
			{"quarantined", quarantineJSON(st)},
			{"timers", len(timers)},
		}
		if len(timers) > 0 {
			o = append(o, member{"next_timer", timers[0].json(now)})
		}
		if len(dls) > 0 {
			o = append(o, member{"next_deadline", dls[0].json(now)})
		}
		if last != nil {
			o = append(o, member{"last_run", object{{"run_id", last.RunID}, {"start_seq", last.StartSeq}, {"started_at", jsonTime(last.StartedAt)}, {"shut_down", last.Shutdown.Report != nil}}})
		}
		if shut != nil {
			o = append(o, member{"last_shutdown", reportJSON(shut)})
		}
		kinds := object{}
		for _, k := range record.Kinds() {
			if n := byKind[k]; n > 0 {
				kinds = append(kinds, member{k.String(), n})
			}
		}
		o = append(o, member{"records_by_kind", kinds})
		if replayErr != nil {
			o = append(o, member{"replay_error", replayErr.Error()})
		}
		if err := emit(w, o); err != nil {
			return err
		}
	} else {
		seqText := "empty"
		if records > 0 {
			seqText = fmt.Sprintf("%d..%d", firstSeq, j.LastSeq())
		}
		timeText := "-"
		if records > 0 {
			timeText = fmt.Sprintf("%s .. %s (%s)", fmtTime(firstAt), fmtTime(lastAt), fmtDur(time.Duration(lastAt-firstAt)))
		}
		snapText := "none"
		if snaps.Valid > 0 {
			snapText = fmt.Sprintf("%d (newest at seq %d)", snaps.Valid, snaps.Newest)
		}
		if snaps.Bad > 0 {
			snapText += fmt.Sprintf(", %d failing their checks (ignored at open)", snaps.Bad)
		}
		timerText := "none"
		if len(timers) > 0 {
			t := timers[0]
			timerText = fmt.Sprintf("%d pending; next %s (%s) %s %s", len(timers), fmtTime(t.At), until(t.At, now), t.Kind, t.ID)
		}
		dlText := "none"
		if len(dls) > 0 {
			d := dls[0]
			dlText = fmt.Sprintf("%s (%s) %s %s, %s", fmtTime(d.At), remaining(d.At, now), d.Name, d.ID, d.Status)
		}
		runText := "none"
		if last != nil {
			runText = fmt.Sprintf("%s started %s (seq %d)", last.RunID, fmtTime(last.StartedAt), last.StartSeq)
			if last.Shutdown.Report == nil {
				runText += "; no shutdown report: still running, or it crashed"
			}
		}
		shutText := "none"
		if shut != nil {
			shutText = shutdownText(shut)
		}
		recordsText := fmt.Sprintf("%d (%s)", records, fmtBytes(size))
		if damaged > 0 {
			recordsText += fmt.Sprintf(", %d damaged", damaged)
		}
		quarText := "none"
		if n := len(st.Quarantined); n > 0 {
			quarText = fmt.Sprintf("%d stream%s set aside for damaged records, as the engine sets them aside at open (below)", n, plural(n))
		}
		err := kv(w,
			"journal", j.Dir(),
			"engine", j.EngineID(),
			"seq", seqText,
			"records", recordsText,
			"time", timeText,
			"now", fmtTimeT(now),
			"snapshots", snapText,
			"jobs", countsText(jobs, jobStatusOrder),
			"paused queues", orDash(strings.Join(paused, ", ")),
			"workflows", countsText(wfs, wfStatuses),
			"quarantined", quarText,
			"timers", timerText,
			"next deadline", dlText,
			"last run", runText,
			"last shutdown", shutText,
		)
		if err != nil {
			return err
		}
		if err := quarantineTable(w, st); err != nil {
			return err
		}
		if err := kindTable(w, byKind); err != nil {
			return err
		}
	}
	if replayErr != nil {
		return replayFinding(replayErr)
	}
	return quarantineFinding(j, st)
}

func kindTable(w io.Writer, byKind map[record.Kind]int64) error {
	if len(byKind) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "KIND", "RECORDS")
	for _, k := range record.Kinds() {
		if n := byKind[k]; n > 0 {
			t.row(k.String(), fmt.Sprint(n))
		}
	}
	return t.flush()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// reportJSON renders a run's shutdown report. A shutdown that began and
// published no report has completion "", never a success (SD-26), and
// what its shutdown_initiated says.
func reportJSON(run *replay.Run) object {
	r := run.Shutdown.Report
	if r == nil {
		s := run.Shutdown.Initiated
		return object{
			{"run_id", run.RunID}, {"completion", ""}, {"forced", run.Shutdown.Forced}, {"trigger", s.Trigger},
			{"initiated_at", jsonTime(s.StartAt)}, {"budget_ns", s.TotalNanos},
		}
	}
	return object{
		{"run_id", run.RunID}, {"completion", r.Completion}, {"forced", r.Forced}, {"trigger", r.Trigger},
		{"initiated_at", jsonTime(r.InitiatedAt)}, {"budget_ns", r.BudgetNanos}, {"elapsed_ns", r.ElapsedNanos},
		{"failure_code", r.FailureCode},
	}
}
