package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// closerFunc is an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// hangingClose starts a runner, dispatch still off, whose attempt
// registers a scope resource, closes started, and returns when its
// context is cancelled. The resource's Close closes closing, then blocks
// until release is closed, which the test's cleanup does before the
// runner stops if the test has not.
func hangingClose(t *testing.T, mods ...func(*RunnerConfig)) (b *runnerBundle, started, closing, release chan struct{}) {
	t.Helper()
	started, closing, release = make(chan struct{}), make(chan struct{}), make(chan struct{})
	b = newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		if err := a.Scope().Register("conn", closerFunc(func() error {
			close(closing)
			<-release
			return nil
		})); err != nil {
			t.Error(err)
		}
		close(started)
		<-ctx.Done()
		return Result{}
	}, mods...)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return b, started, closing, release
}

// hangingScope starts a hangingClose runner and returns once its attempt
// runs under a 30 s root forced at 5 s: the execution returned within its
// window and the scope's close hangs; the owner cutoff is F(5) = 6.
func hangingScope(t *testing.T, deferAbort bool, mods ...func(*RunnerConfig)) (b *runnerBundle, release chan struct{}) {
	t.Helper()
	b, started, closing, release := hangingClose(t, mods...)
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-started
	if deferAbort {
		if err := b.r.DeferFinalAbort(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.r.InstallRoot(ctx, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(5 * time.Second))
	if err := b.r.Force(ctx, deadlines.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	<-closing
	return b, release
}

// TestDL41_OwnerCutoffHandsTheTokenToTheFinalAbort: with the final abort
// deferred, the owner whose scope close still runs at the owner cutoff 6
// settles nothing; Revoke then settles the token once with
// attempt_released; the close's late return settles nothing more, and
// the drain completes only after the release is committed.
func TestDL41_OwnerCutoffHandsTheTokenToTheFinalAbort(t *testing.T) {
	b, release := hangingScope(t, true)
	b.clk.Set(ts(6 * time.Second))
	b.sync()
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("DL-41: the owner settled %d tokens past its owner cutoff", n)
	}
	if b.drainedNow() {
		t.Fatal("DL-41: a drain is complete while a held attempt waits for the final abort")
	}
	n, err := b.r.Revoke(context.Background(), deadlines.ReasonForcedShutdown, ts(6*time.Second))
	if err != nil || n != 1 {
		t.Fatalf("Revoke = %d, %v; want 1 token", n, err)
	}
	if err := b.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := b.app.settlements()
	if len(s) != 1 || s[0].Kind() != record.KindAttemptReleased {
		t.Fatalf("settlements %v", s)
	}
	if o := record.OutcomeOf(s[0].Body); o.Code != CodeSettlementRevoked || !o.Joined || o.Scope != scopeTimedOut ||
		o.Cleanup != CodeScopeCleanupTimedOut || o.Reason != deadlines.ReasonForcedShutdown.String() {
		t.Fatalf("release %+v", *o)
	}
	if q := b.r.Quarantine(); q.Scopes != 1 {
		t.Fatalf("the hanging close is not quarantined: %+v", q)
	}
	close(release)
	if err := b.r.WaitQuarantine(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.sync()
	if n := len(b.app.settlements()); n != 1 {
		t.Fatalf("DL-38: %d settlements after the late return", n)
	}
}

// TestDL41_WithoutDeferralTheOwnerSettles: without a coordinator, the
// owner settles at its own cleanup cutoff (the runner's behaviour outside
// a shutdown, e.g. under test harnesses).
func TestDL41_WithoutDeferralTheOwnerSettles(t *testing.T) {
	b, _ := hangingScope(t, false)
	b.clk.Set(ts(6 * time.Second))
	b.sync()
	if err := b.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := b.app.settlements()
	if len(s) != 1 || record.OutcomeOf(s[0].Body).Code != CodeScopeCleanupTimedOut {
		t.Fatalf("settlements %v", s)
	}
}

// TestDL41_RevokeLetsAnOwnerDueNowSettleFirst: the final abort at 6 comes
// at the very instant the owner's scope close is timed out, before any
// timer woke the runner for it: the owner acts first and settles its token
// itself, and nothing is left to revoke.
func TestDL41_RevokeLetsAnOwnerDueNowSettleFirst(t *testing.T) {
	b, _ := hangingScope(t, false, func(c *RunnerConfig) { c.Clock = inertClock{c.Clock.(*clocktest.Clock)} })
	b.clk.Set(ts(6 * time.Second))
	n, err := b.r.Revoke(context.Background(), deadlines.ReasonForcedShutdown, ts(6*time.Second))
	if err != nil || n != 0 {
		t.Fatalf("Revoke = %d, %v; want no token left to revoke", n, err)
	}
	if err := b.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := b.app.settlements()
	if len(s) != 1 || record.OutcomeOf(s[0].Body).Code != CodeScopeCleanupTimedOut {
		t.Fatalf("settlements %v, want the owner's own", s)
	}
}

// revokedInCleanup starts a runner under a 30 s root with the final abort
// deferred, whose attempt enters middleware "m" with hook, registers a
// scope resource closed by closeFunc unless it is nil, and returns at
// 5.95 with no reason: its cleanup starts then, with its own cutoff E = H
// = 30 (DL-30), and the hook runs from 5.95 with deadline Hk = 29.75
// (DL-31). The final abort comes at 6, the owner cutoff of a force at 5
// (DL-41): the hook is still running, its cleanup unfinished, so it gets
// the final window E = cap_root(min(H, 6 + 100 ms)) = 6.1, and its hook
// chain deadline becomes 6.1 − min((6.1 − 5.95)/4, 250 ms) = 6.0625. It
// returns the attempt and the hook's run, with Revoke done and nothing
// settled yet.
func revokedInCleanup(t *testing.T, hook HookFunc, closeFunc func() error) (*runnerBundle, *Attempt, *HookRun) {
	t.Helper()
	started := make(chan *Attempt, 1)
	ret := make(chan struct{})
	hooked := make(chan *HookRun, 1)
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		// Its After never runs: the entry's exit stays NotStarted, so it
		// gets its termination hook (DL-32).
		a.Enter("m", func(ctx context.Context, run *HookRun) error {
			hooked <- run
			return hook(ctx, run)
		})
		if closeFunc != nil {
			if err := a.Scope().Register("conn", closerFunc(closeFunc)); err != nil {
				t.Error(err)
			}
		}
		started <- a
		<-ret
		return Result{}
	})
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	a := <-started
	// A shutdown closes admission first: the released job is not started
	// again (SD-12).
	if err := b.r.StopAdmission(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.r.DeferFinalAbort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.r.InstallRoot(ctx, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(5950 * time.Millisecond))
	close(ret)
	run := <-hooked
	if got := run.Deadline(); !got.Equal(ts(29750 * time.Millisecond)) {
		t.Fatalf("hook deadline %v before the final abort", got.Sub(t0))
	}
	b.clk.Set(ts(6 * time.Second))
	n, err := b.r.Revoke(ctx, deadlines.ReasonForcedShutdown, ts(6*time.Second))
	if err != nil || n != 1 {
		t.Fatalf("Revoke = %d, %v; want 1 token", n, err)
	}
	b.sync()
	if s := b.app.settlements(); len(s) != 0 {
		t.Fatalf("DL-30: released at the final abort, before the window: %v", s)
	}
	if got := run.Deadline(); !got.Equal(ts(6062500 * time.Microsecond)) {
		t.Fatalf("DL-30, DL-31: hook deadline %v in the final window, want 6.0625", got.Sub(t0))
	}
	return b, a, run
}

// revokedRelease returns the one settlement of b, failing unless it is
// the final abort's attempt_released decided at at with the first reason
// forced_shutdown at 6 (DL-41, DL-40).
func revokedRelease(t *testing.T, b *runnerBundle, at time.Duration) *record.Outcome {
	t.Helper()
	s := b.app.settlements()
	if len(s) != 1 || s[0].Kind() != record.KindAttemptReleased {
		t.Fatalf("DL-38: settlements %v, want one attempt_released", s)
	}
	rel := s[0].Body.(*record.AttemptReleased)
	if got := time.Unix(0, rel.AvailableAt).Sub(t0); got != at {
		t.Fatalf("released at %v, want %v", got, at)
	}
	o := &rel.Outcome
	if o.Code != CodeSettlementRevoked || o.Reason != deadlines.ReasonForcedShutdown.String() || o.ReasonAt != ts(6*time.Second).UnixNano() {
		t.Fatalf("release %+v", *o)
	}
	return o
}

// inFlight fails unless the runner still tracks n attempts: [Runner.Drain]
// waits for them.
// drainedNow reports whether a [Runner.Drain] that began now would be
// complete at once.
func (b *runnerBundle) drainedNow() bool {
	b.t.Helper()
	drained := false
	err := b.r.call(context.Background(), func(time.Time) {
		w := make(chan struct{})
		b.r.drainWait = append(b.r.drainWait, w)
		b.r.checkDrained()
		select {
		case <-w:
			drained = true
		default:
		}
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return drained
}

func (b *runnerBundle) inFlight(n int) {
	b.t.Helper()
	if got, err := b.r.InFlight(context.Background()); err != nil || got != n {
		b.t.Fatalf("in flight %d, %v; want %d", got, err, n)
	}
}

// TestDL30_DL41_RevokedHookFinishingInTheWindowIsReleasedThen: the final
// abort at 6 does not cut the hook that is still running; it finishes at
// 6.05, inside the window, and is recorded completed; the scope closes at
// once, and the release is decided at that instant, 6.05, by the abort,
// not by the owner. The drain covers the attempt until then.
func TestDL30_DL41_RevokedHookFinishingInTheWindowIsReleasedThen(t *testing.T) {
	finish := make(chan error)
	b, a, _ := revokedInCleanup(t, func(ctx context.Context, run *HookRun) error { return <-finish }, nil)
	drained := make(chan error, 1)
	go func() { drained <- b.r.Drain(context.Background()) }()
	b.clk.Set(ts(6050 * time.Millisecond))
	b.sync()
	b.inFlight(1)
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("%d settlements while the hook runs in the window", n)
	}
	finish <- nil
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	o := revokedRelease(t, b, 6050*time.Millisecond)
	if !o.Joined || o.Execution != executionReturned || o.Scope != scopeClosed || o.Cleanup != "" ||
		strings.Join(o.TerminationExits, " ") != "completed" {
		t.Fatalf("DL-30: the cleanup finished in the window is not recorded as finished: %+v", *o)
	}
	if _, _, terms := a.audit(); strings.Join(terms, " ") != "completed" {
		t.Fatalf("termination %v", terms)
	}
	if q := b.r.Quarantine(); q != (QuarantineStats{}) {
		t.Fatalf("quarantine %+v", q)
	}
}

// TestDL30_DL41_RevokedCleanupIgnoringCancellationIsCutAtTheWindowEnd:
// the hook and the scope close both ignore cancellation. The hook is
// interrupted exactly at the end of its share of the window, 6.0625; the
// scope close then runs until the window ends at 6 + 100 ms and is timed
// out there; the release lands at 6.1 with both recorded as they ended,
// and both goroutines stay quarantined until they return.
func TestDL30_DL41_RevokedCleanupIgnoringCancellationIsCutAtTheWindowEnd(t *testing.T) {
	hold, closing := make(chan struct{}), make(chan struct{})
	defer close(hold)
	b, a, run := revokedInCleanup(t,
		func(ctx context.Context, run *HookRun) error { <-hold; return nil },
		func() error { close(closing); <-hold; return nil })
	drained := make(chan error, 1)
	go func() { drained <- b.r.Drain(context.Background()) }()

	b.clk.Set(ts(6062500*time.Microsecond - 1))
	b.sync()
	if _, _, terms := a.audit(); strings.Join(terms, " ") != "running" {
		t.Fatalf("termination %v before the hook's share of the window ended", terms)
	}
	b.clk.Set(ts(6062500 * time.Microsecond))
	b.sync()
	if _, _, terms := a.audit(); strings.Join(terms, " ") != "interrupted" {
		t.Fatalf("DL-33: termination %v at the end of the hook's share of the window", terms)
	}
	if r, at, ok := run.Signal().Reason(); !ok || !at.Equal(ts(6062500*time.Microsecond)) {
		t.Fatalf("hook cleanup cancellation %v at %v (%v)", r, at.Sub(t0), ok)
	}
	<-closing // the scope close runs on in the window
	b.clk.Set(ts(6100*time.Millisecond - 1))
	b.sync()
	b.inFlight(1)
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("%d settlements while the scope close runs in the window", n)
	}
	b.clk.Set(ts(6100 * time.Millisecond))
	b.sync()
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	o := revokedRelease(t, b, 6100*time.Millisecond)
	if !o.Joined || o.Scope != scopeTimedOut || o.Cleanup != CodeTerminationCleanupFailed+","+CodeScopeCleanupTimedOut ||
		strings.Join(o.TerminationExits, " ") != "interrupted" {
		t.Fatalf("DL-30: the cleanup cut at the window's end is not recorded so: %+v", *o)
	}
	if q := b.r.Quarantine(); q.Hooks != 1 || q.Scopes != 1 {
		t.Fatalf("quarantine %+v", q)
	}
}

// revokedScopeClose starts a runner under a root of total from t0 with
// the final abort deferred, whose attempt (T = 30 s, so H = 30) registers
// a scope resource whose close ignores everything, and returns at
// returnAt with no reason: its cleanup cutoff is its own, min(H, Hr)
// (DL-30). The final abort comes at abort, while the close still runs. It
// returns once Revoke is done.
func revokedScopeClose(t *testing.T, total, returnAt, abort time.Duration) *runnerBundle {
	t.Helper()
	hold, closing := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	started := make(chan struct{})
	ret := make(chan struct{})
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		if err := a.Scope().Register("conn", closerFunc(func() error { close(closing); <-hold; return nil })); err != nil {
			t.Error(err)
		}
		close(started)
		<-ret
		return Result{}
	})
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := b.r.StopAdmission(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.r.DeferFinalAbort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.r.InstallRoot(ctx, deadlines.NewRoot(t0, total)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(returnAt))
	close(ret)
	<-closing
	b.clk.Set(ts(abort))
	if n, err := b.r.Revoke(ctx, deadlines.ReasonForcedShutdown, ts(abort)); err != nil || n != 1 {
		t.Fatalf("Revoke = %d, %v; want 1 token", n, err)
	}
	return b
}

// TestDL30_DL41_RevokedWindowEndsAtH: with H earlier than the final abort
// + 100 ms, the window ends at H. Root 60 s, H = 30; the execution
// returns at 28 and its scope close ignores everything. The final abort
// at 29.95 gives it until min(H, 30.05) = 30, where the close is timed
// out and the release decided.
func TestDL30_DL41_RevokedWindowEndsAtH(t *testing.T) {
	b := revokedScopeClose(t, 60*time.Second, 28*time.Second, 29950*time.Millisecond)
	b.clk.Set(ts(30*time.Second - 1))
	b.sync()
	b.inFlight(1)
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("%d settlements before H", n)
	}
	b.clk.Set(ts(30 * time.Second))
	if err := b.r.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := b.app.settlements()
	if len(s) != 1 || s[0].Kind() != record.KindAttemptReleased {
		t.Fatalf("settlements %v", s)
	}
	rel := s[0].Body.(*record.AttemptReleased)
	if got := time.Unix(0, rel.AvailableAt).Sub(t0); got != 30*time.Second {
		t.Fatalf("DL-30: released at %v, want H = 30s", got)
	}
	if o := rel.Outcome; o.Code != CodeSettlementRevoked || o.Scope != scopeTimedOut || o.ReasonAt != ts(29950*time.Millisecond).UnixNano() {
		t.Fatalf("release %+v", o)
	}
}

