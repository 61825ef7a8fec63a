package api_test

import (
	"math"
	"testing"

	"github.com/quire-dev/quire/api"
)

// State.Int on values of each Go integer type as a step's own code puts
// them in a State (no journal round trip, which decodes to the smallest
// msgpack type): each signed type at its extremes, each unsigned one up to
// the int64 boundary, where math.MaxInt64 is accepted and one more is
// refused, as are non-integers, nil and a missing key (ok false, n 0).
func TestStateIntDirectTypesAndTheUint64Boundary(t *testing.T) {
	t.Parallel()
	st := api.State{
		"int":     int(math.MinInt64),
		"int8":    int8(math.MinInt8),
		"int16":   int16(math.MinInt16),
		"int32":   int32(math.MinInt32),
		"int64":   int64(math.MinInt64),
		"int+":    int(math.MaxInt64),
		"int8+":   int8(math.MaxInt8),
		"int16+":  int16(math.MaxInt16),
		"int32+":  int32(math.MaxInt32),
		"int64+":  int64(math.MaxInt64),
		"uint8":   uint8(math.MaxUint8),
		"uint16":  uint16(math.MaxUint16),
		"uint32":  uint32(math.MaxUint32),
		"uint":    uint(math.MaxInt64),
		"uint64":  uint64(math.MaxInt64),
		"uint64_": uint64(7),
		"uint0":   uint64(0),
		// Refused.
		"uint>":    uint(math.MaxInt64 + 1),
		"uint64>":  uint64(math.MaxInt64 + 1),
		"uint64>>": uint64(math.MaxUint64),
		"float64":  float64(3),
		"float32":  float32(3),
		"string":   "3",
		"bool":     true,
		"nil":      nil,
	}
	want := map[string]int64{
		"int": math.MinInt64, "int8": math.MinInt8, "int16": math.MinInt16, "int32": math.MinInt32, "int64": math.MinInt64,
		"int+": math.MaxInt64, "int8+": math.MaxInt8, "int16+": math.MaxInt16, "int32+": math.MaxInt32, "int64+": math.MaxInt64,
		"uint8": math.MaxUint8, "uint16": math.MaxUint16, "uint32": math.MaxUint32,
		"uint": math.MaxInt64, "uint64": math.MaxInt64, "uint64_": 7, "uint0": 0,
	}
	for k := range st {
		n, ok := st.Int(k)
		w, accept := want[k]
		switch {
		case accept && (!ok || n != w):
			t.Errorf("Int(%q) of %T %v = %d, %v; want %d, true", k, st[k], st[k], n, ok, w)
		case !accept && (ok || n != 0):
			t.Errorf("Int(%q) of %T %v = %d, %v; want 0, false", k, st[k], st[k], n, ok)
		}
	}
	if n, ok := st.Int("missing"); ok || n != 0 {
		t.Errorf("Int of a missing key = %d, %v; want 0, false", n, ok)
	}
	if n, ok := api.State(nil).Int("k"); ok || n != 0 {
		t.Errorf("Int on a nil State = %d, %v; want 0, false", n, ok)
	}
}
