package sim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// misuseChildEnv names the scenario TestMisuseReported runs as its own
// child, in the test binary it re-executes.
const misuseChildEnv = "QUIRE_SIM_MISUSE_CHILD"

// assertInHandler is a scenario whose handler "a" runs assert on the
// seed's test with its payload, during the first of two advances.
func assertInHandler(assert func(t testing.TB, n int)) func(w *sim.World) {
	return func(w *sim.World) {
		handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
			assert(w.T(), in.N)
			return nil
		})
		w.Enqueue("a", msg{N: 1})
		w.Advance(time.Second)
		w.Advance(time.Minute)
	}
}

// handleA registers handler "a", which runs body.
func handleA(w *sim.World, body func(ctx context.Context, d *api.Delivery, in msg) error) {
	w.Register(func(e *api.Engine) error {
		if err := api.Handle(e, "b", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
			return err
		}
		return api.Handle(e, "a", body)
	})
}

// misuseScenarios are the ways a scenario can misuse a world, or fail
// from a handler, that TestMisuseReported expects to be reported.
var misuseScenarios = map[string]func(w *sim.World){
	// A handler calls a World step instead of enqueuing through the engine.
	"step-from-handler": func(w *sim.World) {
		handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
			w.Enqueue("b", msg{N: 2})
			return nil
		})
		w.Enqueue("a", msg{N: 1})
		w.Advance(time.Second)
	},
	// The scenario calls Take, which only a handler can.
	"take-from-scenario": func(w *sim.World) {
		w.Take(context.Background(), "think", time.Second, sim.Ignore)
		w.Advance(time.Second)
	},
	// A handler asserts through w.T() (Errorf is safe from any goroutine).
	"errorf-from-handler": assertInHandler(func(t testing.TB, n int) { t.Errorf("bad payload %d", n) }),
	// A handler calls w.T().Fatalf: it ends the handler's goroutine only.
	"fatalf-from-handler": assertInHandler(func(t testing.TB, n int) { t.Fatalf("bad payload %d", n) }),
	// The scenario goes on after Finish.
	"step-after-finish": func(w *sim.World) {
		handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
		w.Enqueue("a", msg{N: 1})
		w.Finish()
		w.Enqueue("a", msg{N: 2})
	},
	// A handler parks two works under one key, one of them on a
	// goroutine of its own, where a panic would end the test binary.
	"take-duplicate-key": func(w *sim.World) {
		handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
			errc := make(chan error, 1)
			go func() { errc <- w.Take(ctx, "same", time.Second, sim.Cooperate) }()
			err := w.Take(ctx, "same", 2*time.Second, sim.Cooperate)
			if err2 := <-errc; err == nil {
				err = err2
			}
			return err
		})
		w.Enqueue("a", msg{N: 1})
		w.Advance(time.Minute)
	},
}

// misuseTests are the misuses of Run itself that TestMisuseReported
// expects to fail the test before any seed runs.
var misuseTests = map[string]func(t *testing.T){
	"run-zero-seeds":     func(t *testing.T) { sim.Run(t, 0, func(w *sim.World) { w.Advance(time.Second) }) },
	"check-zero-seeds":   func(t *testing.T) { sim.Check(t, 0, func(w *sim.World) { w.Advance(time.Second) }) },
	"run-negative-seeds": func(t *testing.T) { sim.Run(t, -1, func(w *sim.World) { w.Advance(time.Second) }) },
	"run-nil-scenario":   func(t *testing.T) { sim.Run(t, 2, nil) },
	"run-seeds-env-zero": func(t *testing.T) {
		t.Setenv("QUIRE_SEEDS", "0")
		sim.Run(t, 2, func(w *sim.World) { w.Advance(time.Second) })
	},
	// -short divides 2 seeds by 10, and still runs one: the failing
	// scenario must fail it.
	"short-runs-a-seed": func(t *testing.T) {
		if err := flag.Set("test.short", "true"); err != nil {
			t.Fatal(err)
		}
		sim.Run(t, 2, misuseScenarios["step-after-finish"])
	},
}

