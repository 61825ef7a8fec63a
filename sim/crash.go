package sim

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
)

const blockSize = 4096

// crashImage returns what a crash now could leave of the world's
// filesystem, keeping pct percent of the unsynced data. 0 and 100 come
// from CrashClone directly (both reproducible); a partial image is built
// here from the two, because CrashClone walks directories in map order and
// is not reproducible between 1 and 99 percent: each unsynced 4 KiB block
// or file is kept when a hash of (seed, crash number, path, offset) falls
// below pct, walking paths in sorted order.
func (w *World) crashImage(pct int) *vfs.MemFS {
	if pct <= 0 {
		return w.fs.CrashClone(vfs.CrashCloneCfg{})
	}
	full := w.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(w.seed, uint64(w.crashN)))})
	if pct >= 100 {
		return full
	}
	synced := w.fs.CrashClone(vfs.CrashCloneCfg{})
	out := vfs.NewCrashableMem()
	if err := w.merge(out, full, synced, "", pct); err != nil {
		w.fail("build crash image: %w", err)
		return synced
	}
	return out
}

func (w *World) keep(path string, off int64, pct int) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s/%d", w.seed, w.crashN, path, off)
	return int(mix(h.Sum64())%100) < pct
}

func (w *World) merge(out, full, synced vfs.FS, dir string, pct int) error {
	list := "/"
	if dir != "" {
		list = dir
	}
	names, err := full.List(list)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		p := name
		if dir != "" {
			p = full.PathJoin(dir, name)
		}
		fi, err := full.Stat(p)
		if err != nil {
			return err
		}
		_, serr := synced.Stat(p)
		if fi.IsDir() {
			if serr != nil && !w.keep(p, -1, pct) {
				continue
			}
			if err := out.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := w.merge(out, full, synced, p, pct); err != nil {
				return err
			}
			continue
		}
		fb, err := readAll(full, p)
		if err != nil {
			return err
		}
		var data []byte
		if serr != nil {
			if !w.keep(p, -1, pct) {
				continue // an unsynced directory entry, dropped
			}
		} else if data, err = readAll(synced, p); err != nil {
			return err
		}
		data = append([]byte(nil), data...)
		for off := 0; off < len(fb); off += blockSize {
			end := min(off+blockSize, len(fb))
			if end <= len(data) && string(data[off:end]) == string(fb[off:end]) {
				continue
			}
			if !w.keep(p, int64(off), pct) {
				if off >= len(data) {
					break // a file grows only by contiguous blocks
				}
				continue
			}
			if end > len(data) {
				data = append(data, make([]byte, end-len(data))...)
			}
			copy(data[off:end], fb[off:end])
		}
		f, err := out.Create(p, vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	syncDir := dir
	if syncDir == "" {
		syncDir = "/"
	}
	d, err := out.OpenDir(syncDir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		return err
	}
	return d.Close()
}

func readAll(fs vfs.FS, p string) ([]byte, error) {
	f, err := fs.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// reopenOn makes img the world's filesystem for the next instance. The
// world runs on a copy of it, so that img stays what the crash left, for
// the failure report.
func (w *World) reopenOn(img *vfs.MemFS) {
	w.image, w.imageN, w.imageAt = img, len(w.steps), w.clk.Now()
	w.fs = cloneFS(img)
}

// cloneFS returns a copy of fs with everything written to it, synced or
// not. MemFS blocks writes while it clones, so the copy is consistent
// even while an engine runs on fs.
func cloneFS(fs *vfs.MemFS) *vfs.MemFS {
	// At 100 % every draw keeps its block: the source only has to exist.
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(0, 0))})
}

// keepArtifacts copies the journal as it is now (every write kept, as a
// process killed here would leave it on a disk that loses nothing) to
// current/, labelled with step n (the failure's), and the image the last
// crash left to last-crash-image/, under
// $QUIRE_SIM_OUT/quire-sim-<test>-0x<seed> (default: the OS temp
// directory), <test> being the test's full name made safe for a path, so
// that two tests failing on one seed keep their images apart. It returns
// one line per image: the directory to point qctl at, checked by opening
// it read-only as a journal, or why there is none.
func (w *World) keepArtifacts(n int) string {
	root := os.Getenv("QUIRE_SIM_OUT")
	if root == "" {
		root = os.TempDir()
	}
	dir := filepath.Join(root, artifactDir(w.cfg.tb.Name(), w.seed))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Sprintf("journal image: not kept: %v", err)
	}
	lines := keepImage(cloneFS(w.fs), filepath.Join(dir, "current"), fmt.Sprintf("journal image at step %d", n), w.clk.Now())
	if w.image != nil {
		lines += "\n" + keepImage(w.image, filepath.Join(dir, "last-crash-image"), fmt.Sprintf("journal image of the last crash (step %d)", w.imageN), w.imageAt)
	}
	return lines
}

// keepImage copies the journal directory of img to dst and describes the
// result, starting with what. The qctl command it prints measures
// remaining and overdue times against now, the world's simulated instant
// of the image, not the real time qctl would use.
func keepImage(img vfs.FS, dst, what string, now time.Time) string {
	ok, err := vfs.Clone(img, vfs.Default, Dir, dst, vfs.CloneSync)
	switch {
	case err != nil:
		return fmt.Sprintf("%s: not kept: %v", what, err)
	case !ok:
		return what + ": none (no journal was created)"
	}
	j, err := journal.Open(dst, journal.Options{FS: vfs.Default, Clock: clocktest.New(t0), ReadOnly: true})
	if err != nil {
		return fmt.Sprintf("%s: kept in %s, which does not open as a journal: %v", what, dst, err)
	}
	if err := j.Close(); err != nil {
		return fmt.Sprintf("%s: kept in %s, which does not close as a journal: %v", what, dst, err)
	}
	return fmt.Sprintf("%s: qctl --now %s inspect %s", what, now.UTC().Format(time.RFC3339Nano), shellWord(dst))
}

// artifactDirNameMax bounds the test-name part of an image directory's
// name, in bytes, well under the usual 255-byte file-name limit.
const artifactDirNameMax = 120

// artifactDir names the directory of a failure's images: the test's full
// name with every byte outside [A-Za-z0-9._-] replaced by '_' (so
// "TestX/seed=0x1f" is "TestX_seed_0x1f"), cut to artifactDirNameMax
// bytes (with a hash of the whole name when cut), then the seed.
func artifactDir(test string, seed uint64) string {
	b := []byte(test)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			b[i] = '_'
		}
	}
	if len(b) > artifactDirNameMax {
		h := fnv.New32a()
		h.Write([]byte(test))
		b = fmt.Appendf(b[:artifactDirNameMax-9], "_%08x", h.Sum32())
	}
	return fmt.Sprintf("quire-sim-%s-0x%x", b, seed)
}
