package golden

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
)

// writeGoldenEnv asks TestT11_WriteGolden to write: "1" the images of the
// current version and their expectations, "expect" only the expectations
// of every committed image.
const writeGoldenEnv = "QUIRE_WRITE_GOLDEN"

// t0 is the instant every scenario's clock starts at.
var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// scenarios are the images the current version writes, by name. Each runs
// the real engine on a real directory under a manual clock, with one
// worker and seeded ids and jitter, so that running it again gives the
// same records and the same expectation.
var scenarios = []struct {
	name string
	run  func(g *gen)
}{
	{"jobs", scenarioJobs},
	{"workflows", scenarioWorkflows},
}

// TestT11_WriteGolden writes the golden images; it is skipped unless
// QUIRE_WRITE_GOLDEN is set (see the package documentation).
func TestT11_WriteGolden(t *testing.T) {
	mode := os.Getenv(writeGoldenEnv)
	switch mode {
	case "":
		t.Skipf("set %s=1 to write the images of version %s, %s=expect to rewrite the expectations", writeGoldenEnv, api.Version, writeGoldenEnv)
	case "1":
		for _, sc := range scenarios {
			name := api.Version + "-" + sc.name
			dst := filepath.Join(journalsDir, name, "db")
			src := filepath.Join(t.TempDir(), "db")
			g := &gen{t: t, dir: src, clk: clocktest.New(t0), engineID: "golden-" + name}
			sc.run(g)
			if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			skipLock := vfs.CloneSkip(func(p string) bool { return filepath.Base(p) == "LOCK" })
			if _, err := vfs.Clone(vfs.Default, vfs.Default, src, dst, skipLock, vfs.CloneSync); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", dst)
		}
	case "expect":
	default:
		t.Fatalf("%s=%q: want 1 or expect", writeGoldenEnv, mode)
	}
	for _, name := range imageNames(t) {
		dir := filepath.Join(journalsDir, name)
		got, _, err := derive(loadImage(t, dir), "db")
		if err != nil {
			t.Fatalf("replay of %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "expect.txt"), got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s/expect.txt", dir)
	}
}

// gen drives one scenario: engine instances, one after the other, on one
// directory, each reopening the journal the previous one shut down.
type gen struct {
	t        *testing.T
	ctx      context.Context
	dir      string
	clk      *clocktest.Clock
	engineID string
	epoch    uint64
	eng      *api.Engine
}

// open opens the next engine instance, registers with register and
// starts it. The first instance creates the journal with a fixed engine
// id, so that the records' chain is the same every time.
func (g *gen) open(register func(e *api.Engine) error) {
	g.t.Helper()
	g.ctx = context.Background()
	if g.epoch == 0 {
		j, err := journal.Open(g.dir, journal.Options{Clock: g.clk, EngineID: g.engineID})
		if err != nil {
			g.t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			g.t.Fatal(err)
		}
	}
	g.epoch++
	var key [32]byte
	key[0] = byte(g.epoch)
	eng, err := api.Open(g.ctx, api.Options{
		Dir:                   g.dir,
		Clock:                 g.clk,
		Entropy:               rand.NewChaCha8(key),
		Rand:                  rand.NewPCG(g.epoch, 11),
		Workers:               1,
		SnapshotEvery:         100,
		DeadlineCheckInterval: time.Minute,
	})
	if err != nil {
		g.t.Fatalf("open (instance %d): %v", g.epoch, err)
	}
	g.eng = eng
	if err := register(eng); err != nil {
		g.t.Fatalf("register: %v", err)
	}
	if err := eng.Start(g.ctx); err != nil {
		g.t.Fatalf("start: %v", err)
	}
	g.idle()
}

// idle waits until the engine is quiescent at the clock's instant.
func (g *gen) idle() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(g.ctx, time.Minute)
	defer cancel()
	if err := g.eng.WaitIdle(ctx); err != nil {
		g.t.Fatalf("wait idle: %v", err)
	}
}

// advance moves the clock by d in steps of at most a minute, waiting for
// quiescence after each, so that timers fire near their instants.
func (g *gen) advance(d time.Duration) {
	g.t.Helper()
	for d > 0 {
		s := min(d, time.Minute)
		g.clk.Advance(s)
		g.idle()
		d -= s
	}
}

// close shuts the engine down gracefully: the journal gets the shutdown's
// phases and report.
func (g *gen) close() {
	g.t.Helper()
	if err := g.eng.Close(g.ctx); err != nil {
		g.t.Fatalf("close: %v", err)
	}
	if g.eng.ShutdownReport() == nil {
		g.t.Fatal("no shutdown report after Close")
	}
	g.eng = nil
}

// do makes one API call and waits until the engine is quiescent again:
// every call is its own step, so that the worker never runs while the
// caller appends or the clock moves, and the records come out in the same
// order every time.
func (g *gen) do(f func(ctx context.Context, e *api.Engine) error) {
	g.t.Helper()
	if err := f(g.ctx, g.eng); err != nil {
		g.t.Fatal(err)
	}
	g.idle()
}

func (g *gen) enqueue(handler string, payload any, opts ...api.JobOption) string {
	g.t.Helper()
	var id string
	g.do(func(ctx context.Context, e *api.Engine) (err error) {
		id, err = e.Enqueue(ctx, handler, payload, opts...)
		return err
	})
	return id
}

