package qctl

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// TestUserJSONOfEveryTimestampWidth: a time is shown as decoding shows it
// whichever of msgpack's three timestamp widths holds it: 32-bit seconds
// (fixext 4), 64-bit with 30 bits of nanoseconds over 34 of seconds
// (fixext 8), and 96-bit (ext 8 of 12 bytes). Quire's encoder writes the
// last; values written by other encoders use the others.
func TestUserJSONOfEveryTimestampWidth(t *testing.T) {
	ts64 := func(sec int64, nsec uint32) []byte {
		return binary.BigEndian.AppendUint64([]byte{0xd7, 0xff}, uint64(nsec)<<34|uint64(sec))
	}
	for _, b := range [][]byte{
		binary.BigEndian.AppendUint32([]byte{0xd6, 0xff}, 1767607200),
		ts64(1767607200, 500_000_000),
		ts64(1767607200, 999_999_999),
		ts64(1<<34-1, 1),
		ts64(0, 1),
	} {
		sameAsDecoded(t, b)
		if _, err := userJSON(b); err != nil {
			t.Errorf("userJSON(%x): %v", b, err)
		}
	}
	b, err := record.EncodeValue(map[string]any{"at": time.Unix(-1, 250)})
	if err != nil {
		t.Fatal(err)
	}
	sameAsDecoded(t, b)
}

// TestUserJSONRefusesOutOfRangeNanoseconds: a timestamp whose nanoseconds
// are 1e9 or more does not decode, and is shown as not msgpack, as
// decoding refuses it.
func TestUserJSONRefusesOutOfRangeNanoseconds(t *testing.T) {
	for _, nsec := range []uint32{1e9 - 1, 1e9, 1e9 + 1} {
		ts := []byte{0xc7, 12, 0xff}
		ts = binary.BigEndian.AppendUint32(ts, nsec)
		ts = binary.BigEndian.AppendUint64(ts, 1767607200)
		sameAsDecoded(t, ts)
		if _, err := userJSON(ts); (err != nil) != (nsec >= 1e9) {
			t.Errorf("nanoseconds %d: userJSON error %v", nsec, err)
		}
	}
}

// TestUserJSONLastDuplicateKeyWins: a map that repeats keys shows each key
// once with the value written last, as a decoded map marshals, however
// many entries it has.
func TestUserJSONLastDuplicateKeyWins(t *testing.T) {
	for _, n := range []int{3, 13, 40, 200} {
		b := []byte{0xde, byte(n >> 8), byte(n)}
		for i := range n {
			b = append(b, 0xa1, "abc"[i%3], 0xcd, byte(i>>8), byte(i)) // key, uint16 i
		}
		sameAsDecoded(t, b)
	}
}
