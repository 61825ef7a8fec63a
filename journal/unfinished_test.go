package journal

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
)

// imagingFS records a crash image of its MemFS, synced and unsynced,
// before every file creation and sync until Pebble creates the manifest
// marker: the instants at which a first Open can die while Pebble creates
// the store.
type imagingFS struct {
	*vfs.MemFS
	done   bool
	images []*vfs.MemFS
	at     []string
}

func (f *imagingFS) image(op string) {
	if f.done {
		return
	}
	f.images = append(f.images, crashImageOf(f.MemFS, 0, 1), crashImageOf(f.MemFS, 100, 1))
	f.at = append(f.at, "synced before "+op, "written before "+op)
}

func (f *imagingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f.image("create " + f.PathBase(name))
	file, err := f.MemFS.Create(name, c)
	if strings.HasPrefix(f.PathBase(name), "marker.manifest.") {
		f.done = true
	}
	if err != nil {
		return nil, err
	}
	return &imagingFile{File: file, fs: f, name: f.PathBase(name)}, nil
}

type imagingFile struct {
	vfs.File
	fs   *imagingFS
	name string
}

func (f *imagingFile) Sync() error {
	f.fs.image("sync " + f.name)
	return f.File.Sync()
}

// RL-2, RL-5: a first Open that dies while Pebble creates the store has
// acknowledged nothing, and the next Open makes the directory a journal
// instead of refusing it as another program's files.
func TestRL5_OpenAfterACrashInTheStoresCreation(t *testing.T) {
	t.Parallel()
	fs := &imagingFS{MemFS: vfs.NewCrashableMem()}
	j := openJ(t, fs, "db", Options{})
	closeJ(j)
	if !fs.done || len(fs.images) == 0 {
		t.Fatalf("no image taken before the manifest marker (done %v, %d images)", fs.done, len(fs.images))
	}
	unfinished := 0
	for i, img := range fs.images {
		t.Run(fmt.Sprintf("%d %s", i, fs.at[i]), func(t *testing.T) {
			names, _ := img.List("db")
			if desc, err := pebble.Peek("db", img); err == nil && !desc.Exists && len(names) > 0 {
				unfinished++
			}
			j, err := Open("db", Options{FS: img, Clock: clocktest.New(epoch)})
			if err != nil {
				t.Fatalf("files %v: Open: %v", names, err)
			}
			mustAppend(t, j, debugRec("s", "first"))
			closeJ(j)
			j = openJ(t, img, "db", Options{})
			defer closeJ(j)
			if recs := scanAll(t, j); len(recs) != 1 || msgOf(t, recs[0]) != "first" {
				t.Fatalf("after reopen the log holds %d records, want the one appended", len(recs))
			}
		})
	}
	if unfinished == 0 {
		t.Fatalf("no image held an unfinished store: the test does not reach the case it is for")
	}
}

// An unfinished store is told apart from a store that was written to and
// lost its marker, and from other files: those are still refused, and a
// read-only Open refuses an unfinished store with the reason.
func TestOpenRefusesWhatIsNotAnUnfinishedStore(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	base := map[string][]byte{
		"marker.format-version.000001.024": nil,
		"MANIFEST-000001":                  []byte("partial"),
	}
	for _, c := range []struct {
		name  string
		extra map[string][]byte
	}{
		{"a WAL", map[string][]byte{"000002.log": []byte("records")}},
		{"a table", map[string][]byte{"000005.sst": []byte("table")}},
		{"a manifest with a bad number", map[string][]byte{"MANIFEST-x1": nil}},
		{"another file", map[string][]byte{"notes.txt": []byte("mine")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := fs.MkdirAll("db", 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range base {
				writeFile(t, fs, "db/"+name, b)
			}
			for name, b := range c.extra {
				writeFile(t, fs, "db/"+name, b)
			}
			if _, err := Open("db", Options{FS: fs, Clock: clk}); !errors.Is(err, ErrNotJournal) {
				t.Fatalf("err %v, want ErrNotJournal", err)
			}
		})
	}
	t.Run("read-only", func(t *testing.T) {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("db", 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range base {
			writeFile(t, fs, "db/"+name, b)
		}
		_, err := Open("db", Options{FS: fs, Clock: clk, ReadOnly: true})
		if !errors.Is(err, ErrNotJournal) || !strings.Contains(err.Error(), "never finished") {
			t.Fatalf("err %v, want ErrNotJournal saying the creation never finished", err)
		}
	})
}
