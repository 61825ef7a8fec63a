package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/scheduler"
)

// What the journal and the errors say about the pipeline (DL-27, DL-28,
// DL-33, DL-36): codes are pinned by the rules, the text beside them says
// which entry, resource or hook it was.

// DL-36: a cleanup failure keeps its code, and the settlement's error
// carries the first failure's own text, within FailureMessageBytesMax: a
// success or interruption gets "attempt cleanup failed: CODE: text", a
// handler's own error keeps its code and text first, the cleanup after.
func TestDL36_CleanupFailureKeepsItsOwnText(t *testing.T) {
	long := strings.Repeat("x", 3*scheduler.FailureMessageBytesMax)
	for _, c := range []struct {
		name    string
		scope   func() error
		value   any
		handler error
		code    string
		want    string // the settlement's error; a trailing "…" means a prefix
	}{
		{"scope_close_fails", func() error { return errors.New("disk gone") }, nil, nil, api.CodeScopeCleanupFailed,
			`attempt cleanup failed: DELIVERY_SCOPE_CLEANUP_FAILED: close "r": disk gone`},
		{"scope_close_panics", func() error { panic("close boom") }, nil, nil, api.CodeScopeCleanupPanicked,
			`attempt cleanup failed: DELIVERY_SCOPE_CLEANUP_PANICKED: close "r": panic: close boom`},
		{"release_panics", nil, panicker{}, nil, api.CodeResourceReleasePanicked,
			`attempt cleanup failed: DELIVERY_RESOURCE_RELEASE_PANICKED: Release of attempt-local value "v" panicked: release`},
		{"first_of_two", func() error { return errors.New("disk gone") }, panicker{}, nil, api.CodeResourceReleasePanicked,
			`attempt cleanup failed: DELIVERY_RESOURCE_RELEASE_PANICKED: Release of attempt-local value "v" panicked: release (also DELIVERY_SCOPE_CLEANUP_FAILED)`},
		{"handler_error_comes_first", func() error { return errors.New("disk gone") }, nil, api.Permanent("MINE", errors.New("bad input")), "MINE",
			`permanent MINE: bad input; attempt cleanup failed: DELIVERY_SCOPE_CLEANUP_FAILED: close "r": disk gone`},
		{"bounded", func() error { return errors.New(long) }, nil, nil, api.CodeScopeCleanupFailed,
			`attempt cleanup failed: DELIVERY_SCOPE_CLEANUP_FAILED: close "r": xxx…`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
				if c.scope != nil {
					d.Scope().Register("r", closer(c.scope))
				}
				if c.value != nil { // released in key order: "v" is the first
					d.SetValue("w", c.value)
					d.SetValue("v", c.value)
				}
				return c.handler
			}); err != nil {
				t.Fatal(err)
			}
			id := b.enqueue("work", msg{})
			b.start()
			b.idle()
			_, o := b.lastSettlement(id)
			if o.Code != c.code {
				t.Fatalf("code %q, want %q (%+v)", o.Code, c.code, *o)
			}
			if len(o.Error) > scheduler.FailureMessageBytesMax {
				t.Fatalf("error is %d bytes, limit %d", len(o.Error), scheduler.FailureMessageBytesMax)
			}
			if prefix, ok := strings.CutSuffix(c.want, "…"); ok {
				if !strings.HasPrefix(o.Error, prefix) || len(o.Error) != scheduler.FailureMessageBytesMax {
					t.Fatalf("error %d bytes %.120q…, want %d bytes %q…", len(o.Error), o.Error, scheduler.FailureMessageBytesMax, prefix)
				}
			} else if o.Error != c.want {
				t.Fatalf("error %q\nwant  %q", o.Error, c.want)
			}
			if j := b.status(id); j.LastError != o.Error {
				t.Fatalf("job's last error %q, settlement's %q", j.LastError, o.Error)
			}
			b.checkReplay()
		})
	}
}

