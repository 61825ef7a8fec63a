package api_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
)

type blob struct {
	S string `msgpack:"s"`
}

// RL-4, RL-11: enqueues decided while a commit is in flight are appended
// together, and 64 payloads of 400 KiB take far more than one group
// commit's 4 MiB. Each enqueue stays whole, the journal spreads them over
// several groups, and every one is acknowledged; the engine does not stop.
func TestRL11_ConcurrentLargeEnqueuesSpreadOverGroups(t *testing.T) {
	var (
		armed   sync.Mutex
		arm     bool
		blocked = make(chan struct{})
		release = make(chan struct{})
		mu      sync.Mutex
		largest int
	)
	api.SetAfterAppendHook(func(seqs []uint64) {
		armed.Lock()
		hold := arm
		arm = false
		armed.Unlock()
		if hold {
			close(blocked)
			<-release
		}
		mu.Lock()
		largest = max(largest, len(seqs))
		mu.Unlock()
	})
	t.Cleanup(func() { api.SetAfterAppendHook(nil) })
	b := setup(t, nil)
	if err := api.Handle(b.eng, "big", func(context.Context, *api.Delivery, blob) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.idle()
	groups0 := b.eng.JournalMetrics().Groups

	// The next append holds the committer, so that the 64 enqueues are
	// all decided into the batches waiting behind it.
	armed.Lock()
	arm = true
	armed.Unlock()
	first := make(chan error, 1)
	go func() {
		_, err := b.eng.Enqueue(b.ctx, "big", blob{S: "first"})
		first <- err
	}()
	<-blocked
	// Released on every path: a failing test must not leave the
	// committer held, or closing the engine would wait for it forever.
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	// Read before the enqueues start, so that none is counted in it.
	base, err := api.Decided(b.eng)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	payload := strings.Repeat("x", 400<<10)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := b.eng.Enqueue(b.ctx, "big", blob{S: payload})
			errs <- err
		})
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	for seq := base; seq < base+n; runtime.Gosched() {
		if seq, err = api.Decided(b.eng); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() != nil {
			t.Fatalf("decided seq %d, want %d", seq, base+n)
		}
	}
	unblock()
	wg.Wait()
	close(errs)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for err := range errs {
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	mu.Lock()
	got := largest
	mu.Unlock()
	if got < n {
		t.Fatalf("largest append carried %d records, want the %d enqueues in one", got, n)
	}
	// 64 × 400 KiB need at least seven groups of 4 MiB.
	if g := b.eng.JournalMetrics().Groups - groups0; g < 7 {
		t.Fatalf("%d group commits for %d MiB of payloads", g, n*400>>10)
	}
	enqueued := 0
	for _, r := range b.records() {
		if e, ok := r.Body.(*record.JobEnqueued); ok && e.Handler == "big" {
			enqueued++
		}
	}
	if enqueued != n+1 {
		t.Fatalf("%d job_enqueued in the journal, want %d", enqueued, n+1)
	}
	b.checkReplay()
}

// RL-11, JB-2: with more worker slots than one group commit holds records,
// resuming a queue of 1500 jobs starts them all in one dispatch; each
// attempt_started is its own unit, spread over groups, and every job
// completes.
func TestRL11_DispatchBeyondOneGroupStartsEveryJob(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 2048 })
	var mu sync.Mutex
	ran := 0
	if err := api.Handle(b.eng, "h", func(context.Context, *api.Delivery, msg) error {
		mu.Lock()
		ran++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	if err := b.eng.PauseQueue(b.ctx, "default"); err != nil {
		t.Fatal(err)
	}
	const n = 1500
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.enqueue("h", msg{N: i})
	}
	if err := b.eng.ResumeQueue(b.ctx, "default"); err != nil {
		t.Fatal(err)
	}
	b.idle()
	for _, id := range ids {
		b.wantStatus(id, api.JobCompleted)
	}
	if ran != n {
		t.Fatalf("%d handler calls, want %d", ran, n)
	}
	b.checkReplay()
}

