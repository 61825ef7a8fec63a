package main

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The group-commit floor commits every write it was given, each write's
// after func runs once its commit returned, and a write added by an after
// func (a settlement behind its start) goes in a later commit.
func TestGroupCommitterCommitsEveryWriteBeforeItsAfter(t *testing.T) {
	db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gc := newGroupCommitter(db, &pebbleWarmer{db: db, lead: time.Millisecond})
	const n = 50
	var afters atomic.Int64
	for i := range n {
		gc.add(timerKey(i, 1), func() {
			if _, closer, err := db.Get(timerKey(i, 1)); err != nil {
				t.Errorf("start %d: after ran before its write was readable: %v", i, err)
			} else {
				closer.Close()
			}
			afters.Add(1)
			gc.add(timerKey(i, 2), nil)
		})
	}
	// A write added last commits after the ones before it, and after
	// every settlement added before it was taken.
	if err := gc.commit(timerKey(n, 0)); err != nil {
		t.Fatal(err)
	}
	if err := gc.commit(timerKey(n+1, 0)); err != nil {
		t.Fatal(err)
	}
	gc.stop()
	if got := afters.Load(); got != n {
		t.Fatalf("%d after funcs ran, want %d", got, n)
	}
	for i := range n {
		for _, kind := range []int{1, 2} {
			if _, closer, err := db.Get(timerKey(i, kind)); err != nil {
				t.Fatalf("write %d/%d: %v", i, kind, err)
			} else {
				closer.Close()
			}
		}
	}
}

// The floors' one timer fires every job once, never before its instant,
// and in instant order, whatever order the jobs were added in.
func TestDueQueueFiresEachJobOnceInInstantOrderNeverEarly(t *testing.T) {
	const n = 200
	var (
		mu    sync.Mutex
		order []int
		early []int
		all   = make(chan struct{})
	)
	at := make([]time.Time, n)
	q := newDueQueue(func(i int) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if now.Before(at[i]) {
			early = append(early, i)
		}
		order = append(order, i)
		if len(order) == n {
			close(all)
		}
	})
	defer q.stop()
	// Instants 50 ms from now, 10 µs apart, added in a shuffled order
	// (long before the first comes due).
	base := time.Now().Add(50 * time.Millisecond)
	for i := range n {
		at[i] = base.Add(time.Duration(i) * 10 * time.Microsecond)
	}
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		q.add(at[i], i)
	}
	<-all
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("jobs %v fired before their instants", early)
	}
	if !slices.IsSorted(order) {
		t.Fatalf("fired in the order %v, want instant order", order)
	}
}

// The floors' warm is a synced write of no key, made only when no commit
// returned within the lead, as the engine's (journal.Warm).
func TestPebbleWarmerWarmsOnlyAfterTheLead(t *testing.T) {
	db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := &pebbleWarmer{db: db, lead: time.Millisecond}
	wal := func() uint64 { return db.Metrics().WAL.BytesIn }
	before := wal()
	w.warm() // no commit yet: warms
	if wal() == before || w.last.Load() == 0 {
		t.Fatalf("first warm wrote nothing: WAL bytes %d -> %d", before, wal())
	}
	w.last.Store(time.Now().Add(time.Hour).UnixNano()) // a commit "just now"
	before = wal()
	w.warm()
	if wal() != before {
		t.Fatalf("a warm within the lead wrote %d WAL bytes", wal()-before)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.First() {
		t.Fatalf("a warm wrote key %q", it.Key())
	}
}