// misuseChild runs the test of misuseTests, or the scenario of
// misuseScenarios under sim.Run, that mode names: TestMisuseReported's
// child.
func misuseChild(t *testing.T, mode string) {
	if test, ok := misuseTests[mode]; ok {
		test(t)
		return
	}
	scenario, ok := misuseScenarios[mode]
	if !ok {
		t.Fatalf("unknown mode %q", mode)
	}
	sim.Run(t, 2, scenario)
}

// TestMisuseReported runs each misuse scenario in a child process under
// sim.Run and checks that it fails the first seed, at once and with a
// message that says what was wrong: a World step called from a handler
// (a data race and a 60 s watchdog before), Take called from the scenario
// (a deadlock before), a w.T() failure from a handler (reported at the
// step it happened in, not at the end), a step after Finish (a silent
// no-op before), and two works parked under one key by a handler, one on
// a goroutine of its own (a panic that ended the test binary before). Run
// and Check with no seed or no scenario fail the test before any seed
// (zero seeds passed silently, a negative count panicked), and so does a
// QUIRE_SEEDS of 0; -short still runs one seed of two. The child's
// own -test.timeout only bounds a hang of a broken harness; nothing here
// depends on real time.
func TestMisuseReported(t *testing.T) {
	if mode := os.Getenv(misuseChildEnv); mode != "" {
		misuseChild(t, mode) // the child: fails as the case expects
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mode   string
		want   []string
		noSeed bool // the test fails before any seed runs
	}{
		{"step-from-handler", []string{`Enqueue called during step 1 ("enqueue a")`, "must be called from the scenario's goroutine"}, false},
		{"take-from-scenario", []string{`Take("think") called while no step runs`}, false},
		{"errorf-from-handler", []string{`the test failed during step 1 ("enqueue a")`, "bad payload 1"}, false},
		{"fatalf-from-handler", []string{`the test failed during step 1 ("enqueue a")`, "bad payload 1"}, false},
		{"step-after-finish", []string{"Enqueue after Finish"}, false},
		{"take-duplicate-key", []string{`Take("same") during step`, "already parked"}, false},
		{"run-zero-seeds", []string{"def = 0", "want at least 1"}, true},
		{"check-zero-seeds", []string{"def = 0", "want at least 1"}, true},
		{"run-negative-seeds", []string{"def = -1", "want at least 1"}, true},
		{"run-nil-scenario", []string{"sim.Run: the scenario is nil"}, true},
		{"run-seeds-env-zero", []string{`QUIRE_SEEDS="0": want a positive integer`}, true},
		{"short-runs-a-seed", []string{"Enqueue after Finish"}, false},
	}
	failed := regexp.MustCompile(`--- FAIL: TestMisuseReported/(seed=0x[0-9a-f]+)`)
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(exe, "-test.run=^TestMisuseReported$", "-test.count=1", "-test.timeout=5m")
			cmd.Env = append(os.Environ(), misuseChildEnv+"="+c.mode, "QUIRE_SIM_OUT="+t.TempDir(), "QUIRE_SEED=", "QUIRE_SEEDS=")
			b, err := cmd.CombinedOutput()
			text := string(b)
			if err == nil {
				t.Fatalf("the child passed:\n%s", text)
			}
			want := 1
			if c.noSeed {
				want = 0
			}
			if fails := failed.FindAllStringSubmatch(text, -1); len(fails) != want || !strings.Contains(text, "--- FAIL: TestMisuseReported") {
				t.Fatalf("failed seeds %q, want %d:\n%s", fails, want, text)
			}
			for _, s := range c.want {
				if !strings.Contains(text, s) {
					t.Fatalf("no %q in:\n%s", s, text)
				}
			}
			for _, s := range []string{"watchdog", "DATA RACE", "panic:", "test timed out"} {
				if strings.Contains(text, s) {
					t.Fatalf("%q in:\n%s", s, text)
				}
			}
		})
	}
}

