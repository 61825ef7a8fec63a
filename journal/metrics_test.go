package journal

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
)

// WALsCreated counts Pebble's write-ahead logs: those Open starts, then one
// at each memtable rotation. About 1 MB of records after Open fills the
// first memtables (256 KB, then 512 KB), so it rotates a few times, and
// not once per commit.
func TestMetricsCountWALsCreated(t *testing.T) {
	j := openJ(t, vfs.NewMem(), "j", Options{})
	defer closeJ(j)
	opened := j.Metrics().WALsCreated
	if opened == 0 {
		t.Fatal("WALsCreated = 0 after Open, which starts a log")
	}
	const appends, perAppend = 128, 8
	msg := strings.Repeat("x", 1000)
	for i := range appends {
		recs := make([]record.Record, perAppend)
		for k := range recs {
			recs[k] = debugRec(fmt.Sprintf("wf_%d", i), msg)
		}
		mustAppend(t, j, recs...)
	}
	m := j.Metrics()
	if m.Bytes < 1<<20 {
		t.Fatalf("the appends committed %d bytes, want at least 1 MB", m.Bytes)
	}
	rotations := m.WALsCreated - opened
	if rotations == 0 || rotations > 8 {
		t.Fatalf("%d logs started by %d appends of %d bytes in all, want a few (a memtable rotation each)",
			rotations, appends, m.Bytes)
	}
}
