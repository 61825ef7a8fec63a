package scheduler

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// memAppender acknowledges appends at once, except those holding a
// settlement while hold is set: they wait until release is closed. While
// holdAll is set, every append waits for a value on release instead.
type memAppender struct {
	mu      sync.Mutex
	recs    []record.Record
	hold    bool
	holdAll bool
	held    chan struct{}
	release chan struct{}
}

func (a *memAppender) Append(ctx context.Context, index []IndexEntry, recs []record.Record, units []Unit) ([]uint64, error) {
	if err := checkUnits(recs, index, units); err != nil {
		return nil, err
	}
	a.mu.Lock()
	hold, holdAll := a.hold, a.holdAll
	a.mu.Unlock()
	if holdAll {
		<-a.release
	} else if hold {
		for _, r := range recs {
			if record.OutcomeOf(r.Body) != nil {
				a.held <- struct{}{}
				<-a.release
				break
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, recs...)
	return seqsOf(recs), nil
}

func (a *memAppender) settlements() []record.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []record.Record
	for _, r := range a.recs {
		if record.OutcomeOf(r.Body) != nil {
			out = append(out, r)
		}
	}
	return out
}

// runnerBundle is a Runner over a recovered Machine, a manual clock and a
// memAppender.
type runnerBundle struct {
	t   *testing.T
	clk *clocktest.Clock
	app *memAppender
	r   *Runner
}

func newRunnerBundle(t *testing.T, exec ExecuteFunc, mods ...func(*RunnerConfig)) *runnerBundle {
	t.Helper()
	b := &runnerBundle{t: t, clk: clocktest.New(t0), app: &memAppender{held: make(chan struct{}, 1), release: make(chan struct{})}}
	m := NewMachine(Config{
		Workers: 4, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: func(prefix string, _ time.Time) string { return prefix + "1" },
	}, replay.New())
	cfg := RunnerConfig{Clock: b.clk, Appender: b.app, Execute: exec}
	for _, mod := range mods {
		mod(&cfg)
	}
	b.r = NewRunner(cfg, m)
	startRecovered(t, b.r)
	if err := b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// startRecovered starts r, stops it when the test ends, and has its
// machine recover, as the engine does before anything else.
func startRecovered(t *testing.T, r *Runner) {
	t.Helper()
	r.Start()
	t.Cleanup(func() { r.Stop(context.Background()) })
	if err := r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Recover(now, "run_1", "test")
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (b *runnerBundle) sync() {
	b.t.Helper()
	if err := b.r.Sync(context.Background()); err != nil {
		b.t.Fatal(err)
	}
}

// DL-13, DL-16: Done is closed by the reason whether it was asked for
// before the reason was recorded or after, and IsCancelled agrees with it.
func TestDL16_DoneClosedByTheReasonEitherOrder(t *testing.T) {
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	early := newSignal(nil)
	before := early.Done()
	if closed(before) || early.IsCancelled() {
		t.Fatal("a signal with no reason is cancelled")
	}
	early.record(deadlines.ReasonDeliveryTimeout, t0)
	if !closed(before) || !closed(early.Done()) || !early.IsCancelled() {
		t.Fatal("Done taken before the reason was not closed by it")
	}
	late := newSignal(nil)
	late.record(deadlines.ReasonShutdownDeadline, t0)
	if !closed(late.Done()) || !late.IsCancelled() {
		t.Fatal("Done taken after the reason is not closed")
	}
}

// DL-16: concurrent requests race to record a reason; exactly one wins,
// and every waiter woken by Done finds that one.
func TestDL16_ConcurrentRecordsFirstWins(t *testing.T) {
	for range 50 {
		ctx, cancel := context.WithCancelCause(context.Background())
		s := newSignal(cancel)
		var wg sync.WaitGroup
		won := make(chan deadlines.Reason, 5)
		seen := make(chan deadlines.Reason, 5)
		for i := range 5 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-s.Done()
				r, _, ok := s.Reason()
				if !ok {
					seen <- deadlines.ReasonNone
					return
				}
				seen <- r
			}()
			go func() {
				defer wg.Done()
				r := deadlines.Reason(i + 1)
				if s.record(r, t0.Add(time.Duration(i))) {
					won <- r
				}
			}()
		}
		wg.Wait()
		close(won)
		close(seen)
		if len(won) != 1 {
			t.Fatalf("%d requests recorded a reason", len(won))
		}
		first := <-won
		for r := range seen {
			if r != first {
				t.Fatalf("a waiter saw %v, the first reason is %v", r, first)
			}
		}
		var cr *CancelReason
		if !errors.As(context.Cause(ctx), &cr) || cr.Reason != first {
			t.Fatalf("context cause %v, want %v", context.Cause(ctx), first)
		}
	}
}

// DL-39: one settlement append waits at most min(SettlementTimeout,
// Hr − now); a root installed during the wait shortens it; when it ends
// without a commit the attempt is Unresolved and no second settlement is
// ever appended for its token.
func TestDL39_DL42_SettlementCapLeavesUnresolved(t *testing.T) {
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result { return Result{} },
		func(c *RunnerConfig) { c.SettlementTimeout = 5 * time.Second })
	b.app.mu.Lock()
	b.app.hold = true
	b.app.mu.Unlock()
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	<-b.app.held // the settlement append is in flight at t0
	b.clk.Set(t0.Add(100 * time.Millisecond))
	if err := b.r.InstallRoot(context.Background(), deadlines.NewRoot(t0, time.Second)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(t0.Add(time.Second - 1))
	if err := b.r.call(context.Background(), func(now time.Time) { b.r.fire() }); err != nil {
		t.Fatal(err)
	}
	if q := b.r.Quarantine(); q.Unresolved != 0 {
		t.Fatalf("unresolved before Hr: %+v", q)
	}
	b.clk.Set(t0.Add(time.Second)) // Hr: the 5 s cap became 1 s
	if err := b.r.call(context.Background(), func(now time.Time) { b.r.fire() }); err != nil {
		t.Fatal(err)
	}
	if q := b.r.Quarantine(); q.Unresolved != 1 {
		t.Fatalf("DL-39: %+v", q)
	}
	close(b.app.release)
	b.sync()
	if n := len(b.app.settlements()); n != 1 {
		t.Fatalf("%d settlements appended, want the one in flight", n)
	}
}

// DL-39: an already expired root starts no settlement.
func TestDL39_ExpiredRootStartsNoSettlement(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		started <- struct{}{}
		<-release
		return Result{}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := b.r.InstallRoot(context.Background(), deadlines.NewRoot(t0, time.Second)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(t0.Add(time.Second)) // G = 0.75 passed: notified, C = 0.75 + 0.0625
	b.sync()
	close(release)
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := b.r.Quarantine(); q.Unresolved != 1 || len(b.app.settlements()) != 0 {
		t.Fatalf("%+v, %d settlements", q, len(b.app.settlements()))
	}
}

// DL-26, DL-38: a late return after abandonment is fenced and counted;
// the token settles once.
func TestDL26_LateReturnIsFenced(t *testing.T) {
	release := make(chan struct{})
	started := make(chan *Attempt, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		started <- a
		<-release
		return Result{}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	a := <-started
	b.clk.Set(a.P)
	b.sync()
	if a.Proceed() != true {
		t.Fatal("DL-20: no stage may start only once C passed")
	}
	b.clk.Set(a.P.Add(250 * time.Millisecond))
	b.sync()
	if a.Proceed() {
		t.Fatal("DL-20: a stage may start after C")
	}
	if q := b.r.Quarantine(); q.Executions != 1 || b.r.Quarantined() != 2 { // the execution and its (empty) scope
		t.Fatalf("%+v", q)
	}
	close(release)
	if err := b.r.WaitQuarantine(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := b.r.Quarantine(); q.Fenced != 1 || len(b.app.settlements()) != 1 {
		t.Fatalf("%+v, %d settlements", q, len(b.app.settlements()))
	}
}

// DL-30: when an attempt's owner is torn down while a reason is set and
// cleanup is unfinished, the cleanup cutoff becomes cap_root(min(H,
// now + 100 ms)): it only ever shrinks and a later teardown never restarts
// it; the running hook's deadline follows it, the hook still running when
// the window ends is Interrupted, and the torn-down owner settles nothing.
// T = 30 s, timeout at 29, abandoned at C = 29.25 with E = 30, one hook
// with Hk = 29.8125.
func TestDL30_TornDownOwnerCleanupOnlyShrinks(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // a failed test leaves nothing running
	started := make(chan *Attempt, 1)
	hooked := make(chan *HookRun, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		a.Enter("m", func(ctx context.Context, run *HookRun) error {
			hooked <- run
			select {
			case <-ctx.Done():
			case <-release:
			}
			return context.Cause(ctx)
		})
		started <- a
		<-release
		return Result{}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	a := <-started
	b.clk.Set(ts(29 * time.Second))
	b.sync()
	b.clk.Set(ts(29250 * time.Millisecond))
	b.sync()
	run := <-hooked
	if got := run.Deadline(); !got.Equal(ts(29812500 * time.Microsecond)) {
		t.Fatalf("hook deadline %v before the teardown", got.Sub(t0))
	}
	// tear tears the owner down at the clock's instant and reports the
	// cleanup cutoff and the running hook's deadline.
	tear := func(at time.Duration) (e, hook time.Time) {
		t.Helper()
		b.clk.Set(ts(at))
		err := b.r.call(context.Background(), func(now time.Time) {
			o := b.r.attempts[a.Token]
			b.r.tear(o, deadlines.ReasonNone, now)
			e, hook = o.e, o.hook.deadline
		})
		if err != nil {
			t.Fatal(err)
		}
		return e, hook
	}
	// At 29.5: E = min(30, 29.6) = 29.6; u = 29.25, so Hk = 29.6 −
	// min(0.35/4, 0.25) = 29.5125.
	e, hook := tear(29500 * time.Millisecond)
	if !e.Equal(ts(29600*time.Millisecond)) || !hook.Equal(ts(29512500*time.Microsecond)) {
		t.Fatalf("after the teardown at 29.5: E %v, hook deadline %v", e.Sub(t0), hook.Sub(t0))
	}
	if got := run.Deadline(); !got.Equal(hook) {
		t.Fatalf("the hook's context deadline %v is not lowered to %v", got.Sub(t0), hook.Sub(t0))
	}
	// A later teardown never restarts the window: 29.505 + 0.1 > 29.6.
	if e, hook2 := tear(29505 * time.Millisecond); !e.Equal(ts(29600*time.Millisecond)) || !hook2.Equal(hook) {
		t.Fatalf("a second teardown moved E to %v, the hook deadline to %v", e.Sub(t0), hook2.Sub(t0))
	}
	b.clk.Set(ts(29512500 * time.Microsecond))
	b.sync()
	if r, at, ok := run.Signal().Reason(); !ok || r != deadlines.ReasonDeliveryTimeout || !at.Equal(hook) {
		t.Fatalf("hook cleanup cancellation %v at %v", r, at.Sub(t0))
	}
	if _, exits, terms := a.audit(); strings.Join(exits, " ") != "not_started" || strings.Join(terms, " ") != "interrupted" {
		t.Fatalf("ledger exits %v, termination %v", exits, terms)
	}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("a torn-down owner settled: %d settlements", n)
	}
}

// inertClock is a manual clock whose timers never fire: the runner acts on
// a deadline only when something else wakes it, so a test can order what
// the loop observes.
type inertClock struct{ *clocktest.Clock }

func (inertClock) NewTimer(time.Duration) clock.Timer { return inertTimer{make(chan time.Time)} }

// NewTimerAt hides the fake clock's own, which [clock.NewTimerAt] prefers
// and whose timers fire.
func (inertClock) NewTimerAt(time.Time) clock.Timer { return inertTimer{make(chan time.Time)} }

type inertTimer struct{ ch chan time.Time }

func (t inertTimer) C() <-chan time.Time    { return t.ch }
func (inertTimer) Stop() bool               { return true }
func (inertTimer) Reset(time.Duration) bool { return true }

// The runner's event heap drops the events of attempts that are gone.
// Each attempt leaves its notification event (at S + DeliveryTimeout, up
// to 900 s ahead) and its settlement cap behind when it settles; without
// compaction the heap held about rate × DeliveryTimeout entries under
// sustained load. The clock does not move here, so no event is ever due.
func TestRunnerEventHeapStaysBoundedUnderLoad(t *testing.T) {
	m := NewMachine(Config{
		Workers: 4, DeliveryTimeout: deadlines.DeliveryTimeoutMax,
		NewIDFunc: seqIDs(),
	}, replay.New())
	r := NewRunner(RunnerConfig{
		Clock: clocktest.New(t0), Appender: &memAppender{},
		Execute: func(context.Context, *Attempt) Result { return Result{} },
	}, m)
	startRecovered(t, r)
	ctx := context.Background()
	if err := r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	const jobs = 20 * eventsCompactMin
	for range jobs {
		if err := r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
			d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
			return d, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var size int
	if err := r.call(ctx, func(time.Time) { size = len(r.events) }); err != nil {
		t.Fatal(err)
	}
	if completed := len(r.cfg.Appender.(*memAppender).settlements()); completed != jobs {
		t.Fatalf("%d settlements, want %d", completed, jobs)
	}
	if size > 2*eventsCompactMin {
		t.Fatalf("event heap holds %d entries after %d attempts settled, want <= %d", size, jobs, 2*eventsCompactMin)
	}
}

// launchedAt starts a runner over an inertClock whose one job's
// attempt_started is decided at t0 and acknowledged at t0 + at: the
// attempt is first observed then (DL-24). T = 30 s, so P = N = 29 s and a
// timeout's C = 29.25 s. Each execution sends its context's cause on the
// channel returned, as it starts, and returns.
func launchedAt(t *testing.T, at time.Duration) (*Runner, *timedAppender, chan error) {
	t.Helper()
	clk := clocktest.New(t0)
	app := &timedAppender{clk: clk}
	entered := make(chan error, 1)
	m := NewMachine(Config{
		Workers: 1, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: func(prefix string, _ time.Time) string { return prefix + "1" },
	}, replay.New())
	r := NewRunner(RunnerConfig{Clock: inertClock{clk}, Appender: app,
		Execute: func(ctx context.Context, a *Attempt) Result {
			entered <- context.Cause(ctx)
			return Result{}
		}}, m)
	startRecovered(t, r)
	t.Cleanup(app.open) // before Stop, which waits for the append in flight
	ctx := context.Background()
	if err := r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	app.close()
	if err := r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-app.waiting // attempt_started, decided at t0
	clk.Set(ts(at))
	app.open()
	return r, app, entered
}

// DL-18, DL-24: an attempt first observed at its notification instant N
// is notified before its execution starts: the handler finds its context
// cancelled with DELIVERY_TIMEOUT at N, although no timer woke the runner.
func TestDL24_AttemptFirstObservedAtNStartsNotified(t *testing.T) {
	r, _, entered := launchedAt(t, 29*time.Second)
	var cr *CancelReason
	if cause := <-entered; !errors.As(cause, &cr) || cr.Reason != deadlines.ReasonDeliveryTimeout || !cr.At.Equal(ts(29*time.Second)) {
		t.Fatalf("the execution started with cause %v, want the timeout at N", cause)
	}
	if err := r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// DL-24: an attempt first observed at its cooperative deadline C, not
// only after it, runs nothing: its execution is not_started.
func TestDL24_AttemptFirstObservedAtCRunsNothing(t *testing.T) {
	r, app, entered := launchedAt(t, 29250*time.Millisecond)
	if err := r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
		t.Fatal("the execution started at C")
	default:
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	var execution []string
	for _, recs := range app.appends {
		for _, rec := range recs {
			if o := record.OutcomeOf(rec.Body); o != nil {
				execution = append(execution, o.Execution)
			}
		}
	}
	if len(execution) != 1 || execution[0] != executionNotStarted {
		t.Fatalf("settlements with execution %v, want [%s]", execution, executionNotStarted)
	}
}

// DL-28, DL-32, DL-35: when a normal After panics, the unwind stops: the
// entries it did not reach and the panicked one get their termination
// hooks, inner first, each told the cause Panicked and its own exit.
func TestDL35_HooksAfterAPanickedAfterSeePanicked(t *testing.T) {
	type seen struct {
		name  string
		cause Cause
		exit  Exit
	}
	ran := make(chan seen, 2)
	hook := func(name string) HookFunc {
		return func(ctx context.Context, run *HookRun) error {
			ran <- seen{name, run.Cause, run.Exit}
			return nil
		}
	}
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		a.Enter("outer", hook("outer"))
		a.SetExit(a.Enter("inner", hook("inner")), ExitPanicked)
		return Result{Failure: &Failure{Code: "MIDDLEWARE_PANICKED", Message: "boom"}}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(ran)
	var got []seen
	for s := range ran {
		got = append(got, s)
	}
	want := []seen{{"inner", CausePanicked, ExitPanicked}, {"outer", CausePanicked, ExitNotStarted}}
	if !slices.Equal(got, want) {
		t.Fatalf("hooks ran %+v, want %+v", got, want)
	}
}

// Once the execution has returned, its context is cancelled, so that what
// user code derived from it ends with the pipeline, and no cancellation
// reason is recorded for it (DL-16, DL-19): the attempt settles with none.
func TestDL19_ReturnedExecutionsContextEndsWithoutAReason(t *testing.T) {
	ctxs := make(chan context.Context, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		derived, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		ctxs <- derived
		return Result{}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if err := b.r.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	derived := <-ctxs
	select {
	case <-derived.Done():
	default:
		t.Fatal("a context derived from a returned execution's is not cancelled")
	}
	var cr *CancelReason
	if errors.As(context.Cause(derived), &cr) {
		t.Fatalf("the returned execution's context names a reason: %v", cr)
	}
	s := b.app.settlements()
	if len(s) != 1 || record.OutcomeOf(s[0].Body).Reason != "" {
		t.Fatalf("settlements %v, want one with no reason", s)
	}
}

// DL-26, DL-37: an execution that returns after it was abandoned, while
// its owner still runs the termination hooks, is fenced out and leaves
// the quarantine at once; it counts as joined before the scope closes.
func TestDL26_LateReturnDuringCleanupIsFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		execRelease, hookRelease, hooked := make(chan struct{}), make(chan struct{}), make(chan struct{})
		b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
			a.Enter("m", func(ctx context.Context, run *HookRun) error {
				close(hooked)
				<-hookRelease
				return nil
			})
			<-execRelease
			return Result{}
		})
		ctx := context.Background()
		if err := b.r.SetDispatch(ctx, true); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the execution runs
		b.clk.Set(ts(29 * time.Second))
		b.sync()
		b.clk.Set(ts(29250 * time.Millisecond)) // C: abandoned; the hook runs
		b.sync()
		<-hooked
		close(execRelease)
		// Blocked for good unless the late return leaves the quarantine.
		if err := b.r.WaitQuarantine(ctx); err != nil {
			t.Fatal(err)
		}
		if q := b.r.Quarantine(); q.Fenced != 1 || q.Executions != 0 {
			t.Fatalf("after the late return: %+v", q)
		}
		close(hookRelease)
		if err := b.r.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		s := b.app.settlements()
		if len(s) != 1 {
			t.Fatalf("%d settlements, want 1", len(s))
		}
		if o := record.OutcomeOf(s[0].Body); !o.Joined || o.Execution != executionAbandoned || o.Scope != scopeClosed {
			t.Fatalf("settlement %+v", *o)
		}
	})
}

// DL-20: no stage may start from C on, C included, even before the owner
// has observed C and abandoned the execution.
func TestDL20_ProceedEndsAtC(t *testing.T) {
	clk := clocktest.New(t0)
	a := &Attempt{clk: clk}
	a.setC(ts(time.Second))
	clk.Set(ts(time.Second - 1))
	if !a.Proceed() {
		t.Fatal("Proceed before C = false")
	}
	clk.Set(ts(time.Second))
	if a.Proceed() {
		t.Fatal("Proceed at C = true")
	}
}

// DL-20, DL-24: no stage starts past C even while the loop has not acted
// on P. Over an inertClock the loop never wakes for P, so no reason is
// recorded; the gate still ends at the C of a delivery timeout at P,
// P + min((H − P)/4, 250 ms). It used to know C only from the loop, so a
// late loop let the handler start long after C.
func TestDL24_ProceedEndsAtCBeforeTheLoopActs(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan *Attempt, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		started <- a
		<-release
		return Result{}
	}, func(c *RunnerConfig) { c.Clock = inertClock{c.Clock.(*clocktest.Clock)} })
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	a := <-started
	c := a.P.Add(min(a.H.Sub(a.P)/4, 250*time.Millisecond))
	b.clk.Set(c.Add(-1))
	if !a.Proceed() {
		t.Fatal("DL-20: Proceed before C = false")
	}
	b.clk.Set(c)
	if _, _, ok := a.Signal().Reason(); ok {
		t.Fatal("the loop acted on P: the test needs it not to")
	}
	if a.Proceed() {
		t.Fatalf("DL-24: Proceed at C = %v with the loop not yet at P = true", c.Sub(a.S))
	}
}

