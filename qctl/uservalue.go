package qctl

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// User values (payloads, states, outputs) are shown as JSON written from
// their msgpack bytes, never decoded into Go values: decoding a value made
// of many small maps into any allocates over 100 times its size (a Go map
// costs hundreds of bytes whatever it holds), past RL-6's 32 × input +
// 1 MiB, and qctl reads journals whose bytes are untrusted. The JSON is
// the one encoding/json writes for what record.DecodeValue gives for the
// bytes into an any: map keys sorted and each once (the last wins), []byte
// in base64, times as time.Time marshals them.

// errNotMsgpack is returned by userJSON for bytes record.DecodeValue
// refuses; errNotJSON for a value encoding/json refuses (NaN, ±Inf).
var (
	errNotMsgpack = errors.New("not msgpack")
	errNotJSON    = errors.New("not representable in JSON")
)

// userJSON returns the JSON of the msgpack user value b.
func userJSON(b []byte) ([]byte, error) {
	if len(b) > record.ValueBytesMax {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errNotMsgpack, len(b), record.ValueBytesMax)
	}
	if err := record.Prescan(b, true); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotMsgpack, err)
	}
	w := jsonWriter{}
	w.enc = json.NewEncoder(&w.scratch)
	w.enc.SetEscapeHTML(false)
	out, _, err := w.item(make([]byte, 0, 2*len(b)), b, 0)
	return out, err
}

// jsonWriter holds the scratch space of one userJSON call.
type jsonWriter struct {
	enc     *json.Encoder // writes strings and floats into scratch
	scratch bytes.Buffer
	tmp     []byte // a map's entries, while they are reordered
}

// jsonEntry is one map entry in a jsonWriter's output, at [start, end),
// with its key's bytes at [keyOff, keyOff+keyLen) of the input.
type jsonEntry struct{ start, end, keyOff, keyLen int32 }

// item appends the JSON of the well-formed (pre-scanned) item at b[i:] to
// dst and returns dst and the offset after it. The recursion is at most
// record.DepthMax deep.
func (w *jsonWriter) item(dst, b []byte, i int) ([]byte, int, error) {
	c := b[i]
	switch {
	case c <= 0x7f:
		return strconv.AppendInt(dst, int64(c), 10), i + 1, nil
	case c >= 0xe0:
		return strconv.AppendInt(dst, int64(int8(c)), 10), i + 1, nil
	case c <= 0x8f:
		return w.object(dst, b, i+1, int(c&0x0f))
	case c <= 0x9f:
		return w.array(dst, b, i+1, int(c&0x0f))
	case c <= 0xbf:
		n := int(c & 0x1f)
		return w.str(dst, b[i+1:i+1+n]), i + 1 + n, nil
	}
	switch c {
	case 0xc0:
		return append(dst, "null"...), i + 1, nil
	case 0xc2:
		return append(dst, "false"...), i + 1, nil
	case 0xc3:
		return append(dst, "true"...), i + 1, nil
	case 0xcc:
		return strconv.AppendUint(dst, uint64(b[i+1]), 10), i + 2, nil
	case 0xcd:
		return strconv.AppendUint(dst, uint64(binary.BigEndian.Uint16(b[i+1:])), 10), i + 3, nil
	case 0xce:
		return strconv.AppendUint(dst, uint64(binary.BigEndian.Uint32(b[i+1:])), 10), i + 5, nil
	case 0xcf:
		return strconv.AppendUint(dst, binary.BigEndian.Uint64(b[i+1:]), 10), i + 9, nil
	case 0xd0:
		return strconv.AppendInt(dst, int64(int8(b[i+1])), 10), i + 2, nil
	case 0xd1:
		return strconv.AppendInt(dst, int64(int16(binary.BigEndian.Uint16(b[i+1:]))), 10), i + 3, nil
	case 0xd2:
		return strconv.AppendInt(dst, int64(int32(binary.BigEndian.Uint32(b[i+1:]))), 10), i + 5, nil
	case 0xd3:
		return strconv.AppendInt(dst, int64(binary.BigEndian.Uint64(b[i+1:])), 10), i + 9, nil
	case 0xca:
		f := math.Float32frombits(binary.BigEndian.Uint32(b[i+1:]))
		out, err := w.encode(dst, f)
		return out, i + 5, err
	case 0xcb:
		f := math.Float64frombits(binary.BigEndian.Uint64(b[i+1:]))
		out, err := w.encode(dst, f)
		return out, i + 9, err
	case 0xd9, 0xda, 0xdb, 0xc4, 0xc5, 0xc6:
		l, lw := length(b, i+1, c)
		data := b[i+1+lw : i+1+lw+l]
		if c >= 0xd9 {
			return w.str(dst, data), i + 1 + lw + l, nil
		}
		out, err := w.encode(dst, data) // []byte: base64, as decoding gives
		return out, i + 1 + lw + l, err
	case 0xdc, 0xdd:
		l, lw := length(b, i+1, c)
		return w.array(dst, b, i+1+lw, l)
	case 0xde, 0xdf:
		l, lw := length(b, i+1, c)
		return w.object(dst, b, i+1+lw, l)
	case 0xd6, 0xd7, 0xc7, 0xc8, 0xc9: // the timestamp ext, the only one Prescan lets through
		hdr, n := 2, 4
		switch c {
		case 0xd7:
			n = 8
		case 0xc7, 0xc8, 0xc9:
			l, lw := length(b, i+1, c)
			hdr, n = 2+lw, l
		}
		t, ok := timestamp(b[i+hdr : i+hdr+n])
		if !ok {
			return dst, i, fmt.Errorf("%w: timestamp nanoseconds out of range at offset %d", errNotMsgpack, i)
		}
		out, err := w.encode(dst, t)
		return out, i + hdr + n, err
	}
	return dst, i, fmt.Errorf("%w: unexpected byte %#x at offset %d", errNotMsgpack, c, i)
}

