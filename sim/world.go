package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

// T0 is the instant every simulated world's clock starts at, for tests
// to compute instants from ([World.At] takes offsets from it). It is a
// variable only because Go has no time.Time constants: do not assign to
// it. Worlds read their own copy, so an assignment changes what the test
// computes, not where the worlds start.
var T0 = t0

// t0 is the instant worlds start at; [T0] is its exported copy.
var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// Dir is the journal directory on the world's in-memory filesystem.
const Dir = "db"

// idleTimeout bounds, in real time, the wait for one quiescent point: a
// world that reaches none for this long fails naming its seed (the
// watchdog).
const idleTimeout = 60 * time.Second

// advanceStopsMaxDefault is the default of [AdvanceStopsMax]: 30 days
// of a timer every 60 s are 43 200 stops; 2^20 are two years of them.
const advanceStopsMaxDefault = 1 << 20

// testHookBeforeReopen, when set by a test, runs on the driver goroutine
// before each reopen (after a crash or shutdown), with the filesystem the
// engine is about to open. The planted-bug tests edit the journal there,
// as a faulty engine would have written it, and expect the oracle to fail.
var testHookBeforeReopen func(fs vfs.FS)

// Seeded source purposes: each purpose draws from its own stream, so draws
// added to one leave the others unchanged.
const (
	purposeWorkload = 1 + iota
	purposeCrash
	purposeImage
	purposeJitter
	purposeEntropy
	purposeOutcome
)

// Option configures a [World].
type Option func(*config)

type config struct {
	tb testing.TB
	// outer is the test that [Run] and [Check] run tb under: a scenario
	// that asserts on it instead of on [World.T] fails it, not tb.
	outer testing.TB
	setup []func(*api.Engine) error
	mod   []func(*api.Options)

	slow, slowLimit time.Duration
	stepMode        bool
	stopsMax        int

	// bad describes the options the world refuses (a nil function): New
	// fails the world with it.
	bad []string

	// checkRun is the run of its seed that [Check] builds the world for,
	// 1 to checkRuns, or 0 for a world of [Run] or [New].
	checkRun int
}

// WithT reports the world's failures to tb: the first oracle violation or
// unexpected error fails the test with the seed, the trace hash, the
// journal images (see "Reproduction" in the package documentation) and
// the rerun command, and the world is finished when the test ends. A
// failure of tb itself while the world runs (an assertion through
// [World.T]) is reported the same way when the test ends. Without WithT,
// failures are collected and returned by [World.Err].
func WithT(tb testing.TB) Option { return func(c *config) { c.tb = tb } }

// under makes a world of [Run] or [Check] treat a failure of outer, the
// test the seed's subtest runs under, as a failure of the seed.
func under(outer testing.TB) Option { return func(c *config) { c.outer = outer } }

// checkRunOf marks the world as run n (from 1) of its seed under [Check],
// which its failure report names.
func checkRunOf(n int) Option { return func(c *config) { c.checkRun = n } }

// Setup adds f to the functions that register handlers and workflows on
// every engine instance the world opens (the first and each one after a
// crash or restart), before the engine starts. A nil f fails the world
// when it is built.
func Setup(f func(e *api.Engine) error) Option {
	return func(c *config) {
		if f == nil {
			c.bad = append(c.bad, "Setup(nil): the function that registers handlers and workflows is nil")
			return
		}
		c.setup = append(c.setup, f)
	}
}

// StepMode makes the world find every quiescent point by looking at all
// the goroutines of the process, not only at the engine's loop (see "Step
// mode" in the package documentation). A world that parks work in
// [World.Take], or runs a shutdown, does so from then on anyway.
func StepMode() Option { return func(c *config) { c.stepMode = true } }

