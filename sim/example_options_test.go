package sim_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// exampleTB is the testing.TB of the examples that need one: an example
// has no test. It prints the first line of what the world logs and
// reports, without the trace hash and digest (the rest of a report names
// temporary directories), and ends the scenario on FailNow and Fatalf,
// as a test does. Only the methods below are called; the embedded TB is
// nil.
type exampleTB struct {
	testing.TB
	name  string
	quiet bool // print nothing

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

func (t *exampleTB) Helper()          {}
func (t *exampleTB) Name() string     { return t.name }
func (t *exampleTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

func (t *exampleTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *exampleTB) Logf(format string, args ...any) { t.print("log", format, args...) }

func (t *exampleTB) Errorf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	t.print("FAIL", format, args...)
}

func (t *exampleTB) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	runtime.Goexit()
}

func (t *exampleTB) FailNow() {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *exampleTB) print(tag, format string, args ...any) {
	if t.quiet {
		return
	}
	msg, _, _ := strings.Cut(fmt.Sprintf(format, args...), "\n")
	msg, _, _ = strings.Cut(msg, ", trace hash")
	fmt.Printf("%s: %s\n", tag, msg)
}

// runTest runs test as the testing package runs a test function: on a
// goroutine of its own, which FailNow ends, then the cleanups, last
// registered first. It reports whether the test passed, and removes the
// journal images a failing world kept for it.
func runTest(t *exampleTB, test func(t *exampleTB)) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		test(t)
	}()
	<-done
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	root := os.Getenv("QUIRE_SIM_OUT")
	if root == "" {
		root = os.TempDir()
	}
	kept, _ := filepath.Glob(filepath.Join(root, "quire-sim-"+t.name+"-0x*"))
	for _, dir := range kept {
		os.RemoveAll(dir)
	}
	return !t.Failed()
}

// ExampleWithT reports a world's progress and failures to a test. The
// world logs its seed, and when the test ends it finishes and logs its
// step count (and trace hash). A failure fails the test with the seed,
// the step and the instant (then the trace hash, the journal images and
// the rerun command, left out here) and ends the scenario, as Fatalf
// does. In a test, pass the test's t.
func ExampleWithT() {
	runTest(&exampleTB{name: "TestSend"}, func(t *exampleTB) {
		w := sim.New(0x2a, sim.WithT(t))
		registerSend(w)
		w.Enqueue("send", email{To: "ada@example.com"})
		w.Advance(time.Second)
	})
	runTest(&exampleTB{name: "TestUnknown"}, func(t *exampleTB) {
		w := sim.New(0x2a, sim.WithT(t))
		w.Enqueue("nosuch", email{}) // no handler "nosuch": the test fails here
		fmt.Println("not reached")
	})
	// Output:
	// log: sim: seed 0x2a
	// log: sim: seed 0x2a: 5 steps
	// log: sim: seed 0x2a
	// FAIL: sim seed 0x2a, step 1 (0s): enqueue nosuch: quire: handler "nosuch": handler not registered
}

// ExampleSetup registers the application's handler on every engine
// instance the world opens, here the first and the one after a crash.
// Unlike World.Register, Setup needs no world, so the options can be
// built before it.
func ExampleSetup() {
	handlers := sim.Setup(func(e *api.Engine) error {
		return api.Handle(e, "remind", func(ctx context.Context, d *api.Delivery, in email) error { return nil })
	})
	w := sim.New(1, handlers)
	id := w.Enqueue("remind", email{To: "ada@example.com"}, api.Delay(time.Hour))
	w.CrashWith(0)
	w.Advance(time.Hour)
	fmt.Println(w.Job(id).Status)
	finish(w)
	// Output:
	// completed
}

// ExampleStepMode finds every quiescent point from a dump of all the
// process's goroutines. That changes how the world waits, never what
// happens: the trace is the one without it.
func ExampleStepMode() {
	run := func(opts ...sim.Option) *sim.World {
		w := sim.New(1, opts...)
		registerSend(w)
		w.Enqueue("send", email{To: "ada@example.com"})
		w.Crash()
		w.Advance(time.Minute)
		finish(w)
		return w
	}
	fmt.Println(sim.Diverge(run(), run(sim.StepMode())))
	// Output:
	// <nil>
}

