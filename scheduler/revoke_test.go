package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// closerFunc is an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// hangingScope starts a runner whose attempt registers a scope resource
// whose Close blocks until release is closed, and returns when its context
// is cancelled. It returns once the attempt runs under a 30 s root forced
// at 5 s: the execution returned within its window and the scope's close
// hangs; the owner cutoff is F(5) = 6.
func hangingScope(t *testing.T, deferAbort bool) (b *runnerBundle, release chan struct{}) {
	t.Helper()
	closing, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	started := make(chan struct{})
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
	})
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
	if o := outcomeOf(s[0].Body); o.Code != CodeSettlementRevoked || !o.Joined || o.Scope != scopeTimedOut ||
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
	if len(s) != 1 || outcomeOf(s[0].Body).Code != CodeScopeCleanupTimedOut {
		t.Fatalf("settlements %v", s)
	}
}