// AdvanceStopsMax bounds the instants one [World.Advance] or
// [World.AdvanceTo] stops at (engine timers, ends of parked work,
// scheduled events). Zero or less means 1<<20, which a 30-day advance
// over a 60 s periodic timer (43 200 stops) is far from. An advance that would
// need more fails the world naming this bound, rather than jump the
// clock and fire timers late; use [World.Jump] when a jump is what the
// test means.
func AdvanceStopsMax(n int) Option { return func(c *config) { c.stopsMax = n } }

// EngineOptions adjusts the engine's options after the world has set its
// own (directory, filesystem, clock, entropy, jitter source, one worker,
// no snapshots), for the options a test varies: timeouts, limits, Workers
// (with more than one, attempts run their code in turns, one at a time:
// see "Limits" in the package documentation).
//
// f must not replace the world's own Dir, FS, Clock, Entropy or Rand:
// the world crashes, reopens and inspects its own in-memory filesystem
// under its own clock, and the seed must decide every identity and
// jitter. A world whose options f changed there fails when it opens its
// first engine, naming the field, before the engine touches any disk
// (building Options from scratch, *o = api.Options{}, changes them all).
// The world's own middleware, which notes each handler call for the
// oracle, is put in front of o.Middleware after f, so f may set that
// list as it likes. A nil f fails the world when it is built.
func EngineOptions(f func(*api.Options)) Option {
	return func(c *config) {
		if f == nil {
			c.bad = append(c.bad, "EngineOptions(nil): the function that adjusts the engine's options is nil")
			return
		}
		c.mod = append(c.mod, f)
	}
}

// World is one simulated deployment: the real engine on a crashable
// in-memory filesystem under a manual clock, with every random choice
// drawn from one seed. Its methods are the scenario's steps; each step
// runs on the caller's goroutine, waits until the engine is quiescent,
// feeds what the engine acknowledged to the oracle, checks it and mixes
// the step into the trace hash. A World is not safe for concurrent use:
// its steps and engine accessors belong to the scenario's goroutine
// (handlers may call only [World.Take], [World.Fails], [World.Now],
// [World.Seed] and [World.T]); a step called while another one runs
// fails the world.
type World struct {
	seed uint64
	cfg  config
	ctx  context.Context

	fs    *vfs.MemFS
	inj   *injector
	clk   *clocktest.Clock
	eng   *api.Engine
	epoch int

	work    *rand.Rand
	crashes *rand.Rand
	images  *rand.Rand
	crashN  int
	image   *vfs.MemFS // the last crash image, as the crash left it (the world runs on a copy)
	imageN  int        // the step of the trace that crash is
	imageAt time.Time  // the world's instant at that crash
	stopped bool       // the engine was shut down and not reopened

	// failedBefore: the test was already failed when the world was built;
	// failedIn: it failed while the world ran (before Finish).
	failedBefore, failedIn bool

	act   *actors
	stack []byte       // runtime.Stack buffer of the quiescence check
	shut  *shutdownRun // the shutdown in progress, if any
	last  *ShutdownResult

	events  eventHeap
	evSeq   uint64
	trace   uint64
	steps   []Step
	mixedAt []int // the records mixed into the trace after each step
	mixed   int   // the records mixed into the trace so far
	orc     *oracle
	lastDig [32]byte

	// The world's first failure. A handler that misuses the world sets
	// it from its own goroutine; only the scenario's goroutine reports it
	// to the test (raised), at the end of the step it happened in.
	mu     sync.Mutex
	err    error
	errN   int // the step err happened in
	failed atomic.Bool
	raised bool

	done atomic.Bool             // Finish has run
	cur  atomic.Pointer[stepRef] // the step in progress, nil between steps
}

// stepRef names the step in progress: its index in the trace and what.
type stepRef struct {
	n    int
	what string
}

// Step is one entry of a world's trace: what happened and the trace hash
// after it.
type Step struct {
	N    int
	What string
	Hash uint64
}