// RL-11: RecordBytesMax may be raised to 64 MiB; groups grow with it, so
// an engine with 16 MiB records opens and journals a 5 MiB payload.
func TestRL11_RecordsLargerThanTheDefaultGroup(t *testing.T) {
	b := setup(t, func(o *api.Options) {
		o.RecordBytesMax = 16 << 20
		o.PayloadBytesMax = 8 << 20
	})
	var got int
	if err := api.Handle(b.eng, "big", func(_ context.Context, _ *api.Delivery, in blob) error {
		got = len(in.S)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := b.enqueue("big", blob{S: strings.Repeat("y", 5<<20)})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	if got != 5<<20 {
		t.Fatalf("handler read %d bytes", got)
	}
	b.reopen(func(e *api.Engine) {
		if err := api.Handle(e, "big", func(context.Context, *api.Delivery, blob) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	b.wantStatus(id, api.JobCompleted)
}

// DL-38, RL-4: follow-ups are appended with their settlement, atomically,
// so one attempt's follow-ups are bounded: past FollowUpsMax jobs, or
// twice PayloadBytesMax of payloads, Delivery.Enqueue refuses with
// ErrFollowUpLimit and the attempt's earlier follow-ups still go.
func TestDL38_FollowUpsAreBounded(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.PayloadBytesMax = 64 << 10 })
	var countErr, bytesErr error
	if err := api.Handle(b.eng, "fan", func(_ context.Context, d *api.Delivery, in msg) error {
		if in.N == 0 {
			for i := range api.FollowUpsMax + 1 {
				if err := d.Enqueue("leaf", msg{N: i}); err != nil {
					countErr = err
				}
			}
			return nil
		}
		part := strings.Repeat("z", 50<<10)
		for range 3 {
			if err := d.Enqueue("blob", blob{S: part}); err != nil {
				bytesErr = err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "leaf", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "blob", func(context.Context, *api.Delivery, blob) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b.start()
	wide := b.enqueue("fan", msg{N: 0})
	heavy := b.enqueue("fan", msg{N: 1})
	b.idle()
	b.wantStatus(wide, api.JobCompleted)
	b.wantStatus(heavy, api.JobCompleted)
	if !errors.Is(countErr, api.ErrFollowUpLimit) {
		t.Fatalf("follow-up %d: %v, want ErrFollowUpLimit", api.FollowUpsMax+1, countErr)
	}
	if !errors.Is(bytesErr, api.ErrFollowUpLimit) {
		t.Fatalf("third 50 KiB follow-up: %v, want ErrFollowUpLimit", bytesErr)
	}
	counts := map[string]int{}
	for _, r := range b.records() {
		if e, ok := r.Body.(*record.JobEnqueued); ok {
			counts[e.Handler]++
		}
	}
	if counts["leaf"] != api.FollowUpsMax || counts["blob"] != 2 {
		t.Fatalf("follow-ups enqueued %v, want %d leaf and 2 blob", counts, api.FollowUpsMax)
	}
	b.checkReplay()
}

// DL-38, RL-11: the follow-ups of one attempt may carry payloads of
// exactly twice PayloadBytesMax; the byte past that is refused.
func TestDL38_FollowUpBytesUpToTwicePayloadBytesMax(t *testing.T) {
	const max = 64 << 10
	b := setup(t, func(o *api.Options) { o.PayloadBytesMax = max })
	// Strings of 256..65535 bytes encode with a 3-byte header, of up to
	// 31 bytes with a 1-byte one.
	parts := []string{strings.Repeat("a", max-3), strings.Repeat("b", max-6)} // 2*max - 3 bytes
	var over, fit error
	if err := api.Handle(b.eng, "fan", func(_ context.Context, d *api.Delivery, _ msg) error {
		for _, p := range parts {
			if err := d.Enqueue("str", p); err != nil {
				return err
			}
		}
		over = d.Enqueue("str", "ccc") // 4 bytes: one past the limit
		fit = d.Enqueue("str", "cc")   // 3 bytes: exactly at it
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "str", func(context.Context, *api.Delivery, string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(parts, "ccc", "cc") {
		if enc, err := record.EncodeValue(p); err != nil || len(enc) != len(p)+1+2*min(1, len(p)/256) {
			t.Fatalf("a string of %d bytes encodes to %d (%v)", len(p), len(enc), err)
		}
	}
	b.start()
	id := b.enqueue("fan", msg{})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	if !errors.Is(over, api.ErrFollowUpLimit) {
		t.Fatalf("follow-up one byte past 2×PayloadBytesMax: %v, want ErrFollowUpLimit", over)
	}
	if fit != nil {
		t.Fatalf("follow-up reaching exactly 2×PayloadBytesMax: %v", fit)
	}
	if n := countKind(b.records(), record.KindJobEnqueued); n != 1+3 {
		t.Fatalf("%d job_enqueued, want the parent and 3 follow-ups", n)
	}
}

// RL-11, WF-5: Delay steps of more workflows than one group commit holds
// come due at one instant. Each workflow's step is its own unit, so the
// dispatch that fires them spreads over groups and every workflow goes on
// to its next step and completes.
func TestRL11_DelaysFiringTogetherBeyondOneGroup(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 64 })
	wfRegister(t, b.eng, api.NewWorkflow("nap").Delay(time.Minute).Then("wake", wfReturn(api.State{"up": true})))
	b.start()
	const n = 1100 // two records each when the delay fires
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wfDispatch(b, "nap", api.State{})
	}
	b.idle()
	b.advance(time.Minute)
	for _, id := range ids {
		wfWant(b, id, api.WorkflowCompleted)
	}
	b.checkReplay()
}

// RL-11, WD-4: workflow deadlines of more workflows than one group commit
// holds pass at one instant (WD-5: running, in a Delay step). The check
// expires each in its own unit, so
// it spreads over groups and every workflow fails with its deadline exceeded.
func TestRL11_DeadlinesPassingTogetherBeyondOneGroup(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("late").Delay(time.Hour).MustCompleteWithin(time.Minute))
	b.start()
	const n = 1100
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wfDispatch(b, "late", api.State{})
	}
	b.idle()
	b.advance(2 * time.Minute)
	for _, id := range ids {
		if info := wfWant(b, id, api.WorkflowFailed); info.Error != api.MessageDeadlineExceeded {
			t.Fatalf("workflow %s failed with %q", id, info.Error)
		}
	}
	b.checkReplay()
}

// WF-11, RL-4: more workflows than one group commit holds wait for one
// workflow. Its completion and every waiter's resumption are one atomic
// unit, larger than a group: the journal commits it alone, in a group of
// its own, and every waiter completes.
func TestWF11_RL4_ManyWaitersOfOneWorkflowResumeInOneUnit(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("gate").WaitForSignal("open"))
	wfRegister(t, b.eng, api.NewWorkflow("after").WaitForWorkflowsIn(api.All(), "deps").Then("go", wfReturn(nil)))
	b.start()
	gate := wfDispatch(b, "gate", api.State{})
	const n = 1100
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wfDispatch(b, "after", api.State{"deps": []string{gate}})
	}
	b.idle()
	wfWant(b, ids[0], api.WorkflowWaitingWorkflows)
	if err := b.eng.Signal(b.ctx, gate, "open", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, gate, api.WorkflowCompleted)
	for _, id := range ids {
		wfWant(b, id, api.WorkflowCompleted)
	}
	b.checkReplay()
}

// WF-7: a wait whose dependency completed while the waiter's definition
// was not registered is settled when the definition is registered at the
// next startup, before Start.
func TestWF7_WaitSatisfiedBeforeRestartSettlesAtStartup(t *testing.T) {
	b := setup(t, nil)
	dep := func() *api.Workflow { return api.NewWorkflow("dep").WaitForSignal("go") }
	join := func() *api.Workflow {
		return api.NewWorkflow("join").WaitForWorkflowsIn(api.All(), "deps").Then("after", wfReturn(nil))
	}
	wfRegister(t, b.eng, dep())
	wfRegister(t, b.eng, join())
	b.start()
	d := wfDispatch(b, "dep", api.State{})
	j := wfDispatch(b, "join", api.State{"deps": []string{d}})
	b.idle()
	b.reopen(func(e *api.Engine) { wfRegister(t, e, dep()) }) // join not registered
	b.start()
	if err := b.eng.Signal(b.ctx, d, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, d, api.WorkflowCompleted)
	wfWant(b, j, api.WorkflowWaitingWorkflows)
	b.reopen(func(e *api.Engine) { wfRegister(t, e, dep()); wfRegister(t, e, join()) })
	b.start()
	b.idle()
	wfWant(b, j, api.WorkflowCompleted)
	b.checkReplay()
}

// fill returns a step that sets key to n bytes.
func fill(key string, n int) api.StepFunc {
	return func(context.Context, *api.Delivery, api.State) (api.State, error) {
		return api.State{key: strings.Repeat("s", n)}, nil
	}
}

// RL-11, WF-3: a workflow's public state travels in records (a child's
// workflow_started) and in its terminal-index entry, which the journal
// bounds. Steps whose outputs together grow the state past
// PayloadBytesMax fail the workflow, with the sizes in its error, instead
// of stopping the engine when it completes.
func TestRL11_WorkflowStateOverTheLimitFailsTheWorkflow(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("grow").
		Then("a", fill("a", 400<<10)).Then("b", fill("b", 400<<10)).Then("c", fill("c", 400<<10)))
	var ran sync.WaitGroup
	ran.Add(1)
	if err := api.Handle(b.eng, "h", func(context.Context, *api.Delivery, msg) error { ran.Done(); return nil }); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "grow", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if !strings.HasPrefix(info.Error, `step "b" (2 of 3): workflow state would be `) || !strings.HasSuffix(info.Error, "limit 524288") {
		t.Fatalf("error %q", info.Error)
	}
	// The engine goes on.
	job := b.enqueue("h", msg{})
	b.idle()
	ran.Wait()
	b.wantStatus(job, api.JobCompleted)
	b.checkReplay()
}

// RL-11, WF-4: the branches of a Parallel step complete it with their
// merged outputs, in one step_completed; merged past PayloadBytesMax, they
// fail the workflow (four of 300 KiB would not even fit one record).
func TestRL11_ParallelOutputsOverTheLimitFailTheWorkflow(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("fan").
		Parallel("wide", fill("w", 300<<10), fill("x", 300<<10), fill("y", 300<<10), fill("z", 300<<10)).Then("after", wfReturn(nil)))
	b.start()
	id := wfDispatch(b, "fan", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if !strings.HasPrefix(info.Error, `step "wide" (1 of 2): output is `) || !strings.HasSuffix(info.Error, "limit 524288") {
		t.Fatalf("error %q", info.Error)
	}
	b.checkReplay()
}

// RL-11, WF-7: a WaitForWorkflows step completes with the public states
// of the workflows it waited for; past PayloadBytesMax together (here
// past RecordBytesMax too), the waiting workflow fails instead.
func TestRL11_WaitResultOverTheLimitFailsTheWaiter(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("dep").Then("load", fill("rows", 300<<10)))
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflowsIn(api.All(), "deps").Into("results").Then("after", wfReturn(nil)))
	b.start()
	deps := make([]string, 4)
	for i := range deps {
		deps[i] = wfDispatch(b, "dep", api.State{})
	}
	b.idle()
	j := wfDispatch(b, "join", api.State{"deps": deps})
	b.idle()
	info := wfWant(b, j, api.WorkflowFailed)
	if !strings.HasPrefix(info.Error, "step ") || !strings.Contains(info.Error, " (1 of 2): output is ") {
		t.Fatalf("error %q", info.Error)
	}
	b.checkReplay()
}

