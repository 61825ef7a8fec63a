package api_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// testSeeds returns the seeds a randomized test runs: def of them, or
// QUIRE_SEEDS=N of them, or exactly QUIRE_SEED=S (decimal or 0x hex);
// -short divides the default count by 10 (spec/reliability.md §7).
func testSeeds(t *testing.T, def int) []uint64 {
	t.Helper()
	if s := os.Getenv("QUIRE_SEED"); s != "" {
		seed, err := parseSeed(s)
		if err != nil {
			t.Fatalf("QUIRE_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := def
	if s := os.Getenv("QUIRE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("QUIRE_SEEDS=%q: want a positive integer", s)
		}
		n = v
	} else if testing.Short() { // the default only, as sim.Seeds
		n = max(1, n/10)
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = splitmix64(uint64(i) + 1)
	}
	return seeds
}

// parseSeed reads a seed as sim.Seeds does: decimal, or hex after 0x.
func parseSeed(s string) (uint64, error) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return strconv.ParseUint(s[2:], 16, 64)
	}
	return strconv.ParseUint(s, 10, 64)
}

// splitmix64 spreads small integers over the seed space.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// runSeeds runs f once per seed as a subtest and, on failure, says how to
// rerun that seed alone.
func runSeeds(t *testing.T, def int, f func(t *testing.T, seed uint64)) {
	test := t.Name()
	for _, seed := range testSeeds(t, def) {
		name := fmt.Sprintf("seed=0x%x", seed)
		ok := t.Run(name, func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rerun: QUIRE_SEED=0x%x go test ./api -run %s", seed, test)
				}
			})
			f(t, seed)
		})
		if !ok {
			return
		}
	}
}

// crashHook is the after-append hook of one engine instance: at its
// crashAt-th append it takes a crash image of fs and notes how many
// acknowledged enqueues and handler calls it must contain. It runs on the
// engine's committer goroutine, after the append returned and before the
// engine learns of it: no commit is in flight then, which is the point at
// which CrashClone cannot deadlock (spec/reliability.md §2.4).
type crashHook struct {
	fs      *vfs.MemFS
	crashAt int
	pct     int
	rng     *rand.Rand
	acked   *idLog
	calls   *idLog

	mu        sync.Mutex
	appends   int
	image     *vfs.MemFS
	ackedIn   int // acknowledged enqueues the image must hold
	callsIn   int // handler calls whose attempt_started the image must hold
	imageSeq  uint64
	imageNote string
}

func (h *crashHook) after(seqs []uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.appends++
	if h.image != nil || h.appends != h.crashAt {
		return
	}
	// Counted before the clone: everything counted was acknowledged before
	// this append returned, so it is synced and in the image.
	h.ackedIn, h.callsIn = h.acked.len(), h.calls.len()
	h.image = h.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: h.pct, RNG: h.rng})
	h.imageSeq = seqs[len(seqs)-1]
	h.imageNote = fmt.Sprintf("append %d (seq %d), %d%% unsynced", h.appends, h.imageSeq, h.pct)
}

// crashImage is a crash image and what it must hold.
type crashImage struct {
	fs      *vfs.MemFS
	ackedIn int
	callsIn int
	seq     uint64
	note    string
}

func (h *crashHook) taken() crashImage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return crashImage{fs: h.image, ackedIn: h.ackedIn, callsIn: h.callsIn, seq: h.imageSeq, note: h.imageNote}
}

// idLog is a list of ids shared by goroutines; a crash cuts it back to
// what the crash image holds.
type idLog struct {
	mu  sync.Mutex
	ids []string
}

func (l *idLog) add(id string) {
	l.mu.Lock()
	l.ids = append(l.ids, id)
	l.mu.Unlock()
}

func (l *idLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

func (l *idLog) truncate(n int) {
	l.mu.Lock()
	l.ids = l.ids[:n]
	l.mu.Unlock()
}

func (l *idLog) prefix(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids[:n]...)
}

// crashOutcome decides a handler's result from the seed, the payload and
// the attempt number only, never from goroutine timing.
func crashOutcome(seed uint64, n, attempt int) error {
	switch splitmix64(seed^uint64(n)<<8^uint64(attempt)) % 8 {
	case 5, 6:
		return api.Retryable("FLAKY", errors.New("try again"))
	case 7:
		return api.Permanent("POISON", errors.New("bad input"))
	}
	return nil
}

