package sim

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCrashImageKeepsAPrefix: a crash image keeps the synced part of a
// file and, of the data written after it, a share of whole blocks from
// the start: a file grows only by contiguous blocks, so an image never
// holds a hole, nor any byte that was not written. 0 % keeps the synced
// part only, 100 % everything; shares between give lengths between, by
// seed.
func TestCrashImageKeepsAPrefix(t *testing.T) {
	const blocks = 6
	full := make([]byte, blocks*blockSize)
	for i := range full {
		full[i] = byte(i/blockSize + 1)
	}
	lengths := map[int]bool{}
	for seed := uint64(1); seed <= 16; seed++ {
		w := New(seed)
		if err := w.fs.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := w.fs.Create("/d/f", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		// Written from copies: Pebble's MemFS may scribble over what it
		// was given once a write returns (its invariants builds, -race
		// among them, do), and full is what the image is checked against.
		if _, err := f.Write(bytes.Clone(full[:blockSize])); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{"/", "/d"} {
			if d, err := w.fs.OpenDir(dir); err != nil || d.Sync() != nil {
				t.Fatalf("sync %s: %v", dir, err)
			}
		}
		if _, err := f.Write(bytes.Clone(full[blockSize:])); err != nil {
			t.Fatal(err)
		}
		for _, pct := range []int{0, 50, 100} {
			got, err := readAll(w.crashImage(pct), "/d/f")
			if err != nil {
				t.Fatalf("seed %d, %d%%: %v", seed, pct, err)
			}
			n := len(got)
			switch {
			case !bytes.Equal(got, full[:min(n, len(full))]) || n%blockSize != 0:
				t.Fatalf("seed %d, %d%%: the image's file (%d bytes) is not whole blocks of what was written", seed, pct, n)
			case pct == 0 && n != blockSize, pct == 100 && n != len(full):
				t.Fatalf("seed %d, %d%%: the image keeps %d bytes", seed, pct, n)
			case pct == 50:
				lengths[n] = true
			}
		}
		f.Close()
		w.Finish()
	}
	var more, less bool
	for n := range lengths {
		more = more || n > blockSize
		less = less || n < len(full)
	}
	if !more || !less {
		t.Fatalf("50%% images over 16 seeds keep only lengths %v: none keeps part of the unsynced data", lengths)
	}
}
