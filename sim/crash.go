package sim

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"github.com/cockroachdb/pebble/v2/vfs"
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
		w.fail("build crash image: %v", err)
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

// keepArtifacts copies the world's current filesystem and its last crash
// image to $QUIRE_SIM_OUT/<seed>/ (default: the OS temp directory) and
// returns the directory, or a note saying why nothing was kept.
func (w *World) keepArtifacts() string {
	root := os.Getenv("QUIRE_SIM_OUT")
	if root == "" {
		root = os.TempDir()
	}
	dir := filepath.Join(root, fmt.Sprintf("quire-sim-0x%x", w.seed))
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Sprintf("(not kept: %v)", err)
	}
	note := ""
	if w.eng == nil {
		if _, err := vfs.Clone(w.fs, vfs.Default, Dir, filepath.Join(dir, "current"), vfs.CloneSync); err != nil {
			note += fmt.Sprintf(" (current: %v)", err)
		}
	} else {
		note += " (current: engine still open, not copied)"
	}
	if w.image != nil {
		if _, err := vfs.Clone(w.image, vfs.Default, Dir, filepath.Join(dir, "last-crash-image"), vfs.CloneSync); err != nil {
			note += fmt.Sprintf(" (crash image: %v)", err)
		}
	}
	return dir + note
}
