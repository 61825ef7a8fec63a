package api_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// awaitResult is what an AwaitJob or AwaitWorkflow call returned.
type awaitResult[T any] struct {
	v   T
	err error
}

// awaitInBackground runs call on its own goroutine under a context that
// ends with the test (a lost wake-up fails the test by that context's
// error instead of hanging it), and returns once the call is waiting on
// its stream, so that the test's next change happens while it waits.
func awaitInBackground[T any](b *testBundle, call func(ctx context.Context) (T, error)) <-chan awaitResult[T] {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	b.t.Cleanup(cancel)
	before := api.Watchers(b.eng)
	out := make(chan awaitResult[T], 1)
	go func() {
		v, err := call(ctx)
		out <- awaitResult[T]{v, err}
	}()
	for api.Watchers(b.eng) == before {
		select {
		case r := <-out:
			b.t.Fatalf("the call returned before it waited: %+v, %v", r.v, r.err)
		default:
		}
		runtime.Gosched()
	}
	return out
}

// notYet fails the test if the call behind out has returned.
func notYet[T any](b *testBundle, out <-chan awaitResult[T], when string) {
	b.t.Helper()
	select {
	case r := <-out:
		b.t.Fatalf("returned %s: %+v, %v", when, r.v, r.err)
	default:
	}
}

func TestAwaitJob_ReturnsWhenADelayedJobCompletesAfterARetry(t *testing.T) { // JB-2, JB-4
	b := setup(t, nil)
	var calls atomic.Int32
	if err := api.Handle(b.eng, "flaky", func(ctx context.Context, d *api.Delivery, in msg) error {
		if calls.Add(1) == 1 {
			return api.Retryable("BUSY", errors.New("try later"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("flaky", msg{N: 1}, api.Delay(10*time.Second))
	b.start()
	out := awaitInBackground(b, func(ctx context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, id) })
	b.idle()
	notYet(b, out, "while the job was delayed")

	// The first attempt fails: its settlement wakes the caller, which
	// finds the job pending again and waits on.
	b.advance(10 * time.Second)
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", calls.Load())
	}
	b.wantStatus(id, api.JobPending)
	for api.Watchers(b.eng) == 0 {
		notYet(b, out, "after a retryable failure")
		runtime.Gosched()
	}
	notYet(b, out, "after a retryable failure")

	b.advance(2 * time.Minute)
	r := <-out
	if r.err != nil {
		t.Fatalf("await: %v", r.err)
	}
	if r.v.ID != id || r.v.Status != api.JobCompleted || r.v.Attempts != 2 {
		t.Fatalf("await returned %+v, want job %s completed after 2 attempts", r.v, id)
	}
	if n := api.Watchers(b.eng); n != 0 {
		t.Fatalf("%d watchers left registered", n)
	}
}

func TestAwaitJob_ReturnsABuriedJob(t *testing.T) { // JB-6
	b := setup(t, nil)
	if err := api.Handle(b.eng, "bad", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("BAD_INPUT", errors.New("no"))
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("bad", msg{})
	out := awaitInBackground(b, func(ctx context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, id) })
	b.idle()
	notYet(b, out, "before the engine started")
	b.start()
	r := <-out
	if r.err != nil || r.v.Status != api.JobBuried || r.v.LastCode != "BAD_INPUT" {
		t.Fatalf("await returned %+v, %v; want the job buried with BAD_INPUT", r.v, r.err)
	}
	// A buried job stays in the engine's state (it can be retried): a
	// second call returns at once.
	j, err := b.eng.AwaitJob(b.ctx, id)
	if err != nil || j.Status != api.JobBuried {
		t.Fatalf("second await: %+v, %v", j, err)
	}
}

func TestAwaitJob_ACompletedJobReturnsAtOnce(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	b.idle()
	// The job has left the engine's state: it is read from the terminal
	// index, after a restart too.
	b.reopen(func(e *api.Engine) {
		if err := api.Handle(e, "work", okHandler(nil)); err != nil {
			t.Fatal(err)
		}
	})
	j, err := b.eng.AwaitJob(b.ctx, id)
	if err != nil || j.Status != api.JobCompleted || j.Attempts != 1 {
		t.Fatalf("await: %+v, %v; want completed after 1 attempt", j, err)
	}
}

func TestAwaitJob_BadInput(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	var ne *api.NameError
	if _, err := b.eng.AwaitJob(b.ctx, "job_01JZZZZZZZZZZZZZZZZZZZZZZZ"); !errors.Is(err, api.ErrNotFound) || !errors.As(err, &ne) {
		t.Fatalf("unknown job: %v, want a *NameError matching ErrNotFound", err)
	}
	if _, err := b.eng.AwaitJob(b.ctx, ""); err == nil {
		t.Fatal("an empty id was accepted")
	}
	if _, err := b.eng.AwaitWorkflow(b.ctx, "wf_01JZZZZZZZZZZZZZZZZZZZZZZZ"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown workflow: %v, want ErrNotFound", err)
	}
	cancelled, cancel := context.WithCancel(b.ctx)
	cancel()
	id := b.enqueue("work", msg{})
	if _, err := b.eng.AwaitJob(cancelled, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func TestAwaitJob_EndsWithItsContextAndLeavesNoWatcher(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{}) // the engine is not started: it stays pending
	for range 3 {
		ctx, cancel := context.WithCancel(b.ctx)
		out := awaitInBackground(b, func(context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, id) })
		cancel()
		if r := <-out; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("await returned %+v, %v; want context.Canceled", r.v, r.err)
		}
		if n := api.Watchers(b.eng); n != 0 {
			t.Fatalf("%d watchers left after the call ended", n)
		}
	}
}

func TestAwaitJob_ReturnsErrClosedWhenTheEngineCloses(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{}, api.Delay(time.Hour))
	out := awaitInBackground(b, func(ctx context.Context) (api.Job, error) { return b.eng.AwaitJob(ctx, id) })
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-out; !errors.Is(r.err, api.ErrClosed) {
		t.Fatalf("await returned %+v, %v; want ErrClosed", r.v, r.err)
	}
	b.eng = nil
}

func TestAwaitWorkflow_ReturnsWhenTheSignalledWorkflowCompletes(t *testing.T) { // WF-19
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("approve").
		WaitForSignal("approved").
		Then("ship", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return api.State{"shipped": true}, nil
		}))
	id := wfDispatch(b, "approve", api.State{"order": "A-1"})
	b.start()
	out := awaitInBackground(b, func(ctx context.Context) (api.WorkflowInfo, error) { return b.eng.AwaitWorkflow(ctx, id) })
	b.idle()
	notYet(b, out, "while the workflow waited for its signal")
	if err := b.eng.Signal(b.ctx, id, "approved", nil); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil {
		t.Fatalf("await: %v", r.err)
	}
	if r.v.ID != id || r.v.Status != api.WorkflowCompleted || r.v.State["shipped"] != true {
		t.Fatalf("await returned %+v, want the workflow completed with shipped=true", r.v)
	}
}

