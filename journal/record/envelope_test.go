package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

const goldenEngineID = "01J9Z3W8Q5B6X4T2N7M0K1R8HC"

// goldenRecords are the fixed records of testdata/envelope.golden: seq 1
// chained to the engine id, the others to their predecessor.
func goldenRecords() []Record {
	const t0 = 1_700_000_000_000_000_000
	return []Record{
		{Seq: 1, At: t0, Stream: EngineStream, Body: &RunStarted{RunID: "run_1", Version: "v0.1.0", At: t0, Recovered: 2}},
		{Seq: 2, At: t0 + 1_000_000, Stream: "wf_01J9Z3", Body: &WorkflowStarted{
			WorkflowID: "wf_01J9Z3", Name: "signup", DefinitionHash: "h1", Steps: 3,
			State: []byte{0x81, 0xa1, 'n', 0x01}, At: t0 + 1_000_000, DeadlineAt: t0 + 3_600_000_000_000,
		}},
		{Seq: 3, At: t0 + 2_000_000, Stream: "job_01J9Z4", Body: &AttemptSucceeded{
			Outcome: Outcome{JobID: "job_01J9Z4", Token: 300, Joined: true},
			Output:  []byte{0xc3},
		}},
	}
}

// annotate renders an envelope one field a line: name, offset, hex. It
// reads the layout of doc.go directly rather than through ParseEnvelope, so
// that the golden file checks the writer against the documented diagram.
func annotate(w *strings.Builder, r Record, val []byte) {
	fmt.Fprintf(w, "# seq %d: %s on stream %q, %d bytes\n", r.Seq, r.Kind(), r.Stream, len(val))
	fmt.Fprintf(w, "%-10s %5s  %x\n", "key", "-", LogKey(r.Seq))
	off := 0
	field := func(name string, n int) {
		fmt.Fprintf(w, "%-10s %5d  %x\n", name, off, val[off:off+n])
		off += n
	}
	field("magic", 2)
	field("version", 1)
	field("kind", 2)
	field("seq", 8)
	field("prevSum", 4)
	field("at", 8)
	idLen, n := binary.Uvarint(val[off:])
	field("idLen", n)
	field("stream", int(idLen))
	pLen, n := binary.Uvarint(val[off:])
	field("payloadLen", n)
	for rest, name := int(pLen), "payload"; rest > 0; name = "" {
		chunk := min(rest, 32)
		field(name, chunk)
		rest -= chunk
	}
	field("crc", 4)
	if off != len(val) {
		fmt.Fprintf(w, "!!! %d bytes left over\n", len(val)-off)
	}
	w.WriteString("\n")
}

