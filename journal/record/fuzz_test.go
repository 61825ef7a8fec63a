package record

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/internal/allocs"
)

// fuzzRecordBytesMax is the record cap of FuzzDecodeRecord: above the
// default, so that the 5 MB nesting seed reaches msgpack's layer.
const fuzzRecordBytesMax = 8 << 20

// valueAllocBound is the allocation bound DecodeValue keeps when decoding
// into any or map[string]any: a one-entry Go map costs about 350 bytes for
// 3 input bytes, so such targets can exceed RL-6's 32 × len + 1 MiB (see
// TestT8_UserValueMemoryProportional). Records, which hold no maps, keep
// allocBound.
func valueAllocBound(n int) uint64 { return 128*uint64(n) + 1<<20 }

func be32(n uint32) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }

func fixstr(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

// field returns a one-entry map {name: value}.
func field(name string, value ...byte) []byte {
	return append(append([]byte{0x81}, fixstr(name)...), value...)
}

// hostileMsgpack are bare msgpack values that declare far more than they
// hold, nest too deep, or are malformed. None may get past the pre-scan.
func hostileMsgpack() map[string][]byte {
	ts96 := func(first byte) []byte {
		return append([]byte{0xc7, 12, 0xff, first, 0xff, 0xff, 0xff, 0xff}, make([]byte, 7)...)
	}
	return map[string][]byte{
		"array32_ffffffff":        {0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32_ffffffff":          {0xdf, 0xff, 0xff, 0xff, 0xff},
		"bin32_ffffffff":          {0xc6, 0xff, 0xff, 0xff, 0xff},
		"str32_ffffffff":          {0xdb, 0xff, 0xff, 0xff, 0xff},
		"ext32_ffffffff":          {0xc9, 0xff, 0xff, 0xff, 0xff, 0xff},
		"ext32_ffffffff_type1":    {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01},
		"array16_ffff":            {0xdc, 0xff, 0xff},
		"map16_ffff":              {0xde, 0xff, 0xff},
		"bin8_ff":                 {0xc4, 0xff},
		"array32_in_array":        {0x92, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff},
		"map32_in_map":            field("a", 0xdf, 0xff, 0xff, 0xff, 0xff),
		"nested_counts":           append(bytes.Repeat([]byte{0xdd, 0, 0, 0x10, 0}, 8), 0x01),
		"nested_0x91_64":          nest(64, 0x01),
		"nested_0x91_33":          nest(33, 0xc0),
		"reserved_c1":             {0x91, 0xc1},
		"trailing_bytes":          {0x80, 0x80},
		"truncated_map32_header":  {0xdf, 0x00},
		"truncated_str8":          {0xd9, 0x05, 'a'},
		"truncated_float64":       {0xcb, 0x01},
		"truncated_fixmap":        {0x81, 0xa1, 'a'},
		"timestamp_as_map32":      ts96(0xdf),
		"timestamp_nanos_too_big": ts96(0x3b),
	}
}

// hostileFields are record payloads whose hostile part sits in a field of
// the right name, so that it reaches the field's own decoder.
func hostileFields() map[string]struct {
	k       Kind
	payload []byte
} {
	array32 := []byte{0xdd, 0xff, 0xff, 0xff, 0xff}
	return map[string]struct {
		k       Kind
		payload []byte
	}{
		"job_payload_bin32":          {KindJobEnqueued, field("payload", 0xc6, 0xff, 0xff, 0xff, 0xff)},
		"job_retry_list_array32":     {KindJobEnqueued, field("retry", field("list_ns", array32...)...)},
		"workflow_state_str32":       {KindWorkflowStarted, field("state", 0xdb, 0xff, 0xff, 0xff, 0xff)},
		"waiting_signals_array32":    {KindWorkflowWaiting, field("signals", array32...)},
		"step_consumed_array32":      {KindStepCompleted, field("consumed", array32...)},
		"report_components_array32":  {KindShutdownReport, field("action_components", array32...)},
		"report_dependencies_map32":  {KindShutdownReport, field("dependencies", 0xdf, 0xff, 0xff, 0xff, 0xff)},
		"report_phases_array16":      {KindShutdownReport, field("action_phases", 0xdc, 0xff, 0xff)},
		"succeeded_output_timestamp": {KindAttemptSucceeded, field("output", 0xd6, 0xff, 0, 0, 0, 1)},
	}
}

// validRecords are records of several kinds, with every slice field set.
func validRecords() []Record {
	recs := goldenRecords()
	recs = append(recs,
		Record{Stream: "job_01J9Z5", Body: &JobEnqueued{
			JobID: "job_01J9Z5", Handler: "send", Queue: "default", Priority: 3, AvailableAt: 10,
			Retry:   RetryPolicy{MaxAttempts: 5, Backoff: BackoffList, BaseNanos: 1, MaxNanos: 9, JitterRatio: 0.25, ListNanos: []int64{1, 2, 3}},
			Payload: []byte{0x80}, WorkflowID: "wf_01J9Z3", Step: 1, Branch: 2,
		}},
		Record{Stream: "wf_01J9Z3", Body: &StepCompleted{WorkflowID: "wf_01J9Z3", Step: 2, Next: 3, Output: []byte{0x80}, Consumed: []uint64{7, 9}}},
		Record{Stream: "wf_01J9Z3", Body: &WorkflowWaiting{WorkflowID: "wf_01J9Z3", Step: 4, Status: "waiting_for_signal", Signals: []string{"go", "stop"}, Mode: "any", Quorum: 1}},
		Record{Stream: EngineStream, Body: &ShutdownReport{
			Completion: "graceful", Trigger: "signal", Dependencies: []uint8{1, 3, 15},
			ActionPhases: []int8{1, 2}, ActionComponents: []string{"intake", "runtime"},
			ActionGraceful: []string{"ok", "ok"}, ActionForced: []string{"", ""}, Drained: 4,
		}},
	)
	for i := range recs {
		recs[i].Seq, recs[i].At = 1, int64(i)
	}
	return recs
}

// t8Seeds returns the committed seed corpora of FuzzDecodeRecord and
// FuzzPrescan, by file name.
func t8Seeds() (decodeRecord, prescan map[string][]byte) {
	decodeRecord = map[string][]byte{}
	prescan = map[string][]byte{}
	for name, b := range hostileMsgpack() {
		prescan[name] = b
		decodeRecord["bare_"+name] = b
		decodeRecord["envelope_"+name] = rawEnvelope(1, 0, 0, "job_x", KindJobEnqueued, b)
	}
	for name, h := range hostileFields() {
		prescan["field_"+name] = h.payload
		decodeRecord["envelope_"+name] = rawEnvelope(1, 0, 0, "job_x", h.k, h.payload)
	}
	for _, r := range validRecords() {
		p, err := Prepare(r, RecordBytesMaxDefault)
		if err != nil {
			panic(err)
		}
		val, _ := AppendEnvelope(nil, 1, 0, r.At, p)
		name := "valid_" + r.Kind().String()
		decodeRecord[name] = val
		prescan[name] = p.Payload
		for _, n := range []int{1, headerBytes, EnvelopeBytesMin, len(val) - 1} {
			decodeRecord[fmt.Sprintf("truncated_%s_%d", r.Kind(), n)] = val[:n]
		}
	}
	user, err := EncodeValue(map[string]any{"at": time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC), "n": []any{1, -1, 1.5, "x", nil, true}})
	if err != nil {
		panic(err)
	}
	prescan["valid_user_value"] = user
	prescan["valid_timestamp_32"] = field("at", 0xd6, 0xff, 0x83, 0xaa, 0x7e, 0x80)
	prescan["valid_nested_0x91_32"] = nest(32, 0x01)
	prescan["empty"] = nil
	return decodeRecord, prescan
}

// TestT8_SeedCorpus keeps testdata/fuzz in step with t8Seeds: -update
// rewrites the generated files. Other files there (failures found by
// fuzzing) are left alone and run too.
func TestT8_SeedCorpus(t *testing.T) { // RL-6
	decodeRecord, prescan := t8Seeds()
	for target, seeds := range map[string]map[string][]byte{"FuzzDecodeRecord": decodeRecord, "FuzzPrescan": prescan} {
		dir := filepath.Join("testdata", "fuzz", target)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, b := range seeds {
			path := filepath.Join(dir, name)
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if *update {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s is missing or stale (%v): run go test ./journal/record -update", path, err)
			}
		}
	}
}

// fuzzing reports whether this run is a -fuzz run, where a 5 MB seed would
// only slow the mutator down.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// FuzzDecodeRecord feeds a value stored under the log key of seq 1 through
// ParseEnvelope and Decode: no panic, no fatal error, allocation within
// RL-6's bound, and an accepted record re-encodes to an envelope that
// decodes to the same value. Each input is tried as is and with its crc
// fixed, so that mutations reach msgpack. T8.
func FuzzDecodeRecord(f *testing.F) {
	if !fuzzing() {
		f.Add(rawEnvelope(1, 0, 0, "job_x", KindShutdownReport, bytes.Repeat([]byte{0x91}, 5<<20)))
	}
	f.Fuzz(func(t *testing.T, val []byte) {
		checkEnvelope(t, val)
		if len(val) >= 4 {
			checkEnvelope(t, reseal(1, val))
		}
	})
}

func checkEnvelope(t *testing.T, val []byte) {
	env, err := ParseEnvelope(1, val, fuzzRecordBytesMax)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerVersion) {
			t.Fatalf("ParseEnvelope: %v, want ErrCorrupt or ErrNewerVersion", err)
		}
		return
	}
	var rec Record
	if n := allocs.BytesFast(func() { rec, err = env.Decode() }); n > allocs.Bound(len(val)) {
		t.Fatalf("Decode of %d bytes allocated %d, bound %d", len(val), n, allocs.Bound(len(val)))
	}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode: %v, want ErrCorrupt", err)
		}
		return
	}
	p, err := Prepare(rec, fuzzRecordBytesMax)
	if errors.Is(err, ErrTooLarge) {
		return // a compact input can re-encode larger
	}
	if err != nil {
		t.Fatalf("accepted record does not re-encode: %v", err)
	}
	val2, _ := AppendEnvelope(nil, 1, env.PrevSum, env.At, p)
	env2, err := ParseEnvelope(1, val2, fuzzRecordBytesMax)
	if err != nil {
		t.Fatalf("re-encoded envelope: %v", err)
	}
	rec2, err := env2.Decode()
	if err != nil {
		t.Fatalf("re-encoded envelope: %v", err)
	}
	// Encodings compare values exactly, NaN included.
	again, err := EncodeBody(rec2.Body)
	if err != nil || rec2.Seq != rec.Seq || rec2.At != rec.At || rec2.Stream != rec.Stream || rec2.Kind() != rec.Kind() || !bytes.Equal(again, p.Payload) {
		t.Fatalf("re-encoded record decodes differently:\n%+v %x\n%+v %x", rec, p.Payload, rec2, again)
	}
}