// TestEngineCrash_NoAckedEnqueueLostNoDoubleSettlement crashes an engine
// at a seeded append, several times per seed, reopens it on the crash
// image and checks, across all runs: every acknowledged enqueue survives
// and ends completed or buried (RL-1, RL-3); every handler call had an
// acknowledged attempt_started (RL-10); each attempt token settles at most
// once, only as the job's open attempt in the run that started it, and an
// attempt a crash left open is never settled (RL-10, DL-44); the journal
// verifies, and live state equals its replay (RL-7).
func TestEngineCrash_NoAckedEnqueueLostNoDoubleSettlement(t *testing.T) {
	runSeeds(t, 50, runCrashSeed)
}

func runCrashSeed(t *testing.T, seed uint64) {
	ctx := context.Background()
	work := rand.New(rand.NewPCG(seed, 1))
	crashRNG := rand.New(rand.NewPCG(seed, 2))
	crashes := 2 + work.IntN(4)
	t.Logf("seed 0x%x: %d crashes", seed, crashes)

	fs := vfs.NewCrashableMem()
	clk := clocktest.New(t0)
	acked := &idLog{}
	var finalCalls *idLog
	nextN := 0
	var (
		eng      *api.Engine
		imageSeq uint64 // the last seq acknowledged when the image was taken
		lost     int    // attempts recovery found open (DL-44)
	)
	t.Cleanup(func() {
		api.SetAfterAppendHook(nil)
		if eng != nil {
			eng.Close(context.Background())
		}
	})

	for epoch := 0; epoch <= crashes; epoch++ {
		final := epoch == crashes
		calls := &idLog{}
		hook := &crashHook{fs: fs, acked: acked, calls: calls, rng: rand.New(rand.NewPCG(seed, 1000+uint64(epoch)))}
		if !final {
			hook.crashAt = 1 + crashRNG.IntN(50)
			// 1..99 % images are not reproducible (CrashClone walks maps,
			// spec/reliability.md §2.4), but every image must pass.
			hook.pct = []int{0, 100, 1 + crashRNG.IntN(99)}[crashRNG.IntN(3)]
		}
		api.SetAfterAppendHook(hook.after)
		opts := api.Options{
			Dir:           "db",
			FS:            fs,
			Clock:         clk,
			Entropy:       ulid.Monotonic(rand.NewChaCha8(seedKey(seed, epoch)), 0),
			Rand:          rand.NewPCG(seed, 100+uint64(epoch)),
			Workers:       4,
			MaxAttempts:   3,
			Backoff:       api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second},
			SnapshotEvery: api.SnapshotEveryMax, // snapshot writes would race the crash image
		}
		var err error
		eng, err = api.Open(ctx, opts)
		if err != nil {
			t.Fatalf("epoch %d: open: %v", epoch, err)
		}
		if st := eng.Stats(); st.LastSeq < imageSeq {
			t.Fatalf("RL-3: reopened journal ends at seq %d, seq %d was acknowledged before the crash", st.LastSeq, imageSeq)
		} else {
			lost += st.Recovered
		}
		if err := api.Handle(eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
			calls.add(fmt.Sprintf("%s#%d", d.JobID(), d.Attempt()))
			return crashOutcome(seed, in.N, d.Attempt())
		}); err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		idle := func() {
			t.Helper()
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := eng.WaitIdle(wctx); err != nil {
				t.Fatalf("epoch %d: wait idle: %v", epoch, err)
			}
		}
		idle()

		// The workload: rounds of enqueues, some concurrent so that the
		// engine groups them, then clock steps. It stops after the step in
		// which the crash image was taken.
		rounds := 3 + work.IntN(4)
	workload:
		for r := 0; r < rounds; r++ {
			k := 1 + work.IntN(8)
			concurrent := work.IntN(2) == 0
			var wg sync.WaitGroup
			errs := make(chan error, k)
			for i := 0; i < k; i++ {
				n := nextN
				nextN++
				var jo []api.JobOption
				if work.IntN(3) == 0 {
					jo = append(jo, api.Delay(time.Duration(1+work.IntN(3))*500*time.Millisecond))
				}
				enq := func() {
					id, err := eng.Enqueue(ctx, "work", msg{N: n}, jo...)
					if err != nil {
						errs <- err
						return
					}
					acked.add(id)
				}
				if concurrent {
					wg.Add(1)
					go func() { defer wg.Done(); enq() }()
				} else {
					enq()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("epoch %d: enqueue: %v", epoch, err)
			}
			for s := 0; s < 2; s++ {
				idle()
				if hook.taken().fs != nil {
					break workload
				}
				clk.Advance(500 * time.Millisecond)
			}
		}
		idle()

		if final {
			finalCalls = calls
			break
		}
		img := hook.taken()
		if img.fs == nil {
			// The seeded append was never reached: crash now, at a
			// quiescent point (no commit in flight either).
			img = crashImage{fs: fs.CrashClone(vfs.CrashCloneCfg{}), ackedIn: acked.len(), callsIn: calls.len(),
				seq: api.JournalOf(eng).LastSeq(), note: "a quiescent point"}
		}
		imageSeq = img.seq
		t.Logf("epoch %d: crash at %s; %d acknowledged enqueues in the image", epoch, img.note, img.ackedIn)
		// Abandon the instance, as a crash would.
		dead, cancel := context.WithCancel(ctx)
		cancel()
		eng.Close(dead)
		eng = nil
		acked.truncate(img.ackedIn) // later acks died with the instance
		mustHoldStarts := calls.prefix(img.callsIn)
		fs = img.fs
		clk = clocktest.New(clk.Now())

		// RL-1, RL-10: every handler call counted in the image had its
		// attempt_started acknowledged, hence in the image.
		starts, err := imageStarts(fs)
		if err != nil {
			t.Fatalf("epoch %d: read crash image: %v", epoch, err)
		}
		for _, c := range mustHoldStarts {
			if !starts[c] {
				t.Fatalf("RL-10: handler call %s ran, but the crash image holds no attempt_started for it", c)
			}
		}
	}

	// Let every job settle: attempts left open are redelivered at once
	// (DL-44), retries wait 1 s, delays are at most 1.5 s.
	for i := 0; i < 12; i++ {
		clk.Advance(time.Second)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := eng.WaitIdle(wctx)
		cancel()
		if err != nil {
			t.Fatalf("final wait idle: %v", err)
		}
	}
	api.SetAfterAppendHook(nil)
	b := &testBundle{t: t, ctx: ctx, fs: fs, clk: clk, eng: eng}
	checkCrashJournal(t, b, acked.prefix(acked.len()))
	// RL-10: no handler call of the last run without its attempt_started.
	starts := map[string]bool{}
	for _, r := range b.records() {
		if s, ok := r.Body.(*record.AttemptStarted); ok {
			starts[fmt.Sprintf("%s#%d", s.JobID, s.Attempt)] = true
		}
	}
	for _, c := range finalCalls.prefix(finalCalls.len()) {
		if !starts[c] {
			t.Fatalf("RL-10: handler call %s has no attempt_started in the journal", c)
		}
	}
	t.Logf("%d attempts found open by recovery (DL-44)", lost)
}

