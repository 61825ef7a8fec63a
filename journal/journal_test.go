package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

func TestOpenFormatMajorVersion(t *testing.T) { // RL-5, spec §2.1
	t.Parallel()
	j := openJ(t, vfs.NewCrashableMem(), "db", Options{})
	defer func() { _ = j.Close() }()
	if v := j.db.FormatMajorVersion(); v < pebble.FormatWALSyncChunks {
		t.Fatalf("FormatMajorVersion = %v, want >= FormatWALSyncChunks (%v)", v, pebble.FormatWALSyncChunks)
	}
	if j.EngineID() == "" {
		t.Fatal("no engine id")
	}
}

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	cases := []struct {
		field string
		opts  Options
	}{
		{"Clock", Options{}},
		{"RecordBytesMax", Options{Clock: clk, RecordBytesMax: 10}},
		{"RecordBytesMax", Options{Clock: clk, RecordBytesMax: -1}},
		{"GroupRecordsMax", Options{Clock: clk, GroupRecordsMax: -5}},
		{"GroupBytesMax", Options{Clock: clk, RecordBytesMax: 2 << 20, GroupBytesMax: 1 << 20}},
		{"UnitRecordsMax", Options{Clock: clk, GroupRecordsMax: 100, UnitRecordsMax: 99}},
		{"UnitRecordsMax", Options{Clock: clk, UnitRecordsMax: 1<<16 + 1}},
		{"UnitBytesMax", Options{Clock: clk, GroupBytesMax: 8 << 20, UnitBytesMax: 4 << 20}},
		{"UnitBytesMax", Options{Clock: clk, UnitBytesMax: 1<<30 + 1}},
		{"QueueDepth", Options{Clock: clk, QueueDepth: 1 << 30}},
		{"SnapshotBytesMax", Options{Clock: clk, SnapshotBytesMax: 1}},
		{"EngineID", Options{Clock: clk, EngineID: strings.Repeat("x", 128)}},
	}
	for _, c := range cases {
		c.opts.FS = vfs.NewMem()
		_, err := Open("db", c.opts)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Field != c.field || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: err %v, want an *OptionError naming %s", c.opts, err, c.field)
		}
	}
}

func TestOpenNotJournal(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	t.Run("other files", func(t *testing.T) {
		fs := vfs.NewMem()
		_ = fs.MkdirAll("db", 0o755)
		f, _ := fs.Create("db/notes.txt", vfs.WriteCategoryUnspecified)
		_ = f.Close()
		_, err := Open("db", Options{FS: fs, Clock: clk})
		if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), "db") {
			t.Fatalf("err %v, want ErrNotJournal naming db", err)
		}
	})
	t.Run("pebble store without metadata", func(t *testing.T) {
		// Another program's store, at the oldest format this Pebble
		// reads: refused, and left at its format, which a ratchet would
		// have made unreadable to the Pebble version that wrote it.
		fs := vfs.NewMem()
		rawEditAt(t, fs, "db", pebble.FormatMinSupported, func(db *pebble.DB) { _ = db.Set([]byte("foo"), []byte("bar"), pebble.Sync) })
		for _, ro := range []bool{false, true} {
			_, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: ro})
			if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), "db") {
				t.Fatalf("read-only %v: err %v, want ErrNotJournal naming db", ro, err)
			}
		}
		desc, err := pebble.Peek("db", fs)
		if err != nil || desc.FormatMajorVersion != pebble.FormatMinSupported {
			t.Fatalf("after the refused opens the store is at format %v (%v), want %v", desc.FormatMajorVersion, err, pebble.FormatMinSupported)
		}
	})
	t.Run("read-only missing dir", func(t *testing.T) {
		_, err := Open("nope", Options{FS: vfs.NewMem(), Clock: clk, ReadOnly: true})
		var pe *iofs.PathError
		if !errors.Is(err, iofs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != "nope" {
			t.Fatalf("err %v, want a *fs.PathError for nope wrapping fs.ErrNotExist", err)
		}
	})
	t.Run("read-only empty dir", func(t *testing.T) {
		fs := vfs.NewMem()
		_ = fs.MkdirAll("db", 0o755)
		if _, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: true}); !errors.Is(err, ErrNotJournal) {
			t.Fatalf("err %v, want ErrNotJournal", err)
		}
	})
	t.Run("read-only leaves no LOCK behind", func(t *testing.T) {
		// A reader (qctl) refuses a directory that is no journal without
		// writing into it.
		fs := vfs.NewMem()
		_ = fs.MkdirAll("empty", 0o755)
		_ = fs.MkdirAll("other", 0o755)
		f, _ := fs.Create("other/notes.txt", vfs.WriteCategoryUnspecified)
		_ = f.Close()
		for _, dir := range []string{"empty", "other"} {
			if _, err := Open(dir, Options{FS: fs, Clock: clk, ReadOnly: true}); !errors.Is(err, ErrNotJournal) {
				t.Fatalf("%s: err %v, want ErrNotJournal", dir, err)
			}
			if _, err := fs.Stat(dir + "/LOCK"); !errors.Is(err, iofs.ErrNotExist) {
				t.Fatalf("%s: a refused read-only open left a LOCK file (%v)", dir, err)
			}
		}
	})
}

// lockDeniedFS fails every Lock as opening an unwritable LOCK file does.
type lockDeniedFS struct{ vfs.FS }

func (lockDeniedFS) Lock(name string) (io.Closer, error) {
	return nil, &iofs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
}

