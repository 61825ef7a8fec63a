package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Point reads of the terminal index (DESIGN §4): job ids, workflow ids and
// idempotency keys share it, so every lookup must tell an entry of another
// kind (no such job, no such workflow) from a damaged entry of its own.

// lookupFixture is an engine holding, in the terminal index, a completed
// job, a completed workflow with its completed step job, a cancelled
// workflow and an idempotency key, every append acknowledged.
type lookupFixture struct {
	*testBundle
	job, stepJob, done, cancelled, idem string
}

func setupLookup(t *testing.T) *lookupFixture {
	t.Helper()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	stepJob := make(chan string, 1)
	wfRegister(t, b.eng, api.NewWorkflow("one").Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		stepJob <- d.JobID()
		return api.State{"a": 1}, nil
	}))
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go"))
	f := &lookupFixture{testBundle: b, idem: replay.IdempotencyPrefix + "k1"}
	f.job = b.enqueue("work", msg{N: 1}, api.MaxAttempts(5))
	f.done = wfDispatch(b, "one", api.State{}, api.IdempotencyKey("k1"))
	f.cancelled = wfDispatch(b, "wait", api.State{})
	if err := b.eng.CancelWorkflow(b.ctx, f.cancelled); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.idle()
	f.stepJob = <-stepJob
	b.wantStatus(f.job, api.JobCompleted)
	b.wantStatus(f.stepJob, api.JobCompleted)
	wfWant(b, f.done, api.WorkflowCompleted)
	wfWant(b, f.cancelled, api.WorkflowCancelled)
	for _, id := range []string{f.job, f.stepJob, f.done, f.cancelled, f.idem} {
		if _, ok, err := api.JournalOf(b.eng).Index(id); err != nil || !ok {
			t.Fatalf("fixture: %s has no terminal-index entry (%v)", id, err)
		}
	}
	return f
}

// wantNotFound checks that err is what an unknown id gives: a *NameError
// of kind naming id, matching ErrNotFound and nothing of corruption.
func wantNotFound(t *testing.T, what string, err error, kind, id string) {
	t.Helper()
	var ne *api.NameError
	switch {
	case !errors.As(err, &ne):
		t.Fatalf("%s: %v (%T), want a *NameError", what, err, err)
	case ne.Kind != kind || ne.Name != id:
		t.Fatalf("%s: NameError{Kind %q, Name %q}, want {%q, %q}", what, ne.Kind, ne.Name, kind, id)
	case !errors.Is(err, api.ErrNotFound):
		t.Fatalf("%s: %v does not match ErrNotFound", what, err)
	case errors.Is(err, journal.ErrCorrupt):
		t.Fatalf("%s: %v matches ErrCorrupt", what, err)
	}
}

func TestJB3_WF21_LookupOfAnotherKindsIDIsNotFound(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen(nil)
		}
		_, unknownJob := f.eng.Status(f.ctx, "job_unknown")
		_, unknownWF := f.eng.Workflow(f.ctx, "wf_unknown")
		wantNotFound(t, "Status of an unknown id", unknownJob, "job", "job_unknown")
		wantNotFound(t, "Workflow of an unknown id", unknownWF, "workflow", "wf_unknown")
		for _, id := range []string{f.done, f.cancelled, f.idem} {
			_, err := f.eng.Status(f.ctx, id)
			wantNotFound(t, "Status of "+id, err, "job", id)
		}
		for _, id := range []string{f.job, f.stepJob, f.idem} {
			_, err := f.eng.Workflow(f.ctx, id)
			wantNotFound(t, "Workflow of "+id, err, "workflow", id)
		}
		// The right kind still reads.
		if j := f.status(f.job); j.Status != api.JobCompleted {
			t.Fatalf("job: %+v", j)
		}
		wfWant(f.testBundle, f.done, api.WorkflowCompleted)
	}
}