// TestDL30_DL39_RevokedWindowEndingAtHrStartsNoSettlement: the window is
// capped by the root, and an expired root starts no settlement. T = 30 s:
// the attempt is notified of its timeout at P = 29 and returns then, so
// its first reason is delivery_timeout and its cleanup cutoff E = H = 30;
// its scope close ignores everything. A root installed at 29.5 ends at
// Hr = 30. The final abort at 29.95 gives the close until min(H, 30.05)
// capped by Hr, 30, where the root has expired: the abort's release is
// never started and the attempt counts Unresolved (DL-39).
func TestDL30_DL39_RevokedWindowEndingAtHrStartsNoSettlement(t *testing.T) {
	hold, closing := make(chan struct{}), make(chan struct{})
	defer close(hold)
	started := make(chan struct{})
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		if err := a.Scope().Register("conn", closerFunc(func() error { close(closing); <-hold; return nil })); err != nil {
			t.Error(err)
		}
		close(started)
		<-ctx.Done()
		return Result{}
	})
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := b.r.StopAdmission(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.r.DeferFinalAbort(ctx); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(29 * time.Second))
	b.sync()
	<-closing
	b.clk.Set(ts(29500 * time.Millisecond))
	if err := b.r.InstallRoot(ctx, deadlines.NewRoot(ts(29500*time.Millisecond), 500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(29950 * time.Millisecond))
	if n, err := b.r.Revoke(ctx, deadlines.ReasonForcedShutdown, ts(29950*time.Millisecond)); err != nil || n != 1 {
		t.Fatalf("Revoke = %d, %v; want 1 token", n, err)
	}
	b.clk.Set(ts(30*time.Second - 1))
	b.sync()
	b.inFlight(1)
	b.clk.Set(ts(30 * time.Second))
	if err := b.r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if q := b.r.Quarantine(); len(b.app.settlements()) != 0 || q.Unresolved != 1 || q.Scopes != 1 {
		t.Fatalf("%d settlements, quarantine %+v", len(b.app.settlements()), q)
	}
}

