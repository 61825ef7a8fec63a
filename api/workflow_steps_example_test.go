package api_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
)

// Then runs a step function as a job (WF-3). It receives a copy of the
// public state; the public keys it returns are merged, its "_" keys are
// dropped. An unnamed step is named by its index, and its handler by
// workflow "/" step.
func ExampleWorkflow_Then() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	create := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println(d.Handler(), st)
		return api.State{"account": "acc-1", "_password_hash": "dropped"}, nil
	}
	welcome := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println(d.Handler(), st)
		return api.State{"welcomed": true}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("signup").Then("create_account", create).Then("", welcome)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "signup", api.State{"email": "ada@example.com"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status, info.Steps, info.State)
	// Output:
	// signup/create_account map[email:ada@example.com]
	// signup/1 map[account:acc-1 email:ada@example.com]
	// completed 2 map[account:acc-1 email:ada@example.com welcomed:true]
}

// Parallel runs every branch as its own job at once; the step completes
// when all of them succeeded, with their outputs merged into the state
// (WF-4). The next step sees every branch's keys.
func ExampleWorkflow_Parallel() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	resize := func(size string) api.StepFunc {
		return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return api.State{size: fmt.Sprintf("%s-%s.jpg", st["image"], size)}, nil
		}
	}
	publish := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"published": len(st) - 1}, nil // every key but "image"
	}
	wfMust(eng.Register(api.NewWorkflow("thumbnails").
		Parallel("resize", resize("small"), resize("medium"), resize("large")).
		Then("publish", publish)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "thumbnails", api.State{"image": "cat"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println(info.Status)
	fmt.Println(info.State)
	// Output:
	// completed
	// map[image:cat large:cat-large.jpg medium:cat-medium.jpg published:3 small:cat-small.jpg]
}

// Delay parks the workflow durably for a duration (WF-5): it stays running
// on its delay step, named delay_0, until the clock reaches the fire
// instant, then moves on to the next step.
func ExampleWorkflow_Delay() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	remind := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"reminded_at": clk.Now().UTC().Format(time.RFC3339)}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("trial").Delay(24*time.Hour).Then("remind", remind)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "trial", api.State{"user": "ada"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.StepName, "until", info.DelayUntil.UTC().Format(time.RFC3339))

	clk.Advance(23 * time.Hour)
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, id)
	fmt.Println("after 23h:", info.Status, info.StepName)

	clk.Advance(time.Hour)
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, id)
	fmt.Println("after 24h:", info.Status, info.State)
	// Output:
	// running delay_0 until 2026-01-06T10:00:00Z
	// after 23h: running delay_0
	// after 24h: completed map[reminded_at:2026-01-06T10:00:00Z user:ada]
}

// WaitForSignal waits for one signal of each name (WF-6). A signal sent
// before the wait is reached counts too; the public keys of the payloads
// merge into the state, their "_" keys are dropped.
func ExampleWorkflow_WaitForSignal() {
	ctx := context.Background()
	eng, clk := wfExampleEngine()
	defer eng.Close(ctx)
	sign := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"signed": true}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("contract").Delay(time.Hour).WaitForSignal("legal", "finance").Then("sign", sign)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "contract", api.State{"client": "acme"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	wfMust(eng.Signal(ctx, id, "legal", api.State{"clause_ok": true})) // before the wait is reached
	clk.Advance(time.Hour)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, "at step", info.StepName) // legal is stored, finance missing

	wfMust(eng.Signal(ctx, id, "finance", api.State{"budget": 5000, "_approver_token": "t1"}))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.State)
	// Output:
	// waiting_for_signal at step 1
	// completed map[budget:5000 clause_ok:true client:acme signed:true]
}

// WaitForAnySignal is satisfied by the first signal of any of its names.
// The signal's name is not stored, so here each payload carries its own
// keys, which merge into the state for the next step to branch on.
func ExampleWorkflow_WaitForAnySignal() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	notify := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if by, ok := st["rejected_by"]; ok {
			return api.State{"notice": fmt.Sprintf("rejected by %v: %v", by, st["reason"])}, nil
		}
		return api.State{"notice": fmt.Sprintf("approved by %v", st["approved_by"])}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("review").WaitForAnySignal("approved", "rejected").Then("notify", notify)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "review", api.State{"doc": "spec.md"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.WaitMode, info.WaitingFor)

	wfMust(eng.Signal(ctx, id, "rejected", api.State{"rejected_by": "bo", "reason": "typos"}))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, id)
	fmt.Println(info.Status, info.State["notice"])
	// Output:
	// waiting_for_signal any [approved rejected]
	// completed rejected by bo: typos
}