// DL-26, DL-27: once the owner has fixed the ledger, the abandoned
// goroutine can neither enter another middleware nor change an exit.
func TestDL26_FrozenLedgerIgnoresTheAbandonedGoroutine(t *testing.T) {
	a := &Attempt{}
	i := a.Enter("m", nil)
	a.freeze()
	if j := a.Enter("late", nil); j != -1 {
		t.Fatalf("Enter after the freeze = %d, want -1", j)
	}
	a.SetExit(i, ExitCompleted)
	if names, exits, _ := a.audit(); strings.Join(names, " ") != "m" || strings.Join(exits, " ") != "not_started" {
		t.Fatalf("ledger %v with exits %v after the freeze, want [m] [not_started]", names, exits)
	}
}

// DL-20, DL-23: a pipeline that returns before C keeps its result even if
// the loop first observes that return at or after C: the owner waits for
// the same execution until C, and the return came by then. T = 30 s:
// timeout at P = 29, C = 29.25; the handler returns at 29, and the loop,
// busy until the clock reached C, then finds both the deadline and the
// result due.
func TestDL23_ReturnBeforeCObservedAfterCIsKept(t *testing.T) {
	release := make(chan struct{})
	started := make(chan *Attempt, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		started <- a
		<-release
		return Result{Output: []byte("done")}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	a := <-started
	b.clk.Set(a.P)
	b.sync()
	c := *a.c.Load()
	if want := a.P.Add(250 * time.Millisecond); !c.Equal(want) {
		t.Fatalf("C = %v, want %v", c, want)
	}
	returnUnobserved(t, b, a, release, func() { b.clk.Set(c) })
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements", len(s))
	}
	got, ok := s[0].Body.(*record.AttemptSucceeded)
	if !ok {
		t.Fatalf("DL-23: settled %s %+v, want attempt_succeeded", s[0].Kind(), *record.OutcomeOf(s[0].Body))
	}
	if string(got.Output) != "done" || !got.Joined || got.Execution != executionReturned || got.Reason != "delivery_timeout" {
		t.Fatalf("%+v", got.Outcome)
	}
	if q := b.r.Quarantine(); q.Fenced != 0 || q.Executions != 0 {
		t.Fatalf("%+v", q)
	}
}

