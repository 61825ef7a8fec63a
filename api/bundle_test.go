package api_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// t0 is the instant every test clock starts at.
var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// testBundle is one engine on an in-memory filesystem under a manual clock.
type testBundle struct {
	t    *testing.T
	ctx  context.Context
	fs   *vfs.MemFS
	clk  *clocktest.Clock
	opts api.Options
	eng  *api.Engine
}

// setup opens an engine; mod adjusts the options before Open.
func setup(t *testing.T, mod func(*api.Options)) *testBundle {
	t.Helper()
	b := &testBundle{t: t, ctx: context.Background(), fs: vfs.NewCrashableMem(), clk: clocktest.New(t0)}
	b.opts = api.Options{
		Dir:     "db",
		FS:      b.fs,
		Clock:   b.clk,
		Entropy: ulid.Monotonic(rand.NewChaCha8([32]byte{1}), 0),
		Rand:    rand.NewPCG(1, 2),
		Workers: 4,
	}
	if mod != nil {
		mod(&b.opts)
	}
	b.open()
	t.Cleanup(func() {
		if b.eng != nil {
			b.eng.Close(context.Background())
		}
	})
	return b
}

func (b *testBundle) open() {
	b.t.Helper()
	eng, err := api.Open(b.ctx, b.opts)
	if err != nil {
		b.t.Fatalf("open: %v", err)
	}
	b.eng = eng
}

// reopen closes the engine gracefully and opens it again on the same files,
// checking first that live state equals replay (RL-7).
func (b *testBundle) reopen(register func(*api.Engine)) {
	b.t.Helper()
	b.checkReplay()
	if err := b.eng.Close(b.ctx); err != nil {
		b.t.Fatalf("close: %v", err)
	}
	b.open()
	if register != nil {
		register(b.eng)
	}
}

// idle waits until the engine is quiescent at the clock's instant.
func (b *testBundle) idle() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := b.eng.WaitIdle(ctx); err != nil {
		b.t.Fatalf("wait idle: %v", err)
	}
}

// advance moves the clock and waits until the engine is quiescent.
func (b *testBundle) advance(d time.Duration) {
	b.t.Helper()
	b.clk.Advance(d)
	b.idle()
}

func (b *testBundle) start() {
	b.t.Helper()
	if err := b.eng.Start(b.ctx); err != nil {
		b.t.Fatalf("start: %v", err)
	}
}

func (b *testBundle) enqueue(handler string, payload any, opts ...api.JobOption) string {
	b.t.Helper()
	id, err := b.eng.Enqueue(b.ctx, handler, payload, opts...)
	if err != nil {
		b.t.Fatalf("enqueue %s: %v", handler, err)
	}
	return id
}

func (b *testBundle) status(id string) api.Job {
	b.t.Helper()
	j, err := b.eng.Status(b.ctx, id)
	if err != nil {
		b.t.Fatalf("status %s: %v", id, err)
	}
	return j
}

func (b *testBundle) wantStatus(id string, want api.JobStatus) api.Job {
	b.t.Helper()
	j := b.status(id)
	if j.Status != want {
		b.t.Fatalf("job %s: status %s, want %s (attempts %d, last error %q)", id, j.Status, want, j.Attempts, j.LastError)
	}
	return j
}

// lastSeq returns the seq the engine's state reflects.
func (b *testBundle) lastSeq() uint64 {
	b.t.Helper()
	_, seq, err := b.eng.StateDigest(b.ctx)
	if err != nil {
		b.t.Fatalf("digest: %v", err)
	}
	return seq
}

// checkReplay is the shared RL-7 check: the live state's digest equals the
// digest of a fresh fold of the journal from seq 1.
func (b *testBundle) checkReplay() {
	b.t.Helper()
	b.idle()
	live, seq, err := b.eng.StateDigest(b.ctx)
	if err != nil {
		b.t.Fatalf("digest: %v", err)
	}
	// Folded as Open folds, so that a journal with a quarantined stream
	// (spec/reliability.md §4.4) replays to its live state too.
	st := replay.New()
	it := api.JournalOf(b.eng).ScanQuarantining(1, seq)
	defer it.Close()
	if _, err := replay.FoldQuarantining(st, it); err != nil {
		b.t.Fatalf("replay: %v", err)
	}
	if st.LastSeq != seq {
		b.t.Fatalf("replayed up to seq %d, live state is at %d", st.LastSeq, seq)
	}
	if got := replay.Digest(st); got != live {
		b.t.Fatalf("RL-7: live state digest %x != replay digest %x at seq %d", live[:8], got[:8], seq)
	}
}

// records returns every sound record of the journal, in order: damaged
// ones that a quarantine set aside (spec/reliability.md §4.4) are left out.
func (b *testBundle) records() []journalRecord {
	b.t.Helper()
	var out []journalRecord
	it := api.JournalOf(b.eng).ScanQuarantining(1, math.MaxUint64)
	defer it.Close()
	for it.Next() {
		if it.Damaged() == nil {
			out = append(out, it.Record())
		}
	}
	if err := it.Err(); err != nil {
		b.t.Fatalf("scan: %v", err)
	}
	return out
}

// recorder collects what handlers observed, safely across goroutines.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

var _ = journal.ErrCorrupt

type journalRecord = record.Record

// countKind returns how many records of kind k the journal holds.
func countKind(recs []journalRecord, k record.Kind) int {
	n := 0
	for _, r := range recs {
		if r.Kind() == k {
			n++
		}
	}
	return n
}
