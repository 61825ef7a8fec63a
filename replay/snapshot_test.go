package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/quire-dev/quire/internal/allocs"
	"github.com/quire-dev/quire/journal/record"
)

// sampleState folds a journal that touches every part of State: jobs in
// each status, a lost attempt, unique keys (one requeued while another job
// holds it), paused queues, runs with a shutdown report.
func sampleState(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	b.add(record.EngineStream, &record.RunStarted{RunID: "r1", Version: "v", At: at(0)})
	b.enqueue("job_z", unique("k"), func(e *record.JobEnqueued) { e.Payload = []byte{0x81, 0xa1, 'a', 0x01} })
	b.buryAttempt("job_z", b.start("job_z"))
	b.enqueue("job_a", unique("k"), func(e *record.JobEnqueued) { e.Priority = 3; e.Queue = "mail" })
	b.add("job_z", &record.JobRequeued{JobID: "job_z", AvailableAt: at(time.Second)})
	b.add("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "import", Steps: 3, State: []byte{0x81, 0xa1, 'a', 0x01}, At: at(0), DeadlineAt: at(time.Hour), IdempotencyKey: "idem"})
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1, Output: []byte{0x81, 0xa1, 'b', 0x02}})
	b.add("wf_1", &record.SignalReceived{WorkflowID: "wf_1", Name: "go", Payload: []byte{0x80}})
	b.add("wf_1", &record.WorkflowWaiting{WorkflowID: "wf_1", Step: 1, Status: "waiting_for_signal", Signals: []string{"approve"}, Mode: "all"})
	b.add("wf_2", &record.WorkflowStarted{WorkflowID: "wf_2", Name: "late", Steps: 1, At: at(0), DeadlineAt: at(time.Second)})
	b.add("wf_2", &record.WorkflowFailed{WorkflowID: "wf_2", Error: "Deadline exceeded", At: at(time.Second)})
	b.add("wf_2", &record.WorkflowDeadlineExceeded{WorkflowID: "wf_2", DeadlineAt: at(time.Second), DetectedAt: at(time.Second), DetectedBy: "check", Handler: "notify"})
	b.enqueue("job_m", func(e *record.JobEnqueued) {
		e.Retry.Backoff, e.Retry.ListNanos, e.Retry.JitterRatio = record.BackoffList, []int64{1e9, 2e9}, 0.25
		e.DeliveryTimeoutNanos = int64(time.Minute)
		e.WorkflowID, e.Step, e.Branch = "wf_1", 2, 1
	})
	b.start("job_m")
	b.enqueue("job_done")
	b.succeed("job_done", b.start("job_done"))
	b.add(record.EngineStream, &record.QueuePaused{Queue: "mail"})
	b.add(record.EngineStream, &record.QueuePaused{Queue: "bulk"})
	b.add(record.EngineStream, &record.ShutdownInitiated{Trigger: "signal", StartAt: at(time.Minute)})
	b.add(record.EngineStream, &record.ShutdownReport{Completion: "clean", Dependencies: []uint8{1, 3, 7}})
	b.add(record.EngineStream, &record.RunStarted{RunID: "r2", Version: "v", At: at(2 * time.Minute)})
	b.start("job_a")
	checkInvariants(t, b.s)
	return b
}

