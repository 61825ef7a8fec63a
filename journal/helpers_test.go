package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// parseSeed reads a seed as sim.Seeds does: decimal, or hex after 0x.
func parseSeed(s string) (uint64, error) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return strconv.ParseUint(s[2:], 16, 64)
	}
	return strconv.ParseUint(s, 10, 64)
}

// seedList returns the seeds of a randomized test: n by default, n/10 with
// -short, QUIRE_SEEDS=N seeds, or exactly QUIRE_SEED=S (decimal or 0x hex).
func seedList(t testing.TB, n int) []uint64 {
	if s := os.Getenv("QUIRE_SEED"); s != "" {
		v, err := parseSeed(s)
		if err != nil {
			t.Fatalf("QUIRE_SEED=%q: %v", s, err)
		}
		return []uint64{v}
	}
	if s := os.Getenv("QUIRE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("QUIRE_SEEDS=%q: want a positive count", s)
		}
		n = v
	} else if testing.Short() {
		n = max(1, n/10)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// forSeeds runs f once per seed, naming the seed on failure.
func forSeeds(t *testing.T, n int, f func(t *testing.T, seed uint64)) {
	for _, seed := range seedList(t, n) {
		ok := t.Run(fmt.Sprintf("seed=%#x", seed), func(t *testing.T) { f(t, seed) })
		if !ok {
			t.Logf("reproduce: QUIRE_SEED=%#x go test ./journal -run '%s'", seed, t.Name())
			return
		}
	}
}

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

func debugRec(stream, msg string) record.Record {
	return record.Record{Stream: stream, Body: &record.Debug{Subject: stream, Code: "test", Message: msg}}
}

func msgOf(t testing.TB, r record.Record) string {
	d, ok := r.Body.(*record.Debug)
	if !ok {
		t.Fatalf("seq %d: body %T, want *record.Debug", r.Seq, r.Body)
	}
	return d.Message
}

func openJ(t testing.TB, fs vfs.FS, dir string, opts Options) *Journal {
	t.Helper()
	opts.FS = fs
	if opts.Clock == nil {
		opts.Clock = clocktest.New(epoch)
	}
	j, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return j
}

// closeJ closes j; after a fail-stop, when Close leaves the store alone by
// design, it also closes the Pebble store so that tests do not accumulate
// abandoned stores.
func closeJ(j *Journal) {
	err := j.Close()
	if errors.Is(err, ErrFailStop) && j.db != nil {
		_ = guard(func() (err error) {
			defer func() {
				if recover() != nil {
					err = nil
				}
			}()
			return j.db.Close()
		})
	}
}

func mustAppend(t testing.TB, j *Journal, recs ...record.Record) []uint64 {
	t.Helper()
	seqs, err := j.Append(context.Background(), recs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return seqs
}

// scanAll returns every record of the log, failing on any error.
func scanAll(t testing.TB, j *Journal) []record.Record {
	t.Helper()
	it := j.Scan(1, ^uint64(0))
	var out []record.Record
	for it.Next() {
		out = append(out, it.Record())
	}
	if err := it.Close(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	return out
}

// gateFS wraps a crashable MemFS so that crash images can be taken while
// the journal commits. Every mutating operation holds gate shared; snapshot
// takes it exclusively, so the synced and full clones it takes describe the
// same instant and no MemFS operation runs during CrashClone. This also
// avoids the CrashClone deadlock of spec/reliability.md §2.4 (MemFS's
// ReuseForWrite and Lock re-entering cloneMu): ReuseForWrite is done here as
// Rename plus OpenReadWrite, as on a real disk. syncHook, when set, runs
// before each WAL sync (tests block it to hold a commit in flight).
type gateFS struct {
	*vfs.MemFS
	gate     sync.RWMutex
	syncHook atomic.Pointer[func(path string)]
}

func newGateFS() *gateFS { return &gateFS{MemFS: vfs.NewCrashableMem()} }

func (g *gateFS) wrap(path string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, g: g, path: path}, nil
}

func (g *gateFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	f, err := g.MemFS.Create(name, c)
	return g.wrap(name, f, err)
}

func (g *gateFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.MemFS.Open(name, opts...)
	return g.wrap(name, f, err)
}

func (g *gateFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	f, err := g.MemFS.OpenReadWrite(name, c, opts...)
	return g.wrap(name, f, err)
}

func (g *gateFS) OpenDir(name string) (vfs.File, error) {
	f, err := g.MemFS.OpenDir(name)
	return g.wrap(name, f, err)
}

func (g *gateFS) Link(o, n string) error {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.MemFS.Link(o, n)
}

func (g *gateFS) Remove(name string) error {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.MemFS.Remove(name)
}

func (g *gateFS) RemoveAll(name string) error {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.MemFS.RemoveAll(name)
}

func (g *gateFS) Rename(o, n string) error {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.MemFS.Rename(o, n)
}

func (g *gateFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	if err := g.MemFS.Rename(o, n); err != nil {
		return nil, err
	}
	f, err := g.MemFS.OpenReadWrite(n, c)
	return g.wrap(n, f, err)
}

func (g *gateFS) MkdirAll(dir string, perm os.FileMode) error {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.MemFS.MkdirAll(dir, perm)
}

func (g *gateFS) Lock(name string) (io.Closer, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.MemFS.Lock(name)
}

type gateFile struct {
	vfs.File
	g    *gateFS
	path string
}

func (f *gateFile) Write(p []byte) (int, error) {
	f.g.gate.RLock()
	defer f.g.gate.RUnlock()
	return f.File.Write(p)
}

func (f *gateFile) WriteAt(p []byte, off int64) (int, error) {
	f.g.gate.RLock()
	defer f.g.gate.RUnlock()
	return f.File.WriteAt(p, off)
}

func (f *gateFile) Sync() error {
	if h := f.g.syncHook.Load(); h != nil {
		(*h)(f.path)
	}
	f.g.gate.RLock()
	defer f.g.gate.RUnlock()
	return f.File.Sync()
}

func (f *gateFile) SyncData() error { return f.Sync() }

// crashImage returns what a crash now could leave: pct 0 is the synced
// state, 100 everything written, and 1..99 a partial image built by
// partialImage from key. It may run while the journal commits.
func (g *gateFS) crashImage(pct int, key uint64) *vfs.MemFS {
	g.gate.Lock()
	defer g.gate.Unlock()
	return crashImageOf(g.MemFS, pct, key)
}

func crashImageOf(fs *vfs.MemFS, pct int, key uint64) *vfs.MemFS {
	synced := fs.CrashClone(vfs.CrashCloneCfg{})
	if pct == 0 {
		return synced
	}
	full := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: newRand(key, 0)})
	if pct >= 100 {
		return full
	}
	return partialImage(synced, full, pct, key)
}