// RL-11: the text a handler, a guard or an on-deadline handler hands the
// engine is recorded clipped, so that no settlement or debug record can
// outgrow RecordBytesMax: a 2 MiB error code buries the job with the code
// cut to scheduler.FailureCodeBytesMax.
func TestRL11_HandlerErrorCodeIsClipped(t *testing.T) {
	code := strings.Repeat("C", 2<<20)
	for _, tc := range []struct {
		name string
		opts []api.JobOption
		fn   api.HandlerFunc[msg]
	}{
		{"permanent", nil, func(context.Context, *api.Delivery, msg) error { return api.Permanent(code, errors.New("boom")) }},
		{"guard", []api.JobOption{api.WithGuards(func(context.Context, *api.Delivery) error {
			return api.Permanent(code, nil)
		})}, func(context.Context, *api.Delivery, msg) error { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, nil)
			if err := api.Handle(b.eng, "h", tc.fn, tc.opts...); err != nil {
				t.Fatal(err)
			}
			b.start()
			id := b.enqueue("h", msg{})
			b.idle()
			j := b.wantStatus(id, api.JobBuried)
			if j.LastCode != strings.Repeat("C", scheduler.FailureCodeBytesMax) {
				t.Fatalf("recorded code of %d bytes, want %d", len(j.LastCode), scheduler.FailureCodeBytesMax)
			}
			b.checkReplay()
		})
	}
}

