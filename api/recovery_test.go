package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// RL-9: fire instants are journaled; after a restart every delayed job is
// re-armed from its journaled instant and overdue ones become available at
// once. Becoming available is a job's timer firing; which available job
// starts first is JB-2's order (priority, then enqueue seq), not the order
// in which their instants passed.
func TestRL9_DurableTimersRearmAfterRestart(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	var rec recorder
	register := func(e *api.Engine) {
		if err := api.Handle(e, "work", okHandler(&rec)); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	a := b.enqueue("work", msg{N: 1}, api.Delay(2*time.Hour))
	bb := b.enqueue("work", msg{N: 2}, api.Delay(time.Hour))
	c := b.enqueue("work", msg{N: 3}, api.Delay(time.Hour))
	d := b.enqueue("work", msg{N: 4}, api.Delay(5*time.Hour), api.WithPriority(api.Urgent))
	b.start()
	b.advance(30 * time.Minute)
	if len(rec.get()) != 0 {
		t.Fatalf("ran early: %v", rec.get())
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(3 * time.Hour) // downtime: a, bb and c become overdue
	b.open()
	register(b.eng)
	b.start()
	b.idle()
	if got, want := strings.Join(rec.get(), ","), "1,2,3"; got != want {
		t.Fatalf("overdue start order %s, want %s (JB-2: enqueue seq at equal priority)", got, want)
	}
	b.wantStatus(d, api.JobPending)
	b.advance(90*time.Minute - time.Nanosecond)
	b.wantStatus(d, api.JobPending) // never early
	b.advance(time.Nanosecond)
	b.wantStatus(d, api.JobCompleted)
	for _, id := range []string{a, bb, c} {
		b.wantStatus(id, api.JobCompleted)
	}
	b.checkReplay()
}

// DL-44: an attempt left open by a crash never settles; its job is pending
// again at recovery and its next start is attempt 2.
func TestDL44_OpenAttemptRedeliveredAfterCrash(t *testing.T) {
	b := setup(t, nil)
	started := make(chan int, 4)
	block := make(chan struct{})
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- d.Attempt()
		<-block
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	if got := <-started; got != 1 {
		t.Fatalf("first attempt %d", got)
	}
	// Close with an expired context: the running attempt is abandoned, like
	// a crash after attempt_started.
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Close(expired)
	close(block)
	b.open()
	if st := b.eng.Stats(); st.Recovered != 1 {
		t.Fatalf("recovered %d attempts, want 1", st.Recovered)
	}
	j := b.wantStatus(id, api.JobPending)
	if j.Consumed != 1 {
		t.Fatalf("consumed %d, want 1 (a crashed start counts, DL-44)", j.Consumed)
	}
	done := make(chan int, 1)
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		done <- d.Attempt()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.idle()
	if got := <-done; got != 2 {
		t.Fatalf("redelivered as attempt %d, want 2", got)
	}
	b.wantStatus(id, api.JobCompleted)
	recs := b.records()
	if n := countKind(recs, record.KindAttemptSucceeded); n != 1 {
		t.Fatalf("%d settlements, want 1", n)
	}
	b.checkReplay()
}

func TestDL44_ExhaustedCrashedAttemptIsBuried(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.MaxAttempts = 1 })
	started := make(chan struct{}, 1)
	block := make(chan struct{})
	defer close(block)
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- struct{}{}
		<-block
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-started
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Close(expired)
	b.open()
	j := b.wantStatus(id, api.JobBuried)
	if j.LastCode != api.CodeInterruptedByCrash {
		t.Fatalf("%+v", j)
	}
	b.checkReplay()
}

// abandonLikeACrash closes b's engine with an expired context: the
// running attempts are abandoned without a settlement, as by a crash after
// their attempt_started (DL-44).
func abandonLikeACrash(b *testBundle) {
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	b.eng.Close(expired)
}

// blockedStep returns a step that reports each start on started, which
// holds a few, then blocks until the test ends.
func blockedStep(t *testing.T) (step api.StepFunc, started chan struct{}) {
	started = make(chan struct{}, 4)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	return func(context.Context, *api.Delivery, api.State) (api.State, error) {
		started <- struct{}{}
		<-block
		return nil, nil
	}, started
}

