package api_test

import (
	"context"
	"errors"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
)

// listDir lists dir's names, sorted.
func listDir(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	slices.Sort(names)
	return names
}

// A refused Open leaves its directory as it found it: a directory that
// holds files but no journal gets no LOCK (the README's "a directory that
// holds no journal is left as it is"), on the operating system's
// filesystem (FS nil) and on an in-memory one.
func TestOpen_NotJournalDirLeftAsFound(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		fs   vfs.FS // nil: the operating system's
		root string
	}{
		{"os", nil, t.TempDir()},
		{"mem", vfs.NewMem(), "root"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := c.fs
			if fs == nil {
				fs = vfs.Default
			}
			dir := fs.PathJoin(c.root, "data")
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := fs.Create(fs.PathJoin(dir, "notes.txt"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			before := listDir(t, fs, dir)
			_, err = api.Open(context.Background(), api.Options{Dir: dir, FS: c.fs, Clock: clocktest.New(t0)})
			var se *api.StartupError
			if !errors.As(err, &se) || se.Step != "open journal" || !errors.Is(err, journal.ErrNotJournal) {
				t.Fatalf("Open: err %v, want a *StartupError at open journal matching journal.ErrNotJournal", err)
			}
			if !strings.HasSuffix(err.Error(), `(startup step "open journal" failed and was rolled back; rollback report: failed)`) {
				t.Fatalf("Open: err %q does not say which step failed and that it was rolled back", err)
			}
			if after := listDir(t, fs, dir); !slices.Equal(before, after) {
				t.Fatalf("a refused Open changed %s: before %v, after %v", dir, before, after)
			}
		})
	}
}

// A Dir that Open creates (Options.Dir: "created if missing") does not
// outlive an Open that refuses before the journal exists in it: here the
// store's files cannot be created.
func TestOpen_RefusedOpenRemovesDirItCreated(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("root", 0o755); err != nil {
		t.Fatal(err)
	}
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && filepath.Base(op.Path) != "LOCK" {
			return errorfs.ErrInjected
		}
		return nil
	}))
	_, err := api.Open(context.Background(), api.Options{Dir: "root/data/db", FS: fs, Clock: clocktest.New(t0)})
	var se *api.StartupError
	if !errors.As(err, &se) || se.Step != "open journal" || !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Open: err %v, want a *StartupError at open journal wrapping the injected error", err)
	}
	if _, err := mem.Stat("root/data"); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("a refused Open left the directory it created (%v): root holds %v", err, listDir(t, mem, "root"))
	}
}

// api.ErrNotJournal is the sentinel a refused Open of a directory that
// holds no journal matches, so callers branch on it without importing
// journal: for other files, and for another program's Pebble store, and
// no other Open sentinel matches.
func TestOpen_ErrNotJournal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		make func(t *testing.T, fs vfs.FS, dir string)
	}{
		{"other files", func(t *testing.T, fs vfs.FS, dir string) {
			f, err := fs.Create(fs.PathJoin(dir, "notes.txt"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}},
		{"another program's pebble store", func(t *testing.T, fs vfs.FS, dir string) {
			db, err := pebble.Open(dir, &pebble.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := vfs.NewMem()
			if err := fs.MkdirAll("data", 0o755); err != nil {
				t.Fatal(err)
			}
			c.make(t, fs, "data")
			_, err := api.Open(context.Background(), api.Options{Dir: "data", FS: fs, Clock: clocktest.New(t0)})
			if !errors.Is(err, api.ErrNotJournal) {
				t.Fatalf("Open: err %v, want one matching api.ErrNotJournal", err)
			}
			for _, other := range []error{api.ErrLocked, api.ErrCorrupt, api.ErrNewerVersion} {
				if errors.Is(err, other) {
					t.Fatalf("Open: err %v also matches %v", err, other)
				}
			}
		})
	}
}
