package sim_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// noPanic fails t if f panics: a misuse must fail the world, not the
// process.
func noPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panicked instead of failing the world: %v", r)
		}
	}()
	f()
}

// wantMisuse fails t unless err is a misuse of the world whose message
// says want.
func wantMisuse(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want a failure saying %q", err, want)
	}
	if !errors.Is(err, sim.ErrMisuse) {
		t.Fatalf("errors.Is(%q, sim.ErrMisuse) is false", err)
	}
}

// TestTakeDuplicateKeyAcrossAttempts keys a handler's Take by job id
// alone: the attempt the engine abandons at its 5 s delivery timeout
// (Ignore) is still parked when the retry takes the same key. That used
// to panic inside the handler, which the engine recovered and buried the
// job with HANDLER_PANICKED while w.Err() stayed nil; now it fails the
// world naming the key, and the job is not buried.
func TestTakeDuplicateKeyAcrossAttempts(t *testing.T) {
	w := sim.New(1)
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "ign", func(ctx context.Context, d *api.Delivery, in msg) error {
			return w.Take(ctx, d.JobID(), time.Hour, sim.Ignore)
		}, api.DeliveryTimeout(5*time.Second), api.MaxAttempts(3))
	})
	id := w.Enqueue("ign", msg{N: 1})
	w.Advance(time.Minute)
	err := w.Err()
	wantMisuse(t, err, fmt.Sprintf("Take(%q)", id))
	if !strings.Contains(err.Error(), "already parked") {
		t.Fatalf("err = %v, want the key named as already parked", err)
	}
	if f := w.Finish(); f != err {
		t.Fatalf("Finish = %v, want the world's failure %v", f, err)
	}
	for _, r := range w.Records() {
		if b, ok := r.Body.(*record.AttemptBuried); ok {
			t.Fatalf("job %s buried (%+v): the refused Take became an outcome of the handler", b.JobID, b)
		}
	}
}

// TestNilArgumentsFail checks that every nil function a world is given
// fails the world with a message naming the argument, instead of a nil
// call panicking at the step that runs it.
func TestNilArgumentsFail(t *testing.T) {
	for _, c := range []struct {
		name string
		want string
		run  func() *sim.World
	}{
		{"Register", "Register(nil)", func() *sim.World {
			w := sim.New(1)
			w.Register(nil)
			w.Advance(time.Second)
			return w
		}},
		{"Setup", "Setup(nil)", func() *sim.World {
			w := sim.New(1, sim.Setup(nil))
			w.Advance(time.Second)
			return w
		}},
		{"EngineOptions", "EngineOptions(nil)", func() *sim.World {
			w := sim.New(1, sim.EngineOptions(nil))
			w.Advance(time.Second)
			return w
		}},
		{"At", `At(1s, "tick", nil)`, func() *sim.World {
			w := sim.New(1)
			w.At(time.Second, "tick", nil)
			w.Advance(2 * time.Second)
			return w
		}},
		{"Do", `Do("cancel", nil)`, func() *sim.World {
			w := sim.New(1)
			if err := w.Do("cancel", nil); err == nil {
				t.Errorf("Do with a nil function returned nil")
			}
			return w
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w *sim.World
			noPanic(t, func() { w = c.run() })
			wantMisuse(t, w.Err(), c.want)
			w.Finish()
		})
	}
}

// fatalTB is a testing.TB whose Fatalf records its message and ends the
// calling goroutine, as testing.T's does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestSeedsRefusesNoSeeds checks that a default seed count below 1 fails
// the test (Seeds used to panic on a negative count and return no seeds
// for zero, so Run(t, 0, ...) passed without running anything). Run and
// Check go through Seeds; TestMisuseReported runs Run(t, 0, ...) itself.
func TestSeedsRefusesNoSeeds(t *testing.T) {
	t.Setenv("QUIRE_SEED", "")
	t.Setenv("QUIRE_SEEDS", "")
	for _, def := range []int{0, -1} {
		tb := &fatalTB{TB: t}
		var seeds []uint64
		done := make(chan struct{})
		go func() {
			defer close(done)
			noPanic(t, func() { seeds = sim.Seeds(tb, def) })
		}()
		<-done
		if !strings.Contains(tb.msg, fmt.Sprintf("def = %d", def)) {
			t.Fatalf("Seeds(tb, %d) = %d seeds, Fatalf %q; want def named", def, len(seeds), tb.msg)
		}
	}
}

