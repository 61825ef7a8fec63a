package mpwrite

import "math"

// msgpack format codes, from the msgpack specification.
const (
	codeNil      = 0xc0
	codeFalse    = 0xc2
	codeTrue     = 0xc3
	codeBin8     = 0xc4
	codeBin16    = 0xc5
	codeBin32    = 0xc6
	codeFloat64  = 0xcb
	codeUint8    = 0xcc
	codeUint64   = 0xcf
	codeInt32    = 0xd2
	codeInt64    = 0xd3
	codeStr8     = 0xd9
	codeStr16    = 0xda
	codeStr32    = 0xdb
	codeArray16  = 0xdc
	codeArray32  = 0xdd
	codeMap16    = 0xde
	codeMap32    = 0xdf
	codeFixMap   = 0x80
	codeFixArray = 0x90
	codeFixStr   = 0xa0
)

// HeaderBytesMax is the longest header any Append function writes before
// a value's contents: a code and a 32-bit length, or a code and a 64-bit
// number. A caller sizing a buffer can count HeaderBytesMax per value plus
// the length of its strings and byte slices.
const HeaderBytesMax = 9

// AppendNil appends nil.
func AppendNil(b []byte) []byte { return append(b, codeNil) }

// AppendMapLen appends the header of a map of n entries (fixmap below 16,
// then map16, then map32). The caller appends the n keys and values.
func AppendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, codeFixMap|byte(n))
	case n <= math.MaxUint16:
		return append(b, codeMap16, byte(n>>8), byte(n))
	}
	return append(b, codeMap32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// AppendArrayLen appends the header of an array of n elements (fixarray
// below 16, then array16, then array32). The caller appends the elements.
func AppendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, codeFixArray|byte(n))
	case n <= math.MaxUint16:
		return append(b, codeArray16, byte(n>>8), byte(n))
	}
	return append(b, codeArray32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// AppendString appends s as a msgpack string (fixstr below 32 bytes, then
// str8, str16, str32).
func AppendString(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, codeFixStr|byte(n))
	case n <= math.MaxUint8:
		b = append(b, codeStr8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, codeStr16, byte(n>>8), byte(n))
	default:
		b = append(b, codeStr32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// StringLen returns the number of bytes AppendString writes for s.
func StringLen(s string) int {
	n := len(s)
	switch {
	case n < 32:
		return 1 + n
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + n
}

// AppendBin appends p as msgpack bin (bin8, bin16, bin32), or nil if p is
// nil: an empty non-nil slice is an empty bin, not nil.
func AppendBin(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, codeNil)
	}
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b = append(b, codeBin8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, codeBin16, byte(n>>8), byte(n))
	default:
		b = append(b, codeBin32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, p...)
}

// AppendBool appends v.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, codeTrue)
	}
	return append(b, codeFalse)
}

// AppendUint8 appends n as uint8: two bytes whatever its value.
func AppendUint8(b []byte, n uint8) []byte { return append(b, codeUint8, n) }

// AppendInt32 appends n as int32: five bytes whatever its value.
func AppendInt32(b []byte, n int32) []byte {
	u := uint32(n)
	return append(b, codeInt32, byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// AppendInt64 appends n as int64: nine bytes whatever its value.
func AppendInt64(b []byte, n int64) []byte { return append8(b, codeInt64, uint64(n)) }

// AppendUint64 appends n as uint64: nine bytes whatever its value.
func AppendUint64(b []byte, n uint64) []byte { return append8(b, codeUint64, n) }

// AppendFloat64 appends f as float64 (nine bytes), its bits unchanged: a
// NaN keeps its payload and -0 its sign.
func AppendFloat64(b []byte, f float64) []byte {
	return append8(b, codeFloat64, math.Float64bits(f))
}

func append8(b []byte, code byte, n uint64) []byte {
	return append(b, code, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
		byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}
