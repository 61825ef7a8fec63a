package journal

import (
	"errors"
	"io"
	iofs "io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/clock/clocktest"
)

// tree maps every file and directory under root to its contents ("" for
// a directory), for comparing a directory before and after an Open.
func tree(t *testing.T, fs vfs.FS, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fs.List(dir)
		if err != nil {
			t.Fatalf("list %s: %v", dir, err)
		}
		for _, name := range names {
			p := fs.PathJoin(dir, name)
			st, err := fs.Stat(p)
			if err != nil {
				t.Fatalf("stat %s: %v", p, err)
			}
			if st.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			f, err := fs.Open(p)
			if err != nil {
				t.Fatalf("open %s: %v", p, err)
			}
			b, err := io.ReadAll(f)
			_ = f.Close()
			if err != nil {
				t.Fatalf("read %s: %v", p, err)
			}
			out[p] = string(b)
		}
	}
	walk(root)
	return out
}

// testFS is one filesystem an Open test runs on, with the root directory
// its files go under.
type testFS struct {
	name string
	fs   vfs.FS
	root string
}

func testFSes(t *testing.T) []testFS {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("root", 0o755); err != nil {
		t.Fatal(err)
	}
	return []testFS{{"os", vfs.Default, t.TempDir()}, {"mem", mem, "root"}}
}

// A refused Open leaves the directory exactly as it found it, in both
// modes: a directory that holds files but no journal gets no LOCK, one
// that had a LOCK keeps it, and another program's Pebble store copied
// without its LOCK (as a checkpoint is) gets none either, though it is
// refused only by the look under the lock.
func TestOpenRefusedLeavesDirAsFound(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	for _, tf := range testFSes(t) {
		fs := tf.fs
		for _, c := range []struct {
			name string
			make func(t *testing.T, dir string)
			want error
		}{
			{"other files", func(t *testing.T, dir string) {
				writeFile(t, fs, fs.PathJoin(dir, "notes.txt"), []byte("mine"))
			}, ErrNotJournal},
			{"other files and a LOCK", func(t *testing.T, dir string) {
				writeFile(t, fs, fs.PathJoin(dir, "notes.txt"), []byte("mine"))
				writeFile(t, fs, fs.PathJoin(dir, "LOCK"), nil)
			}, ErrNotJournal},
			{"pebble store without LOCK", func(t *testing.T, dir string) {
				rawEditAt(t, fs, dir, pebble.FormatNewest, func(db *pebble.DB) { _ = db.Set([]byte("foo"), []byte("bar"), pebble.Sync) })
				if err := fs.Remove(fs.PathJoin(dir, "LOCK")); err != nil {
					t.Fatal(err)
				}
			}, ErrNotJournal},
		} {
			for _, ro := range []bool{false, true} {
				name := tf.name + "/" + c.name
				if ro {
					name += "/read-only"
				}
				t.Run(name, func(t *testing.T) {
					dir := fs.PathJoin(tf.root, strings.NewReplacer("/", "_", " ", "_").Replace(name))
					if err := fs.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					c.make(t, dir)
					before := tree(t, fs, dir)
					_, err := Open(dir, Options{FS: fs, Clock: clk, ReadOnly: ro})
					if !errors.Is(err, c.want) {
						t.Fatalf("err %v, want %v", err, c.want)
					}
					if after := tree(t, fs, dir); !maps.Equal(before, after) {
						t.Fatalf("a refused Open changed %s:\nbefore %v\nafter  %v", dir,
							slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
					}
				})
			}
		}
	}
}

// A directory Open created, with the parents it created, is removed when
// Open then refuses: here Pebble cannot create the new store's files.
// Only what Open created goes: the root that existed stays.
func TestOpenRefusedRemovesDirItCreated(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	for _, tf := range testFSes(t) {
		t.Run(tf.name, func(t *testing.T) {
			// Every file but the LOCK fails to be created: the lock is
			// taken, then the store cannot be made.
			fs := errorfs.Wrap(tf.fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind == errorfs.OpCreate && tf.fs.PathBase(op.Path) != "LOCK" {
					return errorfs.ErrInjected
				}
				return nil
			}))
			writeFile(t, tf.fs, tf.fs.PathJoin(tf.root, "keep.txt"), []byte("x"))
			before := tree(t, tf.fs, tf.root)
			dir := tf.fs.PathJoin(tf.root, "a", "b", "db")
			_, err := Open(dir, Options{FS: fs, Clock: clk})
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("err %v, want the injected error", err)
			}
			if _, err := tf.fs.Stat(tf.fs.PathJoin(tf.root, "a")); !errors.Is(err, iofs.ErrNotExist) {
				t.Fatalf("a refused Open left the directories it created (%v): %v", err, tree(t, tf.fs, tf.root))
			}
			if after := tree(t, tf.fs, tf.root); !maps.Equal(before, after) {
				t.Fatalf("a refused Open changed %s:\nbefore %v\nafter  %v", tf.root, before, after)
			}
			// The same Open without the fault creates the journal.
			j, err := Open(dir, Options{FS: tf.fs, Clock: clk})
			if err != nil {
				t.Fatalf("Open after the refusal: %v", err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
