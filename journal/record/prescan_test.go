package record

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

func nest(depth int, leaf ...byte) []byte {
	return append(bytes.Repeat([]byte{0x91}, depth), leaf...)
}

// TestPrescan covers each refusal with the offset it names, and the
// boundaries that must pass.
func TestPrescan(t *testing.T) {
	t.Parallel()
	ts4 := []byte{0xd6, 0xff, 0, 0, 0, 1}
	tests := []struct {
		name   string
		in     []byte
		ext    bool   // allowTimestampExt
		reason string // "" when accepted
		off    int
	}{
		{"fixint", []byte{0x01}, false, "", 0},
		{"nil", []byte{0xc0}, false, "", 0},
		{"empty map", []byte{0x80}, false, "", 0},
		{"empty array32", []byte{0xdd, 0, 0, 0, 0}, false, "", 0},
		{"map of arrays", []byte{0x82, 0xa1, 'a', 0x92, 1, 2, 0xa1, 'b', 0x90}, false, "", 0},
		{"map inside a map", []byte{0x81, 0xa0, 0x91, 0x81, 0xa0, 0x01}, false, "", 0},
		{"every scalar", []byte{0xdc, 0, 16, 0xc2, 0xc3, 0xca, 0, 0, 0, 0, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0,
			0xcc, 1, 0xcd, 1, 2, 0xce, 1, 2, 3, 4, 0xcf, 1, 2, 3, 4, 5, 6, 7, 8, 0xd0, 1, 0xd1, 1, 2,
			0xd2, 1, 2, 3, 4, 0xd3, 1, 2, 3, 4, 5, 6, 7, 8, 0xe0, 0xd9, 1, 'x', 0xda, 0, 1, 'x', 0xc4, 1, 'x'}, false, "", 0},
		{"bin16 and str32", []byte{0x92, 0xc5, 0, 2, 'a', 'b', 0xdb, 0, 0, 0, 1, 'c'}, false, "", 0},
		{"depth 32", nest(32, 0xc0), false, "", 0},
		{"timestamp 32", ts4, true, "", 0},
		{"timestamp 64", []byte{0xd7, 0xff, 0, 0, 0, 0, 0, 0, 0, 1}, true, "", 0},
		{"timestamp 96", append([]byte{0xc7, 12, 0xff}, make([]byte, 12)...), true, "", 0},
		{"timestamp 32 as ext8", []byte{0xc7, 4, 0xff, 0, 0, 0, 1}, true, "", 0},

		{"empty", nil, false, "empty input", 0},
		{"reserved 0xc1", []byte{0x91, 0xc1}, false, "reserved byte 0xc1", 1},
		{"trailing byte", []byte{0x01, 0x02}, false, "bytes after the top-level value", 1},
		{"trailing after map", []byte{0x80, 0x80}, false, "bytes after the top-level value", 1},
		{"depth 33", nest(33, 0xc0), false, "nesting deeper than 32", 32},
		{"5 MB of 0x91", bytes.Repeat([]byte{0x91}, 5<<20), false, "nesting deeper than 32", 32},
		{"array32 0xffffffff", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, false, "count exceeds the remaining bytes", 0},
		{"map32 0xffffffff", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, false, "count exceeds the remaining bytes", 0},
		{"map16 2n over", []byte{0xde, 0, 2, 1, 2, 3}, false, "count exceeds the remaining bytes", 0},
		{"bin32 0xffffffff", []byte{0xc6, 0xff, 0xff, 0xff, 0xff}, false, "length exceeds the remaining bytes", 0},
		{"str32 0xffffffff", []byte{0xdb, 0xff, 0xff, 0xff, 0xff}, false, "length exceeds the remaining bytes", 0},
		{"ext32 0xffffffff", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 0xff}, true, "ext value not allowed", 0},
		{"fixstr past the end", []byte{0x92, 0xa5, 'a'}, false, "length exceeds the remaining bytes", 1},
		{"array count beyond siblings", []byte{0x92, 0x92, 1, 2}, false, "count exceeds the remaining bytes", 1},
		{"announced items need bytes", []byte{0x93, 0x9f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 1}, false, "count exceeds the remaining bytes", 1},
		{"fixarray count past the end", []byte{0x92, 0x01}, false, "count exceeds the remaining bytes", 0},
		{"truncated fixarray", []byte{0x92, 0xa1, 'x'}, false, "truncated: value expected", 3},
		{"truncated str8 length", []byte{0xd9}, false, "truncated length", 0},
		{"truncated uint64", []byte{0xcf, 0, 0}, false, "length exceeds the remaining bytes", 0},
		{"truncated array32 header", []byte{0xdd, 0, 0}, false, "truncated length", 0},
		{"truncated fixext", []byte{0xd6}, true, "truncated ext header", 0},
		{"truncated ext8", []byte{0xc7, 4}, true, "truncated ext header", 0},
		{"timestamp in a record", ts4, false, "ext value not allowed", 0},
		{"ext of another type", []byte{0xd6, 0x01, 0, 0, 0, 1}, true, "ext value not allowed", 0},
		{"timestamp of length 16", append([]byte{0xd8, 0xff}, make([]byte, 16)...), true, "ext value not allowed", 0},
		{"timestamp of length 5", []byte{0xc7, 5, 0xff, 0, 0, 0, 0, 0}, true, "ext value not allowed", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Prescan(tc.in, tc.ext)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			var pe *prescanError
			if !errors.As(err, &pe) || pe.reason != tc.reason || pe.off != tc.off {
				t.Fatalf("got %v, want %q at offset %d", err, tc.reason, tc.off)
			}
			if !strings.Contains(err.Error(), "offset") {
				t.Fatalf("message %q does not name the offset", err)
			}
		})
	}
}

