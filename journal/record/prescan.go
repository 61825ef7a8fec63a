package record

import "strconv"

// prescanError is a structural defect found by [Prescan]. Reasons are
// constant strings, so building one costs a single small allocation and
// only on the failure path.
type prescanError struct {
	off    int
	reason string
}

func (e *prescanError) Error() string {
	return ErrCorrupt.Error() + ": msgpack at offset " + strconv.Itoa(e.off) + ": " + e.reason
}

func (e *prescanError) Unwrap() error { return ErrCorrupt }

func malformed(off int, reason string) error { return &prescanError{off: off, reason: reason} }

// Timestamp extension (msgpack spec): type -1, data of 4, 8 or 12 bytes.
const timestampExtType = 0xff

// Prescan checks that b holds exactly one well-formed msgpack value whose
// declared lengths fit in b, before any msgpack decoder sees it
// (spec/reliability.md §3.3). The decoder of msgpack v5.4.1 pre-sizes
// slices to the declared length and recurses once per nesting level, so a
// few hostile bytes could otherwise allocate gigabytes or overflow the
// stack. Prescan rejects, with an error wrapping [ErrCorrupt] that names
// the offset:
//
//   - empty or truncated input, and bytes after the top-level value;
//   - a str, bin or ext length longer than the bytes that remain;
//   - an array count, or twice a map count, larger than the bytes that
//     remain once every item already announced by an enclosing container
//     is given its minimum of one byte;
//   - nesting deeper than [DepthMax];
//   - the never-used byte 0xc1;
//   - any ext value, except the timestamp ext (type -1, length 4, 8 or 12)
//     when allowTimestampExt is set. Journal records contain no ext; user
//     payloads may contain timestamps.
//
// Because every item accepted takes at least one input byte, a decode
// after a successful Prescan allocates in proportion to len(b). Prescan
// itself is one iterative pass with a fixed stack and does not allocate
// unless it returns an error.
func Prescan(b []byte, allowTimestampExt bool) error {
	// stack[d] counts the items the d-th open container still needs to
	// complete. pending counts the announced items not yet begun: each needs
	// at least one byte of what remains.
	var stack [DepthMax]uint64
	depth := 0
	var pending uint64
	n := len(b)
	if n == 0 {
		return malformed(0, "empty input")
	}
	i := 0
	for {
		if i >= n {
			return malformed(i, "truncated: value expected")
		}
		start := i
		c := b[i]
		i++
		if depth > 0 {
			pending--
		}
		var skip uint64  // payload bytes that follow the header
		var items uint64 // items announced by a container header
		container := false
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			items, container = 2*uint64(c&0x0f), true
		case c <= 0x9f: // fixarray
			items, container = uint64(c&0x0f), true
		case c <= 0xbf: // fixstr
			skip = uint64(c & 0x1f)
		default:
			switch c {
			case 0xc0, 0xc2, 0xc3: // nil, false, true
			case 0xc1:
				return malformed(start, "reserved byte 0xc1")
			case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb: // bin, str 8/16/32
				l, w, ok := readLen(b, i, lenWidth(c))
				if !ok {
					return malformed(start, "truncated length")
				}
				i += w
				skip = l
			case 0xc7, 0xc8, 0xc9: // ext 8/16/32
				l, w, ok := readLen(b, i, lenWidth(c))
				if !ok || i+w >= n {
					return malformed(start, "truncated ext header")
				}
				if !extAllowed(allowTimestampExt, b[i+w], l) {
					return malformed(start, "ext value not allowed")
				}
				i += w + 1
				skip = l
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16
				if i >= n {
					return malformed(start, "truncated ext header")
				}
				l := uint64(1) << (c - 0xd4)
				if !extAllowed(allowTimestampExt, b[i], l) {
					return malformed(start, "ext value not allowed")
				}
				i++
				skip = l
			case 0xca, 0xce, 0xd2: // float32, uint32, int32
				skip = 4
			case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
				skip = 8
			case 0xcc, 0xd0: // uint8, int8
				skip = 1
			case 0xcd, 0xd1: // uint16, int16
				skip = 2
			case 0xdc, 0xdd: // array 16/32
				l, w, ok := readLen(b, i, lenWidth(c))
				if !ok {
					return malformed(start, "truncated length")
				}
				i += w
				items, container = l, true
			case 0xde, 0xdf: // map 16/32
				l, w, ok := readLen(b, i, lenWidth(c))
				if !ok {
					return malformed(start, "truncated length")
				}
				i += w
				items, container = 2*l, true
			}
		}
		if skip > uint64(n-i) {
			return malformed(start, "length exceeds the remaining bytes")
		}
		i += int(skip)
		if container && items > 0 {
			if rest := uint64(n - i); pending > rest || items > rest-pending {
				return malformed(start, "count exceeds the remaining bytes")
			}
			if depth == DepthMax {
				return malformed(start, "nesting deeper than 32")
			}
			stack[depth] = items
			depth++
			pending += items
			continue
		}
		// A complete value: it fills one slot of each container it closes.
		for {
			if depth == 0 {
				if i != n {
					return malformed(i, "bytes after the top-level value")
				}
				return nil
			}
			stack[depth-1]--
			if stack[depth-1] > 0 {
				break
			}
			depth--
		}
	}
}

// lenWidth returns the width of the length field that follows header c.
func lenWidth(c byte) int {
	switch c {
	case 0xc4, 0xc7, 0xd9:
		return 1
	case 0xc5, 0xc8, 0xda, 0xdc, 0xde:
		return 2
	default:
		return 4
	}
}

// readLen reads a big-endian length of w bytes at b[i:].
func readLen(b []byte, i, w int) (l uint64, width int, ok bool) {
	if w > len(b)-i {
		return 0, 0, false
	}
	for _, x := range b[i : i+w] {
		l = l<<8 | uint64(x)
	}
	return l, w, true
}

func extAllowed(allowTimestampExt bool, typ byte, l uint64) bool {
	return allowTimestampExt && typ == timestampExtType && (l == 4 || l == 8 || l == 12)
}
