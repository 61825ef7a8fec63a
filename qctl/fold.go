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
	// onJobEnd, if set, is called before a record that completes a job
	// (attempt_succeeded of its open attempt) is applied, with the job as
	// it stands.
	onJobEnd func(j *replay.Job, r record.Record)
	// onWorkflowEnd, if set, is called before a record that completes or
	// cancels a workflow is applied, with the workflow as it stands.
	onWorkflowEnd func(w *replay.Workflow, r record.Record)
}

func newFolder() *folder {
	return &folder{st: replay.New(), armed: map[string]armed{}}
}

// apply folds r. An error is replay's *replay.ApplyError: the journal
// cannot be trusted past r, and the state is unchanged.
func (f *folder) apply(r record.Record) error {
	switch b := r.Body.(type) {
	case *record.AttemptSucceeded:
		if j := f.st.Jobs[b.JobID]; f.onJobEnd != nil && j != nil && j.Token == b.Token {
			f.onJobEnd(j, r)
		}
	case *record.WorkflowCompleted:
		if w := f.st.Workflows[b.WorkflowID]; f.onWorkflowEnd != nil && w != nil {
			f.onWorkflowEnd(w, r)
		}
	case *record.WorkflowCancelled:
		if w := f.st.Workflows[b.WorkflowID]; f.onWorkflowEnd != nil && w != nil {
			f.onWorkflowEnd(w, r)
		}
	}
	if err := replay.Apply(f.st, r); err != nil {
		return err
	}
	f.track(r)
	return nil
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

// scan calls fn for every record of the log from..to, with progress. A
// journal error (corruption) ends the scan and is returned as an
// *exitError naming seq and stream; fn's error is returned as is.
func (x *runCtx) scan(j *journal.Journal, label string, from, to uint64, fn func(it *journal.Iter) error) error {
	p := x.progress(label, min(to, j.LastSeq()))
	defer p.done()
	it := j.Scan(from, to)
	defer it.Close()
	for it.Next() {
		if err := fn(it); err != nil {
			return err
		}
		p.step(it.Record().Seq)
		if err := x.ctx.Err(); err != nil {
			return usageErr("interrupted: %v", err)
		}
	}
	if err := it.Err(); err != nil {
		return readError(j, err)
	}
	return nil
}

// readError is the message of a journal read that failed.
func readError(j *journal.Journal, err error) error {
	if errors.Is(err, journal.ErrCorrupt) {
		return usageErr("%s is corrupt: %s (qctl verify %s lists every problem)", j.Dir(), corruptText(err), j.Dir())
	}
	if errors.Is(err, record.ErrNewerVersion) {
		return usageErr("%s holds records of a newer version of quire: %v", j.Dir(), err)
	}
	return usageErr("reading %s: %v", j.Dir(), err)
}

// replayFinding is the message of a record replay refused.
func replayFinding(err error) error {
	var ae *replay.ApplyError
	if errors.As(err, &ae) {
		return findingErr("replay refuses seq %d stream %q (%s): %v; qctl verify lists every problem", ae.Seq, ae.Stream, ae.Kind, ae.Err)
	}
	return findingErr("replay: %v", err)
}

// foldAll folds the whole log (or up to seq to) into f.
func (x *runCtx) foldAll(j *journal.Journal, f *folder, label string, to uint64) error {
	return x.scan(j, label, 1, to, func(it *journal.Iter) error {
		if err := f.apply(it.Record()); err != nil {
			return replayFinding(err)
		}
		return nil
	})
}
