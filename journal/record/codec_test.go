package record

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestDecodeBodyInlineOutcome: the inline Outcome of settlement bodies
// decodes with unknown fields disallowed, and an unknown field next to it
// still fails.
func TestDecodeBodyInlineOutcome(t *testing.T) {
	t.Parallel()
	in := &AttemptRetryScheduled{Outcome: Outcome{JobID: "job_a", Token: 7, Code: "E1", Class: "retryable", Joined: true}, DelayNanos: 5, AvailableAt: 9}
	b, err := EncodeBody(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeBody(KindAttemptRetryScheduled, b)
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("DecodeBody = %#v, %v; want %#v", out, err, in)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, nested := m["Outcome"]; nested || m["job_id"] != "job_a" {
		t.Fatalf("Outcome is not inlined: %v", m)
	}
	m["later_field"] = int8(1)
	extra, _ := msgpack.Marshal(m)
	if _, err := DecodeBody(KindAttemptRetryScheduled, extra); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "later_field") {
		t.Fatalf("unknown field: %v, want ErrCorrupt naming it", err)
	}
}

func TestDecodeBodyRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		k       Kind
		payload []byte
	}{
		{"unknown kind", 999, []byte{0x80}},
		{"empty payload", KindWorkflowPaused, nil},
		{"unknown field", KindQueuePaused, []byte{0x82, 0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'q', 0xa1, 'x', 0x01}},
		{"wrong type", KindQueuePaused, []byte{0x81, 0xa5, 'q', 'u', 'e', 'u', 'e', 0x01}},
		{"timestamp ext", KindQueuePaused, []byte{0x81, 0xa5, 'q', 'u', 'e', 'u', 'e', 0xd6, 0xff, 0, 0, 0, 1}},
		{"trailing bytes", KindQueuePaused, []byte{0x80, 0x80}},
		{"hostile list", KindWorkflowWaiting, []byte{0x81, 0xa7, 's', 'i', 'g', 'n', 'a', 'l', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"5 MB of 0x91", KindShutdownReport, bytes.Repeat([]byte{0x91}, 5<<20)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := DecodeBody(tc.k, tc.payload)
			if !errors.Is(err, ErrCorrupt) || b != nil {
				t.Fatalf("DecodeBody = %v, %v; want ErrCorrupt", b, err)
			}
		})
	}
}

// TestEncodeValueCanonical: equal values encode to equal bytes, whatever
// the map iteration order, and decode back.
func TestEncodeValueCanonical(t *testing.T) {
	t.Parallel()
	v := map[string]any{}
	for _, k := range strings.Split("k j i h g f e d c b a", " ") {
		v[k] = map[string]any{"z": 1, "y": []any{"x", k}}
	}
	first, err := EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := EncodeValue(v)
		if !bytes.Equal(again, first) {
			t.Fatalf("encoding is not deterministic")
		}
	}
	var back map[string]any
	if err := DecodeValue(first, &back); err != nil {
		t.Fatal(err)
	}
	if again, _ := EncodeValue(back); !bytes.Equal(again, first) {
		t.Fatalf("decode and re-encode changed the bytes")
	}
}

func TestEncodeValueRefusals(t *testing.T) {
	t.Parallel()
	var deep any = 1
	for range DepthMax + 1 {
		deep = []any{deep}
	}
	if _, err := EncodeValue(deep); !errors.Is(err, ErrInvalid) {
		t.Fatalf("depth 33: %v, want ErrInvalid", err)
	}
	if _, err := EncodeValue(make(chan int)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("chan: %v, want ErrInvalid", err)
	}
	if _, err := EncodeValue(make([]byte, ValueBytesMax)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over ValueBytesMax: %v, want ErrTooLarge", err)
	}
	var ok any = 1
	for range DepthMax - 1 {
		ok = []any{ok}
	}
	if _, err := EncodeValue(ok); err != nil {
		t.Fatalf("depth 32: %v", err)
	}
}