// trial registers a trial workflow: remind after 5 days, then wait for
// an "upgraded" signal, all within 30 days. Under its 30-day deadline the
// engine arms a timer every 60 s of simulated time, so 7 days are about
// 10 000 timer instants (the audit's repro, /tmp/simaudit/long).
func trial(w *sim.World, remindedAt *time.Time) {
	w.Register(func(e *api.Engine) error {
		if err := api.HandleDeadline(e, "expire", func(ctx context.Context, s api.State) error { return nil }); err != nil {
			return err
		}
		return e.Register(api.NewWorkflow("trial").
			Delay(5*24*time.Hour).
			Then("remind", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
				*remindedAt = w.Now()
				return nil, nil
			}).
			WaitForSignal("upgraded").
			MustCompleteWithin(30 * 24 * time.Hour).
			OnDeadline("expire"))
	})
}

// TestAdvanceStopsAtEveryTimer checks World.Advance's promise (doc.go,
// "Steps": the clock "stops at every engine timer ... so each fires at its
// own instant") over a long advance: a 5-day delay under a workflow
// deadline checked every 60 s fires at T0+5d exactly, not at the end of
// the advance (Advance used to jump after 4096 stops).
func TestAdvanceStopsAtEveryTimer(t *testing.T) {
	w := sim.New(1, sim.WithT(t))
	var remindedAt time.Time
	trial(w, &remindedAt)
	w.Dispatch("trial", nil)
	w.Advance(7 * 24 * time.Hour)
	if got := remindedAt.Sub(sim.T0); got != 5*24*time.Hour {
		t.Fatalf("the delay fired at T0+%v, want T0+120h", got)
	}
	if n := len(w.Trace()); n <= 4096 {
		t.Fatalf("%d steps in 7 days: the scenario no longer needs more stops than the old bound (4096), so it does not test it", n)
	}
}

// TestAdvanceStopsMaxFails checks that an Advance with more timer
// instants than AdvanceStopsMax fails the world with a message naming the
// bound, instead of jumping (timers late).
func TestAdvanceStopsMaxFails(t *testing.T) {
	w := sim.New(1, sim.AdvanceStopsMax(100))
	var remindedAt time.Time
	trial(w, &remindedAt)
	w.Dispatch("trial", nil)
	w.Advance(7 * 24 * time.Hour)
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "AdvanceStopsMax") {
		t.Fatalf("err = %v, want the AdvanceStopsMax bound named", err)
	}
	if !remindedAt.IsZero() {
		t.Fatalf("the delay fired at T0+%v, after the world failed at T0+%v", remindedAt.Sub(sim.T0), w.Now().Sub(sim.T0))
	}
	w.Finish() // closes the failed world's engine
}

// stampRuns counts the worlds stampScenario has run, so that each run's
// step returns a different state: the nondeterminism a step that reads
// the wall clock or a global counter has.
var stampRuns int

// stampScenario runs a workflow whose one step returns a value that
// differs from run to run, and that has finished when the scenario ends:
// the live-state digest (unfinished work only) never sees it.
func stampScenario(w *sim.World) {
	stampRuns++
	n := stampRuns
	w.Register(func(e *api.Engine) error {
		return e.Register(api.NewWorkflow("stamp").
			Then("stamp", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
				return api.State{"run": n}, nil
			}))
	})
	w.Dispatch("stamp", nil)
	w.Advance(time.Minute)
}

