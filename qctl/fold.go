package qctl

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// armed is the record that last set a pending job's available_at: the job
// waits on a timer when AvailableAt is later than At.
type armed struct {
	At   int64
	Kind record.Kind
}

// folder folds records into a replay.State, exactly as the engine does,
// and keeps beside it when each pending job's timer was armed. Memory is
// bounded by the live jobs and workflows, not by history.
type folder struct {
	st    *replay.State
	armed map[string]armed
	// archived counts the buried step jobs that left the state because
	// their workflow did (RL-11): taken along by a workflow_completed or
	// workflow_cancelled marked archive_buried, or buried by a
	// job_buried or attempt_buried marked final. They are buried for
	// good, and replay keeps no count of them.
	archived int64
	// onJobEnd, if set, is called for a record that takes a job out of
	// the state, with the job: attempt_succeeded of its open attempt,
	// which completes it, called before the record is applied; the
	// workflow_completed or workflow_cancelled marked archive_buried that
	// takes each of its workflow's buried step jobs along, also called
	// before; and a job_buried or attempt_buried marked final, called
	// once it applied, with the job as it buried it (see [endedStatus]).
	// What it returns, if not nil, is called once the record applied: a
	// fold that quarantines the record's stream instead
	// (spec/reliability.md §4.4) calls neither.
	onJobEnd func(j *replay.Job, r record.Record) (applied func())
	// onWorkflowEnd, if set, is called before a record that completes or
	// cancels a workflow is applied, with the workflow as it stands; what
	// it returns is called as onJobEnd's is.
	onWorkflowEnd func(w *replay.Workflow, r record.Record) (applied func())
}

func newFolder() *folder {
	return &folder{st: replay.New(), armed: map[string]armed{}}
}

// endedStatus is the status a job has once r, a record [folder.onJobEnd]
// is called with, took it out of the state: completed after
// attempt_succeeded, buried when its workflow took it along.
func endedStatus(r record.Record) replay.JobStatus {
	if r.Kind() == record.KindAttemptSucceeded {
		return replay.JobCompleted
	}
	return replay.JobBuried
}

// before calls the hooks r is for, if any, before r is applied, and
// returns what has to run once r applied.
func (f *folder) before(r record.Record) (applied func()) {
	switch b := r.Body.(type) {
	case *record.AttemptSucceeded:
		// The job's open attempt, as replay settles it.
		if j := f.st.Jobs[b.JobID]; f.onJobEnd != nil && j != nil && j.Status == replay.JobProcessing && j.Token == b.Token {
			return f.onJobEnd(j, r)
		}
	case *record.AttemptBuried:
		if b.Final {
			return f.finalBurial(b.JobID, r)
		}
	case *record.JobBuried:
		if b.Final {
			return f.finalBurial(b.JobID, r)
		}
	case *record.WorkflowCompleted:
		return f.workflowEnd(b.WorkflowID, b.ArchiveBuried, r)
	case *record.WorkflowCancelled:
		return f.workflowEnd(b.WorkflowID, b.ArchiveBuried, r)
	}
	return nil
}

// finalBurial is before for a record that buries job id and takes it
// out of the state, its workflow having left it (RL-11).
func (f *folder) finalBurial(id string, r record.Record) (applied func()) {
	j := f.st.Jobs[id]
	if j == nil {
		return nil // replay refuses r
	}
	return func() {
		f.archived++
		if f.onJobEnd != nil {
			// j is no longer in the state, but r buried it first.
			if fn := f.onJobEnd(j, r); fn != nil {
				fn()
			}
		}
	}
}

// workflowEnd is before for a record that completes or cancels workflow
// id and, with archive, takes its buried step jobs out of the state.
func (f *folder) workflowEnd(id string, archive bool, r record.Record) (applied func()) {
	w := f.st.Workflows[id]
	if w == nil {
		return nil
	}
	var then []func()
	if f.onWorkflowEnd != nil {
		then = append(then, f.onWorkflowEnd(w, r))
	}
	if archive {
		// As replay archives them: the workflow's buried jobs.
		var n int64
		for _, j := range f.st.WorkflowJobs(id) {
			if j.Status != replay.JobBuried {
				continue
			}
			n++
			if f.onJobEnd != nil {
				then = append(then, f.onJobEnd(j, r))
			}
		}
		then = append(then, func() { f.archived += n })
	}
	return func() {
		for _, fn := range then {
			if fn != nil {
				fn()
			}
		}
	}
}

// after completes the fold of r, which applied.
func (f *folder) after(r record.Record, applied func()) {
	if applied != nil {
		applied()
	}
	f.track(r)
}