// New returns the world of seed. The engine opens at the first step, after
// every [Setup] function and every [World.Register] call made before it.
func New(seed uint64, opts ...Option) *World {
	w := &World{
		seed:    seed,
		ctx:     context.Background(),
		fs:      vfs.NewCrashableMem(),
		clk:     clocktest.New(t0),
		work:    rand.New(rand.NewPCG(seed, purposeWorkload)),
		crashes: rand.New(rand.NewPCG(seed, purposeCrash)),
		images:  rand.New(rand.NewPCG(seed, purposeImage)),
		trace:   0xcbf29ce484222325 ^ seed,
		orc:     newOracle(),
		inj:     newInjector(),
		act:     newActors(),
		stack:   make([]byte, 64<<10),
	}
	for _, o := range opts {
		o(&w.cfg)
	}
	if w.cfg.stopsMax <= 0 {
		w.cfg.stopsMax = advanceStopsMaxDefault
	}
	if w.cfg.slow > 0 {
		w.inj.slow = errorfs.RandomLatency(errorfs.Writes, w.cfg.slow, int64(seed), w.cfg.slowLimit)
	}
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
		tb.Logf("sim: seed 0x%x", seed)
		w.failedBefore = w.testFailed()
		tb.Cleanup(w.cleanup)
	}
	if len(w.cfg.bad) > 0 {
		w.misuse("%s", strings.Join(w.cfg.bad, "; "))
	} else if inBubble() {
		w.misuse("%s", errBubble)
	}
	return w
}

// testFailed reports whether the world's test, or the test [Run] or
// [Check] runs it under, has failed.
func (w *World) testFailed() bool {
	return w.cfg.tb.Failed() || w.cfg.outer != nil && w.cfg.outer.Failed()
}

// cleanup ends a [WithT] world when its test ends: it finishes the world
// unless the test failed, reports a failure of the test during the world
// (an assertion of the scenario's, which the world did not see) with what
// reproduces it, and ends the engine and its parked work.
func (w *World) cleanup() {
	tb := w.cfg.tb
	if !w.done.Load() {
		failed := w.testFailed()
		w.failedIn = !w.failedBefore && failed
		if !failed {
			w.Finish()
		}
	}
	if w.failedIn && w.Err() == nil {
		last := "none"
		if n := len(w.steps); n > 0 {
			last = fmt.Sprintf("%q", w.steps[n-1].What)
		}
		tb.Errorf("sim seed 0x%x, step %d (%s): the test failed (last step: %s)\n%s",
			w.seed, len(w.steps), w.Now().Sub(t0), last, w.report(len(w.steps)))
	}
	w.closeEngine()
}

// closeEngine ends the engine instance still open, if any, as a process
// exit would: closed with an ended context (errors ignored, a shutdown in
// progress dies with it), then every parked work ended.
func (w *World) closeEngine() {
	if w.eng != nil {
		// Handlers still running while the engine closes are a dead
		// process's: they may not drive the world.
		defer w.running(len(w.steps), "close")()
		dead, cancel := context.WithCancel(context.Background())
		cancel()
		w.eng.Close(dead)
		w.eng = nil
		w.shut = nil
	}
	w.act.kill(-1, w.clk.Now())
}

// T returns the test the world reports to (see [WithT]): under [Run] and
// [Check], the subtest of the world's seed. Scenarios assert through it
// (w.T().Fatalf, or helpers that take a testing.TB), so that a failure
// is the seed's: it names the seed, keeps the journal images, prints the
// rerun command and stops Run at that seed. As with any testing.TB,
// FailNow and Fatalf must be called from the scenario's goroutine, not
// from a handler. T returns nil for a world built without WithT.
func (w *World) T() testing.TB { return w.cfg.tb }

// Seed returns the world's seed.
func (w *World) Seed() uint64 { return w.seed }

// Rand returns the world's workload source, for scenario generators: draw
// from it, never from the global source, so that a seed reproduces.
func (w *World) Rand() *rand.Rand { return w.work }

// Now returns the simulated time.
func (w *World) Now() time.Time { return w.clk.Now() }