// TestDivergeSeesFinishedWork checks that the trace covers the records
// each step appends (T9, RL-8: "equal step traces"), so nondeterminism in
// work that has already finished is caught, and that the divergence names
// the first record that differs (seq, kind, stream).
func TestDivergeSeesFinishedWork(t *testing.T) {
	a, b := sim.New(7), sim.New(7)
	stampScenario(a)
	stampScenario(b)
	if err := a.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	err := sim.Diverge(a, b)
	if err == nil {
		t.Fatal("two runs whose step returned different states have the same trace")
	}
	ra, rb := a.Records(), b.Records()
	i := 0
	for i < min(len(ra), len(rb)) && reflect.DeepEqual(ra[i], rb[i]) {
		i++
	}
	if i == min(len(ra), len(rb)) {
		t.Fatal("the two runs' journals do not differ: the scenario is not nondeterministic")
	}
	first := ra[i]
	want := fmt.Sprintf("record seq %d (%s, stream %s)", first.Seq, first.Kind(), first.Stream)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Diverge = %v, want it to name %s", err, want)
	}
	t.Logf("Diverge: %v", err)
}

// TestJumpNegativeFails checks that Jump and JumpBack refuse a negative
// duration as Advance does, failing the world, instead of panicking in
// the clock (Jump) or moving it forward (JumpBack); each refuses the
// least negative duration too.
func TestJumpNegativeFails(t *testing.T) {
	for _, c := range []struct {
		name string
		move func(w *sim.World)
	}{
		{"Jump", func(w *sim.World) { w.Jump(-5 * time.Second) }},
		{"JumpBack", func(w *sim.World) { w.JumpBack(-30 * time.Second) }},
		{"Jump by the least negative", func(w *sim.World) { w.Jump(-time.Nanosecond) }},
		{"JumpBack by the least negative", func(w *sim.World) { w.JumpBack(-time.Nanosecond) }},
		{"Advance by the least negative", func(w *sim.World) { w.Advance(-time.Nanosecond) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s with a negative duration panicked: %v", c.name, r)
				}
			}()
			w := sim.New(1)
			defer w.Finish()
			w.Advance(time.Minute)
			c.move(w)
			if err := w.Err(); err == nil || !strings.Contains(err.Error(), "negative") {
				t.Fatalf("err = %v, want a negative duration refused", err)
			}
			if got := w.Now().Sub(sim.T0); got != time.Minute {
				t.Fatalf("the clock moved to T0+%v", got)
			}
		})
	}
}

// TestStepsAfterFinishFail checks that every step and engine accessor
// called after Finish fails the world, naming itself, and that none
// reopens an engine (they used to do nothing, or open a new engine that
// nothing closed).
func TestStepsAfterFinishFail(t *testing.T) {
	ops := map[string]func(w *sim.World, id string){
		"Enqueue":       func(w *sim.World, id string) { w.Enqueue("h", msg{}) },
		"Dispatch":      func(w *sim.World, id string) { w.Dispatch("wf", nil) },
		"Signal":        func(w *sim.World, id string) { w.Signal(id, "go", nil) },
		"Do":            func(w *sim.World, id string) { w.Do("noop", func(context.Context, *api.Engine) error { return nil }) },
		"Job":           func(w *sim.World, id string) { w.Job("job_x") },
		"Workflow":      func(w *sim.World, id string) { w.Workflow(id) },
		"Engine":        func(w *sim.World, id string) { w.Engine() },
		"Advance":       func(w *sim.World, id string) { w.Advance(time.Hour) },
		"AdvanceTo":     func(w *sim.World, id string) { w.AdvanceTo(sim.T0.Add(time.Hour)) },
		"Jump":          func(w *sim.World, id string) { w.Jump(time.Hour) },
		"JumpBack":      func(w *sim.World, id string) { w.JumpBack(time.Hour) },
		"Crash":         func(w *sim.World, id string) { w.Crash() },
		"CrashWith":     func(w *sim.World, id string) { w.CrashWith(0) },
		"Restart":       func(w *sim.World, id string) { w.Restart() },
		"Shutdown":      func(w *sim.World, id string) { w.Shutdown() },
		"BeginShutdown": func(w *sim.World, id string) { w.BeginShutdown() },
		"ForceShutdown": func(w *sim.World, id string) { w.ForceShutdown() },
		"Force":         func(w *sim.World, id string) { w.Force() },
		"DiskFault":     func(w *sim.World, id string) { w.DiskFault("h", msg{}) },
		"Register":      func(w *sim.World, id string) { w.Register(func(*api.Engine) error { return nil }) },
		"At":            func(w *sim.World, id string) { w.At(2*time.Hour, "late", func(*sim.World) {}) },
		"Run":           func(w *sim.World, id string) { w.Run() },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			w := sim.New(1)
			w.Register(func(e *api.Engine) error {
				if err := api.Handle(e, "h", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
					return err
				}
				return e.Register(api.NewWorkflow("wf").WaitForSignal("go"))
			})
			id := w.Dispatch("wf", nil)
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			steps := len(w.Trace())
			op(w, id)
			if err := w.Err(); err == nil || !strings.Contains(err.Error(), name+" after Finish") {
				t.Fatalf("err = %v, want %q", err, name+" after Finish")
			}
			if n := len(w.Trace()); n != steps {
				t.Fatalf("the trace grew from %d to %d steps after Finish", steps, n)
			}
			if e := w.Engine(); e != nil {
				t.Fatalf("Engine after Finish returned an engine (live %t)", e.Live())
			}
		})
	}
}