// DL-33, DL-36: a termination hook that fails gives
// DELIVERY_TERMINATION_CLEANUP_FAILED beside the attempt's own failure,
// and the error names the first failed hook's middleware with its panic
// value; the chain went on outward.
func TestDL33_DL36_FailedHookIsNamedWithItsText(t *testing.T) {
	var rec recorder
	tr := tracer{&rec}
	outer := tr.mw("outer", nil, nil)
	outer.OnTerminationFunc = func(ctx context.Context, t *api.Termination) error {
		rec.add("hook:outer")
		return errors.New("outer hook failed")
	}
	inner := tr.mw("inner", nil, nil)
	inner.AfterFunc = func(ctx context.Context, d *api.Delivery, err error) error { panic("after boom") }
	inner.OnTerminationFunc = func(ctx context.Context, t *api.Termination) error { panic("hook boom") }
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil), api.WithMiddleware(outer, inner)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	b.idle()
	_, o := b.lastSettlement(id)
	want := `after boom; attempt cleanup failed: DELIVERY_TERMINATION_CLEANUP_FAILED: termination hook of middleware "inner" panicked: hook boom`
	if o.Code != api.CodeMiddlewarePanicked || o.Cleanup != api.CodeTerminationCleanupFailed || o.Error != want {
		t.Fatalf("code %q cleanup %q error %q\nwant error %q", o.Code, o.Cleanup, o.Error, want)
	}
	if got := strings.Join(o.TerminationExits, " "); got != "failed panicked" {
		t.Fatalf("termination exits %s", got)
	}
}

// DL-33, DL-35: a hook's fresh cleanup context, cancelled at the hook's
// own deadline, has a cause that says so, not "attempt cancelled"; the
// attempt's first reason stays readable from the Termination. The
// settlement names the hook that timed out and its deadline.
func TestDL33_HookContextCauseIsItsOwnDeadline(t *testing.T) {
	causes := make(chan error, 1)
	entered := make(chan *api.Termination, 1)
	hook := api.MiddlewareFuncs{Label: "h", OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
		entered <- t
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}}
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	p := newProbe()
	p.free(t)
	if err := api.Handle(b.eng, "work", p.handler(), api.WithMiddleware(hook)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, ms(1500)) // P: delivery_timeout
	b.moveTo(t0, ms(1625)) // C: abandoned; the hook starts
	term := <-entered
	deadline := term.Deadline().At()
	// E = H = 2, u = 1.625: reserve min(0.375/4, 0.25), one hook: Hk.
	wantAt(t, "hook deadline", deadline, t0.Add(sec(1.90625)))
	b.moveTo(t0, deadline.Sub(t0))
	cause := <-causes
	var cr *api.CancelReason
	if !errors.As(cause, &cr) || !cr.Hook || cr.Reason != api.ReasonDeliveryTimeout || !cr.At.Equal(deadline) {
		t.Fatalf("hook's context cause %#v", cause)
	}
	wantText := "quire: termination hook cancelled: its own deadline passed at 2026-01-05T10:00:01.90625Z"
	if cause.Error() != wantText {
		t.Fatalf("cause %q, want %q", cause, wantText)
	}
	if r, at, ok := term.Reason(); !ok || r != api.ReasonDeliveryTimeout || !at.Equal(t0.Add(ms(1500))) {
		t.Fatalf("the attempt's reason, as the hook reads it: %v at %v (%v)", r, at.Sub(t0), ok)
	}
	b.idle()
	_, o := b.lastSettlement(id)
	want := `attempt cleanup failed: DELIVERY_TERMINATION_CLEANUP_FAILED: termination hook of middleware "h" did not return by its deadline 2026-01-05T10:00:01.90625Z`
	if o.Code != api.CodeTerminationCleanupFailed || o.Error != want {
		t.Fatalf("code %q error %q\nwant %q", o.Code, o.Error, want)
	}
}