// damageIndex closes the engine, rewrites the terminal-index entries of ids
// with what damage makes of them, and opens the engine again.
func (f *lookupFixture) damageIndex(damage func(id string, v []byte) []byte, ids ...string) {
	f.t.Helper()
	if err := f.eng.Close(f.ctx); err != nil {
		f.t.Fatal(err)
	}
	j, err := journal.Open("db", journal.Options{FS: f.fs, Clock: f.clk})
	if err != nil {
		f.t.Fatal(err)
	}
	var index []journal.IndexEntry
	for _, id := range ids {
		v, ok, err := j.Index(id)
		if err != nil || !ok {
			f.t.Fatalf("index %s: %v", id, err)
		}
		index = append(index, journal.IndexEntry{ID: id, Value: damage(id, v)})
	}
	rec := record.Record{Stream: record.EngineStream, Body: &record.Debug{Subject: "test", Code: "test", Message: "damage the index"}}
	if _, err := j.AppendIndexed(f.ctx, index, rec); err != nil {
		f.t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

// setStatus returns v with the value of its "status" key (one uint8, as
// both summaries encode it) replaced by s.
func setStatus(t *testing.T, v []byte, s byte) []byte {
	t.Helper()
	i := strings.Index(string(v), "\xa6status\xcc")
	if i < 0 {
		t.Fatalf("no uint8 status in % x", v)
	}
	out := append([]byte(nil), v...)
	out[i+len("\xa6status\xcc")] = s
	return out
}

func TestRL6_DamagedEntryOfTheRightKindIsStillCorrupt(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	// Status 77 is no status: the shape still says job or workflow, the
	// strict decoder refuses the value.
	f.damageIndex(func(id string, v []byte) []byte { return setStatus(t, v, 77) }, f.job, f.done)
	_, err := f.eng.Status(f.ctx, f.job)
	if !errors.Is(err, journal.ErrCorrupt) || errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), f.job) {
		t.Fatalf("Status of a damaged job entry: %v, want ErrCorrupt naming the job", err)
	}
	_, err = f.eng.Workflow(f.ctx, f.done)
	if !errors.Is(err, journal.ErrCorrupt) || errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), f.done) {
		t.Fatalf("Workflow of a damaged workflow entry: %v, want ErrCorrupt naming the workflow", err)
	}
	// Bytes of no kind at all are corrupt whichever kind is asked for.
	f.damageIndex(func(string, []byte) []byte { return []byte{0x81, 0xa1, 'q', 0x01} }, f.stepJob, f.cancelled)
	if _, err := f.eng.Status(f.ctx, f.stepJob); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("Status of an entry of no kind: %v, want ErrCorrupt", err)
	}
	if _, err := f.eng.Workflow(f.ctx, f.cancelled); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("Workflow of an entry of no kind: %v, want ErrCorrupt", err)
	}
}

func TestJB6_JB7_BuryAndRetryOfACompletedJobAreStateErrors(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen(nil)
		}
		before := f.lastSeq()
		for _, c := range []struct {
			op   string
			call func(string) error
		}{
			{"Bury", func(id string) error { return f.eng.Bury(f.ctx, id) }},
			{"Retry", func(id string) error { return f.eng.Retry(f.ctx, id) }},
		} {
			for _, id := range []string{f.job, f.stepJob} {
				err := c.call(id)
				if !errors.Is(err, api.ErrState) || errors.Is(err, api.ErrNotFound) {
					t.Fatalf("%s of completed job %s: %v, want ErrState", c.op, id, err)
				}
				if !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "completed") {
					t.Fatalf("%s of completed job %s: %q does not name the job and its status", c.op, id, err)
				}
			}
			wantNotFound(t, c.op+" of an unknown job", c.call("job_unknown"), "job", "job_unknown")
			wantNotFound(t, c.op+" of a workflow id", c.call(f.done), "job", f.done)
		}
		if got := f.lastSeq(); got != before {
			t.Fatalf("refused calls appended %d records", got-before)
		}
	}
}

