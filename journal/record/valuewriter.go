package record

import (
	"errors"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Errors a valueWriter fails a write with. EncodeValue reports them
// wrapped in ErrInvalid or ErrTooLarge with the value's type.
var (
	errValueTooDeep  = errors.New("value nests deeper than DepthMax")
	errValueTooLarge = errors.New("value exceeds ValueBytesMax")
)

// valueWriter is the writer of [EncodeValue]'s msgpack encoder. It follows
// the msgpack structure of the bytes as they arrive and fails the write
// that opens a container [DepthMax] non-empty containers deep, the depth
// [Prescan] refuses, or that takes the value past [ValueBytesMax].
//
// msgpack's encoder recurses once per level of the value and writes each
// container's header before its items, and it stops at the first write
// error. So a value that contains itself through a map, slice, array or
// struct (m["m"] = m, a struct pointer to itself) stops at depth
// DepthMax+1 with an error, instead of recursing until the goroutine's
// stack is exhausted, which is a fatal error no recover can catch; and a
// value that shares one subtree many times stops at ValueBytesMax instead
// of exhausting memory. A cycle made only of pointers and interfaces
// (var x any; x = &x) writes nothing per level, so no write can stop it:
// EncodeValue refuses such a value before msgpack sees it (see
// checkIndirections).
//
// The errors are sticky: once a write failed, every later one fails too,
// even if a custom encoder ignored the first.
type valueWriter struct {
	buf []byte
	// next is the offset of the next header not yet scanned. It runs
	// past len(buf) while the body of a str, bin or ext is still to come.
	next  int
	depth int
	left  [DepthMax]uint64 // left[d]: items the d-th open container still needs
	err   error
	// multiEntryMap is set once a map (or struct) with two entries or more
	// has been written: without one no map order can vary, and
	// EncodeValue skips looking for maps to sort (see sortMaps).
	multiEntryMap bool
}

func (w *valueWriter) reset() {
	w.buf = w.buf[:0]
	w.next, w.depth, w.err = 0, 0, nil
	w.multiEntryMap = false
}

func (w *valueWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	w.scan()
	return len(p), w.err
}

func (w *valueWriter) WriteByte(c byte) error {
	if w.err != nil {
		return w.err
	}
	w.buf = append(w.buf, c)
	w.scan()
	return w.err
}

// scan walks the headers written since the last call in one tight loop,
// keeping the count of items each open container still needs. It stops at
// a header whose length field has not been written yet; the next write
// completes it. It reads lengths only: [Prescan], run on the whole
// encoding afterwards, makes every other check.
func (w *valueWriter) scan() {
	b := w.buf
	if len(b) > ValueBytesMax {
		w.err = errValueTooLarge
		return
	}
	i := w.next
	for i < len(b) {
		c := b[i]
		hdr, body := 1, 0
		var items uint64
		switch {
		case c <= 0x7f || c >= 0xe0: // positive and negative fixint
		case c <= 0x8f: // fixmap
			items = 2 * uint64(c&0x0f)
			w.multiEntryMap = w.multiEntryMap || items >= 4
		case c <= 0x9f: // fixarray
			items = uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			body = int(c & 0x1f)
		default:
			switch c {
			case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb, // bin, str 8/16/32
				0xc7, 0xc8, 0xc9: // ext 8/16/32: length, then the type byte
				l, lw, ok := readLen(b, i+1, lenWidth(c))
				if !ok {
					w.next = i
					return
				}
				if l > ValueBytesMax {
					w.err = errValueTooLarge
					return
				}
				hdr, body = 1+lw, int(l)
				if c >= 0xc7 && c <= 0xc9 {
					hdr++ // the ext's type byte
				}
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16
				hdr, body = 2, 1<<(c-0xd4)
			case 0xca, 0xce, 0xd2: // float32, uint32, int32
				body = 4
			case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
				body = 8
			case 0xcc, 0xd0: // uint8, int8
				body = 1
			case 0xcd, 0xd1: // uint16, int16
				body = 2
			case 0xdc, 0xdd: // array 16/32
				l, lw, ok := readLen(b, i+1, lenWidth(c))
				if !ok {
					w.next = i
					return
				}
				hdr, items = 1+lw, l
			case 0xde, 0xdf: // map 16/32
				l, lw, ok := readLen(b, i+1, lenWidth(c))
				if !ok {
					w.next = i
					return
				}
				hdr, items = 1+lw, 2*l
				w.multiEntryMap = w.multiEntryMap || l >= 2
			}
			// nil, false, true and the reserved 0xc1 are their header.
		}
		i += hdr + body
		if items > 0 {
			if w.depth == DepthMax {
				w.err = errValueTooDeep
				return
			}
			w.left[w.depth] = items
			w.depth++
			continue
		}
		// A complete item: it fills one slot of each container it closes.
		for w.depth > 0 {
			w.left[w.depth-1]--
			if w.left[w.depth-1] > 0 {
				break
			}
			w.depth--
		}
	}
	w.next = i
}

// pooledEncoder is a msgpack encoder with the valueWriter it writes to,
// pooled together so that EncodeValue reuses the writer's buffer.
type pooledEncoder struct {
	enc *msgpack.Encoder
	w   valueWriter
}

// pooledBufferBytesMax is the largest buffer a pooledEncoder keeps: the
// payloads of the hot path are far smaller, and a rare large one should
// not pin its buffer in the pool.
const pooledBufferBytesMax = 64 << 10

var encoders = sync.Pool{New: func() any {
	p := &pooledEncoder{}
	p.enc = msgpack.NewEncoder(&p.w)
	return p
}}

// getEncoder returns a pooled encoder with EncodeValue's options set, its
// writer empty.
func getEncoder() *pooledEncoder {
	p := encoders.Get().(*pooledEncoder)
	p.w.reset()
	p.enc.Reset(&p.w) // clears the options a previous user set
	p.enc.SetSortMapKeys(true)
	// Integers take their shortest form whatever their Go type, so that a
	// value decoded into any (where 1 comes back as int8) re-encodes to the
	// same bytes.
	p.enc.UseCompactInts(true)
	return p
}

// put returns p to the pool; the caller no longer uses p.w.buf.
func (p *pooledEncoder) put() {
	if cap(p.w.buf) > pooledBufferBytesMax {
		p.w.buf = nil
	}
	p.w.reset()
	encoders.Put(p)
}