// Clock returns the world's manual clock. Move it through the world's
// steps (Advance, Jump), not directly, or the oracle misses the instants.
func (w *World) Clock() *clocktest.Clock { return w.clk }

// Engine returns the current engine instance, opening it if needed. It
// changes at every crash and restart. After [World.Finish], or once the
// world has failed, it returns nil (after Finish it also fails the
// world). Read from it freely; create work through the world's steps
// ([World.Enqueue], [World.Dispatch], [World.Signal], [World.Do]): the
// oracle learns of what they acknowledge and checks that no crash loses
// it, which it cannot do for a call made on the engine directly.
func (w *World) Engine() *api.Engine {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Engine") {
		return nil
	}
	w.ensureOpen()
	return w.eng
}

// TraceHash returns the rolling hash of every step so far.
func (w *World) TraceHash() uint64 { return w.trace }

// Trace returns the steps so far. Opening an engine instance is a step
// of its own, "open": the first step's, and every reopen after a crash,
// a [World.DiskFault] or a shutdown, which is listed just before the step
// that reopened (so a crash reads "open", then "crash 0%").
func (w *World) Trace() []Step { return append([]Step(nil), w.steps...) }

// Digest returns the live state digest after the last step: the SHA-256
// of the engine's replayed state ([api.Engine.StateDigest]), which the
// oracle checks equals the fold of the acknowledged records. That state
// holds the unfinished work, the last seq and counts of the finished
// work, so the digest changes when a job completes, but does not cover
// what the finished work was (the trace's records do).
func (w *World) Digest() [32]byte { return w.lastDig }

// Err returns the first failure, or nil. It is safe to call from any
// goroutine.
func (w *World) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Register adds f to the world's setup (see [Setup]); if the engine is
// already open, f also runs on it now.
func (w *World) Register(f func(e *api.Engine) error) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("Register") {
		return
	}
	if f == nil {
		w.misuse("Register(nil): the function that registers handlers and workflows is nil")
		return
	}
	w.cfg.setup = append(w.cfg.setup, f)
	if w.eng != nil {
		if err := f(w.eng); err != nil {
			w.fail("register: %w", err)
		}
	}
}

// Fails reports whether the attempt-th attempt of the work named key fails
// in this world, with probability pct percent. It depends only on the seed,
// key and attempt, never on scheduling, so handlers can use it to be flaky
// reproducibly.
func (w *World) Fails(key string, attempt, pct int) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", w.seed, key, attempt)
	return int(mix(h.Sum64()^purposeOutcome)%100) < pct
}

// fail records the world's first failure, at the step in progress (or
// the next one), and reports it. It must be called on the scenario's
// goroutine: with [WithT] it ends it (Fatalf). format may wrap errors
// with %w; [World.Err] unwraps to them.
func (w *World) fail(format string, args ...any) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	w.failKind(len(w.steps), nil, format, args...)
	w.raise()
}

// misuse is [World.fail] for a failure of kind [ErrMisuse].
func (w *World) misuse(format string, args ...any) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	w.failKind(len(w.steps), ErrMisuse, format, args...)
	w.raise()
}

// violation is [World.fail] for a failure of kind [ErrViolation].
func (w *World) violation(format string, args ...any) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	w.failKind(len(w.steps), ErrViolation, format, args...)
	w.raise()
}

// failAt records the world's first failure at step n without reporting
// it. It is safe to call from any goroutine: a handler that misuses the
// world records its failure here (misuseAt), and the step it happened in
// reports it on the scenario's goroutine ([World.raise]).
func (w *World) failAt(n int, format string, args ...any) { w.failKind(n, nil, format, args...) }

// misuseAt is [World.failAt] for a failure of kind [ErrMisuse].
func (w *World) misuseAt(n int, format string, args ...any) {
	w.failKind(n, ErrMisuse, format, args...)
}