// sameState fails unless a and b agree on everything the scheduler reads,
// including the derived maps the digest does not spell out.
func sameState(t tb, what string, a, b *State) {
	t.Helper()
	if Digest(a) != Digest(b) {
		t.Fatalf("%s: digests differ", what)
	}
	if !maps.Equal(a.Unique, b.Unique) {
		t.Fatalf("%s: unique %v != %v", what, a.Unique, b.Unique)
	}
	// JB-5: the jobs in line for a key another job holds.
	if !maps.EqualFunc(a.uniqueWaiting, b.uniqueWaiting, slices.Equal[[]string]) {
		t.Fatalf("%s: unique key lines %v != %v", what, a.uniqueWaiting, b.uniqueWaiting)
	}
	if !maps.Equal(a.Tokens, b.Tokens) {
		t.Fatalf("%s: tokens %v != %v", what, a.Tokens, b.Tokens)
	}
	if !maps.Equal(a.PausedQueues, b.PausedQueues) {
		t.Fatalf("%s: paused %v != %v", what, a.PausedQueues, b.PausedQueues)
	}
	// WF-14: the idempotency keys of active workflows, which refuse a
	// second workflow_started with the same key.
	if !maps.Equal(a.Idempotency, b.Idempotency) {
		t.Fatalf("%s: idempotency %v != %v", what, a.Idempotency, b.Idempotency)
	}
}

// snapshotOf encodes s and decodes the snapshot, failing t unless the
// decoded state keeps the invariants and equals s; it returns that state.
func snapshotOf(t tb, what string, s *State) *State {
	t.Helper()
	enc, err := Encode(s)
	if err != nil {
		t.Fatalf("%s: Encode: %v", what, err)
	}
	got, err := Decode(enc)
	if err != nil {
		t.Fatalf("%s: Decode: %v", what, err)
	}
	checkInvariants(t, got)
	sameState(t, what, got, s)
	// The engine writes a snapshot only if its decoding digests as its
	// bytes do (RL-12): a state whose encoding differs from that of its
	// own decoding (an empty list where decoding gives nil) never gets
	// a snapshot.
	if Digest(got) != sha256.Sum256(enc) {
		again, _ := Encode(got)
		t.Fatalf("%s: the decoded state encodes differently (%d bytes, %d before): the engine would refuse this snapshot", what, len(again), len(enc))
	}
	return got
}

func TestRL12_SnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	b := sampleState(t)
	got := snapshotOf(t, "decoded", b.s)
	if got.LastSeq != b.s.LastSeq || got.Completed != 1 || len(got.Runs) != 2 || got.Runs[0].Shutdown.Report == nil {
		t.Fatalf("decoded = LastSeq %d Completed %d runs %+v", got.LastSeq, got.Completed, got.Runs)
	}
	again, _ := Encode(got)
	if enc, _ := Encode(b.s); !bytes.Equal(again, enc) {
		t.Fatal("re-encoding a decoded state changes the bytes")
	}
	// The decoded state keeps folding like the original.
	tail := record.Record{Seq: b.s.LastSeq + 1, Stream: "job_a", Body: &record.AttemptSucceeded{Outcome: out("job_a", b.s.Jobs["job_a"].Token)}}
	if err := Apply(b.s, tail); err != nil {
		t.Fatal(err)
	}
	if err := Apply(got, tail); err != nil {
		t.Fatal(err)
	}
	sameState(t, "after the tail", got, b.s)
}

func TestRL12_SnapshotEmptyState(t *testing.T) {
	t.Parallel()
	enc, err := Encode(New())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "empty", got, New())
}

