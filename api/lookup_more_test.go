package api_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
)

// RL-5, spec/reliability.md §4.4: what Status and Workflow say of the ids
// of a quarantined workflow stream.
//
//   - started: a workflow stream damaged after its workflow started. The
//     last good record says it is a workflow's stream, with a step job.
//     Workflow reads it corrupt; Status of the workflow's id is what
//     Status gives every workflow id, a *NameError matching ErrNotFound
//     (the corrupt status is reported where the id's kind is asked for),
//     and Status of its step job reads corrupt as of the last good record.
//   - unread: a workflow stream whose first record is the damaged one. It
//     holds neither a workflow nor a job, and nothing sound says which
//     kind of stream it was: §4.4 attributes the damage through the s/
//     entry, never through the damaged bytes. So neither lookup may deny
//     the id (an ErrNotFound would say nothing was ever there, while the
//     open report lists it): Workflow reads it corrupt with only its id
//     and the damage, and so does Status, as it does for a job whose only
//     record is damaged (TestRL5_DamagedStreamIsQuarantinedOthersRun).
func TestRL5_LookupsOfQuarantinedWorkflowStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	register := func(eng *api.Engine) {
		wfRegister(t, eng, api.NewWorkflow("retrying").Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return nil, api.Retryable("BUSY", errors.New("later"))
		}))
		wfRegister(t, eng, api.NewWorkflow("approve").WaitForSignal("go"))
	}
	register(b.eng)
	started := wfDispatch(b, "retrying", api.State{"doc": 7})
	unread := wfDispatch(b, "approve", api.State{})
	b.start()
	b.idle()
	step := b.stepJob("retrying/a")
	if j := b.wantStatus(step, api.JobPending); j.Attempts != 1 {
		t.Fatalf("step job after one retryable failure: %+v", j)
	}
	var startedLast, unreadFirst uint64
	for _, r := range b.records() {
		switch {
		case r.Stream == started:
			startedLast = r.Seq // the retry's settlement
		case r.Stream == unread && unreadFirst == 0:
			unreadFirst = r.Seq
		}
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eng = nil
	flipRecordByte(t, b, startedLast, func(n int) int { return n - 1 })
	flipRecordByte(t, b, unreadFirst, func(n int) int { return n - 1 })
	b.open()
	register(b.eng)

	// The premise, as the open report lists it.
	q := b.eng.Stats().Quarantined
	byStream := map[string]api.QuarantinedStream{}
	for _, s := range q {
		byStream[s.Stream] = s
	}
	if s := byStream[started]; len(q) != 2 || s.Workflow != started || !slices.Equal(s.Jobs, []string{step}) || s.Err == nil || s.Err.Seq != startedLast {
		t.Fatalf("quarantined %+v; want %s with its workflow and step job %s, damaged at %d", q, started, step, startedLast)
	}
	if s := byStream[unread]; s.Workflow != "" || len(s.Jobs) != 0 || s.Err == nil || s.Err.Seq != unreadFirst {
		t.Fatalf("quarantined %+v; want %s with no workflow and no job, damaged at %d", s, unread, unreadFirst)
	}

	// started.
	info, err := b.eng.Workflow(b.ctx, started)
	if err != nil || info.Status != api.WorkflowCorrupt || info.Name != "retrying" || info.Corrupt == nil || info.Corrupt.Seq != startedLast {
		t.Fatalf("Workflow of the started workflow: %+v, %v; want corrupt as of its last good record", info, err)
	}
	_, err = b.eng.Status(b.ctx, started)
	wantNotFound(t, "Status of a quarantined workflow's id", err, "job", started)
	j, err := b.eng.Status(b.ctx, step)
	if err != nil || j.Status != api.JobCorrupt || j.WorkflowID != started || j.Corrupt == nil || j.Corrupt.Seq != startedLast {
		t.Fatalf("Status of the quarantined step job: %+v, %v; want corrupt in workflow %s", j, err, started)
	}
	_, err = b.eng.Workflow(b.ctx, step)
	wantNotFound(t, "Workflow of a quarantined step job's id", err, "workflow", step)

	// unread.
	info, err = b.eng.Workflow(b.ctx, unread)
	if err != nil || info.Status != api.WorkflowCorrupt || info.ID != unread || info.Name != "" || info.Corrupt == nil || info.Corrupt.Seq != unreadFirst || !errors.Is(info.Corrupt, journal.ErrCorrupt) {
		t.Fatalf("Workflow of a stream with no good record: %+v, %v; want corrupt with only its id and the damage", info, err)
	}
	j, err = b.eng.Status(b.ctx, unread)
	if err != nil || j.Status != api.JobCorrupt || j.ID != unread || j.Handler != "" || j.Corrupt == nil || j.Corrupt.Seq != unreadFirst {
		t.Fatalf("Status of a stream with no good record: %+v, %v; want corrupt with only its id and the damage", j, err)
	}
	b.checkReplay()
}