// TestSeedsReadsDecimalOrHex checks QUIRE_SEED as Seeds documents it:
// decimal or 0x hex. A leading zero used to read as octal ("010" was
// eight), and Go's other prefixes and underscores were accepted.
func TestSeedsReadsDecimalOrHex(t *testing.T) {
	for _, c := range []struct {
		env  string
		want uint64 // 0: refused
	}{{"10", 10}, {"010", 10}, {"09", 9}, {"0x1f", 31}, {"0X1F", 31}, {"0b11", 0}, {"0o7", 0}, {"1_000", 0}, {"0x", 0}, {"-1", 0}} {
		t.Setenv("QUIRE_SEED", c.env)
		tb := &fatalTB{TB: t}
		var seeds []uint64
		done := make(chan struct{})
		go func() {
			defer close(done)
			seeds = sim.Seeds(tb, 3)
		}()
		<-done
		switch {
		case c.want == 0 && tb.msg == "":
			t.Errorf("QUIRE_SEED=%s: seeds %v, want refused", c.env, seeds)
		case c.want != 0 && (tb.msg != "" || len(seeds) != 1 || seeds[0] != c.want):
			t.Errorf("QUIRE_SEED=%s: seeds %v (%s), want [%d]", c.env, seeds, tb.msg, c.want)
		}
	}
}

// TestSeedsShortDividesOnlyTheDefault checks that -short divides the
// default seed count but not a count QUIRE_SEEDS asks for (doc.go: "-short
// divides the default count by 10"): QUIRE_SEEDS=20 under -short used to
// run 2 seeds.
func TestSeedsShortDividesOnlyTheDefault(t *testing.T) {
	f := flag.Lookup("test.short")
	old := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.short", old) })
	if err := flag.Set("test.short", "true"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUIRE_SEED", "")
	t.Setenv("QUIRE_SEEDS", "")
	if n := len(sim.Seeds(t, 20)); n != 2 {
		t.Fatalf("-short: %d default seeds of 20, want 2", n)
	}
	t.Setenv("QUIRE_SEEDS", "20")
	if n := len(sim.Seeds(t, 5)); n != 20 {
		t.Fatalf("-short, QUIRE_SEEDS=20: %d seeds, want 20", n)
	}
}

// TestRefusedStepsReturnTheFailure checks that the steps which return an
// error return the world's failure when they do not run, after Finish or
// after the world failed: they used to return nil, which reads as
// success ("f's error is returned"), without running anything.
func TestRefusedStepsReturnTheFailure(t *testing.T) {
	steps := map[string]func(w *sim.World, ran *bool) error{
		"Do": func(w *sim.World, ran *bool) error {
			return w.Do("noop", func(context.Context, *api.Engine) error { *ran = true; return nil })
		},
		"Signal":        func(w *sim.World, ran *bool) error { return w.Signal("wf_x", "go", nil) },
		"Shutdown":      func(w *sim.World, ran *bool) error { return w.Shutdown() },
		"ForceShutdown": func(w *sim.World, ran *bool) error { return w.ForceShutdown() },
	}
	for name, step := range steps {
		t.Run(name+"/after-finish", func(t *testing.T) {
			w := sim.New(1)
			w.Advance(time.Second)
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			ran := false
			err := step(w, &ran)
			wantMisuse(t, err, name+" after Finish")
			if ran || err != w.Err() {
				t.Fatalf("ran %t, err %v, world %v", ran, err, w.Err())
			}
		})
		t.Run(name+"/after-failure", func(t *testing.T) {
			w := sim.New(1)
			w.Advance(-time.Second)
			ran := false
			err := step(w, &ran)
			wantMisuse(t, err, "negative")
			if ran || err != w.Err() {
				t.Fatalf("ran %t, err %v, world %v", ran, err, w.Err())
			}
			w.Finish()
		})
	}
}

// TestErrSaysItsKind checks that World.Err tells a misuse of the world
// from a broken guarantee of the engine (the planted bugs check
// ErrViolation) through errors.Is, with the message as it was.
func TestErrSaysItsKind(t *testing.T) {
	for name, misuse := range map[string]func(w *sim.World){
		"negative advance":  func(w *sim.World) { w.Advance(-time.Second) },
		"crash share":       func(w *sim.World) { w.CrashWith(101) },
		"step after finish": func(w *sim.World) { w.Finish(); w.Advance(time.Second) },
		"take from the scenario": func(w *sim.World) {
			if err := w.Take(context.Background(), "k", time.Second, sim.Ignore); err != w.Err() {
				t.Errorf("Take returned %v, the world failed with %v", err, w.Err())
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := sim.New(1)
			misuse(w)
			wantMisuse(t, w.Err(), "sim seed 0x1, step ")
			if errors.Is(w.Err(), sim.ErrViolation) {
				t.Fatalf("the misuse %q is a violation too", w.Err())
			}
			w.Finish()
		})
	}
}

// TestErrWrapsTheEngineError checks that World.Err wraps the engine's
// error, so that errors.Is finds it, with the message as it was.
func TestErrWrapsTheEngineError(t *testing.T) {
	for _, c := range []struct {
		name   string
		target error
		want   string
		run    func(w *sim.World)
		opts   []sim.Option
	}{
		{"unknown handler", api.ErrUnknownHandler, `sim seed 0x1, step 1 (0s): enqueue nope: quire: handler "nope"`,
			func(w *sim.World) { w.Enqueue("nope", msg{}) }, nil},
		{"unknown job", api.ErrNotFound, `sim seed 0x1, step 1 (0s): status job_nope: `,
			func(w *sim.World) { w.Job("job_nope") }, nil},
		{"invalid option", api.ErrInvalidOption, "sim seed 0x1, step 0 (0s): open (epoch 1): ",
			func(w *sim.World) { w.Advance(time.Second) },
			[]sim.Option{sim.EngineOptions(func(o *api.Options) { o.Workers = -3 })}},
		{"already registered", api.ErrDuplicate, "sim seed 0x1, step 2 (1s): register: quire: handler \"h\"",
			func(w *sim.World) {
				reg := func(e *api.Engine) error {
					return api.Handle(e, "h", func(context.Context, *api.Delivery, msg) error { return nil })
				}
				w.Register(reg)
				w.Advance(time.Second)
				w.Register(reg)
			}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := sim.New(1, c.opts...)
			c.run(w)
			err := w.Err()
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to begin %q", err, c.want)
			}
			if !errors.Is(err, c.target) {
				t.Fatalf("errors.Is(%q, %v) is false", err, c.target)
			}
			if errors.Is(err, sim.ErrMisuse) || errors.Is(err, sim.ErrViolation) {
				t.Fatalf("the engine's refusal %q is classed as sim's own failure", err)
			}
			w.Finish()
		})
	}
}

