package api_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
)

// wfExampleEngine opens an engine on an in-memory filesystem with a manual
// clock at 2026-01-05 10:00:00 UTC and seeded ids, so that the examples
// are deterministic. Real programs pass a directory and keep the defaults.
func wfExampleEngine() (*api.Engine, *clocktest.Clock) {
	clk := clocktest.New(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	eng, err := api.Open(context.Background(), api.Options{
		Dir:     "quire-data",
		FS:      vfs.NewMem(),
		Clock:   clk,
		Entropy: ulid.Monotonic(rand.NewChaCha8([32]byte{7}), 0),
		Rand:    rand.NewPCG(1, 2),
	})
	if err != nil {
		panic(err)
	}
	return eng, clk
}

func wfMust(err error) {
	if err != nil {
		panic(err)
	}
}

// The data-import workflow: three steps that must finish within 24 hours,
// with an on-deadline handler. Each step receives the public state and
// returns the keys to merge; keys starting with "_" stay private.
func ExampleNewWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)

	fetch := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"temp_file": "import-42.csv", "_scratch": "dropped"}, nil
	}
	transform := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"rows": 120}, nil
	}
	load := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"table": "imports"}, nil
	}
	wfMust(api.HandleDeadline(eng, "import_timeout", func(ctx context.Context, st api.State) error {
		return nil // e.g. delete st["temp_file"] and alert someone
	}))
	wfMust(eng.Register(api.NewWorkflow("data_import").
		Then("fetch", fetch).Then("transform", transform).Then("load", load).
		MustCompleteWithin(24 * time.Hour).OnDeadline("import_timeout")))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "data_import", api.State{"source": "s3://bucket/x", "_import_token": "k1"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status)
	fmt.Println(info.State)
	fmt.Println("deadline:", info.DeadlineAt.UTC().Format(time.RFC3339))
	// Output:
	// completed
	// map[rows:120 source:s3://bucket/x table:imports temp_file:import-42.csv]
	// deadline: 2026-01-06T10:00:00Z
}

// Register validates a definition and names the step or option at fault;
// nothing is appended for a refused one.
func ExampleEngine_Register() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	build := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return nil, nil }

	fmt.Println(eng.Register(api.NewWorkflow("report").Then("build", build).Delay(0)))
	fmt.Println(eng.Register(api.NewWorkflow("report").Then("build", build).MustCompleteWithin(0)))
	err := eng.Register(api.NewWorkflow("report").Then("build", build).OnDeadline("report_late"))
	fmt.Println(errors.Is(err, api.ErrInvalidOption), err)
	fmt.Println(eng.Register(api.NewWorkflow("report").Then("build", build).Delay(time.Hour).Then("send", build)))
	// Output:
	// quire: workflow "report" step "delay_0" Delay: duration must be > 0 and at most DelayMax (876000h0m0s, 100 years), got 0s
	// quire: workflow "report" MustCompleteWithin: duration must be > 0 and at most DelayMax (876000h0m0s, 100 years), got 0s
	// true quire: workflow "report" OnDeadline: deadline handler "report_late" is not registered
	// <nil>
}

// Dispatch returns the workflow id once workflow_started is synced. With an
// idempotency key, a second dispatch returns the original workflow and
// appends nothing.
func ExampleEngine_Dispatch() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	render := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return nil, nil }
	wfMust(eng.Register(api.NewWorkflow("invoice").Then("render", render).Then("send", render)))

	id, err := eng.Dispatch(ctx, "invoice", api.State{"order": 42}, api.IdempotencyKey("order-42"))
	wfMust(err)
	again, err := eng.Dispatch(ctx, "invoice", api.State{"order": 43}, api.IdempotencyKey("order-42"))
	wfMust(err)
	fmt.Println(id == again)
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.Step, info.StepName, info.State)
	_, err = eng.Dispatch(ctx, "no_such_workflow", api.State{})
	fmt.Println(errors.Is(err, api.ErrNotFound))
	// Output:
	// true
	// running 0 render map[order:42]
	// true
}

// A workflow parked on WaitForSignal resumes when the signal arrives; its
// public payload is stored under the key given to Into.
func ExampleEngine_Signal() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	publish := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"published": true}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("article").WaitForSignal("approved").Into("approval").Then("publish", publish)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "article", api.State{"title": "Hello"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.WaitingFor)

	wfMust(eng.Signal(ctx, id, "approved", api.State{"by": "editor", "_session": "s1"}))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.State)
	fmt.Println(errors.Is(eng.Signal(ctx, id, "approved", nil), api.ErrState))
	// Output:
	// waiting_for_signal [approved]
	// completed map[approval:map[by:editor] published:true title:Hello]
	// true
}

