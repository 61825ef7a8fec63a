package replay

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/quire-dev/quire/journal/record"
)

func TestJB3_SummaryRoundTrip(t *testing.T) {
	t.Parallel()
	b := sampleState(t)
	want := Summarize(b.job("job_z"))
	want.Status, want.FinishedAt, want.Seq = JobCompleted, at(time.Hour), 99
	if want.ID != "job_z" || want.Handler != "h" || want.Attempts != 1 || want.LastError != "boom" || want.MaxAttempts != policy.MaxAttempts {
		t.Fatalf("Summarize = %+v", want)
	}
	enc, err := EncodeSummary(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSummary(enc)
	if err != nil {
		t.Fatalf("DecodeSummary: %v", err)
	}
	if got != want {
		t.Fatalf("round trip = %+v, want %+v", got, want)
	}
	if got.Status.String() != "completed" {
		t.Fatalf("status = %s", got.Status)
	}
}

func TestRL6_DecodeSummaryRefusesGarbage(t *testing.T) {
	t.Parallel()
	valid, _ := EncodeSummary(JobSummary{ID: "job_a", Handler: "h", Status: JobBuried, LastError: "x"})
	bad := [][]byte{
		nil, {}, {0xc0}, {0x80}, {0xc1},
		{0x81, 0xa2, 'i', 'd', 0xa1, 'x'},                                           // no status
		{0x82, 0xa2, 'i', 'd', 0xa1, 'x', 0xa6, 's', 't', 'a', 't', 'u', 's', 0x07}, // unknown status
		{0xdc, 0xff, 0xff}, {0xdf, 0xff, 0xff, 0xff, 0xff}, []byte("garbage"),
		{0x81, 0xa1, 'q', 0x01},      // unknown field
		{0x81, 0xa2, 'i', 'd', 0x01}, // id of the wrong type
		append(append([]byte{}, valid...), 0xc0),
	}
	for i := range valid {
		bad = append(bad, valid[:i])
	}
	for _, b := range bad {
		if s, err := DecodeSummary(b); err == nil {
			t.Errorf("DecodeSummary(% x) accepted: %+v", b, s)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 48).Draw(t, "junk")
		if _, err := DecodeSummary(b); err == nil {
			t.Fatalf("DecodeSummary accepted random bytes % x", b)
		}
	})
}

func TestJobStatusString(t *testing.T) {
	t.Parallel()
	for s, want := range map[JobStatus]string{JobPending: "pending", JobProcessing: "processing", JobCompleted: "completed", JobBuried: "buried", 0: "unknown", 9: "unknown"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}

// oldJobSummary is JobSummary as entries were written before max_attempts
// was recorded.
type oldJobSummary struct {
	ID         string    `msgpack:"id"`
	Handler    string    `msgpack:"handler"`
	Queue      string    `msgpack:"queue"`
	Priority   uint8     `msgpack:"priority"`
	Status     JobStatus `msgpack:"status"`
	Attempts   int32     `msgpack:"attempts"`
	Consumed   int32     `msgpack:"consumed"`
	FinishedAt int64     `msgpack:"finished_at"`
	LastCode   string    `msgpack:"last_code,omitempty"`
	LastError  string    `msgpack:"last_error,omitempty"`
	WorkflowID string    `msgpack:"workflow_id,omitempty"`
	Seq        uint64    `msgpack:"seq"`
}

func TestJB3_SummaryMaxAttemptsAndOlderEntries(t *testing.T) {
	t.Parallel()
	s := JobSummary{ID: "job_a", Handler: "h", Queue: "q", Status: JobCompleted, Attempts: 2, Consumed: 2,
		MaxAttempts: 5, FinishedAt: 7, LastCode: "C", LastError: "e", WorkflowID: "wf_a", Seq: 9}
	enc, err := EncodeSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSummary(enc); err != nil || got != s {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, s)
	}
	// An entry written before the limit was recorded decodes, with 0.
	old := oldJobSummary{ID: s.ID, Handler: s.Handler, Queue: s.Queue, Status: s.Status, Attempts: s.Attempts,
		Consumed: s.Consumed, FinishedAt: s.FinishedAt, LastCode: s.LastCode, LastError: s.LastError,
		WorkflowID: s.WorkflowID, Seq: s.Seq}
	oldEnc, err := msgpack.Marshal(&old)
	if err != nil {
		t.Fatal(err)
	}
	want := s
	want.MaxAttempts = 0
	if got, err := DecodeSummary(oldEnc); err != nil || got != want {
		t.Fatalf("older entry = %+v, %v; want %+v", got, err, want)
	}
	// A summary without a limit encodes as older entries did.
	if enc, _ := EncodeSummary(want); !bytes.Equal(enc, oldEnc) {
		t.Fatalf("summary without a limit:\n% x\nolder entry:\n% x", enc, oldEnc)
	}
	// Decoding stays strict: a limit of the wrong type is refused.
	bad := bytes.Replace(enc, []byte("\xacmax_attempts\xd2"), []byte("\xacmax_attempts\xa4"), 1)
	if bytes.Equal(bad, enc) {
		t.Fatal("no int32 max_attempts in the encoding")
	}
	if _, err := DecodeSummary(bad); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("max_attempts of the wrong type: %v, want ErrCorrupt", err)
	}
}