// failKind records the world's first failure, of kind (nil, [ErrMisuse]
// or [ErrViolation]), at step n.
func (w *World) failKind(n int, kind error, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	cause := fmt.Errorf(format, args...)
	w.err = &failure{
		msg:   fmt.Sprintf("sim seed 0x%x, step %d (%s): %s", w.seed, n, w.Now().Sub(t0), cause),
		kind:  kind,
		cause: cause,
	}
	w.errN = n
	w.failed.Store(true)
}

// raise reports the world's failure to its test, once: with the seed, the
// journal images and the rerun command, and ends the scenario (Fatalf).
// It runs only on the scenario's goroutine.
func (w *World) raise() {
	tb := w.cfg.tb
	if tb == nil || w.raised || !w.failed.Load() {
		return
	}
	tb.Helper()
	w.raised = true
	err := w.Err()
	w.mu.Lock()
	n := w.errN
	w.mu.Unlock()
	tb.Fatalf("%v\n%s", err, w.report(n))
}

// enter guards every step and engine accessor, named op: called while a
// step runs (so from a handler, guard, middleware or hook, on a goroutine
// of the engine's), it records the misuse for that step to report and
// refuses; called after [World.Finish], it fails the world and refuses;
// after a failure it reports it (once) and refuses.
func (w *World) enter(op string) bool {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if s := w.cur.Load(); s != nil {
		w.misuseAt(s.n, "%s called during step %d (%q): World steps and engine accessors must be called from the scenario's goroutine, "+
			"between steps, never from a handler, guard, middleware or hook (enqueue follow-up work through the engine or the Delivery; "+
			"take simulated time with World.Take)", op, s.n, s.what)
		return false
	}
	if w.done.Load() {
		w.misuse("%s after Finish: the world is finished and its engine shut down; steps and engine accessors are refused", op)
		return false
	}
	if w.failed.Load() {
		w.raise()
		return false
	}
	return true
}

// running marks the step n (what) as in progress until the returned
// function runs: a World step called meanwhile is a handler's (see
// [World.enter]).
func (w *World) running(n int, what string) func() {
	prev := w.cur.Swap(&stepRef{n: n, what: what})
	return func() { w.cur.Store(prev) }
}

// testCheck fails the world if its test failed since the world was
// built: an assertion through [World.T] from a handler (Errorf, or
// Fatalf, which ends only the handler's goroutine) or from the scenario,
// so that the failure is reported at the step it happened in (when, is
// "during" or "before" a step) and the scenario stops there.
func (w *World) testCheck(when string, n int, what string) {
	if w.cfg.tb == nil || w.failedBefore || w.failed.Load() || !w.testFailed() {
		return
	}
	w.cfg.tb.Helper()
	w.failedIn = true
	after := ""
	if k := len(w.steps); when == "before" && k > 0 {
		after = fmt.Sprintf(", after step %d (%q)", k-1, w.steps[k-1].What)
	}
	w.failAt(n, "the test failed %s step %d (%q)%s; its messages are above", when, n, what, after)
	w.raise()
}

// report keeps the world's journal images and describes how to reproduce
// its failure at step n: the trace hash, where the images are, the rerun
// command.
func (w *World) report(n int) string {
	return fmt.Sprintf("%strace hash %016x\n%s\nrerun: %s",
		w.checkNote(), w.trace, w.keepArtifacts(n), rerunCommand(w.seed, w.cfg.tb.Name()))
}

// checkNote says, for a world of [Check] past its seed's first run,
// which run failed and what that means: the runs before it passed on the
// same seed, so something other than the seed decides the outcome (RL-8).
func (w *World) checkNote() string {
	if w.cfg.checkRun < 2 {
		return ""
	}
	procs := ""
	if w.cfg.checkRun == checkRuns {
		procs = ", under GOMAXPROCS=1"
	}
	return fmt.Sprintf("sim.Check: this is run %d of %d of seed 0x%x%s, and the runs before it passed: "+
		"something other than the seed decides the outcome (RL-8), such as state the scenario or its handlers share "+
		"between runs (a variable declared outside the scenario function), a global random source, real time, "+
		"or goroutines of their own\n", w.cfg.checkRun, checkRuns, w.seed, procs)
}