// TestDL30_DL41_StopAfterRevokeRestartsNothing: a second teardown, the
// runner's Stop at 6.05, inside the final window of the abort at 6,
// neither restarts nor cuts the window, and takes no settlement
// authority back: the hook is still interrupted at 6.0625, the scope
// close timed out at 6.1, and the release, the abort's, lands at 6.1
// before the loop ends.
func TestDL30_DL41_StopAfterRevokeRestartsNothing(t *testing.T) {
	hold, closing := make(chan struct{}), make(chan struct{})
	defer close(hold)
	b, a, run := revokedInCleanup(t,
		func(ctx context.Context, run *HookRun) error { <-hold; return nil },
		func() error { close(closing); <-hold; return nil })
	b.clk.Set(ts(6050 * time.Millisecond))
	stopped := make(chan error, 1)
	go func() { stopped <- b.r.Stop(context.Background()) }()
	// Once an op is refused, the loop is stopping and has torn down
	// every owner not torn down yet.
	for !errors.Is(b.r.Sync(context.Background()), ErrStopped) {
	}
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("%d settlements at the second teardown", n)
	}
	if got := run.Deadline(); !got.Equal(ts(6062500 * time.Microsecond)) {
		t.Fatalf("DL-30: the second teardown moved the hook deadline to %v", got.Sub(t0))
	}
	b.clk.Set(ts(6062500 * time.Microsecond))
	<-closing // the hook was interrupted at its share's end; the close runs
	if _, _, terms := a.audit(); strings.Join(terms, " ") != "interrupted" {
		t.Fatalf("termination %v", terms)
	}
	b.clk.Set(ts(6100 * time.Millisecond))
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	o := revokedRelease(t, b, 6100*time.Millisecond)
	if o.Scope != scopeTimedOut || strings.Join(o.TerminationExits, " ") != "interrupted" {
		t.Fatalf("release %+v", *o)
	}
}

