package journal

import (
	"bytes"
	"encoding/binary"

	"github.com/quire-dev/quire/journal/record"
)

// Key layout (spec/reliability.md §4.1). Stream and index ids are
// length-prefixed so that no id can share a prefix with another.
//
//	e/ + u64be(seq)                          -> record envelope
//	s/ + uvarint(len(id)) + id + u64be(seq)  -> empty (per-stream index)
//	x/ + u64be(seq)                          -> snapshot envelope
//	t/ + uvarint(len(id)) + id               -> terminal-index value
//	m/ + name                                -> metadata (m/acked: see metaAcked)
const (
	prefixLog    = record.LogKeyPrefix
	prefixStream = "s/"
	prefixSnap   = "x/"
	prefixIndex  = "t/"
	prefixMeta   = "m/"

	metaFormat = prefixMeta + "format"
	metaEngine = prefixMeta + "engine"
	// metaAcked opens every group's batch: the last seq acknowledged when
	// the group was built. A valid batch in a WAL thus proves the records
	// up to it were synced before it was written (checkLogEdges).
	metaAcked = prefixMeta + "acked"

	snapKeyBytes = len(prefixSnap) + 8
)

// FormatVersion is the key-layout version stored under m/format. Open
// refuses a journal with a newer one.
const FormatVersion uint64 = 1

// prefixEnd returns the smallest key above every key starting with p (p's
// last byte is '/', so incrementing it cannot overflow).
func prefixEnd(p string) []byte {
	b := []byte(p)
	b[len(b)-1]++
	return b
}

func appendIDPrefix(dst []byte, prefix, id string) []byte {
	dst = append(dst, prefix...)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	return append(dst, id...)
}

func appendStreamKey(dst []byte, id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendIDPrefix(dst, prefixStream, id), seq)
}

// parseStreamKey splits an s/ key; id aliases key.
func parseStreamKey(key []byte) (id []byte, seq uint64, ok bool) {
	if !bytes.HasPrefix(key, []byte(prefixStream)) {
		return nil, 0, false
	}
	rest := key[len(prefixStream):]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n == 0 || n > record.StreamIDBytesMax || uint64(len(rest)-w) != n+8 {
		return nil, 0, false
	}
	id = rest[w : w+int(n)]
	return id, binary.BigEndian.Uint64(rest[w+int(n):]), true
}

func indexKey(id string) []byte {
	return appendIndexKey(make([]byte, 0, len(prefixIndex)+2+len(id)), id)
}

func appendIndexKey(dst []byte, id string) []byte { return appendIDPrefix(dst, prefixIndex, id) }

func parseIndexKey(key []byte) bool {
	if !bytes.HasPrefix(key, []byte(prefixIndex)) {
		return false
	}
	rest := key[len(prefixIndex):]
	n, w := binary.Uvarint(rest)
	return w > 0 && n > 0 && n <= record.StreamIDBytesMax && uint64(len(rest)-w) == n
}

func appendSnapKey(dst []byte, seq uint64) []byte {
	dst = append(dst, prefixSnap...)
	return binary.BigEndian.AppendUint64(dst, seq)
}

func parseSnapKey(key []byte) (uint64, bool) {
	if len(key) != snapKeyBytes || !bytes.HasPrefix(key, []byte(prefixSnap)) {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(prefixSnap):]), true
}