func TestWF15_WF16_WF17_WF18_ControlOfAFinishedWorkflowIsAStateError(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	// After reopen the finished workflows are known from the terminal
	// index only.
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen(nil)
		}
		before := f.lastSeq()
		calls := map[string]func(string) error{
			"PauseWorkflow":  func(id string) error { return f.eng.PauseWorkflow(f.ctx, id) },
			"ResumeWorkflow": func(id string) error { return f.eng.ResumeWorkflow(f.ctx, id) },
			"CancelWorkflow": func(id string) error { return f.eng.CancelWorkflow(f.ctx, id) },
			"RetryWorkflow":  func(id string) error { return f.eng.RetryWorkflow(f.ctx, id) },
		}
		for op, call := range calls {
			for id, status := range map[string]string{f.done: "completed", f.cancelled: "cancelled"} {
				err := call(id)
				if !errors.Is(err, api.ErrState) || errors.Is(err, api.ErrNotFound) {
					t.Fatalf("%s of %s workflow: %v, want ErrState", op, status, err)
				}
				if !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), status) {
					t.Fatalf("%s of %s workflow: %q does not name it and its status", op, status, err)
				}
			}
			var ne *api.NameError
			if err := call(f.job); !errors.As(err, &ne) || ne.Kind != "workflow" || !errors.Is(err, api.ErrNotFound) {
				t.Fatalf("%s of a job id: %v, want a workflow NameError matching ErrNotFound", op, err)
			}
		}
		if got := f.lastSeq(); got != before {
			t.Fatalf("refused calls appended %d records", got-before)
		}
	}
}

func TestJB3_CompletedJobReportsMaxAttempts(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen(nil)
		}
		if j := f.status(f.job); j.Status != api.JobCompleted || j.MaxAttempts != 5 {
			t.Fatalf("completed job with MaxAttempts(5): %+v", j)
		}
		if j := f.status(f.stepJob); j.Status != api.JobCompleted || j.MaxAttempts != 3 {
			t.Fatalf("completed step job with the default limit: %+v", j)
		}
	}
}

func TestJB3_WF21_MalformedIDIsANameError(t *testing.T) {
	t.Parallel()
	f := setupLookup(t)
	before := f.lastSeq()
	long := "job_" + strings.Repeat("x", record.StreamIDBytesMax)
	for _, id := range []string{"", long} {
		_, err := f.eng.Status(f.ctx, id)
		wantNotFound(t, "Status", err, "job", id)
		_, err = f.eng.Workflow(f.ctx, id)
		wantNotFound(t, "Workflow", err, "workflow", id)
		wantNotFound(t, "Bury", f.eng.Bury(f.ctx, id), "job", id)
		wantNotFound(t, "Retry", f.eng.Retry(f.ctx, id), "job", id)
	}
	if got := f.lastSeq(); got != before {
		t.Fatalf("refused calls appended %d records", got-before)
	}
}

func TestJB7_JB8_QueueCallsRefuseBadNamesAlike(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	before := b.lastSeq()
	for _, q := range []string{"", strings.Repeat("q", api.NameBytesMax+1)} {
		_, retryErr := b.eng.RetryBuried(b.ctx, q)
		errs := map[string]error{
			"RetryBuried": retryErr,
			"PauseQueue":  b.eng.PauseQueue(b.ctx, q),
			"ResumeQueue": b.eng.ResumeQueue(b.ctx, q),
		}
		want := errs["PauseQueue"]
		for op, err := range errs {
			var ne *api.NameError
			if !errors.As(err, &ne) || ne.Kind != "queue" || ne.Name != q {
				t.Fatalf("%s(%.8q): %v (%T), want a queue NameError", op, q, err, err)
			}
			if err.Error() != want.Error() {
				t.Fatalf("%s(%.8q): %q, PauseQueue says %q", op, q, err, want)
			}
		}
	}
	if got := b.lastSeq(); got != before {
		t.Fatalf("refused calls appended %d records", got-before)
	}
}
