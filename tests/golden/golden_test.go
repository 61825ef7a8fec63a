package golden

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
	"github.com/quire-dev/quire/replay"
)

// journalsDir holds one directory per committed image.
const journalsDir = "testdata/journals"

// TestT11_GoldenJournals is T11 (RL-5, RL-7): every committed image, from
// whichever version wrote it, must replay to its stored expectation, pass
// qctl verify, have snapshots equal to the replay up to their seq, and open
// with the current engine (which appends its run_started and shuts down).
func TestT11_GoldenJournals(t *testing.T) { // RL-5, RL-7
	t.Parallel()
	names := imageNames(t)
	if len(names) == 0 {
		t.Fatalf("no images under %s", journalsDir)
	}
	snapshots := 0
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(journalsDir, name)
			want, err := os.ReadFile(filepath.Join(dir, "expect.txt"))
			if err != nil {
				t.Fatal(err)
			}
			fs := loadImage(t, dir)
			got, snaps, err := derive(fs, "db")
			if err != nil {
				t.Fatalf("replay of %s: %v", name, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s replays to a different state than expect.txt (a format or fold change without a migration?)\n%s\n"+
					"after a reviewed change of the derived state only: QUIRE_WRITE_GOLDEN=expect go test ./tests/golden -run TestT11_WriteGolden",
					name, firstDiff(want, got))
			}
			snapshots += snaps

			var out bytes.Buffer
			if code := qctl.Main(context.Background(), []string{"verify", "db"}, qctl.Env{Stdout: &out, Stderr: &out, FS: fs}); code != qctl.ExitOK {
				t.Fatalf("qctl verify %s: exit %d\n%s", name, code, out.String())
			}

			// The current engine opens the image (on a copy: Open appends).
			live := loadImage(t, dir)
			eng, err := api.Open(context.Background(), api.Options{Dir: "db", FS: live, Clock: clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))})
			if err != nil {
				t.Fatalf("api.Open on %s: %v", name, err)
			}
			if err := eng.Close(context.Background()); err != nil {
				t.Fatalf("close %s: %v", name, err)
			}
		})
	}
	if !t.Failed() && snapshots == 0 {
		t.Fatal("no committed image holds a snapshot: the snapshot format is not covered")
	}
}