// track keeps armed in step with the jobs replay holds.
func (f *folder) track(r record.Record) {
	if _, ok := r.Body.(*record.RunStarted); ok {
		// DL-44: attempts a crash left open are pending again from here.
		for id, j := range f.st.Jobs {
			if j.Lost {
				if _, ok := f.armed[id]; !ok {
					f.armed[id] = armed{At: r.At, Kind: record.KindRunStarted}
				}
			}
		}
		return
	}
	if r.Kind() == record.KindJobBuried || r.Kind() == record.KindJobRequeued || r.Kind() == record.KindJobEnqueued ||
		(r.Kind() >= record.KindAttemptStarted && r.Kind() <= record.KindAttemptReleased) {
		id := jobIDOf(r.Body)
		j := f.st.Jobs[id]
		if j == nil || j.Status != replay.JobPending {
			delete(f.armed, id)
			return
		}
		switch r.Kind() {
		case record.KindJobEnqueued, record.KindAttemptRetryScheduled, record.KindAttemptReleased, record.KindJobRequeued:
			f.armed[id] = armed{At: r.At, Kind: r.Kind()}
		}
	}
}

// progress prints a progress line on a terminal during long scans.
type progress struct {
	line    *progressLine
	elapsed func() time.Duration
	label   string
	last    uint64
	n       uint64
}

func (x *runCtx) progress(label string, last uint64) *progress {
	if x.line == nil {
		return nil
	}
	return &progress{line: x.line, elapsed: x.env.ElapsedFunc, label: label, last: last}
}

// step counts one record at seq; every 4096 records, once a second has
// passed, it rewrites the progress line.
func (p *progress) step(seq uint64) {
	if p == nil {
		return
	}
	p.n++
	if p.n%4096 != 0 || p.elapsed() < time.Second {
		return
	}
	pct := uint64(100)
	if p.last > 0 {
		pct = seq * 100 / p.last
	}
	p.line.show(fmt.Sprintf("qctl %s: seq %d of %d (%d%%)", p.label, seq, p.last, pct))
}

// done erases the progress line.
func (p *progress) done() {
	if p != nil {
		p.line.erase()
	}
}

// progressLine is the progress line on the terminal. Output written to
// Stdout or Stderr while it shows erases it first (see [eraseFirst]):
// they usually share that terminal, and a row printed after the line
// would otherwise continue it.
type progressLine struct {
	w     io.Writer
	shown bool
}

// show rewrites the line with text.
func (l *progressLine) show(text string) {
	fmt.Fprint(l.w, "\r"+text)
	l.shown = true
}

// erase clears the line if it shows, leaving the cursor at its start.
func (l *progressLine) erase() {
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}

// eraseFirst is an output writer that erases the progress line before
// each write.
type eraseFirst struct {
	w    io.Writer
	line *progressLine
}

func (e eraseFirst) Write(b []byte) (int, error) {
	e.line.erase()
	return e.w.Write(b)
}

// scan calls fn for every record of the log from..to, with progress. It
// reads past a record that fails its checks and that the journal
// attributes to one stream, as the engine's Open does
// (spec/reliability.md §4.4): fn sees it with [journal.Iter.Damaged] set.
// fn may also see damaged records before from (see [scanLog]). Damage
// that leaves the order in doubt ends the scan and is returned as an
// *exitError naming seq and stream; fn's error is returned as is.
func (x *runCtx) scan(j *journal.Journal, label string, from, to uint64, fn func(it *journal.Iter) error) error {
	p := x.progress(label, min(to, j.LastSeq()))
	defer p.done()
	it := scanLog(j, from, to)
	defer it.Close()
	for it.Next() {
		if err := fn(it); err != nil {
			return err
		}
		if d := it.Damaged(); d != nil {
			p.step(d.Seq)
		} else {
			p.step(it.Record().Seq)
		}
		if err := x.ctx.Err(); err != nil {
			return interrupted(err)
		}
	}
	if err := it.Err(); err != nil {
		return readError(j, err)
	}
	return nil
}

// scanLog returns the journal's quarantining scan of the log from..to.
// The scan checks the chain against record from-1 before it starts, and
// fails when that record is damaged, although a scan from earlier would
// read past it. It then starts at that record instead (one further back
// for each damaged record before it), whose chain check with the record
// after it is skipped as for any damaged record; callers pass over the
// records before from.
func scanLog(j *journal.Journal, from, to uint64) *journal.Iter {
	for {
		it := j.ScanQuarantining(from, to)
		var ce *journal.CorruptError
		if from <= 1 || !errors.As(it.Err(), &ce) || ce.Seq != from-1 || ce.File != "" {
			return it
		}
		it.Close()
		from--
	}
}

// readError is the *exitError of a journal read that failed: the journal
// cannot be read on, as the engine's Open could not (ExitUnreadable).
func readError(j *journal.Journal, err error) error {
	if errors.Is(err, journal.ErrCorrupt) {
		return unreadableErr(err, "%s is corrupt: %s (qctl verify %s lists every problem)", j.Dir(), corruptText(err), j.Dir())
	}
	if errors.Is(err, record.ErrNewerVersion) {
		return unreadableErr(err, "%s holds records of a newer version of quire: %v", j.Dir(), err)
	}
	return unreadableErr(err, "reading %s: %v", j.Dir(), err)
}

