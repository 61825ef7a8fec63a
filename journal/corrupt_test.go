package journal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

// walsOf returns the WAL file names in dir of fs, oldest first.
func walsOf(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func fileLen(fs *vfs.MemFS, path string) int {
	b, err := fs.UnsafeGetFileDataBuffer(path)
	if err != nil {
		return 0
	}
	return len(b)
}

// expectCorrupt fails unless err satisfies errors.Is(err, ErrCorrupt).
func expectCorrupt(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: %v, want an error satisfying errors.Is(err, ErrCorrupt)", what, err)
	}
}

func TestT5_MidJournalBitFlip(t *testing.T) { // RL-5
	t.Parallel()
	t.Run("deterministic", func(t *testing.T) {
		// spec §2.1: 1000 synced records, one byte flipped in the middle of
		// the newest WAL: Open refuses instead of silently losing half.
		fs := vfs.NewCrashableMem()
		j := openJ(t, fs, "db", Options{})
		for i := range 1000 {
			mustAppend(t, j, debugRec("wf_a", fmt.Sprint(i)))
		}
		img := fs.CrashClone(vfs.CrashCloneCfg{})
		_ = j.Close()
		wals := walsOf(t, img, "db")
		wal := "db/" + wals[len(wals)-1]
		data, _ := img.UnsafeGetFileDataBuffer(wal)
		data[len(data)/2] ^= 0xff
		_, err := Open("db", Options{FS: img, Clock: j.clock})
		expectCorrupt(t, "Open after a mid-WAL flip", err)
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("%v is not a *CorruptError", err)
		}
	})
	forSeeds(t, 200, func(t *testing.T, seed uint64) {
		r := newRand(seed, 0)
		fs := vfs.NewCrashableMem()
		j := openJ(t, fs, "db", Options{})
		var want []string
		add := func() {
			msg := fmt.Sprintf("m%d-%s", len(want), strings.Repeat("p", r.IntN(200)))
			mustAppend(t, j, debugRec(fmt.Sprintf("wf_%d", r.IntN(10)), msg))
			want = append(want, msg)
		}
		for range 20 + r.IntN(150) {
			add()
		}
		_ = j.Close()
		j = openJ(t, fs, "db", Options{}) // flushes those records into an sstable
		for range r.IntN(100) {
			add()
		}
		before := fs.CrashClone(vfs.CrashCloneCfg{})
		add()
		img := fs.CrashClone(vfs.CrashCloneCfg{})
		_ = j.Close()

		names, _ := img.List("db")
		var files []string
		for _, n := range names {
			if strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".sst") {
				if fileLen(img, "db/"+n) > 0 {
					files = append(files, "db/"+n)
				}
			}
		}
		slices.Sort(files)
		file := files[r.IntN(len(files))]
		data, _ := img.UnsafeGetFileDataBuffer(file)
		off := r.IntN(len(data))
		data[off] ^= byte(1 + r.IntN(255))
		wals := walsOf(t, img, "db")
		newest := "db/" + wals[len(wals)-1]
		// A flip inside the final record reads like a torn write (§1, not
		// promised): that record alone may be lost.
		inFinal := file == newest && off >= fileLen(before, newest)
		where := fmt.Sprintf("flip at %s+%d (final record: %v)", file, off, inFinal)

		ro := seed%2 == 0
		j2, err := Open("db", Options{FS: img, Clock: j.clock, ReadOnly: ro})
		if err != nil {
			expectCorrupt(t, where+": Open", err)
			return
		}
		defer closeJ(j2)
		if _, err := j2.Verify(); err != nil {
			expectCorrupt(t, where+": Verify", err)
			return
		}
		it := j2.Scan(1, ^uint64(0))
		var got []string
		for it.Next() {
			got = append(got, msgOf(t, it.Record()))
		}
		if err := it.Close(); err != nil {
			expectCorrupt(t, where+": Scan", err)
			return
		}
		if slices.Equal(got, want) || (inFinal && slices.Equal(got, want[:len(want)-1])) {
			return
		}
		t.Fatalf("%s: journal opened and verified with %d records, want %d: silent loss", where, len(got), len(want))
	})
}

