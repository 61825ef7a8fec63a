package qctl

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

type verifyCmd struct {
	Path string `arg:"" optional:"" name:"dir" placeholder:"DIR" help:"Journal directory (default: --dir)."`
}

func (c *verifyCmd) Help() string {
	return `Checks, in bounded memory: every record's checksum, header and decode; the prevSum
chain; seq continuity; append times never going back; the per-stream index both ways;
the snapshots (their checks, and that each equals the replay of the log up to its seq);
the terminal index (the summary of each job that left the state, completed or buried
with its workflow, agrees with replay); and a full replay
(every record is a transition replay accepts). Every problem names its seq and stream
where the journal can tell. Damage found in a file (a table block that fails Pebble's
checksum, a damaged WAL) names the file instead and stops verify: the checks it cut short
read "incomplete", or "not run" when the journal could not be opened.

A damaged record that the journal's index attributes to one job's or workflow's stream is
a problem of the records check; replay sets that stream aside there, as the engine's Open
does, and checks every other stream and the terminal index to the end. Snapshots taken
after it cannot be compared with replay, which no longer holds that stream as they do.

What verify cannot see: records lost from the end of the log. A WAL that was truncated or
deleted leaves a shorter journal that is still a gap-free prefix, exactly what a crash
before those records were synced leaves, so verify passes on it; only a copy made
earlier (a checkpoint, a backup) can show what is missing. The same holds for damage to
the last record of the newest WAL, which reads as a torn write and is dropped.

Exit code 0 only when every check holds, 1 when one does not (damage included, also
damage that keeps the journal from opening), 4 when an engine or another qctl holds the
directory, 5 when it cannot be opened for another reason (missing, not a journal, a
newer format).

With --json, each problem is a line {"type":"problem",...} (with "file" when it names
one), then one {"type":"verify",...} line whose "checks" maps each check to true (it
ran and holds), false (it found a problem) or null (it did not run or did not finish),
and whose "quarantined", when replay set streams aside, lists each one's seq, stream and
reason.

Examples:
  qctl verify data
  qctl verify data --json | grep '"type":"problem"'`
}

// The checks verify reports, in the order it prints them.
const (
	checkRecords    = "records"
	checkChain      = "chain"
	checkContinuity = "seq continuity"
	checkTimeOrder  = "time order"
	checkStreams    = "stream index"
	checkSnapshots  = "snapshots"
	checkIndex      = "terminal index"
	checkReplay     = "replay"
)

var checkOrder = []string{checkRecords, checkChain, checkContinuity, checkTimeOrder, checkStreams, checkSnapshots, checkIndex, checkReplay}

// problemKey identifies a problem of journal.Verify's report.
type problemKey struct {
	seq    uint64
	reason string
}

type problem struct {
	Check  string
	Seq    uint64 // 0: no record to name (damage in a file, a malformed key)
	Stream string
	File   string // the damaged file, when Pebble names one
	Reason string
}

// classify assigns a problem journal.Verify found to a check. Snapshot
// problems are not among them: the replay pass files those from the
// snapshot iterator's typed errors (see snapshotProblem).
func classify(reason string) string {
	switch {
	case strings.Contains(reason, "missing") && strings.HasPrefix(reason, "record"):
		return checkContinuity
	case strings.HasPrefix(reason, "chain"):
		return checkChain
	case strings.Contains(reason, "before the previous record"):
		return checkTimeOrder
	case strings.Contains(reason, "s/ "):
		return checkStreams
	case strings.Contains(reason, "index key"):
		return checkIndex
	}
	return checkRecords
}