// partialImage merges the unsynced part of full into synced the way
// CrashClone does (each unsynced 4 KiB block and directory entry kept with
// probability pct%), but reproducibly: paths are walked in sorted order and
// the keep decision is a hash of (key, path, offset, block bytes), not a
// draw in Go map order (spec/reliability.md §2.4). A file whose directory
// entry is not synced gets all of its blocks through the same rule (its
// synced part is unknown to the clones; Pebble syncs a directory before
// relying on a new file, so such files hold no acknowledged data).
func partialImage(synced, full *vfs.MemFS, pct int, key uint64) *vfs.MemFS {
	out := vfs.NewCrashableMem()
	keep := func(path string, off int, block []byte) bool {
		h := fnv.New64a()
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], key)
		binary.BigEndian.PutUint64(b[8:], uint64(off))
		h.Write(b[:])
		h.Write([]byte(path))
		h.Write(block)
		return h.Sum64()%100 < uint64(pct)
	}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := full.List(dir)
		if err != nil {
			panic(err)
		}
		slices.Sort(names)
		for _, name := range names {
			path := full.PathJoin(dir, name)
			st, err := full.Stat(path)
			if err != nil {
				panic(err)
			}
			_, serr := synced.Stat(path)
			inSynced := serr == nil
			if !inSynced && !keep(path, -1, nil) {
				continue
			}
			if st.IsDir() {
				if err := out.MkdirAll(path, 0o755); err != nil {
					panic(err)
				}
				walk(path)
				continue
			}
			data, err := full.UnsafeGetFileDataBuffer(path)
			if err != nil {
				panic(err)
			}
			var base []byte
			if inSynced {
				if base, err = synced.UnsafeGetFileDataBuffer(path); err != nil {
					panic(err)
				}
			}
			res := bytes.Clone(base)
			for off := 0; off < len(data); off += 4096 {
				blk := data[off:min(off+4096, len(data))]
				var sb []byte
				if off < len(base) {
					sb = base[off:min(off+4096, len(base))]
				}
				if bytes.Equal(blk, sb) || !keep(path, off, blk) {
					continue
				}
				if grow := off + len(blk) - len(res); grow > 0 {
					res = append(res, make([]byte, grow)...)
				}
				copy(res[off:], blk)
			}
			f, err := out.Create(path, vfs.WriteCategoryUnspecified)
			if err != nil {
				panic(err)
			}
			if _, err := f.Write(res); err != nil {
				panic(err)
			}
			if err := f.Sync(); err != nil {
				panic(err)
			}
			_ = f.Close()
		}
		d, err := out.OpenDir(dir)
		if err != nil {
			panic(err)
		}
		_ = d.Sync()
		_ = d.Close()
	}
	walk("")
	return out
}
