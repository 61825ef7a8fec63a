package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// Maps of state, rewritten on the bytes.
//
// A workflow's state, a step's output and a signal's payload are stored as
// the encoding of a map with string keys. Merging an output into a state,
// or keeping a state's public keys, used to decode both into map[string]any
// and encode the result again: on a state made of many small maps that
// allocates over 100 times its size (a Go map costs hundreds of bytes
// whatever it holds), beyond RL-6's bound, at every Open that replays it.
// MergeMaps does the same on the bytes: it splits the maps into entries,
// never building a Go value, and writes the bytes EncodeValue would write
// for the map[string]any that decoding would give.

// KeepKey selects map entries by their key's bytes. A nil KeepKey keeps
// every entry.
type KeepKey func(key []byte) bool

// MergeMaps returns the encoding of the map holding the entries of base
// that keepBase keeps, with the entries of over that keepOver keeps
// written over them (an entry of over replaces base's entry with the same
// key). base and over are encodings of maps with string keys; empty input
// and nil are the empty map.
//
// The result is the encoding [EncodeValue] writes for the map[string]any
// that [DecodeValue] gives for the merged entries: every map in it, nested
// ones included, has its keys sorted, each once (the last one in the input
// wins, as in decoding), bin and nil keys become strings; every other
// byte is kept. Both inputs get DecodeValue's checks (size, [Prescan],
// timestamps) and every map key must be a str, bin or nil, as decoding
// into a map[string]any requires; errors wrap [ErrCorrupt]. A result over
// [ValueBytesMax] is refused with an error matching [ErrTooLarge].
//
// Nothing is decoded into Go values: MergeMaps allocates the result, one
// span per map entry and one scratch buffer, well within RL-6's
// 32 × input + 1 MiB.
func MergeMaps(base []byte, keepBase KeepKey, over []byte, keepOver KeepKey) ([]byte, error) {
	m := mapMerger{}
	var err error
	if m.base, err = m.top(base, keepBase); err != nil {
		return nil, err
	}
	if m.over, err = m.top(over, keepOver); err != nil {
		return nil, err
	}
	return m.write()
}

// mapMerger holds the work of one MergeMaps call: the canonical entries
// of both inputs, written one after the other into buf.
type mapMerger struct {
	buf        []byte
	tmp        []byte // scratch for reordering a nested map's entries
	base, over []entrySpan
}