type verifier struct {
	problems []problem
	dropped  int

	rep           *journal.Report // nil when the journal did not open
	replayed      uint64          // last seq replay folded
	replayStop    string          // why replay stopped before the end, if it did
	indexChecked  int64           // terminal-index entries checked against replay
	snapsCompared int             // snapshots compared with replay
	snapsStored   int             // snapshots stored, bad ones included
	snapsSetAside int             // snapshots not compared: a stream was set aside before them
	snapsOutdated int             // snapshots not compared: sound, but outdated (replay.ErrSnapshotOutdated)
	setAside      []*damage       // the streams replay set aside, by stream
	stopped       bool            // damage stopped the passes: checks without a problem are incomplete

	// snapFiled holds the journal.Verify problems that the replay pass
	// filed under the snapshots check already, as the journal words them.
	snapFiled map[problemKey]bool
}

func (v *verifier) add(p problem) {
	if len(v.problems) >= journal.ProblemsMax {
		v.dropped++
		return
	}
	v.problems = append(v.problems, p)
}

func (c *verifyCmd) Run(x *runCtx) error {
	dir := x.pick(c.Path)
	j, err := x.openJournal(dir)
	if err != nil {
		var ce *journal.CorruptError
		if errors.As(err, &ce) {
			// Damage found at open (a WAL or table Pebble refuses): a
			// finding, not a usage error.
			p := problem{Check: checkRecords, Seq: ce.Seq, Stream: ce.Stream, Reason: openDamage(ce)}
			if ce.File != "" {
				p = damageProblem(ce, "the journal cannot be opened, so no other check ran")
			}
			return x.verifyReport(dir, &verifier{problems: []problem{p}})
		}
		return err
	}
	defer j.Close()
	// The journal's own pass and the replay pass read independently: run
	// them side by side.
	type verified struct {
		rep journal.Report
		err error
	}
	done := make(chan verified, 1)
	go func() {
		rep, err := j.Verify()
		done <- verified{rep, err}
	}()
	v := &verifier{}
	res, rerr := c.replayPass(x, j, v)
	jv := <-done
	jerr := jv.err
	if passFinished(jv.rep, jerr) {
		jerr = nil
	}
	if jerr != nil || rerr != nil {
		// A pass could not finish. Damage Pebble found in a file is a
		// finding; anything else means the journal cannot be read.
		if ce := readDamage(j, jerr, rerr); ce != nil {
			return x.verifyReport(j.Dir(), &verifier{stopped: true, problems: []problem{damageProblem(ce, "verify stopped there")}})
		}
		var ee *exitError
		switch {
		case errors.As(rerr, &ee):
			return rerr // interrupted
		case rerr != nil:
			return readError(j, rerr)
		}
		return readError(j, jerr)
	}
	// Problems in check order: the journal's first, then replay's.
	out := &verifier{dropped: jv.rep.Dropped + v.dropped, rep: &jv.rep,
		replayed: res.replayed, replayStop: res.replayStop, indexChecked: res.indexChecked,
		snapsCompared: res.snapsCompared, snapsStored: res.snapsStored, snapsSetAside: res.snapsSetAside,
		snapsOutdated: res.snapsOutdated, setAside: res.setAside}
	for _, p := range jv.rep.Problems {
		if res.snapFiled[problemKey{p.Seq, p.Reason}] {
			continue // a bad snapshot: the replay pass filed it under snapshots
		}
		out.add(problem{Check: classify(p.Reason), Seq: p.Seq, Stream: p.Stream, Reason: p.Reason})
	}
	for _, p := range v.problems {
		if p.Check == checkRecords && out.has(p.Seq) {
			continue // the journal's pass named it already
		}
		out.add(p)
	}
	return x.verifyReport(j.Dir(), out)
}

// passFinished reports whether journal.Verify's err only restates the
// first problem of rep, that is, whether its pass ran to the end.
func passFinished(rep journal.Report, err error) bool {
	if err == nil {
		return true
	}
	var ce *journal.CorruptError
	if rep.OK() || errors.Is(err, journal.ErrFailStop) || !errors.As(err, &ce) || ce.Err != nil || ce.File != "" {
		return false
	}
	if len(rep.Problems) == 0 {
		return true // every problem was dropped past ProblemsMax
	}
	p := rep.Problems[0]
	return ce.Seq == p.Seq && ce.Reason == p.Reason
}