// TestCrashWithShareOutOfRange checks that CrashWith refuses a share
// outside 0..100 percent.
func TestCrashWithShareOutOfRange(t *testing.T) {
	for _, pct := range []int{-3, 101, 250} {
		w := sim.New(1)
		w.Advance(time.Second)
		w.CrashWith(pct)
		w.Finish()
		if err := w.Err(); err == nil || !strings.Contains(err.Error(), "0..100") {
			t.Fatalf("CrashWith(%d): err = %v, want the range named", pct, err)
		}
	}
}

// TestTakeNegativeFails checks that a handler taking a negative duration
// fails the world at the step it ran in (a zero duration is documented to
// return at once).
func TestTakeNegativeFails(t *testing.T) {
	w := sim.New(1)
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		return w.Take(ctx, "a", -time.Second, sim.Ignore)
	})
	w.Enqueue("a", msg{})
	w.Advance(time.Second)
	w.Finish()
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), `Take("a") with a negative duration`) {
		t.Fatalf("err = %v, want the negative Take refused", err)
	}
}

// TestTakeZeroReturnsAtOnce checks that a zero duration returns nil at
// once and is not recorded among the works, as Take documents: the job
// completes in its first attempt.
func TestTakeZeroReturnsAtOnce(t *testing.T) {
	w := sim.New(1)
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		return w.Take(ctx, "zero", 0, sim.Cooperate)
	})
	id := w.Enqueue("a", msg{})
	w.Advance(time.Second)
	if j := w.Job(id); j.Status != api.JobCompleted || j.Attempts != 1 {
		t.Fatalf("job %+v, want completed in one attempt", j)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if works := w.Works(); len(works) != 0 {
		t.Fatalf("Take of 0 recorded works %+v", works)
	}
}