func TestT6_TornFinalRecord(t *testing.T) { // RL-3, RL-4
	t.Parallel()
	forSeeds(t, 200, func(t *testing.T, seed uint64) {
		r := newRand(seed, 0)
		fs := vfs.NewCrashableMem()
		j := openJ(t, fs, "db", Options{})
		ctx := context.Background()
		var want []string
		index := map[string]string{}
		appendN := func(k int, commit bool) {
			recs := make([]record.Record, k)
			var msgs []string
			for i := range recs {
				msg := fmt.Sprintf("m%d.%d", len(want), i)
				recs[i] = debugRec(fmt.Sprintf("wf_%d", r.IntN(20)), msg)
				msgs = append(msgs, msg)
			}
			id := fmt.Sprintf("wf_%d", r.IntN(20))
			if _, err := j.AppendIndexed(ctx, []IndexEntry{{ID: id, Value: []byte(msgs[0])}}, recs...); err != nil {
				t.Fatal(err)
			}
			if commit {
				want = append(want, msgs...)
				index[id] = msgs[0]
			}
		}
		for range 1 + r.IntN(100) {
			appendN(1+r.IntN(3), true)
		}
		before := fs.CrashClone(vfs.CrashCloneCfg{})
		appendN(2+r.IntN(4), false)
		img := fs.CrashClone(vfs.CrashCloneCfg{})
		_ = j.Close()

		wals := walsOf(t, img, "db")
		wal := "db/" + wals[len(wals)-1]
		lo, hi := fileLen(before, wal), fileLen(img, wal)
		if lo == 0 || hi <= lo {
			t.Fatalf("the last append did not extend %s (%d -> %d bytes)", wal, lo, hi)
		}
		data, _ := img.UnsafeGetFileDataBuffer(wal)
		cut := lo + r.IntN(hi-lo)
		kept := slices.Clone(data[:cut])
		f, err := img.Create(wal, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = f.Write(kept)
		_ = f.Sync()
		_ = f.Close()

		j2 := openJ(t, img, "db", Options{})
		defer closeJ(j2)
		if rep, err := j2.Verify(); err != nil || !rep.OK() {
			t.Fatalf("cut %s at %d (%d..%d): Verify %v %v", wal, cut, lo, hi, err, rep.Problems)
		}
		var got []string
		for _, rec := range scanAll(t, j2) {
			got = append(got, msgOf(t, rec))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("cut %s at %d (%d..%d): %d records, want the %d before the torn append", wal, cut, lo, hi, len(got), len(want))
		}
		for id, v := range index {
			if got, ok, err := j2.Index(id); err != nil || !ok || string(got) != v {
				t.Fatalf("Index(%q) = %q %v %v, want %q", id, got, ok, err, v)
			}
		}
	})
}

// t7Journal writes 30 records round-robin over streams wf_0..wf_4 (seq s
// belongs to wf_{(s-1)%5}) and closes the journal.
func t7Journal(t *testing.T) vfs.FS {
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	for s := 1; s <= 30; s++ {
		mustAppend(t, j, debugRec(t7Stream(uint64(s)), fmt.Sprint(s)))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return fs
}

func t7Stream(seq uint64) string { return fmt.Sprintf("wf_%d", (seq-1)%5) }

// t7Edited opens t7Journal's journal after edit changed its store.
func t7Edited(t *testing.T, edit func(t *testing.T, db *pebble.DB)) *Journal {
	fs := t7Journal(t)
	rawEdit(t, fs, "db", func(db *pebble.DB) { edit(t, db) })
	return openJ(t, fs, "db", Options{})
}

// reseal re-encodes the record under the key of seq with f applied to its
// envelope, with a valid checksum.
func reseal(t testing.TB, db *pebble.DB, seq uint64, f func(e *record.Envelope)) {
	env, err := record.ParseEnvelope(seq, rawGet(t, db, record.LogKey(seq)), record.RecordBytesMaxDefault)
	if err != nil {
		t.Fatal(err)
	}
	f(&env)
	v, _ := record.AppendEnvelope(nil, seq, env.PrevSum, env.At, record.Prepared{Kind: env.Kind, Stream: env.Stream, Payload: env.Payload})
	if env.Seq != seq { // a changed header seq: patch it and recompute the crc
		binary.BigEndian.PutUint64(v[5:13], env.Seq)
		sum := record.Checksum(append(record.LogKey(seq), v[:len(v)-4]...))
		binary.BigEndian.PutUint32(v[len(v)-4:], sum)
	}
	if err := db.Set(record.LogKey(seq), v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func TestT7_EnvelopeAndChain(t *testing.T) { // RL-5
	t.Parallel()
	cases := []struct {
		name   string
		edit   func(t *testing.T, db *pebble.DB)
		seq    uint64
		stream string
		reason string
		broken string // the one stream whose ScanStream fails, if any
	}{
		{"swap two records", func(t *testing.T, db *pebble.DB) {
			a, b := rawGet(t, db, record.LogKey(10)), rawGet(t, db, record.LogKey(20))
			_ = db.Set(record.LogKey(10), b, pebble.Sync)
			_ = db.Set(record.LogKey(20), a, pebble.Sync)
		}, 10, "wf_4", "checksum", "wf_4"},
		{"copy a record under another seq", func(t *testing.T, db *pebble.DB) {
			_ = db.Set(record.LogKey(22), rawGet(t, db, record.LogKey(10)), pebble.Sync)
		}, 22, "wf_1", "checksum", "wf_1"},
		{"change a header seq", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 15, func(e *record.Envelope) { e.Seq = 16 })
		}, 15, "wf_4", "seq", "wf_4"},
		{"drop a middle record", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(record.LogKey(12), pebble.Sync)
		}, 12, "wf_1", "missing", "wf_1"},
		{"corrupt a payload byte", func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, record.LogKey(17))
			v[len(v)-6] ^= 0x20
			_ = db.Set(record.LogKey(17), v, pebble.Sync)
		}, 17, "wf_1", "checksum", "wf_1"},
		{"break the chain between two valid records", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 9, func(e *record.Envelope) { e.PrevSum++ })
		}, 9, "wf_3", "chain", ""},
		{"move an s/ entry to another stream", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(appendStreamKey(nil, "wf_2", 8), pebble.Sync)
			_ = db.Set(appendStreamKey(nil, "wf_3", 8), nil, pebble.Sync)
		}, 8, "wf_2", `"wf_3"`, "wf_3"},
		{"delete an s/ entry", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(appendStreamKey(nil, "wf_4", 5), pebble.Sync)
		}, 5, "wf_4", "no s/ index entry", ""},
		// Journal time is monotone (RL-9): a record whose At goes back
		// breaks the order, even with its checksum and chain intact.
		{"move an At back", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 12, func(e *record.Envelope) { e.At-- })
			env, err := record.ParseEnvelope(12, rawGet(t, db, record.LogKey(12)), record.RecordBytesMaxDefault)
			if err != nil {
				t.Fatal(err)
			}
			reseal(t, db, 13, func(e *record.Envelope) { e.PrevSum = env.Sum })
		}, 12, "wf_1", "before the previous", "wf_1"},
		// Seq 1 chains to the engine id (§4.1): a log put under another
		// store's metadata, as by a mixed-up restore, breaks at its start.
		{"move the log under another engine id", func(t *testing.T, db *pebble.DB) {
			_ = db.Set([]byte(metaEngine), []byte("01J9Z3W8Q5B6X4T2N7M0K1R8HC"), pebble.Sync)
		}, 1, "wf_0", "chain", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := t7Edited(t, c.edit)
			defer func() { _ = j.Close() }()
			check := func(what string, err error) {
				t.Helper()
				var ce *CorruptError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("%s: %v, want a *CorruptError", what, err)
				}
				if ce.Seq != c.seq || ce.Stream != c.stream || !strings.Contains(err.Error(), c.reason) {
					t.Fatalf("%s: seq %d stream %q (%v), want seq %d stream %q mentioning %s", what, ce.Seq, ce.Stream, err, c.seq, c.stream, c.reason)
				}
			}
			it := j.Scan(1, ^uint64(0))
			n := 0
			for it.Next() {
				n++
			}
			check("Scan", it.Close())
			if n != int(c.seq-1) {
				t.Fatalf("Scan yielded %d records before the error, want %d", n, c.seq-1)
			}
			// A scan starting at the damage reports it too (its chain check
			// starts from the record before).
			it = j.Scan(c.seq, c.seq)
			it.Next()
			check("Scan from the damaged seq", it.Close())
			if _, err := j.Get(c.seq); c.reason != "chain" && c.reason != "before the previous" { // Get checks no neighbour
				check("Get", err)
			}
			rep, err := j.Verify()
			expectCorrupt(t, "Verify", err)
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Seq == c.seq && p.Stream == c.stream)
			}
			if !found {
				t.Fatalf("Verify problems %+v do not name seq %d stream %q", rep.Problems, c.seq, c.stream)
			}
			// The damaged stream stops at its damaged record; the others read
			// in full (§4.4: quarantine one stream, replay the rest).
			for s := range 5 {
				id := fmt.Sprintf("wf_%d", s)
				it := j.ScanStream(id, 0)
				for it.Next() {
				}
				err := it.Close()
				switch {
				case id == c.broken:
					var ce *CorruptError
					if !errors.As(err, &ce) || ce.Seq != c.seq || ce.Stream != id {
						t.Fatalf("ScanStream %s: %v, want a *CorruptError at seq %d", id, err, c.seq)
					}
				case err != nil:
					t.Fatalf("ScanStream %s: %v", id, err)
				}
			}
		})
	}
}

