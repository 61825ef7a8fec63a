package record

import (
	"encoding/binary"
	"flag"
	"reflect"
)

var update = flag.Bool("update", false, "rewrite testdata/envelope.golden and the committed fuzz seed corpus")

// rawEnvelope builds an envelope around payload bytes that need not be a
// valid body, with a correct crc, so that hostile bytes reach msgpack.
func rawEnvelope(seq uint64, prevSum uint32, at int64, stream string, k Kind, payload []byte) []byte {
	val, _ := AppendEnvelope(nil, seq, prevSum, at, Prepared{Kind: k, Stream: stream, Payload: payload})
	return val
}

// reseal recomputes the crc of val as if it were written under seq.
func reseal(seq uint64, val []byte) []byte {
	out := append([]byte(nil), val...)
	body := out[:len(out)-4]
	crc := Checksum(append(LogKey(seq), body...))
	binary.BigEndian.PutUint32(out[len(out)-4:], crc)
	return out
}

func mustPrepare(t interface{ Fatalf(string, ...any) }, r Record) Prepared {
	p, err := Prepare(r, RecordBytesMaxDefault)
	if err != nil {
		t.Fatalf("Prepare(%s): %v", r.Kind(), err)
	}
	return p
}

// normalize replaces empty slices with nil throughout a body, since msgpack
// does not distinguish them once omitempty drops a field.
func normalize(b Body) Body {
	normalizeValue(reflect.ValueOf(b).Elem())
	return b
}

func normalizeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			normalizeValue(v.Field(i))
		}
	case reflect.Slice:
		if v.Len() == 0 && !v.IsNil() {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}