// replayFinding is the message of a record replay refused.
func replayFinding(err error) error {
	var ae *replay.ApplyError
	if errors.As(err, &ae) {
		return findingErr("replay refuses seq %d stream %q (%s): %v; qctl verify lists every problem", ae.Seq, ae.Stream, ae.Kind, ae.Err)
	}
	return findingErr("replay: %v", err)
}

// foldScan is the journal's quarantining scan as replay.FoldQuarantining
// reads it: damage that the journal attributes to one stream sets that
// stream aside and the fold goes on, as the engine's Open does
// (spec/reliability.md §4.4, RL-5); damage that leaves the order in doubt
// ends the scan with its error. Around the fold it keeps f's bookkeeping
// (f.before as each sound record is handed out, f.after once it applied),
// counts progress, and stops when x's ctx ends.
type foldScan struct {
	*journal.Iter
	x *runCtx
	j *journal.Journal
	f *folder // nil once the fold ended: the scan only reads on
	p *progress
	// each, if set, sees every record the scan reads, damaged ones
	// (Iter.Damaged) included.
	each func(it *journal.Iter)

	held    bool          // cur was handed out and not settled yet
	cur     record.Record // the sound record handed out last
	applied func()        // f.before's result for cur
	lastAt  int64         // At of the last sound record read
	err     error         // the interruption that ended the scan
}

func (x *runCtx) foldScan(j *journal.Journal, f *folder, label string, from, to uint64) *foldScan {
	return &foldScan{Iter: j.ScanQuarantining(from, to), x: x, j: j, f: f, p: x.progress(label, min(to, j.LastSeq()))}
}

// Next settles the record handed out before, which the fold has applied
// or set aside since, and reads the next one.
func (s *foldScan) Next() bool {
	s.settle()
	if err := s.x.ctx.Err(); err != nil {
		s.err = interrupted(err)
		return false
	}
	if !s.Iter.Next() {
		return false
	}
	if s.each != nil {
		s.each(s.Iter)
	}
	if d := s.Iter.Damaged(); d != nil {
		s.p.step(d.Seq)
		return true
	}
	s.cur = s.Iter.Record()
	s.lastAt = s.cur.At
	if s.f != nil {
		s.held, s.applied = true, s.f.before(s.cur)
	}
	s.p.step(s.cur.Seq)
	return true
}

// settle completes the fold of the record handed out before. The fold
// either applied it or, when it could not, quarantined its stream.
func (s *foldScan) settle() {
	if !s.held {
		return
	}
	s.held = false
	if s.f.st.Quarantined[s.cur.Stream] == nil {
		s.f.after(s.cur, s.applied)
	}
	s.applied = nil
}

// Err returns what ended the scan: the interruption, or the journal's
// error.
func (s *foldScan) Err() error {
	if s.err != nil {
		return s.err
	}
	return s.Iter.Err()
}

// fold folds the scan into s.f. A record replay refuses, with no
// quarantine to set its stream aside, ends the fold and is returned as
// replayErr; s then reads on without folding, for callers that count
// the rest. Anything else that ends the scan is returned as err, an
// *exitError: damage the journal cannot attribute to one stream refuses
// the journal (ExitUnreadable), as it refuses the engine's Open.
func (s *foldScan) fold() (replayErr, err error) {
	_, ferr := replay.FoldQuarantining(s.f.st, s)
	if ferr == nil {
		return nil, nil
	}
	s.f, s.held = nil, false
	return s.classify(ferr)
}

// classify sorts an error that ended s into a replay refusal or an
// *exitError.
func (s *foldScan) classify(err error) (replayErr, exitErr error) {
	switch {
	case s.err != nil:
		return nil, s.err
	case s.Iter.Err() != nil:
		return nil, readError(s.j, err)
	}
	return err, nil
}

// close ends the scan and its progress line.
func (s *foldScan) close() {
	s.p.done()
	s.Iter.Close()
}

// foldAll folds the log up to seq to into f, setting damaged streams
// aside as the engine does (see [foldScan]).
func (x *runCtx) foldAll(j *journal.Journal, f *folder, label string, to uint64) error {
	_, err := x.foldFrom(j, f, label, 1, to)
	return err
}

// foldFrom folds the log from..to into f, as foldAll does, and returns
// the At of the last sound record it read (0 if none).
func (x *runCtx) foldFrom(j *journal.Journal, f *folder, label string, from, to uint64) (lastAt int64, err error) {
	s := x.foldScan(j, f, label, from, to)
	defer s.close()
	replayErr, err := s.fold()
	switch {
	case err != nil:
		return 0, err
	case replayErr != nil:
		return 0, replayFinding(replayErr)
	}
	return s.lastAt, nil
}
