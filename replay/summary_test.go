package replay

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestJB3_SummaryRoundTrip(t *testing.T) {
	t.Parallel()
	b := sampleState(t)
	want := Summarize(b.job("job_z"))
	want.Status, want.FinishedAt, want.Seq = JobCompleted, at(time.Hour), 99
	if want.ID != "job_z" || want.Handler != "h" || want.Attempts != 1 || want.LastError != "boom" {
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
		{0x82, 0xa2, 'i', 'd', 0xa1, 'x', 0xa6, 's', 't', 'a', 't', 'u', 's', 0x07}, // unknown status {0xdc, 0xff, 0xff}, {0xdf, 0xff, 0xff, 0xff, 0xff}, []byte("garbage"),
		{0x81, 0xa1, 'q', 0x01},                                                     // unknown field
		{0x81, 0xa2, 'i', 'd', 0x01},                                                // id of the wrong type
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