// TestDoClosingEngineIsMisuse checks that a Do whose function shuts the
// world's engine down or closes it behind the world's back (a scenario
// testing its shutdown with e.Shutdown instead of World.Shutdown) fails
// the world as a misuse that names the steps to use, at that Do, which
// returns the failure. It used to fail at the same step with "wait idle:
// quire: engine closed", which said neither what was wrong nor what to do.
func TestDoClosingEngineIsMisuse(t *testing.T) {
	for name, f := range map[string]func(ctx context.Context, e *api.Engine) error{
		"Shutdown": func(ctx context.Context, e *api.Engine) error { return e.Shutdown(ctx) },
		"Close":    func(ctx context.Context, e *api.Engine) error { return e.Close(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			w := sim.New(1)
			handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
			w.Enqueue("a", msg{N: 1})
			steps := len(w.Trace())
			err := w.Do("stop it", f)
			if !errors.Is(err, sim.ErrMisuse) || !strings.Contains(err.Error(), `Do("stop it") shut the engine down or closed it`) ||
				!strings.Contains(err.Error(), "World.Shutdown") {
				t.Fatalf("Do returned %v, want the misuse named", err)
			}
			if werr := w.Err(); werr != err {
				t.Fatalf("World.Err() = %v, want Do's %v", werr, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("step %d ", steps)) {
				t.Fatalf("%v: not charged to the Do's step %d", err, steps)
			}
			w.Finish()
		})
	}
}

// TestDoRunOnceIsRefusedByTheEngine: RunOnce takes an engine that is only
// open (JB-9), and the world's is started, so a Do calling it gets the
// engine's ErrState, the engine runs on, and the world is not failed.
func TestDoRunOnceIsRefusedByTheEngine(t *testing.T) {
	w := sim.New(1)
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
	w.Enqueue("a", msg{N: 1})
	err := w.Do("run once", func(ctx context.Context, e *api.Engine) error { return e.RunOnce(ctx) })
	if !errors.Is(err, api.ErrState) || w.Err() != nil {
		t.Fatalf("Do returned %v (world %v), want the engine's ErrState and the world going on", err, w.Err())
	}
	id := w.Enqueue("a", msg{N: 2})
	w.Advance(time.Second)
	if j := w.Job(id); j.Status != api.JobCompleted {
		t.Fatalf("job after the refused RunOnce: %+v", j)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestDoDuringWorldShutdownIsNoMisuse checks the other side: a Do while
// the world's own shutdown runs (an enqueue it expects to be refused) is
// no misuse, although the engine's shutdown has started.
func TestDoDuringWorldShutdownIsNoMisuse(t *testing.T) {
	w := sim.New(1)
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		return w.Take(ctx, d.JobID(), time.Second, sim.Cooperate)
	})
	w.Enqueue("a", msg{N: 1})
	w.BeginShutdown()
	err := w.Do("enqueue refused", func(ctx context.Context, e *api.Engine) error {
		_, err := e.Enqueue(ctx, "a", msg{N: 2})
		return err
	})
	if !errors.Is(err, api.ErrShuttingDown) {
		t.Fatalf("Do returned %v, want ErrShuttingDown", err)
	}
	w.Advance(time.Minute)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestDoBlockedWatchdog checks that a Do whose function blocks on what no
// step can bring (Engine.Run, which returns only at a shutdown) fails the
// world through the watchdog, which names the Do and cancels the
// function's context, instead of hanging until go test's timeout with no
// seed named (spec/reliability.md §5, "Watchdog"). The watchdog is
// shortened to keep the test fast.
func TestDoBlockedWatchdog(t *testing.T) {
	defer sim.SetDoWatchdog(sim.SetDoWatchdog(200 * time.Millisecond))
	w := sim.New(1)
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
	w.Enqueue("a", msg{N: 1})
	done := make(chan error, 1)
	go func() {
		done <- w.Do("run the worker", func(ctx context.Context, e *api.Engine) error { return e.Run(ctx) })
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Do(Engine.Run) still blocked after 30 s")
	}
	if err == nil || !strings.Contains(err.Error(), `watchdog: the function of Do("run the worker") has not returned`) {
		t.Fatalf("Do returned %v, want the watchdog's failure", err)
	}
	if werr := w.Err(); werr != err {
		t.Fatalf("World.Err() = %v, want Do's %v", werr, err)
	}
	w.Finish()
}

// TestDoQuickIsNotWatched checks that a Do whose function returns at once
// is untouched by a short watchdog and gets a live context.
func TestDoQuickIsNotWatched(t *testing.T) {
	defer sim.SetDoWatchdog(sim.SetDoWatchdog(time.Millisecond))
	w := sim.New(1)
	for i := 0; i < 20; i++ {
		if err := w.Do("quick", func(ctx context.Context, e *api.Engine) error { return ctx.Err() }); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}