// rerunCommand is the shell command that runs test (a test's full name,
// subtests included) alone with seed: from the package's directory, where
// go test runs a test binary, with a -run pattern anchored at every level.
// The directory and the pattern are quoted for a POSIX shell, so that a
// subtest name with a quote ("customer's order") or a directory with a
// space still make a command that runs as printed.
func rerunCommand(seed uint64, test string) string {
	parts := strings.Split(test, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	dir, err := os.Getwd()
	if err != nil {
		return fmt.Sprintf("cd <package directory> && QUIRE_SEED=0x%x go test -run %s .", seed, shellQuote(strings.Join(parts, "/")))
	}
	return fmt.Sprintf("cd %s && QUIRE_SEED=0x%x go test -run %s .", shellWord(dir), seed, shellQuote(strings.Join(parts, "/")))
}

// shellQuote quotes s as one word for a POSIX shell: in single quotes,
// each single quote of s written as a quote that ends the quoting, a
// backslash-escaped quote and a quote that starts it again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWord is s as one word for a POSIX shell: as is when it holds only
// bytes no shell treats specially (a usual path), else [shellQuote]d.
func shellWord(s string) string {
	if s == "" {
		return "''"
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("@%+=:,./_-", c) >= 0:
		default:
			return shellQuote(s)
		}
	}
	return s
}

// Failed reports whether the world has failed; steps after a failure do
// nothing. It is safe to call from any goroutine.
func (w *World) Failed() bool { return w.failed.Load() }

// options returns the options of the next engine instance: the world's
// own, then the caller's [EngineOptions], then the world's middleware in
// front of the caller's. replaced names the world's own fields that an
// EngineOptions function replaced, if any.
func (w *World) options() (o api.Options, replaced []string) {
	var key [32]byte
	for i := 0; i < 4; i++ {
		v := mix(w.seed ^ uint64(w.epoch)<<32 ^ uint64(i) ^ purposeEntropy<<48)
		for j := 0; j < 8; j++ {
			key[i*8+j] = byte(v >> (8 * j))
		}
	}
	o = api.Options{
		Dir:     Dir,
		FS:      w.engineFS(),
		Clock:   w.clk,
		Entropy: rand.NewChaCha8(key),
		Rand:    rand.NewPCG(w.seed, purposeJitter<<32|uint64(w.epoch)),
		// One worker: attempts run one at a time, so the order of
		// entropy and jitter draws is the machine's, not the scheduler's.
		// With more (EngineOptions), each attempt waits for a turn.
		Workers: 1,
		// Snapshot writes run in the background and would race a crash
		// image; snapshot + tail is covered by the replay properties.
		SnapshotEvery: api.SnapshotEveryMax,
	}
	own := o
	for _, m := range w.cfg.mod {
		m(&o)
	}
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"Dir", o.Dir != own.Dir},
		{"FS", o.FS != own.FS},
		{"Clock", o.Clock != own.Clock},
		{"Entropy", o.Entropy != own.Entropy},
		{"Rand", o.Rand != own.Rand},
	} {
		if f.changed {
			replaced = append(replaced, "Options."+f.name)
		}
	}
	// Every handler call is noted, so the oracle can check that its
	// attempt_started was acknowledged before it (RL-10). With more than
	// one worker, attempts that one event starts would run side by side
	// and settle in whatever order the Go scheduler gives them: each
	// first waits for a turn of its own, as on-deadline handlers do.
	epoch := w.epoch
	turns := o.Workers != 1 // zero is the engine's default, 16
	noted := api.MiddlewareFuncs{Label: "sim", BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
		if turns {
			w.turn(ctx, fmt.Sprintf("attempt/%s/%d", d.JobID(), d.Attempt()))
		}
		w.orc.called(epoch, d.JobID(), d.Attempt())
		return nil
	}}
	o.Middleware = append([]api.Middleware{noted}, o.Middleware...)
	api.SimDeadlineTurn(&o, w.turn)
	return o, replaced
}