// TestEnvelopeGolden freezes the byte layout: any change to the envelope or
// to a body's encoding shows up as a diff of testdata/envelope.golden.
// Regenerate with go test ./journal/record -update and review the diff.
func TestEnvelopeGolden(t *testing.T) {
	t.Parallel()
	var w strings.Builder
	w.WriteString("# Envelopes of fixed records (doc.go has the layout). Regenerate with\n")
	w.WriteString("# go test ./journal/record -update and review the diff: a change here is a\n")
	w.WriteString("# change of the on-disk format.\n")
	fmt.Fprintf(&w, "# engine id %q, CRC32C %08x (prevSum of seq 1)\n\n", goldenEngineID, Checksum([]byte(goldenEngineID)))
	prevSum := Checksum([]byte(goldenEngineID))
	for _, r := range goldenRecords() {
		val, sum := AppendEnvelope(nil, r.Seq, prevSum, r.At, mustPrepare(t, r))
		annotate(&w, r, val)
		env, err := ParseEnvelope(r.Seq, val, RecordBytesMaxDefault)
		if err != nil {
			t.Fatalf("seq %d: %v", r.Seq, err)
		}
		if env.PrevSum != prevSum || env.Sum != sum {
			t.Fatalf("seq %d: chain %08x/%08x, want %08x/%08x", r.Seq, env.PrevSum, env.Sum, prevSum, sum)
		}
		prevSum = sum
	}
	path := filepath.Join("testdata", "envelope.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(w.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./journal/record -update to create it)", err)
	}
	if got := w.String(); got != string(want) {
		t.Fatalf("envelope bytes differ from %s (the on-disk format changed?)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestParseEnvelopeErrors checks each §4.2 refusal: a *RecordError naming
// the check and the seq, wrapping ErrCorrupt (ErrNewerVersion alone for a
// newer version).
func TestParseEnvelopeErrors(t *testing.T) {
	t.Parallel()
	const seq = 9
	p := mustPrepare(t, Record{Stream: "wf_a", Body: &WorkflowFailed{WorkflowID: "wf_a", Step: 2, Error: "boom"}})
	good, _ := AppendEnvelope(nil, seq, 1, 1, p)
	if _, err := ParseEnvelope(seq, good, RecordBytesMaxDefault); err != nil {
		t.Fatalf("valid envelope: %v", err)
	}
	// edit returns good with fn applied and the crc fixed.
	edit := func(fn func(b []byte) []byte) []byte {
		b := fn(append([]byte(nil), good...))
		return reseal(seq, b)
	}
	const idLenAt = headerBytes
	payloadLenAt := idLenAt + 1 + len("wf_a")
	tests := []struct {
		name  string
		val   []byte
		max   int
		op    string
		newer bool
	}{
		{"over the size cap", good, len(good) - 1, "size", false},
		{"shorter than the minimum", good[:EnvelopeBytesMin-1], 0, "size", false},
		{"empty", nil, 0, "size", false},
		{"crc", append(append([]byte(nil), good[:len(good)-1]...), good[len(good)-1]^1), 0, "checksum", false},
		{"copied under another seq", reseal(seq+1, good), 0, "checksum", false},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), 0, "magic", false},
		{"version newer", edit(func(b []byte) []byte { b[2] = Version + 1; return b }), 0, "version", true},
		{"version zero", edit(func(b []byte) []byte { b[2] = 0; return b }), 0, "version", false},
		{"unknown kind", edit(func(b []byte) []byte { binary.BigEndian.PutUint16(b[3:], 999); return b }), 0, "kind", false},
		{"header seq differs from key seq", edit(func(b []byte) []byte { binary.BigEndian.PutUint64(b[5:], seq+1); return b }), 0, "seq", false},
		{"idLen zero", edit(func(b []byte) []byte { b[idLenAt] = 0; return b }), 0, "stream", false},
		{"idLen past the end", edit(func(b []byte) []byte { b[idLenAt] = 120; return b }), 0, "stream", false},
		{"idLen over 127", edit(func(b []byte) []byte {
			out := append(b[:idLenAt:idLenAt], 0x80, 0x01)
			out = append(out, bytes.Repeat([]byte{'a'}, 128)...)
			return append(out, b[idLenAt+1+4:]...)
		}), 0, "stream", false},
		{"idLen not minimal", edit(func(b []byte) []byte {
			return append(append(b[:idLenAt:idLenAt], 0x84, 0x00), b[idLenAt+1:]...)
		}), 0, "stream", false},
		{"idLen not a uvarint", edit(func(b []byte) []byte {
			return append(b[:idLenAt:idLenAt], bytes.Repeat([]byte{0xff}, 11)...)
		}), 0, "stream", false},
		{"payloadLen too large", edit(func(b []byte) []byte { b[payloadLenAt]++; return b }), 0, "payload", false},
		{"payloadLen too small", edit(func(b []byte) []byte { b[payloadLenAt]--; return b }), 0, "payload", false},
		{"payloadLen not minimal", edit(func(b []byte) []byte {
			n := b[payloadLenAt]
			return append(append(b[:payloadLenAt:payloadLenAt], n|0x80, 0x00), b[payloadLenAt+1:]...)
		}), 0, "payload", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = RecordBytesMaxDefault
			}
			_, err := ParseEnvelope(seq, tc.val, max)
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("got %v (%T), want *RecordError", err, err)
			}
			if re.Op != tc.op || re.Seq != seq {
				t.Fatalf("op %q seq %d, want %q seq %d (%v)", re.Op, re.Seq, tc.op, seq, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("seq %d", seq)) {
				t.Fatalf("message %q does not name seq %d", err, seq)
			}
			if tc.newer {
				if !errors.Is(err, ErrNewerVersion) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("%v: want ErrNewerVersion and not ErrCorrupt", err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: want ErrCorrupt", err)
			}
		})
	}
}