func TestRL7_EncodeIsDeterministic(t *testing.T) {
	t.Parallel()
	b := sampleState(t)
	e1, _ := Encode(b.s)
	e2, _ := Encode(b.s)
	if !bytes.Equal(e1, e2) {
		t.Fatal("two encodings of one state differ")
	}
	// The same content inserted into the maps in the opposite order.
	ids := b.s.JobIDs()
	rev := New()
	rev.LastSeq, rev.Completed, rev.Runs = b.s.LastSeq, b.s.Completed, b.s.Runs
	for i := len(ids) - 1; i >= 0; i-- {
		j := *b.s.Jobs[ids[i]]
		rev.Jobs[j.ID] = &j
		if j.Token != 0 {
			rev.Tokens[j.Token] = j.ID
		}
	}
	for _, q := range []string{"mail", "bulk"} {
		rev.PausedQueues[q] = true
	}
	for k, v := range b.s.Unique {
		rev.Unique[k] = v
	}
	wids := b.s.WorkflowIDs()
	for i := len(wids) - 1; i >= 0; i-- {
		w := *b.s.Workflows[wids[i]]
		rev.Workflows[w.ID] = &w
	}
	for k, v := range b.s.Idempotency {
		rev.Idempotency[k] = v
	}
	rev.expiries = b.s.expiries
	rev.WorkflowsCompleted, rev.WorkflowsCancelled = b.s.WorkflowsCompleted, b.s.WorkflowsCancelled
	e3, _ := Encode(rev)
	if !bytes.Equal(e1, e3) {
		t.Fatal("insertion order changes the encoding")
	}
	// Many jobs: map iteration order varies from run to run.
	big1, big2 := New(), New()
	for i := range 200 {
		id := "job_" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		big1.Jobs[id] = &Job{ID: id, Status: JobPending, EnqueueSeq: uint64(i + 1)}
		big1.PausedQueues[id] = true
	}
	for i := 199; i >= 0; i-- {
		id := "job_" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		big2.Jobs[id] = &Job{ID: id, Status: JobPending, EnqueueSeq: uint64(i + 1)}
		big2.PausedQueues[id] = true
	}
	if Digest(big1) != Digest(big2) {
		t.Fatal("insertion order changes the digest")
	}
}

func TestRL7_DigestSeesEveryChange(t *testing.T) {
	t.Parallel()
	b := sampleState(t)
	base := Digest(b.s)
	changes := map[string]func(s *State){
		"LastSeq":     func(s *State) { s.LastSeq++ },
		"Completed":   func(s *State) { s.Completed++ },
		"paused":      func(s *State) { s.PausedQueues["x"] = true },
		"job status":  func(s *State) { s.Jobs["job_z"].Status = JobBuried },
		"available":   func(s *State) { s.Jobs["job_z"].AvailableAt++ },
		"consumed":    func(s *State) { s.Jobs["job_z"].Consumed++ },
		"lost":        func(s *State) { s.Jobs["job_z"].Lost = !s.Jobs["job_z"].Lost },
		"payload":     func(s *State) { s.Jobs["job_z"].Payload = nil },
		"unique":      func(s *State) { s.Unique["k"] = "job_z" },
		"run":         func(s *State) { s.Runs = s.Runs[:1] },
		"jobs":        func(s *State) { delete(s.Jobs, "job_m") },
		"retry":       func(s *State) { s.Jobs["job_m"].Retry.ListNanos[0]++ },
		"last error":  func(s *State) { s.Jobs["job_z"].LastError = "x" },
		"enqueue seq": func(s *State) { s.Jobs["job_z"].EnqueueSeq++ },
	}
	for name, change := range changes {
		enc, _ := Encode(b.s)
		s, err := Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		change(s)
		if Digest(s) == base {
			t.Errorf("digest does not see a change of %s", name)
		}
	}
}

// TestRL12_SnapshotPlusTailEqualsFullFold: for any valid journal and any
// N, Decode(Encode(fold(1..N))) folded with N+1.. equals fold(1..end).
func TestRL12_SnapshotPlusTailEqualsFullFold(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		recs := workload(t, rapid.IntRange(0, 150).Draw(t, "len"))
		n := rapid.IntRange(0, len(recs)).Draw(t, "snapshot_at")
		full := fold(t, recs)
		checkInvariants(t, full)
		head := fold(t, recs[:n])
		enc, err := Encode(head)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		restored, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode of a snapshot at %d: %v", n, err)
		}
		sameState(t, "restored head", restored, head)
		if err := Fold(restored, recs[n:]...); err != nil {
			t.Fatalf("tail after snapshot at %d: %v", n, err)
		}
		sameState(t, "snapshot + tail vs full fold", restored, full)
		// DL-45: two replays of one journal yield the same state.
		sameState(t, "second replay", fold(t, recs), full)
	})
}

