package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// mergedByDecoding is what MergeMaps must write: base and over decoded
// into map[string]any, over's entries written over base's, encoded
// again.
func mergedByDecoding(t *testing.T, base, over []byte) []byte {
	t.Helper()
	m := map[string]any{}
	for _, b := range [][]byte{base, over} {
		if len(b) == 0 {
			continue
		}
		d := map[string]any{}
		if err := DecodeValue(b, &d); err != nil {
			t.Fatalf("the reference does not decode %x...: %v", b[:min(len(b), 16)], err)
		}
		for key, v := range d {
			m[key] = v
		}
	}
	out, err := EncodeValue(m)
	if err != nil {
		t.Fatalf("the reference does not encode: %v", err)
	}
	return out
}

// strOf and binOf write s as a msgpack str or bin with the shortest
// header for its length.
func strOf(s string) []byte {
	n := len(s)
	var b []byte
	switch {
	case n <= 31:
		b = []byte{0xa0 | byte(n)}
	case n <= 0xff:
		b = []byte{0xd9, byte(n)}
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16([]byte{0xda}, uint16(n))
	default:
		b = binary.BigEndian.AppendUint32([]byte{0xdb}, uint32(n))
	}
	return append(b, s...)
}

func binOf(s string) []byte {
	n := len(s)
	var b []byte
	switch {
	case n <= 0xff:
		b = []byte{0xc4, byte(n)}
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16([]byte{0xc5}, uint16(n))
	default:
		b = binary.BigEndian.AppendUint32([]byte{0xc6}, uint32(n))
	}
	return append(b, s...)
}

// mapOf writes a msgpack map header for n entries (the shortest) followed
// by the entries' bytes.
func mapOf(n int, entries ...[]byte) []byte {
	var b []byte
	switch {
	case n <= 15:
		b = []byte{0x80 | byte(n)}
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16([]byte{0xde}, uint16(n))
	default:
		b = binary.BigEndian.AppendUint32([]byte{0xdf}, uint32(n))
	}
	return append(b, bytes.Join(entries, nil)...)
}

// keyLengths straddle every bound of a str header: fixstr, str 8, 16, 32.
var keyLengths = []int{0, 1, 31, 32, 255, 256, 65535, 65536}

// RL-6: MergeMaps reads a key of any str or bin width, at the top and
// nested, and writes each as a str with the header EncodeValue writes for
// its length: the bytes are those of decoding and encoding again.
func TestRL6_MergeMapsWritesKeysOfEveryWidth(t *testing.T) {
	t.Parallel()
	var strs, bins [][]byte
	for i, n := range keyLengths {
		strs = append(strs, strOf(string(bytes.Repeat([]byte{'s'}, n))), []byte{byte(i)})
		bins = append(bins, binOf(string(bytes.Repeat([]byte{'b'}, n))), []byte{byte(i)})
	}
	n := len(keyLengths)
	cases := []struct {
		name       string
		base, over []byte
	}{
		{"str keys over bin keys", mapOf(n, strs...), mapOf(n, bins...)},
		{"bin keys over str keys", mapOf(n, bins...), mapOf(n, strs...)},
		{"nested", mapOf(1, strOf("m"), mapOf(2*n, append(append([][]byte{}, bins...), strs...)...)), mapOf(1, strOf("n"), mapOf(n, bins...))},
	}
	for _, c := range cases {
		got, err := MergeMaps(c.base, nil, c.over, nil)
		if err != nil {
			t.Fatalf("%s: MergeMaps: %v", c.name, err)
		}
		if want := mergedByDecoding(t, c.base, c.over); !bytes.Equal(got, want) {
			t.Fatalf("%s: MergeMaps wrote %d bytes that differ from the %d of decoding and encoding again", c.name, len(got), len(want))
		}
	}
}

// RL-6: a merged map, at the top or nested, gets the header EncodeValue
// writes for its number of entries, across the bounds of fixmap, map 16
// and map 32. The keys are distinct and given in order, so the merge is
// the entries as given under the shortest header (mapOf), which is what
// EncodeValue writes: checked against it for the small maps, where
// decoding and encoding again is cheap.
func TestRL6_MergeMapsWritesMapHeadersOfEveryWidth(t *testing.T) {
	t.Parallel()
	entries := func(from, n int) [][]byte {
		e := make([][]byte, 0, 2*n)
		for i := range n {
			e = append(e, strOf(fmt.Sprintf("k%06d", from+i)), []byte{0x01})
		}
		return e
	}
	for _, n := range []int{15, 16, 0xffff, 0x10000} {
		all := entries(0, n)
		// The top-level map: n-1 entries in base, one more in over.
		base, over := mapOf(n-1, all[:2*(n-1)]...), mapOf(1, all[2*(n-1):]...)
		want := mapOf(n, all...)
		if n < 0xff {
			if ref := mergedByDecoding(t, base, over); !bytes.Equal(ref, want) {
				t.Fatalf("%d entries: the expected bytes are not EncodeValue's: the test is wrong", n)
			}
		}
		got, err := MergeMaps(base, nil, over, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d entries: MergeMaps wrote header %x (%v), want %x", n, got[:min(len(got), 5)], err, want[:5])
		}
		if n > 16 {
			continue // the nested maps' headers are written as the top's
		}
		// A nested map of n entries, its first given twice (the duplicate
		// is dropped: the header counts what is written).
		base = mapOf(1, strOf("m"), mapOf(n+1, append(all, all[:2]...)...))
		want = mapOf(1, strOf("m"), want)
		got, err = MergeMaps(base, nil, nil, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("nested %d entries: MergeMaps wrote %x... (%v), want %x...", n, got[:min(len(got), 8)], err, want[:8])
		}
	}
}