// ExampleAdvanceStopsMax bounds the stops of one advance. An hour of the
// engine's 60 s deadline check needs 60 stops: with a bound of 10 the
// advance fails the world rather than jump; Jump is the move that fires
// timers late on purpose.
func ExampleAdvanceStopsMax() {
	w := sim.New(1, sim.AdvanceStopsMax(10))
	registerSend(w)
	w.Advance(time.Hour)
	msg, _, _ := strings.Cut(w.Err().Error(), ": the clock stops")
	fmt.Println(msg)
	w.Finish()

	w = sim.New(1, sim.AdvanceStopsMax(10))
	registerSend(w)
	w.Jump(time.Hour)
	fmt.Println(since(w.Now()), w.Err())
	finish(w)
	// Output:
	// sim seed 0x1, step 11 (10m0s): advance to T0+1h0m0s: still at T0+10m0s after 10 stops (the AdvanceStopsMax bound)
	// 1h0m0s <nil>
}

// ExampleEngineOptions adjusts the engine's options: a deadline check
// every 10 min makes an hour 6 stops of the clock, not 60. Options the
// world owns (here all of them, replaced by a zero Options) fail the
// world when it opens its first engine.
func ExampleEngineOptions() {
	w := sim.New(1, sim.EngineOptions(func(o *api.Options) {
		o.DeadlineCheckInterval = 10 * time.Minute
	}))
	w.Advance(time.Hour)
	fmt.Println(len(w.Trace()), steps(w.Trace(), 1))
	finish(w)

	w = sim.New(1, sim.EngineOptions(func(o *api.Options) { *o = api.Options{} }))
	w.Advance(time.Hour)
	fmt.Println(errors.Is(w.Err(), sim.ErrMisuse))
	w.Finish()
	// Output:
	// 7 [clock 10m0s clock 20m0s clock 30m0s clock 40m0s clock 50m0s clock 1h0m0s]
	// true
}

// ExampleEngineOptions_workers runs the engine with two workers. Each
// attempt runs its code in a turn of its own, a step of the trace (taken
// within the step that made it due, before that step's own entry). The
// three retries due together at 1 s start two at a time (ada and bob, by
// enqueue order); the attempts waiting for a turn run one at a time, in
// key order (bob's id sorts before ada's, and cy's, once its attempt has
// started, too), so a seed's trace repeats.
func ExampleEngineOptions_workers() {
	w := sim.New(1, sim.EngineOptions(func(o *api.Options) { o.Workers = 2 }))
	registerSend(w)
	var names []string // job id, then who it mails
	for _, to := range []string{"ada", "bob", "cy"} {
		names = append(names, w.Enqueue("send", email{To: to + "@example.com"}), to)
	}
	w.Advance(time.Second)
	r := strings.NewReplacer(names...)
	for _, s := range w.Trace() {
		fmt.Println(s.N, r.Replace(s.What))
	}
	finish(w)
	// Output:
	// 0 open
	// 1 turn attempt/ada/1
	// 2 enqueue send
	// 3 turn attempt/bob/1
	// 4 enqueue send
	// 5 turn attempt/cy/1
	// 6 enqueue send
	// 7 turn attempt/bob/2
	// 8 turn attempt/cy/2
	// 9 turn attempt/ada/2
	// 10 clock 1s
}

// ExampleSlowDisk delays the engine's writes by real time. A simulation
// never depends on real time, so the trace is the one of a fast disk.
func ExampleSlowDisk() {
	run := func(opts ...sim.Option) *sim.World {
		w := sim.New(1, opts...)
		registerSend(w)
		w.Enqueue("send", email{To: "ada@example.com"})
		w.CrashWith(100)
		w.Advance(time.Minute)
		finish(w)
		return w
	}
	fmt.Println(sim.Diverge(run(), run(sim.SlowDisk(100*time.Microsecond, 20*time.Millisecond))))
	// Output:
	// <nil>
}

// payment is the scenario of ExampleSeeds, ExampleRun and ExampleCheck:
// the payment workflow of registerPayment, dispatched, crashed, approved
// within its deadline. It reports whether the outcome is one that holds
// on every seed: completed, or failed because authorize exhausted its
// attempts, never expired.
func payment(w *sim.World) bool {
	w.Register(registerPayment(w))
	id := w.Dispatch("payment", api.State{"amount": 100})
	w.Crash()
	w.Advance(time.Duration(w.Rand().IntN(90)) * time.Minute)
	w.Signal(id, "approved", nil)
	w.Advance(3 * time.Hour)
	info := w.Workflow(id)
	return info.Status == api.WorkflowCompleted ||
		info.Status == api.WorkflowFailed && info.Error != api.MessageDeadlineExceeded
}