func seedKey(seed uint64, epoch int) [32]byte {
	var k [32]byte
	for i := 0; i < 4; i++ {
		v := splitmix64(seed ^ uint64(epoch)<<32 ^ uint64(i))
		for j := 0; j < 8; j++ {
			k[i*8+j] = byte(v >> (8 * j))
		}
	}
	return k
}

// imageStarts opens a crash image's journal read-only and returns its
// attempt_started records as "job#attempt".
func imageStarts(fs *vfs.MemFS) (map[string]bool, error) {
	j, err := openReadOnly(fs)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	out := map[string]bool{}
	it := j.Scan(1, math.MaxUint64)
	defer it.Close()
	for it.Next() {
		if s, ok := it.Record().Body.(*record.AttemptStarted); ok {
			out[fmt.Sprintf("%s#%d", s.JobID, s.Attempt)] = true
		}
	}
	return out, it.Err()
}

// openReadOnly opens the journal of an image for inspection.
func openReadOnly(fs vfs.FS) (*journal.Journal, error) {
	return journal.Open("db", journal.Options{FS: fs, Clock: clocktest.New(t0), ReadOnly: true})
}

// checkCrashJournal checks the final engine and its journal after all
// crashes.
func checkCrashJournal(t *testing.T, b *testBundle, acked []string) {
	t.Helper()
	for _, id := range acked {
		j, err := b.eng.Status(b.ctx, id)
		if err != nil {
			t.Fatalf("RL-1: acknowledged enqueue %s lost: %v", id, err)
		}
		if j.Status != api.JobCompleted && j.Status != api.JobBuried {
			t.Fatalf("acknowledged job %s ends %s (attempts %d, consumed %d, last %q), want completed or buried",
				id, j.Status, j.Attempts, j.Consumed, j.LastCode)
		}
	}

	type attemptInfo struct {
		job     string
		run     uint64 // seq of the run_started the attempt began under
		settled bool
	}
	var (
		lastRun  uint64
		enqueued = map[string]bool{}
		latest   = map[string]uint64{} // job -> token of its newest attempt
		attempts = map[uint64]*attemptInfo{}
		settles  int
	)
	for _, r := range b.records() {
		switch body := r.Body.(type) {
		case *record.RunStarted:
			lastRun = r.Seq
		case *record.JobEnqueued:
			if enqueued[body.JobID] {
				t.Fatalf("job %s enqueued twice (seq %d)", body.JobID, r.Seq)
			}
			enqueued[body.JobID] = true
		case *record.AttemptStarted:
			if !enqueued[body.JobID] {
				t.Fatalf("attempt_started at seq %d for job %s before its job_enqueued", r.Seq, body.JobID)
			}
			if prev, ok := latest[body.JobID]; ok {
				if p := attempts[prev]; !p.settled && p.run == lastRun {
					t.Fatalf("RL-10: attempt_started at seq %d while token %d of job %s is open in the same run", r.Seq, prev, body.JobID)
				}
			}
			latest[body.JobID] = r.Seq
			attempts[r.Seq] = &attemptInfo{job: body.JobID, run: lastRun}
		default:
			o := settlementOf(r.Body)
			if o == nil {
				continue
			}
			settles++
			a, ok := attempts[o.Token]
			switch {
			case !ok:
				t.Fatalf("RL-10: settlement %s at seq %d names token %d, which is no attempt_started", r.Kind(), r.Seq, o.Token)
			case a.job != o.JobID:
				t.Fatalf("RL-10: settlement at seq %d of job %s names token %d of job %s", r.Seq, o.JobID, o.Token, a.job)
			case a.settled:
				t.Fatalf("RL-10: token %d settled twice (second at seq %d)", o.Token, r.Seq)
			case latest[o.JobID] != o.Token:
				t.Fatalf("RL-10: revoked token %d of job %s settled at seq %d (newest attempt is %d)", o.Token, o.JobID, r.Seq, latest[o.JobID])
			case a.run != lastRun:
				t.Fatalf("DL-44: token %d, left open by a crash, settled at seq %d in a later run", o.Token, r.Seq)
			}
			a.settled = true
		}
	}
	for id := range enqueued {
		j := b.status(id)
		if j.Status != api.JobCompleted && j.Status != api.JobBuried {
			t.Fatalf("job %s ends %s", id, j.Status)
		}
	}
	rep, err := api.JournalOf(b.eng).Verify()
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v, problems %v", err, rep.Problems)
	}
	b.checkReplay()
	t.Logf("%d jobs (%d acknowledged through crashes), %d attempts, %d settlements, %d records",
		len(enqueued), len(acked), len(attempts), settles, rep.Records)
}

// settlementOf returns the outcome of a settlement record, or nil.
func settlementOf(b record.Body) *record.Outcome {
	switch s := b.(type) {
	case *record.AttemptSucceeded:
		return &s.Outcome
	case *record.AttemptRetryScheduled:
		return &s.Outcome
	case *record.AttemptBuried:
		return &s.Outcome
	case *record.AttemptReleased:
		return &s.Outcome
	}
	return nil
}