func (g *gen) dispatch(name string, st api.State, opts ...api.DispatchOption) string {
	g.t.Helper()
	var id string
	g.do(func(ctx context.Context, e *api.Engine) (err error) {
		id, err = e.Dispatch(ctx, name, st, opts...)
		return err
	})
	return id
}

type email struct {
	To      string `msgpack:"to"`
	Subject string `msgpack:"subject"`
}

var errTemporary = errors.New("temporarily unavailable")

// scenarioJobs: jobs completed, retried then completed, retried until
// buried, failed permanently, delayed, unique, prioritized, buried and
// requeued by an operator, a paused and resumed queue; more than
// SnapshotEvery records, so a snapshot; two engine runs, each with its
// shutdown report; one delayed job still pending at the end.
func scenarioJobs(g *gen) {
	register := func(e *api.Engine) error {
		return errors.Join(
			api.Handle(e, "send_email", func(ctx context.Context, d *api.Delivery, in email) error { return nil }),
			api.Handle(e, "flaky", func(ctx context.Context, d *api.Delivery, n int) error {
				if d.Attempt() < 3 {
					return errTemporary
				}
				return nil
			}, api.MaxAttempts(5), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 10 * time.Second})),
			api.Handle(e, "broken", func(ctx context.Context, d *api.Delivery, n int) error { return errTemporary },
				api.MaxAttempts(2), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 10 * time.Second})),
			api.Handle(e, "poison", func(ctx context.Context, d *api.Delivery, n int) error {
				return api.Permanent("BAD_INPUT", errors.New("cannot parse"))
			}),
			api.Handle(e, "report", func(ctx context.Context, d *api.Delivery, n int) error { return nil }, api.OnQueue("reports")),
		)
	}
	g.open(register)
	for i := range 30 {
		g.enqueue("send_email", email{To: "user" + string(rune('a'+i%26)) + "@example.com", Subject: "welcome"})
	}
	g.enqueue("send_email", email{To: "ops@example.com", Subject: "urgent"}, api.WithPriority(api.Urgent), api.OnQueue("mail"))
	g.enqueue("flaky", 1)
	g.enqueue("broken", 2)
	g.enqueue("poison", 3)
	g.enqueue("report", 4, api.Unique())
	g.do(func(ctx context.Context, e *api.Engine) error { return e.PauseQueue(ctx, "reports") })
	g.enqueue("report", 5)
	later := g.enqueue("send_email", email{To: "later@example.com", Subject: "reminder"}, api.Delay(time.Hour))
	held := g.enqueue("send_email", email{To: "held@example.com", Subject: "held"}, api.Delay(time.Hour))
	g.do(func(ctx context.Context, e *api.Engine) error { return e.Bury(ctx, later) })
	g.do(func(ctx context.Context, e *api.Engine) error { return e.Bury(ctx, held) })
	g.do(func(ctx context.Context, e *api.Engine) error { return e.Retry(ctx, later) })
	g.advance(time.Minute)
	g.do(func(ctx context.Context, e *api.Engine) error { return e.ResumeQueue(ctx, "reports") })
	g.close()

	g.open(register)
	g.advance(time.Hour)
	g.enqueue("send_email", email{To: "tomorrow@example.com", Subject: "digest"}, api.Delay(24*time.Hour))
	g.close()
}

// scenarioWorkflows: workflows with steps that complete, one that retries
// a step, one that waits for a signal and gets it, one still waiting for
// its signal at the end, one whose deadline passes during a Delay step
// (failed, with its on-deadline handler run), an idempotent dispatch; one
// engine run with its shutdown report.
func scenarioWorkflows(g *gen) {
	ok := func(key string) api.StepFunc {
		return func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			return api.State{key: true}, nil
		}
	}
	register := func(e *api.Engine) error {
		return errors.Join(
			api.HandleDeadline(e, "import_late", func(ctx context.Context, st api.State) error { return nil }),
			e.Register(api.NewWorkflow("order").Then("charge", ok("charged")).Then("ship", ok("shipped"))),
			e.Register(api.NewWorkflow("sync").MaxAttempts(3).Then("pull", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
				if d.Attempt() < 2 {
					return nil, errTemporary
				}
				return api.State{"pulled": 3}, nil
			})),
			e.Register(api.NewWorkflow("article").Then("draft", ok("drafted")).
				WaitForSignal("approved").Into("approval").Then("publish", ok("published"))),
			e.Register(api.NewWorkflow("import").Then("fetch", ok("fetched")).Delay(2*time.Hour).Then("load", ok("loaded")).
				MustCompleteWithin(time.Hour).OnDeadline("import_late")),
		)
	}
	g.open(register)
	g.dispatch("order", api.State{"order": 42, "_card_token": "tok_1"}, api.IdempotencyKey("order-42"))
	g.dispatch("order", api.State{"order": 42}, api.IdempotencyKey("order-42"))
	g.dispatch("sync", api.State{"source": "crm"})
	approved := g.dispatch("article", api.State{"title": "Hello"})
	g.dispatch("article", api.State{"title": "Pending"})
	g.dispatch("import", api.State{"file": "import-7.csv"})
	g.advance(10 * time.Second)
	g.do(func(ctx context.Context, e *api.Engine) error {
		return e.Signal(ctx, approved, "approved", api.State{"by": "ann"})
	})
	g.advance(90 * time.Minute)
	g.close()
}