// TestPrescanAllocs: Prescan allocates nothing on valid input, and only
// its error value on invalid input (spec/reliability.md §3.3).
func TestPrescanAllocs(t *testing.T) {
	payload := mustPrepare(t, goldenRecords()[1]).Payload
	user, err := EncodeValue(map[string]any{"a": []any{1, "x", time.Unix(1, 2)}, "b": map[string]any{"c": nil}})
	if err != nil {
		t.Fatal(err)
	}
	valid := []struct {
		b   []byte
		ext bool
	}{{payload, false}, {user, true}, {nest(32, 0x01), false}, {[]byte{0x01}, false}}
	for _, v := range valid {
		if n := testing.AllocsPerRun(100, func() {
			if err := Prescan(v.b, v.ext); err != nil {
				t.Fatalf("Prescan(%x): %v", v.b, err)
			}
		}); n != 0 {
			t.Errorf("Prescan(%x) allocates %v times", v.b, n)
		}
	}
	invalid := [][]byte{nil, {0xdd, 0xff, 0xff, 0xff, 0xff}, nest(40), {0xc1}, {0x01, 0x01}}
	for _, b := range invalid {
		if n := testing.AllocsPerRun(100, func() { _ = Prescan(b, false) }); n > 1 {
			t.Errorf("Prescan(%x) allocates %v times on failure, want at most 1 (its error)", b, n)
		}
	}
}

// genValue draws a user value nested at most depth levels.
func genValue(t *rapid.T, depth int, label string) any {
	kinds := 8
	if depth == 0 {
		kinds = 6
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, label) {
	case 0:
		return nil
	case 1:
		return rapid.Int64().Draw(t, label+"_int")
	case 2:
		return rapid.StringN(0, 8, 32).Draw(t, label+"_str")
	case 3:
		return rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, label+"_bin")
	case 4:
		return rapid.Float64().Draw(t, label+"_float")
	case 5:
		return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, label+"_sec"), rapid.Int64Range(0, 999_999_999).Draw(t, label+"_nsec"))
	case 6:
		n := rapid.IntRange(0, 3).Draw(t, label+"_len")
		a := make([]any, n)
		for i := range a {
			a[i] = genValue(t, depth-1, label)
		}
		return a
	default:
		n := rapid.IntRange(0, 3).Draw(t, label+"_len")
		m := make(map[string]any, n)
		for i := 0; i < n; i++ {
			m[rapid.StringN(0, 4, 16).Draw(t, label+"_key")] = genValue(t, depth-1, label)
		}
		return m
	}
}

// TestPrescanAcceptsWhatMsgpackWrites: whatever msgpack encodes within
// DepthMax passes the pre-scan, and msgpack skips exactly the bytes the
// pre-scan accepted.
func TestPrescanAcceptsWhatMsgpackWrites(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := genValue(t, rapid.IntRange(0, DepthMax-1).Draw(t, "depth"), "v")
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := Prescan(b, true); err != nil {
			t.Fatalf("Prescan(%x): %v", b, err)
		}
		dec := msgpack.NewDecoder(bytes.NewReader(b))
		if err := dec.Skip(); err != nil || dec.Buffered().(*bytes.Reader).Len() != 0 {
			t.Fatalf("msgpack does not skip exactly the value: %v", err)
		}
	})
}
