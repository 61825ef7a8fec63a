package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
)

// Pebble v2.1.7 tells a torn WAL tail from damage through "WAL sync"
// chunks, whose headers record the offset synced when they were written:
// after an invalid chunk, a later valid chunk claiming a synced offset
// beyond it proves the invalid chunk had been synced. But its read-ahead
// (record.Reader.readAheadForCorruption) starts at the next 32 KiB block,
// never at the rest of the current one. Damage in a WAL's last block thus
// reads as a torn tail and silently drops every later record of that block,
// acknowledged ones included. checkWALs closes that gap before Pebble
// replays: it scans the rest of the block holding the first invalid chunk
// for such a proof. Only the final record stays unprotected (§1: it reads
// like a torn write whatever the reader does). The constants below are
// Pebble's WAL wire format (pebble/record/record.go); revisit on upgrades.
const (
	walBlockBytes        = 32 << 10
	walLegacyHeaderBytes = 7
	walSyncHeaderBytes   = 19
)

// walHeaderBytes returns the header size of a chunk encoding, 0 if invalid.
func walHeaderBytes(enc byte) int {
	switch {
	case enc >= 1 && enc <= 4: // legacy
		return walLegacyHeaderBytes
	case enc >= 5 && enc <= 8: // recyclable: + log number
		return walLegacyHeaderBytes + 4
	case enc >= 9 && enc <= 12: // WAL sync: + log number + synced offset
		return walSyncHeaderBytes
	}
	return 0
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// walChecksum is Pebble's masked CRC32C of a chunk (from its encoding
// byte to the end of its payload).
func walChecksum(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoliTable)
	return (c>>15 | c<<17) + 0xa282ead8
}

// walLogNum returns the log number of a WAL file's name, "000018.log".
func walLogNum(name string) (uint32, bool) {
	num, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 32)
	return uint32(n), err == nil
}

// checkWALs checks every WAL file in dir; see the comment above.
func checkWALs(fs vfs.FS, dir string, names []string) error {
	for _, name := range names {
		n, ok := walLogNum(name)
		if !ok {
			continue
		}
		if err := checkWAL(fs, fs.PathJoin(dir, name), n); err != nil {
			return err
		}
	}
	return nil
}