func (w *World) ensureOpen() {
	if w.eng != nil || w.Failed() {
		return
	}
	w.open()
}

func (w *World) open() {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if w.cur.Load() == nil {
		defer w.raise() // a handler's misuse while the engine opened
		defer w.running(len(w.steps), "open")()
	}
	w.stopped = false
	if testHookBeforeReopen != nil && w.epoch > 0 {
		testHookBeforeReopen(w.fs)
	}
	if !w.orc.audit(w.fs, w.clk.Now()) {
		w.violation("%s", w.orc.first())
		return
	}
	w.epoch++ // every instance draws fresh entropy: ids never repeat
	w.act.setEpoch(w.epoch)
	w.orc.setEpoch(w.epoch)
	opts, replaced := w.options()
	if len(replaced) > 0 {
		w.misuse("open (epoch %d): EngineOptions replaced %s, the world's own: the world runs the engine "+
			"on its in-memory filesystem (Dir, FS), under its manual clock (Clock), with identities and jitter drawn from "+
			"the seed (Entropy, Rand); adjust other fields and leave these as the world set them", w.epoch, strings.Join(replaced, ", "))
		return
	}
	eng, err := api.Open(w.ctx, opts)
	if err != nil {
		w.fail("open (epoch %d): %w", w.epoch, err)
		return
	}
	w.eng = eng
	for _, f := range w.cfg.setup {
		if err := f(eng); err != nil {
			w.fail("setup: %w", err)
			return
		}
	}
	if err := eng.Start(w.ctx); err != nil {
		w.fail("start: %w", err)
		return
	}
	w.idle()
	w.check("open")
}

// idle brings the world to a quiescent point at the current instant (see
// "Step mode" in the package documentation): every goroutine of the
// process waits for another one. Then it ends a finished shutdown, or
// wakes the first parked work that is due (each wake-up is checked and
// traced as a step of its own) and settles again, until neither is left.
func (w *World) idle() {
	if w.Failed() {
		return
	}
	limit := time.NewTimer(idleTimeout)
	defer limit.Stop()
	woke := ""
	for !w.Failed() {
		if !w.waitIdle() {
			return
		}
		if !w.strict() {
			return // the engine's WaitIdle is the quiescent point
		}
		if !waitQuiet(&w.stack, limit.C) {
			w.fail("watchdog: no quiescent point after %v of real time (a handler blocking on something else than Take, or a stuck engine). "+
				"A quiescent point needs every goroutine of the test binary, not only the world's, to wait for another: a goroutine "+
				"of another test running beside this one (t.Parallel) that computes, sleeps or makes system calls for this long, "+
				"or any other busy goroutine of the process, stalls it too. The goroutines not waiting:\n%s", idleTimeout, busy(&w.stack))
			return
		}
		if w.shut != nil {
			select {
			case err := <-w.shut.done:
				w.endShutdown(err)
				continue
			default:
			}
		}
		if woke != "" {
			w.check(woke)
			woke = ""
			continue
		}
		if woke = w.act.wakeOne(w.clk.Now()); woke == "" {
			return
		}
	}
}

// strict reports whether the world must find its quiescent points by
// looking at every goroutine (step mode) rather than trust the engine's
// WaitIdle: in step mode, once work has been parked in Take (an abandoned
// execution may still return), and while a shutdown runs (its
// coordinator waits on the clock, outside the engine's loop).
func (w *World) strict() bool {
	return w.cfg.stepMode || w.act.used.Load() || w.shut != nil
}