// TestOpenLockFileDeniedIsNotLocked: EACCES from opening the LOCK file is
// the file's permissions, which no holder will ever release: Open reports
// it as a permission error, not ErrLocked, read-only too. EACCES and
// EAGAIN from the lock itself are another holder's.
func TestOpenLockFileDeniedIsNotLocked(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := Open("db", Options{FS: lockDeniedFS{fs}, Clock: clocktest.New(epoch), ReadOnly: ro})
		if errors.Is(err, ErrLocked) || !errors.Is(err, iofs.ErrPermission) || !strings.Contains(err.Error(), "db") {
			t.Fatalf("read-only %v: err %v, want a permission error naming db, not ErrLocked", ro, err)
		}
	}
	for _, err := range []error{syscall.EAGAIN, syscall.EACCES, errors.New("lock held by current process")} {
		if !isLockHeld(err) {
			t.Fatalf("isLockHeld(%v) = false, want true", err)
		}
	}
}

// TestOpenRatchetsAnOlderJournal: a journal whose store is at an older
// Pebble format (as one written before a Pebble upgrade) opens, keeps its
// records, and is ratcheted to the newest format.
func TestOpenRatchetsAnOlderJournal(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	mustAppend(t, j, debugRec("s1", "kept"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Copy every key into a fresh store at the oldest supported format.
	old := vfs.NewMem()
	rawEdit(t, fs, "db", func(src *pebble.DB) {
		rawEditAt(t, old, "db", pebble.FormatMinSupported, func(dst *pebble.DB) {
			it, _ := src.NewIter(nil)
			for it.First(); it.Valid(); it.Next() {
				_ = dst.Set(it.Key(), it.Value(), nil)
			}
			_ = it.Close()
		})
	})
	j = openJ(t, old, "db", Options{})
	if got := j.LastSeq(); got != 1 {
		t.Fatalf("last seq %d, want 1", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	desc, err := pebble.Peek("db", old)
	if err != nil || desc.FormatMajorVersion != pebble.FormatNewest {
		t.Fatalf("journal at format %v (%v), want %v", desc.FormatMajorVersion, err, pebble.FormatNewest)
	}
}

// TestOpenRefusesAJournalMissingParts (RL-5): a store that lost what its MANIFEST
// listed (a damaged MANIFEST whose last edit reads as a torn write) is
// refused as corrupt, not taken for another program's store nor for a new
// one, and nothing in the directory changes: a read-write Pebble open
// would delete the tables its MANIFEST does not list.
func TestOpenRefusesAJournalMissingParts(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	t.Run("records without metadata", func(t *testing.T) {
		fs := vfs.NewMem()
		j := openJ(t, fs, "db", Options{})
		mustAppend(t, j, debugRec("s1", "kept"))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		rawEdit(t, fs, "db", func(db *pebble.DB) { _ = db.Delete([]byte(metaFormat), pebble.Sync) })
		for _, ro := range []bool{false, true} {
			_, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: ro})
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), "db") {
				t.Fatalf("read-only %v: err %v, want ErrCorrupt naming db", ro, err)
			}
		}
	})
	t.Run("an unlisted table in an empty store", func(t *testing.T) {
		// A journal's table, copied into the directory of an empty store
		// that does not list it.
		src := vfs.NewMem()
		j := openJ(t, src, "db", Options{})
		mustAppend(t, j, debugRec("s1", "kept"))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		fs := vfs.NewMem()
		rawEdit(t, fs, "db", func(*pebble.DB) {}) // an empty store
		table := someTable(t, src, "db")
		if err := vfs.CopyAcrossFS(src, "db/"+table, fs, "db/"+table); err != nil {
			t.Fatal(err)
		}
		before, _ := fs.List("db")
		slices.Sort(before)
		for _, ro := range []bool{false, true} {
			_, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: ro})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != table {
				t.Fatalf("read-only %v: err %v, want a *CorruptError naming %s", ro, err, table)
			}
		}
		after, _ := fs.List("db")
		slices.Sort(after)
		if !slices.Equal(before, after) {
			t.Fatalf("the refused opens changed the directory: %v, then %v", before, after)
		}
	})
	t.Run("a hole at a table's edge", func(t *testing.T) {
		// Tables of records 1..10, 11..20 and 21..30; then 11..20 vanish,
		// as when a damaged MANIFEST no longer lists their table, whose
		// WAL is gone. The tail, all that a start from a snapshot reads,
		// is intact: only the record before a table's first tells.
		fs := vfs.NewMem()
		j := openJ(t, fs, "db", Options{noCompactions: true})
		for range 3 {
			for range 10 {
				mustAppend(t, j, debugRec("s1", "kept"))
			}
			if err := j.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := pebble.Open("db", &pebble.Options{FS: fs, FormatMajorVersion: pebble.FormatNewest,
			Logger: quietLogger{}, DisableAutomaticCompactions: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = db.DeleteRange(record.LogKey(11), record.LogKey(21), pebble.Sync)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		before := dirState(t, fs, "db")
		_, err = Open("db", Options{FS: fs, Clock: clk})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Seq != 20 || !strings.Contains(err.Error(), "record 20 of 30 is missing, before the records of table") {
			t.Fatalf("err %v, want a *CorruptError at seq 20", err)
		}
		if after := dirState(t, fs, "db"); !maps.Equal(before, after) {
			t.Fatalf("the refused open changed the directory: %v, then %v", before, after)
		}
		// A read-only open is Verify's, which reads the hole itself.
		j = openJ(t, fs, "db", Options{ReadOnly: true})
		if rep, err := j.Verify(); rep.OK() || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "records 11..20 missing") {
			t.Fatalf("verify: %+v, %v; want the hole reported", rep, err)
		}
		closeJ(j)
	})
	t.Run("a hole before a WAL's records", func(t *testing.T) {
		// Records 1..10 in a table; 11..20 in a WAL, flushed to a second
		// table by the next open, which also writes a new MANIFEST; 21..30
		// in the next WAL. The MANIFEST and its marker are then put back
		// as they were before that open: the store lists the first table
		// only, the second WAL is gone, the third is replayed. Only the
		// record before the third WAL's first tells.
		fs := vfs.NewMem()
		j := openJ(t, fs, "db", Options{noCompactions: true})
		for range 10 {
			mustAppend(t, j, debugRec("s1", "kept"))
		}
		if err := j.db.Flush(); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			mustAppend(t, j, debugRec("s1", "kept"))
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		old := map[string][]byte{}
		ls, _ := fs.List("db")
		for _, name := range ls {
			if strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "marker.manifest.") {
				old[name] = readFile(t, fs, fs.PathJoin("db", name))
			}
		}
		j = openJ(t, fs, "db", Options{noCompactions: true})
		for range 10 {
			mustAppend(t, j, debugRec("s1", "kept"))
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		ls, _ = fs.List("db")
		for _, name := range ls {
			if strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "marker.manifest.") {
				if err := fs.Remove(fs.PathJoin("db", name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range old {
			writeFile(t, fs, fs.PathJoin("db", name), b)
		}
		before := dirState(t, fs, "db")
		_, err := Open("db", Options{FS: fs, Clock: clk})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Seq != 20 || !strings.Contains(err.Error(), "record 20 of 30 is missing, before the records of WAL") {
			t.Fatalf("err %v, want a *CorruptError at seq 20, before a WAL", err)
		}
		if after := dirState(t, fs, "db"); !maps.Equal(before, after) {
			t.Fatalf("the refused open changed the directory: %v, then %v", before, after)
		}
	})
	t.Run("the current MANIFEST missing from the directory", func(t *testing.T) { // RL-5
		fs := vfs.NewMem()
		j := openJ(t, fs, "db", Options{})
		mustAppend(t, j, debugRec("s1", "kept"))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		ls, _ := fs.List("db")
		manifest := ""
		for _, name := range ls {
			if strings.HasPrefix(name, "MANIFEST-") {
				manifest = name // the newest sorts last
			}
		}
		if manifest == "" {
			t.Fatalf("no MANIFEST in %v", ls)
		}
		if err := fs.Remove(fs.PathJoin("db", manifest)); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{false, true} {
			_, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: ro})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != fs.PathJoin("db", manifest) {
				t.Fatalf("read-only %v: err %v, want a *CorruptError naming %s", ro, err, manifest)
			}
		}
	})
	t.Run("a listed table missing from the directory", func(t *testing.T) {
		fs := vfs.NewMem()
		j := openJ(t, fs, "db", Options{})
		mustAppend(t, j, debugRec("s1", "kept"))
		if err := j.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		table := someTable(t, fs, "db")
		if err := fs.Remove(fs.PathJoin("db", table)); err != nil {
			t.Fatal(err)
		}
		for _, ro := range []bool{false, true} {
			_, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: ro})
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != fs.PathJoin("db", table) {
				t.Fatalf("read-only %v: err %v, want a *CorruptError naming %s", ro, err, table)
			}
		}
	})
	t.Run("an empty store becomes a journal", func(t *testing.T) {
		// A journal whose creation was cut short before its metadata
		// was committed: an empty Pebble store, opened again.
		fs := vfs.NewMem()
		rawEdit(t, fs, "db", func(*pebble.DB) {}) // an empty store
		j := openJ(t, fs, "db", Options{})
		mustAppend(t, j, debugRec("s1", "kept"))
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWALFirstLogSeqs: the first record a WAL holds is the first record of
// its first batch: after a flush of records 1..10, the new WAL begins at 11
// (the old one, awaiting recycling, still at 1).
func TestWALFirstLogSeqs(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{noCompactions: true})
	firsts := func() []uint64 {
		t.Helper()
		ls, err := fs.List("db")
		if err != nil {
			t.Fatal(err)
		}
		m, err := walFirstLogSeqs(fs, "db", ls)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, st := range m {
			out = append(out, st.first)
		}
		slices.Sort(out)
		return out
	}
	for range 10 {
		mustAppend(t, j, debugRec("s1", "kept"))
	}
	if got := firsts(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("before any flush the WALs begin at %v, want [1]", got)
	}
	if err := j.db.Flush(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, j, debugRec("s1", "kept"), debugRec("s1", "kept"))
	if got := firsts(); !slices.Contains(got, 11) || slices.ContainsFunc(got, func(s uint64) bool { return s != 1 && s != 11 }) {
		t.Fatalf("after a flush of 1..10 the WALs begin at %v, want 11 (and 1 for an old one)", got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesAWALDamagedBeforeAcknowledgedRecords (RL-1, RL-5): a WAL damaged in
// the middle reads as a torn tail to Pebble when the synced offsets its
// later chunks record lag behind (they do for batches that fill whole
// blocks), and every acknowledged record after the damage was dropped
// without a word. Each group's batch opens with the seq acknowledged when
// it was built (metaAcked), so a batch read past the damage proves what is
// missing. Damage in the final group's batch loses only unprovable records
// (§2.1), and the journal opens at the group before.
func TestOpenRefusesAWALDamagedBeforeAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	const groups, per = 30, 200
	build := func() vfs.FS {
		fs := vfs.NewMem()
		j := openJ(t, fs, "db", Options{})
		for i := range groups {
			recs := make([]record.Record, per)
			for k := range recs {
				recs[k] = debugRec("s1", strings.Repeat("x", 200)+fmt.Sprint(i, k))
			}
			mustAppend(t, j, recs...)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	flip := func(fs vfs.FS, pct int) string {
		ls, err := fs.List("db")
		if err != nil {
			t.Fatal(err)
		}
		wal := ""
		for _, name := range ls {
			if strings.HasSuffix(name, ".log") && name > wal {
				wal = name
			}
		}
		path := fs.PathJoin("db", wal)
		b := readFile(t, fs, path)
		b[len(b)*pct/100] ^= 0x40
		writeFile(t, fs, path, b)
		return path
	}
	// Each group's batch is about 60 KiB, a ninth of the newest WAL: 30 %,
	// 50 % and 70 % fall in earlier groups (Pebble's replay finds the
	// first), 85 % in the group before the final one, whose batch begins
	// later in the same 32 KiB block.
	proved, byPebble := 0, 0
	for _, pct := range []int{30, 50, 70, 85} {
		fs := build()
		wal := flip(fs, pct)
		before := dirState(t, fs, "db")
		_, err := Open("db", Options{FS: fs, Clock: clocktest.New(epoch)})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("a flip at %d%% of the WAL: err %v, want a *CorruptError", pct, err)
		}
		// RL-5: the refusal names the damaged file, also when Pebble's
		// replay found the damage (its error names none).
		if ce.File != wal {
			t.Fatalf("a flip at %d%% of the WAL: the refusal names %q, want %q (%v)", pct, ce.File, wal, err)
		}
		switch {
		case strings.Contains(ce.Reason, "acknowledged records"):
			proved++
		case strings.Contains(ce.Reason, "pebble reports corruption"):
			byPebble++
		default:
			t.Fatalf("a flip at %d%% of the WAL: refused for %q, neither by a batch's acknowledged seq nor by Pebble's replay", pct, ce.Reason)
		}
		if after := dirState(t, fs, "db"); !maps.Equal(before, after) {
			t.Fatalf("the refused open changed the directory: %v, then %v", before, after)
		}
	}
	// Which of the two finds a flip in an earlier group depends on the
	// synced offsets the later chunks recorded, and so on when the WAL's
	// syncs completed: on a loaded machine they lag for every group and
	// Pebble's replay reads each flip as a torn tail, and the batches' own
	// proof must refuse them all. Unloaded, Pebble's replay finds the flip
	// at 30 % and the batches prove the others.
	if proved == 0 {
		t.Fatalf("%d refusals came from a batch's acknowledged seq and %d from Pebble's replay, want some from the batches: the damage is not where the test means it to be", proved, byPebble)
	}
	t.Logf("%d refusals proved by a batch's acknowledged seq, %d found by Pebble's replay", proved, byPebble)
	fs := build()
	flip(fs, 99) // inside the final group's batch
	j := openJ(t, fs, "db", Options{})
	if got, want := j.LastSeq(), uint64((groups-1)*per); got != want {
		t.Fatalf("damage in the final batch: the journal opens at %d, want %d", got, want)
	}
	closeJ(j)
}

// TestWALSyncProofNeedsAnOffsetBeyondTheDamage: a valid WAL-sync chunk
// after an invalid one proves the invalid one was synced, and so damaged
// rather than torn, only when the offset it records as synced lies beyond
// the start of the invalid chunk (§2.1). A chunk that records exactly that
// offset as synced says the invalid chunk was not synced yet: a torn write,
// which Open must accept (RL-3).
func TestWALSyncProofNeedsAnOffsetBeyondTheDamage(t *testing.T) { // RL-3, RL-5
	t.Parallel()
	const logNum, invalid = 7, 40
	chunk := func(synced uint64) []byte {
		payload := []byte("batch")
		c := make([]byte, walSyncHeaderBytes, walSyncHeaderBytes+len(payload))
		binary.LittleEndian.PutUint16(c[4:], uint16(len(payload)))
		c[6] = 9 // full chunk, WAL-sync encoding
		binary.LittleEndian.PutUint32(c[7:], logNum)
		binary.LittleEndian.PutUint64(c[11:], synced)
		c = append(c, payload...)
		binary.LittleEndian.PutUint32(c[0:], walChecksum(c[6:]))
		return c
	}
	for _, c := range []struct {
		synced uint64
		proof  bool
	}{{invalid - 1, false}, {invalid, false}, {invalid + 1, true}} {
		b := append(make([]byte, 64), chunk(c.synced)...)
		if _, ok := walChunkAt(b, 64, logNum); !ok {
			t.Fatal("the test's chunk does not parse")
		}
		got, found := syncProofAfter(b, invalid+1, logNum, invalid)
		if found != c.proof || (found && got != c.synced) {
			t.Errorf("synced offset %d after damage at %d: proof %v (%d), want %v", c.synced, invalid, found, got, c.proof)
		}
	}
}

// TestOpenLockedIsTyped: a directory another open journal holds is
// refused with ErrLocked before anything in it is read, read-only too, and
// opens once that journal is closed.
func TestOpenLockedIsTyped(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	for _, ro := range []bool{false, true} {
		_, err := Open("db", Options{FS: fs, Clock: clocktest.New(epoch), ReadOnly: ro})
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "db") {
			t.Fatalf("read-only %v: err %v, want ErrLocked naming db", ro, err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJ(t, fs, "db", Options{ReadOnly: true})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawEdit opens the store under dir as a plain Pebble DB for f.
// someTable returns the name of a table in dir.
func someTable(t testing.TB, fs vfs.FS, dir string) string {
	t.Helper()
	ls, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Backward(ls) {
		if strings.HasSuffix(name, ".sst") {
			return name
		}
	}
	t.Fatalf("no table in %v", ls)
	return ""
}

// readFile returns path's content.
func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces path's content with b.
func writeFile(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// dirState maps each file of dir to its size.
func dirState(t testing.TB, fs vfs.FS, dir string) map[string]int64 {
	t.Helper()
	ls, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64, len(ls))
	for _, name := range ls {
		st, err := fs.Stat(fs.PathJoin(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = st.Size()
	}
	return out
}

func rawEdit(t testing.TB, fs vfs.FS, dir string, f func(db *pebble.DB)) {
	t.Helper()
	rawEditAt(t, fs, dir, pebble.FormatNewest, f)
}

// rawEditAt is rawEdit with the store (created if missing) at format.
func rawEditAt(t testing.TB, fs vfs.FS, dir string, format pebble.FormatMajorVersion, f func(db *pebble.DB)) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, FormatMajorVersion: format, Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("raw open: %v", err)
	}
	f(db)
	if err := db.Close(); err != nil {
		t.Fatalf("raw close: %v", err)
	}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func rawGet(t testing.TB, db *pebble.DB, key []byte) []byte {
	t.Helper()
	v, c, err := db.Get(key)
	if err != nil {
		t.Fatalf("raw get %q: %v", key, err)
	}
	defer func() { _ = c.Close() }()
	return bytes.Clone(v)
}

func TestOpenNewerFormat(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	mustAppend(t, j, debugRec("wf_a", "x"))
	_ = j.Close()
	rawEdit(t, fs, "db", func(db *pebble.DB) {
		_ = db.Set([]byte(metaFormat), []byte{0, 0, 0, 0, 0, 0, 0, 7}, pebble.Sync)
	})
	for _, ro := range []bool{false, true} {
		_, err := Open("db", Options{FS: fs, Clock: clocktest.New(epoch), ReadOnly: ro})
		if !errors.Is(err, record.ErrNewerVersion) || !strings.Contains(err.Error(), "version 7") {
			t.Fatalf("read-only %v: err %v, want ErrNewerVersion naming version 7", ro, err)
		}
	}
}

func TestAppendBadInput(t *testing.T) { // RL-4
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{RecordBytesMax: 1 << 10})
	defer func() { _ = j.Close() }()
	ctx := context.Background()

	// An oversized record fails only its own append, even when neighbours
	// share its group.
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 7 {
				_, errs[i] = j.Append(ctx, debugRec("wf_ok", "first"), debugRec("wf_big", strings.Repeat("x", 2000)))
				return
			}
			_, errs[i] = j.Append(ctx, debugRec("wf_ok", fmt.Sprint(i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i == 7 {
			if !errors.Is(err, record.ErrTooLarge) || !strings.Contains(err.Error(), "record 2 of 2") || !strings.Contains(err.Error(), "wf_big") {
				t.Fatalf("oversized: %v, want ErrTooLarge naming record 2 of 2 and wf_big", err)
			}
		} else if err != nil {
			t.Fatalf("neighbour %d: %v", i, err)
		}
	}
	if j.LastSeq() != 15 {
		t.Fatalf("LastSeq %d, want 15: the bad append must add nothing", j.LastSeq())
	}

	_, err := j.Append(ctx, debugRec(strings.Repeat("s", 128), "x"))
	if !errors.Is(err, record.ErrInvalid) || !strings.Contains(err.Error(), "128 bytes") {
		t.Fatalf("long stream id: %v, want ErrInvalid naming the length", err)
	}
	if _, err := j.Append(ctx); !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("no records: %v", err)
	}
	if _, err := j.AppendIndexed(ctx, []IndexEntry{{ID: "", Value: []byte("x")}}, debugRec("wf_a", "x")); !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("empty index id: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := j.Append(cctx, debugRec("wf_a", "x")); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "wf_a") {
		t.Fatalf("cancelled ctx: %v, want context.Canceled naming the stream", err)
	}
	if j.LastSeq() != 15 {
		t.Fatalf("LastSeq %d after refused appends, want 15", j.LastSeq())
	}
}

// holdSync makes the next WAL sync on g block until release is called. It
// returns a channel closed when a sync is held.
func holdSync(g *gateFS) (held <-chan struct{}, release func()) {
	h := make(chan struct{})
	r := make(chan struct{})
	var once sync.Once
	hook := func(path string) {
		if !strings.HasSuffix(path, ".log") {
			return
		}
		once.Do(func() {
			close(h)
			<-r
		})
	}
	g.syncHook.Store(&hook)
	var rel sync.Once
	return h, func() { rel.Do(func() { close(r); g.syncHook.Store(nil) }) }
}

// queuedCtx is a context that is live when Append starts and cancelled
// once Append waits (for queue space or room in a group): its first Err
// is nil, its Done is closed.
type queuedCtx struct {
	context.Context
	calls atomic.Int32
	done  chan struct{}
}

func (c *queuedCtx) Done() <-chan struct{} { return c.done }

func (c *queuedCtx) Err() error {
	if c.calls.Add(1) == 1 {
		return nil
	}
	return context.Canceled
}

func TestAppendCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	t.Run("queue space", func(t *testing.T) {
		g := newGateFS()
		j := openJ(t, g, "db", Options{QueueDepth: 1})
		defer func() { _ = j.Close() }()
		held, release := holdSync(g)
		defer release()
		first := make(chan error, 1)
		go func() { _, err := j.Append(context.Background(), debugRec("wf_a", "1")); first <- err }()
		<-held // "1" holds the only queue slot until its sync returns
		ctx := &queuedCtx{Context: context.Background(), done: make(chan struct{})}
		close(ctx.done)
		if _, err := j.Append(ctx, debugRec("wf_a", "2")); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "queue space") {
			t.Fatalf("append cancelled while waiting for queue space: %v", err)
		}
		release()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if recs := scanAll(t, j); len(recs) != 1 || msgOf(t, recs[0]) != "1" {
			t.Fatalf("log holds %d records, want only the uncancelled append", len(recs))
		}
	})
	t.Run("room in a group", func(t *testing.T) {
		g := newGateFS()
		j := openJ(t, g, "db", Options{GroupRecordsMax: 1})
		defer func() { _ = j.Close() }()
		held, release := holdSync(g)
		defer release()
		first := make(chan error, 2)
		appendMsg := func(msg string) {
			go func() { _, err := j.Append(context.Background(), debugRec("wf_a", msg)); first <- err }()
		}
		appendMsg("1")
		<-held // "1" is in its sync
		appendMsg("2")
		for j.m.taken.Load() < 2 { // "2" fills the next group
			runtime.Gosched()
		}
		ctx := &queuedCtx{Context: context.Background(), done: make(chan struct{})}
		close(ctx.done)
		if _, err := j.Append(ctx, debugRec("wf_a", "3")); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "room in a group") {
			t.Fatalf("append cancelled while waiting for room in a group: %v", err)
		}
		release()
		for range 2 {
			if err := <-first; err != nil {
				t.Fatal(err)
			}
		}
		recs := scanAll(t, j)
		if len(recs) != 2 || msgOf(t, recs[0]) != "1" || msgOf(t, recs[1]) != "2" {
			t.Fatalf("log holds %d records, want the two uncancelled appends", len(recs))
		}
	})
}

func TestGroupCommit(t *testing.T) { // RL-1, RL-3
	t.Parallel()
	g := newGateFS()
	clk := clocktest.New(epoch)
	j := openJ(t, g, "db", Options{Clock: clk})
	defer func() { _ = j.Close() }()
	held, release := holdSync(g)
	defer release()
	res := make(chan []uint64, 33)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // joined with the 32 below before res is read
		defer wg.Done()
		res <- mustAppend(t, j, debugRec("wf_first", "first"))
	}()
	<-held
	// 32 appends queue up behind the held sync and then commit as one group.
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs := make([]record.Record, 1+i%3)
			for k := range recs {
				recs[k] = debugRec(fmt.Sprintf("wf_%d", i), fmt.Sprintf("%d.%d", i, k))
			}
			res <- mustAppend(t, j, recs...)
		}()
	}
	for j.m.taken.Load() < 33 { // all 32 joined the group being built
		runtime.Gosched()
	}
	groups := j.Metrics().Groups
	release()
	wg.Wait()
	close(res)
	seen := map[uint64]bool{}
	for seqs := range res {
		for i, s := range seqs {
			if seen[s] || (i > 0 && s != seqs[i-1]+1) {
				t.Fatalf("seqs %v: duplicate or not consecutive", seqs)
			}
			seen[s] = true
		}
	}
	m := j.Metrics()
	if len(seen) != int(j.LastSeq()) || m.Records != j.LastSeq() {
		t.Fatalf("%d seqs, LastSeq %d, metric %d", len(seen), j.LastSeq(), m.Records)
	}
	if m.Groups-groups != 2 { // the held one, then one for the 32
		t.Fatalf("%d groups after the held one, want 2", m.Groups-groups)
	}
	recs := scanAll(t, j) // checks continuity, the chain and s/ entries
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	if rep, err := j.Verify(); err != nil || rep.Records != len(recs) || rep.Streams != 33 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

func TestAtMonotone(t *testing.T) { // RL-9
	t.Parallel()
	clk := clocktest.New(epoch)
	j := openJ(t, vfs.NewMem(), "db", Options{Clock: clk})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_a", "1"))
	clk.Set(epoch.Add(-time.Hour)) // the clock steps back
	mustAppend(t, j, debugRec("wf_a", "2"))
	clk.Set(epoch.Add(time.Hour))
	mustAppend(t, j, debugRec("wf_a", "3"))
	recs := scanAll(t, j)
	want := []int64{epoch.UnixNano(), epoch.UnixNano(), epoch.Add(time.Hour).UnixNano()}
	for i, r := range recs {
		if r.At != want[i] {
			t.Fatalf("seq %d at %d, want %d", r.Seq, r.At, want[i])
		}
	}
	if j.LastAt() != want[2] {
		t.Fatalf("LastAt %d", j.LastAt())
	}
}

// TestRL9_AtMonotoneAcrossReopen: journal time stays monotone across a
// restart. A journal reopened under a clock behind its last record stamps
// the next record with the last record's At, never earlier (RL-9), and the
// log still scans and verifies.
func TestRL9_AtMonotoneAcrossReopen(t *testing.T) { // RL-9
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{Clock: clocktest.New(epoch.Add(time.Hour))})
	mustAppend(t, j, debugRec("wf_a", "1"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJ(t, fs, "db", Options{Clock: clocktest.New(epoch)}) // the clock stepped back an hour
	defer func() { _ = j.Close() }()
	if got, want := j.LastAt(), epoch.Add(time.Hour).UnixNano(); got != want {
		t.Fatalf("LastAt after reopen %d, want %d", got, want)
	}
	mustAppend(t, j, debugRec("wf_a", "2"))
	recs := scanAll(t, j)
	if len(recs) != 2 || recs[1].At != recs[0].At {
		t.Fatalf("records %+v: want the second at the first's At %d", recs, epoch.Add(time.Hour).UnixNano())
	}
	if rep, err := j.Verify(); err != nil || !rep.OK() {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{})
	got := make(chan uint64, 1)
	go func() {
		s, err := j.Wait(context.Background(), 0)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	mustAppend(t, j, debugRec("wf_a", "1"))
	if s := <-got; s != 1 {
		t.Fatalf("Wait returned %d, want 1", s)
	}
	if s, err := j.Wait(context.Background(), 0); s != 1 || err != nil {
		t.Fatalf("Wait with data already there: %d, %v", s, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Wait(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled ctx: %v", err)
	}
	closed := make(chan error, 1)
	go func() { _, err := j.Wait(context.Background(), 1); closed <- err }()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait across Close: %v, want ErrClosed", err)
	}
}

// TestReadsOnlyAcknowledged holds a group's WAL sync while its batch is
// already readable in Pebble and checks that no read API serves it (RL-1).
func TestReadsOnlyAcknowledged(t *testing.T) { // RL-1
	t.Parallel()
	g := newGateFS()
	j := openJ(t, g, "db", Options{})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_a", "1"))
	held, release := holdSync(g)
	defer release()
	done := make(chan []uint64, 1)
	go func() {
		seqs, err := j.AppendIndexed(context.Background(), []IndexEntry{{ID: "wf_a", Value: []byte("done")}}, debugRec("wf_a", "2"))
		if err != nil {
			t.Error(err)
		}
		done <- seqs
	}()
	<-held
	for { // Pebble serves the batch before its sync completes.
		if _, c, err := j.db.Get(record.LogKey(2)); err == nil {
			_ = c.Close()
			break
		}
		runtime.Gosched()
	}
	idx := make(chan string, 1)
	go func() {
		v, ok, err := j.Index("wf_a")
		if err != nil {
			t.Error(err)
		}
		idx <- fmt.Sprintf("%s %v", v, ok)
	}()
	if j.LastSeq() != 1 {
		t.Fatalf("LastSeq %d before the sync", j.LastSeq())
	}
	if _, err := j.Get(2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(2) before the sync: %v, want ErrNotFound", err)
	}
	if recs := scanAll(t, j); len(recs) != 1 {
		t.Fatalf("Scan served %d records before the sync", len(recs))
	}
	it := j.ScanStream("wf_a", 0)
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Close(); err != nil || n != 1 {
		t.Fatalf("ScanStream served %d records before the sync (%v)", n, err)
	}
	select {
	case v := <-idx:
		t.Fatalf("Index returned %q while its value's sync was in flight", v)
	default:
	}
	release()
	if seqs := <-done; len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("seqs %v", seqs)
	}
	if v := <-idx; v != "done true" {
		t.Fatalf("Index after the sync: %q", v)
	}
	if r, err := j.Get(2); err != nil || msgOf(t, r) != "2" {
		t.Fatalf("Get(2): %v %v", r, err)
	}
}

func TestIndex(t *testing.T) {
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{})
	defer func() { _ = j.Close() }()
	ctx := context.Background()
	if _, ok, err := j.Index("job_1"); ok || err != nil {
		t.Fatalf("empty index: %v %v", ok, err)
	}
	if _, err := j.AppendIndexed(ctx, []IndexEntry{{ID: "job_1", Value: []byte("succeeded")}}, debugRec("job_1", "x")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := j.Index("job_1"); !ok || err != nil || string(v) != "succeeded" {
		t.Fatalf("Index: %q %v %v", v, ok, err)
	}
	if _, err := j.AppendIndexed(ctx, []IndexEntry{{ID: "job_1"}}, debugRec("job_1", "y")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := j.Index("job_1"); ok || err != nil {
		t.Fatalf("deleted entry: %v %v", ok, err)
	}
}

func TestScanRanges(t *testing.T) {
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{})
	defer func() { _ = j.Close() }()
	for i := range 20 {
		mustAppend(t, j, debugRec(fmt.Sprintf("wf_%d", i%3), fmt.Sprint(i+1)))
	}
	it := j.Scan(5, 9)
	var got []uint64
	for it.Next() {
		got = append(got, it.Record().Seq)
		if it.Envelope().Seq != it.Record().Seq {
			t.Fatal("envelope and record disagree")
		}
	}
	if err := it.Close(); err != nil || len(got) != 5 || got[0] != 5 || got[4] != 9 {
		t.Fatalf("Scan(5, 9): %v, %v", got, err)
	}
	it = j.ScanStream("wf_1", 5)
	got = got[:0]
	for it.Next() {
		if it.Record().Stream != "wf_1" {
			t.Fatal("foreign stream")
		}
		got = append(got, it.Record().Seq)
	}
	if err := it.Close(); err != nil || len(got) != 6 || got[0] != 5 || got[5] != 20 {
		t.Fatalf("ScanStream(wf_1, 5): %v, %v", got, err)
	}
	if it := j.Scan(21, 100); it.Next() || it.Err() != nil {
		t.Fatal("Scan past the end yielded something")
	}
	if _, err := j.Get(21); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(21): %v", err)
	}
	if r, err := j.Get(20); err != nil || msgOf(t, r) != "20" {
		t.Fatalf("Get(20): %v %v", r, err)
	}
	// An iterator left open is released by Close.
	open := j.Scan(1, 20)
	open.Next()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if open.Next() || !errors.Is(open.Err(), ErrClosed) {
		t.Fatalf("iterator after Close: %v", open.Err())
	}
	_ = open.Close()
	if _, err := j.Get(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := j.Append(context.Background(), debugRec("wf_a", "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestCloseDrains(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uint64]string{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				msg := fmt.Sprintf("%d.%d", i, n)
				seqs, err := j.Append(context.Background(), debugRec("wf_a", msg))
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[seqs[0]] = msg
				mu.Unlock()
			}
		}()
	}
	if _, err := j.Wait(context.Background(), 50); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	j = openJ(t, fs, "db", Options{})
	defer func() { _ = j.Close() }()
	recs := scanAll(t, j)
	for seq, msg := range acked {
		if seq > uint64(len(recs)) || msgOf(t, recs[seq-1]) != msg {
			t.Fatalf("acknowledged seq %d lost across Close", seq)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	for i := range 30 {
		mustAppend(t, j, debugRec(fmt.Sprintf("wf_%d", i%4), fmt.Sprint(i)))
	}
	if err := j.Checkpoint("ckpt"); err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint("ckpt"); err == nil {
		t.Fatal("checkpoint over an existing dir succeeded")
	}
	mustAppend(t, j, debugRec("wf_x", "after"))
	id := j.EngineID()
	_ = j.Close()
	for _, ro := range []bool{true, false} {
		c := openJ(t, fs, "ckpt", Options{ReadOnly: ro})
		if rep, err := c.Verify(); err != nil || rep.Records != 30 || c.LastSeq() != 30 || c.EngineID() != id {
			t.Fatalf("read-only %v: checkpoint %+v, %v, LastSeq %d", ro, rep, err, c.LastSeq())
		}
		if ro {
			if _, err := c.Append(context.Background(), debugRec("wf_a", "x")); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("append to read-only: %v", err)
			}
		} else {
			mustAppend(t, c, debugRec("wf_a", "x"))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSnapshots(t *testing.T) { // spec §4.3
	t.Parallel()
	fs := vfs.NewMem()
	ctx := context.Background()
	j := openJ(t, fs, "db", Options{})
	for i := range 12 {
		mustAppend(t, j, debugRec("wf_a", fmt.Sprint(i)))
	}
	for _, s := range []uint64{3, 6, 10} {
		if err := j.WriteSnapshot(ctx, s, []byte(fmt.Sprintf("state@%d", s))); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.WriteSnapshot(ctx, 13, []byte("x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("snapshot past LastSeq: %v", err)
	}
	if err := j.DeleteSnapshotsBefore(ctx, 6); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	rawEdit(t, fs, "db", func(db *pebble.DB) {
		k := appendSnapKey(nil, 10)
		v := rawGet(t, db, k)
		v[len(v)-6] ^= 1
		_ = db.Set(k, v, pebble.Sync)
	})
	j = openJ(t, fs, "db", Options{})
	defer func() { _ = j.Close() }()
	it := j.Snapshots()
	var got []string
	for it.Next() {
		s := it.Snapshot()
		if s.Err != nil {
			var ce *CorruptError
			if !errors.Is(s.Err, ErrCorrupt) || !errors.As(s.Err, &ce) || ce.Seq != 10 {
				t.Fatalf("bad snapshot error %v", s.Err)
			}
			got = append(got, fmt.Sprintf("%d:ignored", s.Seq))
			continue
		}
		got = append(got, fmt.Sprintf("%d:%s", s.Seq, s.State))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "10:ignored 6:state@6"; strings.Join(got, " ") != want {
		t.Fatalf("snapshots %q, want %q", got, want)
	}
	rep, err := j.Verify()
	if !errors.Is(err, ErrCorrupt) || rep.Snapshots != 1 || len(rep.Problems) != 1 || rep.Problems[0].Seq != 10 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	if err := j.commitOne(ctx, "delete snapshot", func(b *pebble.Batch) { _ = b.Delete(appendSnapKey(nil, 10), nil) }); err != nil {
		t.Fatal(err)
	}
	if rep, err := j.Verify(); err != nil || rep.Snapshots != 1 {
		t.Fatalf("Verify after deleting the bad snapshot: %+v, %v", rep, err)
	}
}

// TestSnapshotBoundToItsRecord: a snapshot records the crc of the record
// it follows, so a snapshot whose own envelope is intact is still ignored
// once that record was rewritten (spec §4.3: verified on read by its CRC
// and record N's crc), and Verify reports it.
func TestSnapshotBoundToItsRecord(t *testing.T) { // spec §4.3
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	mustAppend(t, j, debugRec("wf_a", "1"), debugRec("wf_a", "2"))
	if err := j.WriteSnapshot(context.Background(), 2, []byte("state@2")); err != nil {
		t.Fatal(err)
	}
	_ = j.Close()
	// Record 2 rewritten with a valid checksum and chain: only the
	// snapshot's record sum can tell.
	rawEdit(t, fs, "db", func(db *pebble.DB) {
		reseal(t, db, 2, func(e *record.Envelope) { e.At++ })
	})
	j = openJ(t, fs, "db", Options{ReadOnly: true})
	defer func() { _ = j.Close() }()
	it := j.Snapshots()
	if !it.Next() {
		t.Fatalf("no snapshot: %v", it.Err())
	}
	s := it.Snapshot()
	var ce *CorruptError
	if !errors.As(s.Err, &ce) || ce.Seq != 2 || !strings.Contains(s.Err.Error(), "taken after a record with crc") || s.State != nil {
		t.Fatalf("snapshot after a rewritten record: %+v, want a *CorruptError at seq 2 and no state", s)
	}
	if it.Next() {
		t.Fatalf("a second snapshot: %+v", it.Snapshot())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := j.Verify()
	if !errors.Is(err, ErrCorrupt) || rep.Snapshots != 0 || len(rep.Problems) != 1 || rep.Problems[0].Seq != 2 {
		t.Fatalf("Verify: %+v, %v; want one problem, the snapshot at seq 2", rep, err)
	}
}

// TestGroupKeepsIndexOrderAndStreams builds one group from two appends
// while the previous group's sync is held, with index entries that set and
// delete the same ids, within an append and across the two. A group
// writes its e/ keys first and its s/ keys and index entries after them;
// the later entry for an id must still win, and every record must still
// be found through its stream.
func TestGroupKeepsIndexOrderAndStreams(t *testing.T) {
	t.Parallel()
	g := newGateFS()
	j := openJ(t, g, "db", Options{})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("job_0", "warm-up"))

	held, release := holdSync(g)
	defer release()
	var wg sync.WaitGroup
	appendIndexed := func(index []IndexEntry, recs ...record.Record) {
		wg.Go(func() {
			if _, err := j.AppendIndexed(context.Background(), index, recs...); err != nil {
				t.Error(err)
			}
		})
	}
	joined := func(n uint64) { // waits until n appends joined a group
		for j.m.taken.Load() < n {
			runtime.Gosched()
		}
	}
	base := j.m.taken.Load()
	appendIndexed([]IndexEntry{{ID: "job_1", Value: []byte("v1")}}, debugRec("job_1", "a"))
	<-held // the first group is syncing; the next two appends share a group
	appendIndexed([]IndexEntry{{ID: "job_1", Value: []byte("v2")}, {ID: "job_2", Value: []byte("w")},
		{ID: "job_3", Value: []byte("x")}, {ID: "job_3"}},
		debugRec("job_1", "b"), debugRec("job_2", "c"))
	joined(base + 2)
	appendIndexed([]IndexEntry{{ID: "job_2"}, {ID: "job_1", Value: []byte("v3")}},
		debugRec("job_2", "d"), debugRec("job_1", "e"))
	joined(base + 3)
	release()
	wg.Wait()

	if groups := j.Metrics().Groups; groups != 3 {
		t.Fatalf("%d groups, want 3 (warm-up, first, the two joined)", groups)
	}
	for id, want := range map[string]string{"job_1": "v3", "job_2": "", "job_3": ""} {
		v, ok, err := j.Index(id)
		if err != nil || ok != (want != "") || string(v) != want {
			t.Errorf("Index(%s) = %q, %v, %v; want %q", id, v, ok, err, want)
		}
	}
	for id, want := range map[string][]string{"job_1": {"a", "b", "e"}, "job_2": {"c", "d"}} {
		it := j.ScanStream(id, 1)
		var got []string
		for it.Next() {
			got = append(got, msgOf(t, it.Record()))
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("stream %s holds %v, want %v", id, got, want)
		}
	}
}
