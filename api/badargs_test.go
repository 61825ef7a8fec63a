package api_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
)

// wantBadArgument checks that err is a *NameError naming name and that it
// matches ErrInvalidOption, the error of every bad argument.
func wantBadArgument(t *testing.T, what string, err error, kind, name string) {
	t.Helper()
	var ne *api.NameError
	if !errors.As(err, &ne) || ne.Kind != kind || ne.Name != name || !errors.Is(err, api.ErrInvalidOption) {
		t.Fatalf("%s: err = %v, want a *NameError naming %s %q that matches ErrInvalidOption", what, err, kind, name)
	}
}

// A nil func given to Handle or HandleDeadline is a bad argument like a
// nil step func given to the workflow builder (WF-2, WD-2): a *NameError
// naming the handler that matches ErrInvalidOption. Nothing is
// registered, so the name stays free.
func TestHandle_NilFuncMatchesErrInvalidOption(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	wantBadArgument(t, "Handle(nil fn)", api.Handle[msg](b.eng, "h", nil), "handler", "h")
	wantBadArgument(t, "HandleDeadline(nil fn)", api.HandleDeadline(b.eng, "d", nil), "deadline handler", "d")
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
		t.Fatalf("Handle after a refused one: %v", err)
	}
	if err := api.HandleDeadline(b.eng, "d", func(ctx context.Context, st api.State) error { return nil }); err != nil {
		t.Fatalf("HandleDeadline after a refused one: %v", err)
	}
}

// DL-36: Scope.Register refuses an empty key, a nil resource and a key
// already held with a *NameError naming the key, matching ErrInvalidName,
// ErrInvalidOption and ErrDuplicate, so that a handler can tell them
// apart; what it refused is not closed by the engine, and what it
// registered is closed once.
func TestDL36_ScopeRegisterRefusalsAreTyped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var rec recorder
	var errs []error
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error {
		s := d.Scope()
		errs = append(errs,
			s.Register("", closer(func() error { rec.add("empty"); return nil })),
			s.Register("conn", nil),
			s.Register("conn", closer(func() error { rec.add("conn"); return nil })),
			s.Register("conn", closer(func() error { rec.add("second"); return nil })))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := b.enqueue("h", msg{})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	for i, want := range []struct {
		name string
		is   error
	}{{"", api.ErrInvalidName}, {"conn", api.ErrInvalidOption}, {"conn", nil}, {"conn", api.ErrDuplicate}} {
		err := errs[i]
		if want.is == nil {
			if err != nil {
				t.Fatalf("Register %d: %v", i, err)
			}
			continue
		}
		var ne *api.NameError
		if !errors.As(err, &ne) || ne.Kind != "resource" || ne.Name != want.name || !errors.Is(err, want.is) {
			t.Fatalf("Register %d: err = %v, want a *NameError naming resource %q matching %v", i, err, want.name, want.is)
		}
	}
	if got := rec.get(); len(got) != 1 || got[0] != "conn" {
		t.Fatalf("DL-36: closed %v, want [conn]: only what was registered, once", got)
	}
}

// Checkpoint refuses an empty dir with an *OptionError naming dir: the
// journal read it as the working directory on one filesystem ("file
// already exists") and as nothing on another ("mkdir : no such file"),
// neither of which says what was wrong. A dir that exists is refused with
// an error matching fs.ErrExist; a new one gets the copy.
func TestCheckpoint_EmptyOrExistingDirIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	wantOptionError(t, "Checkpoint(\"\")", b.eng.Checkpoint(""), "dir")
	if err := b.eng.Checkpoint("db"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Checkpoint(journal dir): err = %v, want one matching fs.ErrExist", err)
	}
	if err := b.eng.Checkpoint("cp"); err != nil {
		t.Fatalf("Checkpoint(new dir): %v", err)
	}
}

// SD-34: a Lifecycle out of range prints as "lifecycle(N)", as Priority
// does, instead of panicking in String, and is not live.
func TestSD34_LifecycleOutOfRangePrints(t *testing.T) {
	t.Parallel()
	if got := api.Lifecycle(9).String(); got != "lifecycle(9)" {
		t.Fatalf("Lifecycle(9).String() = %q", got)
	}
	if got := api.Failed.String(); got != "failed" {
		t.Fatalf("Failed.String() = %q", got)
	}
	if api.Lifecycle(9).Live() {
		t.Fatal("SD-34: Lifecycle(9) is live")
	}
}

// DL-14: a handler that returns a nil *HandlerError returns a non-nil
// error, which fails its attempt as any other error does: retryable, with
// code HANDLER_ERROR and a message that says what was returned. Reading
// it used to panic in the engine's classification, which recorded the
// attempt as HANDLER_PANICKED with a nil dereference the handler never
// made.
func TestDL14_NilHandlerErrorFailsAsAnyError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error {
		var he *api.HandlerError // "no error" in the handler's mind
		return he
	}, api.MaxAttempts(2)); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := b.enqueue("h", msg{})
	b.idle()
	b.advance(time.Hour) // past the retry's backoff
	j := b.wantStatus(id, api.JobBuried)
	if j.Attempts != 2 || j.LastCode != api.CodeHandlerError || j.LastError != "nil *api.HandlerError" {
		t.Fatalf("DL-14: attempts %d, last %s %q; want 2 retryable attempts, HANDLER_ERROR, \"nil *api.HandlerError\"",
			j.Attempts, j.LastCode, j.LastError)
	}
}

// zeroReader is an Options.Entropy that gives zeros forever.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// An Options.Entropy that repeats itself or runs dry, and a clock before
// 1970, stop nothing: ids are made on the engine's loop, where a repeated
// id (a job enqueued twice) or an id the ULID library refuses used to
// panic and end the process. Every id stays distinct within the run, and
// the work runs and replays (RL-7).
func TestOptions_DegenerateEntropyOrClockStopsNothing(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, b *testBundle) {
		t.Helper()
		if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
		wfRegister(t, b.eng, api.NewWorkflow("w").Then("a", wfReturn(nil)))
		var jobs, wfs []string
		for range 5 {
			jobs = append(jobs, b.enqueue("h", msg{}))
			wfs = append(wfs, wfDispatch(b, "w", nil))
		}
		seen := map[string]bool{}
		for _, id := range append(append([]string(nil), jobs...), wfs...) {
			if seen[id] {
				t.Fatalf("id %s made twice", id)
			}
			seen[id] = true
		}
		b.start()
		b.idle()
		for _, id := range jobs {
			b.wantStatus(id, api.JobCompleted)
		}
		for _, id := range wfs {
			wfWant(b, id, api.WorkflowCompleted)
		}
		b.checkReplay()
	}
	t.Run("constant entropy", func(t *testing.T) {
		run(t, setup(t, func(o *api.Options) { o.Entropy = zeroReader{} }))
	})
	t.Run("entropy that runs dry", func(t *testing.T) {
		// Enough for run_started's id and part of the next one.
		run(t, setup(t, func(o *api.Options) { o.Entropy = bytes.NewReader(make([]byte, 16)) }))
	})
	t.Run("clock before 1970", func(t *testing.T) {
		b := setup(t, nil)
		if err := b.eng.Close(b.ctx); err != nil {
			t.Fatal(err)
		}
		b.opts.Clock = clocktest.New(time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC))
		b.open()
		run(t, b)
	})
}