// TestT7_VerifyFindsWhatScansCannot: Verify's problems name damage that a
// scan of the log alone does not reach (RL-5, §4.2): an s/ entry whose
// record names another stream (the reverse direction), each s/ entry of a
// range of missing records, and a record whose checksum holds but whose
// payload does not decode.
func TestT7_VerifyFindsWhatScansCannot(t *testing.T) { // RL-5
	t.Parallel()
	cases := []struct {
		name string
		edit func(t *testing.T, db *pebble.DB)
		want []Problem // Reason: a part of it
	}{
		{"an extra s/ entry naming another stream", func(t *testing.T, db *pebble.DB) {
			_ = db.Set(appendStreamKey(nil, "wf_3", 8), nil, pebble.Sync)
		}, []Problem{{8, "wf_3", `names stream "wf_3", record names "wf_2"`}}},
		{"two records missing", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(record.LogKey(12), pebble.Sync)
			_ = db.Delete(record.LogKey(13), pebble.Sync)
		}, []Problem{{12, "wf_1", "records 12..13 missing"}, {13, "wf_2", "s/ index entry without its record"}}},
		{"a valid checksum over a payload that does not decode", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 30, func(e *record.Envelope) { e.Payload = []byte{0xc1} })
		}, []Problem{{30, "wf_4", "decode"}}},
		// The journal's tail ends at 28 now, so the log pass cannot see
		// the loss: the s/ entries past it, without their records, do.
		{"the last two records lost, their s/ entries kept", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(record.LogKey(29), pebble.Sync)
			_ = db.Delete(record.LogKey(30), pebble.Sync)
		}, []Problem{{29, "wf_3", "without its record"}, {30, "wf_4", "without its record"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := t7Edited(t, c.edit)
			defer func() { _ = j.Close() }()
			rep, err := j.Verify()
			expectCorrupt(t, "Verify", err)
			if len(rep.Problems) != len(c.want) {
				t.Fatalf("problems %+v, want %d", rep.Problems, len(c.want))
			}
			for i, w := range c.want {
				p := rep.Problems[i]
				if p.Seq != w.Seq || p.Stream != w.Stream || !strings.Contains(p.Reason, w.Reason) {
					t.Fatalf("problem %d: %+v, want seq %d stream %q mentioning %q", i, p, w.Seq, w.Stream, w.Reason)
				}
			}
		})
	}
}

