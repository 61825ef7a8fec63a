package scheduler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// memAppender acknowledges appends at once, except those holding a
// settlement while hold is set: they wait until release is closed.
type memAppender struct {
	mu      sync.Mutex
	recs    []record.Record
	hold    bool
	held    chan struct{}
	release chan struct{}
}

func (a *memAppender) Append(ctx context.Context, _ []IndexEntry, recs ...record.Record) ([]uint64, error) {
	a.mu.Lock()
	hold := a.hold
	a.mu.Unlock()
	if hold {
		for _, r := range recs {
			if outcomeOf(r.Body) != nil {
				a.held <- struct{}{}
				<-a.release
				break
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	seqs := make([]uint64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
		a.recs = append(a.recs, r)
	}
	return seqs, nil
}

func (a *memAppender) settlements() []record.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []record.Record
	for _, r := range a.recs {
		if outcomeOf(r.Body) != nil {
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
	b.r.Start()
	t.Cleanup(func() { b.r.Stop(context.Background()) })
	ctx := context.Background()
	if err := b.r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Recover(now, "run_1", "test")
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *runnerBundle) sync() {
	b.t.Helper()
	if err := b.r.Sync(context.Background()); err != nil {
		b.t.Fatal(err)
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