// Reading a deadline failure from the status: the deadline, the error and
// the instant it failed.
func ExampleEngine_Workflow() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("report").Delay(2 * time.Hour).MustCompleteWithin(time.Hour)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "report", api.State{})
	wfMust(err)
	clk.Advance(time.Hour)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.StepName)
	fmt.Println(info.Error, info.Error == api.MessageDeadlineExceeded)
	fmt.Println("deadline_at:", info.DeadlineAt.UTC().Format(time.TimeOnly))
	fmt.Println("failed_at:  ", info.FailedAt.UTC().Format(time.TimeOnly))
	// Output:
	// failed delay_0
	// Deadline exceeded true
	// deadline_at: 11:00:00
	// failed_at:   11:00:00
}

// The on-deadline handler runs after the expiry is recorded and receives
// the public state. Its errors are recorded and swallowed: the workflow
// fails with "Deadline exceeded" either way.
func ExampleHandleDeadline() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(api.HandleDeadline(eng, "cleanup", func(ctx context.Context, st api.State) error {
		fmt.Println("cleaning up", st["temp_file"], "from", st["source"], "token visible:", st["_token"] != nil)
		return errors.New("smtp down")
	}))
	wfMust(eng.Register(api.NewWorkflow("import").Delay(time.Hour).MustCompleteWithin(30 * time.Minute).OnDeadline("cleanup")))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "import", api.State{"source": "s3://bucket/x", "temp_file": "import-42.csv", "_token": "k1"})
	wfMust(err)
	clk.Advance(30 * time.Minute)
	wfMust(eng.WaitIdle(ctx)) // waits for the handler too
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.Error)
	// Output:
	// cleaning up import-42.csv from s3://bucket/x token visible: false
	// failed Deadline exceeded
}

// A paused workflow starts none of its pending jobs; only a running
// workflow can be paused.
func ExampleEngine_PauseWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return nil, nil }
	wfMust(eng.Register(api.NewWorkflow("sync").Then("pull", step).Then("push", step)))

	id, err := eng.Dispatch(ctx, "sync", api.State{})
	wfMust(err)
	wfMust(eng.PauseWorkflow(ctx, id))
	wfMust(eng.Start(ctx))
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.StepName, info.Attempts)
	fmt.Println(errors.Is(eng.PauseWorkflow(ctx, id), api.ErrState))
	// Output:
	// paused pull 0
	// true
}

// Resume makes a paused workflow running again and enters its current step.
func ExampleEngine_ResumeWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{d.Handler(): "done"}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("sync").Then("pull", step).Then("push", step)))

	id, err := eng.Dispatch(ctx, "sync", api.State{})
	wfMust(err)
	wfMust(eng.PauseWorkflow(ctx, id)) // before its first step could start
	wfMust(eng.Start(ctx))
	wfMust(eng.WaitIdle(ctx))
	wfMust(eng.ResumeWorkflow(ctx, id))
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.State)
	fmt.Println(errors.Is(eng.ResumeWorkflow(ctx, id), api.ErrState))
	// Output:
	// completed map[sync/pull:done sync/push:done]
	// true
}

// Cancel ends a running, paused, waiting or failed workflow; a cancelled
// workflow accepts no signal.
func ExampleEngine_CancelWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("approval").WaitForSignal("approved")))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "approval", api.State{"doc": 7})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	wfMust(eng.CancelWorkflow(ctx, id))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.State)
	fmt.Println(errors.Is(eng.Signal(ctx, id, "approved", nil), api.ErrState))
	fmt.Println(errors.Is(eng.CancelWorkflow(ctx, id), api.ErrState))
	// Output:
	// cancelled map[doc:7]
	// true
	// true
}

// Retry re-enters the current step of a failed workflow with fresh
// attempts. It keeps deadline_at: a workflow failed by its deadline fails
// again (WD-13).
func ExampleEngine_RetryWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	down := true
	charge := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if down {
			return nil, errors.New("payment gateway down")
		}
		return api.State{"charged": true}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("checkout").Then("charge", charge).MaxAttempts(1)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "checkout", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.Error)

	down = false // the step runs again only after the retry is recorded
	wfMust(eng.RetryWorkflow(ctx, id))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.State)
	// Output:
	// failed payment gateway down
	// completed map[charged:true]
}

// All: a release waits for every review, and fails as soon as one review
// fails or is cancelled.
func ExampleAll() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("review").WaitForSignal("approved")))
	wfMust(eng.Register(api.NewWorkflow("release").WaitForWorkflowsIn(api.All(), "reviews")))
	wfMust(eng.Start(ctx))

	a, err := eng.Dispatch(ctx, "review", api.State{"by": "ana"})
	wfMust(err)
	b, err := eng.Dispatch(ctx, "review", api.State{"by": "bo"})
	wfMust(err)
	rel, err := eng.Dispatch(ctx, "release", api.State{"reviews": []string{a, b}})
	wfMust(err)

	wfMust(eng.Signal(ctx, a, "approved", nil))
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, rel)
	fmt.Println("one approval:", info.Status)

	wfMust(eng.CancelWorkflow(ctx, b))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, rel)
	fmt.Println("one cancelled:", info.Status)
	// Output:
	// one approval: waiting_for_workflows
	// one cancelled: failed
}