// WaitForWorkflows waits for other workflows given by id (WF-7), here in
// mode All: it completes once both builds completed. The ids are part of
// the definition; with Into, the result maps each id to its status and
// public state.
func ExampleWorkflow_WaitForWorkflows() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("build").WaitForSignal("finished")))
	wfMust(eng.Start(ctx))
	web, err := eng.Dispatch(ctx, "build", api.State{"target": "web"})
	wfMust(err)
	cli, err := eng.Dispatch(ctx, "build", api.State{"target": "cli"})
	wfMust(err)

	wfMust(eng.Register(api.NewWorkflow("release").WaitForWorkflows(api.All(), web, cli).Into("builds")))
	rel, err := eng.Dispatch(ctx, "release", api.State{"version": "v2"})
	wfMust(err)
	wfMust(eng.Signal(ctx, web, "finished", api.State{"artifact": "web.tar"}))
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, rel)
	fmt.Println("web built:", info.Status)

	wfMust(eng.Signal(ctx, cli, "finished", api.State{"artifact": "cli.tar"}))
	wfMust(eng.WaitIdle(ctx))
	info, _ = eng.Workflow(ctx, rel)
	fmt.Println("both built:", info.Status)
	builds := info.State["builds"].(map[string]any)
	fmt.Println("web:", builds[web])
	fmt.Println("cli:", builds[cli])
	// Output:
	// web built: waiting_for_workflows
	// both built: completed
	// web: map[state:map[artifact:web.tar target:web] status:completed]
	// cli: map[state:map[artifact:cli.tar target:cli] status:completed]
}

// WaitForWorkflowsIn reads the ids to wait for from a public state key when
// the step is entered, so an earlier step can choose them: here "split"
// dispatches one shard workflow per file (idempotently, in case it is
// retried) and the next step waits for all of them.
func ExampleWorkflow_WaitForWorkflowsIn() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	load := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"loaded": true}, nil
	}
	split := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		var shards []string
		for _, f := range []string{"a.csv", "b.csv"} {
			id, err := eng.Dispatch(ctx, "shard", api.State{"file": f}, api.IdempotencyKey(d.WorkflowID()+"/"+f))
			if err != nil {
				return nil, err
			}
			shards = append(shards, id)
		}
		return api.State{"shards": shards}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("shard").Then("load", load)))
	wfMust(eng.Register(api.NewWorkflow("import").Then("split", split).
		WaitForWorkflowsIn(api.All(), "shards").Into("loaded")))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "import", api.State{})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status)
	loaded := info.State["loaded"].(map[string]any)
	for _, s := range info.State["shards"].([]any) {
		fmt.Println(loaded[s.(string)])
	}
	// Output:
	// completed
	// map[state:map[file:a.csv loaded:true] status:completed]
	// map[state:map[file:b.csv loaded:true] status:completed]
}

// SubWorkflow dispatches a registered child workflow with the parent's
// public state and completes when the child completes, merging the child's
// public state back into the parent (WF-8).
func ExampleWorkflow_SubWorkflow() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	authorize := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		fmt.Println("child receives:", st)
		return api.State{"receipt": fmt.Sprintf("rcpt-%v", st["order"])}, nil
	}
	ship := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"shipped_with": st["receipt"]}, nil
	}
	wfMust(eng.Register(api.NewWorkflow("payment").Then("authorize", authorize)))
	wfMust(eng.Register(api.NewWorkflow("order").SubWorkflow("pay", "payment").Then("ship", ship)))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "order", api.State{"order": 7, "_card": "4242"})
	wfMust(err)
	wfMust(eng.WaitIdle(ctx))
	info, err := eng.Workflow(ctx, id)
	wfMust(err)
	fmt.Println("parent:", info.Status, info.State)
	// Output:
	// child receives: map[order:7]
	// parent: completed map[order:7 receipt:rcpt-7 shipped_with:rcpt-7]
}

// Into stores the result of the wait step before it under one key instead
// of merging it into the state. For a wait on one signal it is that
// signal's public payload; for several names, a map of name to payload.
func ExampleWorkflow_Into() {
	ctx := context.Background()
	eng, _ := wfExampleEngine()
	defer eng.Close(ctx)
	wfMust(eng.Register(api.NewWorkflow("purchase").
		WaitForSignal("budget").Into("budget").
		WaitForSignal("legal", "finance").Into("signoffs")))
	wfMust(eng.Start(ctx))

	id, err := eng.Dispatch(ctx, "purchase", api.State{"item": "laptop"})
	wfMust(err)
	wfMust(eng.Signal(ctx, id, "budget", api.State{"amount": 1200, "_token": "t1"}))
	wfMust(eng.Signal(ctx, id, "legal", api.State{"by": "ana"}))
	wfMust(eng.Signal(ctx, id, "finance", api.State{"by": "bo"}))
	wfMust(eng.WaitIdle(ctx))
	info, _ := eng.Workflow(ctx, id)
	fmt.Println(info.Status)
	fmt.Println("budget:  ", info.State["budget"])
	fmt.Println("signoffs:", info.State["signoffs"])
	// Output:
	// completed
	// budget:   map[amount:1200]
	// signoffs: map[finance:map[by:bo] legal:map[by:ana]]
}