// A quarantining scan reads past damage it can attribute to a stream
// through the s/ index, reporting each damaged seq with its stream, and
// still ends at damage that leaves the order untrustworthy (RL-5, §4.4).
func TestT7_QuarantiningScan(t *testing.T) { // RL-5
	t.Parallel()
	cases := []struct {
		name    string
		edit    func(t *testing.T, db *pebble.DB)
		damaged map[uint64]string // seq -> stream, when the scan reads on
		refuse  uint64            // the seq of the error that ends it, else 0
	}{
		{"swap two records", func(t *testing.T, db *pebble.DB) {
			a, b := rawGet(t, db, record.LogKey(10)), rawGet(t, db, record.LogKey(20))
			_ = db.Set(record.LogKey(10), b, pebble.Sync)
			_ = db.Set(record.LogKey(20), a, pebble.Sync)
		}, map[uint64]string{10: "wf_4", 20: "wf_4"}, 0},
		{"corrupt a payload byte", func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, record.LogKey(17))
			v[len(v)-6] ^= 0x20
			_ = db.Set(record.LogKey(17), v, pebble.Sync)
		}, map[uint64]string{17: "wf_1"}, 0},
		{"a valid checksum over an unknown kind", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 23, func(e *record.Envelope) { e.Kind = 250 })
		}, map[uint64]string{23: "wf_2"}, 0},
		// A record whose checksum holds but whose payload does not decode
		// is damaged alone: the chain goes on from its checksum, so the
		// record after it, chained to it, reads as sound.
		{"a valid checksum over a payload that does not decode", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 29, func(e *record.Envelope) { e.Payload = []byte{0xc1} })
			env, err := record.ParseEnvelope(29, rawGet(t, db, record.LogKey(29)), record.RecordBytesMaxDefault)
			if err != nil {
				t.Fatal(err)
			}
			reseal(t, db, 30, func(e *record.Envelope) { e.PrevSum = env.Sum })
		}, map[uint64]string{29: "wf_3"}, 0},
		{"drop a middle record", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(record.LogKey(12), pebble.Sync)
		}, nil, 12},
		{"break the chain between two valid records", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 9, func(e *record.Envelope) { e.PrevSum++ })
		}, nil, 9},
		{"delete an s/ entry", func(t *testing.T, db *pebble.DB) {
			_ = db.Delete(appendStreamKey(nil, "wf_4", 5), pebble.Sync)
		}, nil, 5},
		{"damage with no s/ entry", func(t *testing.T, db *pebble.DB) {
			v := rawGet(t, db, record.LogKey(14))
			v[len(v)-6] ^= 0x20
			_ = db.Set(record.LogKey(14), v, pebble.Sync)
			_ = db.Delete(appendStreamKey(nil, "wf_3", 14), pebble.Sync)
		}, nil, 14},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := t7Edited(t, c.edit)
			defer func() { _ = j.Close() }()
			it := j.ScanQuarantining(0, math.MaxUint64)
			var seq uint64
			for it.Next() {
				seq++
				if d := it.Damaged(); d != nil {
					if want, ok := c.damaged[seq]; !ok || d.Seq != seq || d.Stream != want {
						t.Fatalf("seq %d damaged %+v, want stream %q", seq, d, want)
					}
					if !errors.Is(d, ErrCorrupt) {
						t.Fatalf("damage %v does not match ErrCorrupt", d)
					}
					continue
				}
				if _, bad := c.damaged[seq]; bad {
					t.Fatalf("seq %d read as sound", seq)
				}
				if r := it.Record(); r.Seq != seq || r.Stream != t7Stream(seq) || msgOf(t, r) != fmt.Sprint(seq) {
					t.Fatalf("seq %d read as %+v", seq, r)
				}
			}
			err := it.Close()
			if c.refuse == 0 {
				if err != nil || seq != 30 {
					t.Fatalf("scan ended at seq %d with %v, want all 30 records", seq, err)
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Seq != c.refuse {
				t.Fatalf("scan ended at seq %d with %v, want a *CorruptError at seq %d", seq, err, c.refuse)
			}
		})
	}
}

