package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/quire-dev/quire/internal/allocs"
)

// FuzzMergeMaps: on any bytes MergeMaps neither panics nor allocates past
// RL-6's bound, and what it returns decodes to what decoding both inputs
// into map[string]any and merging them gives (the last of duplicate keys
// wins, over's entries replace base's), whenever those decode.
func FuzzMergeMaps(f *testing.F) {
	for _, s := range [][2][]byte{
		{{0x81, 0xa1, 'a', 0x01}, {0x81, 0xa1, 'b', 0x02}},
		{{0xc0}, {0x81, 0xa1, 'a', 0x01}},
		{{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02}, {0x81, 0xa1, 'a', 0xc0}},
		{{0x81, 0xa1, 'm', 0x82, 0xc4, 0x01, 'x', 0x01, 0xc0, 0x02}, {0x80}},
		{{0x81, 0xa1, 'm', 0x81, 0x01, 0x01}, nil},
		{{0x81, 0xa1, 't', 0xd6, 0xff, 0, 0, 0, 1}, {0x91, 0x01}},
		{{0xde, 0x00, 0x01, 0xa1, 'a', 0x92, 0x80, 0x90}, {0x81, 0xa1, '_', 0x01}},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, base, over []byte) {
		var got []byte
		var err error
		public := func(k []byte) bool { return len(k) == 0 || k[0] != '_' }
		if n := allocs.BytesFast(func() { got, err = MergeMaps(base, nil, over, public) }); n > allocs.Bound(len(base)+len(over)) {
			t.Fatalf("MergeMaps of %d+%d bytes allocated %d", len(base), len(over), n)
		}
		want := map[string]any{}
		for k, b := range [][]byte{base, over} {
			if len(b) == 0 {
				continue
			}
			m := map[string]any{}
			if DecodeValue(b, &m) != nil {
				return // decoding refuses it: nothing to compare with
			}
			for key, v := range m {
				if k == 0 || public([]byte(key)) {
					want[key] = v
				}
			}
		}
		if errors.Is(err, ErrTooLarge) {
			return // the merged map is over ValueBytesMax, as encoding it would be
		}
		if err != nil {
			t.Fatalf("MergeMaps refused what decodes: %v", err)
		}
		back := map[string]any{}
		if err := DecodeValue(got, &back); err != nil {
			t.Fatalf("MergeMaps wrote %x, which does not decode: %v", got, err)
		}
		// Compared through their encodings: NaN is not equal to itself.
		eb, err1 := EncodeValue(back)
		ew, err2 := EncodeValue(want)
		if err1 != nil || err2 != nil || !bytes.Equal(eb, ew) {
			t.Fatalf("MergeMaps wrote %x = %v, want %v (%v, %v)", got, back, want, err1, err2)
		}
	})
}