// readDamage returns the damage that stopped a pass, or nil if errs are
// not damage. Pebble fail-stops the journal on the first damaged block it
// meets, so the two passes, which race to it, fail with different errors
// (the damage itself, or the fail-stop); the fail-stop's cause, the first
// damage met, is preferred, and the report is built only from what every
// form carries (file, Pebble's first line, the file's first seq).
func readDamage(j *journal.Journal, errs ...error) *journal.CorruptError {
	var ce *journal.CorruptError
	if errors.As(j.FailStopped(), &ce) {
		return ce
	}
	for _, err := range errs {
		if err != nil && errors.As(err, &ce) {
			return ce
		}
	}
	return nil
}

// isFileDamage reports whether err from a read is damage Pebble found
// (in a file, or the fail-stop it caused) rather than a record check
// failure, which names its seq.
func isFileDamage(err error) bool {
	var ce *journal.CorruptError
	return errors.Is(err, journal.ErrFailStop) || (errors.As(err, &ce) && (ce.File != "" || ce.Seq == 0))
}

// damageProblem is the problem of damage found in a file: a block whose
// checksum Pebble refuses, or a WAL the journal refuses at open; then says
// what verify did about it.
func damageProblem(ce *journal.CorruptError, then string) problem {
	p := problem{Check: checkRecords, File: fileName(ce.File), Reason: damageText(ce) + "; " + then}
	if ce.Err != nil {
		p.Reason += "; restore the journal from a checkpoint or backup"
	}
	return p
}

// damageText describes damage found in a file. Pebble's bounds are those
// of the whole file, not of the damaged block, so no record is named: the
// file's first seq says where its keys start.
func damageText(ce *journal.CorruptError) string {
	file := fileName(ce.File)
	name := "a file"
	if file != "" {
		name = "file " + file
	}
	if ce.Err == nil {
		return name + ": " + ce.Reason
	}
	// Pebble joins a multi-line carrier of machine-readable details to
	// its message; the first line is the part meant for people, and its
	// "pebble: file N:" prefix repeats the file.
	detail := firstLine(ce.Err)
	detail = strings.TrimPrefix(detail, "pebble: file "+strings.TrimSuffix(file, filepath.Ext(file))+": ")
	s := name + " is damaged: " + detail
	if ce.Seq != 0 {
		s += fmt.Sprintf(" (the file's keys start at seq %d)", ce.Seq)
	}
	return s
}