// Damage in the engine's own stream is never quarantined: the scan ends
// there (§4.4).
func TestT7_QuarantiningScanRefusesEngineStream(t *testing.T) { // RL-5
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	mustAppend(t, j, debugRec("wf_0", "1"), debugRec(record.EngineStream, "2"), debugRec("wf_0", "3"))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	rawEdit(t, fs, "db", func(db *pebble.DB) {
		v := rawGet(t, db, record.LogKey(2))
		v[len(v)-6] ^= 0x20
		_ = db.Set(record.LogKey(2), v, pebble.Sync)
	})
	j = openJ(t, fs, "db", Options{})
	defer func() { _ = j.Close() }()
	it := j.ScanQuarantining(0, math.MaxUint64)
	n := 0
	for it.Next() {
		n++
	}
	var ce *CorruptError
	if err := it.Close(); !errors.As(err, &ce) || ce.Seq != 2 || ce.Stream != record.EngineStream || n != 1 {
		t.Fatalf("scan read %d records and ended with %v, want a *CorruptError at seq 2 in the engine stream", n, err)
	}
}

// TestOpenRefusesADamagedTail: the next record chains to the last one, so
// a read-write Open refuses a journal whose last record fails its checks,
// with a *CorruptError naming its seq and stream, and appends nothing; a
// read-only Open goes on so that Verify can report the damage (RL-5).
func TestOpenRefusesADamagedTail(t *testing.T) { // RL-5
	t.Parallel()
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	mustAppend(t, j, debugRec("wf_a", "1"), debugRec("wf_b", "2"), debugRec("wf_c", "3"))
	_ = j.Close()
	rawEdit(t, fs, "db", func(db *pebble.DB) {
		v := rawGet(t, db, record.LogKey(3))
		v[len(v)-6] ^= 0x20
		_ = db.Set(record.LogKey(3), v, pebble.Sync)
	})
	_, err := Open("db", Options{FS: fs, Clock: clocktest.New(epoch)})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Seq != 3 || ce.Stream != "wf_c" {
		t.Fatalf("read-write Open over a damaged tail: %v, want a *CorruptError at seq 3 stream wf_c", err)
	}
	j = openJ(t, fs, "db", Options{ReadOnly: true})
	defer func() { _ = j.Close() }()
	if j.LastSeq() != 3 {
		t.Fatalf("read-only LastSeq %d, want 3", j.LastSeq())
	}
	rep, err := j.Verify()
	expectCorrupt(t, "Verify", err)
	if rep.Records != 2 || len(rep.Problems) != 1 || rep.Problems[0].Seq != 3 || rep.Problems[0].Stream != "wf_c" {
		t.Fatalf("Verify: %+v", rep)
	}
}