func TestRL6_DecodeRefusesHostileBytes(t *testing.T) {
	t.Parallel()
	valid, err := Encode(sampleState(t).s)
	if err != nil {
		t.Fatal(err)
	}
	v2 := New()
	v2.LastSeq = 1
	bad := map[string][]byte{
		"nil":                  nil,
		"empty":                {},
		"msgpack nil":          {0xc0},
		"empty map":            {0x80},
		"array 16 of 65535":    {0xdc, 0xff, 0xff},
		"array 32 of 2^32-1":   {0xdd, 0xff, 0xff, 0xff, 0xff},
		"map 32 of 2^32-1":     {0xdf, 0xff, 0xff, 0xff, 0xff},
		"str 32 of 2^32-1":     {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},
		"reserved byte":        {0xc1},
		"trailing byte":        append(append([]byte{}, valid...), 0x00),
		"jobs array 16 header": snapshotWith(map[string][]byte{"jobs": {0xdc, 0xff, 0xff}}),
		"runs array 16 header": snapshotWith(map[string][]byte{"runs": {0xdc, 0xff, 0xff}}),
		"too many runs":        snapshotWith(map[string][]byte{"runs": append([]byte{0xdc, 0x00, RunsKeptMax + 1}, bytes.Repeat([]byte{0x80}, RunsKeptMax+1)...)}),
		"the next version":     snapshotWith(map[string][]byte{"v": {snapshotVersion + 1}}),
		"version 0":            snapshotWith(map[string][]byte{"v": {0x00}}),
		"unknown field":        snapshotWith(map[string][]byte{"zz": {0x01}}),
		"jobs not an array":    snapshotWith(map[string][]byte{"jobs": {0xa1, 'x'}}),
		"timestamp ext":        snapshotWith(map[string][]byte{"completed": {0xd6, 0xff, 0, 0, 0, 1}}),
		"deep nesting":         append(bytes.Repeat([]byte{0x91}, 100), 0x01),
		"not msgpack":          []byte("hello, snapshot"),
	}
	for i := range valid {
		bad[fmt.Sprintf("valid encoding truncated to %d bytes", i)] = valid[:i]
	}
	for name, b := range bad {
		s, err := Decode(b)
		if err == nil {
			t.Errorf("%s: Decode(% x) accepted: %+v", name, head(b), s)
		}
	}
}

// snapshotWith returns a valid snapshot map of this version in which the fields
// named in over have the given raw msgpack values (new names are added).
func snapshotWith(over map[string][]byte) []byte {
	fields := map[string][]byte{"v": {snapshotVersion}, "last_seq": {0x00}, "completed": {0x00}}
	maps.Copy(fields, over)
	out := []byte{0x80 | byte(len(fields))}
	for _, k := range []string{"v", "last_seq", "completed", "paused", "jobs", "runs", "unique", "workflows", "expiries", "zz"} {
		if v, ok := fields[k]; ok {
			out = append(out, 0xa0|byte(len(k)))
			out = append(out, k...)
			out = append(out, v...)
		}
	}
	return out
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

// TestRL6_DecodeNeverPanics feeds random bytes and mutated valid snapshots
// to Decode: it never panics, random bytes are refused, and whatever it
// accepts encodes again and folds on without panicking.
func TestRL6_DecodeNeverPanics(t *testing.T) {
	t.Parallel()
	valid, err := Encode(sampleState(t).s)
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		junk := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "junk")
		if _, err := Decode(junk); err == nil {
			t.Fatalf("Decode accepted random bytes % x", junk)
		}
		m := append([]byte{}, valid...)
		for range rapid.IntRange(1, 4).Draw(t, "mutations") {
			i := rapid.IntRange(0, len(m)-1).Draw(t, "at")
			m[i] = rapid.Byte().Draw(t, "byte")
		}
		s, err := Decode(m)
		if err != nil {
			return
		}
		if _, err := Encode(s); err != nil {
			t.Fatalf("a decoded state does not encode: %v", err)
		}
		_ = Digest(s)
		r := record.Record{Seq: s.LastSeq + 1, Stream: record.EngineStream, Body: &record.RunStarted{RunID: "r"}}
		_ = Apply(s, r)
	})
}

