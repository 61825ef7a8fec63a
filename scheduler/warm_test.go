package scheduler

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/replay"
)

// warmLead is the warm bundle's RunnerConfig.WarmLead: ten appends of a
// timedAppender.
const warmLead = 10 * commitTook

// warmBundle is a dispatching Runner over a timedAppender with
// RunnerConfig.Warm set, whose attempts return at once, and one job, "A",
// delayed by delay. Warm records the clock's instant at each call.
type warmBundle struct {
	clk *clocktest.Clock
	app *timedAppender
	r   *Runner
	due time.Time // A's available instant

	mu    sync.Mutex
	warms []time.Time
}

func newWarmBundle(t *testing.T, delay time.Duration) *warmBundle {
	t.Helper()
	b := &warmBundle{clk: clocktest.New(t0)}
	b.app = &timedAppender{clk: b.clk, took: commitTook}
	m := NewMachine(Config{Workers: 4, DeliveryTimeout: deliveryTimeout, NewIDFunc: seqIDs()}, replay.New())
	b.r = NewRunner(RunnerConfig{
		Clock: b.clk, Appender: b.app,
		Execute: func(context.Context, *Attempt) Result { return Result{} },
		Warm: func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.warms = append(b.warms, b.clk.Now())
		},
		WarmLead: warmLead,
	}, m)
	startRecovered(t, b.r)
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, delay)
	b.due = t0.Add(time.Hour)
	if err := b.r.call(context.Background(), func(time.Time) { b.due, _ = b.r.m.NextTimer() }); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *warmBundle) enqueue(t *testing.T, delay time.Duration) {
	t.Helper()
	if err := b.r.Submit(context.Background(), b.enqueueFn(delay)); err != nil {
		t.Fatal(err)
	}
}

func (b *warmBundle) enqueueFn(delay time.Duration) func(m *Machine, now time.Time) (Decision, error) {
	return func(m *Machine, now time.Time) (Decision, error) {
		d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Delay: delay, Retry: defaultRetry, Payload: []byte{0x80}})
		return d, nil
	}
}

// waitLoop polls the loop until cond holds there.
func (b *warmBundle) waitLoop(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 100_000 {
		ok := false
		if err := b.r.call(context.Background(), func(time.Time) { ok = cond() }); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%s: not reached", what)
}

// startA moves the clock to A's instant, waits for A's attempt to
// settle, and stops the runner, which waits for a warm in progress: the
// warms recorded are then all there will be.
func (b *warmBundle) startA(t *testing.T) []time.Time {
	t.Helper()
	b.clk.Set(b.due)
	b.waitLoop(t, "A settled", func() bool {
		return slices.ContainsFunc(b.app.kinds(), func(k []string) bool { return slices.Contains(k, "attempt_succeeded") })
	})
	if err := b.r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.warms)
}

// DL-7 puts attempt_started's synced append between a delayed job's
// instant and its handler: an idle runner asks for a warming sync WarmLead
// before the instant, once, and not before.
func TestWarmLeadBeforeADelayedJobsInstant(t *testing.T) {
	b := newWarmBundle(t, time.Second)
	b.clk.Set(b.due.Add(-warmLead - time.Microsecond))
	b.waitLoop(t, "warm timer armed", func() bool {
		return b.r.warmTimer != nil && b.r.warmAt.Equal(b.due.Add(-warmLead))
	})
	b.clk.Set(b.due.Add(-warmLead))
	b.waitLoop(t, "warm timer taken", func() bool { return b.r.warmTimer == nil })
	for range 100_000 {
		b.mu.Lock()
		n := len(b.warms)
		b.mu.Unlock()
		if n > 0 {
			break
		}
		runtime.Gosched()
	}
	appendsBefore := len(b.app.kinds())
	warms := b.startA(t)
	if want := []time.Time{b.due.Add(-warmLead)}; !slices.EqualFunc(warms, want, time.Time.Equal) {
		t.Fatalf("warms at %v, want one at %v (A due at %v)", warms, want, b.due)
	}
	kinds := b.app.kinds()
	if len(kinds) <= appendsBefore || kinds[appendsBefore][0] != "attempt_started" {
		t.Fatalf("appends after the warm: %v, want A's attempt_started first", kinds[appendsBefore:])
	}
}

// A journal that has just synced needs no warming: an append acknowledged
// within WarmLead of the warm's instant skips it.
func TestWarmSkippedAfterARecentAcknowledgement(t *testing.T) {
	b := newWarmBundle(t, time.Second)
	b.clk.Set(b.due.Add(-warmLead - warmLead/2))
	b.enqueue(t, time.Hour) // acknowledged at −1.5 leads + commitTook
	b.clk.Set(b.due.Add(-warmLead))
	b.waitLoop(t, "warm timer taken", func() bool { return b.r.warmTimer == nil })
	if warms := b.startA(t); len(warms) != 0 {
		t.Fatalf("warms at %v after an acknowledgement within the lead", warms)
	}
}

// While an append is in flight the device is busy: no warm.
func TestWarmSkippedWhileAnAppendIsInFlight(t *testing.T) {
	b := newWarmBundle(t, time.Second)
	b.clk.Set(b.due.Add(-3 * warmLead))
	b.app.close()
	t.Cleanup(b.app.open) // before the runner's Stop, should the test fail
	done := make(chan error, 1)
	go func() { done <- b.r.Submit(context.Background(), b.enqueueFn(time.Hour)) }()
	<-b.app.waiting
	b.clk.Set(b.due.Add(-warmLead))
	b.waitLoop(t, "warm timer taken", func() bool { return b.r.warmTimer == nil })
	b.app.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if warms := b.startA(t); len(warms) != 0 {
		t.Fatalf("warms at %v while an append was in flight", warms)
	}
}

// An instant nearer than WarmLead arms no warm: the warming sync could
// not return before it, and the start's append would wait behind it.
func TestNoWarmForAnInstantNearerThanTheLead(t *testing.T) {
	b := newWarmBundle(t, warmLead/2)
	b.waitLoop(t, "the loop armed for A", func() bool { return b.r.timer != nil })
	if err := b.r.call(context.Background(), func(time.Time) {
		if b.r.warmTimer != nil {
			t.Errorf("warm timer armed at %v for an instant %v away", b.r.warmAt, warmLead/2)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if warms := b.startA(t); len(warms) != 0 {
		t.Fatalf("warms at %v for an instant nearer than the lead", warms)
	}
}

// With dispatch off nothing will start at the instant: no warm.
func TestNoWarmWithDispatchOff(t *testing.T) {
	b := newWarmBundle(t, time.Second)
	b.waitLoop(t, "warm timer armed", func() bool { return b.r.warmTimer != nil })
	if err := b.r.SetDispatch(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(b.due.Add(-warmLead))
	b.waitLoop(t, "warm instant passed", func() bool { return b.r.warmTimer == nil || b.r.cfg.Clock.Now().After(b.r.warmAt) })
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if warms := b.startA(t); len(warms) != 0 {
		t.Fatalf("warms at %v with dispatch off", warms)
	}
}
