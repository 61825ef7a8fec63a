package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

type msg struct {
	N int `msgpack:"n"`
}

// qctlRun runs qctl as this program does, with the wall clock replaced by
// now.
func qctlRun(t *testing.T, now time.Time, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := env(now)
	e.Stdout, e.Stderr, e.Progress = &out, &errb, nil
	code := qctl.Main(context.Background(), args, e)
	return code, out.String(), errb.String()
}

// openEngine opens a one-worker engine on dir under clk, its ids and
// jitter drawn from seed, to be closed when the test ends. must fails the
// test on a non-nil error.
func openEngine(t *testing.T, dir string, clk *clocktest.Clock, seed byte) (eng *api.Engine, must func(error)) {
	t.Helper()
	must = func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	eng, err := api.Open(context.Background(), api.Options{
		Dir: dir, Clock: clk, Entropy: rand.NewChaCha8([32]byte{seed}), Rand: rand.NewPCG(uint64(seed), 1), Workers: 1,
	})
	must(err)
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng, must
}

// TestJournalOfARealEngine runs an engine (manual clock, seeded ids) over
// jobs that succeed, fail then succeed, get buried, wait on a delay and on
// a paused queue, and a workflow waiting for a signal; then checks that
// qctl reads its live checkpoint and its stopped directory, that verify
// passes, and that jobs and workflows agree with the engine's own status.
func TestJournalOfARealEngine(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	clk := clocktest.New(t0)
	eng, must := openEngine(t, dir, clk, 7)
	var flaky atomic.Int32
	must(api.Handle(eng, "ok", func(context.Context, *api.Delivery, msg) error { return nil }))
	must(api.Handle(eng, "flaky", func(context.Context, *api.Delivery, msg) error {
		if flaky.Add(1) == 1 {
			return errors.New("first try fails")
		}
		return nil
	}))
	must(api.Handle(eng, "bad", func(context.Context, *api.Delivery, msg) error {
		return api.Permanent("BAD_INPUT", errors.New("cannot parse"))
	}))
	must(eng.Register(api.NewWorkflow("approval").
		Then("prepare", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			return api.State{"prepared": true}, nil
		}).
		WaitForSignal("approve").
		MustCompleteWithin(time.Hour)))
	must(eng.PauseQueue(ctx, "mail"))
	enqueue := func(handler string, opts ...api.JobOption) string {
		t.Helper()
		id, err := eng.Enqueue(ctx, handler, msg{N: 1}, opts...)
		must(err)
		return id
	}
	ids := map[string]string{
		"ok":      enqueue("ok"),
		"flaky":   enqueue("flaky"),
		"bad":     enqueue("bad"),
		"delayed": enqueue("ok", api.Delay(time.Hour)),
		"paused":  enqueue("ok", api.OnQueue("mail")),
	}
	wf, err := eng.Dispatch(ctx, "approval", api.State{"doc": "contract-7"})
	must(err)
	must(eng.Start(ctx))
	idle := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		must(eng.WaitIdle(wctx))
	}
	idle()
	clk.Advance(2 * time.Second) // past the flaky job's backoff
	idle()
	now := clk.Now()

	// Live: the directory is locked; a checkpoint reads and verifies.
	code, _, stderr := qctlRun(t, now, "inspect", dir)
	if code != qctl.ExitLocked || !strings.Contains(stderr, "in use by an engine or another qctl; if an engine runs on it, take a checkpoint with Engine.Checkpoint(dir)") {
		t.Fatalf("inspect of the live directory: exit %d, stderr %q", code, stderr)
	}
	cp := dir + "-checkpoint"
	must(eng.Checkpoint(cp))
	if code, stdout, stderr := qctlRun(t, now, "verify", cp); code != qctl.ExitOK {
		t.Fatalf("verify of the checkpoint: exit %d\n%s%s", code, stdout, stderr)
	}

	want := map[string]string{}
	for name, id := range ids {
		st, err := eng.Status(ctx, id)
		must(err)
		want[id] = string(st.Status)
		if name == "flaky" && (st.Status != api.JobCompleted || st.Attempts != 2) {
			t.Fatalf("flaky job: %+v", st)
		}
	}
	must(eng.Close(ctx))

	code, stdout, stderr := qctlRun(t, now, "verify", dir)
	if code != qctl.ExitOK || !strings.Contains(stdout, "OK: every check holds") {
		t.Fatalf("verify: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = qctlRun(t, now, "--json", "-d", dir, "jobs")
	if code != qctl.ExitOK {
		t.Fatalf("jobs: exit %d: %s", code, stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var j struct {
			ID         string `json:"id"`
			Status     string `json:"status"`
			WorkflowID string `json:"workflow_id"`
		}
		must(json.Unmarshal([]byte(line), &j))
		if j.ID == "" {
			t.Fatalf("jobs line without id: %s", line)
		}
		if j.WorkflowID == "" {
			got[j.ID] = j.Status
		}
	}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("job %s: qctl says %q, the engine says %q", id, got[id], st)
		}
	}
	if len(got) != len(want) {
		t.Errorf("qctl lists %d jobs, the engine enqueued %d: %v", len(got), len(want), got)
	}
	code, stdout, _ = qctlRun(t, now, "-d", dir, "show", ids["flaky"])
	if code != qctl.ExitOK || !strings.Contains(stdout, "retry_scheduled") || !strings.Contains(stdout, "succeeded") {
		t.Fatalf("show flaky: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = qctlRun(t, now, "-d", dir, "show", ids["paused"])
	if code != qctl.ExitOK || !strings.Contains(stdout, "queue mail is paused") {
		t.Fatalf("show paused: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = qctlRun(t, now, "-d", dir, "show", wf)
	if code != qctl.ExitOK || !strings.Contains(stdout, "waiting on signal approve") {
		t.Fatalf("show workflow: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = qctlRun(t, now, "-d", dir, "timers")
	if code != qctl.ExitOK || !strings.Contains(stdout, ids["delayed"]) {
		t.Fatalf("timers: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = qctlRun(t, now, "-d", dir, "deadlines")
	if code != qctl.ExitOK || !strings.Contains(stdout, wf) {
		t.Fatalf("deadlines: exit %d\n%s", code, stdout)
	}
	for _, args := range [][]string{{"inspect", dir}, {"-d", dir, "workflows"}, {"-d", dir, "events"}, {"-d", dir, "shutdowns"}, {"state", dir, "--at", "3"}} {
		if code, _, stderr := qctlRun(t, now, args...); code != qctl.ExitOK {
			t.Fatalf("qctl %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
	}
}

// TestEnv: the program measures against the instant it is given, and
// shows progress only on a terminal (a test's stderr is not one).
func TestEnv(t *testing.T) {
	e := env(t0)
	if !e.Now.Equal(t0) || e.Stdout == nil || e.Stderr == nil || e.WaitFunc == nil {
		t.Fatalf("env: %+v", e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.WaitFunc(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFunc on a cancelled ctx: %v", err)
	}
}