func TestAwaitWorkflow_ReturnsAFailedWorkflow(t *testing.T) { // WF-9
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("doomed").
		Then("boom", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return nil, api.Permanent("NOPE", errors.New("cannot"))
		}))
	id := wfDispatch(b, "doomed", nil)
	out := awaitInBackground(b, func(ctx context.Context) (api.WorkflowInfo, error) { return b.eng.AwaitWorkflow(ctx, id) })
	b.start()
	r := <-out
	if r.err != nil || r.v.Status != api.WorkflowFailed {
		t.Fatalf("await returned %+v, %v; want the workflow failed", r.v, r.err)
	}
}

// The status an Await call returns is the one its wait ended on: an
// operator's Retry or RetryWorkflow decided just after cannot make it
// return a job that is pending or processing again, or a running
// workflow. The status used to be read in a later step of the loop.
func TestAwait_ReturnsTheStatusItsWaitEndedOnUnderConcurrentRetries(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "bad", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("BAD", errors.New("no"))
	}); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("doomed").Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return nil, api.Permanent("NOPE", errors.New("x"))
	}))
	jid := b.enqueue("bad", msg{})
	wid := wfDispatch(b, "doomed", nil)
	b.start()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	stop := make(chan struct{})
	retried := make(chan struct{}, 2)
	retry := func(call func() error) {
		defer func() { retried <- struct{}{} }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = call() // ErrState while the last retry's run is on
		}
	}
	go retry(func() error { return b.eng.Retry(ctx, jid) })
	go retry(func() error { return b.eng.RetryWorkflow(ctx, wid) })
	defer func() { close(stop); <-retried; <-retried }()
	for i := range 1000 {
		j, err := b.eng.AwaitJob(ctx, jid)
		if err != nil || j.Status != api.JobBuried {
			t.Fatalf("await %d: job %s %v; want it buried", i, j.Status, err)
		}
		w, err := b.eng.AwaitWorkflow(ctx, wid)
		if err != nil || w.Status != api.WorkflowFailed {
			t.Fatalf("await %d: workflow %s %v; want it failed", i, w.Status, err)
		}
	}
}
