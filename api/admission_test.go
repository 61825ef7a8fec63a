package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// cancelledTries is how many times each call is made with an ended ctx.
// The race this guards against (a select choosing at random between
// taking the op and ctx.Done) let about half of the calls through, so 50
// clean tries leave it a chance of about 2^-50.
const cancelledTries = 50

// JB-1, WF-13 and every other call that appends: an already-cancelled ctx
// returns an error matching context.Canceled and appends nothing, on a
// started engine whose loop is ready to take the call. Each case then
// makes the same call with a live ctx and checks that it does append, so
// the target is one the call would change.
func TestAdmission_CancelledCtxAppendsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "fail", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("NO", errors.New("no"))
	}); err != nil {
		t.Fatal(err)
	}
	step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
	failStep := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
		return nil, api.Permanent("NO", errors.New("no"))
	}
	for _, w := range []*api.Workflow{
		api.NewWorkflow("wait").WaitForSignal("go"),
		api.NewWorkflow("held").OnQueue("held").Then("a", step),
		api.NewWorkflow("broken").Then("a", failStep),
	} {
		if err := b.eng.Register(w); err != nil {
			t.Fatal(err)
		}
	}
	ctx := b.ctx
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dispatch := func(name string) string {
		t.Helper()
		id, err := b.eng.Dispatch(ctx, name, api.State{"k": 1})
		must(err)
		return id
	}
	b.start()
	must(b.eng.PauseQueue(ctx, "held"))
	must(b.eng.PauseQueue(ctx, "paused"))
	pending := b.enqueue("ok", msg{N: 1}, api.Delay(time.Hour))
	buried := b.enqueue("fail", msg{N: 2})
	b.enqueue("fail", msg{N: 3}, api.OnQueue("graveyard"))
	toSignal, toCancel := dispatch("wait"), dispatch("wait")
	toPause, toResume := dispatch("held"), dispatch("held")
	failed := dispatch("broken")
	b.idle()
	must(b.eng.PauseWorkflow(ctx, toResume))
	b.wantStatus(buried, api.JobBuried)
	if w, err := b.eng.Workflow(ctx, failed); err != nil || w.Status != api.WorkflowFailed {
		t.Fatalf("workflow broken: %+v, %v", w, err)
	}

	cases := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Enqueue", func(ctx context.Context) error { _, err := b.eng.Enqueue(ctx, "ok", msg{N: 4}); return err }},
		{"Dispatch", func(ctx context.Context) error { _, err := b.eng.Dispatch(ctx, "wait", api.State{}); return err }},
		{"Signal", func(ctx context.Context) error { return b.eng.Signal(ctx, toSignal, "go", api.State{"by": "ann"}) }},
		{"Bury", func(ctx context.Context) error { return b.eng.Bury(ctx, pending) }},
		{"Retry", func(ctx context.Context) error { return b.eng.Retry(ctx, buried) }},
		{"RetryBuried", func(ctx context.Context) error { _, err := b.eng.RetryBuried(ctx, "graveyard"); return err }},
		{"PauseQueue", func(ctx context.Context) error { return b.eng.PauseQueue(ctx, "fresh") }},
		{"ResumeQueue", func(ctx context.Context) error { return b.eng.ResumeQueue(ctx, "paused") }},
		{"PauseWorkflow", func(ctx context.Context) error { return b.eng.PauseWorkflow(ctx, toPause) }},
		{"ResumeWorkflow", func(ctx context.Context) error { return b.eng.ResumeWorkflow(ctx, toResume) }},
		{"CancelWorkflow", func(ctx context.Context) error { return b.eng.CancelWorkflow(ctx, toCancel) }},
		{"RetryWorkflow", func(ctx context.Context) error { return b.eng.RetryWorkflow(ctx, failed) }},
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	j := api.JournalOf(b.eng)
	for _, c := range cases {
		b.idle()
		before := j.LastSeq()
		for i := range cancelledTries {
			err := c.call(cancelled)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s with a cancelled ctx, try %d: err = %v, want one matching context.Canceled", c.name, i, err)
			}
			decided, derr := api.Decided(b.eng)
			must(derr)
			if after := j.LastSeq(); after != before || decided != before {
				t.Fatalf("%s with a cancelled ctx, try %d: journal at seq %d (decided %d), was %d: it appended",
					c.name, i, after, decided, before)
			}
		}
		if err := c.call(ctx); err != nil {
			t.Fatalf("%s with a live ctx: %v", c.name, err)
		}
		if j.LastSeq() == before {
			t.Fatalf("%s with a live ctx appended nothing: the case checks nothing", c.name)
		}
	}
}