// DL-28: a panic in a Before or a guard is MIDDLEWARE_PANICKED, and since
// the entry that panicked is not in the record's ledger, the error names
// it by the option that put it in the plan (and a middleware by its
// name). A handler's panic stays its value alone.
func TestDL28_BeforeAndGuardPanicsNameTheirEntry(t *testing.T) {
	ok := func(ctx context.Context, d *api.Delivery) error { return nil }
	panics := func(v string) api.Guard { return func(ctx context.Context, d *api.Delivery) error { panic(v) } }
	before := func(label, v string) api.MiddlewareFuncs {
		return api.MiddlewareFuncs{Label: label, BeforeFunc: func(ctx context.Context, d *api.Delivery) error { panic(v) }}
	}
	for _, c := range []struct {
		name  string
		opts  func(*api.Options)
		own   []api.JobOption
		want  string
		code  string
		panic bool
	}{
		{"global_guard", func(o *api.Options) { o.Guards = []api.Guard{ok, panics("g")} }, nil,
			"panic in guard Options.Guards[1]: g", api.CodeMiddlewarePanicked, false},
		{"queue_before", func(o *api.Options) {
			o.Middleware = []api.Middleware{api.MiddlewareFuncs{Label: "global"}}
			o.QueueOptions = map[string]api.QueueOptions{"default": {Middleware: []api.Middleware{before("qm", "q")}}}
		}, nil, `panic in Before of middleware "qm" (Options.QueueOptions["default"].Middleware[0]): q`, api.CodeMiddlewarePanicked, false},
		{"queue_guard", func(o *api.Options) {
			o.QueueOptions = map[string]api.QueueOptions{"default": {Guards: []api.Guard{panics("qg")}}}
		}, nil, `panic in guard Options.QueueOptions["default"].Guards[0]: qg`, api.CodeMiddlewarePanicked, false},
		{"handler_before_unnamed", nil, []api.JobOption{api.WithMiddleware(api.MiddlewareFuncs{Label: "a"},
			api.MiddlewareFuncs{BeforeFunc: func(ctx context.Context, d *api.Delivery) error { panic("hb") }})},
			`panic in Before of middleware "api.MiddlewareFuncs" (Handle.Middleware[1]): hb`, api.CodeMiddlewarePanicked, false},
		{"handler_guard", func(o *api.Options) { o.Guards = []api.Guard{ok} }, []api.JobOption{api.WithGuards(panics("hg"))},
			"panic in guard Handle.Guards[0]: hg", api.CodeMiddlewarePanicked, false},
		{"handler", nil, nil, "handler", api.CodeHandlerPanicked, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, c.opts)
			if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
				if c.panic {
					panic("handler")
				}
				return nil
			}, c.own...); err != nil {
				t.Fatal(err)
			}
			id := b.enqueue("work", msg{})
			b.start()
			b.idle()
			_, o := b.lastSettlement(id)
			if o.Code != c.code || o.Error != c.want {
				t.Fatalf("code %q error %q, want %q %q", o.Code, o.Error, c.code, c.want)
			}
		})
	}
	t.Run("workflow_guard", func(t *testing.T) {
		b := setup(t, nil)
		step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
		if err := b.eng.Register(api.NewWorkflow("w").WithGuards(ok, panics("wg")).Then("s", step)); err != nil {
			t.Fatal(err)
		}
		b.start()
		if _, err := b.eng.Dispatch(b.ctx, "w", api.State{}); err != nil {
			t.Fatal(err)
		}
		b.idle()
		var got []string
		for _, r := range b.records() {
			if o := outcome(r); o != nil && o.Code == api.CodeMiddlewarePanicked {
				got = append(got, o.Error)
			}
		}
		if len(got) == 0 || got[0] != "panic in guard Workflow.WithGuards[1]: wg" {
			t.Fatalf("step settlements' errors %q", got)
		}
	})
}