// big returns {key: bin 32 of total-8 zero bytes}, total bytes long, in
// buf, which it reuses: the ValueBytesMax cases share one allocation.
func big(buf *[]byte, key byte, total int) []byte {
	if cap(*buf) < total {
		*buf = make([]byte, total)
	}
	b := (*buf)[:total]
	copy(b, binary.BigEndian.AppendUint32([]byte{0x81, 0xa1, key, 0xc6}, uint32(total-8)))
	return b
}

// RL-6: MergeMaps gives each input DecodeValue's checks: an input over
// ValueBytesMax is refused as corrupt (as DecodeValue refuses it), one of
// exactly ValueBytesMax is read; a timestamp whose nanoseconds are out of
// range is refused as corrupt, in base or in over; valid timestamps of
// every width are read. And the merged map may be at most ValueBytesMax
// bytes, as EncodeValue writes no longer value: two inputs within the
// limit whose merge is one byte over it are refused with ErrTooLarge;
// exactly at it, the merge is written.
func TestRL6_MergeMapsRefusesWhatDecodingRefuses(t *testing.T) {
	t.Parallel()
	var buf, buf2 []byte
	over := big(&buf, 'a', ValueBytesMax+1)
	if err := DecodeValue(over, &map[string]any{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("DecodeValue of %d bytes: %v, want ErrCorrupt", len(over), err)
	}
	for _, c := range []struct {
		name       string
		base, over []byte
	}{{"base", over, nil}, {"over", nil, over}} {
		if _, err := MergeMaps(c.base, nil, c.over, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s of ValueBytesMax+1 bytes: MergeMaps = %v, want ErrCorrupt", c.name, err)
		}
	}
	if got, err := MergeMaps(big(&buf, 'a', ValueBytesMax), nil, nil, nil); err != nil || len(got) != ValueBytesMax {
		t.Fatalf("a map of ValueBytesMax bytes: MergeMaps wrote %d bytes, %v", len(got), err)
	}
	// {a: ...} and {b: ...} merge into one map (header 0x82) that is
	// each one's length minus its one-byte header, plus one.
	const half = ValueBytesMax / 2
	rest := ValueBytesMax + 1 - half
	got, err := MergeMaps(big(&buf, 'a', half), nil, big(&buf2, 'b', rest), nil)
	if err != nil || len(got) != ValueBytesMax {
		t.Fatalf("a merge of ValueBytesMax bytes: MergeMaps wrote %d bytes, %v", len(got), err)
	}
	if _, err := MergeMaps(big(&buf, 'a', half), nil, big(&buf2, 'b', rest+1), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a merge of ValueBytesMax+1 bytes: MergeMaps = %v, want ErrTooLarge", err)
	}

	ts := func(ext ...byte) []byte { return mapOf(1, strOf("t"), ext) }
	bad := map[string][]byte{
		"timestamp 64, nanoseconds 2^30-1": ts(0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0),
		"timestamp 96, nanoseconds 1e9":    ts(0xc7, 12, 0xff, 0x3b, 0x9a, 0xca, 0x00, 0, 0, 0, 0, 0, 0, 0, 1),
		"nested":                           mapOf(1, strOf("m"), mapOf(1, strOf("t"), []byte{0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})),
	}
	for name, b := range bad {
		if err := DecodeValue(b, &map[string]any{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: DecodeValue = %v, want ErrCorrupt: the case tests nothing", name, err)
		}
		if _, err := MergeMaps(b, nil, nil, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s in base: MergeMaps = %v, want ErrCorrupt", name, err)
		}
		if _, err := MergeMaps(mapOf(0), nil, b, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s in over: MergeMaps = %v, want ErrCorrupt", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"timestamp 32":                    ts(0xd6, 0xff, 0, 0, 0, 1),
		"timestamp 64, nanoseconds 1e9-1": ts(0xd7, 0xff, 0xee, 0x6b, 0x27, 0xfc, 0, 0, 0, 1),
		"timestamp 96, nanoseconds 1e9-1": ts(0xc7, 12, 0xff, 0x3b, 0x9a, 0xc9, 0xff, 0, 0, 0, 0, 0, 0, 0, 1),
	} {
		if _, err := MergeMaps(b, nil, nil, nil); err != nil {
			t.Errorf("%s: MergeMaps = %v, want it read", name, err)
		}
	}
}

// OutcomeOf gives the Outcome of each settlement body, the body's own
// (not a copy), and nil for every other body.
func TestOutcomeOfSettlements(t *testing.T) {
	t.Parallel()
	succeeded := &AttemptSucceeded{Outcome: Outcome{JobID: "job_1"}}
	retried := &AttemptRetryScheduled{Outcome: Outcome{JobID: "job_2"}}
	buried := &AttemptBuried{Outcome: Outcome{JobID: "job_3"}}
	released := &AttemptReleased{Outcome: Outcome{JobID: "job_4"}}
	for _, c := range []struct {
		body Body
		want *Outcome
	}{
		{succeeded, &succeeded.Outcome},
		{retried, &retried.Outcome},
		{buried, &buried.Outcome},
		{released, &released.Outcome},
	} {
		if got := OutcomeOf(c.body); got != c.want {
			t.Errorf("OutcomeOf(%T) = %p (%+v), want the body's own %p", c.body, got, got, c.want)
		}
	}
	for _, b := range []Body{
		&AttemptStarted{JobID: "job_1"}, &JobEnqueued{JobID: "job_1"}, &JobBuried{JobID: "job_1"},
		&JobRequeued{JobID: "job_1"}, &WorkflowStarted{WorkflowID: "wf_1"}, nil,
	} {
		if got := OutcomeOf(b); got != nil {
			t.Errorf("OutcomeOf(%T) = %+v, want nil", b, got)
		}
	}
}
