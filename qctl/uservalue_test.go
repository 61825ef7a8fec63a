package qctl

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

// decodedJSON is how user values were shown before userJSON: decode into
// any, marshal with encoding/json. It is the reference userJSON matches.
func decodedJSON(b []byte) ([]byte, error) {
	var v any
	if err := record.DecodeValue(b, &v); err != nil {
		return nil, errNotMsgpack
	}
	j, err := marshalJSON(v)
	if err != nil {
		return nil, errNotJSON
	}
	return j, nil
}

// sameAsDecoded fails t if userJSON(b) differs from decodedJSON(b): the
// same bytes, or the same kind of refusal.
func sameAsDecoded(t interface{ Fatalf(string, ...any) }, b []byte) {
	want, werr := decodedJSON(b)
	got, gerr := userJSON(b)
	switch {
	case werr != nil || gerr != nil:
		if !errors.Is(gerr, werr) || werr == nil {
			t.Fatalf("userJSON(%x) = %s, %v; decoding gives %s, %v", b, got, gerr, want, werr)
		}
	case !bytes.Equal(got, want):
		t.Fatalf("userJSON(%x)\n got %s\nwant %s", b, got, want)
	}
}

// jsonOrder has fields out of key order: msgpack writes them in
// declaration order, and the JSON of the decoded map sorts them.
type jsonOrder struct {
	Zeta  int     `msgpack:"zeta"`
	Alpha string  `msgpack:"alpha"`
	Ratio float32 `msgpack:"ratio"`
}

// userValueGen draws what applications enqueue and store: every scalar
// width, strings needing escapes, bytes, times, NaN, slices, maps (some
// written unsorted, some with byte-array keys), structs.
func userValueGen(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 13
		if depth >= 3 {
			kinds = 9
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return rapid.SampledFrom([]any{nil, true, false}).Draw(t, "const")
		case 1:
			return rapid.Int64().Draw(t, "int")
		case 2:
			return rapid.SampledFrom([]any{int8(-1), int16(-300), uint8(200), uint16(60000), uint32(70000), uint64(math.MaxUint64), int64(math.MinInt64), -33}).Draw(t, "width")
		case 3:
			return rapid.Float64().Draw(t, "float64")
		case 4:
			return rapid.SampledFrom([]any{float32(0.1), float32(1e-7), float32(3e21), 1e-7, 1e21, 123456789.0, math.NaN(), math.Inf(-1), math.Copysign(0, -1)}).Draw(t, "float")
		case 5:
			return rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"<a&b>", "tab\there", "\x00\x1f", "\u2028", "bad\xff", `"q"\`})).Draw(t, "string")
		case 6:
			return rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "bytes")
		case 7:
			return time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec"))
		case 8:
			return rapid.StringN(0, 3, 10).Draw(t, "short")
		case 9:
			return rapid.SliceOfN(userValueGen(depth+1), 0, 4).Draw(t, "slice")
		case 10:
			return rapid.MapOfN(rapid.StringN(0, 3, 10), userValueGen(depth+1), 0, 5).Draw(t, "map")
		case 11:
			m := map[[2]byte]int{}
			for _, k := range rapid.SliceOfN(rapid.StringN(2, 2, 2), 0, 4).Draw(t, "bin_keys") {
				m[[2]byte{k[0], k[1]}] = len(m)
			}
			return m
		default:
			return jsonOrder{Zeta: rapid.Int().Draw(t, "zeta"), Alpha: rapid.String().Draw(t, "alpha"), Ratio: rapid.Float32().Draw(t, "ratio")}
		}
	})
}

// TestUserJSONEqualsDecodedJSON: qctl shows every value an application
// can store exactly as it did when it decoded it.
func TestUserJSONEqualsDecodedJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, err := record.EncodeValue(userValueGen(0).Draw(t, "value"))
		if err != nil {
			t.Skip("not encodable") // rapid's skip: draws another value
		}
		sameAsDecoded(t, b)
	})
}

// FuzzUserJSON: on any bytes, userJSON writes what decoding and marshaling
// wrote, or refuses them the same way, within RL-6's bound.
func FuzzUserJSON(f *testing.F) {
	for _, s := range [][]byte{
		{0x82, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02},
		{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02},
		{0x81, 0xc4, 0x01, 'k', 0xc0},
		{0x81, 0x01, 0x01},
		{0xd6, 0xff, 0, 0, 0, 1},
		{0xc7, 0x08, 0xff, 0, 0, 0, 0, 0, 0, 0, 1},
		{0xc8, 0x00, 0x0c, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2},
		{0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1},
		{0xdc, 0x00, 0x02, 0xd0, 0x80, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0xa3, 'a', 0xff, '<'},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameAsDecoded(t, b)
	})
}

// TestRL6_UserJSONOfADenseValueAllocatesWithinTheBound: a value of many
// tiny maps, which decoding into any blows up over 100 times, is shown
// within RL-6's 32 × input + 1 MiB. Not parallel: TotalAlloc counts the
// whole process.
func TestRL6_UserJSONOfADenseValueAllocatesWithinTheBound(t *testing.T) {
	const n = 1 << 18
	b := append([]byte{0xdd, 0, 4, 0, 0}, strings.Repeat("\x81\xa0\xc0", n)...) // n maps {"": nil}
	var j []byte
	var err error
	got := allocs.Bytes(func() { j, err = userJSON(b) })
	if err != nil || !strings.HasPrefix(string(j), `[{"":null},{"":null}`) {
		t.Fatalf("userJSON: %.40s, %v", j, err)
	}
	if bound := allocs.Bound(len(b)); got > bound {
		t.Fatalf("userJSON of %d bytes allocated %d, bound %d", len(b), got, bound)
	}
}