// TestParseEnvelopeAttributesPayloadErrors: once the id has been read, a
// failure names the stream too; a decode failure is a RecordError "decode".
func TestParseEnvelopeAttributesPayloadErrors(t *testing.T) {
	t.Parallel()
	val := rawEnvelope(4, 0, 0, "job_x", KindJobBuried, []byte{0x81, 0xa3, 'z', 'z', 'z', 0x01})
	env, err := ParseEnvelope(4, val, RecordBytesMaxDefault)
	if err != nil {
		t.Fatal(err)
	}
	_, err = env.Decode()
	var re *RecordError
	if !errors.As(err, &re) || re.Op != "decode" || re.Seq != 4 || re.Stream != "job_x" || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want a decode RecordError for seq 4 stream job_x wrapping ErrCorrupt", err)
	}
}

// TestPrepareRefusals: records refused before they are written say what
// (kind, limit) and where (stream).
func TestPrepareRefusals(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", StreamIDBytesMax+1)
	tests := []struct {
		name string
		r    Record
		max  int
		want error
		msg  []string
	}{
		{"empty stream", Record{Body: &WorkflowPaused{WorkflowID: "wf_a"}}, 0, ErrInvalid, []string{"workflow_paused", "stream id is empty"}},
		{"stream over 127 bytes", Record{Stream: long, Body: &WorkflowPaused{}}, 0, ErrInvalid, []string{"workflow_paused", "128 bytes", "limit 127"}},
		{"nil body", Record{Stream: "wf_a"}, 0, ErrInvalid, []string{`"wf_a"`, "no body"}},
		{"typed nil body", Record{Stream: "wf_a", Body: (*WorkflowPaused)(nil)}, 0, ErrInvalid, []string{`"wf_a"`, "no body"}},
		{"oversized record", Record{Stream: "job_a", Body: &JobEnqueued{Payload: make([]byte, 2000)}}, 1024, ErrTooLarge, []string{"job_enqueued", `"job_a"`, "limit 1024"}},
		{"oversized at the default cap", Record{Stream: "job_a", Body: &SignalReceived{Payload: make([]byte, RecordBytesMaxDefault)}}, 0, ErrTooLarge, []string{"signal_received", `"job_a"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = RecordBytesMaxDefault
			}
			_, err := Prepare(tc.r, max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message %q does not contain %q", err, m)
				}
			}
		})
	}
	// Exactly at the cap is accepted.
	r := Record{Stream: "job_a", Body: &SignalReceived{WorkflowID: "wf"}}
	p := mustPrepare(t, r)
	if _, err := Prepare(r, p.Size()); err != nil {
		t.Fatalf("record of exactly the cap refused: %v", err)
	}
	if _, err := Prepare(r, p.Size()-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("record one byte over the cap: %v", err)
	}
	// What the writer accepts at the cap, the reader accepts under the
	// same cap (RL-11): a journal never refuses a record it wrote.
	val, _ := AppendEnvelope(nil, 1, 0, 1, p)
	if _, err := ParseEnvelope(1, val, len(val)); err != nil {
		t.Fatalf("envelope of exactly the cap refused on read: %v", err)
	}
	if _, err := ParseEnvelope(1, val, len(val)-1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("envelope one byte over the cap on read: %v, want ErrCorrupt", err)
	}
	// A stream id of exactly StreamIDBytesMax bytes is valid (RL-11) and
	// reads back whole.
	id := strings.Repeat("s", StreamIDBytesMax)
	p = mustPrepare(t, Record{Stream: id, Body: &WorkflowPaused{WorkflowID: "wf_a"}})
	val, _ = AppendEnvelope(nil, 1, 0, 1, p)
	if env, err := ParseEnvelope(1, val, RecordBytesMaxDefault); err != nil || env.Stream != id {
		t.Fatalf("127-byte stream id: stream %q, %v", env.Stream, err)
	}
}

// TestLogKey checks the key layout and its parse.
func TestLogKey(t *testing.T) {
	t.Parallel()
	k := LogKey(0x0102030405060708)
	if want := []byte("e/\x01\x02\x03\x04\x05\x06\x07\x08"); !bytes.Equal(k, want) {
		t.Fatalf("LogKey = %q, want %q", k, want)
	}
	if seq, ok := ParseLogKey(k); !ok || seq != 0x0102030405060708 {
		t.Fatalf("ParseLogKey = %d, %v", seq, ok)
	}
	for _, bad := range [][]byte{nil, []byte("e/"), []byte("s/\x00\x00\x00\x00\x00\x00\x00\x01"), append(LogKey(1), 0)} {
		if _, ok := ParseLogKey(bad); ok {
			t.Errorf("ParseLogKey(%q) accepted", bad)
		}
	}
}

// logKeySum is the checksum of the log key, for any seq.
func TestLogKeySum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seq := rapid.Uint64().Draw(t, "seq")
		if got, want := logKeySum(seq), Checksum(LogKey(seq)); got != want {
			t.Fatalf("logKeySum(%d) = %08x, Checksum(LogKey) = %08x", seq, got, want)
		}
	})
}

// TestPrepareAppendMatchesPrepare: PrepareAppend gives Prepare's result
// with the payload as the new tail of the buffer, and leaves the bytes
// already in it alone. A refused record leaves the buffer as it was.
func TestPrepareAppendMatchesPrepare(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom(Kinds()).Draw(t, "kind")
		in := genRecord(t, k)
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "buf")
		extra := rapid.IntRange(0, 512).Draw(t, "spare_cap")
		buf := append(make([]byte, 0, len(prefix)+extra), prefix...)

		want, werr := Prepare(in, RecordBytesMaxDefault)
		got, out, err := PrepareAppend(buf, in, RecordBytesMaxDefault)
		if (err == nil) != (werr == nil) {
			t.Fatalf("PrepareAppend error %v, Prepare error %v", err, werr)
		}
		if err != nil {
			if !bytes.Equal(out, prefix) {
				t.Fatalf("refused record changed the buffer: %x, was %x", out, prefix)
			}
			return
		}
		if got.Kind != want.Kind || got.Stream != want.Stream || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("PrepareAppend %v %q %x, Prepare %v %q %x", got.Kind, got.Stream, got.Payload, want.Kind, want.Stream, want.Payload)
		}
		if !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], got.Payload) {
			t.Fatalf("buffer %x, want %x then the payload %x", out, prefix, got.Payload)
		}
		if cap(got.Payload) != len(got.Payload) {
			t.Fatalf("payload has %d spare bytes of capacity: an append to it would write into the buffer", cap(got.Payload)-len(got.Payload))
		}
	})
	r := Record{Stream: "job_a", Body: &JobEnqueued{Payload: make([]byte, 2000)}}
	buf := []byte{1, 2, 3}
	if _, out, err := PrepareAppend(buf, r, 1024); !errors.Is(err, ErrTooLarge) || !bytes.Equal(out, []byte{1, 2, 3}) {
		t.Fatalf("oversized record: err %v, buffer %x", err, out)
	}
}

// A buffer reused for the records of one append after another, as the
// journal does, allocates nothing for a hand-encoded kind once it has
// grown.
func TestPrepareAppendReusedBufferAllocatesNothing(t *testing.T) {
	r := Record{Stream: "job_a", Body: &AttemptSucceeded{Outcome: Outcome{JobID: "job_a", Token: 7}}}
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if _, buf, err = PrepareAppend(buf[:0], r, RecordBytesMaxDefault); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record into a reused buffer, want 0", allocs)
	}
}

// TestEnvelopeVersionFollowsTheBody: a record is written with the oldest
// envelope version that can read it, so that a build which knows less
// refuses the records it cannot read as newer, not as corrupt: version 1,
// or 2 for a workflow_started with on_deadline. Both are read back.
func TestEnvelopeVersionFollowsTheBody(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		body Body
		want uint8
	}{
		{"run_started", &RunStarted{RunID: "run_1"}, 1},
		{"workflow_started without on_deadline", &WorkflowStarted{WorkflowID: "wf_1", Name: "w", DeadlineAt: 5}, 1},
		{"workflow_started with on_deadline", &WorkflowStarted{WorkflowID: "wf_1", Name: "w", DeadlineAt: 5, OnDeadline: "h"}, 2},
		{"workflow_started of a child with what it inherits", &WorkflowStarted{WorkflowID: "wf_2", Name: "w", ParentID: "wf_1", Inherited: true, InheritedQueue: "q", InheritedPriority: 1, InheritedMaxAttempts: 7}, 2},
		// The other fields new in version 2 (see Version): each one, when
		// set, makes a build that reads only version 1 refuse the record as
		// newer instead of failing its decode as corruption.
		{"attempt_buried", &AttemptBuried{Outcome: Outcome{JobID: "job_1", Token: 7}}, 1},
		{"attempt_buried final", &AttemptBuried{Outcome: Outcome{JobID: "job_1", Token: 7}, Final: true}, 2},
		{"job_buried", &JobBuried{JobID: "job_1", Error: "boom"}, 1},
		{"job_buried final", &JobBuried{JobID: "job_1", Error: "boom", Final: true}, 2},
		{"workflow_completed", &WorkflowCompleted{WorkflowID: "wf_1"}, 1},
		{"workflow_completed archiving buried jobs", &WorkflowCompleted{WorkflowID: "wf_1", ArchiveBuried: true}, 2},
		{"workflow_cancelled", &WorkflowCancelled{WorkflowID: "wf_1"}, 1},
		{"workflow_cancelled archiving buried jobs", &WorkflowCancelled{WorkflowID: "wf_1", ArchiveBuried: true}, 2},
		{"job_requeued", &JobRequeued{JobID: "job_1", AvailableAt: 5}, 1},
		{"job_requeued keeping its key", &JobRequeued{JobID: "job_1", AvailableAt: 5, KeepKey: true}, 2},
		{"workflow_retried", &WorkflowRetried{WorkflowID: "wf_1"}, 1},
		{"workflow_retried dropping outputs", &WorkflowRetried{WorkflowID: "wf_1", DropOutputs: true}, 2},
		{"shutdown_phase_finished", &ShutdownPhaseFinished{Phase: 5, Name: "release_resources", Graceful: "completed", Forced: "not_attempted"}, 1},
		{"shutdown_phase_finished with the completion", &ShutdownPhaseFinished{Phase: 6, Name: "publish_report", Graceful: "completed", Forced: "not_attempted", Completion: "graceful_completed"}, 2},
	} {
		val, _ := AppendEnvelope(nil, 1, 0, 1, mustPrepare(t, Record{Stream: "wf_1", Body: c.body}))
		if val[2] != c.want {
			t.Errorf("%s: envelope version %d, want %d", c.name, val[2], c.want)
		}
		env, err := ParseEnvelope(1, val, RecordBytesMaxDefault)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := env.Decode()
		if err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		if !reflect.DeepEqual(got.Body, c.body) {
			t.Errorf("%s: %+v after a round trip, want %+v", c.name, got.Body, c.body)
		}
	}
}