// FuzzPrescan checks the pre-scan against msgpack itself: whatever it
// accepts, msgpack skips exactly and decodes without a panic and within the
// allocation bounds; what it accepts for records it accepts for user
// values. T8.
func FuzzPrescan(f *testing.F) {
	if !fuzzing() {
		f.Add(bytes.Repeat([]byte{0x91}, 5<<20))
	}
	kinds := []Kind{KindJobEnqueued, KindWorkflowStarted, KindWorkflowWaiting, KindAttemptSucceeded, KindShutdownReport}
	f.Fuzz(func(t *testing.T, b []byte) {
		errRecord := Prescan(b, false)
		errValue := Prescan(b, true)
		for _, err := range []error{errRecord, errValue} {
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Prescan: %v, want ErrCorrupt", err)
			}
		}
		if errRecord == nil && errValue != nil {
			t.Fatalf("accepted for a record, refused for a value: %v", errValue)
		}
		if errValue != nil {
			return
		}
		dec := msgpack.NewDecoder(bytes.NewReader(b))
		if err := dec.Skip(); err != nil || dec.Buffered().(*bytes.Reader).Len() != 0 {
			t.Fatalf("Prescan accepted what msgpack does not skip exactly: %v", err)
		}
		for _, target := range []func() any{func() any { return new(any) }, func() any { return new(map[string]any) }} {
			v := target()
			var err error
			if n := allocs.BytesFast(func() { err = DecodeValue(b, v) }); n > valueAllocBound(len(b)) {
				t.Fatalf("DecodeValue(%T) of %d bytes allocated %d, bound %d", v, len(b), n, valueAllocBound(len(b)))
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeValue(%T): %v, want ErrCorrupt", v, err)
			}
		}
		if errRecord != nil {
			return
		}
		for _, k := range kinds {
			var err error
			if n := allocs.BytesFast(func() { _, err = DecodeBody(k, b) }); n > allocs.Bound(len(b)) {
				t.Fatalf("DecodeBody(%s) of %d bytes allocated %d, bound %d", k, len(b), n, allocs.Bound(len(b)))
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeBody(%s): %v, want ErrCorrupt", k, err)
			}
		}
	})
}

