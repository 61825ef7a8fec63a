package record

import (
	"encoding/binary"
	"flag"
	"reflect"
	"runtime"
	"runtime/metrics"
)

var update = flag.Bool("update", false, "rewrite testdata/envelope.golden and the committed fuzz seed corpus")

// allocBound is RL-6's allocation bound for one decode of n input bytes.
func allocBound(n int) uint64 { return 32*uint64(n) + 1<<20 }

// allocBytes returns the bytes allocated by the process while f runs, as
// the runtime.MemStats.TotalAlloc delta that T8 names.
func allocBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBytesFast is allocBytes for fuzz bodies: the same cumulative heap
// counter, read through runtime/metrics without stopping the world, which
// keeps an execution (and the fuzzer's minimization) fast.
func allocBytesFast(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

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