// TestRL6_SnapshotDecodeMemoryBound: a snapshot is untrusted input even
// with a valid crc, and one decode allocates at most 32 × its length +
// 1 MiB (RL-6). The pre-scan lets a list declare as many elements as bytes
// remain, and an empty map (one byte) decodes into a whole zero struct:
// a job or a workflow is 288 bytes. A list of one-byte elements thus cost
// hundreds of times its input (a 64 MiB snapshot, tens of GB), as did the
// lists of structs msgpack sizes by their declared length. Each list is
// now refused when it declares more elements than the bytes left could
// hold at the shortest encoding Encode writes of one. Not parallel:
// TotalAlloc counts the whole process.
func TestRL6_SnapshotDecodeMemoryBound(t *testing.T) { // RL-6
	const n = 1 << 18
	empties := binary.BigEndian.AppendUint32([]byte{0xdd}, n)
	empties = append(empties, bytes.Repeat([]byte{0x80}, n)...)
	inWorkflow := func(field string) []byte {
		w := []byte{0x91, 0x82, 0xa2, 'I', 'D', 0xa1, 'w', 0xa0 | byte(len(field))}
		return append(append(w, field...), empties...)
	}
	cases := map[string][]byte{
		"jobs":              snapshotWith(map[string][]byte{"jobs": empties}),
		"workflows":         snapshotWith(map[string][]byte{"workflows": empties}),
		"expiries":          snapshotWith(map[string][]byte{"expiries": empties}),
		"unique":            snapshotWith(map[string][]byte{"unique": empties}),
		"workflow signals":  snapshotWith(map[string][]byte{"workflows": inWorkflow("Signals")}),
		"workflow branches": snapshotWith(map[string][]byte{"workflows": inWorkflow("Branches")}),
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		b := cases[name]
		if err := record.Prescan(b, false); err != nil {
			t.Fatalf("%s: the pre-scan refuses the input (%v): the case tests nothing", name, err)
		}
		var err error
		got, bound := allocs.Bytes(func() { _, err = Decode(b) }), allocs.Bound(len(b))
		if got > bound {
			t.Errorf("%s: Decode of %d bytes allocated %d (%.0f×), bound %d", name, len(b), got, float64(got)/float64(len(b)), bound)
		}
		if !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", name, err)
		}
	}
}

// WD-10, RL-6: Encode writes the obligations in seq order, so a snapshot
// whose obligations are out of seq order is damage, refused as corrupt;
// in order, each is found by its seq after the decode.
func TestRL6_SnapshotExpiriesOutOfOrderAreCorrupt(t *testing.T) {
	t.Parallel()
	encode := func(es ...Expiry) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(&snapshotOut{Version: snapshotVersion, LastSeq: 9, Expiries: es}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b := Expiry{Seq: 4, WorkflowID: "wf_a", Name: "w"}, Expiry{Seq: 7, WorkflowID: "wf_b", Name: "w"}
	if _, err := Decode(encode(b, a)); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Decode: %v, want ErrCorrupt", err)
	}
	// One seq twice is damage too: one workflow_deadline_exceeded records
	// one obligation.
	if _, err := Decode(encode(a, b, b)); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("Decode of a repeated seq: %v, want ErrCorrupt", err)
	}
	got, err := Decode(encode(a, b))
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := got.Expiry(7); !ok || e.WorkflowID != "wf_b" || got.ExpiryCount() != 2 {
		t.Fatalf("in order: expiry 7 %+v %v, %d outstanding", e, ok, got.ExpiryCount())
	}
	if _, ok := got.Expiry(5); ok {
		t.Fatal("an expiry at seq 5 that was never recorded")
	}
	if again, err := Encode(got); err != nil || !bytes.Equal(again, encode(a, b)) {
		t.Fatalf("re-encoded differently (%v)", err)
	}
}