// ExampleSeeds drives one world per seed. How many seeds depends on the
// run (def by default, a tenth under -short, QUIRE_SEEDS=N for a soak,
// exactly QUIRE_SEED=S to reproduce one), so the example prints only what
// holds for every count: the sequence is fixed, so a smaller count is a
// prefix of a larger one, and the property held on each seed.
func ExampleSeeds() {
	t := &exampleTB{name: "ExampleSeeds"}
	fmt.Println(sim.Seeds(t, 1)[0] == sim.Seeds(t, 20)[0])
	held := true
	for _, seed := range sim.Seeds(t, 3) {
		w := sim.New(seed)
		ok := payment(w)
		if err := w.Finish(); err != nil || !ok {
			fmt.Printf("seed 0x%x: %v %v\n", seed, ok, err)
			held = false
		}
	}
	fmt.Println(held)
	// Output:
	// true
	// true
}

// ExampleRun shows what Run does, which needs the *testing.T of a test:
// in a test file the whole example is
//
//	func TestPayment(t *testing.T) {
//		sim.Run(t, 3, func(w *sim.World) {
//			if !payment(w) {
//				w.T().Fatalf("payment settled wrongly")
//			}
//		})
//	}
//
// For each seed of Seeds(t, 3), Run opens a subtest named after the
// seed, builds the world with WithT(subtest), runs the scenario, which
// asserts through World.T, and finishes the world; it stops at the first
// seed that fails.
func ExampleRun() {
	t := &exampleTB{name: "TestPayment", quiet: true}
	passed := true
	for _, seed := range sim.Seeds(t, 3) {
		st := &exampleTB{name: fmt.Sprintf("TestPayment/seed=0x%x", seed), quiet: true}
		ok := runTest(st, func(st *exampleTB) {
			w := sim.New(seed, sim.WithT(st))
			if !payment(w) {
				w.T().Fatalf("payment settled wrongly")
			}
			w.Finish()
		})
		if !ok {
			passed = false
			break
		}
	}
	fmt.Println(passed)
	// Output:
	// true
}

// ExampleCheck shows what Check does, which needs the *testing.T of a
// test (sim.Check(t, 3, scenario) in a test file): for each seed it runs
// the scenario three times, the last under GOMAXPROCS=1, and compares the
// runs with Diverge.
func ExampleCheck() {
	const seed = 0x2a
	var runs [3]*sim.World
	for i := range runs {
		if i == 2 {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		}
		runs[i] = sim.New(seed)
		payment(runs[i])
		finish(runs[i])
	}
	for i := 1; i < len(runs); i++ {
		fmt.Printf("run %d: %v\n", i, sim.Diverge(runs[0], runs[i]))
	}
	// Output:
	// run 1: <nil>
	// run 2: <nil>
}

// ExampleDiverge compares two finished worlds of one seed whose handler
// behaves differently: the first attempt fails in one and succeeds in the
// other. Diverge names the first step whose hash differs and the first
// record that differs there (the trace hashes are left out here).
func ExampleDiverge() {
	run := func(flaky bool) *sim.World {
		w := sim.New(1)
		w.Register(func(e *api.Engine) error {
			return api.Handle(e, "send", func(ctx context.Context, d *api.Delivery, in email) error {
				if flaky && d.Attempt() == 1 {
					return api.Retryable("SMTP_BUSY", errors.New("try again"))
				}
				return nil
			})
		})
		w.Enqueue("send", email{To: "ada@example.com"})
		w.Advance(time.Minute)
		finish(w)
		return w
	}
	fmt.Println(sim.Diverge(run(true), run(true)))
	err := sim.Diverge(run(true), run(false))
	msg, _, _ := strings.Cut(err.Error(), "\n")
	fmt.Println(regexp.MustCompile(`\([0-9a-f]{16}\)`).ReplaceAllString(msg, "(…)"))
	// Output:
	// <nil>
	// step 1: "enqueue send" (…) vs "enqueue send" (…): first differing record seq 4 (attempt_retry_scheduled, stream job_01KE6SJT80P5NHQF7ZYWY1XF2J)
}
