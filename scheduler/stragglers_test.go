package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/replay"
)

// stragglerPlan is what the execution of one attempt does: it registers
// a hook (DL-35) that announces itself on hooked and runs until unhook
// is closed or its ctx ends, if hook is set, then waits until release is
// closed and returns a success.
type stragglerPlan struct {
	hook    bool
	release chan struct{}
	hooked  chan struct{}
	unhook  chan struct{}
}

// stragglerBundle is a runnerBundle whose jobs get their own ids
// ("job_1", "job_2", ...) and handlers, and whose executions follow the
// plan of their attempt, keyed "job_1/1" (job id / attempt).
type stragglerBundle struct {
	*runnerBundle
	mu      sync.Mutex
	plans   map[string]*stragglerPlan
	started chan *Attempt
}

func newStragglerBundle(t *testing.T) *stragglerBundle {
	t.Helper()
	b := &stragglerBundle{plans: map[string]*stragglerPlan{}, started: make(chan *Attempt, 8)}
	b.runnerBundle = &runnerBundle{t: t, clk: clocktest.New(t0),
		app: &memAppender{held: make(chan struct{}, 1), release: make(chan struct{})}}
	m := NewMachine(Config{Workers: 4, DeliveryTimeout: deliveryTimeout, NewIDFunc: seqIDs()}, replay.New())
	b.r = NewRunner(RunnerConfig{Clock: b.clk, Appender: b.app, Execute: b.execute}, m)
	startRecovered(t, b.r)
	t.Cleanup(func() { // a failed test leaves nothing blocked; runs before Stop
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.plans {
			for _, c := range []chan struct{}{p.release, p.unhook} {
				select {
				case <-c:
				default:
					close(c)
				}
			}
		}
	})
	return b
}

func (b *stragglerBundle) plan(key string) *stragglerPlan {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.plans[key]
	if !ok {
		p = &stragglerPlan{release: make(chan struct{}), hooked: make(chan struct{}, 1), unhook: make(chan struct{})}
		b.plans[key] = p
	}
	return p
}

func (b *stragglerBundle) execute(ctx context.Context, a *Attempt) Result {
	p := b.plan(fmt.Sprintf("%s/%d", a.Job.ID, a.Job.Attempts))
	if p.hook {
		a.Enter("m", func(ctx context.Context, run *HookRun) error {
			p.hooked <- struct{}{}
			select {
			case <-p.unhook:
			case <-ctx.Done():
			}
			return nil
		})
	}
	b.started <- a
	<-p.release
	return Result{}
}

// enqueue enqueues a job for handler at the clock's instant, with the
// plan of its first attempt set beforehand, and returns its id.
func (b *stragglerBundle) enqueue(handler string, hook bool) string {
	b.t.Helper()
	var id string
	if err := b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
		d, got := m.Enqueue(now, EnqueueRequest{Handler: handler, Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
		id = got
		b.plan(got + "/1").hook = hook
		return d, nil
	}); err != nil {
		b.t.Fatal(err)
	}
	return id
}

// start waits for the next attempt to start and checks that it is one of
// job id.
func (b *stragglerBundle) start(id string) *Attempt {
	b.t.Helper()
	a := <-b.started
	if a.Job.ID != id {
		b.t.Fatalf("started %s, want %s", a.Job.ID, id)
	}
	return a
}

// onLoop reports cond, evaluated on the loop: the state a test relies on.
func (b *stragglerBundle) onLoop(cond func() bool) bool {
	b.t.Helper()
	ok := false
	if err := b.r.call(context.Background(), func(time.Time) { ok = cond() }); err != nil {
		b.t.Fatal(err)
	}
	return ok
}

// waitFor polls the loop until cond holds there, as resultsBundle.waitFor
// does, and fails the test if it does not within many passes.
func (b *stragglerBundle) waitFor(what string, cond func() bool) {
	b.t.Helper()
	for range 100_000 {
		if b.onLoop(cond) {
			return
		}
		runtime.Gosched()
	}
	b.t.Fatalf("%s: not reached", what)
}

// stragglerOf is the Straggler a test expects for a, Abandoned or not.
func stragglerOf(a *Attempt, abandoned bool) Straggler {
	return Straggler{Token: a.Token, JobID: a.Job.ID, Handler: a.Job.Handler, Attempt: a.Job.Attempts, Start: a.S, Abandoned: abandoned}
}

func fmtStragglers(ss []Straggler) string {
	out := "["
	for _, s := range ss {
		out += fmt.Sprintf("{token %d %s handler %s attempt %d start t0%+v abandoned %t}",
			s.Token, s.JobID, s.Handler, s.Attempt, s.Start.Sub(t0), s.Abandoned)
	}
	return out + "]"
}

// wantStragglers fails unless Stragglers returns want, field by field and
// in order.
func (b *stragglerBundle) wantStragglers(what string, want ...Straggler) {
	b.t.Helper()
	got, err := b.r.Stragglers(context.Background())
	if err != nil {
		b.t.Fatalf("%s: Stragglers: %v", what, err)
	}
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.Token == w.Token && g.JobID == w.JobID && g.Handler == w.Handler && g.Attempt == w.Attempt &&
			g.Start.Equal(w.Start) && g.Abandoned == w.Abandoned
	}
	if !same {
		b.t.Fatalf("%s: stragglers\n got %s\nwant %s", what, fmtStragglers(got), fmtStragglers(want))
	}
}