// WF-20, DL-44: a step job whose attempt a crash lost with no attempts
// left is buried at recovery, and its workflow fails in the same append,
// as when a settlement buries it. A Parallel's other branch, lost too,
// is buried with it, once.
func TestWF20_DL44_CrashExhaustedStepFailsItsWorkflow(t *testing.T) {
	b := setup(t, nil)
	blocked, started := blockedStep(t)
	def := func(step api.StepFunc) *api.Workflow {
		return api.NewWorkflow("flow").MaxAttempts(1).Parallel("fan", step, step)
	}
	wfRegister(t, b.eng, def(blocked))
	b.start()
	id := wfDispatch(b, "flow", api.State{})
	<-started
	<-started
	abandonLikeACrash(b)
	b.open()
	ok := func(context.Context, *api.Delivery, api.State) (api.State, error) { return nil, nil }
	wfRegister(t, b.eng, def(ok))
	info := wfWant(b, id, api.WorkflowFailed)
	if !strings.Contains(info.Error, "interrupted by a crash") {
		t.Fatalf("WF-20: workflow error %q", info.Error)
	}
	recs := b.records()
	if n := countKind(recs, record.KindJobBuried); n != 2 {
		t.Fatalf("WF-20: %d job_buried, want one per branch", n)
	}
	// The first branch's burial and the workflow's failure are one
	// append: nothing of another stream between them.
	last := -1
	for i, r := range recs {
		if r.Kind() == record.KindJobBuried && last < 0 {
			last = i
		}
	}
	if k := recs[last+1].Kind(); k != record.KindWorkflowFailed {
		t.Fatalf("WF-20: %s follows the crash burial, want workflow_failed", k)
	}
	b.start()
	b.idle()
	wfWant(b, id, api.WorkflowFailed)
	b.checkReplay()
}

// WD-7, WD-19, DL-44: a step job whose attempt a crash lost with no
// attempts left, found at a recovery at or after its workflow's
// deadline_at, is a step failing past the deadline: the workflow fails by
// its deadline, with its on-deadline handler, not with the crash's error.
func TestWD7_WD19_CrashExhaustedStepPastTheDeadlineExpiresTheWorkflow(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeadlineCheckInterval, o.DeliveryTimeout = wdNever, wdSlow })
	blocked, started := blockedStep(t)
	spy := newSpy()
	register := func(eng *api.Engine) {
		spy.register(t, eng, "cleanup")
		wfRegister(t, eng, api.NewWorkflow("flow").MaxAttempts(1).Then("a", blocked).
			MustCompleteWithin(time.Minute).OnDeadline("cleanup"))
	}
	register(b.eng)
	b.start()
	id := wfDispatch(b, "flow", api.State{})
	<-started
	b.clk.Advance(2 * time.Minute)
	abandonLikeACrash(b)
	b.open()
	register(b.eng)
	wdFailedByDeadline(b, id)
	at := t0.Add(2 * time.Minute)
	wdOneExpiry(b, id, "", at, at)
	if j := b.status(b.stepJob("flow/a")); j.Status != api.JobBuried || j.LastError != "Deadline exceeded" {
		t.Fatalf("WD-7: the lost step job: %+v", j)
	}
	b.start()
	b.idle()
	<-spy.calls
	b.checkReplay()
}

// WF-20: a lost step job of a workflow that was cancelled meanwhile is
// buried at recovery, not left pending for good.
func TestWF20_DL44_LostStepOfACancelledWorkflowIsBuried(t *testing.T) {
	b := setup(t, nil)
	blocked, started := blockedStep(t)
	wfRegister(t, b.eng, api.NewWorkflow("flow").Then("a", blocked))
	b.start()
	id := wfDispatch(b, "flow", api.State{})
	<-started
	if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	abandonLikeACrash(b)
	b.open()
	job := b.stepJob("flow/a")
	if j := b.wantStatus(job, api.JobBuried); j.LastCode != api.CodeInterruptedByCrash || !strings.Contains(j.LastError, "cancelled") {
		t.Fatalf("WF-20: the lost step job of a cancelled workflow: %+v", j)
	}
	b.checkReplay()
}

