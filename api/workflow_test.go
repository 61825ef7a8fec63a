package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// Helpers shared by the workflow (WF-n) and workflow deadline (WD-n) tests.
// They carry a wf prefix so that they never collide with the helpers of
// other test files of package api_test.

// wfRegister registers w on eng or fails the test.
func wfRegister(t *testing.T, eng *api.Engine, w *api.Workflow) {
	t.Helper()
	if err := eng.Register(w); err != nil {
		t.Fatalf("register: %v", err)
	}
}

// wfDispatch dispatches a workflow or fails the test.
func wfDispatch(b *testBundle, name string, st api.State, opts ...api.DispatchOption) string {
	b.t.Helper()
	id, err := b.eng.Dispatch(b.ctx, name, st, opts...)
	if err != nil {
		b.t.Fatalf("dispatch %s: %v", name, err)
	}
	return id
}

// wfInfo returns the status of workflow id or fails the test.
func wfInfo(b *testBundle, id string) api.WorkflowInfo {
	b.t.Helper()
	info, err := b.eng.Workflow(b.ctx, id)
	if err != nil {
		b.t.Fatalf("workflow %s: %v", id, err)
	}
	return info
}

// wfWant checks the status of workflow id.
func wfWant(b *testBundle, id string, want api.WorkflowStatus) api.WorkflowInfo {
	b.t.Helper()
	info := wfInfo(b, id)
	if info.Status != want {
		b.t.Fatalf("workflow %s (%s): status %s at step %d (%q), want %s; error %q",
			id, info.Name, info.Status, info.Step, info.StepName, want, info.Error)
	}
	return info
}

// wfBodies returns the bodies of type T in recs, in journal order.
func wfBodies[T record.Body](recs []journalRecord) []T {
	var out []T
	for _, r := range recs {
		if x, ok := r.Body.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// wfStream returns the record names of stream id (a workflow's own records
// and those of its step jobs), in journal order.
// stepJob returns the id of the last job enqueued for handler, such as a
// step's "flow/a".
func (b *testBundle) stepJob(handler string) string {
	b.t.Helper()
	id := ""
	for _, r := range b.records() {
		if e, ok := r.Body.(*record.JobEnqueued); ok && e.Handler == handler {
			id = e.JobID
		}
	}
	if id == "" {
		b.t.Fatalf("no job enqueued for %s", handler)
	}
	return id
}

func wfStream(recs []journalRecord, id string) []string {
	var out []string
	for _, r := range recs {
		if r.Stream == id {
			out = append(out, r.Kind().String())
		}
	}
	return out
}

// wfNames returns the record names of recs.
func wfNames(recs []journalRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Kind().String()
	}
	return out
}

// wfHasRun reports whether names holds run as a contiguous sequence.
func wfHasRun(names []string, run ...string) bool {
	for i := 0; i+len(run) <= len(names); i++ {
		ok := true
		for k := range run {
			if names[i+k] != run[k] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// wfCount counts the records of kind k on stream id.
func wfCount(recs []journalRecord, id string, k record.Kind) int {
	n := 0
	for _, r := range recs {
		if r.Stream == id && r.Kind() == k {
			n++
		}
	}
	return n
}

// wfSteps returns the job_enqueued records of workflow id.
func wfSteps(recs []journalRecord, id string) []*record.JobEnqueued {
	var out []*record.JobEnqueued
	for _, e := range wfBodies[*record.JobEnqueued](recs) {
		if e.WorkflowID == id {
			out = append(out, e)
		}
	}
	return out
}

// wfChild returns the id of the child workflow parent started at step.
func wfChild(b *testBundle, parent string, step int32) string {
	b.t.Helper()
	for _, s := range wfBodies[*record.WorkflowStarted](b.records()) {
		if s.ParentID == parent && s.ParentStep == step {
			return s.WorkflowID
		}
	}
	b.t.Fatalf("workflow %s started no child at step %d", parent, step)
	return ""
}

// wfNoAppend fails the test if fn appends anything.
func wfNoAppend(b *testBundle, what string, fn func()) {
	b.t.Helper()
	before := b.lastSeq()
	fn()
	if after := b.lastSeq(); after != before {
		b.t.Fatalf("%s appended records: seq %d -> %d", what, before, after)
	}
}

// wfState renders a state the way the assertions spell it: fmt prints map
// keys sorted, and numbers the same whatever their decoded width.
func wfState(s api.State) string { return fmt.Sprint(map[string]any(s)) }

// wfReturn is a step that returns out.
func wfReturn(out api.State) api.StepFunc {
	return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return out, nil }
}

// wfSeen is a step that records the state it received and returns out.
func wfSeen(rec *recorder, name string, out api.State) api.StepFunc {
	return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		rec.add(name + " " + wfState(st))
		return out, nil
	}
}

// wfGate is a step that tells it started and blocks until released: it
// models a step that takes the time the test moves the clock by while it
// is blocked. The settlement is decided at the clock's instant when the
// result reaches the engine. Later calls after the release return at once.
type wfGate struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	// ctxErr receives the attempt context's error when the step returns
	// (WD-9: expiry cancels no running attempt).
	ctxErr chan error
}

func newGate() *wfGate {
	return &wfGate{started: make(chan struct{}, 16), release: make(chan struct{}), ctxErr: make(chan error, 16)}
}

func (g *wfGate) step(out api.State, err error) api.StepFunc {
	return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		g.started <- struct{}{}
		<-g.release
		g.ctxErr <- ctx.Err()
		return out, err
	}
}

func (g *wfGate) wait() { <-g.started }

func (g *wfGate) open() { g.once.Do(func() { close(g.release) }) }

// flaky switches a step between failing and succeeding; the test heals it
// while the engine's goroutines read it.
type flaky struct {
	mu      sync.Mutex
	failing bool
}

func newFlaky() *flaky { return &flaky{failing: true} }

// fails reports whether the step still fails.
func (f *flaky) fails() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failing
}

func (f *flaky) heal() {
	f.mu.Lock()
	f.failing = false
	f.mu.Unlock()
}

// wfHealAndRetry lets f's step succeed, retries workflow id (WF-18) and
// waits until the engine is idle.
func wfHealAndRetry(b *testBundle, f *flaky, id string) {
	b.t.Helper()
	f.heal()
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		b.t.Fatal(err)
	}
	b.idle()
}

// wfSpy is an on-deadline handler that reports each call's state.
type wfSpy struct {
	calls chan api.State
	rec   recorder
}

func newSpy() *wfSpy { return &wfSpy{calls: make(chan api.State, 16)} }