// RL-11, WD-10: an on-deadline handler's failure is recorded in a debug
// record with its message clipped to scheduler.FailureMessageBytesMax.
func TestRL11_DeadlineHandlerFailureIsClipped(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		fn         api.DeadlineFunc
	}{
		{"error", "DEADLINE_HANDLER_failed", func(context.Context, api.State) error { return errors.New(strings.Repeat("e", 2<<20)) }},
		{"panic", "DEADLINE_HANDLER_panicked", func(context.Context, api.State) error { panic(strings.Repeat("p", 2<<20)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t, nil)
			if err := api.HandleDeadline(b.eng, "dh", tc.fn); err != nil {
				t.Fatal(err)
			}
			wfRegister(t, b.eng, api.NewWorkflow("w").Then("a", wfReturn(nil)).OnQueue("held").
				MustCompleteWithin(time.Second).OnDeadline("dh"))
			if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
				t.Fatal(err)
			}
			b.start()
			wfDispatch(b, "w", api.State{})
			b.idle()
			b.advance(time.Minute)
			debugs := b.debugRecords(tc.code)
			if len(debugs) != 1 || len(debugs[0].Message) > scheduler.FailureMessageBytesMax || len(debugs[0].Message) < 100 {
				t.Fatalf("debug records %d, message %d bytes", len(debugs), len(debugs[0].Message))
			}
			b.checkReplay()
		})
	}
}

