package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// DL-29, DL-36, DL-38: an attempt's owner is reused once its attempt
// settled (retire), and nothing of the attempt it owned reaches the next
// one's settlement. The first attempt's scope close fails, which its
// settlement records as a retryable cleanup failure; the retry runs under
// the same owner and settles clean.
func TestDL38_ReusedOwnerCarriesNothingOver(t *testing.T) {
	type running struct {
		token   uint64
		proceed chan struct{}
	}
	started := make(chan running)
	exec := func(ctx context.Context, a *Attempt) Result {
		if a.Job.Attempts == 1 {
			err := a.Scope().Register("conn", scopeCloser(func() error { return errors.New("connection reset") }))
			if err != nil {
				return Result{Failure: &Failure{Code: "REGISTER", Message: err.Error()}}
			}
		}
		run := running{a.Token, make(chan struct{})}
		started <- run
		<-run.proceed
		return Result{}
	}
	b := newRunnerBundle(t, exec)
	ctx := context.Background()
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	owner := func(token uint64) *attempt {
		var a *attempt
		if err := b.r.call(ctx, func(time.Time) { a = b.r.attempts[token] }); err != nil {
			t.Fatal(err)
		}
		if a == nil {
			t.Fatalf("no owner for token %d", token)
		}
		return a
	}

	first := <-started
	firstOwner := owner(first.token)
	close(first.proceed)
	if err := b.r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	s := b.app.settlements()
	if len(s) != 1 {
		t.Fatalf("%d settlements after the first attempt, want 1", len(s))
	}
	retry, ok := s[0].Body.(*record.AttemptRetryScheduled)
	if !ok {
		t.Fatalf("first settlement %T, want attempt_retry_scheduled", s[0].Body)
	}
	if retry.Cleanup != CodeScopeCleanupFailed || retry.Scope != scopeFailed {
		t.Fatalf("first settlement cleanup %q scope %q", retry.Cleanup, retry.Scope)
	}

	b.clk.Set(time.Unix(0, retry.AvailableAt))
	second := <-started
	if second.token == first.token {
		t.Fatal("the retry reused the first attempt's token")
	}
	if owner(second.token) != firstOwner {
		t.Fatal("the retry's owner is a new one: settled owners are not reused")
	}
	close(second.proceed)
	if err := b.r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	s = b.app.settlements()
	if len(s) != 2 {
		t.Fatalf("%d settlements after the retry, want 2", len(s))
	}
	ok2, isSuccess := s[1].Body.(*record.AttemptSucceeded)
	if !isSuccess {
		t.Fatalf("second settlement %T, want attempt_succeeded", s[1].Body)
	}
	if o := ok2.Outcome; o.Token != second.token || o.Cleanup != "" || o.Scope != scopeClosed ||
		o.Execution != executionReturned || !o.Joined {
		t.Fatalf("the retry's settlement carries the first attempt's owner: %+v", o)
	}
}
