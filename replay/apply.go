package replay

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/quire-dev/quire/journal/record"
)

var (
	// ErrUnknownKind marks a record whose kind this version cannot fold.
	ErrUnknownKind = errors.New("replay: unknown record kind")
	// ErrImpossible marks a record that describes a transition the state
	// does not allow (a settlement of a revoked token, a start of a job
	// that is not pending, ...). The journal cannot be trusted past it.
	ErrImpossible = errors.New("replay: impossible transition")
	// ErrOrder marks a record whose seq does not follow the last applied one.
	ErrOrder = errors.New("replay: records out of order")
)

// ApplyError reports the record that could not be folded.
type ApplyError struct {
	Seq    uint64
	Stream string
	Kind   record.Kind
	Err    error
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("replay: seq %d stream %q %s: %v", e.Seq, e.Stream, e.Kind, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Fold applies recs in order, stopping at the first error.
func Fold(s *State, recs ...record.Record) error {
	for _, r := range recs {
		if err := Apply(s, r); err != nil {
			return err
		}
	}
	return nil
}

// Apply folds one record into s. It is pure and total: it reads no clock
// and no randomness (instants come from record bodies only), and any record it
// cannot fold returns an *ApplyError wrapping [ErrUnknownKind],
// [ErrImpossible] or [ErrOrder], never a panic. On error s is unchanged.
func Apply(s *State, r record.Record) error {
	fail := func(err error) error {
		return &ApplyError{Seq: r.Seq, Stream: r.Stream, Kind: r.Kind(), Err: err}
	}
	if r.Seq != s.LastSeq+1 {
		return fail(fmt.Errorf("%w: seq %d after %d", ErrOrder, r.Seq, s.LastSeq))
	}
	if s.Quarantined[r.Stream] != nil {
		// The stream stopped at its last good record (§4.4).
		s.LastSeq = r.Seq
		return nil
	}
	if err := apply(s, r); err != nil {
		return fail(err)
	}
	s.LastSeq = r.Seq
	return nil
}

func impossible(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrImpossible, fmt.Sprintf(format, args...))
}

// apply validates first and mutates only once the record is known to fit,
// so that a failed Apply leaves s unchanged.
func apply(s *State, r record.Record) error {
	if noBody(r.Body) {
		return fmt.Errorf("%w: record without body", ErrUnknownKind)
	}
	switch b := r.Body.(type) {
	case *record.RunStarted:
		// DL-44: attempts left open by a crash never settle; their jobs are
		// pending again, available at once, the old token revoked. The
		// start already counted as consumed.
		for _, id := range s.JobIDs() {
			j := s.Jobs[id]
			if j.Status != JobProcessing {
				continue
			}
			delete(s.Tokens, j.Token)
			j.Token = 0
			j.Status = JobPending
			j.Lost = true
			if j.AvailableAt > b.At {
				j.AvailableAt = b.At
			}
		}
		s.Runs = append(s.Runs, Run{RunID: b.RunID, StartSeq: r.Seq, StartedAt: b.At})
		if len(s.Runs) > RunsKeptMax {
			s.Runs = append(s.Runs[:0:0], s.Runs[len(s.Runs)-RunsKeptMax:]...)
		}
	case *record.Debug:
	case *record.JobEnqueued:
		if b.JobID == "" {
			return impossible("job enqueued without id") // a snapshot could not hold it
		}
		if _, ok := s.Jobs[b.JobID]; ok {
			return impossible("job %s enqueued twice", b.JobID)
		}
		j := &Job{
			ID: b.JobID, Stream: r.Stream, Handler: b.Handler, Queue: b.Queue, Priority: b.Priority,
			EnqueueSeq: r.Seq, AvailableAt: b.AvailableAt, Retry: b.Retry,
			DeliveryTimeoutNanos: b.DeliveryTimeoutNanos, UniqueKey: b.UniqueKey, Payload: b.Payload,
			WorkflowID: b.WorkflowID, Step: b.Step, Branch: b.Branch, Status: JobPending,
		}
		var w *Workflow
		if j.WorkflowID != "" {
			var ok bool
			if w, ok = s.Workflows[j.WorkflowID]; !ok {
				return impossible("step job %s of unknown workflow %s", j.ID, j.WorkflowID)
			}
		}
		if j.UniqueKey != "" {
			if other, ok := s.Unique[j.UniqueKey]; ok {
				return impossible("unique key of job %s already held by %s", b.JobID, other)
			}
			s.Unique[j.UniqueKey] = j.ID
		}
		if w != nil && w.Step == j.Step {
			w.Entered = true
		}
		s.addJob(j)
	case *record.AttemptStarted:
		j, err := job(s, b.JobID)
		if err != nil {
			return err
		}
		if j.Status != JobPending {
			return impossible("job %s started while %s", j.ID, j.Status)
		}
		if b.Attempt != j.Attempts+1 {
			return impossible("job %s attempt %d after %d", j.ID, b.Attempt, j.Attempts)
		}
		j.Status = JobProcessing
		j.Attempts = b.Attempt
		j.Consumed++
		j.Token = r.Seq
		j.StartAt, j.HardAt, j.NormalAt = b.StartAt, b.HardAt, b.NormalAt
		j.Lost = false
		s.Tokens[r.Seq] = j.ID
	case *record.AttemptSucceeded:
		j, err := settling(s, &b.Outcome)
		if err != nil {
			return err
		}
		// Asked before j leaves the state: it compares j with the other
		// jobs of its branch.
		current := s.CurrentStepJob(j)
		closeAttempt(s, j, &b.Outcome)
		releaseUnique(s, j)
		s.dropJob(j)
		s.Completed++
		// A step's branch output counts while its workflow is still at
		// that step and running or paused. It is kept, not merged, while
		// the workflow is failed at that step: a retry then starts no new
		// job for the branch (WF-18), and its output is merged when the
		// step completes. For a cancelled or completed workflow, a late
		// result is discarded (WF-20), and so is the result of a job a
		// retry of the workflow replaced (requeued by a version that
		// allowed it, JB-7): only the branch's current job counts.
		if w, ok := s.Workflows[j.WorkflowID]; ok && current &&
			(w.Status == WorkflowRunning || w.Status == WorkflowPaused || w.Status == WorkflowFailed) {
			w.Branches = append(w.Branches, BranchOutput{Branch: j.Branch, Output: b.Output})
		}
	case *record.AttemptRetryScheduled:
		j, err := settling(s, &b.Outcome)
		if err != nil {
			return err
		}
		closeAttempt(s, j, &b.Outcome)
		j.Status = JobPending
		j.AvailableAt = b.AvailableAt
	case *record.AttemptBuried:
		j, err := settling(s, &b.Outcome)
		if err != nil {
			return err
		}
		closeAttempt(s, j, &b.Outcome)
		j.Status = JobBuried
		releaseUnique(s, j)
		if b.Final {
			s.dropJob(j) // its summary is in the terminal index
		}
	case *record.AttemptReleased:
		j, err := settling(s, &b.Outcome)
		if err != nil {
			return err
		}
		closeAttempt(s, j, &b.Outcome)
		j.Status = JobPending
		j.AvailableAt = b.AvailableAt
		if j.Consumed > 0 {
			j.Consumed-- // DL-6: a release consumes nothing
		}
	case *record.JobBuried:
		j, err := job(s, b.JobID)
		if err != nil {
			return err
		}
		if j.Status != JobPending {
			return impossible("job %s buried while %s", j.ID, j.Status)
		}
		j.Status = JobBuried
		// JB-6: a job an operator buries keeps its last failure; one that
		// never failed takes the burial's code and message.
		if b.Code != record.CodeBuriedByOperator || j.LastCode == "" {
			j.LastCode, j.LastError = b.Code, b.Error
		}
		releaseUnique(s, j)
		if b.Final {
			s.dropJob(j) // its summary is in the terminal index
		}
	case *record.JobRequeued:
		j, err := job(s, b.JobID)
		if err != nil {
			return err
		}
		if j.Status != JobBuried {
			return impossible("job %s requeued while %s", j.ID, j.Status)
		}
		j.Status = JobPending
		j.AvailableAt = b.AvailableAt
		j.Consumed = 0
		if _, held := s.Unique[j.UniqueKey]; held && !b.KeepKey {
			// Written before KeepKey: a job whose key another took while
			// it was buried lost it.
			j.UniqueKey = ""
		}
		takeUnique(s, j)
	case *record.QueuePaused:
		s.PausedQueues[b.Queue] = true
	case *record.QueueResumed:
		delete(s.PausedQueues, b.Queue)
	case *record.ShutdownInitiated:
		if run := s.LastRun(); run != nil {
			run.Shutdown.Initiated = b
		}
	case *record.ShutdownForceRequested:
		if run := s.LastRun(); run != nil {
			run.Shutdown.Forced = true
		}
	case *record.ShutdownPhaseStarted:
		if run := s.LastRun(); run != nil {
			run.Shutdown.PhaseStart = b.Phase
		}
	case *record.ShutdownPhaseFinished:
		if run := s.LastRun(); run != nil {
			run.Shutdown.PhaseEnd = b.Phase
		}
	case *record.ShutdownReport:
		if run := s.LastRun(); run != nil {
			if run.Shutdown.Report != nil {
				return impossible("run %s has two shutdown reports", run.RunID)
			}
			run.Shutdown.Report = b
		}
	default:
		if ok, err := applyWorkflow(s, r); ok {
			return err
		}
		return fmt.Errorf("%w: %s", ErrUnknownKind, r.Body.Kind())
	}
	return nil
}

// noBody reports whether b is missing: nil, or a typed nil pointer, which
// the type switch of apply would otherwise match and dereference.
func noBody(b record.Body) bool {
	if b == nil {
		return true
	}
	v := reflect.ValueOf(b)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func job(s *State, id string) (*Job, error) {
	j, ok := s.Jobs[id]
	if !ok {
		return nil, impossible("job %s is not active", id)
	}
	return j, nil
}

// settling returns the job whose open attempt o settles (RL-10 fencing).
func settling(s *State, o *record.Outcome) (*Job, error) {
	j, err := job(s, o.JobID)
	if err != nil {
		return nil, err
	}
	if j.Status != JobProcessing || j.Token != o.Token || s.Tokens[o.Token] != j.ID {
		return nil, impossible("job %s settled with token %d, open token %d", j.ID, o.Token, j.Token)
	}
	return j, nil
}

func closeAttempt(s *State, j *Job, o *record.Outcome) {
	delete(s.Tokens, j.Token)
	j.Token = 0
	j.LastCode, j.LastError = o.Code, o.Error
}

// takeUnique gives j, pending again, its unique key, or, when another live
// job took the key while j was buried, puts j in line for it: Enqueue
// keeps returning the holder, and j takes the key when the holder ends
// (JB-5, JB-7).
func takeUnique(s *State, j *Job) {
	if j.UniqueKey == "" {
		return
	}
	if _, held := s.Unique[j.UniqueKey]; !held {
		s.Unique[j.UniqueKey] = j.ID
		return
	}
	line := s.uniqueWaiting[j.UniqueKey]
	i, _ := slices.BinarySearch(line, j.ID)
	s.uniqueWaiting[j.UniqueKey] = slices.Insert(line, i, j.ID)
}

// releaseUnique takes j, which stopped being pending or processing, out of
// deduplication: if it held its key, the first job in line for the key
// takes it (JB-5); if it was in line, it leaves the line.
func releaseUnique(s *State, j *Job) {
	if j.UniqueKey == "" {
		return
	}
	line := s.uniqueWaiting[j.UniqueKey]
	if s.Unique[j.UniqueKey] == j.ID {
		if len(line) == 0 {
			delete(s.Unique, j.UniqueKey)
			return
		}
		s.Unique[j.UniqueKey], line = line[0], line[1:]
	} else if i, ok := slices.BinarySearch(line, j.ID); ok {
		line = slices.Delete(line, i, i+1)
	}
	if len(line) == 0 {
		delete(s.uniqueWaiting, j.UniqueKey)
	} else {
		s.uniqueWaiting[j.UniqueKey] = line
	}
}