// TestSD37_StragglersNameRunningAndAbandonedAttemptsInTokenOrder pins
// [Runner.Stragglers] (SD-25, SD-37, DL-26): every attempt whose execution
// goroutine the loop has not seen return is listed once, with its token,
// job, handler, attempt number and start S, in token order, Abandoned
// once it was abandoned at its cooperative deadline C: while its owner
// still runs its cleanup hook (the attempt is then both an owner and a
// lost execution), after its owner settled it, and next to a later
// attempt of the same job. Its late return takes it off the list.
func TestSD37_StragglersNameRunningAndAbandonedAttemptsInTokenOrder(t *testing.T) {
	b := newStragglerBundle(t)
	ctx := context.Background()
	j1 := b.enqueue("h-one", true)
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	a1 := b.start(j1) // S = t0, P = 29, C = 29.25
	b.clk.Set(ts(10 * time.Second))
	j2 := b.enqueue("h-two", false)
	a2 := b.start(j2) // S = 10, P = 39
	if !(a1.Token < a2.Token) || !a2.S.Equal(ts(10*time.Second)) || a1.Job.Handler != "h-one" {
		t.Fatalf("attempts %s", fmtStragglers([]Straggler{stragglerOf(a1, false), stragglerOf(a2, false)}))
	}
	b.wantStragglers("both running", stragglerOf(a1, false), stragglerOf(a2, false))

	// DL-26: at C the owner of job 1 abandons its execution and starts its
	// hook; it is both in the owners' table and lost.
	b.clk.Set(a1.P.Add(250 * time.Millisecond))
	b.sync()
	<-b.plan(j1 + "/1").hooked
	if !b.onLoop(func() bool {
		o, ok := b.r.attempts[a1.Token]
		return ok && o.abandoned && !o.returned && o.hook != nil && b.r.lost[a1.Token] != nil
	}) {
		t.Fatal("job 1 is not an abandoned owner running its hook")
	}
	b.wantStragglers("abandoned in cleanup", stragglerOf(a1, true), stragglerOf(a2, false))

	// Its hook returns: the owner settles the token (an interruption,
	// retried), and only the lost execution is left of it.
	close(b.plan(j1 + "/1").unhook)
	b.waitFor("job 1 settled", func() bool { _, ok := b.r.attempts[a1.Token]; return !ok })
	b.sync()
	var retryAt time.Time
	if !b.onLoop(func() bool {
		retryAt = time.Unix(0, b.r.m.State().Jobs[j1].AvailableAt)
		return b.r.lost[a1.Token] != nil
	}) {
		t.Fatal("job 1's execution is not lost")
	}
	b.wantStragglers("abandoned and settled", stragglerOf(a1, true), stragglerOf(a2, false))

	// The retry of job 1 runs while its first attempt is still lost: two
	// stragglers of one job, told apart by token, attempt and start.
	b.clk.Set(retryAt)
	b.sync()
	a3 := b.start(j1)
	if a3.Job.Attempts != 2 || !a3.S.Equal(retryAt) || !(a3.Token > a2.Token) {
		t.Fatalf("retry %s", fmtStragglers([]Straggler{stragglerOf(a3, false)}))
	}
	b.wantStragglers("with the retry", stragglerOf(a1, true), stragglerOf(a2, false), stragglerOf(a3, false))

	// DL-26: the late return is fenced; the execution is no straggler.
	close(b.plan(j1 + "/1").release)
	if err := b.r.WaitQuarantine(ctx); err != nil {
		t.Fatal(err)
	}
	b.wantStragglers("late return", stragglerOf(a2, false), stragglerOf(a3, false))

	close(b.plan(j2 + "/1").release)
	close(b.plan(j1 + "/2").release)
	if err := b.r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	b.wantStragglers("idle")
}

// TestSD37_StragglersLeaveOutReturnedHandlers: Stragglers names the
// attempts whose handlers have not returned (SD-37), not those whose
// token is not settled yet. A handler that returned is left out while its
// cleanup hook runs and while its settlement's append is unacknowledged;
// the report counts the latter as unresolved, if it comes to that, not as
// goroutines not returned (SD-25).
func TestSD37_StragglersLeaveOutReturnedHandlers(t *testing.T) {
	b := newStragglerBundle(t)
	ctx := context.Background()
	jr := b.enqueue("running", false)
	jc := b.enqueue("in-cleanup", true)
	js := b.enqueue("settling", false)
	if err := b.r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	as := map[string]*Attempt{}
	for range 3 {
		a := <-b.started
		as[a.Job.ID] = a
	}
	ar, ac, at := as[jr], as[jc], as[js]
	if ar == nil || ac == nil || at == nil {
		t.Fatalf("started %v", as)
	}
	b.wantStragglers("all running", stragglerOf(ar, false), stragglerOf(ac, false), stragglerOf(at, false))

	// The handler of jc returns; its owner runs its hook.
	close(b.plan(jc + "/1").release)
	<-b.plan(jc + "/1").hooked
	if !b.onLoop(func() bool { o, ok := b.r.attempts[ac.Token]; return ok && o.returned && o.hook != nil }) {
		t.Fatal("jc is not an owner running its hook")
	}
	b.wantStragglers("one in cleanup", stragglerOf(ar, false), stragglerOf(at, false))

	// The handler of js returns; its settlement's append is held.
	b.app.mu.Lock()
	b.app.hold = true
	b.app.mu.Unlock()
	close(b.plan(js + "/1").release)
	<-b.app.held
	if n := len(b.app.settlements()); n != 0 {
		t.Fatalf("%d settlements acknowledged", n)
	}
	b.wantStragglers("one settling", stragglerOf(ar, false))

	b.app.mu.Lock()
	b.app.hold = false
	b.app.mu.Unlock()
	close(b.app.release)
	close(b.plan(jc + "/1").unhook)
	close(b.plan(jr + "/1").release)
	if err := b.r.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(b.app.settlements()); n != 3 {
		t.Fatalf("%d settlements, want 3", n)
	}
	b.wantStragglers("idle")
}