// TestDecodeValueTimestamps: timestamps of every width decode, are stored
// in their 96-bit form, and an ext read where a map is expected cannot
// steer msgpack into a large allocation.
func TestDecodeValueTimestamps(t *testing.T) {
	t.Parallel()
	when := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC) // 32-bit form starts with 0x83, a fixmap
	b, err := EncodeValue(map[string]any{"at": when, "ns": time.Unix(1, 5)})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte{0xd6, 0xff}) || bytes.Contains(b, []byte{0xd7, 0xff}) {
		t.Fatalf("EncodeValue left a 32- or 64-bit timestamp: %x", b)
	}
	var m map[string]time.Time
	if err := DecodeValue(b, &m); err != nil || !m["at"].Equal(when) || !m["ns"].Equal(time.Unix(1, 5)) {
		t.Fatalf("DecodeValue = %v, %v", m, err)
	}
	for _, raw := range [][]byte{
		{0xd6, 0xff, 0x83, 0xaa, 0x7e, 0x80},                             // 32-bit
		{0xc7, 4, 0xff, 0x83, 0xaa, 0x7e, 0x80},                          // 32-bit in an ext8
		{0xd7, 0xff, 0, 0, 0, 0, 0x83, 0xaa, 0x7e, 0x80},                 // 64-bit
		{0xc7, 12, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x83, 0xaa, 0x7e, 0x80}, // 96-bit
	} {
		var got time.Time
		if err := DecodeValue(raw, &got); err != nil || !got.Equal(when) {
			t.Errorf("DecodeValue(%x) = %v, %v; want %v", raw, got, err, when)
		}
		var asMap map[string]any
		if err := DecodeValue(raw, &asMap); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeValue(%x) into a map = %v, want ErrCorrupt", raw, err)
		}
	}
	for _, raw := range [][]byte{
		{0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},                    // 64-bit, nanoseconds 2^30-1
		{0xc7, 12, 0xff, 0xdf, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0}, // 96-bit that reads as a map32
		{0xc7, 12, 0xff, 0x3b, 0x9a, 0xca, 0x00, 0, 0, 0, 0, 0, 0, 0, 0},    // 96-bit, nanoseconds 10^9
	} {
		var m map[string]any
		if err := DecodeValue(raw, &m); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeValue(%x) = %v, want ErrCorrupt", raw, err)
		}
	}
	// Nanoseconds of 10^9 or more are refused whatever the target, not
	// only where the data would misread as a map: such a timestamp is a
	// second encoding of the instant one second later.
	for _, raw := range [][]byte{
		{0xc7, 12, 0xff, 0x3b, 0x9a, 0xca, 0x00, 0, 0, 0, 0, 0x83, 0xaa, 0x7e, 0x80}, // 96-bit, nanoseconds 10^9
		{0xd7, 0xff, 0xee, 0x6b, 0x28, 0x00, 0x83, 0xaa, 0x7e, 0x80},                 // 64-bit, nanoseconds 10^9
	} {
		var got time.Time
		if err := DecodeValue(raw, &got); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeValue(%x) into a time = %v, %v; want ErrCorrupt", raw, got, err)
		}
		var v any
		if err := DecodeValue(raw, &v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeValue(%x) into any = %v, %v; want ErrCorrupt", raw, v, err)
		}
	}
	// The largest valid nanoseconds still decode.
	raw := []byte{0xc7, 12, 0xff, 0x3b, 0x9a, 0xc9, 0xff, 0, 0, 0, 0, 0x83, 0xaa, 0x7e, 0x80}
	var got time.Time
	if err := DecodeValue(raw, &got); err != nil || !got.Equal(when.Add(time.Second-time.Nanosecond)) {
		t.Errorf("DecodeValue(%x) = %v, %v; want %v", raw, got, err, when.Add(time.Second-time.Nanosecond))
	}
}

func TestDecodeValueRefusals(t *testing.T) {
	t.Parallel()
	var v any
	if err := DecodeValue(make([]byte, ValueBytesMax+1), &v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("over ValueBytesMax: %v", err)
	}
	if err := DecodeValue([]byte{0xd6, 0x01, 0, 0, 0, 0}, &v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ext type 1: %v", err)
	}
	if err := DecodeValue([]byte{0xa1, 'x'}, new(int)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("string into int: %v", err)
	}
	// User types may lose fields over time: unknown fields are skipped.
	type old struct {
		A int `msgpack:"a"`
	}
	b, _ := EncodeValue(map[string]any{"a": 1, "b": []any{1, 2}})
	var o old
	if err := DecodeValue(b, &o); err != nil || o.A != 1 {
		t.Fatalf("DecodeValue into a narrower struct = %+v, %v", o, err)
	}
}

