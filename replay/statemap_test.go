package replay

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/internal/allocs"
	"github.com/quire-dev/quire/journal/record"
)

// decodedMerge and decodedPublic are MergeState and PublicState as they
// were written before they worked on the bytes: decode into map[string]any,
// merge, encode. They are the reference the byte-level ones must match.
func decodedMerge(state, output []byte) ([]byte, error) {
	if len(output) == 0 {
		return state, nil
	}
	base, err := DecodeState(state)
	if err != nil {
		return nil, err
	}
	out, err := DecodeState(output)
	if err != nil {
		return nil, err
	}
	for k, v := range out {
		if IsPublicKey(k) {
			base[k] = v
		}
	}
	return EncodeState(base)
}

func decodedPublic(state []byte) ([]byte, error) {
	m, err := DecodeState(state)
	if err != nil {
		return nil, err
	}
	for k := range m {
		if !IsPublicKey(k) {
			delete(m, k)
		}
	}
	return EncodeState(m)
}

// unsorted has its fields out of key order: msgpack writes a struct in
// declaration order, decoding gives a map, and encoding that sorts it.
type unsorted struct {
	Zeta  int     `msgpack:"zeta"`
	Alpha string  `msgpack:"alpha"`
	Mid   []any   `msgpack:"mid"`
	Ratio float32 `msgpack:"ratio"`
}

// stateValue draws a value an application may put in a workflow's state:
// scalars of every msgpack width, strings, bytes, times, slices, maps with
// string keys, string-keyed maps msgpack writes unsorted, structs whose
// fields are out of order, and maps keyed by byte arrays (bin keys).
func stateValue(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 13
		if depth >= 3 {
			kinds = 8 // scalars only
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "bool")
		case 2:
			return rapid.Int64().Draw(t, "int")
		case 3:
			return rapid.SampledFrom([]any{int8(-1), int16(300), uint8(200), uint32(70000), uint64(math.MaxUint64), -40, 127, 128}).Draw(t, "width")
		case 4:
			return rapid.Float64().Draw(t, "float")
		case 5:
			return rapid.StringN(0, 40, 300).Draw(t, "string")
		case 6:
			return rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "bytes")
		case 7:
			return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")).UTC()
		case 8:
			return rapid.SliceOfN(stateValue(depth+1), 0, 4).Draw(t, "slice")
		case 9:
			return rapid.MapOfN(stateKey(), stateValue(depth+1), 0, 5).Draw(t, "map")
		case 10:
			return rapid.MapOfN(stateKey(), rapid.Int(), 0, 5).Draw(t, "map_int") // written unsorted, then sorted by EncodeValue
		case 11:
			m := map[[2]byte]int{}
			for _, k := range rapid.SliceOfN(rapid.StringN(2, 2, 2), 0, 4).Draw(t, "bin_keys") {
				m[[2]byte{k[0], k[1]}] = len(m)
			}
			return m
		default:
			return unsorted{
				Zeta: rapid.Int().Draw(t, "zeta"), Alpha: rapid.String().Draw(t, "alpha"),
				Mid: rapid.SliceOfN(stateValue(depth+1), 0, 2).Draw(t, "mid"), Ratio: rapid.Float32().Draw(t, "ratio"),
			}
		}
	})
}

func stateKey() *rapid.Generator[string] {
	return rapid.OneOf(rapid.SampledFrom([]string{"", "a", "b", "_secret", "_", "rows", "ab", "é"}), rapid.StringN(0, 3, 40))
}

func stateMap() *rapid.Generator[map[string]any] {
	return rapid.MapOfN(stateKey(), stateValue(0), 0, 8)
}

// TestWF3_WF12_MergeOnTheBytesEqualsDecodedMerge: MergeState and
// PublicState, which work on the bytes, write exactly what decoding,
// merging and encoding again wrote, on every state an application can
// build: replay's state bytes, snapshots included, are unchanged.
func TestWF3_WF12_MergeOnTheBytesEqualsDecodedMerge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		state, err := EncodeState(stateMap().Draw(t, "state"))
		if err != nil {
			t.Fatal(err)
		}
		output, err := EncodeState(stateMap().Draw(t, "output"))
		if err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(t, "empty_state") {
			state = nil
		}
		want, werr := decodedMerge(state, output)
		got, gerr := MergeState(state, output)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("MergeState(%x, %x)\n got %x, %v\nwant %x, %v", state, output, got, gerr, want, werr)
		}
		want, werr = decodedPublic(state)
		got, gerr = PublicState(state)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("PublicState(%x)\n got %x, %v\nwant %x, %v", state, got, gerr, want, werr)
		}
	})
}

