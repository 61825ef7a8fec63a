package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/qctl"
)

// TestWF17_WF18_BuriedStepJobsLeavingWithTheirWorkflow: a step job buried
// before its workflow was retried (WF-18), and a pending step job buried
// by its workflow's cancel (WF-17), leave the state with the workflow's
// end (RL-11), their summaries going to the terminal index as buried.
// qctl must still count, list and show them as buried, as the engine's
// Status reports them, and verify must check their summaries.
func TestWF17_WF18_BuriedStepJobsLeavingWithTheirWorkflow(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	clk := clocktest.New(t0)
	eng, must := openEngine(t, dir, clk, 9)
	var tries atomic.Int32
	must(eng.Register(api.NewWorkflow("retried").Then("once", func(context.Context, *api.Delivery, api.State) (api.State, error) {
		if tries.Add(1) == 1 {
			return nil, api.Permanent("NOPE", errors.New("fails once"))
		}
		return api.State{"ok": true}, nil
	})))
	must(eng.Register(api.NewWorkflow("dropped").Then("never", func(context.Context, *api.Delivery, api.State) (api.State, error) {
		return nil, nil
	})))
	retried, err := eng.Dispatch(ctx, "retried", nil)
	must(err)
	dropped, err := eng.Dispatch(ctx, "dropped", nil)
	must(err)
	must(eng.PauseWorkflow(ctx, dropped)) // its step job stays pending
	must(eng.Start(ctx))
	idle := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		must(eng.WaitIdle(wctx))
	}
	idle()
	must(eng.RetryWorkflow(ctx, retried))
	idle()
	must(eng.CancelWorkflow(ctx, dropped))
	idle()
	now := clk.Now()
	must(eng.Close(ctx))

	lines := func(args ...string) []map[string]any {
		t.Helper()
		code, stdout, stderr := qctlRun(t, now, append([]string{"--json"}, args...)...)
		if code != qctl.ExitOK {
			t.Fatalf("qctl %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			must(json.Unmarshal([]byte(l), &m))
			out = append(out, m)
		}
		return out
	}
	// Every job the journal enqueued, with the status the engine gives it.
	var ids []string
	for _, e := range lines("-d", dir, "events", "--kind", "job_enqueued") {
		ids = append(ids, e["body"].(map[string]any)["job_id"].(string))
	}
	eng2, err := api.Open(ctx, api.Options{Dir: dir, Clock: clk, Entropy: rand.NewChaCha8([32]byte{10}), Rand: rand.NewPCG(5, 6)})
	must(err)
	want := map[string]string{}
	buried := 0
	for _, id := range ids {
		st, err := eng2.Status(ctx, id)
		must(err)
		want[id] = string(st.Status)
		if st.Status == api.JobBuried {
			buried++
		}
	}
	if len(want) != 3 || buried != 2 {
		t.Fatalf("the engine enqueued %d jobs, %d buried; want 3, 2 buried: %v", len(want), buried, want)
	}
	must(eng2.Close(ctx))

	got := map[string]string{}
	for _, r := range lines("-d", dir, "jobs") {
		got[r["id"].(string)] = r["status"].(string)
	}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("jobs: %s is %q, the engine says %q", id, got[id], st)
		}
	}
	if n := len(lines("-d", dir, "jobs", "--status", "buried")); n != buried {
		t.Errorf("jobs --status buried lists %d jobs, want %d", n, buried)
	}
	for _, args := range [][]string{{"inspect", dir}, {"state", dir}} {
		jobs := lines(args...)[0]["jobs"].(map[string]any)
		if n := jobs["buried"].(float64); int(n) != buried {
			t.Errorf("%s: buried %v, want %d", args[0], n, buried)
		}
	}
	for _, wf := range []string{retried, dropped} {
		for _, r := range lines("-d", dir, "show", wf) {
			if r["type"] != "step_job" {
				continue
			}
			if id := r["id"].(string); r["status"] != want[id] {
				t.Errorf("show %s: step job %s is %q, the engine says %q", wf, id, r["status"], want[id])
			}
		}
	}
	code, stdout, _ := qctlRun(t, now, "verify", dir)
	if code != qctl.ExitOK || !strings.Contains(stdout, "checked against replay") {
		t.Fatalf("verify: exit %d\n%s", code, stdout)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "terminal index") {
			var entries, checked int
			if _, err := fmt.Sscanf(l, "terminal index  ok (%d entries, %d checked against replay)", &entries, &checked); err != nil || entries != checked {
				t.Errorf("verify does not check every terminal-index entry: %q", l)
			}
		}
	}
}