// WF-20, JB-6: an operator's bury of a pending step job fails its workflow
// in the same append, as a settlement that buries does.
func TestWF20_JB6_BuryingAStepJobFailsItsWorkflow(t *testing.T) {
	b := setup(t, nil)
	ok := func(context.Context, *api.Delivery, api.State) (api.State, error) { return nil, nil }
	wfRegister(t, b.eng, api.NewWorkflow("flow").Then("a", ok))
	id := wfDispatch(b, "flow", api.State{}) // not started: step a's job stays pending
	job := b.stepJob("flow/a")
	if err := b.eng.Bury(b.ctx, job); err != nil {
		t.Fatal(err)
	}
	if info := wfWant(b, id, api.WorkflowFailed); info.Error != api.MessageBuriedByOperator {
		t.Fatalf("WF-20: workflow error %q", info.Error)
	}
	recs := b.records()
	if k := recs[len(recs)-1].Kind(); k != record.KindWorkflowFailed {
		t.Fatalf("WF-20: the bury's append ends with %s", k)
	}
	b.checkReplay()
}

// Recovery parks work whose handler is not registered instead of crashing.
func TestRecoveryParksUnregisteredHandlers(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "legacy", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("legacy", msg{N: 1})
	b.reopen(nil) // this process does not register "legacy"
	b.start()
	b.idle()
	j := b.wantStatus(id, api.JobPending)
	if !j.Parked {
		t.Fatalf("job of an unregistered handler is not parked: %+v", j)
	}
	if _, err := b.eng.Enqueue(b.ctx, "legacy", msg{}); !errors.Is(err, api.ErrUnknownHandler) {
		t.Fatalf("enqueue for an unregistered handler: %v", err)
	}
	if err := api.Handle(b.eng, "legacy", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	b.checkReplay()
}

// A handler that ignores its context is notified at P, abandoned at C and
// settled as a retryable DELIVERY_TIMEOUT; its late result is fenced out.
func TestDL23_TimeoutAbandonsAndFencesLateResult(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second; o.MaxAttempts = 2 })
	release := make(chan struct{})
	started := make(chan *api.Delivery, 2)
	if err := api.Handle(b.eng, "slow", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- d
		if d.Attempt() == 1 {
			<-release // ignores ctx
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("slow", msg{})
	b.start()
	d := <-started
	if want := t0.Add(1500 * time.Millisecond); !d.Deadline().At().Equal(want) {
		t.Fatalf("handler deadline %v, want P = %v", d.Deadline().At(), want)
	}
	b.clk.Advance(1500 * time.Millisecond) // P: notified
	<-d.Cancellation().Done()
	reason, at, ok := d.Cancellation().Reason()
	if !ok || reason != api.ReasonDeliveryTimeout || !at.Equal(t0.Add(1500*time.Millisecond)) {
		t.Fatalf("reason %v at %v (%v)", reason, at, ok)
	}
	b.clk.Advance(125 * time.Millisecond) // C = 1.625 s (DL-22 row 3)
	b.idle()
	j := b.wantStatus(id, api.JobPending)
	if j.LastCode != api.CodeDeliveryTimeout || j.Consumed != 1 {
		t.Fatalf("%+v", j)
	}
	close(release) // the abandoned goroutine returns: its result must not settle
	b.advance(time.Second)
	b.wantStatus(id, api.JobCompleted)
	recs := b.records()
	var joined []bool
	for _, r := range recs {
		switch s := r.Body.(type) {
		case *record.AttemptRetryScheduled:
			joined = append(joined, s.Joined)
			if s.Reason != "delivery_timeout" || s.ReasonAt != t0.Add(1500*time.Millisecond).UnixNano() {
				t.Fatalf("timeout settlement reason %q at %d", s.Reason, s.ReasonAt)
			}
		case *record.AttemptSucceeded:
			joined = append(joined, s.Joined)
		}
	}
	if fmt.Sprint(joined) != "[false true]" {
		t.Fatalf("settlements joined=%v, want one abandoned then one success", joined)
	}
	b.checkReplay()
}
