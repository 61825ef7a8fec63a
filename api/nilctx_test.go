package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quire-dev/quire/api"
)

// wantNilContext checks that err refuses a nil ctx as every call does: an
// *OptionError naming ctx, matching ErrInvalidOption.
func wantNilContext(t *testing.T, call string, err error) {
	t.Helper()
	var oe *api.OptionError
	if !errors.As(err, &oe) || oe.Field != "ctx" || !errors.Is(err, api.ErrInvalidOption) {
		t.Fatalf("%s(nil ctx): err = %v, want an *OptionError naming ctx", call, err)
	}
}

// A nil ctx is refused by every call that takes one, with an *OptionError
// naming ctx and before the call does anything: nothing is appended (JB-1,
// WF-10), no shutdown is initiated (SD-21), the engine stays Ready
// (SD-34) and serves the next call.
func TestNilContext_RefusedByEveryCallAppendingNothing(t *testing.T) {
	t.Parallel()
	var nilCtx context.Context // what a caller passes by mistake
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("w").WaitForSignal("go").Then("a", wfReturn(nil)))
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	wid := wfDispatch(b, "w", nil)
	jid := b.enqueue("h", msg{})
	calls := []struct {
		name string
		call func() error
	}{
		{"Enqueue", func() error { _, err := b.eng.Enqueue(nilCtx, "h", msg{}); return err }},
		{"Dispatch", func() error { _, err := b.eng.Dispatch(nilCtx, "w", nil); return err }},
		{"Signal", func() error { return b.eng.Signal(nilCtx, wid, "go", nil) }},
		{"Status", func() error { _, err := b.eng.Status(nilCtx, jid); return err }},
		{"Workflow", func() error { _, err := b.eng.Workflow(nilCtx, wid); return err }},
		{"AwaitJob", func() error { _, err := b.eng.AwaitJob(nilCtx, jid); return err }},
		{"AwaitWorkflow", func() error { _, err := b.eng.AwaitWorkflow(nilCtx, wid); return err }},
		{"Bury", func() error { return b.eng.Bury(nilCtx, jid) }},
		{"Retry", func() error { return b.eng.Retry(nilCtx, jid) }},
		{"RetryBuried", func() error { _, err := b.eng.RetryBuried(nilCtx, api.QueueDefault); return err }},
		{"PauseQueue", func() error { return b.eng.PauseQueue(nilCtx, api.QueueDefault) }},
		{"ResumeQueue", func() error { return b.eng.ResumeQueue(nilCtx, api.QueueDefault) }},
		{"PauseWorkflow", func() error { return b.eng.PauseWorkflow(nilCtx, wid) }},
		{"ResumeWorkflow", func() error { return b.eng.ResumeWorkflow(nilCtx, wid) }},
		{"CancelWorkflow", func() error { return b.eng.CancelWorkflow(nilCtx, wid) }},
		{"RetryWorkflow", func() error { return b.eng.RetryWorkflow(nilCtx, wid) }},
		{"WaitIdle", func() error { return b.eng.WaitIdle(nilCtx) }},
		{"StateDigest", func() error { _, _, err := b.eng.StateDigest(nilCtx); return err }},
		{"SimLive", func() error { _, _, err := api.SimLive(nilCtx, b.eng); return err }},
		{"Start", func() error { return b.eng.Start(nilCtx) }},
		{"Run", func() error { return b.eng.Run(nilCtx) }},
		{"RunOnce", func() error { return b.eng.RunOnce(nilCtx) }},
		{"Shutdown", func() error { return b.eng.Shutdown(nilCtx) }},
		{"Close", func() error { return b.eng.Close(nilCtx) }},
	}
	for _, c := range calls {
		wfNoAppend(b, c.name+"(nil ctx)", func() { wantNilContext(t, c.name, c.call()) })
		if s := b.eng.Snapshot(); s.Lifecycle != api.Ready || s.Shutdown.Initiated {
			t.Fatalf("SD-34: after %s(nil ctx) the engine is %s, shutdown initiated %v; want it Ready and untouched",
				c.name, s.Lifecycle, s.Shutdown.Initiated)
		}
	}
	// Nothing was started: the job is still pending, and the engine serves
	// the same calls with a real ctx.
	b.wantStatus(jid, api.JobPending)
	b.start()
	if err := b.eng.Signal(b.ctx, wid, "go", nil); err != nil {
		t.Fatalf("signal: %v", err)
	}
	b.idle()
	b.wantStatus(jid, api.JobCompleted)
	wfWant(b, wid, api.WorkflowCompleted)
	b.checkReplay()
}

// SD-20: Run given a nil ctx on an engine already started is refused like
// any other call. Start returns nil at once there, so before the check
// the nil ctx reached the goroutine that watches Run's ctx, whose panic
// no caller could recover: it ended the process. The engine runs on.
func TestSD20_RunWithNilContextOnAStartedEngine(t *testing.T) {
	t.Parallel()
	var nilCtx context.Context
	b := setup(t, nil)
	var runs recorder
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error {
		runs.add(d.JobID())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	wantNilContext(t, "Run", b.eng.Run(nilCtx))
	wantNilContext(t, "Start", b.eng.Start(nilCtx))
	if !b.eng.Ready() {
		t.Fatalf("SD-34: engine not ready after Run(nil ctx): %s", b.eng.Lifecycle())
	}
	id := b.enqueue("h", msg{})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	if got := runs.get(); len(got) != 1 || got[0] != id {
		t.Fatalf("handler ran for %v, want [%s]", got, id)
	}
}

// SD-35: Open refuses a nil ctx as it refuses an invalid option: it
// touches nothing and owns nothing, so the resources handed over stay the
// caller's (none is closed) and the directory is not locked.
func TestSD35_OpenWithNilContextOwnsNothing(t *testing.T) {
	t.Parallel()
	var nilCtx context.Context
	b := setup(t, nil)
	opts := b.opts
	opts.Dir = "other"
	var closed recorder
	opts.OwnedResources = []api.OwnedResource{{Name: "db", Closer: closerFunc(func() error { closed.add("db"); return nil })}}
	e, err := api.Open(nilCtx, opts)
	if e != nil {
		t.Fatal("Open(nil ctx) returned an engine")
	}
	wantNilContext(t, "Open", err)
	if got := closed.get(); len(got) != 0 {
		t.Fatalf("SD-35: Open(nil ctx) closed %v, which it never owned", got)
	}
	opts.OwnedResources = nil
	e, err = api.Open(b.ctx, opts)
	if err != nil {
		t.Fatalf("open after a refused Open: %v", err)
	}
	if err := e.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}