// TestT8_HostileMsgpackMemoryBound: every hostile seed, and 5 MB of 0x91,
// is refused as corrupt by DecodeBody of every kind and by DecodeValue,
// within RL-6's allocation bound. Not parallel: TotalAlloc counts the
// whole process.
func TestT8_HostileMsgpackMemoryBound(t *testing.T) { // RL-6
	seeds := hostileMsgpack()
	seeds["nested_0x91_5MB"] = bytes.Repeat([]byte{0x91}, 5<<20)
	for name, h := range hostileFields() {
		seeds["field_"+name] = h.payload
	}
	names := make([]string, 0, len(seeds))
	for name := range seeds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b := seeds[name]
		bound := allocs.Bound(len(b))
		for _, k := range Kinds() {
			var err error
			if n := allocs.Bytes(func() { _, err = DecodeBody(k, b) }); n > bound {
				t.Errorf("%s: DecodeBody(%s) allocated %d bytes, bound %d", name, k, n, bound)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: DecodeBody(%s) = %v, want ErrCorrupt", name, k, err)
			}
		}
		if name == "field_succeeded_output_timestamp" {
			continue // a valid user value; only records refuse timestamps
		}
		for _, v := range []any{new(any), new(map[string]any), new([]any), new(map[string]time.Time)} {
			var err error
			if n := allocs.Bytes(func() { err = DecodeValue(b, v) }); n > bound {
				t.Errorf("%s: DecodeValue(%T) allocated %d bytes, bound %d", name, v, n, bound)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: DecodeValue(%T) = %v, want ErrCorrupt", name, v, err)
			}
		}
	}
}

