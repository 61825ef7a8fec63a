package mpwrite

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// The expected bytes are written out from the msgpack specification;
// journal/record's tests check the same functions against msgpack v5's
// Encoder itself.

func TestAppendLengthHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"map 0", AppendMapLen(nil, 0), []byte{0x80}},
		{"map 15", AppendMapLen(nil, 15), []byte{0x8f}},
		{"map 16", AppendMapLen(nil, 16), []byte{0xde, 0x00, 0x10}},
		{"map 65535", AppendMapLen(nil, 65535), []byte{0xde, 0xff, 0xff}},
		{"map 65536", AppendMapLen(nil, 65536), []byte{0xdf, 0x00, 0x01, 0x00, 0x00}},
		{"array 0", AppendArrayLen(nil, 0), []byte{0x90}},
		{"array 15", AppendArrayLen(nil, 15), []byte{0x9f}},
		{"array 16", AppendArrayLen(nil, 16), []byte{0xdc, 0x00, 0x10}},
		{"array 65535", AppendArrayLen(nil, 65535), []byte{0xdc, 0xff, 0xff}},
		{"array 65536", AppendArrayLen(nil, 65536), []byte{0xdd, 0x00, 0x01, 0x00, 0x00}},
		{"appends", AppendMapLen([]byte{0x01}, 1), []byte{0x01, 0x81}},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s: got % x, want % x", tc.name, tc.got, tc.want)
		}
	}
}

func TestAppendStringAndBin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n         int
		strHeader []byte
		binHeader []byte
	}{
		{0, []byte{0xa0}, []byte{0xc4, 0x00}},
		{1, []byte{0xa1}, []byte{0xc4, 0x01}},
		{31, []byte{0xbf}, []byte{0xc4, 0x1f}},
		{32, []byte{0xd9, 0x20}, []byte{0xc4, 0x20}},
		{255, []byte{0xd9, 0xff}, []byte{0xc4, 0xff}},
		{256, []byte{0xda, 0x01, 0x00}, []byte{0xc5, 0x01, 0x00}},
		{65535, []byte{0xda, 0xff, 0xff}, []byte{0xc5, 0xff, 0xff}},
		{65536, []byte{0xdb, 0x00, 0x01, 0x00, 0x00}, []byte{0xc6, 0x00, 0x01, 0x00, 0x00}},
	}
	for _, tc := range tests {
		s := strings.Repeat("x", tc.n)
		if got, want := AppendString(nil, s), append(tc.strHeader, s...); !bytes.Equal(got, want) {
			t.Errorf("string of %d bytes: header % x, want % x", tc.n, got[:len(tc.strHeader)], tc.strHeader)
		}
		if got, want := StringLen(s), len(tc.strHeader)+tc.n; got != want {
			t.Errorf("StringLen of %d bytes: %d, want %d", tc.n, got, want)
		}
		if got, want := AppendBin(nil, []byte(s)), append(tc.binHeader, s...); !bytes.Equal(got, want) {
			t.Errorf("bin of %d bytes: header % x, want % x", tc.n, got[:len(tc.binHeader)], tc.binHeader)
		}
	}
	if got := AppendBin(nil, nil); !bytes.Equal(got, []byte{0xc0}) {
		t.Errorf("nil bin: % x, want c0", got)
	}
}

func TestAppendScalars(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"nil", AppendNil(nil), []byte{0xc0}},
		{"false", AppendBool(nil, false), []byte{0xc2}},
		{"true", AppendBool(nil, true), []byte{0xc3}},
		{"uint8 0", AppendUint8(nil, 0), []byte{0xcc, 0x00}},
		{"uint8 max", AppendUint8(nil, math.MaxUint8), []byte{0xcc, 0xff}},
		{"int32 0", AppendInt32(nil, 0), []byte{0xd2, 0, 0, 0, 0}},
		{"int32 -1", AppendInt32(nil, -1), []byte{0xd2, 0xff, 0xff, 0xff, 0xff}},
		{"int32 min", AppendInt32(nil, math.MinInt32), []byte{0xd2, 0x80, 0, 0, 0}},
		{"int32 big-endian", AppendInt32(nil, 0x01020304), []byte{0xd2, 1, 2, 3, 4}},
		{"int64 1", AppendInt64(nil, 1), []byte{0xd3, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"int64 min", AppendInt64(nil, math.MinInt64), []byte{0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"uint64 max", AppendUint64(nil, math.MaxUint64), []byte{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"uint64 big-endian", AppendUint64(nil, 0x0102030405060708), []byte{0xcf, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"float64 1.5", AppendFloat64(nil, 1.5), []byte{0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}},
		{"float64 -0", AppendFloat64(nil, math.Copysign(0, -1)), []byte{0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s: got % x, want % x", tc.name, tc.got, tc.want)
		}
		if len(tc.got) > HeaderBytesMax {
			t.Errorf("%s: %d bytes, more than HeaderBytesMax", tc.name, len(tc.got))
		}
	}
}

func TestAppendDoesNotAllocateWithRoom(t *testing.T) {
	b := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		out := AppendMapLen(b[:0], 3)
		out = AppendInt64(AppendString(out, "at"), -1)
		out = AppendBin(AppendString(out, "p"), []byte{1, 2})
		_ = AppendFloat64(AppendString(out, "f"), 0.5)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations, want 0", allocs)
	}
}