// TestDL41_DL38_RevokedRunningExecutionIsReleasedUnjoined: the final abort
// at 6 finds the execution still running and ignoring its cancellation:
// it is abandoned at once, its scope withheld, and the release decided
// then records that the execution was never joined.
func TestDL41_DL38_RevokedRunningExecutionIsReleasedUnjoined(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result {
		close(started)
		<-release
		return Result{}
	})
	t.Cleanup(func() { close(release) }) // before Stop
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := b.r.StopAdmission(ctx); err != nil { // a shutdown's phase 1: the release starts nothing
		t.Fatal(err)
	}
	if err := b.r.InstallRoot(ctx, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(ts(6 * time.Second))
	if n, err := b.r.Revoke(ctx, deadlines.ReasonForcedShutdown, ts(6*time.Second)); err != nil || n != 1 {
		t.Fatalf("Revoke = %d, %v; want 1 token", n, err)
	}
	if err := b.r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	o := revokedRelease(t, b, 6*time.Second)
	if o.Joined || o.Execution != executionAbandoned || o.Scope != scopeQuarantined {
		t.Fatalf("DL-38: release of a running execution %+v", *o)
	}
}

// TestDL41_TimedOutAttemptIsNotHeldForTheFinalAbort: with the final abort
// deferred under a 60 s root, an attempt stopped by its own timeout has
// the owner cutoff H = 30; its owner, whose scope close hangs until then,
// still settles the token itself at 30.
func TestDL41_TimedOutAttemptIsNotHeldForTheFinalAbort(t *testing.T) {
	b, started, closing, _ := hangingClose(t)
	ctx := context.Background()
	if err := b.r.DeferFinalAbort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.r.InstallRoot(ctx, deadlines.NewRoot(t0, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	<-started
	b.clk.Set(ts(29 * time.Second)) // P: the timeout; the execution returns
	b.sync()
	<-closing
	b.clk.Set(ts(30 * time.Second)) // H: the close is timed out
	b.sync()
	s := b.app.settlements()
	if len(s) != 1 || record.OutcomeOf(s[0].Body).Reason != deadlines.ReasonDeliveryTimeout.String() {
		t.Fatalf("DL-41: settlements %v, want the owner's own, with the timeout", s)
	}
	b.inFlight(0)
}