// RL-11, WF-7: a WaitForWorkflowsIn id read from the state that is no
// workflow id (here 512 KiB long) fails the workflow, with an error
// clipped to scheduler.FailureMessageBytesMax; cancelling it then indexes
// a summary that fits a record.
func TestRL11_InvalidWaitIDFailsTheWorkflowWithABoundedError(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("w").WaitForWorkflowsIn(api.All(), "ids"))
	b.start()
	// {"ids": [id]} encodes to 11 + len(id) bytes: exactly PayloadBytesMax.
	id := wfDispatch(b, "w", api.State{"ids": []any{strings.Repeat("w", api.PayloadBytesMaxDefault-11)}})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if len(info.Error) > scheduler.FailureMessageBytesMax || !strings.Contains(info.Error, "invalid workflow id") {
		t.Fatalf("error of %d bytes: %.120q", len(info.Error), info.Error)
	}
	if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowCancelled)
	b.checkReplay()
}

// nest returns a value nested n maps deep.
func nest(n int) any {
	var v any = 1
	for range n {
		v = map[string]any{"a": v}
	}
	return v
}

// WF-6, WF-7: a wait's output that cannot be stored (a payload nested as
// deep as a state may be, put under the step's result key one level
// deeper) fails the workflow with the reason, instead of completing the
// step without it.
func TestWF6_WF7_UnstorableWaitOutputFailsTheWorkflow(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("sig").WaitForSignal("s").Into("r").Then("a", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("dep").Then("a", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("join").WaitForWorkflowsIn(api.All(), "deps").Into("r").Then("a", wfReturn(nil)))
	b.start()
	sig := wfDispatch(b, "sig", api.State{})
	if err := b.eng.Signal(b.ctx, sig, "s", api.State{"k": nest(31)}); err != nil {
		t.Fatalf("signal of the deepest payload: %v", err)
	}
	dep := wfDispatch(b, "dep", api.State{"k": nest(29)})
	b.idle()
	join := wfDispatch(b, "join", api.State{"deps": []string{dep}})
	b.idle()
	for id, want := range map[string]string{sig: "the signals' output cannot be stored", join: "the result cannot be stored"} {
		if info := wfWant(b, id, api.WorkflowFailed); !strings.Contains(info.Error, want) {
			t.Fatalf("workflow %s failed with %q, want %q", id, info.Error, want)
		}
	}
	b.checkReplay()
}

// RL-11, WF-17, WF-18: a step whose output would take the state past
// PayloadBytesMax fails the workflow without recording the output, so
// that the failed workflow's state stays within the limit. Cancelling it
// writes its summary, with the state, to the terminal index, and a retry
// re-enters the failed step: both once stopped the engine, the state
// having grown to twice the limit.
func TestRL11_OversizeStepLeavesTheStateWithinTheLimit(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("leaf").Then("x", wfReturn(nil)))
	wfRegister(t, b.eng, api.NewWorkflow("grow").Then("a", fill("b", 400<<10)).SubWorkflow("child", "leaf"))
	b.start()
	big := api.State{"a": strings.Repeat("s", 500<<10)}
	cancelled, retried := wfDispatch(b, "grow", big), wfDispatch(b, "grow", big)
	b.idle()
	for _, id := range []string{cancelled, retried} {
		info := wfWant(b, id, api.WorkflowFailed)
		if info.Step != 0 || !strings.HasPrefix(info.Error, `step "a" (1 of 2): workflow state would be `) || !strings.HasSuffix(info.Error, "limit 524288") {
			t.Fatalf("workflow %s failed at step %d with %q, want step 0 and the state's size", id, info.Step, info.Error)
		}
		if _, ok := info.State["b"]; ok {
			t.Fatalf("workflow %s recorded the output that failed it", id)
		}
	}
	if err := b.eng.CancelWorkflow(b.ctx, cancelled); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := b.eng.RetryWorkflow(b.ctx, retried); err != nil {
		t.Fatalf("retry: %v", err)
	}
	b.idle()
	if !b.eng.Live() {
		t.Fatal("the engine stopped")
	}
	wfWant(b, cancelled, api.WorkflowCancelled)
	wfWant(b, retried, api.WorkflowFailed) // the same step fails again
	b.checkReplay()
}

