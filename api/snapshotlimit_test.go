package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// memOptions are options for an engine of its own on an in-memory
// filesystem under a manual clock.
func memOptions() api.Options {
	return api.Options{Dir: "db", FS: vfs.NewMem(), Clock: clocktest.New(t0)}
}

// RL-11: Options.SnapshotBytesMax is validated like the other limits, in
// the journal's own range.
func TestRL11_SnapshotBytesMaxRange(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, api.SnapshotBytesMin - 1, api.SnapshotBytesMaxLimit + 1} {
		opts := memOptions()
		opts.SnapshotBytesMax = n
		eng, err := api.Open(t.Context(), opts)
		var oe *api.OptionError
		if !errors.As(err, &oe) || !errors.Is(err, api.ErrInvalidOption) || oe.Field != "Options.SnapshotBytesMax" {
			if eng != nil {
				eng.Close(t.Context())
			}
			t.Fatalf("SnapshotBytesMax %d: %v, want an *OptionError naming Options.SnapshotBytesMax", n, err)
		}
	}
	for _, n := range []int{0, api.SnapshotBytesMin, api.SnapshotBytesMaxLimit} {
		opts := memOptions()
		opts.SnapshotBytesMax = n
		eng, err := api.Open(t.Context(), opts)
		if err != nil {
			t.Fatalf("SnapshotBytesMax %d: %v", n, err)
		}
		want := n
		if n == 0 {
			want = api.SnapshotBytesMaxDefault
		}
		if got := api.EffectiveOptions(eng).SnapshotBytesMax; got != want {
			t.Fatalf("SnapshotBytesMax %d runs with %d, want %d", n, got, want)
		}
		if err := eng.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// RL-12: a state larger than SnapshotBytesMax cannot be snapshotted. The
// engine runs on, but never silently: each failed snapshot is counted in
// SnapshotStats with its error, and restart replays everything after the
// previous snapshot (here: none). Raised on a later open, the limit lets
// snapshots succeed again and restart is bounded again.
func TestRL12_SnapshotOverSnapshotBytesMaxIsCountedAndVisible(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) {
		o.SnapshotEvery = api.SnapshotEveryMin
		o.SnapshotBytesMax = api.SnapshotBytesMin
	})
	register := func(e *api.Engine) {
		if err := api.Handle(e, "held", okHandler(nil)); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	// Pending jobs stay in the state: 250 of them are far more than 1 KiB,
	// and 250 single appends ask for two snapshots at least.
	enqueueHeld := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = b.enqueue("held", msg{N: i}, api.OnQueue("held"))
		}
		return ids
	}
	ids := enqueueHeld(250)
	b.idle()
	if err := b.eng.Close(b.ctx); err != nil { // waits for snapshot writes
		t.Fatalf("close: %v", err)
	}
	ss := b.eng.SnapshotStats()
	t.Logf("snapshot stats with SnapshotBytesMax %d: %+v", api.SnapshotBytesMin, ss)
	if ss.Failed < 2 || ss.Written != 0 || ss.LastWrittenSeq != 0 || ss.LastFailedSeq == 0 {
		t.Fatalf("snapshot stats %+v: want at least 2 failures and no snapshot written", ss)
	}
	if !errors.Is(ss.LastError, record.ErrTooLarge) || !strings.Contains(ss.LastError.Error(), "SnapshotBytesMax") {
		t.Fatalf("last snapshot error %v: want one matching record.ErrTooLarge that names SnapshotBytesMax", ss.LastError)
	}

	// Restart finds no snapshot and replays the whole journal.
	b.open()
	register(b.eng)
	st := b.eng.Stats()
	if st.SnapshotSeq != 0 || st.RecordsReplayed != st.LastSeq || st.LastSeq < uint64(len(ids)) {
		t.Fatalf("open stats %+v: want no snapshot and all %d records replayed", st, st.LastSeq)
	}
	// The counters are the new engine's own: nothing of the last run's
	// failures, at most its own try at the state it opened with (more
	// than SnapshotEvery records past the newest snapshot: none).
	if ss := b.eng.SnapshotStats(); ss.Written != 0 || ss.Failed > 1 || (ss.Failed == 1 && ss.LastFailedSeq < st.LastSeq) {
		t.Fatalf("a new engine starts with snapshot stats %+v, want none but its own", ss)
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}

	// Raised back to its default, snapshots succeed again.
	b.opts.SnapshotBytesMax = 0
	b.open()
	register(b.eng)
	b.start()
	ids = append(ids, enqueueHeld(api.SnapshotEveryMin+10)...)
	b.idle()
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	ss = b.eng.SnapshotStats()
	if ss.Written == 0 || ss.Failed != 0 || ss.LastError != nil {
		t.Fatalf("snapshot stats %+v with the default SnapshotBytesMax: want snapshots written, none failed", ss)
	}
	b.open()
	register(b.eng)
	st = b.eng.Stats()
	bound := uint64(api.SnapshotEveryMin + journal.GroupRecordsMaxDefault)
	if st.SnapshotSeq != ss.LastWrittenSeq || st.SnapshotsIgnored != 0 || st.RecordsReplayed > bound {
		t.Fatalf("open stats %+v: want the snapshot at seq %d and at most %d records replayed (RL-12)", st, ss.LastWrittenSeq, bound)
	}
	for _, id := range ids {
		b.wantStatus(id, api.JobPending)
	}
	b.checkReplay()
}

// RL-11, RL-12: once a snapshot was refused as over SnapshotBytesMax, the
// engine does not encode the whole state again every SnapshotEvery
// records while it is still too large, which cost as much as the refused
// one each time; it says so in SnapshotStats, and snapshots again, in
// the same run, once active work drained enough to fit.
func TestRL12_AnOversizedStateIsNotEncodedAgainUntilItFits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) {
		o.SnapshotEvery = api.SnapshotEveryMin
		o.SnapshotBytesMax = 16 << 10
	})
	if err := api.Handle(b.eng, "held", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	for i := range 400 {
		b.enqueue("held", msg{N: i}, api.OnQueue("held"))
	}
	b.idle()
	ss := b.eng.SnapshotStats()
	if ss.Failed < 2 || ss.Written != 0 || !errors.Is(ss.LastError, record.ErrTooLarge) ||
		!strings.Contains(ss.LastError.Error(), "not taken: the state would encode to about") {
		t.Fatalf("snapshot stats %+v: want the tries after the first refused before encoding", ss)
	}
	if err := b.eng.ResumeQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.idle()
	for i := range api.SnapshotEveryMin {
		b.enqueue("held", msg{N: i}, api.OnQueue("held")) // small: each runs at once
	}
	b.idle()
	if ss := b.eng.SnapshotStats(); ss.Written == 0 {
		t.Fatalf("snapshot stats %+v: want a snapshot once the state fits again", ss)
	}
	b.checkReplay()
}