// TestEngineOptionsKeepTheWorldsOwn checks that an EngineOptions function
// that replaces one of the world's own options fails the world naming it,
// before the engine opens anywhere: zeroed options used to open the
// journal in ./quire-data on the real disk, under the system clock.
func TestEngineOptionsKeepTheWorldsOwn(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, c := range []struct {
		name string
		mod  func(o *api.Options)
		want string
	}{
		{"zero", func(o *api.Options) { *o = api.Options{} }, "Options.Dir, Options.FS, Options.Clock, Options.Entropy, Options.Rand"},
		{"Dir", func(o *api.Options) { o.Dir = "elsewhere" }, "replaced Options.Dir,"},
		{"FS", func(o *api.Options) { o.FS = nil }, "replaced Options.FS,"},
		{"Clock", func(o *api.Options) { o.Clock = clocktest.New(sim.T0) }, "replaced Options.Clock,"},
		{"Entropy", func(o *api.Options) { o.Entropy = strings.NewReader("not the seed") }, "replaced Options.Entropy,"},
		{"Rand", func(o *api.Options) { o.Rand = nil }, "replaced Options.Rand,"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := sim.New(1, sim.EngineOptions(c.mod))
			w.Advance(time.Second)
			wantMisuse(t, w.Err(), c.want)
			w.Finish()
			if names, _ := os.ReadDir("."); len(names) > 0 {
				t.Fatalf("the world wrote %s to the real disk", names[0].Name())
			}
		})
	}
	// The fields a test varies stay the test's.
	w := sim.New(1, sim.WithT(t), sim.EngineOptions(func(o *api.Options) {
		o.ShutdownTimeout = 90 * time.Second
		o.Middleware = []api.Middleware{api.MiddlewareFuncs{Label: "app"}}
	}))
	w.Advance(time.Second)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestT0IsTheWorldsOwn checks that assigning to sim.T0 does not move where
// worlds start, nor desynchronise a world from itself.
func TestT0IsTheWorldsOwn(t *testing.T) {
	start := sim.T0
	sim.T0 = start.Add(time.Hour)
	defer func() { sim.T0 = start }()
	w := sim.New(1, sim.WithT(t))
	if !w.Now().Equal(start) {
		t.Fatalf("the world starts at %v after T0 was assigned, want %v", w.Now(), start)
	}
}

// TestNewInSynctestBubbleFails checks that a world built inside a
// testing/synctest bubble fails at once, saying why, instead of hanging
// until go test's timeout at its first quiescent point in step mode.
func TestNewInSynctestBubbleFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := sim.New(1)
		if w.Err() == nil {
			t.Fatal("New inside a synctest bubble did not fail the world")
		}
		wantMisuse(t, w.Err(), "testing/synctest bubble")
		w.Finish()
	})
}

// TestParallelWorlds runs two worlds that park work in Take (step mode)
// in parallel tests: a quiescent point needs every goroutine of the
// process waiting, and two worlds looking for theirs at once each kept
// the other's goroutine running, until the 60 s watchdog failed one.
func TestParallelWorlds(t *testing.T) {
	scenario := func(w *sim.World) {
		registerSlow(w)
		for i := 0; i < 3; i++ {
			w.Enqueue("slow", msg{N: 1 + i%2})
			w.Advance(2 * time.Second)
		}
		w.Crash()
		w.Advance(time.Minute)
	}
	for i := 0; i < 3; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			sim.Run(t, 2, scenario)
		})
	}
}
