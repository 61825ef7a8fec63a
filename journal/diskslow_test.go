package journal

import (
	"context"
	"path"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stallFS holds every WAL sync while stall is set, until done reports
// true or holdMax of real time passed. It stands for a disk that takes
// seconds to sync.
type stallFS struct {
	vfs.FS
	dir     string
	stall   atomic.Bool
	stalled atomic.Int64 // WAL syncs that were held
	done    func() bool
}

// holdMax bounds one held sync in real time, so that a journal that never
// reports the slow disk fails the test instead of hanging it.
const holdMax = 30 * time.Second

func (f *stallFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	if ok, _ := path.Match(path.Join(f.dir, "*.log"), name); !ok {
		return file, nil
	}
	return &stallFile{File: file, fs: f}, nil
}

func (f *stallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *stallFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(o, n, c)
	return f.wrap(n, file, err)
}

type stallFile struct {
	vfs.File
	fs *stallFS
}

func (f *stallFile) Sync() error {
	f.hold()
	return f.File.Sync()
}

func (f *stallFile) SyncData() error {
	f.hold()
	return f.File.SyncData()
}

func (f *stallFile) SyncTo(n int64) (bool, error) {
	f.hold()
	return f.File.SyncTo(n)
}

// hold blocks while the FS stalls, until the journal reported the slow
// disk. The check is a poll: the journal offers no notification, only the
// counter.
func (f *stallFile) hold() {
	if !f.fs.stall.Load() {
		return
	}
	f.fs.stalled.Add(1)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	limit := time.NewTimer(holdMax)
	defer limit.Stop()
	for !f.fs.done() {
		select {
		case <-poll.C:
		case <-limit.C:
			return
		}
	}
}

// TestT15_DiskSlowReachesMetrics is T15's metric criterion (RL-1): a WAL
// sync that stays in flight past Options.DiskSlowThreshold is reported
// by Pebble's disk-health check and counted in Metrics().DiskSlow, and the
// append waiting on it is acknowledged once, after the sync, at the seq
// that follows. It takes real time (the health check looks every 2 s), but
// asserts no duration: the stalled sync is released when the metric moved,
// or after holdMax, when the test fails. sim's TestT15_SlowDisk checks the
// rest of T15 (a slow disk leaves the trace unchanged).
func TestT15_DiskSlowReachesMetrics(t *testing.T) { // RL-1
	t.Parallel()
	fs := &stallFS{FS: vfs.NewMem(), dir: "db"}
	var jp atomic.Pointer[Journal]
	fs.done = func() bool { return jp.Load().Metrics().DiskSlow > 0 }
	j := openJ(t, fs, "db", Options{DiskSlowThreshold: time.Millisecond})
	defer closeJ(j)
	jp.Store(j)
	before := mustAppend(t, j, debugRec("wf_a", "before"))

	fs.stall.Store(true)
	seqs, err := j.Append(context.Background(), debugRec("wf_a", "slow"))
	fs.stall.Store(false)
	if err != nil {
		t.Fatalf("append on a slow disk: %v", err)
	}
	if fs.stalled.Load() == 0 {
		t.Fatal("no WAL sync was held: the test did not slow the disk")
	}
	if got := j.Metrics().DiskSlow; got == 0 {
		t.Fatalf("Metrics().DiskSlow = 0: a WAL sync held for %v (DiskSlowThreshold 1ms) was not reported", holdMax)
	}
	if seqs[0] != before[0]+1 {
		t.Fatalf("append on a slow disk got seq %d, want %d", seqs[0], before[0]+1)
	}
	after := mustAppend(t, j, debugRec("wf_a", "after"))
	recs := scanAll(t, j)
	want := []string{"before", "slow", "after"}
	if len(recs) != len(want) || after[0] != 3 {
		t.Fatalf("journal holds %d records (last seq %d), want %d", len(recs), after[0], len(want))
	}
	for i, r := range recs {
		if m := msgOf(t, r); m != want[i] {
			t.Fatalf("seq %d holds %q, want %q", r.Seq, m, want[i])
		}
	}
}

// TestDiskSlowThresholdDefault checks the option's defaults: zero means
// Pebble's 5 s, a negative value (the check disabled) is kept.
func TestDiskSlowThresholdDefault(t *testing.T) {
	t.Parallel()
	if got := (Options{}).withDefaults().DiskSlowThreshold; got != DiskSlowThresholdDefault {
		t.Fatalf("default DiskSlowThreshold = %v, want %v", got, DiskSlowThresholdDefault)
	}
	if got := (Options{DiskSlowThreshold: -1}).withDefaults().DiskSlowThreshold; got != -1 {
		t.Fatalf("DiskSlowThreshold -1 became %v, want it kept (check disabled)", got)
	}
}
