package replay

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/journal/record"
)

// JB-5, RL-12: a job waiting in line for its key may be started, and
// stays in line while it runs. A snapshot rebuilds the line from the jobs
// (pending or processing, with the key, not the holder), in id order
// whatever the order they were requeued in; once the holder ends, the
// first in line takes the key, processing or not.
func TestJB5_RL12_SnapshotRebuildsALineWithAProcessingJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := []string{"job_5", "job_2", "job_7", "job_1", "job_6", "job_3", "job_8", "job_4"}
	for _, id := range ids {
		b.enqueue(id, unique("k"))
		b.buryAttempt(id, b.start(id))
	}
	b.enqueue("job_h", unique("k")) // takes k: every other job is buried
	for _, id := range ids {
		b.add(id, &record.JobRequeued{JobID: id, AvailableAt: at(0), KeepKey: true})
	}
	b.start("job_1")
	if j := b.job("job_1"); j.Status != JobProcessing || b.s.Unique["k"] != "job_h" {
		t.Fatalf("job_1 %s, k held by %q; want processing, held by job_h", j.Status, b.s.Unique["k"])
	}
	checkInvariants(t, b.s)
	dec := snapshotOf(t, "a line with a processing job", b.s)
	want := []string{"job_1", "job_2", "job_3", "job_4", "job_5", "job_6", "job_7", "job_8"}
	if line := dec.uniqueWaiting["k"]; !slices.Equal(line, want) {
		t.Fatalf("line for k after the snapshot: %v, want %v", line, want)
	}
	// The decoded state folds on as the live one does.
	after := &testBundle{t: t, s: dec}
	after.succeed("job_h", after.start("job_h"))
	if dec.Unique["k"] != "job_1" || !slices.Equal(dec.uniqueWaiting["k"], want[1:]) {
		t.Fatalf("after the holder completed: k held by %q, lines %v; want job_1, %v", dec.Unique["k"], dec.uniqueWaiting, want[1:])
	}
	checkInvariants(t, dec)
}

// RL-6: a workflow_started whose state is not a map with string keys, as
// DecodeState reads one, describes no workflow: the fold refuses it and
// the state does not move.
func TestRL6_WorkflowStartedWithABadStateIsRefused(t *testing.T) {
	t.Parallel()
	for name, state := range map[string][]byte{
		"an array":             {0x91, 0x01},
		"an int key":           {0x81, 0x01, 0x01},
		"a nested int key":     {0x81, 0xa1, 'm', 0x81, 0x01, 0x01},
		"truncated":            {0x82, 0xa1, 'a'},
		"a string":             {0xa1, 'a'},
		"a bad timestamp":      {0x81, 0xa1, 't', 0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"an over-deep nesting": append(append([]byte{0x81, 0xa1, 'a'}, bytes.Repeat([]byte{0x91}, 40)...), 0x01),
	} {
		b := setup(t)
		r := b.rec("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "w", Steps: 1, At: at(0), State: state})
		t.Run(name, func(t *testing.T) {
			mustRefuse(t, b.s, r, ErrImpossible)
			if _, ok := b.s.Workflows["wf_1"]; ok {
				t.Fatalf("the refused workflow is in the state")
			}
		})
	}
}

// WF-3: a step that completes without output leaves the workflow's state
// bytes as they were: nil stays nil (not the empty map's encoding), so
// the digest of a workflow whose steps return nothing does not change.
func TestWF3_StepWithoutOutputLeavesTheStateBytes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startWorkflow("wf_1", 3)
	if w.State != nil {
		t.Fatalf("state at the start %x, want nil", w.State)
	}
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1})
	if w.State != nil {
		t.Fatalf("state after a step without output %x, want nil", w.State)
	}
	for _, s := range [][]byte{nil, {}} {
		if got, err := MergeState(nil, s); err != nil || got != nil {
			t.Fatalf("MergeState(nil, %x) = %x, %v; want nil", s, got, err)
		}
	}
	snapshotOf(t, "a workflow with a nil state", b.s)
}

// RL-6: a snapshot may list at most RunsKeptMax runs. Each run here is as
// long as a real one, so the bound on the bytes left passes and only the
// limit refuses the list; RunsKeptMax of them decode.
func TestRL6_SnapshotRunsAreCappedAtRunsKeptMax(t *testing.T) {
	t.Parallel()
	runs := func(n int) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		if err := enc.EncodeArrayLen(n); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := enc.Encode(&Run{RunID: "run_1"}); err != nil {
				t.Fatal(err)
			}
		}
		return buf.Bytes()
	}
	s, err := Decode(snapshotWith(map[string][]byte{"runs": runs(RunsKeptMax)}))
	if err != nil || len(s.Runs) != RunsKeptMax {
		t.Fatalf("a snapshot of %d runs: %v", RunsKeptMax, err)
	}
	_, err = Decode(snapshotWith(map[string][]byte{"runs": runs(RunsKeptMax + 1)}))
	if !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), "runs, limit") {
		t.Fatalf("a snapshot of %d runs: Decode = %v, want ErrCorrupt over the limit", RunsKeptMax+1, err)
	}
}
