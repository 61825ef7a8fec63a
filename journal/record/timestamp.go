package record

import "encoding/binary"

// timestamp96Bytes is the length of a timestamp in its 96-bit form:
// ext8 header (0xc7, 12, type -1), nanoseconds u32, seconds i64.
const timestamp96Bytes = 3 + 12

// canonicalTimestamps returns b with every timestamp ext in its 96-bit form,
// or b itself when all of them already are. b must have passed
// [Prescan] with allowTimestampExt set.
//
// This closes a hole that the pre-scan cannot see. When msgpack v5.4.1
// decodes into a map type and meets an ext, DecodeMapLen skips the ext
// header and reads a map length from the ext's data, and from there on it
// decodes bytes the pre-scan parsed differently: a 15-byte value can make
// it size a map for 2³² entries. The data of a 32- or 64-bit timestamp can
// begin with any byte (seconds 2³¹ to 2³¹+2²⁸, years 2038 to 2046, start
// with a fixmap code), but a 96-bit one begins with its nanoseconds, below
// 10⁹, so with a positive fixint that no map length accepts. Timestamps
// whose nanoseconds are 10⁹ or more are invalid and refused.
func canonicalTimestamps(b []byte) ([]byte, error) {
	grow := 0
	rewrite := false
	err := eachTimestamp(b, func(start, hdr int, data []byte) error {
		if !validTimestamp(data) {
			return malformed(start, "timestamp nanoseconds out of range")
		}
		if hdr != 3 || len(data) != 12 || b[start] != 0xc7 {
			rewrite = true
			grow += timestamp96Bytes - (hdr + len(data))
		}
		return nil
	})
	if err != nil || !rewrite {
		return b, err
	}
	out := make([]byte, 0, len(b)+grow)
	last := 0
	_ = eachTimestamp(b, func(start, hdr int, data []byte) error {
		out = append(out, b[last:start]...)
		nsec, sec := decodeTimestamp(data)
		out = append(out, 0xc7, 12, timestampExtType)
		out = binary.BigEndian.AppendUint32(out, nsec)
		out = binary.BigEndian.AppendUint64(out, uint64(sec))
		last = start + hdr + len(data)
		return nil
	})
	return append(out, b[last:]...), nil
}

// eachTimestamp calls fn for each ext value of b, in order, with the offset
// of its header, the header's length and its data. b must be well formed
// (pre-scanned), so a flat walk over the headers suffices: a container's
// items follow its header.
func eachTimestamp(b []byte, fn func(start, hdr int, data []byte) error) error {
	for i := 0; i < len(b); {
		c := b[i]
		var hdr, l int
		ext := false
		switch {
		case c <= 0x9f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			// fixint, fixmap, fixarray, nil, bool: the header is the value
			hdr = 1
		case c <= 0xbf:
			hdr, l = 1, int(c&0x1f)
		case c == 0xc4 || c == 0xc5 || c == 0xc6 || c == 0xd9 || c == 0xda || c == 0xdb:
			w := lenWidth(c)
			n, _, ok := readLen(b, i+1, w)
			if !ok {
				return malformed(i, "truncated length")
			}
			hdr, l = 1+w, int(n)
		case c == 0xc7 || c == 0xc8 || c == 0xc9:
			w := lenWidth(c)
			n, _, ok := readLen(b, i+1, w)
			if !ok {
				return malformed(i, "truncated ext header")
			}
			hdr, l, ext = 2+w, int(n), true
		case c >= 0xd4 && c <= 0xd8:
			hdr, l, ext = 2, 1<<(c-0xd4), true
		case c == 0xca || c == 0xce || c == 0xd2:
			hdr, l = 1, 4
		case c == 0xcb || c == 0xcf || c == 0xd3:
			hdr, l = 1, 8
		case c == 0xcc || c == 0xd0:
			hdr, l = 1, 1
		case c == 0xcd || c == 0xd1:
			hdr, l = 1, 2
		case c == 0xdc || c == 0xde:
			hdr = 3
		case c == 0xdd || c == 0xdf:
			hdr = 5
		default:
			return malformed(i, "reserved byte 0xc1")
		}
		if hdr > len(b)-i || l > len(b)-i-hdr {
			return malformed(i, "length exceeds the remaining bytes")
		}
		if ext {
			if err := fn(i, hdr, b[i+hdr:i+hdr+l]); err != nil {
				return err
			}
		}
		i += hdr + l
	}
	return nil
}

// validTimestamp reports whether data is a timestamp ext body whose
// nanoseconds are below 10⁹.
func validTimestamp(data []byte) bool {
	switch len(data) {
	case 4:
		return true
	case 8:
		return binary.BigEndian.Uint64(data)>>34 < 1e9
	case 12:
		return binary.BigEndian.Uint32(data) < 1e9
	}
	return false
}

func decodeTimestamp(data []byte) (nsec uint32, sec int64) {
	switch len(data) {
	case 4:
		return 0, int64(binary.BigEndian.Uint32(data))
	case 8:
		v := binary.BigEndian.Uint64(data)
		return uint32(v >> 34), int64(v & (1<<34 - 1))
	default:
		return binary.BigEndian.Uint32(data), int64(binary.BigEndian.Uint64(data[4:]))
	}
}
