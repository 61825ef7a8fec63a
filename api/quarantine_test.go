package api_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
)

// RL-5, spec/reliability.md §4.4: a damaged record that the journal can
// attribute to one stream quarantines that stream, and Open goes on: the
// stream reads as corrupt as of its last good record, gets no deliveries
// or signals and no records, and the other streams run. No snapshot hides
// the damage from the next Open.
func TestRL5_DamagedStreamIsQuarantinedOthersRun(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMin })
	rec := &recorder{}
	register := func(eng *api.Engine) {
		if err := api.Handle(eng, "work", okHandler(rec)); err != nil {
			t.Fatal(err)
		}
		wfRegister(t, eng, api.NewWorkflow("w").Then("prep", wfReturn(api.State{"prepared": true})).WaitForSignal("go").Then("done", wfReturn(nil)))
		wfRegister(t, eng, api.NewWorkflow("parent").WaitForWorkflowsIn(api.All(), "deps"))
	}
	register(b.eng)
	b.start()
	if err := b.eng.PauseQueue(b.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	lost := b.enqueue("work", msg{N: 1}, api.OnQueue("q"))
	kept := b.enqueue("work", msg{N: 2}, api.OnQueue("q"))
	wf := wfDispatch(b, "w", api.State{})
	parent := wfDispatch(b, "parent", api.State{"deps": []any{wf}})
	b.idle()
	wfWant(b, wf, api.WorkflowWaitingSignal)
	wfWant(b, parent, api.WorkflowWaitingWorkflows)
	var jobSeq, wfSeq uint64
	for _, r := range b.records() {
		switch r.Stream {
		case lost:
			jobSeq = r.Seq // its job_enqueued
		case wf:
			wfSeq = r.Seq // its last record: the wait entered
		}
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eng = nil
	flipRecordByte(t, b, jobSeq, func(n int) int { return n - 1 })
	flipRecordByte(t, b, wfSeq, func(n int) int { return n - 1 })

	b.open()
	register(b.eng)
	b.start()
	q := b.eng.Stats().Quarantined
	if len(q) != 2 {
		t.Fatalf("open stats list %d quarantined streams, want 2: %+v", len(q), q)
	}
	for _, s := range q {
		want := map[string]uint64{lost: jobSeq, wf: wfSeq}[s.Stream]
		if want == 0 || s.Err == nil || s.Err.Seq != want || !errors.Is(s.Err, journal.ErrCorrupt) {
			t.Fatalf("quarantined %+v, want the damage at seq %d", s, want)
		}
	}
	if j := b.status(lost); j.Status != api.JobCorrupt || j.Corrupt == nil || j.Corrupt.Seq != jobSeq {
		t.Fatalf("job whose only record is damaged: %+v", j)
	}
	info, err := b.eng.Workflow(b.ctx, wf)
	if err != nil || info.Status != api.WorkflowCorrupt || info.Corrupt == nil || info.Corrupt.Seq != wfSeq || info.Name != "w" || info.State["prepared"] != true {
		t.Fatalf("workflow: %+v, %v; want corrupt as of its last good record", info, err)
	}
	if err := b.eng.Signal(b.ctx, wf, "go", api.State{}); !errors.Is(err, api.ErrCorrupt) {
		t.Fatalf("signal to a quarantined workflow: %v, want an error matching journal.ErrCorrupt", err)
	}
	if err := b.eng.CancelWorkflow(b.ctx, wf); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("cancel of a quarantined workflow: %v", err)
	}
	if err := b.eng.Bury(b.ctx, lost); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("bury of a quarantined job: %v", err)
	}

	// The other streams run, and enough records for a snapshot pass.
	if err := b.eng.ResumeQueue(b.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		b.enqueue("work", msg{N: 10 + i})
	}
	b.idle()
	b.wantStatus(kept, api.JobCompleted)
	// A workflow waiting for the quarantined one goes on waiting: its
	// dependency's outcome cannot be known, so the wait is not impossible.
	wfWant(b, parent, api.WorkflowWaitingWorkflows)
	if slices.Contains(rec.get(), "1") || !slices.Contains(rec.get(), "2") {
		t.Fatalf("handler calls %v: the quarantined job ran, or the sound one did not", rec.get())
	}
	for _, r := range b.records() {
		if (r.Stream == lost && r.Seq > jobSeq) || (r.Stream == wf && r.Seq > wfSeq) {
			t.Fatalf("seq %d (%s) appended to quarantined stream %s", r.Seq, r.Kind(), r.Stream)
		}
	}
	if st := b.eng.SnapshotStats(); st.Written != 0 || st.Failed == 0 {
		t.Fatalf("snapshot stats %+v: none may be written while a stream is quarantined", st)
	}
	b.checkReplay()

	// The next Open meets the damage again.
	b.reopen(register)
	if n := len(b.eng.Stats().Quarantined); n != 2 {
		t.Fatalf("second open: %d quarantined streams, want 2", n)
	}
}