func (s *wfSpy) register(t *testing.T, eng *api.Engine, name string) {
	t.Helper()
	if err := api.HandleDeadline(eng, name, func(ctx context.Context, st api.State) error {
		s.rec.add(wfState(st))
		s.calls <- st
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// WF-1: event names.

func TestWF1_EventNamesAreFixed(t *testing.T) {
	for _, name := range []string{
		"workflow_started", "step_completed", "step_delayed", "workflow_waiting", "signal_received",
		"workflow_paused", "workflow_resumed", "workflow_completed", "workflow_failed",
		"workflow_cancelled", "workflow_retried", "workflow_deadline_exceeded",
		"deadline_handler_started", "deadline_handler_finished", "job_enqueued", "attempt_started",
		"attempt_succeeded", "attempt_retry_scheduled", "attempt_buried", "attempt_released",
		"job_buried", "job_requeued", "queue_paused", "queue_resumed", "debug",
	} {
		k, ok := record.ParseKind(name)
		if !ok || k.String() != name {
			t.Errorf("WF-1: record name %q is not a known kind", name)
		}
	}

	// A workflow that goes through a Then, a Delay, a pause and a wait
	// writes those names to its stream.
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("tour").
		Then("a", wfReturn(api.State{"a": 1})).Delay(time.Minute).WaitForSignal("go").Then("b", wfReturn(nil)))
	b.start()
	id := wfDispatch(b, "tour", api.State{})
	b.idle()
	if err := b.eng.PauseWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.ResumeWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.advance(time.Minute)
	if err := b.eng.Signal(b.ctx, id, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	got := strings.Join(wfStream(b.records(), id), " ")
	want := "workflow_started job_enqueued attempt_started attempt_succeeded step_completed step_delayed " +
		"workflow_paused workflow_resumed step_completed workflow_waiting " +
		"signal_received workflow_resumed step_completed job_enqueued attempt_started attempt_succeeded step_completed workflow_completed"
	if got != want {
		t.Fatalf("WF-1: stream\n got %s\nwant %s", got, want)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-2: builder and validation.

func TestWF2_BuilderErrorsNameStepOrOptionAndAppendNothing(t *testing.T) {
	b := setup(t, nil)
	ok := wfReturn(nil)
	wfRegister(t, b.eng, api.NewWorkflow("dep").Then("x", ok))
	long := strings.Repeat("n", api.NameBytesMax+1)
	huge := strings.Repeat("h", 2<<20)
	cases := []struct {
		name     string
		w        *api.Workflow
		workflow string
		step     string
		option   string
		text     string
	}{
		{"empty workflow", api.NewWorkflow("empty"), "empty", "", "Register", "at least one step"},
		{"empty name", api.NewWorkflow("").Then("a", ok), "", "", "NewWorkflow", "must not be empty"},
		{"duplicate step names", api.NewWorkflow("dup").Then("a", ok).Then("a", ok), "dup", "a", "Then", "duplicate step name"},
		{"duplicate by Named", api.NewWorkflow("dup2").Then("a", ok).Delay(time.Second).Named("a"), "dup2", "a", "Named", "duplicate step name"},
		{"zero delay", api.NewWorkflow("d0").Then("a", ok).Delay(0), "d0", "delay_0", "Delay", "got 0s"},
		{"negative delay", api.NewWorkflow("dneg").Delay(time.Hour).Delay(-time.Second), "dneg", "delay_1", "Delay", "got -1s"},
		{"nil func", api.NewWorkflow("nilfn").Then("load", nil), "nilfn", "load", "Then", "nil"},
		{"nil branch", api.NewWorkflow("nilbr").Parallel("fan", ok, nil), "nilbr", "fan", "Parallel", "branch 1"},
		{"no branches", api.NewWorkflow("nobr").Parallel("fan"), "nobr", "fan", "Parallel", "at least one branch"},
		{"quorum larger than ids", api.NewWorkflow("q").WaitForWorkflows(api.Quorum(3), "wf_a", "wf_b"), "q", "*", "Quorum", "got 3"},
		{"quorum zero", api.NewWorkflow("q0").WaitForWorkflowsIn(api.Quorum(0), "ids"), "q0", "*", "Quorum", "got 0"},
		{"no signal names", api.NewWorkflow("sig").WaitForSignal(), "sig", "*", "WaitForSignal", "at least one signal"},
		{"private Into key", api.NewWorkflow("into").WaitForSignal("go").Into("_x"), "into", "*", "Into", "public key"},
		// WF-6: the result maps each name to one payload.
		{"Into over a repeated signal", api.NewWorkflow("into2").WaitForSignal("ok", "ok").Into("approvals"), "into2", "*", "Into", `"ok" is waited for more than once`},
		{"unknown sub-workflow", api.NewWorkflow("parent").Then("a", ok).SubWorkflow("enrich", "nope"), "parent", "enrich", "SubWorkflow", `"nope" is not registered`},
		{"zero deadline", api.NewWorkflow("wd").Then("a", ok).MustCompleteWithin(0), "wd", "", "MustCompleteWithin", "got 0s"},
		// RL-9: past DelayMax the instants used to wrap round into the
		// past, and fire at dispatch.
		{"delay over 100 years", api.NewWorkflow("dmax").Then("a", ok).Delay(api.DelayMax + 1), "dmax", "delay_0", "Delay", "at most DelayMax (876000h0m0s, 100 years), got 876000h0m0.000000001s"},
		{"deadline over 100 years", api.NewWorkflow("wdmax").Then("a", ok).MustCompleteWithin(api.DelayMax + 1), "wdmax", "", "MustCompleteWithin", "at most DelayMax (876000h0m0s, 100 years), got 876000h0m0.000000001s"},
		{"unknown deadline handler", api.NewWorkflow("wh").Then("a", ok).OnDeadline("nope"), "wh", "", "OnDeadline", `"nope" is not registered`},
		{"priority over Urgent", api.NewWorkflow("pr").Then("a", ok).WithPriority(api.Urgent + 1), "pr", "", "WithPriority", "got 4"},
		{"max attempts", api.NewWorkflow("ma").Then("a", ok).MaxAttempts(0), "ma", "", "MaxAttempts", "0 must be 1..100"},
		{"step option", api.NewWorkflow("so").Then("a", ok, api.MaxAttempts(101)), "so", "a", "MaxAttempts", "101 must be 1..100"},
		// WF-2, WF-22: enqueue-only options on a step were accepted and
		// ignored, so a step "delayed" an hour ran at once.
		{"step job Delay", api.NewWorkflow("sd").Then("a", ok, api.Delay(time.Hour)), "sd", "a", "Delay", "add a Workflow.Delay step"},
		{"step job Delay(0)", api.NewWorkflow("sd0").Then("a", ok, api.Delay(0)), "sd0", "a", "Delay", "add a Workflow.Delay step"},
		{"step Unique", api.NewWorkflow("su").Then("a", ok, api.Unique()), "su", "a", "Unique", "no Unique"},
		// RL-11: limits that keep every record of the definition within
		// the journal's caps.
		{"Then step name", api.NewWorkflow("t").Then(long, ok), "t", long, "Then", "step name is 101 bytes, limit 100"},
		{"Then 2 MiB step name", api.NewWorkflow("t2").Then(huge, ok), "t2", huge, "Then", "is 2097152 bytes, limit 100"},
		{"Parallel step name", api.NewWorkflow("p").Parallel(long, ok), "p", long, "Parallel", "step name is 101 bytes"},
		{"SubWorkflow step name", api.NewWorkflow("s").SubWorkflow(long, "dep"), "s", long, "SubWorkflow", "step name is 101 bytes"},
		{"Named step name", api.NewWorkflow("n").Delay(time.Second).Named(long), "n", long, "Named", "step name is 101 bytes"},
		{"Parallel branches", api.NewWorkflow("fan").Parallel("fan", inBranches(api.ParallelBranchesMax+1)...),
			"fan", "fan", "Parallel", "1025 branches, limit 1024 (ParallelBranchesMax)"},
		{"WaitForSignal names", api.NewWorkflow("sig").WaitForSignal(inNames(api.SignalNamesMax + 1)...),
			"sig", "0", "WaitForSignal", "65 signal names, limit 64 (SignalNamesMax)"},
		{"WaitForAnySignal names", api.NewWorkflow("any").Then("a", ok).WaitForAnySignal(inNames(api.SignalNamesMax + 1)...),
			"any", "1", "WaitForAnySignal", "65 signal names, limit 64"},
		{"WaitForWorkflows ids", api.NewWorkflow("ids").WaitForWorkflows(api.Any(), inIDs(api.WaitWorkflowsMax+1)...),
			"ids", "0", "WaitForWorkflows", "257 workflow ids, limit 256 (WaitWorkflowsMax)"},
		{"WaitForWorkflows empty id", api.NewWorkflow("empty").WaitForWorkflows(api.All(), "wf_a", ""),
			"empty", "0", "WaitForWorkflows", "workflow id 1 must not be empty"},
		{"WaitForWorkflows long id", api.NewWorkflow("longid").WaitForWorkflows(api.All(), strings.Repeat("w", record.StreamIDBytesMax+1)),
			"longid", "0", "WaitForWorkflows", "workflow id 0 is 128 bytes, limit 127"},
		{"WaitForWorkflows 2 MiB id", api.NewWorkflow("hugeid").WaitForWorkflows(api.All(), "wf_a", huge),
			"hugeid", "0", "WaitForWorkflows", "workflow id 1 is 2097152 bytes, limit 127"},
	}
	wfNoAppend(b, "refused registrations", func() {
		for _, c := range cases {
			err := b.eng.Register(c.w)
			var we *api.WorkflowError
			if !errors.As(err, &we) || !errors.Is(err, api.ErrInvalidOption) {
				t.Errorf("%s: got %v, want a *WorkflowError", c.name, err)
				continue
			}
			step := c.step
			if step == "*" { // an unnamed wait step: named, whatever its generated name
				step = we.Step
			}
			if we.Workflow != c.workflow || we.Step != step || we.Step == "" && c.step == "*" || we.Option != c.option {
				t.Errorf("%s: error names workflow %q step %.40q option %q, want %q %.40q %q (%.200v)",
					c.name, we.Workflow, we.Step, we.Option, c.workflow, c.step, c.option, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.option) || (step != "" && !strings.Contains(msg, strconv.Quote(step))) || !strings.Contains(msg, c.text) {
				t.Errorf("%s: message %.200q lacks the option, the step or %q", c.name, msg, c.text)
			}
			if strings.Contains(msg, "deadlines:") {
				t.Errorf("%s: message %.200q names an internal package", c.name, msg)
			}
			// A wait id is named by its index, never quoted whole.
			if c.option == "WaitForWorkflows" && len(msg) > 1000 {
				t.Errorf("%s: message is %d bytes", c.name, len(msg))
			}
		}
	})
	// A refused definition registers nothing: its name is still free.
	wfRegister(t, b.eng, api.NewWorkflow("dup").Then("a", ok).Then("b", ok))
	if err := b.eng.Register(api.NewWorkflow("dup").Then("a", ok)); !errors.Is(err, api.ErrDuplicate) {
		t.Fatalf("second registration of a name: %v", err)
	}
	// A step's handler name ("workflow/step") taken by a plain handler
	// refuses the definition and leaves the handler as it was.
	if err := api.Handle(b.eng, "clash/a", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	var ne *api.NameError
	if err := b.eng.Register(api.NewWorkflow("clash").Then("a", ok)); !errors.Is(err, api.ErrDuplicate) ||
		!errors.As(err, &ne) || ne.Name != "clash/a" {
		t.Fatalf("definition whose step handler name is taken: %v", err)
	}
	if _, err := b.eng.Dispatch(b.ctx, "clash", api.State{}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("dispatch of a definition refused for a taken handler name: %v", err)
	}
	if _, err := b.eng.Enqueue(b.ctx, "clash/a", msg{}); err != nil {
		t.Fatalf("the plain handler under the taken name: %v", err)
	}
	if _, err := b.eng.Dispatch(b.ctx, "empty", api.State{}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("dispatch of a refused definition: %v", err)
	}
	b.checkReplay()
}

func TestWF2_UnnamedStepsAreNamedByIndexAndDelayRank(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("auto").
		Then("", wfReturn(nil)).Delay(time.Minute).Then("", wfReturn(nil)).Delay(time.Minute).Then("", wfReturn(nil)))
	b.start()
	id := wfDispatch(b, "auto", api.State{})
	b.idle()
	var names []string
	for i := 0; i < 2; i++ {
		names = append(names, wfInfo(b, id).StepName)
		b.advance(time.Minute)
	}
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(names, ","); got != "delay_0,delay_1" || info.StepName != "" || info.Steps != 5 {
		t.Fatalf("WF-2: delay names %s, final %+v", got, info)
	}
	var handlers []string
	for _, e := range wfSteps(b.records(), id) {
		handlers = append(handlers, e.Handler)
	}
	if got := strings.Join(handlers, ","); got != "auto/0,auto/2,auto/4" {
		t.Fatalf("WF-2: step handlers %s, want the steps named by index", got)
	}
	b.checkReplay()
}

// WF-2: every unnamed step but a Delay is named by its index, waits
// included.
func TestWF2_UnnamedWaitStepsAreNamedByIndex(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("w").Then("", wfReturn(nil)).WaitForSignal("go"))
	b.start()
	id := wfDispatch(b, "w", api.State{})
	b.idle()
	if got := wfWant(b, id, api.WorkflowWaitingSignal).StepName; got != "1" {
		t.Fatalf("WF-2: the unnamed wait at index 1 is named %q", got)
	}
	err := b.eng.Register(api.NewWorkflow("q").WaitForWorkflows(api.Quorum(3), "wf_a", "wf_b"))
	var we *api.WorkflowError
	if !errors.As(err, &we) || we.Step != "0" {
		t.Fatalf("WF-2: %v", err)
	}
	b.checkReplay()
}

func TestWF2_DefinitionHashCoversDeadline(t *testing.T) {
	hash := func(d time.Duration, handler bool) string {
		b := setup(t, nil)
		w := api.NewWorkflow("import").Then("fetch", wfReturn(nil)).Then("load", wfReturn(nil))
		if d > 0 {
			w.MustCompleteWithin(d)
		}
		if handler {
			newSpy().register(t, b.eng, "import_timeout")
			w.OnDeadline("import_timeout")
		}
		wfRegister(t, b.eng, w)
		info := wfInfo(b, wfDispatch(b, "import", api.State{}))
		started := wfBodies[*record.WorkflowStarted](b.records())
		if len(started) != 1 || started[0].DefinitionHash != info.DefinitionHash || len(info.DefinitionHash) != 64 {
			t.Fatalf("WF-2: hash %q in status, records %+v", info.DefinitionHash, started)
		}
		b.checkReplay()
		return info.DefinitionHash
	}
	h1, h1again := hash(time.Hour, false), hash(time.Hour, false)
	h2, none, withHandler := hash(2*time.Hour, false), hash(0, false), hash(time.Hour, true)
	if h1 != h1again {
		t.Fatalf("WF-2: the same definition hashes to %s and %s", h1, h1again)
	}
	if h1 == h2 || h1 == none || h1 == withHandler {
		t.Fatalf("WF-2: hashes must differ when only the deadline fields differ: 1h %s, 2h %s, none %s, 1h+handler %s", h1, h2, none, withHandler)
	}
}

// ---------------------------------------------------------------------------
// WF-3, WF-12: Then merges public output keys; handlers see public state.

func TestWF3_ThenMergesPublicOutputDropsPrivateKeys(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", wfSeen(&rec, "fetch", api.State{"rows": 120, "_tmp": "y"})).
		Then("load", wfSeen(&rec, "load", nil)))
	b.start()
	id := wfDispatch(b, "import", api.State{"source": "s3://x"})
	b.idle()
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[rows:120 source:s3://x]" {
		t.Fatalf("WF-3: state %s", got)
	}
	want := "fetch map[source:s3://x]|load map[rows:120 source:s3://x]"
	if got := strings.Join(rec.get(), "|"); got != want {
		t.Fatalf("WF-3: handlers saw %s, want %s", got, want)
	}
	b.checkReplay()
}

func TestWF12_PublicStateOnlyInStatusHandlersSignalsAndChildren(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("child").Then("c", wfSeen(&rec, "child", nil)))
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", wfSeen(&rec, "fetch", api.State{"_secret": "s", "temp_file": "import-42.csv"})).
		WaitForSignal("go").
		SubWorkflow("sub", "child").
		Then("load", wfSeen(&rec, "load", nil)))
	b.start()
	id := wfDispatch(b, "import", api.State{"source": "s3://bucket/x", "_import_token": "k1"})
	b.idle()
	info := wfWant(b, id, api.WorkflowWaitingSignal)
	if got := wfState(info.State); got != "map[source:s3://bucket/x temp_file:import-42.csv]" {
		t.Fatalf("WF-12: status shows %s", got)
	}
	if err := b.eng.Signal(b.ctx, id, "go", api.State{"approved": true, "_signal_secret": 1}); err != nil {
		t.Fatal(err)
	}
	b.idle()
	info = wfWant(b, id, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[approved:true source:s3://bucket/x temp_file:import-42.csv]" {
		t.Fatalf("WF-12: final state %s", got)
	}
	want := []string{
		"fetch map[source:s3://bucket/x]",
		"child map[approved:true source:s3://bucket/x temp_file:import-42.csv]",
		"load map[approved:true source:s3://bucket/x temp_file:import-42.csv]",
	}
	if got := rec.get(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("WF-12: handlers saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The private dispatch key is stored (in workflow_started), never shown.
	started := wfBodies[*record.WorkflowStarted](b.records())
	if !strings.Contains(string(started[0].State), "_import_token") {
		t.Fatal("WF-12: private dispatch keys must be stored")
	}
	// Outputs and signals cannot write "_" keys, so none reaches the
	// journal: a secret a step returns is not on disk.
	for _, r := range b.records() {
		enc, err := record.EncodeValue(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(enc, []byte("_secret")) || bytes.Contains(enc, []byte("_signal_secret")) {
			t.Fatalf("WF-12: record %d (%s) holds a private output or signal key: %+v", r.Seq, r.Kind(), r.Body)
		}
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-4: Parallel.

func TestWF4_ParallelMergesInJournalOrderOfSuccesses(t *testing.T) {
	b := setup(t, nil)
	// Branch 2 succeeds at once, branch 0 on its second attempt (1 s later),
	// branch 1 on its third (3 s later, default backoff): the successes are
	// journaled in the order 2, 0, 1 and branch 1 wins the key collision.
	branch := func(n, failures int) api.StepFunc {
		return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			if d.Attempt() <= failures {
				return nil, errors.New("not yet")
			}
			return api.State{"winner": fmt.Sprint("b", n), fmt.Sprint("b", n): true}, nil
		}
	}
	wfRegister(t, b.eng, api.NewWorkflow("fan").
		Parallel("fan", branch(0, 1), branch(1, 2), branch(2, 0)).MaxAttempts(5))
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	b.idle()
	recs := b.records()
	if got := wfSteps(recs, id); len(got) != 3 || got[0].Step != 0 || got[2].Step != 0 {
		t.Fatalf("WF-4: one job per branch at one step index, got %d", len(got))
	}
	if !wfHasRun(wfNames(recs), "workflow_started", "job_enqueued", "job_enqueued", "job_enqueued") {
		t.Fatalf("WF-4: branch jobs must be enqueued in one append with the dispatch: %v", wfNames(recs))
	}
	wfWant(b, id, api.WorkflowRunning)
	b.advance(time.Second)
	wfWant(b, id, api.WorkflowRunning)
	b.advance(2 * time.Second)
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[b0:true b1:true b2:true winner:b1]" {
		t.Fatalf("WF-4: merged state %s", got)
	}
	recs = b.records()
	branchOf := map[string]int32{}
	for _, e := range wfSteps(recs, id) {
		branchOf[e.JobID] = e.Branch
	}
	var order []string
	for _, s := range wfBodies[*record.AttemptSucceeded](recs) {
		order = append(order, fmt.Sprint(branchOf[s.JobID]))
	}
	if got := strings.Join(order, ","); got != "2,0,1" {
		t.Fatalf("WF-4: successes journaled in branch order %s, want 2,0,1", got)
	}
	b.checkReplay()
}

func TestWF4_WF20_BuriedBranchFailsWorkflowAndBuriesPendingSiblings(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	var rec recorder
	bad := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return nil, api.Permanent("BAD_ROWS", errors.New("header row missing"))
	}
	wfRegister(t, b.eng, api.NewWorkflow("fan").
		Parallel("fan", bad, wfSeen(&rec, "b1", nil), wfSeen(&rec, "b2", nil)).Then("after", wfSeen(&rec, "after", nil)))
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if !strings.Contains(info.Error, "header row missing") || !info.FailedAt.Equal(t0) {
		t.Fatalf("WF-20: error %q failed at %v", info.Error, info.FailedAt)
	}
	if len(rec.get()) != 0 {
		t.Fatalf("siblings ran: %v", rec.get())
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "attempt_buried", "workflow_failed", "job_buried", "job_buried") {
		t.Fatalf("WF-4: failure append %v", names)
	}
	for _, jb := range wfBodies[*record.JobBuried](b.records()) {
		if jb.Error != info.Error {
			t.Fatalf("WF-20: sibling buried with %q, want the workflow's error %q", jb.Error, info.Error)
		}
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-5: Delay.

func TestWF5_DelayIsDurableAcrossRestart(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	register := func(e *api.Engine) {
		wfRegister(t, e, api.NewWorkflow("later").
			Then("a", wfSeen(&rec, "a", nil)).Delay(time.Hour).Then("b", wfSeen(&rec, "b", nil)).
			Delay(time.Hour).Then("c", wfSeen(&rec, "c", nil)))
	}
	register(b.eng)
	b.start()
	id := wfDispatch(b, "later", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowRunning)
	if info.StepName != "delay_0" || !info.DelayUntil.Equal(t0.Add(time.Hour)) {
		t.Fatalf("WF-5: %+v", info)
	}
	delayed := wfBodies[*record.StepDelayed](b.records())
	if len(delayed) != 1 || delayed[0].FireAt != t0.Add(time.Hour).UnixNano() {
		t.Fatalf("WF-5: step_delayed %+v", delayed)
	}
	// Down for two hours: the delay's fire_at passes while the engine is down.
	b.checkReplay()
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(2 * time.Hour)
	b.open()
	register(b.eng)
	wfWant(b, id, api.WorkflowRunning)
	b.start()
	b.idle()
	// Fired at recovery; the second delay runs from now.
	info = wfWant(b, id, api.WorkflowRunning)
	if info.StepName != "delay_1" || !info.DelayUntil.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("WF-5: after restart %+v", info)
	}
	b.advance(time.Hour - time.Nanosecond)
	wfWant(b, id, api.WorkflowRunning)
	b.advance(time.Nanosecond)
	wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(rec.get(), ","); got != "a map[],b map[],c map[]" {
		t.Fatalf("steps ran %s", got)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-6, WF-19: signals.

func TestWF6_SignalSettlesWaitInOneAppend(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("approve").
		Then("prep", wfReturn(api.State{"prepared": true})).WaitForSignal("approved").Then("load", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("approve_into").WaitForSignal("approved").Into("approval"))
	b.start()
	id := wfDispatch(b, "approve", api.State{})
	into := wfDispatch(b, "approve_into", api.State{"x": 1})
	b.idle()
	info := wfWant(b, id, api.WorkflowWaitingSignal)
	if strings.Join(info.WaitingFor, ",") != "approved" || info.Step != 1 {
		t.Fatalf("WF-6: wait details %+v", info)
	}
	if err := b.eng.Signal(b.ctx, id, "approved", api.State{"by": "ops", "_nonce": 7}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Signal(b.ctx, into, "approved", api.State{"by": "ops", "_nonce": 7}); err != nil {
		t.Fatal(err)
	}
	b.idle()
	info = wfWant(b, id, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[by:ops prepared:true]" {
		t.Fatalf("WF-6: merged state %s", got)
	}
	info = wfWant(b, into, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[approval:map[by:ops] x:1]" {
		t.Fatalf("WF-6: state with Into %s", got)
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "workflow_waiting", "signal_received", "workflow_resumed", "step_completed", "job_enqueued") {
		t.Fatalf("WF-6: signal append %v", names)
	}
	var causes []string
	for _, r := range wfBodies[*record.WorkflowResumed](b.records()) {
		causes = append(causes, r.Cause)
	}
	if strings.Join(causes, ",") != "signal,signal" {
		t.Fatalf("WF-6: resume causes %v", causes)
	}
	b.checkReplay()
}

func TestWF6_WF19_PreSentSignalSatisfiesLaterWaitOldestFirst(t *testing.T) {
	b := setup(t, nil)
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("two_waits").
		Then("work", g.step(nil, nil)).
		WaitForSignal("approve").Named("first").
		WaitForSignal("approve").Named("second").Into("second_approval").
		WaitForSignal("approve").Named("third"))
	b.start()
	id := wfDispatch(b, "two_waits", api.State{})
	g.wait()
	// Both signals arrive while the first step runs: stored, nothing settles.
	for i, by := range []string{"alice", "bob"} {
		if err := b.eng.Signal(b.ctx, id, "approve", api.State{"by": by, "n": i}); err != nil {
			t.Fatal(err)
		}
	}
	g.open()
	b.idle()
	// Each stored signal satisfies one wait, oldest first; the third waits.
	info := wfWant(b, id, api.WorkflowWaitingSignal)
	if info.StepName != "third" {
		t.Fatalf("WF-6: at %q", info.StepName)
	}
	if got := wfState(info.State); got != "map[by:alice n:0 second_approval:map[by:bob n:1]]" {
		t.Fatalf("WF-6: state %s", got)
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "attempt_succeeded", "step_completed", "step_completed", "step_completed", "workflow_waiting") {
		t.Fatalf("WF-6: pre-sent signals must complete the waits without waiting: %v", names)
	}
	for _, sc := range wfBodies[*record.StepCompleted](b.records())[1:] {
		if len(sc.Consumed) != 1 {
			t.Fatalf("WF-6: step %d consumed %v", sc.Step, sc.Consumed)
		}
	}
	if err := b.eng.Signal(b.ctx, id, "approve", api.State{"by": "carol"}); err != nil {
		t.Fatal(err)
	}
	b.idle()
	info = wfWant(b, id, api.WorkflowCompleted)
	if info.State["by"] != "carol" {
		t.Fatalf("WF-6: %s", wfState(info.State))
	}
	b.checkReplay()
}

func TestWF6_WaitForSignalAllAndAny(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("all").WaitForSignal("legal", "finance"))
	wfRegister(t, b.eng, api.NewWorkflow("any").WaitForAnySignal("legal", "finance").Into("by"))
	b.start()
	all := wfDispatch(b, "all", api.State{})
	anyID := wfDispatch(b, "any", api.State{})
	b.idle()
	for _, id := range []string{all, anyID} {
		if err := b.eng.Signal(b.ctx, id, "finance", api.State{"finance": "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	b.idle()
	wfWant(b, all, api.WorkflowWaitingSignal)
	if info := wfWant(b, anyID, api.WorkflowCompleted); wfState(info.State) != "map[by:map[finance:ok]]" {
		t.Fatalf("WF-6: any %s", wfState(info.State))
	}
	if err := b.eng.Signal(b.ctx, all, "legal", api.State{"legal": "ok"}); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if info := wfWant(b, all, api.WorkflowCompleted); wfState(info.State) != "map[finance:ok legal:ok]" {
		t.Fatalf("WF-6: all %s", wfState(info.State))
	}
	b.checkReplay()
}

func TestWF19_SignalTargets(t *testing.T) {
	b := setup(t, nil)
	fail := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return nil, api.Permanent("NO", errors.New("no"))
	}
	wfRegister(t, b.eng, api.NewWorkflow("done").Then("a", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("bad").Then("a", fail))
	b.start()
	done := wfDispatch(b, "done", api.State{})
	cancelled := wfDispatch(b, "wait", api.State{})
	failed := wfDispatch(b, "bad", api.State{})
	b.idle()
	if err := b.eng.CancelWorkflow(b.ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	wfWant(b, done, api.WorkflowCompleted)
	wfWant(b, failed, api.WorkflowFailed)
	wfNoAppend(b, "refused signals", func() {
		err := b.eng.Signal(b.ctx, "wf_unknown", "go", nil)
		var ne *api.NameError
		if !errors.Is(err, api.ErrNotFound) || !errors.As(err, &ne) || ne.Name != "wf_unknown" ||
			err.Error() != `quire: workflow "wf_unknown": not found` {
			t.Errorf("WF-19: signal to an unknown id: %v", err)
		}
		for id, status := range map[string]string{done: "completed", cancelled: "cancelled"} {
			err := b.eng.Signal(b.ctx, id, "go", nil)
			// Worded once, and of the workflow: not "scheduler: job is not
			// in a state...".
			if want := "quire: operation not allowed in this state: workflow " + id + " is " + status; !errors.Is(err, api.ErrState) ||
				!strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "job") || strings.Contains(err.Error(), "scheduler") {
				t.Errorf("WF-19: signal to finished %s: %v, want %q...", id, err, want)
			}
		}
		if err := b.eng.Signal(b.ctx, failed, "", nil); err == nil {
			t.Error("WF-19: an empty signal name must be refused")
		}
	})
	// A failed workflow still stores signals (it may be retried).
	if err := b.eng.Signal(b.ctx, failed, "go", api.State{"a": 1}); err != nil {
		t.Fatalf("WF-19: signal to a failed workflow: %v", err)
	}
	if n := wfCount(b.records(), failed, record.KindSignalReceived); n != 1 {
		t.Fatalf("WF-19: %d signal_received", n)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-7: WaitForWorkflows.

// wfDeps registers "dep": it waits for a signal "go" whose payload says
// whether its step fails.
func wfDeps(t *testing.T, b *testBundle) {
	t.Helper()
	wfRegister(t, b.eng, api.NewWorkflow("dep").WaitForSignal("go").
		Then("work", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			if st["fail"] == true {
				return nil, api.Permanent("DEP_FAILED", errors.New("dependency broke"))
			}
			return api.State{"done": st["n"]}, nil
		}))
}

func wfFinish(b *testBundle, id string, fail bool) {
	b.t.Helper()
	if err := b.eng.Signal(b.ctx, id, "go", api.State{"fail": fail}); err != nil {
		b.t.Fatal(err)
	}
	b.idle()
}

func TestWF7_AllWaitsForEveryCompletionAndFailsOnFirstFailure(t *testing.T) {
	b := setup(t, nil)
	wfDeps(t, b)
	b.start()
	d1 := wfDispatch(b, "dep", api.State{"n": 1})
	d2 := wfDispatch(b, "dep", api.State{"n": 2})
	d3 := wfDispatch(b, "dep", api.State{"n": 3})
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflows(api.All(), d1, d2).Into("deps").Then("after", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("join_in").WaitForWorkflowsIn(api.All(), "ids"))
	ok := wfDispatch(b, "join", api.State{})
	bad := wfDispatch(b, "join_in", api.State{"ids": []string{d2, d3}})
	b.idle()
	info := wfWant(b, ok, api.WorkflowWaitingWorkflows)
	if strings.Join(info.WaitingFor, ",") != d1+","+d2 || info.WaitMode != "all" {
		t.Fatalf("WF-7: wait details %+v", info)
	}
	if got := wfWant(b, bad, api.WorkflowWaitingWorkflows).WaitingFor; strings.Join(got, ",") != d2+","+d3 {
		t.Fatalf("WF-7: ids read from state %v", got)
	}
	wfFinish(b, d1, false)
	wfWant(b, ok, api.WorkflowWaitingWorkflows)
	wfFinish(b, d3, true) // All fails as soon as one failed
	info = wfWant(b, bad, api.WorkflowFailed)
	if !strings.Contains(info.Error, d3) || !strings.Contains(info.Error, "failed") {
		t.Fatalf("WF-7: the failure must name the dependency: %q", info.Error)
	}
	wfFinish(b, d2, false)
	info = wfWant(b, ok, api.WorkflowCompleted)
	deps, _ := info.State["deps"].(map[string]any)
	if len(deps) != 2 || !strings.Contains(fmt.Sprint(deps[d2]), "status:completed") || !strings.Contains(fmt.Sprint(deps[d2]), "done:2") {
		t.Fatalf("WF-7: result under the key: %s", wfState(info.State))
	}
	var causes []string
	for _, r := range wfBodies[*record.WorkflowResumed](b.records()) {
		causes = append(causes, r.Cause)
	}
	if !strings.Contains(strings.Join(causes, ","), "workflows") {
		t.Fatalf("WF-7: resume causes %v", causes)
	}
	b.checkReplay()
}

func TestWF7_AnyAndQuorum(t *testing.T) {
	b := setup(t, nil)
	wfDeps(t, b)
	b.start()
	var d [6]string
	for i := range d {
		d[i] = wfDispatch(b, "dep", api.State{"n": i})
	}
	wfRegister(t, b.eng, api.NewWorkflow("any_ok").WaitForWorkflows(api.Any(), d[0], d[1]))
	wfRegister(t, b.eng, api.NewWorkflow("any_bad").WaitForWorkflows(api.Any(), d[2], d[3]))
	wfRegister(t, b.eng, api.NewWorkflow("quorum").WaitForWorkflowsIn(api.Quorum(2), "ids"))
	anyOK := wfDispatch(b, "any_ok", api.State{})
	anyBad := wfDispatch(b, "any_bad", api.State{})
	qOK := wfDispatch(b, "quorum", api.State{"ids": []string{d[0], d[1], d[4]}})
	qBad := wfDispatch(b, "quorum", api.State{"ids": []string{d[2], d[3], d[5]}})
	b.idle()

	wfFinish(b, d[0], true)
	wfWant(b, anyOK, api.WorkflowWaitingWorkflows) // Any fails only when all ended
	wfFinish(b, d[1], false)
	wfWant(b, anyOK, api.WorkflowCompleted)

	wfFinish(b, d[2], true)
	wfWant(b, anyBad, api.WorkflowWaitingWorkflows)
	wfWant(b, qBad, api.WorkflowWaitingWorkflows) // 2 of the 3 still reachable
	wfFinish(b, d[3], true)
	if info := wfWant(b, anyBad, api.WorkflowFailed); !strings.Contains(info.Error, d[2]) {
		t.Fatalf("WF-7: Any failure %q", info.Error)
	}
	if info := wfWant(b, qBad, api.WorkflowFailed); !strings.Contains(info.Error, d[2]) {
		t.Fatalf("WF-7: Quorum failure once n is out of reach %q", info.Error)
	}
	wfWant(b, qOK, api.WorkflowWaitingWorkflows) // one of 2 completed
	wfFinish(b, d[4], false)
	wfWant(b, qOK, api.WorkflowCompleted)
	b.checkReplay()
}

func TestWF7_AlreadyDecidedOnEntryDoesNotWait(t *testing.T) {
	b := setup(t, nil)
	wfDeps(t, b)
	b.start()
	d1 := wfDispatch(b, "dep", api.State{"n": 1})
	wfFinish(b, d1, false)
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflows(api.All(), d1).Into("deps"))
	wfRegister(t, b.eng, api.NewWorkflow("join_missing").WaitForWorkflowsIn(api.All(), "ids"))
	id := wfDispatch(b, "join", api.State{})
	missing := wfDispatch(b, "join_missing", api.State{})
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	if n := wfCount(b.records(), id, record.KindWorkflowWaiting); n != 0 {
		t.Fatalf("WF-7: waited %d times for a decided dependency", n)
	}
	if info := wfWant(b, missing, api.WorkflowFailed); !strings.Contains(info.Error, `"ids"`) {
		t.Fatalf("WF-7: a missing id key must fail naming it: %q", info.Error)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-8: SubWorkflow.

func TestWF8_SubWorkflowMergesChildPublicStateInItsCompletionAppend(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("enrich").Then("add", wfSeen(&rec, "child", api.State{"enriched": true, "_c": 1})))
	wfRegister(t, b.eng, api.NewWorkflow("import").
		Then("fetch", wfReturn(api.State{"rows": 3})).SubWorkflow("enrich", "enrich").Then("load", wfSeen(&rec, "load", nil)).
		OnQueue("etl").WithPriority(api.High).MaxAttempts(2))
	b.start()
	id := wfDispatch(b, "import", api.State{"source": "s3://x", "_p": 1})
	b.idle()
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := wfState(info.State); got != "map[enriched:true rows:3 source:s3://x]" {
		t.Fatalf("WF-8: parent state %s", got)
	}
	child := wfChild(b, id, 1)
	ci := wfWant(b, child, api.WorkflowCompleted)
	if ci.ParentID != id || ci.ParentStep != 1 || !ci.DeadlineAt.IsZero() {
		t.Fatalf("WF-8: child %+v", ci)
	}
	if got := strings.Join(rec.get(), "|"); got != "child map[rows:3 source:s3://x]|load map[enriched:true rows:3 source:s3://x]" {
		t.Fatalf("WF-8: %s", got)
	}
	names := wfNames(b.records())
	if !wfHasRun(names, "attempt_succeeded", "step_completed", "workflow_completed", "step_completed", "job_enqueued") {
		t.Fatalf("WF-8: the child's completion and the parent's step must share one append: %v", names)
	}
	b.checkReplay()
}

func TestWF8_ChildInheritsQueuePriorityAndMaxAttempts(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("child").Then("work", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("parent").SubWorkflow("sub", "child").
		OnQueue("etl").WithPriority(api.High).MaxAttempts(2).MustCompleteWithin(time.Hour))
	b.start()
	p := wfDispatch(b, "parent", api.State{})
	b.idle()
	wfWant(b, p, api.WorkflowCompleted)
	jobs := wfSteps(b.records(), wfChild(b, p, 0))
	if len(jobs) != 1 || jobs[0].Queue != "etl" || jobs[0].Priority != uint8(api.High) || jobs[0].Retry.MaxAttempts != 2 {
		t.Fatalf("WF-8: child step job %+v", jobs)
	}
	b.checkReplay()
}

// A child's step job that runs on the queue it inherits gets that queue's
// options where nothing more specific sets them, as every job of the queue
// does: not those of the queue its own definition would have used.
func TestWF8_WF22_ChildOnInheritedQueueTakesThatQueuesOptions(t *testing.T) {
	b := setup(t, func(o *api.Options) {
		o.QueueOptions = map[string]api.QueueOptions{"etl": {MaxAttempts: 7, DeliveryTimeout: 5 * time.Second,
			Backoff: &api.BackoffPolicy{Kind: api.BackoffFixed, Base: 2 * time.Second}}}
	})
	ok := wfReturn(nil)
	wfRegister(t, b.eng, api.NewWorkflow("child").Then("plain", ok).
		Then("own", ok, api.MaxAttempts(1), api.DeliveryTimeout(time.Second)))
	wfRegister(t, b.eng, api.NewWorkflow("capped").Then("plain", ok).MaxAttempts(4))
	wfRegister(t, b.eng, api.NewWorkflow("parent").Then("mine", ok).SubWorkflow("sub", "child").
		SubWorkflow("sub2", "capped").OnQueue("etl"))
	b.start()
	p := wfDispatch(b, "parent", api.State{})
	b.idle()
	wfWant(b, p, api.WorkflowCompleted)
	recs := b.records()
	var got []string
	for _, id := range []string{p, wfChild(b, p, 1), wfChild(b, p, 2)} {
		for _, e := range wfSteps(recs, id) {
			got = append(got, fmt.Sprintf("%s:%s/%d/%s/%s", e.Handler, e.Queue, e.Retry.MaxAttempts,
				time.Duration(e.Retry.BaseNanos), time.Duration(e.DeliveryTimeoutNanos)))
		}
	}
	want := "parent/mine:etl/7/2s/5s child/plain:etl/7/2s/5s child/own:etl/1/2s/1s capped/plain:etl/4/2s/5s"
	if strings.Join(got, " ") != want {
		t.Fatalf("WF-8, WF-22:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	b.checkReplay()
}

func TestWF8_FailedOrCancelledChildFailsParentNamingIt(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("child").WaitForSignal("go").
		Then("w", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return nil, api.Permanent("BROKEN", errors.New("child broke"))
		}))
	wfRegister(t, b.eng, api.NewWorkflow("parent").SubWorkflow("sub", "child").Then("after", wfReturn(nil)))
	b.start()
	p1 := wfDispatch(b, "parent", api.State{})
	p2 := wfDispatch(b, "parent", api.State{})
	b.idle()
	wfWant(b, p1, api.WorkflowRunning)
	c1, c2 := wfChild(b, p1, 0), wfChild(b, p2, 0)
	wfWant(b, c1, api.WorkflowWaitingSignal)
	if err := b.eng.Signal(b.ctx, c1, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if info := wfWant(b, p1, api.WorkflowFailed); !strings.Contains(info.Error, c1) || !strings.Contains(info.Error, "child broke") {
		t.Fatalf("WF-8: parent error %q", info.Error)
	}
	if err := b.eng.CancelWorkflow(b.ctx, c2); err != nil {
		t.Fatal(err)
	}
	if info := wfWant(b, p2, api.WorkflowFailed); !strings.Contains(info.Error, c2) || !strings.Contains(info.Error, "cancelled") {
		t.Fatalf("WF-8: parent error %q", info.Error)
	}
	b.checkReplay()
}

func TestWF8_ParentNotRunningIsNotAdvancedByChild(t *testing.T) {
	b := setup(t, nil)
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("child").Then("slow", g.step(api.State{"late": true}, nil)))
	wfRegister(t, b.eng, api.NewWorkflow("parent").SubWorkflow("sub", "child").Then("after", wfReturn(nil)))
	b.start()
	p := wfDispatch(b, "parent", api.State{})
	g.wait()
	c := wfChild(b, p, 0)
	if err := b.eng.CancelWorkflow(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	g.open()
	b.idle()
	wfWant(b, c, api.WorkflowCompleted) // children are not cancelled with the parent
	info := wfWant(b, p, api.WorkflowCancelled)
	if _, ok := info.State["late"]; ok || wfCount(b.records(), p, record.KindStepCompleted) != 0 {
		t.Fatalf("WF-8: a cancelled parent was advanced by its child: %s", wfState(info.State))
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-9, WF-10: statuses and allowed transitions.

func TestWF9_WF10_DisallowedTransitionsAreTypedAndAppendNothing(t *testing.T) {
	b := setup(t, nil)
	fail := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return nil, api.Permanent("NO", errors.New("no"))
	}
	wfRegister(t, b.eng, api.NewWorkflow("held").Then("a", wfReturn(nil), api.OnQueue("held")))
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("done").Then("a", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("bad").Then("a", fail))
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	running := wfDispatch(b, "held", api.State{})
	paused := wfDispatch(b, "held", api.State{})
	waiting := wfDispatch(b, "wait", api.State{})
	done := wfDispatch(b, "done", api.State{})
	failed := wfDispatch(b, "bad", api.State{})
	cancelled := wfDispatch(b, "wait", api.State{})
	b.idle()
	if err := b.eng.PauseWorkflow(b.ctx, paused); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.CancelWorkflow(b.ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]api.WorkflowStatus{running: api.WorkflowRunning, paused: api.WorkflowPaused,
		waiting: api.WorkflowWaitingSignal, done: api.WorkflowCompleted, failed: api.WorkflowFailed, cancelled: api.WorkflowCancelled} {
		wfWant(b, id, want)
	}
	pause := func(id string) error { return b.eng.PauseWorkflow(b.ctx, id) }
	resume := func(id string) error { return b.eng.ResumeWorkflow(b.ctx, id) }
	retry := func(id string) error { return b.eng.RetryWorkflow(b.ctx, id) }
	cancel := func(id string) error { return b.eng.CancelWorkflow(b.ctx, id) }
	cases := []struct {
		what string
		op   func(string) error
		id   string
	}{
		{"resume running", resume, running}, {"retry running", retry, running},
		{"pause paused", pause, paused}, {"retry paused", retry, paused},
		{"pause waiting", pause, waiting}, {"resume waiting", resume, waiting}, {"retry waiting", retry, waiting},
		{"pause failed", pause, failed}, {"resume failed", resume, failed},
		{"pause completed", pause, done}, {"resume completed", resume, done}, {"retry completed", retry, done}, {"cancel completed", cancel, done},
		{"pause cancelled", pause, cancelled}, {"resume cancelled", resume, cancelled}, {"retry cancelled", retry, cancelled}, {"cancel cancelled", cancel, cancelled},
	}
	wfNoAppend(b, "refused transitions", func() {
		for _, c := range cases {
			if err := c.op(c.id); !errors.Is(err, api.ErrState) {
				t.Errorf("WF-10: %s: %v, want ErrState", c.what, err)
			}
		}
		for _, op := range []func(string) error{pause, resume, retry, cancel} {
			if err := op("wf_nope"); !errors.Is(err, api.ErrNotFound) {
				t.Errorf("WF-10: unknown id: %v", err)
			}
		}
	})
	// The allowed ones: cancel from running, paused, waiting and failed.
	for _, id := range []string{running, paused, waiting, failed} {
		if err := cancel(id); err != nil {
			t.Fatalf("WF-10: cancel: %v", err)
		}
		wfWant(b, id, api.WorkflowCancelled)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-11: one append per transition.

func TestWF11_TransitionsAreSingleAppendsWithTheirConsequences(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("chain").Then("a", wfReturn(api.State{"a": 1})).Then("b", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflowsIn(api.All(), "ids").Then("c", wfReturn(nil)))
	id := wfDispatch(b, "chain", api.State{})
	// Dispatch is workflow_started and the first step's entry.
	recs := b.records()
	if got := strings.Join(wfNames(recs[len(recs)-2:]), ","); got != "workflow_started,job_enqueued" {
		t.Fatalf("WF-11: dispatch append %s", got)
	}
	join := wfDispatch(b, "join", api.State{"ids": []string{id}})
	b.start()
	b.idle()
	wfWant(b, join, api.WorkflowCompleted)
	names := wfNames(b.records())
	for _, run := range [][]string{
		{"attempt_succeeded", "step_completed", "job_enqueued"},
		// The last step: its success, the completion and the dependant's
		// reaction (resumed, its step completed, its next job) in one append.
		{"attempt_succeeded", "step_completed", "workflow_completed", "workflow_resumed", "step_completed", "job_enqueued"},
		{"attempt_succeeded", "step_completed", "workflow_completed"},
	} {
		if !wfHasRun(names, run...) {
			t.Fatalf("WF-11: journal lacks the adjacent records %v:\n%v", run, names)
		}
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-13, WF-14: dispatch.

func TestWF13_DispatchReturnsIDOnceSynced(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("import").Then("fetch", wfReturn(nil)).Then("load", wfReturn(nil)))
	id := wfDispatch(b, "import", api.State{"source": "s3://x"})
	if !strings.HasPrefix(id, "wf_") {
		t.Fatalf("WF-13: id %q", id)
	}
	started := wfBodies[*record.WorkflowStarted](b.records()) // read from the journal itself
	if len(started) != 1 || started[0].WorkflowID != id || started[0].At != t0.UnixNano() || started[0].Steps != 2 {
		t.Fatalf("WF-13: workflow_started %+v", started)
	}
	info := wfWant(b, id, api.WorkflowRunning)
	if info.Step != 0 || info.StepName != "fetch" || info.Steps != 2 || info.Name != "import" || !info.StartedAt.Equal(t0) {
		t.Fatalf("WF-13: %+v", info)
	}
	b.checkReplay()
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Dispatch(b.ctx, "import", api.State{}); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("WF-13: dispatch on a closed engine: %v", err)
	}
}

func TestWF14_IdempotentDispatch(t *testing.T) {
	b := setup(t, nil)
	register := func(e *api.Engine) {
		wfRegister(t, e, api.NewWorkflow("import").Then("fetch", wfReturn(nil)).MustCompleteWithin(24*time.Hour))
		wfRegister(t, e, api.NewWorkflow("export").Then("push", wfReturn(nil)))
	}
	register(b.eng)
	id := wfDispatch(b, "import", api.State{"n": 1}, api.IdempotencyKey("k1"))
	check := func(when string) {
		t.Helper()
		wfNoAppend(b, "re-dispatch "+when, func() {
			again, err := b.eng.Dispatch(b.ctx, "import", api.State{"n": 2}, api.IdempotencyKey("k1"))
			if err != nil || again != id {
				t.Fatalf("WF-14 %s: re-dispatch returned %q, %v; want %s", when, again, err, id)
			}
			_, err = b.eng.Dispatch(b.ctx, "export", api.State{}, api.IdempotencyKey("k1"))
			if !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "k1") {
				t.Fatalf("WF-14 %s: key reused for another workflow: %v", when, err)
			}
		})
		info := wfInfo(b, id)
		if info.IdempotencyKey != "k1" || !info.DeadlineAt.Equal(t0.Add(24*time.Hour)) || info.State["n"] == 2 {
			t.Fatalf("WF-14 %s: %+v", when, info)
		}
	}
	check("while pending")
	b.advance(time.Hour)
	b.start()
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	check("after completion")
	b.reopen(register)
	check("after a restart")
	if n := countKind(b.records(), record.KindWorkflowStarted); n != 1 {
		t.Fatalf("WF-14: %d workflow_started", n)
	}
	other := wfDispatch(b, "import", api.State{}, api.IdempotencyKey("k2"))
	if other == id {
		t.Fatal("WF-14: another key returned the same workflow")
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-15, WF-16: pause and resume.

func TestWF15_WF16_PausedWorkflowStartsNoJobAndResumeEntersStep(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("p").Then("a", wfSeen(&rec, "a", nil)).Then("b", wfSeen(&rec, "b", nil)))
	id := wfDispatch(b, "p", api.State{})
	if err := b.eng.PauseWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.advance(time.Hour)
	info := wfWant(b, id, api.WorkflowPaused)
	if len(rec.get()) != 0 || info.Attempts != 0 {
		t.Fatalf("WF-15: a pending job of a paused workflow started: %v", rec.get())
	}
	if err := b.eng.ResumeWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(rec.get(), ","); got != "a map[],b map[]" {
		t.Fatalf("WF-16: %s", got)
	}
	// The pending job was kept: resume enqueued nothing new for step a.
	if n := len(wfSteps(b.records(), id)); n != 2 {
		t.Fatalf("WF-16: %d step jobs, want 2", n)
	}
	var causes []string
	for _, r := range wfBodies[*record.WorkflowResumed](b.records()) {
		causes = append(causes, r.Cause)
	}
	if strings.Join(causes, ",") != "resume" {
		t.Fatalf("WF-16: causes %v", causes)
	}
	b.checkReplay()
}

func TestWF15_StepCompletingWhilePausedAdvancesButEntersNothing(t *testing.T) {
	b := setup(t, nil)
	g := newGate()
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("p").Then("a", g.step(api.State{"a": 1}, nil)).Then("b", wfSeen(&rec, "b", nil)))
	b.start()
	id := wfDispatch(b, "p", api.State{})
	g.wait()
	if err := b.eng.PauseWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	g.open() // the running attempt continues and settles normally
	b.idle()
	info := wfWant(b, id, api.WorkflowPaused)
	if info.Step != 1 || info.StepName != "b" || info.State["a"] == nil {
		t.Fatalf("WF-15: %+v", info)
	}
	if n := len(wfSteps(b.records(), id)); n != 1 || len(rec.get()) != 0 {
		t.Fatalf("WF-15: a paused workflow entered its next step (%d jobs)", n)
	}
	if err := b.eng.ResumeWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(rec.get(), ","); got != "b map[a:1]" {
		t.Fatalf("WF-16: %s", got)
	}
	b.checkReplay()
}

func TestWF15_LastStepCompletingWhilePausedCompletesWorkflow(t *testing.T) {
	b := setup(t, nil)
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("p").Then("only", g.step(api.State{"done": true}, nil)))
	b.start()
	id := wfDispatch(b, "p", api.State{})
	g.wait()
	if err := b.eng.PauseWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	g.open()
	b.idle()
	info := wfWant(b, id, api.WorkflowCompleted)
	if info.State["done"] != true {
		t.Fatalf("WF-15: %+v", info)
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "workflow_paused", "attempt_succeeded", "step_completed", "workflow_completed") {
		t.Fatalf("WF-15: %v", names)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-17: cancel.

func TestWF17_CancelBuriesPendingJobsAndDiscardsRunningResults(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	g := newGate()
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("fan").
		Parallel("fan", g.step(api.State{"x": 1}, nil), wfSeen(&rec, "b1", nil)).Then("after", wfSeen(&rec, "after", nil)))
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	g.wait() // branch 0 runs, branch 1 is pending (one worker)
	if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "attempt_started", "workflow_cancelled", "job_buried") {
		t.Fatalf("WF-17: cancel append %v", names)
	}
	buried := wfBodies[*record.JobBuried](b.records())
	// The code says why, as the message does: the workflow did not fail.
	if len(buried) != 1 || buried[0].Error != "Workflow cancelled" || buried[0].Code != "WORKFLOW_CANCELLED" {
		t.Fatalf("WF-17: %+v", buried)
	}
	g.open()
	b.idle()
	info := wfWant(b, id, api.WorkflowCancelled)
	if len(rec.get()) != 0 || info.State["x"] != nil || wfCount(b.records(), id, record.KindStepCompleted) != 0 {
		t.Fatalf("WF-17: the running branch's result was used: %s, %v", wfState(info.State), rec.get())
	}
	if ctxErr := <-g.ctxErr; ctxErr != nil {
		t.Fatalf("WF-17: running attempts are not interrupted, ctx: %v", ctxErr)
	}
	if n := wfCount(b.records(), id, record.KindAttemptSucceeded); n != 1 {
		t.Fatalf("WF-17: the late success must be recorded, %d", n)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-18: retry.

func TestWF18_RetryReentersCurrentStepWithFreshAttempts(t *testing.T) {
	b := setup(t, nil)
	calls := 0
	var mu sync.Mutex
	flaky := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 2 {
			return nil, errors.New("flaky")
		}
		return api.State{"attempt": d.Attempt()}, nil
	}
	wfRegister(t, b.eng, api.NewWorkflow("r").Then("a", flaky).MaxAttempts(2))
	b.start()
	id := wfDispatch(b, "r", api.State{})
	b.idle()
	b.advance(time.Second)
	info := wfWant(b, id, api.WorkflowFailed)
	if info.Error != "flaky" || info.Attempts != 2 {
		t.Fatalf("WF-18: %+v", info)
	}
	b.advance(time.Minute)
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	info = wfWant(b, id, api.WorkflowCompleted)
	if fmt.Sprint(info.State["attempt"]) != "1" {
		t.Fatalf("WF-18: the retried step must start with fresh attempts: %s", wfState(info.State))
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "workflow_retried", "job_enqueued") || len(wfSteps(b.records(), id)) != 2 {
		t.Fatalf("WF-18: %v", names)
	}
	b.checkReplay()
}

func TestWF18_RetryParallelOnlyBranchesWithoutSuccess(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	var rec recorder
	f := newFlaky()
	b1 := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		rec.add("b1")
		if f.fails() {
			return nil, api.Permanent("NO", errors.New("b1 broke"))
		}
		return api.State{"b1": true}, nil
	}
	wfRegister(t, b.eng, api.NewWorkflow("fan").Parallel("fan",
		func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			rec.add("b0")
			return api.State{"b0": true}, nil
		}, b1))
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	b.idle()
	wfWant(b, id, api.WorkflowFailed)
	wfHealAndRetry(b, f, id)
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(rec.get(), ","); got != "b0,b1,b1" {
		t.Fatalf("WF-18: branch runs %s, want b0 once", got)
	}
	if got := wfState(info.State); got != "map[b0:true b1:true]" {
		t.Fatalf("WF-18: %s", got)
	}
	b.checkReplay()
}

// WF-18, WF-20: a branch that succeeds after its workflow failed (a
// sibling was buried while it ran) changes nothing then, and is not run
// again by a retry: only branches without attempt_succeeded get new jobs.
// Its output is merged when the retried step completes. The late success
// used to be dropped from the state, so the retry ran the branch again.
func TestWF18_RetryDoesNotRerunABranchThatSucceededAfterTheFailure(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	slow := newGate()
	f := newFlaky()
	wfRegister(t, b.eng, api.NewWorkflow("fan").Parallel("fan",
		func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			rec.add("b0")
			if f.fails() {
				return nil, api.Permanent("NO", errors.New("b0 broke"))
			}
			return api.State{"b0": true}, nil
		},
		func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			rec.add("b1")
			return slow.step(api.State{"b1": true}, nil)(ctx, d, st)
		}).Then("after", wfSeen(&rec, "after", nil)))
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	slow.wait()
	for wfInfo(b, id).Status != api.WorkflowFailed { // b0 is buried while b1 runs
		runtime.Gosched()
	}
	slow.open()
	b.idle()
	failed := wfWant(b, id, api.WorkflowFailed)
	if wfState(failed.State) != "map[]" || wfCount(b.records(), id, record.KindStepCompleted) != 0 {
		t.Fatalf("WF-20: the late success changed the failed workflow: %+v", failed)
	}
	wfHealAndRetry(b, f, id)
	info := wfWant(b, id, api.WorkflowCompleted)
	if got := strings.Join(rec.get(), ","); got != "b0,b1,b0,after map[b0:true b1:true]" && got != "b1,b0,b0,after map[b0:true b1:true]" {
		t.Fatalf("WF-18: runs %s, want b1 once and its output merged", got)
	}
	if got := wfState(info.State); got != "map[b0:true b1:true]" {
		t.Fatalf("WF-18: %s", got)
	}
	b.checkReplay()
}

// TestWF18_RetryOfAThenStepRunsANewJob: a Then step's job succeeds with an
// output that takes the state past its limit, which fails the workflow.
// Retry re-enters the step with a new job (WF-18: "Then → a new job"),
// whose smaller output completes it. The retry used to reuse the kept
// output of the first job, so every retry failed again in its own append
// without calling the handler.
func TestWF18_RetryOfAThenStepRunsANewJob(t *testing.T) {
	b := setup(t, nil)
	var calls atomic.Int32
	wfRegister(t, b.eng, api.NewWorkflow("grow").Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if calls.Add(1) == 1 {
			return api.State{"b": strings.Repeat("x", 300<<10)}, nil
		}
		return api.State{"b": "small"}, nil
	}))
	b.start()
	id := wfDispatch(b, "grow", api.State{"a": strings.Repeat("s", 300<<10)})
	b.idle()
	if info := wfWant(b, id, api.WorkflowFailed); !strings.Contains(info.Error, "workflow state would be") {
		t.Fatalf("failed with %q, want the state limit", info.Error)
	}
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "workflow_retried", "job_enqueued") || calls.Load() != 2 {
		t.Fatalf("WF-18: after the retry %v, handler called %d times, want a new job", names, calls.Load())
	}
	if info := wfWant(b, id, api.WorkflowCompleted); wfState(info.State) != "map[a:"+strings.Repeat("s", 300<<10)+" b:small]" {
		t.Fatalf("WF-18: state after the new job is not its output merged")
	}
	b.checkReplay()
}

func TestWF18_RetryOfDelayStartsANewDelayFromNow(t *testing.T) {
	b := setup(t, nil)
	// A Delay step fails only through the deadline; its retry starts a new
	// delay of d from the retry instant.
	wfRegister(t, b.eng, api.NewWorkflow("d").Delay(time.Hour).Then("b", wfReturn(nil)).MustCompleteWithin(30*time.Minute))
	b.start()
	id := wfDispatch(b, "d", api.State{})
	b.idle()
	b.advance(30 * time.Minute)
	info := wfWant(b, id, api.WorkflowFailed)
	if !info.DelayUntil.IsZero() {
		t.Fatalf("WF-18: a failed workflow keeps its delay: %+v", info)
	}
	b.advance(10 * time.Minute)
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	info = wfWant(b, id, api.WorkflowRunning)
	if want := t0.Add(40*time.Minute + time.Hour); !info.DelayUntil.Equal(want) || info.Error != "" {
		t.Fatalf("WF-18: retried delay fires at %v, want %v (%+v)", info.DelayUntil, want, info)
	}
	delayed := wfBodies[*record.StepDelayed](b.records())
	if len(delayed) != 2 || delayed[1].FireAt != t0.Add(100*time.Minute).UnixNano() {
		t.Fatalf("WF-18: %+v", delayed)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-20: step failure and late results.

func TestWF20_BuriedStepFailsWorkflowWithItsError(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.MaxAttempts = 2 })
	var rec recorder
	wfRegister(t, b.eng, api.NewWorkflow("f").
		Then("load", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return nil, fmt.Errorf("db down (attempt %d)", d.Attempt())
		}).Then("after", wfSeen(&rec, "after", nil)))
	b.start()
	id := wfDispatch(b, "f", api.State{})
	b.idle()
	wfWant(b, id, api.WorkflowRunning) // retried under the step's policy
	b.advance(time.Second)
	info := wfWant(b, id, api.WorkflowFailed)
	if info.Error != "db down (attempt 2)" || !info.FailedAt.Equal(t0.Add(time.Second)) || info.StepName != "load" {
		t.Fatalf("WF-20: %+v", info)
	}
	names := wfStream(b.records(), id)
	if !wfHasRun(names, "attempt_buried", "workflow_failed") || len(rec.get()) != 0 {
		t.Fatalf("WF-20: %v", names)
	}
	failed := wfBodies[*record.WorkflowFailed](b.records())
	if len(failed) != 1 || failed[0].Error != info.Error || failed[0].Step != 0 {
		t.Fatalf("WF-20: %+v", failed)
	}
	b.checkReplay()
}

func TestWF20_LateFailureIsBuriedWithWorkflowErrorNotRetried(t *testing.T) {
	b := setup(t, nil)
	g := newGate()
	wfRegister(t, b.eng, api.NewWorkflow("late").Then("slow", g.step(nil, errors.New("timeout talking to s3"))))
	b.start()
	id := wfDispatch(b, "late", api.State{})
	g.wait()
	if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	g.open()
	b.idle()
	b.advance(time.Minute)
	recs := b.records()
	if n := wfCount(recs, id, record.KindAttemptRetryScheduled); n != 0 {
		t.Fatalf("WF-20: a late failure was retried %d times", n)
	}
	buried := wfBodies[*record.AttemptBuried](recs)
	if len(buried) != 1 || buried[0].Error == "timeout talking to s3" {
		t.Fatalf("WF-20: late failure settled as %+v, want buried with the workflow's error", buried)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-21: status.

func TestWF21_StatusFields(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("approval").WaitForSignal("ok", "legal").Named("sign_off"))
	wfRegister(t, b.eng, api.NewWorkflow("order").
		Then("prep", wfReturn(api.State{"prepared": true})).SubWorkflow("approve", "approval").Then("ship", wfReturn(nil)).
		MustCompleteWithin(time.Hour))
	flaky := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return nil, errors.New("smtp down")
	}
	wfRegister(t, b.eng, api.NewWorkflow("mail").Then("send", flaky))
	b.start()
	parent := wfDispatch(b, "order", api.State{"order": 7, "_k": 1}, api.IdempotencyKey("order-7"))
	mail := wfDispatch(b, "mail", api.State{})
	b.idle()

	p := wfWant(b, parent, api.WorkflowRunning)
	if p.ID != parent || p.Name != "order" || p.Step != 1 || p.StepName != "approve" || p.Steps != 3 ||
		wfState(p.State) != "map[order:7 prepared:true]" || p.ParentID != "" || !p.DeadlineAt.Equal(t0.Add(time.Hour)) ||
		p.Error != "" || !p.FailedAt.IsZero() || p.IdempotencyKey != "order-7" || len(p.DefinitionHash) != 64 ||
		!p.StartedAt.Equal(t0) {
		t.Fatalf("WF-21: parent %+v", p)
	}
	c := wfWant(b, wfChild(b, parent, 1), api.WorkflowWaitingSignal)
	if c.Name != "approval" || c.StepName != "sign_off" || c.Steps != 1 || c.ParentID != parent || c.ParentStep != 1 ||
		strings.Join(c.WaitingFor, ",") != "ok,legal" || c.WaitMode != "all" || !c.DeadlineAt.IsZero() ||
		wfState(c.State) != "map[order:7 prepared:true]" {
		t.Fatalf("WF-21: child %+v", c)
	}
	m := wfWant(b, mail, api.WorkflowRunning)
	if m.Attempts != 1 || m.Consumed != 1 {
		t.Fatalf("WF-21: attempt counts %+v", m)
	}
	b.advance(time.Second)
	b.advance(2 * time.Second)
	m = wfWant(b, mail, api.WorkflowFailed)
	if m.Error != "smtp down" || !m.FailedAt.Equal(t0.Add(3*time.Second)) || m.Attempts != 3 || m.Consumed != 3 {
		t.Fatalf("WF-21: failed %+v", m)
	}
	// Terminal workflows stay queryable.
	for _, n := range []string{"ok", "legal"} {
		if err := b.eng.Signal(b.ctx, c.ID, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	b.idle()
	p = wfWant(b, parent, api.WorkflowCompleted)
	if p.Step != 3 || p.StepName != "" || p.IdempotencyKey != "order-7" || !p.DeadlineAt.Equal(t0.Add(time.Hour)) ||
		wfState(p.State) != "map[order:7 prepared:true]" || p.Name != "order" {
		t.Fatalf("WF-21: completed %+v", p)
	}
	if _, err := b.eng.Workflow(b.ctx, "wf_nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("WF-21: unknown id %v", err)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// WF-22: job options of steps.

func TestWF22_StepOptionsThenWorkflowDefaultsThenEngine(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.MaxAttempts = 5 })
	ok := wfReturn(nil)
	wfRegister(t, b.eng, api.NewWorkflow("tuned").
		Then("a", ok, api.OnQueue("fast"), api.WithPriority(api.Urgent), api.MaxAttempts(1), api.DeliveryTimeout(5*time.Second)).
		Then("b", ok).
		Parallel("c", ok, ok).
		OnQueue("etl").WithPriority(api.High).MaxAttempts(2))
	wfRegister(t, b.eng, api.NewWorkflow("plain").Then("d", ok))
	tuned := wfDispatch(b, "tuned", api.State{})
	plain := wfDispatch(b, "plain", api.State{})
	b.start()
	b.idle()
	wfWant(b, tuned, api.WorkflowCompleted)
	recs := b.records()
	var got []string
	for _, id := range []string{tuned, plain} {
		for _, e := range wfSteps(recs, id) {
			got = append(got, fmt.Sprintf("%s:%s/%d/%d/%s", e.Handler, e.Queue, e.Priority, e.Retry.MaxAttempts, time.Duration(e.DeliveryTimeoutNanos)))
		}
	}
	want := "tuned/a:fast/3/1/5s tuned/b:etl/2/2/0s tuned/c#0:etl/2/2/0s tuned/c#1:etl/2/2/0s plain/d:default/0/5/0s"
	if strings.Join(got, " ") != want {
		t.Fatalf("WF-22:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// Bad input: every refusal is typed, names the thing and appends nothing
// (WF-2, WF-10, WF-13, WF-19, WD-1, WD-2).

func TestWF2_WF13_WF19_BadInputIsTypedAndAppendsNothing(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.PayloadBytesMax = api.PayloadBytesMin })
	ok := wfReturn(nil)
	wfRegister(t, b.eng, api.NewWorkflow("import").Then("fetch", ok).WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("done").Then("a", ok))
	b.start()
	id := wfDispatch(b, "import", api.State{})
	done := wfDispatch(b, "done", api.State{})
	b.idle()
	wfWant(b, done, api.WorkflowCompleted)
	big := api.State{"blob": strings.Repeat("x", 2*api.PayloadBytesMin)}
	asWorkflowErr := func(err error, option string) bool {
		var we *api.WorkflowError
		return errors.As(err, &we) && we.Option == option
	}
	cases := []struct {
		name string
		call func() error
		ok   func(error) bool
	}{
		{"empty workflow", func() error { return b.eng.Register(api.NewWorkflow("empty")) },
			func(err error) bool {
				return asWorkflowErr(err, "Register") && strings.Contains(err.Error(), `"empty"`)
			}},
		{"duplicate step names", func() error { return b.eng.Register(api.NewWorkflow("dup").Then("x", ok).Then("x", ok)) },
			func(err error) bool { return asWorkflowErr(err, "Then") && strings.Contains(err.Error(), `"x"`) }},
		{"zero delay", func() error { return b.eng.Register(api.NewWorkflow("d").Delay(0)) },
			func(err error) bool { return asWorkflowErr(err, "Delay") && strings.Contains(err.Error(), "got 0s") }},
		{"negative deadline", func() error {
			return b.eng.Register(api.NewWorkflow("n").Then("x", ok).MustCompleteWithin(-time.Minute))
		},
			func(err error) bool {
				return asWorkflowErr(err, "MustCompleteWithin") && strings.Contains(err.Error(), "got -1m0s")
			}},
		{"unknown deadline handler", func() error { return b.eng.Register(api.NewWorkflow("h").Then("x", ok).OnDeadline("ghost")) },
			func(err error) bool {
				return asWorkflowErr(err, "OnDeadline") && strings.Contains(err.Error(), `"ghost"`)
			}},
		{"quorum larger than ids", func() error { return b.eng.Register(api.NewWorkflow("q").WaitForWorkflows(api.Quorum(2), id)) },
			func(err error) bool { return asWorkflowErr(err, "Quorum") && strings.Contains(err.Error(), "got 2") }},
		{"dispatch of an unregistered name", func() error { _, err := b.eng.Dispatch(b.ctx, "ghost", api.State{}); return err },
			func(err error) bool {
				var ne *api.NameError
				return errors.Is(err, api.ErrNotFound) && errors.As(err, &ne) && ne.Name == "ghost"
			}},
		{"enqueue of a step handler", func() error { _, err := b.eng.Enqueue(b.ctx, "import/fetch", msg{}); return err },
			func(err error) bool { return errors.Is(err, api.ErrUnknownHandler) }},
		{"oversized state", func() error { _, err := b.eng.Dispatch(b.ctx, "import", big); return err },
			func(err error) bool {
				return errors.Is(err, api.ErrInvalidPayload) && strings.Contains(err.Error(), "PayloadBytesMax")
			}},
		{"oversized signal", func() error { return b.eng.Signal(b.ctx, id, "go", big) },
			func(err error) bool {
				return errors.Is(err, api.ErrInvalidPayload) && strings.Contains(err.Error(), "PayloadBytesMax")
			}},
		{"unencodable state", func() error { _, err := b.eng.Dispatch(b.ctx, "import", api.State{"f": func() {}}); return err },
			func(err error) bool { return errors.Is(err, api.ErrInvalidPayload) }},
		{"signal to an unknown workflow", func() error { return b.eng.Signal(b.ctx, "wf_ghost", "go", nil) },
			func(err error) bool {
				return errors.Is(err, api.ErrNotFound) && strings.Contains(err.Error(), "wf_ghost")
			}},
		{"signal to a finished workflow", func() error { return b.eng.Signal(b.ctx, done, "go", nil) },
			func(err error) bool { return errors.Is(err, api.ErrState) && strings.Contains(err.Error(), done) }},
		{"resume of a not-paused workflow", func() error { return b.eng.ResumeWorkflow(b.ctx, id) },
			func(err error) bool { return errors.Is(err, api.ErrState) && strings.Contains(err.Error(), id) }},
		{"retry of a not-failed workflow", func() error { return b.eng.RetryWorkflow(b.ctx, id) },
			func(err error) bool { return errors.Is(err, api.ErrState) && strings.Contains(err.Error(), id) }},
		{"nil dispatch option", func() error { _, err := b.eng.Dispatch(b.ctx, "import", api.State{}, nil); return err },
			func(err error) bool { return errors.Is(err, api.ErrInvalidOption) }},
	}
	wfNoAppend(b, "bad input", func() {
		for _, c := range cases {
			if err := c.call(); err == nil || !c.ok(err) {
				t.Errorf("%s: got %v", c.name, err)
			}
		}
	})
	b.checkReplay()
}

// A signal or a dependency's completion that arrives while the waiting
// workflow's definition is not registered in this process is stored; the
// registration settles the wait (WF-6, WF-7, WF-19).
func TestWF6_WF7_WaitsSatisfiedBeforeRegistrationSettleOnRegister(t *testing.T) {
	b := setup(t, nil)
	approve := func() *api.Workflow {
		return api.NewWorkflow("approve").WaitForSignal("approved").Then("ship", wfReturn(nil))
	}
	dep := func() *api.Workflow { return api.NewWorkflow("dep").WaitForSignal("go") }
	wfRegister(t, b.eng, approve())
	wfRegister(t, b.eng, dep())
	b.start()
	d := wfDispatch(b, "dep", api.State{})
	join := func() *api.Workflow { return api.NewWorkflow("join").WaitForWorkflows(api.All(), d).Into("deps") }
	wfRegister(t, b.eng, join())
	a := wfDispatch(b, "approve", api.State{})
	j := wfDispatch(b, "join", api.State{})
	b.idle()
	b.reopen(func(e *api.Engine) { wfRegister(t, e, dep()) }) // approve and join not registered yet
	b.start()
	for id, name := range map[string]string{a: "approved", d: "go"} {
		if err := b.eng.Signal(b.ctx, id, name, api.State{"by": "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	b.idle()
	wfWant(b, d, api.WorkflowCompleted)
	wfWant(b, a, api.WorkflowWaitingSignal)
	wfWant(b, j, api.WorkflowWaitingWorkflows)
	wfRegister(t, b.eng, approve())
	wfRegister(t, b.eng, join())
	b.idle()
	if info := wfWant(b, a, api.WorkflowCompleted); info.State["by"] != "ops" {
		t.Fatalf("WF-6: %s", wfState(info.State))
	}
	wfWant(b, j, api.WorkflowCompleted)
	b.checkReplay()
}

// RL-11, WF-17: a cancelled workflow's step jobs, the pending ones it
// buries and those a failed step buried before, can never run again:
// they leave the state with it, and Status reads them from the terminal
// index, buried. Nothing of the workflow stays in memory or snapshots.
func TestRL11_CancelledWorkflowLeavesNoJobsBehind(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("wide").
		Parallel("p", wfReturn(nil), wfReturn(nil), wfReturn(nil)).OnQueue("held"))
	wfRegister(t, b.eng, api.NewWorkflow("broken").Then("x", func(context.Context, *api.Delivery, api.State) (api.State, error) {
		return nil, api.Permanent("BROKEN", errors.New("no"))
	}))
	b.start()
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	wide, broken := wfDispatch(b, "wide", api.State{}), wfDispatch(b, "broken", api.State{})
	b.idle()
	wfWant(b, broken, api.WorkflowFailed)
	jobs := map[string]string{}
	for _, e := range wfBodies[*record.JobEnqueued](b.records()) {
		jobs[e.JobID] = e.WorkflowID
	}
	if len(jobs) != 4 {
		t.Fatalf("%d step jobs, want 3 pending and 1 buried", len(jobs))
	}
	for _, id := range []string{wide, broken} {
		if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
			t.Fatalf("cancel %s: %v", id, err)
		}
	}
	b.idle()
	st := foldRecords(t, b.records())
	for id, wf := range jobs {
		if j, ok := st.Jobs[id]; ok {
			t.Fatalf("job %s of cancelled workflow %s is still in the state, %s", id, wf, j.Status)
		}
		if j := b.status(id); j.Status != api.JobBuried || j.WorkflowID != wf {
			t.Fatalf("job %s: status %s of workflow %q, want buried of %s", id, j.Status, j.WorkflowID, wf)
		}
		if err := b.eng.Retry(b.ctx, id); !errors.Is(err, api.ErrState) {
			t.Fatalf("retry of %s: %v, want ErrState", id, err)
		}
	}
	b.reopen(nil) // the terminal index and the state agree after a restart
	for id := range jobs {
		b.wantStatus(id, api.JobBuried)
	}
}

// RL-11, WF-18: the step job buried by a failed entry stays in the state
// while its workflow could be retried; once a retry has completed the
// workflow, it leaves the state in the workflow_completed append, and
// Status still reads it, buried, from the terminal index.
func TestRL11_RetriedWorkflowLeavesItsBuriedJobsWhenItCompletes(t *testing.T) {
	b := setup(t, nil)
	var calls atomic.Int32
	wfRegister(t, b.eng, api.NewWorkflow("flaky").
		Parallel("p", wfReturn(nil), func(context.Context, *api.Delivery, api.State) (api.State, error) {
			if calls.Add(1) == 1 {
				return nil, api.Permanent("ONCE", errors.New("first entry fails"))
			}
			return nil, nil
		}).
		Then("after", wfReturn(nil)))
	b.start()
	id := wfDispatch(b, "flaky", api.State{})
	b.idle()
	wfWant(b, id, api.WorkflowFailed)
	var failed string
	for _, e := range wfBodies[*record.AttemptBuried](b.records()) {
		failed = e.JobID
	}
	if failed == "" {
		t.Fatal("no attempt_buried for the failing branch")
	}
	if _, ok := foldRecords(t, b.records()).Jobs[failed]; !ok {
		t.Fatalf("buried job %s left the state while its workflow can still be retried", failed)
	}
	if err := b.eng.RetryWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowCompleted)
	st := foldRecords(t, b.records())
	for jid, j := range st.Jobs {
		if j.WorkflowID == id {
			t.Fatalf("job %s of completed workflow %s is still in the state, %s", jid, id, j.Status)
		}
	}
	if j := b.status(failed); j.Status != api.JobBuried || j.WorkflowID != id {
		t.Fatalf("job %s: status %s of workflow %q, want buried of %s", failed, j.Status, j.WorkflowID, id)
	}
	if err := b.eng.Retry(b.ctx, failed); !errors.Is(err, api.ErrState) {
		t.Fatalf("retry of %s: %v, want ErrState", failed, err)
	}
	b.reopen(nil)
	b.wantStatus(failed, api.JobBuried)
}

// RL-11, WF-20: a step job still running when its workflow is cancelled,
// whose attempt then fails, is buried with the workflow's error and leaves
// the state at once: nothing can run it again.
func TestRL11_LateFailureOfACancelledWorkflowsStepLeavesTheState(t *testing.T) {
	b := setup(t, nil)
	started, release := make(chan struct{}, 1), make(chan struct{})
	wfRegister(t, b.eng, api.NewWorkflow("late").Then("x", func(context.Context, *api.Delivery, api.State) (api.State, error) {
		started <- struct{}{}
		<-release
		return nil, errors.New("failed after the cancel")
	}))
	b.start()
	id := wfDispatch(b, "late", api.State{})
	<-started
	if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	close(release)
	b.idle()
	job := b.stepJob("late/x")
	if _, ok := foldRecords(t, b.records()).Jobs[job]; ok {
		t.Fatalf("job %s of cancelled workflow %s is still in the state", job, id)
	}
	if j := b.wantStatus(job, api.JobBuried); j.Attempts != 1 {
		t.Fatalf("job %s: %d attempts, want 1", job, j.Attempts)
	}
	b.checkReplay()
}
