package journal

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
)

// RL-2, RL-5: every file Pebble may leave before its manifest marker
// when a first Open dies while creating the store (its format marker, a
// first MANIFEST, an OPTIONS file and their temporaries) marks an
// unfinished store, which the next Open makes a journal; a name that only
// looks like one of them (no number, a temporary without Pebble's
// suffix) is another program's file, refused.
func TestRL5_UnfinishedStoreFilesAreToldByName(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(epoch)
	// Pebble writes an OPTIONS file whole (a temporary renamed): the
	// one of a store it created stands for it. The other files are left
	// empty, as a crash before their first sync leaves them.
	created := vfs.NewMem()
	closeJ(openJ(t, created, "db", Options{}))
	names, err := created.List("db")
	if err != nil {
		t.Fatal(err)
	}
	var options []byte
	for _, name := range names {
		if strings.HasPrefix(name, "OPTIONS-") {
			options = readFile(t, created, "db/"+name)
		}
	}
	if len(options) == 0 {
		t.Fatalf("no OPTIONS file among %v", names)
	}
	withFiles := func(t *testing.T, names ...string) vfs.FS {
		fs := vfs.NewMem()
		if err := fs.MkdirAll("db", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			var b []byte
			if strings.HasPrefix(name, "OPTIONS-") {
				b = options
			}
			writeFile(t, fs, "db/"+name, b)
		}
		return fs
	}
	const marker = "marker.format-version.000001.024"
	for _, c := range []struct {
		name  string
		files []string
	}{
		{"an OPTIONS file", []string{marker, "MANIFEST-000001", "OPTIONS-000003"}},
		{"a temporary", []string{marker, "MANIFEST-000001", "temporary.000004.dbtmp"}},
	} {
		t.Run("accepted/"+c.name, func(t *testing.T) {
			fs := withFiles(t, c.files...)
			j, err := Open("db", Options{FS: fs, Clock: clk})
			if err != nil {
				t.Fatalf("files %v: Open: %v, want the store created over them", c.files, err)
			}
			mustAppend(t, j, debugRec("s", "first"))
			closeJ(j)
			j = openJ(t, fs, "db", Options{})
			defer closeJ(j)
			if recs := scanAll(t, j); len(recs) != 1 || msgOf(t, recs[0]) != "first" {
				t.Fatalf("after reopen the log holds %d records, want the one appended", len(recs))
			}
		})
	}
	for _, c := range []struct {
		name  string
		files []string
	}{
		{"a manifest without a number", []string{marker, "MANIFEST-"}},
		{"an OPTIONS file without a number", []string{marker, "OPTIONS-"}},
		{"a temporary without Pebble's suffix", []string{marker, "MANIFEST-000001", "temporary.000004"}},
		{"a temporary without a number", []string{marker, "temporary..dbtmp"}},
	} {
		t.Run("refused/"+c.name, func(t *testing.T) {
			if _, err := Open("db", Options{FS: withFiles(t, c.files...), Clock: clk}); !errors.Is(err, ErrNotJournal) {
				t.Fatalf("files %v: Open: %v, want ErrNotJournal", c.files, err)
			}
		})
	}
}