// observeLate runs release on the loop, takes the owner event it causes as
// the loop would, but only once the clock has moved to at: the loop was
// busy while the hook or the scope close returned, and observes it late.
func (b *runnerBundle) observeLate(release func(), at time.Time) {
	b.t.Helper()
	if err := b.r.Do(context.Background(), func(time.Time) {
		release()
		ev := <-b.r.owner // sent after the return, before the clock moved
		b.clk.Set(at)
		b.r.fire()
		b.r.onOwner(ev)
	}); err != nil {
		b.t.Fatal(err)
	}
	b.sync()
}

// newHookBundle is a dispatching runner bundle whose one attempt returns
// at once, leaving its termination hook "m" eligible (its After never
// ran); the hook blocks until release is closed. It returns once the hook
// runs, with the hook's deadline.
func newHookBundle(t *testing.T, mods ...func(*RunnerConfig)) (b *runnerBundle, deadline time.Time, release chan struct{}) {
	t.Helper()
	hooking := make(chan time.Time, 1)
	release = make(chan struct{})
	b = newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		a.Enter("m", func(ctx context.Context, run *HookRun) error {
			hooking <- run.Deadline()
			<-release
			return nil
		})
		return Result{}
	}, mods...)
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return b, <-hooking, release
}

// DL-33: a termination hook that returned before its deadline is
// Completed, even if the loop first observes its return at or after that
// deadline. T = 30 s, no reason: E = H = 30, one hook whose deadline is
// Hk = 29.75.
func TestDL33_HookReturnedBeforeItsDeadlineObservedLateIsCompleted(t *testing.T) {
	b, deadline, release := newHookBundle(t)
	if want := ts(deliveryTimeout - 250*time.Millisecond); !deadline.Equal(want) {
		t.Fatalf("hook deadline %v, want %v", deadline, want)
	}
	b.observeLate(func() { close(release) }, deadline)
	s := b.app.settlements()
	if len(s) != 1 || s[0].Kind() != record.KindAttemptSucceeded {
		t.Fatalf("settled %s %+v, want attempt_succeeded", s[0].Kind(), *record.OutcomeOf(s[0].Body))
	}
	if o := record.OutcomeOf(s[0].Body); strings.Join(o.TerminationExits, " ") != "completed" || o.Cleanup != "" {
		t.Fatalf("%+v", *o)
	}
	if q := b.r.Quarantine(); q.Hooks != 0 {
		t.Fatalf("%+v", q)
	}
}