func TestRL6_KindOfIndexValueTellsKindsByShape(t *testing.T) {
	t.Parallel()
	job, _ := EncodeSummary(JobSummary{ID: "job_a", Handler: "h", Status: JobCompleted, WorkflowID: "wf_a", MaxAttempts: 3})
	bare, _ := EncodeSummary(JobSummary{ID: "job_b", Handler: "h", Status: JobCompleted})
	wf, _ := EncodeWorkflowSummary(WorkflowSummary{ID: "wf_a", Name: "w", Status: WorkflowCompleted})
	wfFull, _ := EncodeWorkflowSummary(WorkflowSummary{ID: "wf_b", Name: "w", DefinitionHash: "abc", Status: WorkflowCancelled,
		State: []byte{0x80}, Error: "x", IdempotencyKey: "k", ParentID: "wf_a"})
	idem, _ := EncodeIdempotent(Idempotent{WorkflowID: "wf_a", Name: "w"})
	for _, c := range []struct {
		name string
		b    []byte
		want IndexKind
	}{
		{"job summary of a step", job, IndexJob},
		{"job summary", bare, IndexJob},
		{"workflow summary", wf, IndexWorkflow},
		{"workflow summary, every field", wfFull, IndexWorkflow},
		{"idempotency entry", idem, IndexIdempotency},
		// Damage that keeps the shape keeps the kind: the decoder of
		// that kind refuses it.
		{"job summary, bad status", bytes.Replace(bare, []byte("\xa6status\xcc\x03"), []byte("\xa6status\xcc\x4d"), 1), IndexJob},
		{"job summary, unknown key", append(append([]byte{0x8a}, bare[1:]...), 0xa1, 'z', 0x01), IndexJob},
	} {
		got, err := KindOfIndexValue(c.b)
		if err != nil || got != c.want {
			t.Errorf("%s: kind %s, %v; want %s", c.name, got, err, c.want)
		}
	}
	if b := bytes.Replace(bare, []byte("\xa6status\xcc\x03"), []byte("\xa6status\xcc\x4d"), 1); bytes.Equal(b, bare) {
		t.Fatal("no status 3 in the job summary")
	} else if _, err := DecodeSummary(b); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("damaged job summary decodes: %v", err)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"msgpack nil", []byte{0xc0}},
		{"empty map", []byte{0x80}},
		{"array", []byte{0x91, 0xa1, 'x'}},
		{"no marker", []byte{0x81, 0xa2, 'i', 'd', 0xa1, 'x'}},
		{"integer key", []byte{0x81, 0x01, 0x01}},
		{"nil key", []byte{0x81, 0xc0, 0x01}},
		{"nil key beside a marker", []byte{0x82, 0xc0, 0x01, 0xa7, 'h', 'a', 'n', 'd', 'l', 'e', 'r', 0xa1, 'h'}},
		{"bin key beside a marker", []byte{0x82, 0xc4, 0x01, 'q', 0x01, 0xa7, 'h', 'a', 'n', 'd', 'l', 'e', 'r', 0xa1, 'h'}},
		{"job and workflow markers", []byte{0x83, 0xa2, 'i', 'd', 0xa1, 'x', 0xa7, 'h', 'a', 'n', 'd', 'l', 'e', 'r', 0xa1, 'h',
			0xaf, 'd', 'e', 'f', 'i', 'n', 'i', 't', 'i', 'o', 'n', '_', 'h', 'a', 's', 'h', 0xa1, 'd'}},
		{"job and idempotency markers", []byte{0x82, 0xa7, 'h', 'a', 'n', 'd', 'l', 'e', 'r', 0xa1, 'h',
			0xab, 'w', 'o', 'r', 'k', 'f', 'l', 'o', 'w', '_', 'i', 'd', 0xa1, 'w'}},
		{"truncated", job[:len(job)-1]},
		{"trailing byte", append(append([]byte{}, job...), 0xc0)},
	} {
		if k, err := KindOfIndexValue(c.b); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("%s: kind %s, %v; want ErrCorrupt", c.name, k, err)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 48).Draw(t, "junk")
		if k, err := KindOfIndexValue(b); err == nil && k.String() == "unknown" {
			t.Fatalf("% x: no error and no kind", b)
		}
	})
}

// JB-3: a job that leaves the state buried (its attempts exhausted, or its
// workflow ended) has a summary that reads back buried, with its failure.
func TestJB3_SummaryOfABuriedJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue("job_a")
	b.buryAttempt("job_a", b.start("job_a"))
	want := Summarize(b.job("job_a"))
	want.FinishedAt, want.Seq = at(time.Second), b.s.LastSeq
	if want.Status != JobBuried || want.LastCode != "E" || want.LastError != "boom" || want.Attempts != 1 {
		t.Fatalf("Summarize = %+v", want)
	}
	enc, err := EncodeSummary(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSummary(enc); err != nil || got != want {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, want)
	}
}

// WF-21, WF-12: a terminal workflow stays queryable through its summary,
// which holds its public state only.
func TestWF21_WorkflowSummaryHoldsThePublicState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.startWorkflow("wf_1", 1, func(ws *record.WorkflowStarted) {
		ws.State = encodeState(t, map[string]any{"source": "s3://bucket/x", "_import_token": "k1"})
		ws.DeadlineAt, ws.IdempotencyKey = at(time.Hour), "idem"
	})
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1, Output: encodeState(t, map[string]any{"rows": int64(120)})})
	sum := SummarizeWorkflow(w)
	if sum.ID != "wf_1" || sum.Step != 1 || sum.Steps != 1 || sum.DeadlineAt != at(time.Hour) || sum.IdempotencyKey != "idem" {
		t.Fatalf("SummarizeWorkflow = %+v", sum)
	}
	wantState(t, "the summary's state", sum.State, map[string]any{"source": "s3://bucket/x", "rows": int64(120)})
	enc, err := EncodeWorkflowSummary(sum)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeWorkflowSummary(enc)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "the decoded summary's state", got.State, map[string]any{"source": "s3://bucket/x", "rows": int64(120)})
}