// TestRL6_StateBytesMergedAsDecodingReadsThem: hostile states merge as
// decoding reads them, or are refused as corrupt: a duplicated key keeps
// its last value, bin and nil keys are strings; a nil state is the empty
// map (merging an output into one panicked: a nil map), and a key of
// another type, a non-map, or bytes that fail the pre-scan are refused.
func TestRL6_StateBytesMergedAsDecodingReadsThem(t *testing.T) {
	for _, c := range []struct {
		name          string
		state, output []byte
		want          []byte // nil: refused as corrupt
	}{
		{"nil state", []byte{0xc0}, []byte{0x81, 0xa1, 'a', 0x01}, []byte{0x81, 0xa1, 'a', 0x01}},
		{"duplicate keys", []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}, []byte{0x81, 0xa1, 'b', 0x03}, []byte{0x82, 0xa1, 'a', 0x02, 0xa1, 'b', 0x03}},
		{"nested duplicates", []byte{0x81, 0xa1, 'm', 0x82, 0xa1, 'x', 0x01, 0xa1, 'x', 0x02}, []byte{0x80}, []byte{0x81, 0xa1, 'm', 0x81, 0xa1, 'x', 0x02}},
		{"bin and nil keys", []byte{0x82, 0xc4, 0x01, 'b', 0x01, 0xc0, 0x02}, []byte{0x80}, []byte{0x82, 0xa0, 0x02, 0xa1, 'b', 0x01}},
		{"int key", []byte{0x81, 0x01, 0x01}, []byte{0x80}, nil},
		{"nested int key", []byte{0x81, 0xa1, 'm', 0x81, 0x01, 0x01}, []byte{0x80}, nil},
		{"array state", []byte{0x91, 0x01}, []byte{0x80}, nil},
		{"array output", []byte{0x80}, []byte{0x91, 0x01}, nil},
		{"truncated", []byte{0x82, 0xa1, 'a'}, []byte{0x80}, nil},
	} {
		got, err := MergeState(c.state, c.output)
		switch {
		case c.want == nil && !errors.Is(err, record.ErrCorrupt):
			t.Errorf("%s: MergeState = %x, %v; want ErrCorrupt", c.name, got, err)
		case c.want != nil && (err != nil || !bytes.Equal(got, c.want)):
			t.Errorf("%s: MergeState = %x, %v; want %x", c.name, got, err, c.want)
		}
	}
	// Through Apply: a forged workflow_started with a nil state, then a
	// step's output.
	b := setup(t)
	b.add("wf_1", &record.WorkflowStarted{WorkflowID: "wf_1", Name: "w", Steps: 2, State: []byte{0xc0}})
	b.add("wf_1", &record.StepCompleted{WorkflowID: "wf_1", Step: 0, Next: 1, Output: []byte{0x81, 0xa1, 'a', 0x01}})
	if got := b.s.Workflows["wf_1"].State; !bytes.Equal(got, []byte{0x81, 0xa1, 'a', 0x01}) {
		t.Fatalf("state after the step %x", got)
	}
}

// TestRL6_MergingADenseStateAllocatesWithinTheBound: a state of many tiny
// maps, which decoding into map[string]any blows up over 100 times, is
// merged and made public within RL-6's 32 × input + 1 MiB. Not parallel:
// TotalAlloc counts the whole process.
func TestRL6_MergingADenseStateAllocatesWithinTheBound(t *testing.T) {
	const n = 1 << 18
	rows := strings.Repeat("\x81\xa0\xc0", n) // n maps {"": nil}
	state := append([]byte{0x82, 0xa1, '_', 0xc0, 0xa4, 'r', 'o', 'w', 's', 0xdd, 0, 4, 0, 0}, rows...)
	output := append([]byte{0x81, 0xa4, 'm', 'o', 'r', 'e', 0xdd, 0, 4, 0, 0}, rows...)
	bound := allocs.Bound(len(state) + len(output))
	var err error
	if got := allocs.Bytes(func() { _, err = MergeState(state, output) }); err != nil || got > bound {
		t.Fatalf("MergeState allocated %d bytes (bound %d), err %v", got, bound, err)
	}
	if got := allocs.Bytes(func() { _, err = PublicState(state) }); err != nil || got > bound {
		t.Fatalf("PublicState allocated %d bytes (bound %d), err %v", got, bound, err)
	}
}

// BenchmarkMergeState merges a step's output of 4 keys into a state of 40
// (orders with their lines, about 6 KiB), on the bytes and, for the
// ratio, by decoding and encoding again.
func BenchmarkMergeState(b *testing.B) {
	st := map[string]any{}
	for i := range 40 {
		st[strings.Repeat("k", i%7+1)+string(rune('a'+i%26))+string(rune('a'+i/26))] = map[string]any{
			"id": i, "sku": "SKU-0000" + string(rune('0'+i%10)), "qty": i % 5, "price": 19.99,
			"tags": []any{"a", "b", i},
		}
	}
	state, err := EncodeState(st)
	if err != nil {
		b.Fatal(err)
	}
	output, err := EncodeState(map[string]any{"status": "shipped", "carrier": "ups", "weight": 2.5, "_trace": "x"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		merge func(state, output []byte) ([]byte, error)
	}{{"bytes", MergeState}, {"decoded", decodedMerge}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(state) + len(output)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.merge(state, output); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// WF-12: PublicStateHiding gives PublicState's bytes and says whether a
// top-level key was private; a repeated public key, which the public
// state also drops, is not one, nor is a "_" key inside a public value
// (only the state's own keys are private).
func TestWF12_PublicStateHidingSaysWhetherAPrivateKeyWasLeftOut(t *testing.T) {
	for _, c := range []struct {
		name   string
		state  []byte
		hidden bool
	}{
		{"private key", mustState(t, map[string]any{"a": 1, "_token": "s"}), true},
		{"only private", mustState(t, map[string]any{"_token": "s"}), true},
		{"public only", mustState(t, map[string]any{"a": 1, "b": "x"}), false},
		{"repeated public key", []byte{0x82, 0xa1, 'k', 0x01, 0xa1, 'k', 0x02}, false},
		{"nested underscore", mustState(t, map[string]any{"a": map[string]any{"_x": 1}}), false},
		{"empty", nil, false},
	} {
		pub, hidden, err := PublicStateHiding(c.state)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := PublicState(c.state)
		if err != nil {
			t.Fatalf("%s: PublicState: %v", c.name, err)
		}
		if hidden != c.hidden || !bytes.Equal(pub, want) {
			t.Errorf("%s: PublicStateHiding = %x, %v; want %x, %v", c.name, pub, hidden, want, c.hidden)
		}
	}
	if _, _, err := PublicStateHiding([]byte{0x91, 0x01}); err == nil {
		t.Error("PublicStateHiding of an array: no error")
	}
}

func mustState(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := EncodeState(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