// DL-36: an attempt scope whose close returned before E' is closed, even
// if the loop first observes its return at or after E'. T = 30 s, no
// reason: E' = H = 30.
func TestDL36_ScopeClosedBeforeEObservedLateIsClosed(t *testing.T) {
	closing, release := make(chan struct{}, 1), make(chan struct{})
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		a.Scope().Register("r", closerFunc(func() error {
			closing <- struct{}{}
			<-release
			return nil
		}))
		return Result{}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	<-closing
	b.observeLate(func() { close(release) }, ts(deliveryTimeout))
	s := b.app.settlements()
	if len(s) != 1 || s[0].Kind() != record.KindAttemptSucceeded {
		t.Fatalf("settled %s %+v, want attempt_succeeded", s[0].Kind(), *record.OutcomeOf(s[0].Body))
	}
	if o := record.OutcomeOf(s[0].Body); o.Scope != scopeClosed || o.Cleanup != "" {
		t.Fatalf("%+v", *o)
	}
	if q := b.r.Quarantine(); q.Scopes != 0 {
		t.Fatalf("%+v", q)
	}
}

// DL-6, DL-19, DL-23: a reason recorded after the pipeline returned is not
// its reason. An execution that returned an error before the graceful
// cutoff G, and that the loop first observes at G, consumed its attempt:
// it is retried, not released, and its settlement records no reason.
// T = 30 s from 0; root of 30 s from 1: G = 29 = P.
func TestDL23_ErrorReturnedBeforeNObservedAfterNConsumes(t *testing.T) {
	b, a, release := heldFlaky(t)
	if err := b.r.InstallRoot(context.Background(), deadlines.NewRoot(ts(time.Second), 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(28500 * time.Millisecond))
	b.sync()
	returnUnobserved(t, b, a, release, func() { b.clk.Set(ts(29 * time.Second)) })
	if o := retriedFlaky(t, b); !o.Joined {
		t.Fatalf("%+v", *o)
	}
	if _, _, ok := a.Signal().Reason(); ok {
		t.Fatal("DL-19: a reason was recorded after the execution returned")
	}
}

// DL-6, DL-19, DL-23: force reaches the attempts still running. One whose
// execution returned an error before the force, and that the loop has yet
// to observe, gets no reason: it consumed its attempt and is retried.
func TestDL23_ErrorReturnedBeforeForceObservedAfterItConsumes(t *testing.T) {
	b, a, release := heldFlaky(t)
	b.clk.Set(ts(time.Second))
	b.sync()
	returnUnobserved(t, b, a, release, func() {
		b.clk.Set(ts(time.Second + time.Millisecond))
		b.r.force(deadlines.ReasonForcedShutdown, b.clk.Now())
	})
	retriedFlaky(t, b)
}

// heldFlaky starts one attempt whose execution, once release is closed,
// returns a retryable FLAKY failure.
func heldFlaky(t *testing.T) (*runnerBundle, *Attempt, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	started := make(chan *Attempt, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		started <- a
		<-release
		return Result{Failure: &Failure{Code: "FLAKY"}}
	})
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return b, <-started, release
}

// returnUnobserved lets a's execution return and then, on the loop, while
// the loop has yet to observe that result, runs then.
func returnUnobserved(t *testing.T, b *runnerBundle, a *Attempt, release chan struct{}, then func()) {
	t.Helper()
	if err := b.r.Do(context.Background(), func(time.Time) {
		close(release)
		for !a.ExecutionReturned() { // the result is queued; the loop is here
			runtime.Gosched()
		}
		then()
	}); err != nil {
		t.Fatal(err)
	}
	// Not Sync: the loop may take Sync's call before the queued result,
	// and the result's settlement would come after Sync returned.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// retriedFlaky checks that the one settlement is the FLAKY failure
// retried with no reason recorded, and returns its outcome.
func retriedFlaky(t *testing.T, b *runnerBundle) *record.Outcome {
	t.Helper()
	s := b.app.settlements()
	if len(s) != 1 || s[0].Kind() != record.KindAttemptRetryScheduled {
		t.Fatalf("settled %d records (%v), want one attempt_retry_scheduled", len(s), s)
	}
	o := record.OutcomeOf(s[0].Body)
	if o.Code != "FLAKY" || o.Reason != "" {
		t.Fatalf("%+v", *o)
	}
	return o
}