// WF-4, RL-11: branch outputs that cannot be merged (the merged map past
// the format's cap on one value) fail the workflow naming the branch; no
// branch's output is left out of a merge that goes on.
func TestWF4_BranchOutputsThatCannotBeMergedFailTheWorkflow(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.RecordBytesMax, o.PayloadBytesMax = 64<<20, 8<<20 })
	const branch = 7 << 20 // three take 21 MiB, past record.ValueBytesMax
	wfRegister(t, b.eng, api.NewWorkflow("wide").
		Parallel("p", fill("k1", branch), fill("k2", branch), fill("k3", branch)).Then("after", wfReturn(nil)))
	b.start()
	id := wfDispatch(b, "wide", api.State{})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if !strings.Contains(info.Error, `step "p" (1 of 2): outputs cannot be merged: branch 3 of 3`) {
		t.Fatalf("error %q, want the merge's failure naming branch 3", info.Error)
	}
	b.checkReplay()
}

// RL-11, WF-19: a workflow stores at most StoredSignalsMax unconsumed
// signals, and four times PayloadBytesMax of their payloads; past either,
// Signal is refused with ErrSignalLimit and appends nothing. A signal the
// workflow's wait is waiting for is still accepted, and settles it.
func TestRL11_StoredSignalsAreBounded(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("w").WaitForSignal("go"))
	b.start()

	many := wfDispatch(b, "w", api.State{})
	for i := range api.StoredSignalsMax {
		if err := b.eng.Signal(b.ctx, many, "other", nil); err != nil {
			t.Fatalf("signal %d: %v", i+1, err)
		}
	}
	seq := b.lastSeq()
	if err := b.eng.Signal(b.ctx, many, "other", nil); !errors.Is(err, api.ErrSignalLimit) {
		t.Fatalf("signal past StoredSignalsMax: %v, want ErrSignalLimit", err)
	}
	if b.lastSeq() != seq {
		t.Fatal("a refused signal appended records")
	}
	if err := b.eng.Signal(b.ctx, many, "go", nil); err != nil {
		t.Fatalf("the signal the workflow waits for: %v", err)
	}
	b.idle()
	wfWant(b, many, api.WorkflowCompleted)

	large := wfDispatch(b, "w", api.State{})
	payload := api.State{"x": strings.Repeat("p", 400<<10)} // five fit in 2 MiB, six do not
	for i := range 5 {
		if err := b.eng.Signal(b.ctx, large, "other", payload); err != nil {
			t.Fatalf("large signal %d: %v", i+1, err)
		}
	}
	if err := b.eng.Signal(b.ctx, large, "other", payload); !errors.Is(err, api.ErrSignalLimit) || !strings.Contains(err.Error(), "limit 2097152") {
		t.Fatalf("sixth large signal: %v, want ErrSignalLimit naming the 2 MiB bound", err)
	}
	b.checkReplay()
}