// Any: the first review to complete is enough.
func ExampleAny() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("review").WaitForSignal("approved")))
	wfMust(eng.Register(api.NewWorkflow("hotfix").WaitForWorkflowsIn(api.Any(), "reviews")))
	wfMust(eng.Start(ctx))

	var reviews []string
	for _, by := range []string{"ana", "bo", "cy"} {
		id, err := eng.Dispatch(ctx, "review", api.State{"by": by})
		wfMust(err)
		reviews = append(reviews, id)
	}
	fix, err := eng.Dispatch(ctx, "hotfix", api.State{"reviews": reviews})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, fix)
	fmt.Println("no approval:", info.Status)

	wfMust(eng.Signal(ctx, reviews[1], "approved", nil))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, fix)
	fmt.Println("one approval:", info.Status)
	// Output:
	// no approval: waiting_for_workflows
	// one approval: completed
}

// Quorum: two approvals out of three reviews are enough.
func ExampleQuorum() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("review").WaitForSignal("approved")))
	wfMust(eng.Register(api.NewWorkflow("merge").WaitForWorkflowsIn(api.Quorum(2), "reviews")))
	wfMust(eng.Start(ctx))

	var reviews []string
	for _, by := range []string{"ana", "bo", "cy"} {
		id, err := eng.Dispatch(ctx, "review", api.State{"by": by})
		wfMust(err)
		reviews = append(reviews, id)
	}
	m, err := eng.Dispatch(ctx, "merge", api.State{"reviews": reviews})
	wfMust(err)
	for i, r := range reviews[:2] {
		wfMust(eng.Signal(ctx, r, "approved", nil))
		wfMust(eng.WaitIdle(ctx))
		info, _ := eng.Workflow(ctx, m)
		fmt.Println("approvals:", i+1, info.Status)
	}
	// Output:
	// approvals: 1 waiting_for_workflows
	// approvals: 2 completed
}

// SimJournal is for the sim package and for tests that audit what the
// engine acknowledged: here, the records one job left in the journal.
func ExampleSimJournal() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }))
	wfMust(eng.Start(ctx))
	_, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))

	j := api.SimJournal(eng) // read only; the engine closes it
	it := j.Scan(1, j.LastSeq())
	for it.Next() {
		fmt.Println(it.Record().Seq, it.Record().Kind())
	}
	wfMust(it.Err())
	it.Close()
	// Output:
	// 1 run_started
	// 2 job_enqueued
	// 3 attempt_started
	// 4 attempt_succeeded
}

// SimLive is for the sim package's oracle and for tests: it lists the
// unfinished jobs and workflows the engine holds in memory. Finished work
// lives only in the journal.
func ExampleSimLive() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }))
	wfMust(eng.Register(api.NewWorkflow("approval").WaitForSignal("approved")))
	wfMust(eng.Start(ctx))
	_, err := eng.Enqueue(ctx, "greet", greeting{Name: "now"})
	wfMust(err)
	later, err := eng.Enqueue(ctx, "greet", greeting{Name: "later"}, api.Delay(time.Hour))
	wfMust(err)
	wf, err := eng.Dispatch(ctx, "approval", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))

	jobs, workflows, err := api.SimLive(ctx, eng)
	wfMust(err)
	fmt.Println("jobs:", len(jobs), "the delayed one:", jobs[0] == later)
	fmt.Println("workflows:", len(workflows), "the waiting one:", workflows[0] == wf)
	// Output:
	// jobs: 1 the delayed one: true
	// workflows: 1 the waiting one: true
}

// AwaitWorkflow blocks until a workflow completes, fails or is cancelled.
// Here another goroutine waits while the workflow waits for its signal.
func ExampleEngine_AwaitWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	ship := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"shipped": true}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("order").WaitForSignal("paid").Then("ship", ship)))
	wfMust(eng.Start(ctx))
	id, err := eng.Dispatch(ctx, "order", api.State{"order": "A-17"})
	wfMust(err)

	done := make(chan api.WorkflowInfo)
	go func() {
		info, err := eng.AwaitWorkflow(ctx, id)
		wfMust(err)
		done <- info
	}()
	wfMust(eng.Signal(ctx, id, "paid", nil))
	info := <-done
	fmt.Println(info.Status, info.State["shipped"])
	// Output:
	// completed true
}

// A step reads integers back as msgpack decoded them: State.Int reads
// any of those types.
func ExampleState_Int() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	count := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		n, ok := st.Int("rows")
		fmt.Printf("%T %d %v\n", st["rows"], n, ok)
		return api.State{"doubled": 2 * n}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("count").Then("count", count)))
	wfMust(eng.Start(ctx))
	id, err := eng.Dispatch(ctx, "count", api.State{"rows": 70000})
	wfMust(err)
	info, err := eng.AwaitWorkflow(ctx, id)
	wfMust(err)
	n, _ := info.State.Int("doubled")
	fmt.Println(info.Status, n)
	// Output:
	// uint32 70000 true
	// completed 140000
}