// corruptText is the message of a corruption error outside verify.
func corruptText(err error) string {
	var ce *journal.CorruptError
	if errors.As(err, &ce) && ce.File != "" {
		return damageText(ce)
	}
	return firstLine(err)
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// fileName is path's last element, "" for "".
func fileName(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}

// replayPass checks the snapshots, replays the whole log and checks the
// terminal index against it, adding problems to v. It returns its counts
// in a verifier; an error (as the journal returned it) means the pass
// could not finish.
func (c *verifyCmd) replayPass(x *runCtx, j *journal.Journal, v *verifier) (*verifier, error) {
	res := &verifier{snapFiled: map[problemKey]bool{}}

	// Snapshots must pass their own checks and equal the replay of the
	// log up to their seq.
	digests := map[uint64][32]byte{}
	snaps := j.Snapshots()
	for snaps.Next() {
		s := snaps.Snapshot()
		res.snapsStored++
		if s.Err != nil {
			if p, ok := snapshotProblem(s); ok {
				// journal.Verify reports the same error, worded as
				// s.Err.Error(): Run drops its copy.
				res.snapFiled[problemKey{s.Seq, s.Err.Error()}] = true
				v.add(p)
			}
			continue
		}
		st, err := replay.Decode(s.State)
		switch {
		case errors.Is(err, replay.ErrSnapshotOutdated):
			// An older version's snapshot: the engine's Open passes it
			// over as a cache miss, and so does this check.
			res.snapsOutdated++
		case err != nil:
			v.add(problem{Check: checkSnapshots, Seq: s.Seq, Reason: fmt.Sprintf("snapshot does not decode: %v", err)})
		case st.LastSeq != s.Seq:
			v.add(problem{Check: checkSnapshots, Seq: s.Seq, Reason: fmt.Sprintf("snapshot stored at seq %d holds the state of seq %d", s.Seq, st.LastSeq)})
		default:
			digests[s.Seq] = replay.Digest(st)
		}
	}
	serr := snaps.Err()
	snaps.Close()
	if serr != nil {
		return nil, serr
	}

	// Replay: every record is a transition replay accepts; each ended
	// job's terminal-index summary agrees with it. It folds as the
	// engine's Open does (replay.FoldQuarantining over the journal's
	// quarantining scan): a damaged record that the journal attributes to
	// one stream sets that stream aside, and the checks go on for every
	// other stream (spec/reliability.md §4.4). The damage is a problem of
	// the records check all the same (RL-5).
	f := newFolder()
	f.onJobEnd = func(job *replay.Job, r record.Record) func() {
		p := checkSummary(j, job, r)
		return func() { // r applied: its stream was not set aside
			res.indexChecked++
			if p != nil {
				v.add(*p)
			}
		}
	}
	f.onWorkflowEnd = func(w *replay.Workflow, r record.Record) func() {
		p := checkWorkflowSummary(j, w, r)
		return func() {
			res.indexChecked++
			if p != nil {
				v.add(*p)
			}
		}
	}
	var stream string // the stream of the last sound record read
	// compare compares the state the fold reached with the snapshot at its
	// seq, if there is one. After a stream was set aside it cannot: the
	// snapshot holds that stream as it stood.
	compare := func() {
		seq := f.st.LastSeq
		d, ok := digests[seq]
		switch {
		case !ok:
			return
		case len(f.st.Quarantined) > 0:
			res.snapsSetAside++
			return
		}
		res.snapsCompared++
		if got := replay.Digest(f.st); got != d {
			v.add(problem{Check: checkSnapshots, Seq: seq, Stream: stream,
				Reason: fmt.Sprintf("snapshot differs from the replay of seqs 1..%d (digest %s, replay %s)", seq, short(d), short(got))})
		}
	}
	s := x.foldScan(j, f, "verify", 1, math.MaxUint64)
	s.each = func(it *journal.Iter) {
		compare() // the fold took the record before this one
		if it.Damaged() != nil {
			return
		}
		r := it.Record()
		stream = r.Stream
		if b, ok := r.Body.(*record.WorkflowStarted); ok && b.IdempotencyKey != "" {
			res.indexChecked++
			if p := checkIdempotency(j, b, r); p != nil {
				v.add(*p)
			}
		}
	}
	_, ferr := replay.FoldQuarantining(f.st, s)
	if ferr == nil {
		compare()
	}
	s.close()
	res.replayed = f.st.LastSeq
	scanErr := s.Iter.Err()
	switch {
	case ferr == nil:
	case s.err != nil:
		return nil, s.err
	case scanErr != nil:
		var ce *journal.CorruptError
		if !errors.As(scanErr, &ce) || isFileDamage(scanErr) {
			return nil, scanErr
		}
		v.add(problem{Check: checkRecords, Seq: ce.Seq, Stream: ce.Stream, Reason: ce.Reason})
		res.replayStop = fmt.Sprintf("seq %d cannot be read; replay stopped there", ce.Seq)
	default:
		var ae *replay.ApplyError
		if errors.As(ferr, &ae) {
			v.add(problem{Check: checkReplay, Seq: ae.Seq, Stream: ae.Stream, Reason: fmt.Sprintf("%s: %v", ae.Kind, ae.Err)})
		} else {
			v.add(problem{Check: checkReplay, Seq: res.replayed + 1, Reason: ferr.Error()})
		}
		res.replayStop = fmt.Sprintf("replay refused seq %d; later records were not replayed", res.replayed+1)
	}
	// The streams set aside: a damaged record is a problem of the records
	// check (the journal's pass names it too, and Run keeps one); a sound
	// record that no longer applied once another stream was set aside is
	// one of replay.
	for _, q := range quarantines(f.st) {
		d := damageOf(q)
		check := checkRecords
		var ce *journal.CorruptError
		if !errors.As(q.Err, &ce) || ce.Seq != q.Seq {
			check = checkReplay
		}
		v.add(problem{Check: check, Seq: q.Seq, Stream: q.Stream, Reason: d.Reason})
		res.setAside = append(res.setAside, d)
	}
	return res, nil
}

// snapshotProblem is the problem of a snapshot that fails its checks,
// or false when s.Err is damage Pebble found in a file (or the fail-stop
// it caused), which stops verify and is reported as such.
func snapshotProblem(s journal.Snapshot) (problem, bool) {
	var ce *journal.CorruptError
	if !errors.As(s.Err, &ce) {
		if errors.Is(s.Err, journal.ErrFailStop) {
			return problem{}, false
		}
		return problem{Check: checkSnapshots, Seq: s.Seq, Reason: "snapshot: " + s.Err.Error()}, true
	}
	if ce.File != "" {
		return problem{}, false
	}
	reason := ce.Reason
	if ce.Err != nil {
		reason += ": " + ce.Err.Error()
	}
	return problem{Check: checkSnapshots, Seq: ce.Seq, Stream: ce.Stream, Reason: reason}, true
}

func short(d [32]byte) string { return hex.EncodeToString(d[:8]) }

func (v *verifier) has(seq uint64) bool {
	for _, p := range v.problems {
		if p.Seq == seq {
			return true
		}
	}
	return false
}

// openDamage is the reason of a CorruptError from journal.Open.
func openDamage(ce *journal.CorruptError) string {
	s := ce.Reason
	if ce.File != "" {
		s += " in file " + ce.File
	}
	if ce.Err != nil {
		s += ": " + ce.Err.Error()
	}
	return s
}

// checkSummary checks the terminal-index entry of a job that r takes out
// of the state: completes it, or archives it buried with its workflow.
func checkSummary(j *journal.Journal, job *replay.Job, r record.Record) *problem {
	bad := func(format string, args ...any) *problem {
		return &problem{Check: checkIndex, Seq: r.Seq, Stream: r.Stream, Reason: fmt.Sprintf("job %s: ", job.ID) + fmt.Sprintf(format, args...)}
	}
	b, ok, err := j.Index(job.ID)
	switch {
	case err != nil:
		return bad("terminal index unreadable: %v", err)
	case !ok:
		return bad("%s by this record but has no terminal-index entry", endedStatus(r))
	}
	s, err := replay.DecodeSummary(b)
	if err != nil {
		return bad("terminal-index entry does not decode: %v", err)
	}
	want := replay.Summarize(job)
	want.Status = endedStatus(r)
	switch {
	case s.ID != job.ID:
		return bad("terminal-index entry names job %s", s.ID)
	case s.Status != want.Status:
		return bad("terminal-index status %s, replay says %s", s.Status, want.Status)
	case s.Seq != r.Seq:
		return bad("terminal-index entry names seq %d as the end, replay says %d", s.Seq, r.Seq)
	case s.Attempts != want.Attempts || s.Consumed != want.Consumed:
		return bad("terminal index says %d attempts (%d consumed), replay %d (%d)", s.Attempts, s.Consumed, want.Attempts, want.Consumed)
	case s.Handler != want.Handler || s.Queue != want.Queue || s.WorkflowID != want.WorkflowID:
		return bad("terminal index says handler %q queue %q workflow %q, replay %q %q %q", s.Handler, s.Queue, s.WorkflowID, want.Handler, want.Queue, want.WorkflowID)
	}
	return nil
}

// checkWorkflowSummary checks the terminal-index entry of a workflow that
// r completes or cancels.
func checkWorkflowSummary(j *journal.Journal, w *replay.Workflow, r record.Record) *problem {
	bad := func(format string, args ...any) *problem {
		return &problem{Check: checkIndex, Seq: r.Seq, Stream: r.Stream, Reason: fmt.Sprintf("workflow %s: ", w.ID) + fmt.Sprintf(format, args...)}
	}
	want := replay.WorkflowCompleted
	if r.Kind() == record.KindWorkflowCancelled {
		want = replay.WorkflowCancelled
	}
	b, ok, err := j.Index(w.ID)
	switch {
	case err != nil:
		return bad("terminal index unreadable: %v", err)
	case !ok:
		return bad("%s by this record but has no terminal-index entry", want)
	}
	s, err := replay.DecodeWorkflowSummary(b)
	switch {
	case err != nil:
		return bad("terminal-index entry does not decode: %v", err)
	case s.ID != w.ID:
		return bad("terminal-index entry names workflow %s", s.ID)
	case s.Seq != r.Seq:
		return bad("terminal-index entry names seq %d as the end, replay says %d", s.Seq, r.Seq)
	case s.Status != want:
		return bad("terminal-index status %s, replay says %s", s.Status, want)
	case s.Name != w.Name || s.Step != w.Step || s.DeadlineAt != w.DeadlineAt:
		return bad("terminal index says name %q step %d deadline_at %d, replay %q %d %d", s.Name, s.Step, s.DeadlineAt, w.Name, w.Step, w.DeadlineAt)
	}
	return nil
}

// checkIdempotency checks that an idempotency key used by a dispatch is
// reserved in the terminal index (WF-14).
func checkIdempotency(j *journal.Journal, b *record.WorkflowStarted, r record.Record) *problem {
	bad := func(format string, args ...any) *problem {
		return &problem{Check: checkIndex, Seq: r.Seq, Stream: r.Stream, Reason: fmt.Sprintf("idempotency key %q: ", b.IdempotencyKey) + fmt.Sprintf(format, args...)}
	}
	v, ok, err := j.Index(replay.IdempotencyPrefix + b.IdempotencyKey)
	switch {
	case err != nil:
		return bad("terminal index unreadable: %v", err)
	case !ok:
		return bad("used by this dispatch but not reserved in the terminal index")
	}
	idem, err := replay.DecodeIdempotent(v)
	switch {
	case err != nil:
		return bad("terminal-index entry does not decode: %v", err)
	case idem.WorkflowID != b.WorkflowID:
		return bad("reserved for workflow %s, used by %s", idem.WorkflowID, b.WorkflowID)
	}
	return nil
}

func (x *runCtx) verifyReport(dir string, v *verifier) error {
	rep := v.rep
	failed := map[string]int{}
	for _, p := range v.problems {
		failed[p.Check]++
	}
	ok := len(v.problems) == 0 && v.dropped == 0
	partial := ""
	if v.replayStop != "" {
		partial = fmt.Sprintf(" up to seq %d", v.replayed)
	}
	result := func(check string) string {
		if n := failed[check]; n > 0 {
			return fmt.Sprintf("FAIL (%d)", n)
		}
		if v.stopped {
			return "incomplete (stopped by the damaged file)"
		}
		if rep == nil {
			return "not run"
		}
		switch check {
		case checkSnapshots:
			text := fmt.Sprintf("ok (%d stored, %d compared with replay", v.snapsStored, v.snapsCompared)
			if v.snapsSetAside > 0 {
				text += fmt.Sprintf(", %d after a stream set aside", v.snapsSetAside)
			}
			if v.snapsOutdated > 0 {
				text += fmt.Sprintf(", %d outdated, not used", v.snapsOutdated)
			}
			return text + ")"
		case checkIndex:
			return fmt.Sprintf("ok (%d entries, %d checked against replay%s)", rep.IndexEntries, v.indexChecked, partial)
		case checkReplay:
			if v.replayStop != "" {
				return fmt.Sprintf("incomplete (%d of %d records): %s", v.replayed, rep.LastSeq, v.replayStop)
			}
			if len(v.setAside) > 0 {
				return fmt.Sprintf("ok (%d records; %s set aside, as the engine's Open does)", v.replayed, v.setAsideText())
			}
			return fmt.Sprintf("ok (%d records)", v.replayed)
		case checkStreams:
			return fmt.Sprintf("ok (%d streams)", rep.Streams)
		}
		return "ok"
	}
	// held is a check's JSON verdict: true, false, or nil when it did not
	// run or did not finish (text: "not run", "incomplete").
	held := func(check string) any {
		switch {
		case failed[check] > 0:
			return false
		case rep == nil || (check == checkReplay && v.replayStop != ""):
			return nil
		}
		return true
	}
	out := x.env.Stdout
	if x.json {
		for _, p := range v.problems {
			o := object{{"type", "problem"}, {"check", p.Check}, {"seq", p.Seq}, {"stream", p.Stream}}
			if p.File != "" {
				o = append(o, member{"file", p.File})
			}
			if err := emit(out, append(o, member{"reason", p.Reason})); err != nil {
				return err
			}
		}
		checks := object{}
		for _, c := range checkOrder {
			checks = append(checks, member{strings.ReplaceAll(c, " ", "_"), held(c)})
		}
		o := object{{"type", "verify"}, {"dir", dir}, {"ok", ok}, {"problems", len(v.problems) + v.dropped}}
		if rep != nil {
			o = append(o, member{"first_seq", rep.FirstSeq}, member{"last_seq", rep.LastSeq}, member{"records", rep.Records},
				member{"bytes", rep.Bytes}, member{"streams", rep.Streams}, member{"snapshots", v.snapsStored},
				member{"index_entries", rep.IndexEntries}, member{"replayed", v.replayed}, member{"index_checked", v.indexChecked},
				member{"snapshots_compared", v.snapsCompared}, member{"snapshots_outdated", v.snapsOutdated})
		}
		o = append(o, member{"checks", checks})
		if v.replayStop != "" {
			o = append(o, member{"replay_stopped", v.replayStop})
		}
		if len(v.setAside) > 0 {
			qs := make([]object, len(v.setAside))
			for i, d := range v.setAside {
				qs[i] = d.json()
			}
			o = append(o, member{"quarantined", qs})
		}
		if err := emit(out, o); err != nil {
			return err
		}
	} else {
		pairs := []string{"journal", dir}
		if rep != nil {
			pairs = append(pairs, "seq", fmt.Sprintf("%d..%d (%d records intact, %s)", rep.FirstSeq, rep.LastSeq, rep.Records, fmtBytes(rep.Bytes)))
		}
		if err := kv(out, pairs...); err != nil {
			return err
		}
		fmt.Fprintln(out)
		t := newTable(out, "CHECK", "RESULT")
		for _, c := range checkOrder {
			t.row(c, result(c))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(v.problems) > 0 {
			fmt.Fprintln(out)
			t := newTable(out, "CHECK", "SEQ", "STREAM", "PROBLEM")
			for _, p := range v.problems {
				seq := ""
				if p.Seq != 0 {
					seq = fmt.Sprint(p.Seq)
				}
				t.row(p.Check, seq, p.Stream, p.Reason)
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		fmt.Fprintln(out)
		if ok {
			fmt.Fprintln(out, "OK: every check holds")
		} else {
			n := len(v.problems) + v.dropped
			fmt.Fprintf(out, "FAIL: %d problem%s\n", n, plural(n))
		}
	}
	if !ok {
		return silentFindings
	}
	return nil
}

// setAsideText names the streams replay set aside, for the replay check's
// result: "stream S from seq N", or how many there are.
func (v *verifier) setAsideText() string {
	if len(v.setAside) == 1 {
		d := v.setAside[0]
		return fmt.Sprintf("stream %s from seq %d", d.Stream, d.Seq)
	}
	return fmt.Sprintf("%d streams", len(v.setAside))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