// DL-27: the middleware limit bounds one attempt's effective chain:
// global, the job's queue and the handler's (or workflow's). A job may
// be enqueued on any queue, so the check holds on the queue that adds the
// most, and the error states that true count, the layers it sums and
// the queue, whatever queue the handler itself defaults to.
func TestDL27_PlanLimitStatesTheTrueCount(t *testing.T) {
	queues := func(mw, guards map[string]int) map[string]api.QueueOptions {
		out := map[string]api.QueueOptions{}
		for q, n := range mw {
			qo := out[q]
			qo.Middleware = labelled(n)
			out[q] = qo
		}
		for q, n := range guards {
			qo := out[q]
			qo.Guards = make([]api.Guard, n)
			for i := range qo.Guards {
				qo.Guards[i] = func(context.Context, *api.Delivery) error { return nil }
			}
			out[q] = qo
		}
		return out
	}
	guards := func(n int) []api.Guard {
		out := make([]api.Guard, n)
		for i := range out {
			out[i] = func(context.Context, *api.Delivery) error { return nil }
		}
		return out
	}
	const anyQueue = " (a job may run on any queue, so the queue that adds the most counts)"
	for _, c := range []struct {
		name   string
		opts   func(*api.Options)
		own    []api.JobOption
		field  string
		value  int
		reason string
	}{
		{"other_queue_counts", func(o *api.Options) {
			o.Middleware = labelled(40)
			o.QueueOptions = queues(map[string]int{"q": 20, "small": 1}, nil)
		}, []api.JobOption{api.WithMiddleware(labelled(10)...)}, "Handle.Middleware", 10,
			`40 global + 20 of queue "q" + 10 handler = 70 middleware in effect for an attempt on queue "q", limit 64` + anyQueue},
		{"ties_name_the_first_queue", func(o *api.Options) {
			o.Middleware = labelled(40)
			o.QueueOptions = queues(map[string]int{"z": 20, "m": 20, "a": 20, "k": 20}, nil)
		}, []api.JobOption{api.OnQueue("z"), api.WithMiddleware(labelled(5)...)}, "Handle.Middleware", 5,
			`40 global + 20 of queue "a" + 5 handler = 65 middleware in effect for an attempt on queue "a", limit 64` + anyQueue},
		{"no_queue_middleware", func(o *api.Options) { o.Middleware = labelled(60) },
			[]api.JobOption{api.WithMiddleware(labelled(5)...)}, "Handle.Middleware", 5,
			`60 global + 5 handler = 65 middleware in effect for an attempt, limit 64`},
		{"guards", func(o *api.Options) {
			o.Guards = guards(60)
			o.QueueOptions = queues(nil, map[string]int{"q": 3})
		}, []api.JobOption{api.WithGuards(guards(2)...)}, "Handle.Guards", 2,
			`60 global + 3 of queue "q" + 2 handler = 65 guards in effect for an attempt on queue "q", limit 64` + anyQueue},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, c.opts)
			for range 16 { // map order must not choose the queue named
				err := api.Handle(b.eng, "over", okHandler(nil), c.own...)
				var oe *api.OptionError
				if !errors.As(err, &oe) || oe.Field != c.field || oe.Value != c.value || oe.Reason != c.reason {
					t.Fatalf("got %v\nwant %s = %d: %s", err, c.field, c.value, c.reason)
				}
			}
		})
	}
	t.Run("at_the_limit", func(t *testing.T) {
		b := setup(t, func(o *api.Options) {
			o.Middleware = labelled(40)
			o.QueueOptions = queues(map[string]int{"q": 20}, nil)
		})
		if err := api.Handle(b.eng, "ok", okHandler(nil), api.WithMiddleware(labelled(4)...)); err != nil {
			t.Fatalf("64 in effect on queue q: %v", err)
		}
	})
	t.Run("workflow", func(t *testing.T) {
		b := setup(t, func(o *api.Options) {
			o.Middleware = labelled(40)
			o.QueueOptions = queues(map[string]int{"big": 20}, nil)
		})
		step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
		err := b.eng.Register(api.NewWorkflow("over").WithMiddleware(labelled(5)...).Then("s", step))
		want := `40 global + 20 of queue "big" + 5 workflow = 65 middleware in effect for a step attempt on queue "big", limit 64` + anyQueue
		var we *api.WorkflowError
		if !errors.As(err, &we) || we.Option != "WithMiddleware" || we.Reason != want {
			t.Fatalf("got %v\nwant %s", err, want)
		}
	})
}

// DL-27: a workflow step's own options refuse middleware and guards, and
// the error points at the workflow's option that takes them, not at
// Handle, with no count in front of the reason.
func TestDL27_StepOptionsPointAtWorkflowMiddleware(t *testing.T) {
	b := setup(t, nil)
	step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
	guard := func(context.Context, *api.Delivery) error { return nil }
	for _, c := range []struct {
		opt    api.JobOption
		option string
		reason string
	}{
		{api.WithMiddleware(labelled(2)...), "WithMiddleware",
			"a step takes no middleware of its own: give it to Workflow.WithMiddleware, which wraps every step attempt of the workflow"},
		{api.WithGuards(guard), "WithGuards",
			"a step takes no guards of its own: give them to Workflow.WithGuards, which runs them for every step attempt of the workflow"},
	} {
		err := b.eng.Register(api.NewWorkflow("w").Then("s", step, c.opt))
		var we *api.WorkflowError
		if !errors.As(err, &we) || !errors.Is(err, api.ErrInvalidOption) || we.Step != "s" || we.Option != c.option || we.Reason != c.reason {
			t.Fatalf("got %v\nwant step \"s\" %s: %s", err, c.option, c.reason)
		}
	}
}

// DL-27: handler middleware and guards given to Enqueue are refused with
// an OptionError naming the option that was given.
func TestDL27_EnqueueNamesTheRefusedOption(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	guard := func(context.Context, *api.Delivery) error { return nil }
	for _, c := range []struct {
		opt   api.JobOption
		field string
	}{
		{api.WithMiddleware(labelled(2)...), "WithMiddleware"},
		{api.WithGuards(guard), "WithGuards"},
	} {
		_, err := b.eng.Enqueue(b.ctx, "work", msg{N: 1}, c.opt)
		var oe *api.OptionError
		if !errors.As(err, &oe) || !errors.Is(err, api.ErrInvalidOption) || oe.Field != c.field {
			t.Fatalf("got %v, want an OptionError naming %s", err, c.field)
		}
	}
}