// RL-11, WF-19: only the signal a wait still needs passes the bound. A
// workflow waiting for "a" and "b" stores the first "a"; every further
// "a" is surplus and counts like any other signal, so they stop at
// StoredSignalsMax, while the "b" the wait needs is still accepted and
// settles it.
func TestRL11_SurplusSignalsOfAWaitedNameAreBounded(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("w").WaitForSignal("a", "b").WaitForSignal("c"))
	b.start()
	id := wfDispatch(b, "w", api.State{})
	b.idle()
	for i := range api.StoredSignalsMax {
		if err := b.eng.Signal(b.ctx, id, "a", nil); err != nil {
			t.Fatalf("signal a %d: %v", i+1, err)
		}
	}
	seq := b.lastSeq()
	if err := b.eng.Signal(b.ctx, id, "a", nil); !errors.Is(err, api.ErrSignalLimit) {
		t.Fatalf("surplus a past StoredSignalsMax: %v, want ErrSignalLimit", err)
	}
	if b.lastSeq() != seq {
		t.Fatal("a refused signal appended records")
	}
	if err := b.eng.Signal(b.ctx, id, "b", nil); err != nil {
		t.Fatalf("the b the wait needs: %v", err)
	}
	b.idle()
	if info := wfWant(b, id, api.WorkflowWaitingSignal); info.Step != 1 {
		t.Fatalf("at step %d, want 1 (waiting for c)", info.Step)
	}
	b.checkReplay()
}