// TestPooledCodersCarryNoOptions: the codecs take their encoders from
// msgpack's shared pool, which any code in the process may also use, and
// their decoders from a pool of their own. Options another user left on a
// pooled encoder or decoder must not reach the journal: keys stay sorted
// and structs stay maps, and a record with an unknown field is still
// refused.
func TestPooledCodersCarryNoOptions(t *testing.T) {
	v := map[string]any{"b": 1, "a": struct {
		X int `msgpack:"x"`
	}{X: 2}}
	want, err := EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	unknown := []byte{0x82, 0xa5, 'q', 'u', 'e', 'u', 'e', 0xa1, 'q', 0xa1, 'x', 0x01}
	for range 50 { // the pools hand back a recently put coder on this P
		enc := msgpack.GetEncoder()
		enc.Reset(nil)
		enc.SetSortMapKeys(false)
		enc.UseArrayEncodedStructs(true)
		enc.SetCustomStructTag("json")
		msgpack.PutEncoder(enc)
		dec := msgpack.GetDecoder()
		dec.Reset(nil)
		dec.DisallowUnknownFields(false)
		dec.SetCustomStructTag("json")
		dec.UseLooseInterfaceDecoding(true)
		msgpack.PutDecoder(dec)

		got, err := EncodeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("EncodeValue after a pooled encoder was reconfigured:\n got %x\nwant %x", got, want)
		}
		if b, err := DecodeBody(KindQueuePaused, unknown); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("DecodeBody of an unknown field after a pooled decoder was reconfigured = %v, %v; want ErrCorrupt", b, err)
		}
		var back map[string]any
		if err := DecodeValue(want, &back); err != nil {
			t.Fatal(err)
		}
		if n, ok := back["b"].(int8); !ok || n != 1 {
			t.Fatalf("DecodeValue after a pooled decoder was reconfigured: b = %#v, want int8(1)", back["b"])
		}
	}
}

// A decode takes its reader from the pool with its decoder: decoding a
// number into a variable allocates nothing once the pool is warm.
func TestDecodeAllocatesNoReader(t *testing.T) {
	b := []byte{0xcd, 0x01, 0x00} // uint16 256
	var x int64
	allocs := testing.AllocsPerRun(100, func() {
		if err := decode(b, &x, true); err != nil {
			t.Fatal(err)
		}
	})
	if x != 256 {
		t.Fatalf("decoded %d, want 256", x)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per decode, want 0", allocs)
	}
}

// benchValues are user values of the sizes the engine encodes on every
// enqueue, dispatch and step: a job payload struct, a workflow state map
// and a payload carrying a few KiB of bytes.
func benchValues() []struct {
	name string
	v    any
} {
	type email struct {
		To, From, Subject, Body string
		Tags                    []string
		Retries                 int
		SendAt                  time.Time
	}
	return []struct {
		name string
		v    any
	}{
		{"struct", email{
			To: "ann@example.com", From: "noreply@example.com", Subject: "Your import is ready",
			Body: strings.Repeat("lorem ipsum ", 16), Tags: []string{"import", "notify"}, Retries: 3,
			SendAt: time.Unix(1_700_000_000, 5),
		}},
		{"state", map[string]any{
			"source": "https://example.com/exports/2024-01-01.csv", "rows": 1234, "ok": true,
			"stats":  map[string]any{"inserted": 1200, "skipped": 34, "errors": []any{"row 7: bad date", "row 9: empty"}},
			"_token": "private", "owner": map[string]any{"id": "u_01J9Z4", "name": "Ann"},
		}},
		{"mapInt", struct {
			Name   string
			Counts map[string]int
		}{"daily", map[string]int{"opened": 120, "clicked": 34, "bounced": 2, "sent": 156, "queued": 0, "failed": 3}}},
		{"bytes4k", struct {
			Name string
			Blob []byte
		}{"report.pdf", bytes.Repeat([]byte{0x5a}, 4096)}},
	}
}

// BenchmarkEncodeValue measures the encoder of every user value on the
// enqueue, dispatch, signal and step paths:
//
//	go test ./journal/record -run '^$' -bench EncodeValue -benchmem -count 6
func BenchmarkEncodeValue(b *testing.B) {
	for _, tc := range benchValues() {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EncodeValue(tc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