// TestRL9_SnapshotWithoutDelaySeqIsOutdated: a snapshot whose pending
// Delay lacks the seq of the step_delayed that armed it was written before
// the state kept that seq, and one of another snapshot version by another
// encoding: both are ErrSnapshotOutdated, a cache miss that is no sign of
// damage. A Delay seq without a Delay is damage.
func TestRL9_SnapshotWithoutDelaySeqIsOutdated(t *testing.T) {
	t.Parallel()
	encode := func(version int, w Workflow) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.Encode(&snapshotOut{Version: version, LastSeq: 9, Workflows: workflowList{w}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	w := Workflow{ID: "wf_a", Name: "w", Steps: 2, StartSeq: 3, Status: WorkflowRunning,
		Entered: true, DelayFireAt: 5e9, DelaySeq: 8}
	b := encode(snapshotVersion, w)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Workflows["wf_a"]; g.DelayFireAt != 5e9 || g.DelaySeq != 8 {
		t.Fatalf("decoded fire_at %d seq %d", g.DelayFireAt, g.DelaySeq)
	}
	if again, err := Encode(got); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoded differently (%v)", err)
	}

	old := w
	old.DelaySeq = 0
	for name, b := range map[string][]byte{
		"a Delay without its seq": encode(snapshotVersion, old),
		"another version":         encode(snapshotVersion+1, w),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrSnapshotOutdated) || errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("%s: Decode = %v, want ErrSnapshotOutdated only", name, err)
		}
	}
	stray := w
	stray.DelayFireAt = 0
	if _, err := Decode(encode(snapshotVersion, stray)); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("a Delay seq without a Delay: Decode = %v, want ErrCorrupt", err)
	}
}

// SD-33, RL-12: a state that holds the most runs it keeps survives its
// snapshot with all of them: the limit Decode enforces is the one the
// fold keeps.
func TestSD33_SnapshotKeepsAFullRunHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range RunsKeptMax + 1 {
		b.add(record.EngineStream, &record.RunStarted{RunID: fmt.Sprintf("r%d", i), At: at(time.Duration(i) * time.Minute)})
	}
	if len(b.s.Runs) != RunsKeptMax {
		t.Fatalf("%d runs kept, want %d", len(b.s.Runs), RunsKeptMax)
	}
	got := snapshotOf(t, "full run history", b.s)
	if len(got.Runs) != RunsKeptMax || got.Runs[0].RunID != "r1" || got.LastRun().RunID != fmt.Sprintf("r%d", RunsKeptMax) {
		t.Fatalf("decoded runs: %d, oldest %q, newest %q", len(got.Runs), got.Runs[0].RunID, got.LastRun().RunID)
	}
}