// array appends the JSON of the n items at b[i:].
func (w *jsonWriter) array(dst, b []byte, i, n int) ([]byte, int, error) {
	dst = append(dst, '[')
	var err error
	for k := range n {
		if k > 0 {
			dst = append(dst, ',')
		}
		if dst, i, err = w.item(dst, b, i); err != nil {
			return dst, i, err
		}
	}
	return append(dst, ']'), i, nil
}

// object appends the JSON of the map of n entries at b[i:]: keys sorted,
// each once, the last one winning, as a decoded map[string]any marshals.
// A key must be a str, bin or nil (the empty string), as decoding requires.
func (w *jsonWriter) object(dst, b []byte, i, n int) ([]byte, int, error) {
	head := len(dst)
	entries := make([]jsonEntry, n)
	var err error
	for k := range entries {
		c := b[i]
		var key []byte
		switch {
		case c >= 0xa0 && c <= 0xbf:
			key, i = b[i+1:i+1+int(c&0x1f)], i+1+int(c&0x1f)
		case c == 0xd9, c == 0xda, c == 0xdb, c == 0xc4, c == 0xc5, c == 0xc6:
			l, lw := length(b, i+1, c)
			key, i = b[i+1+lw:i+1+lw+l], i+1+lw+l
		case c == 0xc0:
			key, i = b[i:i], i+1
		default:
			return dst, i, fmt.Errorf("%w: map key at offset %d is not a string", errNotMsgpack, i)
		}
		e := &entries[k]
		e.start, e.keyOff, e.keyLen = int32(len(dst)), int32(i-len(key)), int32(len(key))
		dst = append(w.str(dst, key), ':')
		if dst, i, err = w.item(dst, b, i); err != nil {
			return dst, i, err
		}
		e.end = int32(len(dst))
	}
	keyOf := func(e jsonEntry) []byte { return b[e.keyOff : e.keyOff+e.keyLen] }
	slices.SortStableFunc(entries, func(x, y jsonEntry) int { return bytes.Compare(keyOf(x), keyOf(y)) })
	w.tmp = append(w.tmp[:0], dst[head:]...)
	dst = append(dst[:head], '{')
	first := true
	for k, e := range entries {
		if k+1 < len(entries) && bytes.Equal(keyOf(e), keyOf(entries[k+1])) {
			continue // a later entry has the same key
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, w.tmp[int(e.start)-head:int(e.end)-head]...)
	}
	return append(dst, '}'), i, nil
}

// str appends s as a JSON string, as encoding/json writes it without HTML
// escaping (invalid UTF-8 as U+FFFD).
func (w *jsonWriter) str(dst, s []byte) []byte {
	out, _ := w.encode(dst, string(s))
	return out
}

// encode appends the JSON encoding/json writes for v; an error, for a
// value it refuses (a NaN or infinite float), matches errNotJSON.
func (w *jsonWriter) encode(dst []byte, v any) ([]byte, error) {
	w.scratch.Reset()
	if err := w.enc.Encode(v); err != nil {
		return dst, fmt.Errorf("%w: %v", errNotJSON, err)
	}
	return append(dst, bytes.TrimSuffix(w.scratch.Bytes(), []byte("\n"))...), nil
}

// length reads the length that follows header c at b[i:], and its width.
func length(b []byte, i int, c byte) (l, width int) {
	switch c {
	case 0xc4, 0xd9, 0xc7:
		return int(b[i]), 1
	case 0xc5, 0xda, 0xdc, 0xde, 0xc8:
		return int(binary.BigEndian.Uint16(b[i:])), 2
	}
	return int(binary.BigEndian.Uint32(b[i:])), 4
}

// timestamp reads a msgpack timestamp's data as msgpack decodes it, or
// reports that its nanoseconds are out of range, which decoding refuses.
func timestamp(data []byte) (time.Time, bool) {
	var sec int64
	var nsec uint32
	switch len(data) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(data))
	case 8:
		v := binary.BigEndian.Uint64(data)
		nsec, sec = uint32(v>>34), int64(v&(1<<34-1))
	case 12:
		nsec, sec = binary.BigEndian.Uint32(data), int64(binary.BigEndian.Uint64(data[4:]))
	default:
		return time.Time{}, false
	}
	if nsec >= 1e9 {
		return time.Time{}, false
	}
	return time.Unix(sec, int64(nsec)), true
}