// imageNames lists the committed images, sorted.
func imageNames(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(journalsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// loadImage copies the image's db/ into a fresh in-memory filesystem, so
// that nothing the test does can touch the committed files (even a
// read-only Pebble open creates LOCK).
func loadImage(t *testing.T, dir string) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	ok, err := vfs.Clone(vfs.Default, fs, filepath.Join(dir, "db"), "db")
	if err != nil || !ok {
		t.Fatalf("copy %s/db: %v (found: %v)", dir, err, ok)
	}
	return fs
}

// derive replays the journal in dir and returns the expectation text of
// the state it derives (what expect.txt holds) and the number of snapshots
// it checked. It reads through journal (every record checked as hostile
// input) and folds with replay, from seq 1.
func derive(fs vfs.FS, dir string) ([]byte, int, error) {
	j, err := journal.Open(dir, journal.Options{FS: fs, Clock: clocktest.New(time.Unix(0, 0)), ReadOnly: true})
	if err != nil {
		return nil, 0, err
	}
	defer j.Close()
	if rep, err := j.Verify(); err != nil || !rep.OK() {
		return nil, 0, fmt.Errorf("verify: %v, problems %v", err, rep.Problems)
	}

	var recs strings.Builder
	st := replay.New()
	hist := sha256.New()
	digests := map[uint64][32]byte{}
	var jobs, workflows, idem []string
	n := 0
	it := j.Scan(1, math.MaxUint64)
	for it.Next() {
		r := it.Record()
		n++
		fmt.Fprintf(&recs, "%6d  %s  %-28s %s\n", r.Seq, time.Unix(0, r.At).UTC().Format(time.RFC3339Nano), r.Kind(), r.Stream)
		if err := replay.Apply(st, r); err != nil {
			it.Close()
			return nil, 0, fmt.Errorf("fold seq %d: %w", r.Seq, err)
		}
		d := replay.Digest(st)
		hist.Write(d[:])
		digests[r.Seq] = d
		switch b := r.Body.(type) {
		case *record.JobEnqueued:
			jobs = append(jobs, b.JobID)
		case *record.WorkflowStarted:
			workflows = append(workflows, b.WorkflowID)
			if b.IdempotencyKey != "" {
				idem = append(idem, replay.IdempotencyPrefix+b.IdempotencyKey)
			}
		}
	}
	if err := it.Close(); err != nil {
		return nil, 0, fmt.Errorf("scan: %w", err)
	}

	// RL-7: each snapshot equals the replay from seq 1 up to its seq.
	snaps := 0
	sit := j.Snapshots()
	for sit.Next() {
		s := sit.Snapshot()
		if s.Err != nil {
			sit.Close()
			return nil, 0, fmt.Errorf("snapshot at seq %d: %w", s.Seq, s.Err)
		}
		dec, err := replay.Decode(s.State)
		if err != nil {
			sit.Close()
			return nil, 0, fmt.Errorf("snapshot at seq %d: %w", s.Seq, err)
		}
		if want, ok := digests[s.Seq]; !ok || replay.Digest(dec) != want {
			sit.Close()
			return nil, 0, fmt.Errorf("snapshot at seq %d differs from the replay up to it", s.Seq)
		}
		snaps++
	}
	if err := sit.Err(); err != nil {
		sit.Close()
		return nil, 0, fmt.Errorf("snapshots: %w", err)
	}
	sit.Close()

	var out bytes.Buffer
	final := replay.Digest(st)
	fmt.Fprintf(&out, "# T11 golden journal (spec/reliability.md §6): the state replay derives from db/.\n")
	fmt.Fprintf(&out, "# Written by TestT11_WriteGolden; checked by TestT11_GoldenJournals. Do not edit.\n")
	fmt.Fprintf(&out, "engine id: %s\n", j.EngineID())
	fmt.Fprintf(&out, "records: %d (last seq %d)\n", n, st.LastSeq)
	fmt.Fprintf(&out, "final state digest: %x\n", final)
	fmt.Fprintf(&out, "history digest: %x (SHA-256 over the state digest after each record)\n", hist.Sum(nil))

	fmt.Fprintf(&out, "\n== records: seq, at, kind, stream\n%s", recs.String())

	// Expiries is kept behind a method; the dump shows it after the
	// exported fields.
	sj, err := json.MarshalIndent(struct {
		*replay.State
		Expiries []replay.Expiry
	}{st, st.Expiries()}, "", "  ")
	if err != nil {
		return nil, 0, fmt.Errorf("state to JSON: %w", err)
	}
	fmt.Fprintf(&out, "\n== final state (replay.State as JSON)\n%s\n", sj)

	fmt.Fprintf(&out, "\n== workflow states in the final state, decoded\n")
	for _, id := range st.WorkflowIDs() {
		m, err := replay.DecodeState(st.Workflows[id].State)
		if err != nil {
			return nil, 0, fmt.Errorf("workflow %s state: %w", id, err)
		}
		fmt.Fprintf(&out, "%s %s\n", id, mustJSON(m))
	}

	fmt.Fprintf(&out, "\n== terminal index: jobs, workflows, idempotency keys (- when absent)\n")
	lookup := func(id string, decode func([]byte) (any, error)) error {
		v, ok, err := j.Index(id)
		if err != nil {
			return fmt.Errorf("index %s: %w", id, err)
		}
		if !ok {
			fmt.Fprintf(&out, "%s -\n", id)
			return nil
		}
		s, err := decode(v)
		if err != nil {
			return fmt.Errorf("index %s: %w", id, err)
		}
		fmt.Fprintf(&out, "%s %s\n", id, mustJSON(s))
		return nil
	}
	for _, id := range sorted(jobs) {
		if err := lookup(id, func(b []byte) (any, error) { return replay.DecodeSummary(b) }); err != nil {
			return nil, 0, err
		}
	}
	for _, id := range sorted(workflows) {
		err := lookup(id, func(b []byte) (any, error) {
			s, err := replay.DecodeWorkflowSummary(b)
			if err != nil {
				return nil, err
			}
			pub, err := replay.DecodeState(s.State)
			return struct {
				replay.WorkflowSummary
				PublicState map[string]any
			}{s, pub}, err
		})
		if err != nil {
			return nil, 0, err
		}
	}
	for _, id := range sorted(idem) {
		if err := lookup(id, func(b []byte) (any, error) { return replay.DecodeIdempotent(b) }); err != nil {
			return nil, 0, err
		}
	}
	return out.Bytes(), snaps, nil
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// firstDiff describes the first line where got differs from want.
func firstDiff(want, got []byte) string {
	wl := strings.Split(string(want), "\n")
	gl := strings.Split(string(got), "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  expect.txt: %s\n  replay:     %s", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// WF-2: a workflow an earlier build started goes on when this build
// registers the same definition. Earlier builds hashed the step jobs'
// options as resolved from the engine's Options; this one leaves the
// engine out of the hash, and still runs workflows that recorded the
// earlier hash (WorkflowDef.LegacyHash). Without that, every workflow in
// flight would park after an upgrade.
func TestWF2_WorkflowsOfAnEarlierBuildRunOnTheirDefinition(t *testing.T) {
	t.Parallel()
	const waiting = "wf_01KE6SJT80XSHNNK58M7HDESV6" // "article", waiting for "approved"
	ctx := context.Background()
	fs := loadImage(t, filepath.Join(journalsDir, "0.1.0-workflows"))
	eng, err := api.Open(ctx, api.Options{Dir: "db", FS: fs, Clock: clocktest.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	ok := func(key string) api.StepFunc {
		return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return api.State{key: true}, nil
		}
	}
	// As scenarioWorkflows registers it.
	if err := eng.Register(api.NewWorkflow("article").Then("draft", ok("drafted")).
		WaitForSignal("approved").Into("approval").Then("publish", ok("published"))); err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := eng.Workflow(ctx, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if info.Parked || info.StepName == "" {
		t.Fatalf("the earlier build's workflow is parked: %+v", info)
	}
	if err := eng.Signal(ctx, waiting, "approved", api.State{"by": "bo"}); err != nil {
		t.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err = eng.Workflow(ctx, waiting); err != nil || info.Status != api.WorkflowCompleted || info.State["published"] != true {
		t.Fatalf("after its signal: %+v, %v", info, err)
	}
}