// TestRL6_DecodeRefusesInconsistentSnapshots feeds Decode snapshots that
// are well formed, each list entry as long as a real one (so that the
// size pre-checks pass), but that describe a state no journal folds to:
// each is refused as corrupt, for its own reason.
func TestRL6_DecodeRefusesInconsistentSnapshots(t *testing.T) {
	t.Parallel()
	list := func(entries ...map[string]any) []byte {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		if err := enc.EncodeArrayLen(len(entries)); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				t.Fatal(err)
			}
		}
		return buf.Bytes()
	}
	// job and wf pad an entry with a long name, so that it is as long as
	// the encoding of a real one.
	job := func(fields map[string]any) map[string]any {
		fields["Handler"] = strings.Repeat("h", 256)
		return fields
	}
	wf := func(fields map[string]any) map[string]any {
		fields["Name"] = strings.Repeat("n", 4096)
		return fields
	}
	hold := func(key, id string) map[string]any { return map[string]any{"key": key, "id": id} }
	cases := []struct {
		name string
		over map[string][]byte
		want string
	}{
		{"job without id", map[string][]byte{"jobs": list(job(map[string]any{}))}, `bad or duplicate job id ""`},
		{"duplicate job id", map[string][]byte{"jobs": list(job(map[string]any{"ID": "x"}), job(map[string]any{"ID": "x"}))},
			`bad or duplicate job id "x"`},
		{"job unknown field", map[string][]byte{"jobs": list(job(map[string]any{"ID": "x", "q": 1}))}, `"q"`},
		{"unique of a missing job", map[string][]byte{"unique": list(hold("k", "x"))}, `bad unique key "k" of job "x"`},
		{"unique of a buried job", map[string][]byte{
			"jobs":   list(job(map[string]any{"ID": "x", "UniqueKey": "k", "Status": uint8(JobBuried)})),
			"unique": list(hold("k", "x")),
		}, `bad unique key "k" of job "x"`},
		{"unique of another key", map[string][]byte{
			"jobs":   list(job(map[string]any{"ID": "x", "Status": uint8(JobPending)})),
			"unique": list(hold("k", "x")),
		}, `bad unique key "k" of job "x"`},
		{"one key, two holders", map[string][]byte{
			"jobs": list(job(map[string]any{"ID": "x", "UniqueKey": "k", "Status": uint8(JobPending)}),
				job(map[string]any{"ID": "y", "UniqueKey": "k", "Status": uint8(JobPending)})),
			"unique": list(hold("k", "x"), hold("k", "y")),
		}, `bad unique key "k" of job "y"`},
		// JB-5: a job with a key either holds it or waits behind a holder.
		{"pending job with a key no job holds", map[string][]byte{
			"jobs": list(job(map[string]any{"ID": "x", "UniqueKey": "k", "Status": uint8(JobPending)})),
		}, `job "x" is pending with unique key "k", which no job holds`},
		// RL-10: a token is held by one processing job, and a processing
		// job holds one.
		{"processing job without a token", map[string][]byte{
			"jobs": list(job(map[string]any{"ID": "x", "Status": uint8(JobProcessing)})),
		}, `job "x" is processing with token 0`},
		{"pending job with a token", map[string][]byte{
			"jobs": list(job(map[string]any{"ID": "x", "Status": uint8(JobPending), "Token": 7})),
		}, `job "x" is pending with token 7`},
		{"one token held by two jobs", map[string][]byte{
			"jobs": list(job(map[string]any{"ID": "x", "Status": uint8(JobProcessing), "Token": 7}),
				job(map[string]any{"ID": "y", "Status": uint8(JobProcessing), "Token": 7})),
		}, `token 7 held by jobs "x" and "y"`},
		{"duplicate workflow id", map[string][]byte{"workflows": list(wf(map[string]any{"ID": "w"}), wf(map[string]any{"ID": "w"}))},
			`bad or duplicate workflow id "w"`},
	}
	for _, c := range cases {
		_, err := Decode(snapshotWith(c.over))
		if !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Decode = %v, want a corrupt snapshot error containing %s", c.name, err, c.want)
		}
	}
}

// RL-12: a workflow whose step consumed its only stored signal keeps a
// state whose snapshot round-trips: consuming left an empty signal list,
// which encodes apart from the nil a decoding gives, so the engine's
// round-trip check refused every snapshot while such a workflow ran, and
// a restart replayed the whole journal.
func TestRL12_SnapshotAfterASignalIsConsumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkflow("wf_1", 3)
	b.add("wf_1", &record.SignalReceived{WorkflowID: "wf_1", Name: "go"})
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1, Consumed: []uint64{b.s.LastSeq}})
	if w := b.s.Workflows["wf_1"]; w.Step != 1 || len(w.Signals) != 0 {
		t.Fatalf("after the step: step %d, signals %v", w.Step, w.Signals)
	}
	snapshotOf(t, "after its only signal was consumed", b.s)
}