// TestT8_UserValueMemoryProportional measures DecodeValue into any on
// dense, valid inputs: allocation stays proportional to the input, within
// valueAllocBound. It documents where generic targets exceed RL-6's 32 ×
// (maps and empty containers) so that a change of that factor is seen.
// Not parallel, for the same reason.
func TestT8_UserValueMemoryProportional(t *testing.T) { // RL-6
	const n = 1 << 14
	shapes := []struct {
		name string
		el   []byte
	}{
		{"fixint", []byte{0x01}},
		{"empty array", []byte{0x90}},
		{"empty map", []byte{0x80}},
		{"one-entry map", []byte{0x81, 0xa0, 0x01}},
		{"one-element array", []byte{0x91, 0x01}},
		{"timestamp", []byte{0xd6, 0xff, 0, 0, 0, 1}},
		{"short string", []byte{0xa2, 'x', 'y'}},
	}
	for _, s := range shapes {
		b := append([]byte{0xdd}, be32(n)...)
		b = append(b, bytes.Repeat(s.el, n)...)
		for _, v := range []any{new(any), new([]any)} {
			var err error
			got := allocs.Bytes(func() { err = DecodeValue(b, v) })
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if got > valueAllocBound(len(b)) {
				t.Errorf("%s into %T: %d bytes for %d input bytes (%.0f×), bound %d", s.name, v, got, len(b), float64(got)/float64(len(b)), valueAllocBound(len(b)))
			}
			t.Logf("%s into %T: %.0f× the input", s.name, v, float64(got)/float64(len(b)))
		}
	}
}