// top checks b and appends the canonical form of each of its top-level
// entries that keep keeps to m.buf, returning their spans.
func (m *mapMerger) top(b []byte, keep KeepKey) ([]entrySpan, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > ValueBytesMax {
		return nil, fmt.Errorf("%w: map is %d bytes, limit %d", ErrCorrupt, len(b), ValueBytesMax)
	}
	if err := Prescan(b, true); err != nil {
		return nil, err
	}
	if err := eachTimestamp(b, func(start, _ int, data []byte) error {
		if !validTimestamp(data) {
			return malformed(start, "timestamp nanoseconds out of range")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if b[0] == 0xc0 {
		return nil, nil
	}
	hdr, _, items, isMap := header(b, 0)
	if !isMap {
		return nil, malformed(0, "a map with string keys expected")
	}
	var spans []entrySpan
	i := hdr
	for range items / 2 {
		start := len(m.buf)
		var err error
		if m.buf, i, err = m.key(m.buf, b, i); err != nil {
			return nil, err
		}
		mid := len(m.buf)
		if m.buf, i, err = m.item(m.buf, b, i); err != nil {
			return nil, err
		}
		if keep != nil && !keep(keyBytes(m.buf[start:mid])) {
			m.buf = m.buf[:start]
			continue
		}
		spans = append(spans, entrySpan{start, mid, len(m.buf)})
	}
	return spans, nil
}

// write returns the map of m's entries, over's replacing base's, or an
// error matching [ErrTooLarge] if it would be over [ValueBytesMax], as
// EncodeValue refuses such a map.
func (m *mapMerger) write() ([]byte, error) {
	all := append(m.base, m.over...)
	all = sortUnique(m.buf, all)
	size := len(appendMapHeader(nil, len(all)))
	for _, e := range all {
		size += e.end - e.start
	}
	if size > ValueBytesMax {
		return nil, fmt.Errorf("%w: the merged map is %d bytes, limit %d", ErrTooLarge, size, ValueBytesMax)
	}
	out := appendMapHeader(make([]byte, 0, size), len(all))
	for _, e := range all {
		out = append(out, m.buf[e.start:e.end]...)
	}
	return out, nil
}

// sortUnique sorts the entries of buf that spans name by key, keeping only
// the last one of each key in the order given, in place.
func sortUnique(buf []byte, spans []entrySpan) []entrySpan {
	key := func(e entrySpan) []byte { return keyBytes(buf[e.start:e.mid]) }
	slices.SortStableFunc(spans, func(x, y entrySpan) int { return bytes.Compare(key(x), key(y)) })
	out := spans[:0]
	for k, e := range spans {
		if k+1 < len(spans) && bytes.Equal(key(e), key(spans[k+1])) {
			continue // a later entry has the same key
		}
		out = append(out, e)
	}
	return out
}

// key appends the map key at b[i:] to dst as a str and returns dst and the
// offset after it: a str as it is, a bin's bytes and nil (the empty
// string) as a str, which is how decoding into a map[string]any reads
// them. Any other key is refused.
func (m *mapMerger) key(dst, b []byte, i int) ([]byte, int, error) {
	hdr, body, _, _ := header(b, i)
	switch c := b[i]; {
	case c >= 0xa0 && c <= 0xbf, c == 0xd9, c == 0xda, c == 0xdb:
		return append(dst, b[i:i+hdr+body]...), i + hdr + body, nil
	case c == 0xc4, c == 0xc5, c == 0xc6, c == 0xc0:
		return append(appendStrHeader(dst, body), b[i+hdr:i+hdr+body]...), i + hdr + body, nil
	}
	return dst, i, malformed(i, "map key is not a string")
}

// item appends the canonical form of the item at b[i:] to dst and returns
// dst and the offset after the item: every map with its keys as [key]
// writes them, sorted, each once. The recursion is at most DepthMax deep:
// b passed Prescan.
func (m *mapMerger) item(dst, b []byte, i int) ([]byte, int, error) {
	hdr, body, items, isMap := header(b, i)
	if items == 0 {
		return append(dst, b[i:i+hdr+body]...), i + hdr + body, nil
	}
	var err error
	if !isMap {
		dst = append(dst, b[i:i+hdr]...)
		i += hdr
		for range items {
			if dst, i, err = m.item(dst, b, i); err != nil {
				return dst, i, err
			}
		}
		return dst, i, nil
	}
	i += hdr
	head := len(dst)
	entries := make([]entrySpan, items/2)
	for k := range entries {
		e := &entries[k]
		e.start = len(dst)
		if dst, i, err = m.key(dst, b, i); err != nil {
			return dst, i, err
		}
		e.mid = len(dst)
		if dst, i, err = m.item(dst, b, i); err != nil {
			return dst, i, err
		}
		e.end = len(dst)
	}
	kept := sortUnique(dst, entries)
	m.tmp = append(m.tmp[:0], dst[head:]...)
	dst = appendMapHeader(dst[:head], len(kept))
	for _, e := range kept {
		dst = append(dst, m.tmp[e.start-head:e.end-head]...)
	}
	return dst, i, nil
}

// keyBytes returns the bytes of k, a str that [mapMerger.key] wrote.
func keyBytes(k []byte) []byte {
	b, _ := strBytes(k)
	return b
}

// appendMapHeader appends the header msgpack writes for a map of n
// entries.
func appendMapHeader(dst []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(dst, 0x80|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}

// appendStrHeader appends the header msgpack writes for a str of n bytes.
func appendStrHeader(dst []byte, n int) []byte {
	switch {
	case n <= 31:
		return append(dst, 0xa0|byte(n))
	case n <= 0xff:
		return append(dst, 0xd9, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
}
