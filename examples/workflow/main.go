// Command workflow is the README's workflow demo: an order that reserves
// stock (the inventory service fails once, so the step is retried), then
// charges the card and emails the customer in parallel, then waits for the
// warehouse's "shipped" signal, then closes. Its state lives in the
// journal, not in the process.
//
//	go run ./examples/workflow               # dispatches order 1001; stops while it waits
//	go run ./examples/workflow               # reopens the journal and ships order 1001
//	go run ./examples/workflow -order 1002   # another order
//
// The first run dispatches the order and drives it to the wait, then shuts
// the engine down. The second reopens the same journal, finds the workflow
// where the first left it, sends the signal and watches it complete.
// Dispatch carries an idempotency key derived from the order number, so
// every run asks for "order 1001" the same way and gets the one workflow
// back (WF-14).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quire-dev/quire/api"
)

// The defaults of the -dir and -order flags.
const (
	dirDefault   = "workflow-data"
	orderDefault = "1001"
)

func main() {
	dir := flag.String("dir", dirDefault, "journal directory")
	order := flag.String("order", orderDefault, "order number: one workflow per order")
	flag.Parse()
	if err := run(*dir, *order, os.Stdout, 15*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "workflow:", err)
		os.Exit(1)
	}
}

// run is the demo, writing to out. It waits at most wait for the workflow
// to reach the wait, or to complete once signalled.
func run(dir, order string, out io.Writer, wait time.Duration) (err error) {
	// The steps report to out from the engine's goroutines, the progress
	// lines from this one: writes to out take turns.
	out = &lockedWriter{w: out}
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: dir, Workers: 4})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := eng.Close(ctx); err == nil {
			err = cerr
		}
	}()
	st := eng.Stats()
	fmt.Fprintf(out, "journal %s: %d records replayed at open, run %s\n", dir, st.RecordsReplayed, st.RunID)

	if err := eng.Register(orderWorkflow(out)); err != nil {
		return err
	}
	id, err := eng.Dispatch(ctx, "order", api.State{"order": order, "items": []string{"kettle", "teapot"}},
		api.IdempotencyKey("order-"+order))
	if err != nil {
		return err
	}
	wf, err := eng.Workflow(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "order %s is workflow %s, %s\n", order, id, where(wf))

	switch wf.Status {
	case api.WorkflowCompleted:
		fmt.Fprintf(out, "\norder %s shipped in an earlier run; its final state, read from the journal:\n", order)
		printState(out, wf.State)
		fmt.Fprintf(out, "\nstart another: %s\n", command(dir, next(order)))
		return nil
	case api.WorkflowFailed, api.WorkflowCancelled:
		return fmt.Errorf("order %s ended %s: %s", order, wf.Status, wf.Error)
	}

	// A workflow found waiting was left there by an earlier run: this run
	// plays the warehouse. Any other is new, or was cut short by a crash
	// or a kill, and the engine drives it on from its journaled step.
	ship := wf.Status == api.WorkflowWaitingSignal
	if err := eng.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nprogress:")
	if !ship {
		wf, err = watch(ctx, out, eng, id, wait, api.WorkflowWaitingSignal)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\norder %s now waits for the warehouse's %q signal, with this state in the journal:\n",
			order, wf.WaitingFor[0])
		printState(out, wf.State)
		fmt.Fprintf(out, "\nthe engine stops here. run it again to ship the order: %s\n", command(dir, order))
		return nil
	}
	if err := eng.Signal(ctx, id, "shipped", api.State{"carrier": "DHL", "tracking": "JD0146" + order}); err != nil {
		return err
	}
	fmt.Fprintf(out, "  signalled shipped\n")
	wf, err = watch(ctx, out, eng, id, wait, api.WorkflowCompleted)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\norder %s completed; its final state:\n", order)
	printState(out, wf.State)
	fmt.Fprintf(out, "\nits timeline: go run ./cmd/qctl -d %s show %s\n", dir, id)
	return nil
}

// orderWorkflow is the order's definition; its steps report to out. Each
// step receives a copy of the public state and returns the keys to merge
// into it.
func orderWorkflow(out io.Writer) *api.Workflow {
	reserve := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		if d.Attempt() == 1 {
			// A plain error is retried with the step's backoff.
			fmt.Fprintf(out, "  reserve, attempt 1: inventory service busy, retried in 300ms\n")
			return nil, errors.New("inventory service busy")
		}
		fmt.Fprintf(out, "  reserve, attempt %d: reserved\n", d.Attempt())
		return api.State{"reservation": fmt.Sprintf("R-%v", st["order"])}, nil
	}
	return api.NewWorkflow("order").
		Then("reserve", reserve, api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 300 * time.Millisecond})).
		Parallel("notify", charge, confirm).
		WaitForSignal("shipped").Named("await_shipping").
		Then("close", closeOrder).
		MustCompleteWithin(7 * 24 * time.Hour)
}

func charge(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
	return api.State{"charged_cents": 4200}, nil // a real step passes ctx to the payment API
}

func confirm(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
	return api.State{"confirmation_sent": true}, nil
}

func closeOrder(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
	return api.State{"closed": true}, nil
}

// watch prints the workflow's progress until it reaches status want, and
// returns it then. It fails if the workflow ends otherwise or wait passes.
func watch(ctx context.Context, out io.Writer, eng *api.Engine, id string, wait time.Duration, want api.WorkflowStatus) (api.WorkflowInfo, error) {
	last := ""
	deadline := time.Now().Add(wait)
	for {
		wf, err := eng.Workflow(ctx, id)
		if err != nil {
			return wf, err
		}
		line := where(wf)
		if line != last {
			fmt.Fprintln(out, "  "+line)
			last = line
		}
		switch {
		case wf.Status == want:
			return wf, nil
		case wf.Status == api.WorkflowFailed || wf.Status == api.WorkflowCancelled || wf.Status == api.WorkflowCompleted:
			return wf, fmt.Errorf("workflow %s ended %s, want %s: %s", id, wf.Status, want, wf.Error)
		case !time.Now().Before(deadline):
			return wf, fmt.Errorf("workflow %s is %s after %v, want %s", id, wf.Status, wait, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// where says where a workflow is.
func where(wf api.WorkflowInfo) string {
	if wf.Step >= wf.Steps {
		return fmt.Sprintf("%s, all %d steps done", wf.Status, wf.Steps)
	}
	return fmt.Sprintf("%s at step %d of %d (%s)", wf.Status, wf.Step+1, wf.Steps, wf.StepName)
}

// printState prints a state's keys in order.
func printState(out io.Writer, st api.State) {
	for _, k := range slices.Sorted(maps.Keys(st)) {
		fmt.Fprintf(out, "  %-17s %v\n", k, st[k])
	}
}

// next is the order number after order, for the hint that starts another.
// command returns the command line that runs this demo on dir for order,
// naming only the flags that differ from their defaults.
func command(dir, order string) string {
	c := "go run ./examples/workflow"
	if dir != dirDefault {
		c += " -dir " + dir
	}
	if order != orderDefault {
		c += " -order " + order
	}
	return c
}

func next(order string) string {
	var n int
	if _, err := fmt.Sscan(order, &n); err != nil || strings.TrimSpace(order) != fmt.Sprint(n) {
		return order + "-2"
	}
	return fmt.Sprint(n + 1)
}

// lockedWriter serializes writes to w, which steps running in parallel
// and the progress loop share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