// waitIdle is the fast path of idle: the engine's own WaitIdle, which
// returns as soon as no attempt runs. It cannot return while work is
// parked in Take (the attempt is running) or while a shutdown runs, so it
// is skipped then, and given up as soon as some work parks. It is skipped
// in step mode too, where the goroutine dump alone decides: a handler
// blocked on something of the test's is a quiescent point there, and
// would keep WaitIdle from returning. It reports false if the world failed.
func (w *World) waitIdle() bool {
	if w.eng == nil || w.cfg.stepMode || w.shut != nil || w.act.count() > 0 {
		return true
	}
	// Work parks before it signals: drain a stale signal, then look again,
	// so that a park between the two is seen by one or the other.
	select {
	case <-w.act.parks:
	default:
	}
	if w.act.count() > 0 {
		return true
	}
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	done := make(chan error, 1)
	eng := w.eng
	go func() { done <- eng.WaitIdle(ctx) }()
	watchdog := time.NewTimer(idleTimeout)
	defer watchdog.Stop()
	select {
	case err := <-done:
		if err != nil {
			w.fail("wait idle: %w", err)
			return false
		}
	case <-w.act.parks:
		cancel()
		<-done
	case <-watchdog.C:
		cancel()
		<-done
		w.fail("wait idle (watchdog, %v of real time): the engine never became idle", idleTimeout)
		return false
	}
	return true
}

// check runs the oracle against the live engine and mixes what into the
// trace.
//
// The trace mixes, for each step, what, the instant, the live state
// digest and every journal record the step appended (seq, instant,
// stream, kind and the body's canonical encoding): the digest covers only
// unfinished work, so the records are what makes the trace see work that
// has already finished. All of it is a function of the seed: instants come
// from the manual clock, ids from the seeded entropy.
func (w *World) check(what string) {
	if w.Failed() {
		return
	}
	if w.eng != nil {
		dig, ok := w.orc.observe(w.ctx, w.eng, w.clk.Now())
		if !ok {
			w.violation("after %s: %s", what, w.orc.first())
			return
		}
		w.lastDig = dig
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%016x|%s|%d|%x", w.trace, what, w.clk.Now().Sub(t0), w.lastDig)
	recs := w.orc.recs
	// An audit re-reads the journal after a crash: the records it finds
	// keep the acknowledged ones (or it fails), so mixed never passes them.
	w.mixed = min(w.mixed, len(recs))
	var body []byte
	for _, r := range recs[w.mixed:] {
		var err error
		if body, err = record.AppendBody(body[:0], r.Body); err != nil {
			w.fail("after %s: encode record seq %d (%s) for the trace: %w", what, r.Seq, r.Kind(), err)
			return
		}
		fmt.Fprintf(h, "|%d/%d/%s/%d/", r.Seq, r.At, r.Stream, r.Kind())
		h.Write(body)
	}
	w.mixed = len(recs)
	w.trace = h.Sum64()
	w.steps = append(w.steps, Step{N: len(w.steps), What: what, Hash: w.trace})
	w.mixedAt = append(w.mixedAt, w.mixed)
}

// step runs one scenario step: f, then quiescence, the oracle and the
// trace. what must describe the step from the seed alone (no pointers, no
// real durations). A failure of the world or of its test during the step
// (a handler's included) is reported at the step, on the scenario's
// goroutine.
func (w *World) step(what string, f func()) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if w.Failed() || w.done.Load() {
		w.raise()
		return
	}
	w.testCheck("before", len(w.steps), what)
	if w.stopped {
		w.open()
	} else {
		w.ensureOpen()
	}
	if w.Failed() {
		w.raise()
		return
	}
	defer w.raise()
	defer w.running(len(w.steps), what)()
	f()
	w.idle()
	w.check(what)
	w.testCheck("during", len(w.steps)-1, what)
}

// Records returns the journal records the oracle has seen acknowledged,
// in seq order; after [World.Finish], the whole journal.
func (w *World) Records() []record.Record { return append([]record.Record(nil), w.orc.recs...) }

// Violations returns every oracle violation found so far.
func (w *World) Violations() []string { return append([]string(nil), w.orc.violations...) }
