package scheduler

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/replay"
)

// resultsBundle is a Runner on a timedAppender (each append takes
// commitTook on its clock), with HoldForResults as hold, n jobs ready on
// the default queue, "j1" to "jn" in enqueue order, and dispatch still
// off. Its executions return at once unless block holds their job's id:
// those wait for the test to close its channel.
type resultsBundle struct {
	clk     *clocktest.Clock
	app     *timedAppender
	r       *Runner
	block   map[string]chan struct{}
	setupAt int // appends made by the setup
}

func newResultsBundle(t *testing.T, hold bool, workers, n int, block ...string) *resultsBundle {
	t.Helper()
	b := &resultsBundle{clk: clocktest.New(t0), block: make(map[string]chan struct{})}
	for _, id := range block {
		b.block[id] = make(chan struct{})
	}
	b.app = &timedAppender{clk: b.clk, took: commitTook}
	ids := 0
	m := NewMachine(Config{
		Workers: workers, DeliveryTimeout: deliveryTimeout,
		NewIDFunc: func(string, time.Time) string { ids++; return "j" + strconv.Itoa(ids) },
	}, replay.New())
	b.r = NewRunner(RunnerConfig{
		Clock: b.clk, Appender: b.app, HoldForResults: hold,
		Execute: func(ctx context.Context, a *Attempt) Result {
			if c, ok := b.block[a.Job.ID]; ok {
				<-c
			}
			return Result{}
		},
	}, m)
	startRecovered(t, b.r)
	for range n {
		if err := b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
			d, _ := m.Enqueue(now, EnqueueRequest{Handler: "h", Queue: "default", Retry: defaultRetry, Payload: []byte{0x80}})
			return d, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	b.setupAt = len(b.app.kinds())
	t.Cleanup(func() {
		for _, c := range b.block {
			select {
			case <-c:
			default:
				close(c)
			}
		}
		_ = b.r.Stop(context.Background())
	})
	return b
}

// dispatch turns dispatch on.
func (b *resultsBundle) dispatch(t *testing.T) {
	t.Helper()
	if err := b.r.SetDispatch(context.Background(), true); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls the loop, without adding a caller to any batch (call, not
// Submit), until cond holds there, and fails the test if it does not
// within many passes.
func (b *resultsBundle) waitFor(t *testing.T, what string, cond func() bool) {
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
	t.Fatalf("%s: not reached; appends %v", what, b.app.kinds()[b.setupAt:])
}

// holdLoop holds the loop inside a call until release is called, which
// then waits for the call to return.
func (b *resultsBundle) holdLoop(t *testing.T) (release func()) {
	t.Helper()
	inLoop, let := make(chan struct{}), make(chan struct{})
	called := make(chan error, 1)
	go func() {
		called <- b.r.Do(context.Background(), func(time.Time) {
			close(inLoop)
			<-let
		})
	}()
	<-inLoop
	return func() {
		t.Helper()
		close(let)
		if err := <-called; err != nil {
			t.Fatal(err)
		}
	}
}

// drained reports, on the loop, that nothing runs, waits or is left to
// start.
func (b *resultsBundle) drained() bool {
	return len(b.r.attempts) == 0 && b.r.committing == nil && len(b.r.pending) == 0 && b.r.m.Inflight() == 0 &&
		len(b.r.m.State().Jobs) == 0
}

// held reports, on the loop, that the next batch waits for results.
func (b *resultsBundle) held() bool {
	return b.r.committing == nil && len(b.r.pending) > 0 && b.r.holdResults()
}

// count returns how many of kinds are kind.
func count(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

// With handlers that return sooner than a commit takes, the append after
// an acknowledgement waits for the results of the attempts it launched:
// each append carries the settlements of the attempts the one before it
// started and the starts their slots make room for, so that each worker
// slot starts an attempt every commit, not every other one.
func TestResultsHoldCarriesSettlementsWithTheStartsTheyMakeRoomFor(t *testing.T) {
	b := newResultsBundle(t, true, 2, 6)
	b.dispatch(t)
	b.waitFor(t, "drain", b.drained)
	var got [][]string
	for _, k := range b.app.kinds()[b.setupAt:] {
		got = append(got, []string{strconv.Itoa(count(k, "attempt_succeeded")), strconv.Itoa(count(k, "attempt_started"))})
	}
	want := [][]string{{"0", "2"}, {"2", "2"}, {"2", "2"}, {"2", "0"}}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Fatalf("(settlements, starts) of each append %v, want %v; appends %v", got, want, b.app.kinds()[b.setupAt:])
	}
}

// A held batch goes at once when a caller comes to wait on it: the hold
// never delays a caller.
func TestResultsHoldNeverHoldsACaller(t *testing.T) {
	b := newResultsBundle(t, true, 2, 3, "j2")
	b.dispatch(t)
	// j1 returned: its settlement and j3's start wait for j2.
	b.waitFor(t, "j1's settlement held for j2's result", b.held)
	n := len(b.app.kinds())
	done := make(chan error, 1)
	go func() {
		done <- b.r.Submit(context.Background(), func(m *Machine, now time.Time) (Decision, error) {
			return m.PauseQueue("other"), nil
		})
	}()
	waitAppends(t, b.app, n+1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	kinds := b.app.kinds()
	if last := kinds[n]; count(last, "queue_paused") != 1 || count(last, "attempt_succeeded") != 1 {
		t.Fatalf("the call's append %v, want j1's settlement held with the call's queue_paused", last)
	}
}

// A hold lasts half the commit estimate at most: when the results do not
// come, the batch goes once the clock passes it.
func TestResultsHoldEndsAfterHalfACommit(t *testing.T) {
	b := newResultsBundle(t, true, 2, 3, "j2")
	b.dispatch(t)
	b.waitFor(t, "j1's settlement held for j2's result", b.held)
	n := len(b.app.kinds())
	var until time.Time
	b.waitFor(t, "hold read", func() bool { until = b.r.rhold.until; return true })
	if d := until.Sub(b.clk.Now()); d <= 0 || d > commitTook/2 {
		t.Fatalf("hold ends in %v, want within half the commit estimate (%v)", d, commitTook/2)
	}
	// Only the loop's timer can end the hold now: nothing else wakes it.
	b.clk.Set(until)
	waitAppends(t, b.app, n+1)
	if got := b.app.kinds()[n]; count(got, "attempt_succeeded") != 1 || count(got, "attempt_started") != 1 {
		t.Fatalf("append after the hold %v, want j1's settlement and j3's start", got)
	}
}

// Results that reach the loop later than half a commit after their launch
// are not waited for: the batch after the acknowledgement goes at once.
func TestNoResultsHoldForSlowHandlers(t *testing.T) {
	b := newResultsBundle(t, true, 1, 3, "j1")
	b.dispatch(t)
	b.waitFor(t, "j1 running", func() bool { return len(b.r.attempts) == 1 && b.r.committing == nil })
	b.clk.Advance(commitTook) // j1 runs for a whole commit
	close(b.block["j1"])
	b.waitFor(t, "drain", b.drained)
	// j1's settlement and j2's start, then j2's (at once: no hold) with
	// j3's start, then j3's: the appends are the same either way, so the
	// hold itself is what is checked.
	var est, commit time.Duration
	var holds bool
	b.waitFor(t, "estimates read", func() bool {
		est, commit, holds = b.r.execEst, b.r.commitEst, b.r.mayHoldResults(1)
		return true
	})
	if 2*est < commit {
		t.Fatalf("execution estimate %v after a handler that ran %v, want at least half the commit estimate %v",
			est, commitTook, commit)
	}
	if holds {
		t.Fatal("a hold would be taken after a handler that ran longer than half a commit")
	}
}

// waitAppends waits, without waking the runner's loop, until app has made
// n appends, and fails the test if it does not within many polls.
func waitAppends(t *testing.T, app *timedAppender, n int) {
	t.Helper()
	for range 1_000_000 {
		if len(app.kinds()) >= n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("appends %v, want %d", app.kinds(), n)
}

// Once a shutdown's root is installed, nothing is held for results: the
// settlement caps shrink with the root (DL-39), and a held settlement
// would spend part of its cap waiting.
func TestDL39_NoResultsHoldUnderAShutdownRoot(t *testing.T) {
	b := newResultsBundle(t, true, 2, 3, "j2")
	b.dispatch(t)
	b.waitFor(t, "j1's settlement held for j2's result", b.held)
	n := len(b.app.kinds())
	if err := b.r.InstallRoot(context.Background(), deadlines.NewRoot(b.clk.Now(), time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitAppends(t, b.app, n+1)
	if got := b.app.kinds()[n]; count(got, "attempt_succeeded") != 1 {
		t.Fatalf("append after the root was installed %v, want j1's settlement", got)
	}
	var holds bool
	b.waitFor(t, "hold read", func() bool { holds = b.r.mayHoldResults(1); return true })
	if holds {
		t.Fatal("a hold would be taken under a shutdown root")
	}
}

// Without HoldForResults (an engine on a clock the application moves),
// nothing is held: the same drain as in
// TestResultsHoldCarriesSettlementsWithTheStartsTheyMakeRoomFor appends
// each settlement as its result comes in.
func TestNoResultsHoldUnlessEnabled(t *testing.T) {
	b := newResultsBundle(t, false, 2, 3, "j2")
	b.dispatch(t)
	// j1 returned: its settlement and j3's start go at once, without j2's.
	waitAppends(t, b.app, b.setupAt+2)
	if got := b.app.kinds()[b.setupAt+1]; count(got, "attempt_succeeded") != 1 || count(got, "attempt_started") != 1 {
		t.Fatalf("second append %v, want j1's settlement and j3's start", got)
	}
}

// The hold makes room for starts. With a worker slot still free after the
// acknowledgement's decisions, no job due waits for one: holding would
// only delay the batch, and with it any start it carries. Here 2 jobs on
// 3 slots: j1's settlement goes as soon as it is decided, without j2's.
func TestNoResultsHoldWithASlotFree(t *testing.T) {
	b := newResultsBundle(t, true, 3, 2, "j2")
	b.dispatch(t)
	waitAppends(t, b.app, b.setupAt+2)
	if got := b.app.kinds()[b.setupAt+1]; count(got, "attempt_succeeded") != 1 {
		t.Fatalf("second append %v, want j1's settlement", got)
	}
	var holds bool
	b.waitFor(t, "hold read", func() bool { holds = b.r.mayHoldResults(1); return true })
	if holds {
		t.Fatal("a hold would be taken with a worker slot free")
	}
}