func checkWAL(fs vfs.FS, path string, logNum uint32) error {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("journal: check WAL %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, walBlockBytes)
	for block := 0; ; block++ {
		n, err := io.ReadFull(f, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("journal: check WAL %s: %w", path, err)
		}
		b := buf[:n]
		if off, ok := firstInvalidChunk(b, logNum); !ok {
			invalid := uint64(block)*walBlockBytes + uint64(off)
			if synced, found := syncProofAfter(b, off+1, logNum, invalid); found {
				return &CorruptError{File: path, Reason: fmt.Sprintf(
					"WAL damaged at offset %d, before the synced offset %d that a later chunk records", invalid, synced)}
			}
			return nil // a torn tail, or damage Pebble's own read-ahead sees
		}
		if n < walBlockBytes {
			return nil
		}
	}
}

// firstInvalidChunk walks the chunks of one block and returns the offset of
// the first invalid one, or ok for a block that parses to its end.
func firstInvalidChunk(b []byte, logNum uint32) (off int, ok bool) {
	for off+walLegacyHeaderBytes <= len(b) {
		end, valid := walChunkAt(b, off, logNum)
		if !valid {
			if padding(b[off:]) {
				return 0, true
			}
			return off, false
		}
		off = end
	}
	return 0, true
}

// padding reports whether tail is the zeros the writer pads a block's tail
// with when it is too short for a header.
func padding(tail []byte) bool { return len(tail) < walSyncHeaderBytes && allZero(tail) }

// syncProofAfter looks, at every byte offset from from on, for a valid WAL
// sync chunk of logNum recording a synced offset beyond invalid.
func syncProofAfter(b []byte, from int, logNum uint32, invalid uint64) (uint64, bool) {
	for p := from; p+walSyncHeaderBytes <= len(b); p++ {
		if enc := b[p+6]; enc < 9 || enc > 12 {
			continue
		}
		if _, ok := walChunkAt(b, p, logNum); !ok {
			continue
		}
		if synced := binary.LittleEndian.Uint64(b[p+11:]); synced > invalid {
			return synced, true
		}
	}
	return 0, false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walStarts is what a WAL's batches tell about the log: the seq of the
// first record in it, and the highest acknowledged seq a batch in it
// recorded (metaAcked); 0 for none.
type walStarts struct {
	first, acked uint64
}

// walFirstLogSeqs reads every WAL of dir (names lists dir) that holds a
// batch of the journal's. A batch is a group commit; it opens with
// metaAcked, then its first record (§4.1). So a WAL's first batch with a
// record gives the first record the WAL holds, and every batch the seq
// acknowledged before it was built. Chunks of another log number (a
// recycled file's old content) and invalid chunks are skipped: a batch
// read past damage still proves what it records. In a sound journal the
// record before each WAL's first exists, and none of the acknowledged
// records is missing, whether the WAL is replayed or awaits recycling.
func walFirstLogSeqs(fs vfs.FS, dir string, names []string) (map[string]walStarts, error) {
	out := make(map[string]walStarts)
	for _, name := range names {
		n, ok := walLogNum(name)
		if !ok {
			continue
		}
		st, err := readWALStarts(fs, fs.PathJoin(dir, name), n)
		if err != nil {
			return nil, err
		}
		if st != (walStarts{}) {
			out[name] = st
		}
	}
	return out, nil
}

// Pebble's batch encoding (pebble/batchrepr): a 12-byte header (seq num,
// count), then entries; a set is its kind byte, the key's uvarint length,
// the key, the value's uvarint length, the value.
const (
	batchHeaderBytes = 12
	batchKindSet     = 1
)

// readWALStarts reads, from every chunk of one WAL that begins a batch,
// the acknowledged seq it records and its first record's seq.
func readWALStarts(fs vfs.FS, path string, logNum uint32) (walStarts, error) {
	var st walStarts
	err := scanWAL(fs, path, logNum, func(chunk []byte, enc byte, _ bool) bool {
		if t := (enc - 1) % 4; t <= 1 { // a full or first chunk begins a batch
			acked, first := batchStart(chunk[walHeaderBytes(enc):])
			st.acked = max(st.acked, acked)
			if st.first == 0 {
				st.first = first
			}
		}
		return true
	})
	return st, err
}

// scanWAL calls fn with every valid chunk of logNum in one WAL, in order,
// and whether anything but a block's tail padding came before it (damage,
// a torn write or a recycled file's old content), until fn returns false.
// Past anything invalid it resyncs byte by byte, in every block: a chunk
// read past damage still proves what it records.
func scanWAL(fs vfs.FS, path string, logNum uint32, fn func(chunk []byte, enc byte, afterInvalid bool) bool) error {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("journal: read WAL %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, walBlockBytes)
	invalid := false
	for {
		n, err := io.ReadFull(f, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("journal: read WAL %s: %w", path, err)
		}
		b := buf[:n]
		for off := 0; off+walLegacyHeaderBytes <= len(b); {
			end, ok := walChunkAt(b, off, logNum)
			if !ok {
				invalid = invalid || !padding(b[off:])
				off++
				continue
			}
			if !fn(b[off:end], b[off+6], invalid) {
				return nil
			}
			off = end
		}
		if n < walBlockBytes {
			return nil
		}
	}
}

// walChunkAt reports whether a valid chunk of logNum starts at b[off:], and
// where it ends.
func walChunkAt(b []byte, off int, logNum uint32) (end int, ok bool) {
	if off+walLegacyHeaderBytes > len(b) {
		return 0, false
	}
	enc := b[off+6]
	hs := walHeaderBytes(enc)
	if hs == 0 || off+hs > len(b) || (hs > walLegacyHeaderBytes && binary.LittleEndian.Uint32(b[off+7:]) != logNum) {
		return 0, false
	}
	end = off + hs + int(binary.LittleEndian.Uint16(b[off+4:]))
	if end > len(b) || walChecksum(b[off+6:end]) != binary.LittleEndian.Uint32(b[off:]) {
		return 0, false
	}
	return end, true
}

// batchStart reads the metaAcked entry a journal batch opens with, and the
// seq of the record set right after it; 0 for what is not there.
func batchStart(p []byte) (acked, first uint64) {
	at := batchHeaderBytes
	if k, v, next, ok := batchSet(p, at); ok && string(k) == metaAcked && len(v) == 8 {
		acked, at = binary.BigEndian.Uint64(v), next
	}
	if k, _, _, ok := batchSet(p, at); ok {
		if seq, ok := record.ParseLogKey(k); ok {
			first = seq
		}
	}
	return acked, first
}

// batchSet decodes the set entry at p[at:], if it is one and fits.
func batchSet(p []byte, at int) (key, value []byte, next int, ok bool) {
	if at >= len(p) || p[at] != batchKindSet {
		return nil, nil, 0, false
	}
	at++
	kl, n := binary.Uvarint(p[at:])
	if n <= 0 || uint64(len(p)-at-n) < kl {
		return nil, nil, 0, false
	}
	at += n
	key = p[at : at+int(kl)]
	at += int(kl)
	vl, n := binary.Uvarint(p[at:])
	if n <= 0 || uint64(len(p)-at-n) < vl {
		return nil, nil, 0, false
	}
	at += n
	return key, p[at : at+int(vl)], at + int(vl), true
}

// missingTable matches Pebble's error for a table its MANIFEST lists that
// the directory lacks.
var missingTable = regexp.MustCompile(`file (\d+) \(type sstable\)`)

// missingManifest matches Pebble's error for a MANIFEST its marker names
// that the directory lacks.
var missingManifest = regexp.MustCompile(`could not open manifest file "(MANIFEST-\d+)"`)

// attribute names the file an open error is about when Pebble's error does
// not (RL-5): the WAL whose damage Pebble found while replaying (the one
// with an invalid chunk that a valid chunk of its own log follows, since a
// torn tail has none after it), or the table a MANIFEST lists that is not
// in the directory, which is damage too (a CorruptError).
func (o Options) attribute(dir string, err error) error {
	var ce *CorruptError
	switch {
	case errors.As(err, &ce) && ce.File == "" && strings.Contains(err.Error(), "replaying WAL"):
		ls, lerr := o.FS.List(dir)
		if lerr != nil {
			return err
		}
		slices.Sort(ls)
		for _, name := range ls {
			if damagedWAL(o.FS, o.FS.PathJoin(dir, name), name) {
				ce.File = o.FS.PathJoin(dir, name)
				return ce
			}
		}
	case errors.Is(err, iofs.ErrNotExist):
		if m := missingTable.FindStringSubmatch(err.Error()); m != nil {
			name := m[1] + ".sst"
			return &CorruptError{File: o.FS.PathJoin(dir, name), Err: err,
				Reason: fmt.Sprintf("the store lists table %s, which is not in %s (deleted, or a MANIFEST swapped for another)", name, dir)}
		}
		if m := missingManifest.FindStringSubmatch(err.Error()); m != nil {
			return &CorruptError{File: o.FS.PathJoin(dir, m[1]), Err: err,
				Reason: fmt.Sprintf("the store's marker names %s, which is not in %s (deleted?)", m[1], dir)}
		}
	}
	return err
}

// damagedWAL reports whether name is a WAL holding an invalid chunk that
// a valid chunk of its own log follows.
func damagedWAL(fs vfs.FS, path, name string) bool {
	n, ok := walLogNum(name)
	if !ok {
		return false
	}
	found := false
	_ = scanWAL(fs, path, n, func(_ []byte, _ byte, afterInvalid bool) bool {
		found = afterInvalid
		return !found
	})
	return found
}
