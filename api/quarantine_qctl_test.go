package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// lastSeqOf returns the seq of the last record of stream, as events reads
// it.
func lastSeqOf(t *testing.T, now time.Time, dir, stream string) uint64 {
	t.Helper()
	code, stdout, stderr := qctlRun(t, now, "--json", "-d", dir, "events", "--stream", stream)
	if code != qctl.ExitOK {
		t.Fatalf("events --stream %s: exit %d: %s", stream, code, stderr)
	}
	var seq uint64
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		seq = max(seq, r.Seq)
	}
	return seq
}

// qctlRun runs the qctl command line on the operating system's files, as
// of now, and returns its exit code, stdout and stderr.
func qctlRun(t *testing.T, now time.Time, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := qctl.Main(context.Background(), args, qctl.Env{Stdout: &out, Stderr: &errb, Now: now})
	return code, out.String(), errb.String()
}

// damageRecords makes each record of seqs fail its checksum, as media damage
// does: one byte near the end of its value, before the crc.
func damageRecords(t *testing.T, dir string, seqs ...uint64) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: silentLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range seqs {
		v, closer, err := db.Get(record.LogKey(seq))
		if err != nil {
			t.Fatal(err)
		}
		v = append([]byte(nil), v...)
		closer.Close()
		v[len(v)-6] ^= 0x40
		if err := db.Set(record.LogKey(seq), v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRL5_QctlAgreesWithEngineOnQuarantine damages the last record of a
// buried job's stream and of a workflow's stream in an engine's journal,
// then checks that qctl sets aside the streams the engine's Open sets
// aside, at the same seqs with the same jobs and workflow, and gives each
// job and workflow the status the engine's Status and Workflow give it:
// corrupt for those, as before for the others (RL-5, spec/reliability.md
// §4.4: the quarantined stream "is listed in the open report, Status and
// qctl inspect").
func TestRL5_QctlAgreesWithEngineOnQuarantine(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	clk := clocktest.New(t0)
	open := func() *api.Engine {
		t.Helper()
		eng, err := api.Open(ctx, api.Options{
			Dir: dir, Clock: clk, Entropy: rand.NewChaCha8([32]byte{9}), Rand: rand.NewPCG(3, 4), Workers: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(api.Handle(eng, "ok", func(context.Context, *api.Delivery, msg) error { return nil }))
		must(api.Handle(eng, "bad", func(context.Context, *api.Delivery, msg) error {
			return api.Permanent("BAD_INPUT", errors.New("cannot parse"))
		}))
		must(eng.Register(api.NewWorkflow("approval").
			Then("prepare", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
				return api.State{"prepared": true}, nil
			}).
			WaitForSignal("approve")))
		return eng
	}
	eng := open()
	var jobs []string
	for _, h := range []string{"ok", "bad", "ok"} {
		id, err := eng.Enqueue(ctx, h, msg{N: 1})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, id)
	}
	bad := jobs[1]
	wf, err := eng.Dispatch(ctx, "approval", api.State{"doc": "contract-7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := eng.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	badSeq, wfSeq := lastSeqOf(t, now, dir, bad), lastSeqOf(t, now, dir, wf)
	damageRecords(t, dir, badSeq, wfSeq)

	// What qctl says, before an engine opens the directory again.
	type quarantined struct {
		Stream   string
		Seq      uint64
		Workflow string
		Jobs     []string
	}
	code, stdout, stderr := qctlRun(t, now, "--json", "inspect", dir)
	var ins struct {
		Quarantined []struct {
			Stream   string `json:"stream"`
			Seq      uint64 `json:"seq"`
			Workflow *struct {
				ID string `json:"id"`
			} `json:"workflow"`
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		} `json:"quarantined"`
	}
	if err := json.Unmarshal([]byte(stdout), &ins); err != nil || code != qctl.ExitFindings {
		t.Fatalf("inspect: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	var got []quarantined
	for _, q := range ins.Quarantined {
		g := quarantined{Stream: q.Stream, Seq: q.Seq}
		if q.Workflow != nil {
			g.Workflow = q.Workflow.ID
		}
		for _, j := range q.Jobs {
			g.Jobs = append(g.Jobs, j.ID)
		}
		got = append(got, g)
	}
	statuses := map[string]string{}
	for _, cmd := range []string{"jobs", "workflows"} {
		code, stdout, stderr := qctlRun(t, now, "--json", "-d", dir, cmd)
		if code != qctl.ExitFindings {
			t.Fatalf("%s: exit %d: %s", cmd, code, stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var o struct{ ID, Status string }
			if err := json.Unmarshal([]byte(line), &o); err != nil {
				t.Fatal(err)
			}
			statuses[o.ID] = o.Status
		}
	}

	// What the engine says.
	eng = open()
	defer eng.Close(ctx)
	var want []quarantined
	for _, q := range eng.Stats().Quarantined {
		want = append(want, quarantined{Stream: q.Stream, Seq: q.Err.Seq, Workflow: q.Workflow, Jobs: q.Jobs})
	}
	if len(want) != 2 || !slices.EqualFunc(got, want, func(a, b quarantined) bool {
		return a.Stream == b.Stream && a.Seq == b.Seq && a.Workflow == b.Workflow && slices.Equal(a.Jobs, b.Jobs)
	}) {
		t.Fatalf("qctl inspect quarantines %+v, the engine %+v", got, want)
	}
	for _, id := range jobs {
		st, err := eng.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if statuses[id] != string(st.Status) {
			t.Errorf("job %s: qctl says %q, the engine says %q", id, statuses[id], st.Status)
		}
	}
	if st, err := eng.Status(ctx, bad); err != nil || st.Status != api.JobCorrupt {
		t.Fatalf("the damaged job: %+v, %v", st, err)
	}
	info, err := eng.Workflow(ctx, wf)
	if err != nil || info.Status != api.WorkflowCorrupt || statuses[wf] != string(info.Status) {
		t.Fatalf("workflow %s: qctl says %q, the engine %+v, %v", wf, statuses[wf], info, err)
	}
}
