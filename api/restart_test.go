package api_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/replay"
)

// restartRecords is the journal length the RL-12 restart test builds
// through the engine: 100k records by default (about 6 s on 2 cores), 30k
// with -short or -race (the race detector makes 100k take minutes), and 1M
// with QUIRE_LONG=1 (minutes: building the journal grows faster than
// linearly).
func restartRecords() uint64 {
	switch {
	case os.Getenv("QUIRE_LONG") == "1":
		return 1_000_000
	case testing.Short() || raceEnabled():
		return 30_000
	}
	return 100_000
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// fillJournal enqueues no-op jobs from many goroutines at once, so the
// engine group-commits them, until the journal holds at least n records.
// Each job adds three records (job_enqueued, attempt_started,
// attempt_succeeded). It returns once the engine is idle.
func fillJournal(b *testBundle, n uint64) {
	b.t.Helper()
	const (
		producers = 64
		perRound  = 8 // jobs per producer per round; the engine goes idle between rounds
	)
	for b.lastSeq() < n {
		enqueueConcurrently(b, producers, perRound)
		b.idle()
	}
}

// enqueueConcurrently has producers goroutines enqueue jobs "noop" jobs
// each, and fails b's test on any refusal.
func enqueueConcurrently(b *testBundle, producers, jobs int) {
	b.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < jobs; i++ {
				if _, err := b.eng.Enqueue(b.ctx, "noop", msg{N: i}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.t.Fatalf("enqueue: %v", err)
	}
}

// RL-12: Open reads the newest valid snapshot and at most SnapshotEvery
// records plus one group after it; restart cost follows active work, not
// history. Records are counted, never timed.
func TestRL12_RestartReadsAtMostSnapshotEveryPlusOneGroup(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 16; o.SnapshotEvery = api.SnapshotEveryDefault })
	var rec recorder
	register := func(e *api.Engine) {
		if err := api.Handle(e, "noop", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := api.Handle(e, "later", okHandler(&rec)); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	// A few jobs stay active across the whole history.
	var active []string
	for i := 0; i < 3; i++ {
		active = append(active, b.enqueue("later", msg{N: i}, api.Delay(time.Hour)))
	}
	b.start()
	n := restartRecords()
	fillJournal(b, n)
	last := b.lastSeq()
	t.Logf("journal holds %d records", last)

	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	b.open()
	register(b.eng)
	st := b.eng.Stats()
	t.Logf("open stats: %+v", st)
	bound := uint64(b.opts.SnapshotEvery + journal.GroupRecordsMaxDefault)
	if st.SnapshotSeq == 0 {
		t.Fatalf("RL-12: no snapshot after %d records (SnapshotEvery %d)", last, b.opts.SnapshotEvery)
	}
	if st.SnapshotsIgnored != 0 {
		t.Fatalf("%d snapshots ignored", st.SnapshotsIgnored)
	}
	if st.RecordsReplayed > bound {
		t.Fatalf("RL-12: open replayed %d records after the snapshot at seq %d, bound SnapshotEvery + one group = %d",
			st.RecordsReplayed, st.SnapshotSeq, bound)
	}
	if st.SnapshotSeq+st.RecordsReplayed != st.LastSeq || st.LastSeq < last { // the shutdown appended its records (SD-11)
		t.Fatalf("snapshot %d + replayed %d != last seq %d (journal had %d)", st.SnapshotSeq, st.RecordsReplayed, st.LastSeq, last)
	}
	for _, id := range active {
		b.wantStatus(id, api.JobPending)
	}
	b.start()
	b.idle()
	if got := len(rec.get()); got != 0 {
		t.Fatalf("%d delayed jobs ran early", got)
	}
	b.advance(time.Hour)
	for _, id := range active {
		b.wantStatus(id, api.JobCompleted)
	}
	b.checkReplay()
}

// RL-7, RL-12: the state rebuilt at Open from the newest snapshot plus the
// tail equals a fresh fold of the whole journal from seq 1.
func TestRL12_SnapshotPlusTailEqualsFullReplay(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMin })
	register := func(e *api.Engine) {
		if err := api.Handle(e, "noop", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := api.Handle(e, "flaky", func(ctx context.Context, d *api.Delivery, in msg) error {
			if d.Attempt() < 2 {
				return api.Retryable("FLAKY", nil)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := api.Handle(e, "poison", func(ctx context.Context, d *api.Delivery, in msg) error {
			return api.Permanent("POISON", nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.enqueue("noop", msg{N: -1}, api.OnQueue("held"))
	b.enqueue("noop", msg{N: -2}, api.Delay(time.Hour), api.Unique())
	b.start()
	for i := 0; i < 120; i++ {
		b.enqueue("noop", msg{N: i})
		if i%10 == 0 {
			b.enqueue("flaky", msg{N: i})
			b.enqueue("poison", msg{N: i})
		}
	}
	b.idle()
	b.advance(time.Second) // flaky retries
	fillJournal(b, 1000)
	b.enqueue("noop", msg{N: -3}, api.Delay(time.Hour))
	b.checkReplay()
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	b.open()
	register(b.eng)
	st := b.eng.Stats()
	if st.SnapshotSeq == st.LastSeq {
		// The last append completed SnapshotEvery records (where the
		// snapshots fall depends on how the producers' enqueues were
		// batched), so no tail follows the newest snapshot. One more
		// record, SnapshotEvery short of the next snapshot, is one.
		b.enqueue("noop", msg{N: -4}, api.Delay(time.Hour))
		if err := b.eng.Close(b.ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
		b.open()
		register(b.eng)
		st = b.eng.Stats()
	}
	if st.SnapshotSeq == 0 || st.RecordsReplayed == 0 {
		t.Fatalf("want an open from a snapshot plus a tail, got %+v", st)
	}
	live, seq, err := b.eng.StateDigest(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	full := replay.New()
	it := api.JournalOf(b.eng).Scan(1, math.MaxUint64)
	for it.Next() {
		if err := replay.Apply(full, it.Record()); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	it.Close()
	if full.LastSeq != seq {
		t.Fatalf("full fold ends at seq %d, engine state at %d", full.LastSeq, seq)
	}
	if got := replay.Digest(full); got != live {
		t.Fatalf("RL-7: state from snapshot %d + %d records has digest %x, full fold from seq 1 has %x",
			st.SnapshotSeq, st.RecordsReplayed, live[:8], got[:8])
	}
}

// RL-12 under sustained load: after every append, the records a restart
// would replay (those after the newest stored snapshot) stay within
// SnapshotEvery plus one group, even when producers never let the engine
// go idle. The after-append hook measures it at each append, the points
// at which a crash could strike.
//
// By default it runs 4 000 jobs with SnapshotEvery = 1 000; QUIRE_LONG=1
// runs 40 000 with the default SnapshotEvery (10-20 s on 2 cores).
func TestRL12_SustainedLoadKeepsRestartBounded(t *testing.T) {
	snapshotEvery, producers, jobs := 1_000, 200, 20
	if os.Getenv("QUIRE_LONG") == "1" {
		snapshotEvery, producers = api.SnapshotEveryDefault, 2000
	}
	b := setup(t, func(o *api.Options) { o.Workers = 16; o.SnapshotEvery = snapshotEvery })
	check := watchRestartBound(t, b.eng, snapshotEvery)
	if err := api.Handle(b.eng, "noop", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b.start()
	enqueueConcurrently(b, producers, jobs)
	b.idle()
	check()
}

// TestRL12_RetryBuriedOfALargeQueueKeepsRestartBounded: RetryBuried of
// 1500 buried jobs with SnapshotEvery 100 never leaves more than
// SnapshotEvery + one group to replay after a crash at any append. It
// used to requeue them all in one decision, appended as one batch
// (several groups) with no snapshot possible inside it: a crash right
// after it replayed all 1500 requeues and more.
func TestRL12_RetryBuriedOfALargeQueueKeepsRestartBounded(t *testing.T) {
	const every, n = 100, 1500
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = every })
	if err := api.Handle(b.eng, "noop", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var last string
	for i := range n { // not started: nothing is dispatched
		last = b.enqueue("noop", msg{N: i})
		if err := b.eng.Bury(b.ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	b.idle()
	check := watchRestartBound(t, b.eng, every)
	if k, err := b.eng.RetryBuried(b.ctx, api.QueueDefault); err != nil || k != n {
		t.Fatalf("RetryBuried = %d, %v; want %d", k, err, n)
	}
	b.idle()
	check()
	if st, err := b.eng.Status(b.ctx, last); err != nil || st.Status != api.JobPending {
		t.Fatalf("the last job after RetryBuried: %+v, %v", st, err)
	}
}

// TestRL12_DeadlineCheckOfManyWorkflowsKeepsRestartBounded: a deadline
// check that finds 1500 workflows expired at once (the engine was stopped
// past their deadlines) fails them in appends between which snapshots
// come, so that a crash at any of them leaves no more than SnapshotEvery
// + one group to replay (RL-12); every one still fails by its deadline
// (WD-5). The check used to expire them all in one decision: 4500 records
// in one batch.
func TestRL12_DeadlineCheckOfManyWorkflowsKeepsRestartBounded(t *testing.T) {
	const every, n = 100, 1500
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = every; o.DeadlineCheckInterval = time.Hour })
	wfRegister(t, b.eng, api.NewWorkflow("late").Then("a", wfReturn(nil)).MustCompleteWithin(time.Minute))
	// The step jobs never start: only the check can fail the workflows.
	if err := b.eng.PauseQueue(b.ctx, api.QueueDefault); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wfDispatch(b, "late", api.State{})
	}
	b.clk.Advance(2 * time.Minute)
	check := watchRestartBound(t, b.eng, every)
	b.start() // checks once right after startup (WD-6)
	b.idle()
	check()
	for _, id := range ids {
		if info := wfInfo(b, id); info.Status != api.WorkflowFailed || info.Error != api.MessageDeadlineExceeded {
			t.Fatalf("workflow %s: %s %q, want failed by its deadline", id, info.Status, info.Error)
		}
	}
}

// TestRL12_SnapshotsAfterAWaitConsumedItsSignal: while a workflow that
// consumed a signal runs on, snapshots are still written and a restart
// reads at most SnapshotEvery + one group. Such a workflow's state did not
// round-trip (an empty signal list against a decoded nil), so every
// snapshot failed its check and a restart replayed the whole journal.
func TestRL12_SnapshotsAfterAWaitConsumedItsSignal(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMin })
	register := func(e *api.Engine) {
		if err := api.Handle(e, "noop", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
		wfRegister(t, e, api.NewWorkflow("two").Then("a", wfReturn(nil)).WaitForSignal("go").WaitForSignal("go2").Then("b", wfReturn(nil)))
	}
	register(b.eng)
	b.start()
	id := wfDispatch(b, "two", api.State{})
	b.idle()
	if err := b.eng.Signal(b.ctx, id, "go", nil); err != nil {
		t.Fatal(err)
	}
	b.idle()
	wfWant(b, id, api.WorkflowWaitingSignal) // on "go2", "go" consumed
	for i := range 420 {
		b.enqueue("noop", msg{N: i})
	}
	b.idle()
	if st := b.eng.SnapshotStats(); st.Failed != 0 || st.Written == 0 {
		t.Fatalf("RL-12: snapshots %+v, want written and none failed", st)
	}
	b.reopen(register)
	bound := uint64(api.SnapshotEveryMin + journal.GroupRecordsMaxDefault)
	if st := b.eng.Stats(); st.SnapshotSeq == 0 || st.RecordsReplayed > bound {
		t.Fatalf("RL-12: Open replayed %d records after the snapshot at seq %d, bound %d", st.RecordsReplayed, st.SnapshotSeq, bound)
	}
}

// watchRestartBound watches every append of e from now on and returns
// the check that fails t if a crash after one of them would have left
// more than snapshotEvery + one group of records to replay after the
// newest snapshot stored by then (RL-12).
func watchRestartBound(t *testing.T, e *api.Engine, snapshotEvery int) (check func()) {
	t.Helper()
	bound := uint64(snapshotEvery + journal.GroupRecordsMaxDefault)
	var (
		mu       sync.Mutex
		snap     uint64 // newest stored snapshot seen so far
		violated string
		done     atomic.Bool
	)
	api.SetAfterAppendHook(func(seqs []uint64) {
		if done.Load() {
			return
		}
		last := seqs[len(seqs)-1]
		mu.Lock()
		defer mu.Unlock()
		if violated != "" || last-snap <= bound {
			return // within the bound whatever was stored since
		}
		// Reading snapshots decodes them: only look when the bound is at
		// stake.
		it := api.JournalOf(e).Snapshots()
		for it.Next() {
			if s := it.Snapshot(); s.Err == nil {
				snap = max(snap, s.Seq)
				break
			}
		}
		it.Close()
		if last-snap > bound {
			violated = fmt.Sprintf("a crash after seq %d would replay %d records after the newest snapshot (seq %d)", last, last-snap, snap)
		}
	})
	t.Cleanup(func() { api.SetAfterAppendHook(nil) })
	return func() {
		t.Helper()
		done.Store(true)
		mu.Lock()
		defer mu.Unlock()
		if violated != "" {
			t.Fatalf("RL-12: %s; the bound is SnapshotEvery + one group = %d", violated, bound)
		}
	}
}

// RL-12: while a snapshot is on its way, appends that would take the
// journal more than SnapshotEvery + one group past the newest stored
// snapshot wait for it, so that a crash never leaves more than that to
// replay, however slow the snapshot's write. The write is held here until
// the engine holds its appends.
func TestRL12_AppendsWaitForASlowSnapshot(t *testing.T) {
	const every = 100
	bound := uint64(every + journal.GroupRecordsMaxDefault)
	release := make(chan struct{})
	var once sync.Once
	api.SetSnapshotWriteHook(func(uint64) { once.Do(func() { <-release }) })
	var appended atomic.Uint64
	api.SetAfterAppendHook(func(seqs []uint64) { appended.Store(max(appended.Load(), seqs[len(seqs)-1])) })
	// Registered before setup's, so that they run after the engine's
	// Close: a snapshot goroutine reads the write hook until then.
	t.Cleanup(func() {
		api.SetSnapshotWriteHook(nil)
		api.SetAfterAppendHook(nil)
	})

	b := setup(t, func(o *api.Options) { o.SnapshotEvery = every })
	var released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the engine's Close, which waits for the write
	if err := api.Handle(b.eng, "held", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(b.ctx, "default"); err != nil { // one record per enqueue
		t.Fatal(err)
	}
	const n = 2000
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := b.eng.Enqueue(b.ctx, "held", msg{N: i}); err != nil {
				t.Error(err)
			}
		})
	}
	// Until the engine holds its appends for the snapshot, or outruns the
	// bound without.
	for {
		held, err := api.SnapshotHeld(b.eng)
		if err != nil {
			t.Fatal(err)
		}
		if got := appended.Load(); got > bound {
			t.Fatalf("RL-12: appended up to seq %d while the first snapshot (seq %d or so) was being written; the bound is %d", got, every, bound)
		}
		if held {
			break
		}
		runtime.Gosched()
	}
	if got := appended.Load(); got > bound || got+journal.GroupRecordsMaxDefault < bound {
		t.Fatalf("held at seq %d: want the appends held near the bound, %d", got, bound)
	}
	unblock()
	wg.Wait()
	if got := appended.Load(); got < n {
		t.Fatalf("appended up to seq %d after the snapshot was written, want every enqueue", got)
	}
	if ss := b.eng.SnapshotStats(); ss.Written == 0 {
		t.Fatalf("snapshot stats %+v: want snapshots written", ss)
	}
}

// RL-12: snapshots are written in seq order even when a later one is
// launched before an earlier one got to write: the newest written is the
// one SnapshotStats names and the one the next Open starts from. The
// snapshot goroutine that starts first is held as it starts until one
// with a later seq started, and then yields for a while, which gives the
// later one every chance to write first.
func TestRL12_SnapshotsAreWrittenInSeqOrder(t *testing.T) {
	const every = 100
	later := make(chan struct{})
	var (
		mu      sync.Mutex
		first   uint64
		started []uint64
		written []uint64
	)
	api.SetSnapshotStartHook(func(seq uint64) {
		mu.Lock()
		started = append(started, seq)
		hold := first == 0
		if hold {
			first = seq
		} else if seq > first {
			select {
			case <-later:
			default:
				close(later)
			}
		}
		mu.Unlock()
		if hold {
			<-later
			for range 1000 {
				runtime.Gosched()
			}
		}
	})
	api.SetSnapshotWriteHook(func(seq uint64) {
		mu.Lock()
		written = append(written, seq)
		mu.Unlock()
	})
	t.Cleanup(func() { // after the engine's Close: see above
		api.SetSnapshotStartHook(nil)
		api.SetSnapshotWriteHook(nil)
	})

	b := setup(t, func(o *api.Options) { o.SnapshotEvery = every })
	if err := api.Handle(b.eng, "held", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(b.ctx, "default"); err != nil { // one record per enqueue
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		b.enqueue("held", msg{N: i})
		select {
		case <-later:
		default:
			continue
		}
		break
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	mu.Lock()
	t.Logf("snapshots started %v, written %v", started, written)
	if len(written) < 2 || !slices.IsSorted(written) {
		mu.Unlock()
		t.Fatalf("snapshots started %v were written in the order %v: want seq order", started, written)
	}
	newest := written[len(written)-1]
	mu.Unlock()
	ss := b.eng.SnapshotStats()
	if ss.Failed != 0 || ss.LastWrittenSeq != newest {
		t.Fatalf("snapshot stats %+v: want none failed and the newest written, seq %d", ss, newest)
	}
	b.open()
	if st := b.eng.Stats(); st.SnapshotSeq != newest {
		t.Fatalf("open stats %+v: want the snapshot at seq %d", st, newest)
	}
}

// A relative Dir on the operating system's filesystem names the directory
// it named at Open: the store keeps opening its files (WALs, tables,
// OPTIONS) by path, and a later change of the working directory must not
// send them to another directory.
func TestOpenResolvesARelativeDirOnce(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: "rel"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if _, err := eng.Enqueue(ctx, "work", msg{N: 1}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(base, "cp")
	if err := eng.Checkpoint(cp); err != nil {
		t.Fatalf("checkpoint after a change of directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "rel")); err != nil {
		t.Fatalf("the journal is not where Dir named it at Open: %v", err)
	}
}
