package property

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// journalMachine is a rapid state machine over one journal on a crashable
// in-memory filesystem against a model: the list of acknowledged records.
// Appends are synchronous, so at every action boundary everything
// acknowledged is synced and no commit is in flight (the point at which a
// crash image is safe to take, spec/reliability.md §2.4).
type journalMachine struct {
	fs    *vfs.MemFS
	clk   *clocktest.Clock
	j     *journal.Journal
	model []string // "stream/kind/job" of each acknowledged record, by seq-1
	n     int
}

func (m *journalMachine) open(t *rapid.T) {
	j, err := journal.Open("db", journal.Options{FS: m.fs, Clock: m.clk})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	m.j = j
}

func (m *journalMachine) Append(t *rapid.T) {
	k := rapid.IntRange(1, 4).Draw(t, "records")
	recs := make([]record.Record, k)
	for i := range recs {
		m.n++
		id := fmt.Sprintf("job_%d", m.n)
		recs[i] = record.Record{Stream: id, Body: &record.JobBuried{JobID: id, Error: "x"}}
	}
	seqs, err := m.j.Append(context.Background(), recs...)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	for i, s := range seqs {
		if s != uint64(len(m.model)+1) {
			t.Fatalf("RL-3: append got seq %d, want %d", s, len(m.model)+1)
		}
		m.model = append(m.model, show(recs[i]))
	}
}

func (m *journalMachine) Advance(t *rapid.T) {
	m.clk.Advance(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "d")))
}

// Crash takes a crash image (0 % or 100 % of unsynced data: both
// reproducible), abandons the instance and reopens on the image.
func (m *journalMachine) Crash(t *rapid.T) {
	pct := rapid.SampledFrom([]int{0, 100}).Draw(t, "pct")
	img := m.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, 2))})
	m.j.Close()
	m.fs = img
	m.open(t)
}

func (m *journalMachine) Reopen(t *rapid.T) {
	if err := m.j.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	m.open(t)
}

// Check: the journal holds exactly the acknowledged records, in order,
// with monotone instants.
func (m *journalMachine) Check(t *rapid.T) {
	if got := m.j.LastSeq(); got != uint64(len(m.model)) {
		t.Fatalf("RL-1: last seq %d, %d records acknowledged", got, len(m.model))
	}
	it := m.j.Scan(1, math.MaxUint64)
	defer it.Close()
	i := 0
	var at int64
	for it.Next() {
		r := it.Record()
		if i >= len(m.model) || show(r) != m.model[i] || r.Seq != uint64(i+1) {
			t.Fatalf("RL-3: record %d is %s, want %v", i+1, show(r), m.model[i:min(i+1, len(m.model))])
		}
		if r.At < at {
			t.Fatalf("RL-9: seq %d at %d before %d", r.Seq, r.At, at)
		}
		at = r.At
		i++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if i != len(m.model) {
		t.Fatalf("RL-1: scan returned %d records, %d acknowledged", i, len(m.model))
	}
}

func show(r record.Record) string { return fmt.Sprintf("%s/%s/%+v", r.Stream, r.Kind(), r.Body) }

// TestT1_JournalModel (T1, T6 at the journal level, RL-1, RL-3, RL-9):
// random append / clock / crash / reopen sequences against the model.
func TestT1_JournalModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &journalMachine{fs: vfs.NewCrashableMem(), clk: clocktest.New(t0)}
		m.open(t)
		defer func() { m.j.Close() }()
		t.Repeat(rapid.StateMachineActions(m))
	})
}
