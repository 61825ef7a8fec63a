package journal

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// walSyncs counts the syncs of g's WAL files from now on.
func walSyncs(g *gateFS) *atomic.Int64 {
	n := new(atomic.Int64)
	hook := func(p string) {
		if strings.HasSuffix(p, ".log") {
			n.Add(1)
		}
	}
	g.syncHook.Store(&hook)
	return n
}

// storeKeys lists every key of j's store, one per line.
func storeKeys(t *testing.T, j *Journal) string {
	t.Helper()
	it, err := j.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for ok := it.First(); ok; ok = it.Next() {
		fmt.Fprintf(&b, "%q\n", it.Key())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A warm is a synced WAL write that no reader sees: it takes no seq, sets
// no key, and a journal that holds warms before, between and after its
// groups reopens from its synced image with exactly its records (RL-1).
func TestWarmSyncsTheWALAndWritesNoRecord(t *testing.T) {
	g := newGateFS()
	j := openJ(t, g, "db", Options{})
	defer closeJ(j)
	syncs := walSyncs(g)
	keys0 := storeKeys(t, j)

	// The WAL's first batch is a warm: the WAL checks on open must take
	// the records' first batch for the WAL's first seq.
	if err := j.Warm(); err != nil {
		t.Fatalf("Warm on an empty journal: %v", err)
	}
	if got := syncs.Load(); got != 1 {
		t.Fatalf("WAL syncs after one Warm: %d, want 1", got)
	}
	if got := storeKeys(t, j); got != keys0 {
		t.Fatalf("a warm changed the store's keys:\n%s\nwant\n%s", got, keys0)
	}
	mustAppend(t, j, debugRec("s1", "a"), debugRec("s2", "b"))
	keysBefore := storeKeys(t, j)
	before := j.Metrics()
	for range 2 {
		if err := j.Warm(); err != nil {
			t.Fatalf("Warm: %v", err)
		}
	}
	after := j.Metrics()
	if after.Warms-before.Warms != 2 || after.Fsyncs-before.Fsyncs != 2 {
		t.Fatalf("two warms: Warms +%d, Fsyncs +%d; want +2 each", after.Warms-before.Warms, after.Fsyncs-before.Fsyncs)
	}
	if after.Groups != before.Groups || after.Records != before.Records || j.LastSeq() != 2 {
		t.Fatalf("warms changed the log: groups %d→%d, records %d→%d, last seq %d",
			before.Groups, after.Groups, before.Records, after.Records, j.LastSeq())
	}
	if got := syncs.Load(); got != 4 { // 1 warm, 1 group, 2 warms
		t.Fatalf("WAL syncs: %d, want 4", got)
	}
	if got := storeKeys(t, j); got != keysBefore {
		t.Fatalf("warms changed the store's keys:\n%s\nwant\n%s", got, keysBefore)
	}
	mustAppend(t, j, debugRec("s1", "c"))
	if err := j.Warm(); err != nil {
		t.Fatalf("Warm: %v", err)
	}

	image := g.crashImage(0, 1) // the synced state only: the WAL is replayed
	r := openJ(t, image, "db", Options{})
	defer closeJ(r)
	rep, err := r.Verify()
	if err != nil || !rep.OK() {
		t.Fatalf("Verify after warms: %v, problems %v", err, rep.Problems)
	}
	recs := scanAll(t, r)
	var msgs []string
	for i, rec := range recs {
		if rec.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d", i, rec.Seq)
		}
		msgs = append(msgs, msgOf(t, rec))
	}
	if got := strings.Join(msgs, ","); got != "a,b,c" {
		t.Fatalf("records after reopen: %s, want a,b,c", got)
	}
	if err := r.Warm(); err != nil {
		t.Fatalf("Warm on the reopened journal: %v", err)
	}
}

// While a commit holds the commit token the device is busy already: Warm
// returns at once and writes nothing.
func TestWarmWritesNothingWhileACommitIsInProgress(t *testing.T) {
	g := newGateFS()
	j := openJ(t, g, "db", Options{})
	defer closeJ(j)
	syncs := walSyncs(g)
	<-j.idle // a commit in progress
	err := j.Warm()
	j.idle <- struct{}{}
	if err != nil {
		t.Fatalf("Warm during a commit: %v", err)
	}
	if m := j.Metrics(); m.Warms != 0 || syncs.Load() != 0 {
		t.Fatalf("Warm during a commit wrote: Warms %d, WAL syncs %d", m.Warms, syncs.Load())
	}
}

func TestWarmRefusedOnAReadOnlyOrClosedJournal(t *testing.T) {
	fs := vfs.NewMem()
	j := openJ(t, fs, "db", Options{})
	mustAppend(t, j, debugRec("s1", "a"))
	closeJ(j)
	if err := j.Warm(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Warm after Close: %v, want ErrClosed", err)
	}
	ro := openJ(t, fs, "db", Options{ReadOnly: true})
	defer closeJ(ro)
	if err := ro.Warm(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Warm on a read-only journal: %v, want ErrReadOnly", err)
	}
}

// A warm whose WAL write or sync fails fail-stops the journal like any
// commit (RL-2): the outcome of the next append would be unknowable.
func TestWarmFailureFailStops(t *testing.T) {
	toggle := &errorfs.Toggle{Injector: walInjector("db")}
	j := openJ(t, errorfs.Wrap(newGateFS(), toggle), "db", Options{})
	defer closeJ(j)
	mustAppend(t, j, debugRec("s1", "a"))
	toggle.On()
	if err := j.Warm(); !errors.Is(err, ErrFailStop) {
		t.Fatalf("Warm with a failing WAL: %v, want ErrFailStop", err)
	}
	if _, err := j.Append(t.Context(), debugRec("s1", "b")); !errors.Is(err, ErrFailStop) {
		t.Fatalf("Append after a failed warm: %v, want ErrFailStop", err)
	}
}
