package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// Every entry point that takes a handler or queue name refuses one that
// breaks the name rule (empty, over NameBytesMax bytes, not UTF-8, or
// holding a control character, which qctl could not print as the name)
// with an error
// matching ErrInvalidName that names it and states the rule, and appends
// nothing (JB-1, JB-7, JB-8). Enqueue used to look the handler up first
// and say only "handler not registered": its error now matches
// ErrInvalidName, and still ErrUnknownHandler, as no handler can be
// registered under such a name. Handle's does not match
// ErrUnknownHandler: it registers, and needs no registered handler.
// Dispatch's matches ErrNotFound too, as every unregistered workflow name
// does.
func TestNameRule_EveryEntryPoint(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	names := []struct{ name, rule string }{
		{"", "must not be empty"},
		{strings.Repeat("h", api.NameBytesMax+1), "limit 100"},
		{strings.Repeat("h", 200), "is 200 bytes"},
		{"send\x00mail", "control character U+0000 at byte 4"},
		{"two\nlines", "control character U+000A at byte 3"},
		{"bad\xffname", "not valid UTF-8"},
	}
	type want struct {
		kind     string // the *NameError's Kind, or "" for an *OptionError
		field    string // the *OptionError's Field
		unknown  bool   // also matches ErrUnknownHandler
		notFound bool   // also matches ErrNotFound
	}
	calls := []struct {
		name string
		call func(name string) error
		want want
	}{
		{"Enqueue", func(n string) error { _, err := b.eng.Enqueue(b.ctx, n, msg{}); return err },
			want{kind: "handler", unknown: true}},
		{"Enqueue OnQueue", func(n string) error { _, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.OnQueue(n)); return err },
			want{field: "OnQueue"}},
		{"PauseQueue", func(n string) error { return b.eng.PauseQueue(b.ctx, n) }, want{kind: "queue"}},
		{"ResumeQueue", func(n string) error { return b.eng.ResumeQueue(b.ctx, n) }, want{kind: "queue"}},
		{"RetryBuried", func(n string) error { _, err := b.eng.RetryBuried(b.ctx, n); return err }, want{kind: "queue"}},
		{"Handle", func(n string) error { return api.Handle(b.eng, n, okHandler(nil)) }, want{kind: "handler"}},
		{"Dispatch", func(n string) error { _, err := b.eng.Dispatch(b.ctx, n, api.State{}); return err },
			want{kind: "workflow", notFound: true}},
	}
	before := b.lastSeq()
	for _, c := range calls {
		for _, n := range names {
			err := c.call(n.name)
			what := c.name + " " + label(n.name)
			check := func(ok bool, why string) {
				t.Helper()
				if !ok {
					t.Errorf("%s: err %v: %s", what, err, why)
				}
			}
			check(errors.Is(err, api.ErrInvalidName), "does not match ErrInvalidName")
			check(errors.Is(err, api.ErrUnknownHandler) == c.want.unknown, "ErrUnknownHandler match is wrong")
			check(errors.Is(err, api.ErrNotFound) == c.want.notFound, "ErrNotFound match is wrong")
			check(err != nil && strings.Contains(err.Error(), n.rule), "does not state the rule")
			if c.want.kind != "" {
				var ne *api.NameError
				check(errors.As(err, &ne) && ne.Kind == c.want.kind && ne.Name == n.name, "want a *NameError naming the "+c.want.kind)
			} else {
				var oe *api.OptionError
				check(errors.As(err, &oe) && oe.Field == c.want.field && errors.Is(err, api.ErrInvalidOption),
					"want an *OptionError naming "+c.want.field)
			}
		}
	}
	if after := b.lastSeq(); after != before {
		t.Fatalf("refused calls appended records: seq %d -> %d", before, after)
	}
}

// TestNameRule_WorkflowDefinitions: every name and id a workflow
// definition takes that breaks its rule is refused by Register with a
// *WorkflowError naming the option, which matches ErrInvalidName as a bad
// name given to any call does (it matched only ErrInvalidOption), and
// nothing is appended.
func TestNameRule_WorkflowDefinitions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
	long := strings.Repeat("w", api.NameBytesMax+1)
	before := b.lastSeq()
	for _, c := range []struct {
		option string
		w      *api.Workflow
	}{
		{"NewWorkflow", api.NewWorkflow("").Then("a", step)},
		{"NewWorkflow", api.NewWorkflow(long).Then("a", step)},
		{"Then", api.NewWorkflow("w1").Then("a\nb", step)},
		{"Then", api.NewWorkflow("w2").Then(long, step)},
		{"WaitForSignal", api.NewWorkflow("w3").WaitForSignal("")},
		{"OnQueue", api.NewWorkflow("w4").Then("a", step).OnQueue("")},
		{"Named", api.NewWorkflow("w5").Then("a", step).Named(long)},
		{"SubWorkflow", api.NewWorkflow("w6").SubWorkflow("c", "")},
		{"OnDeadline", api.NewWorkflow("w7").Then("a", step).OnDeadline("")},
		{"WaitForWorkflows", api.NewWorkflow("w8").WaitForWorkflows(api.All(), strings.Repeat("i", 128))},
	} {
		err := b.eng.Register(c.w)
		var we *api.WorkflowError
		if !errors.As(err, &we) || we.Option != c.option || !errors.Is(err, api.ErrInvalidName) || !errors.Is(err, api.ErrInvalidOption) {
			t.Errorf("%s: err %v, want a *WorkflowError naming it that matches ErrInvalidName and ErrInvalidOption", c.option, err)
		}
	}
	if after := b.lastSeq(); after != before {
		t.Fatalf("refused definitions appended records: seq %d -> %d", before, after)
	}
}

// A follow-up job (Delivery.Enqueue) refuses such a handler name the same
// way, and is not enqueued.
func TestNameRule_FollowUp(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var (
		mu   sync.Mutex
		errs []error
	)
	spawn := func(ctx context.Context, d *api.Delivery, in msg) error {
		for _, n := range []string{"", strings.Repeat("h", 200)} {
			err := d.Enqueue(n, msg{})
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	}
	if err := api.Handle(b.eng, "spawn", spawn); err != nil {
		t.Fatal(err)
	}
	b.enqueue("spawn", msg{})
	b.start()
	b.idle()
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 2 {
		t.Fatalf("the handler ran %d enqueues, want 2", len(errs))
	}
	for _, err := range errs {
		var ne *api.NameError
		if !errors.Is(err, api.ErrInvalidName) || !errors.Is(err, api.ErrUnknownHandler) || !errors.As(err, &ne) || ne.Kind != "handler" {
			t.Errorf("follow-up: err %v, want a handler *NameError matching ErrInvalidName and ErrUnknownHandler", err)
		}
	}
	if n := countKind(b.records(), record.KindJobEnqueued); n != 1 {
		t.Fatalf("%d job_enqueued records, want 1: a refused follow-up was enqueued", n)
	}
}

// label shows a name short: "" or its length.
func label(name string) string {
	if name == "" {
		return `""`
	}
	return fmt.Sprintf("(%d bytes)", len(name))
}
