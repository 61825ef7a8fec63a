package shutdown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
)

// t0 is the origin of the spec's timelines: the first initiation.
var t0 = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

// ts returns t0 + d.
func ts(d time.Duration) time.Time { return t0.Add(d) }

// ms and sec build durations the way the spec writes them.
func ms(n float64) time.Duration  { return time.Duration(n * float64(time.Millisecond)) }
func sec(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

var errBoom = errors.New("boom")

// step is the scripted behaviour of one fake call. The zero step returns
// nil at once.
type step struct {
	// block makes the call announce itself on entered and wait for a value
	// on release, or for its ctx (unless ignoreCtx) to end.
	block     bool
	ignoreCtx bool
	err       error
	panics    bool

	entered chan context.Context
	release chan error
	calls   int
}

func (s *step) init() *step {
	s.entered = make(chan context.Context, 1)
	s.release = make(chan error)
	return s
}

func (s *step) run(mu *sync.Mutex, ctx context.Context) error {
	mu.Lock()
	s.calls++
	mu.Unlock()
	if s.block {
		s.entered <- ctx
		if s.ignoreCtx {
			return <-s.release
		}
		select {
		case err := <-s.release:
			return err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if s.panics {
		panic("fake call panics")
	}
	return s.err
}

type forceCall struct {
	reason deadlines.Reason
	at     time.Time
}

// fakeEngine is an Engine whose waits follow scripted steps and whose acts
// are logged.
type fakeEngine struct {
	mu       sync.Mutex
	log      []string
	roots    []deadlines.Root
	forces   []forceCall
	closeReq []CloseRequest
	latest   []time.Time
	revokes  []forceCall
	// revoked receives the instant of each Revoke, once it is logged.
	revoked chan time.Time

	released int
	counters Counters
	// ownerCutoff computes ForceAttempts' result from the engine's root;
	// nil means root.OwnerCutoff(at), one attempt with no earlier reason.
	ownerCutoff func(root deadlines.Root, at time.Time) time.Time

	drain, await, closeEv step

	// stragglers is what Stragglers returns.
	stragglers []Diagnostic
}

var (
	_ Engine          = (*fakeEngine)(nil)
	_ StragglerLister = (*fakeEngine)(nil)
)

func (e *fakeEngine) Stragglers() []Diagnostic {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.stragglers)
}

func newFakeEngine() *fakeEngine {
	e := &fakeEngine{counters: Counters{Joined: true}, revoked: make(chan time.Time, 1)}
	e.drain.init()
	e.await.init()
	e.closeEv.init()
	return e
}

func (e *fakeEngine) note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *fakeEngine) InstallRoot(root deadlines.Root) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, "InstallRoot")
	if len(e.roots) > 0 {
		root = e.roots[len(e.roots)-1].Install(root)
	}
	e.roots = append(e.roots, root)
}

func (e *fakeEngine) root() deadlines.Root {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.roots[len(e.roots)-1]
}

func (e *fakeEngine) CloseAdmission() int {
	e.note("CloseAdmission")
	return e.released
}

func (e *fakeEngine) Drain(ctx context.Context) error {
	e.note("Drain")
	return e.drain.run(&e.mu, ctx)
}

func (e *fakeEngine) ForceAttempts(reason deadlines.Reason, at time.Time) time.Time {
	e.note("ForceAttempts")
	root := e.root()
	o := root.OwnerCutoff(at)
	if e.ownerCutoff != nil {
		o = e.ownerCutoff(root, at)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forces = append(e.forces, forceCall{reason, at})
	e.latest = append(e.latest, o)
	return o
}

func (e *fakeEngine) AwaitJoin(ctx context.Context) error {
	e.note("AwaitJoin")
	return e.await.run(&e.mu, ctx)
}

func (e *fakeEngine) Revoke(reason deadlines.Reason, at time.Time) {
	e.note("Revoke")
	e.mu.Lock()
	e.revokes = append(e.revokes, forceCall{reason, at})
	e.mu.Unlock()
	select {
	case e.revoked <- at:
	default:
	}
}

func (e *fakeEngine) CloseEvidence(ctx context.Context, req CloseRequest) error {
	e.note("CloseEvidence")
	e.mu.Lock()
	e.closeReq = append(e.closeReq, req)
	e.mu.Unlock()
	return e.closeEv.run(&e.mu, ctx)
}

func (e *fakeEngine) Counters() Counters {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, "Counters")
	return e.counters
}

func (e *fakeEngine) setCounters(n Counters) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counters = n
}

// calls returns the logged calls without InstallRoot and Counters, which
// may be called more than once.
func (e *fakeEngine) calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.log {
		if s != "InstallRoot" && s != "Counters" {
			out = append(out, s)
		}
	}
	return out
}

// fakeJournal records events. failAt makes the failAt-th Append (1-based)
// fail; failKind makes the Append of that kind fail. hold makes the first
// Append announce itself on held and wait for hold, ignoring its ctx.
type fakeJournal struct {
	mu       sync.Mutex
	events   []Event
	appends  int
	failAt   int
	failKind string
	closeErr error
	closed   int

	hold chan struct{}
	held chan struct{}
}

var _ Journal = (*fakeJournal)(nil)

func (j *fakeJournal) Append(ctx context.Context, e Event) error {
	j.mu.Lock()
	j.appends++
	n := j.appends
	j.mu.Unlock()
	if n == 1 && j.hold != nil {
		j.held <- struct{}{}
		<-j.hold
	}
	if n == j.failAt || e.Kind() == j.failKind {
		return errBoom
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
	return nil
}

func (j *fakeJournal) Close(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed++
	return j.closeErr
}

// records returns the recorded events in a compact form, e.g.
// "initiated sigterm", "started drain", "finished drain timed_out/not_attempted".
func (j *fakeJournal) records() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]string, 0, len(j.events))
	for _, e := range j.events {
		out = append(out, describe(e))
	}
	return out
}

func describe(e Event) string {
	switch e := e.(type) {
	case Initiated:
		return "initiated " + e.Trigger.String()
	case ForceRequested:
		return fmt.Sprintf("force %s at %v", e.Trigger, e.At.Sub(t0))
	case PhaseStarted:
		return "started " + e.Phase.String()
	case PhaseFinished:
		return fmt.Sprintf("finished %s %s/%s", e.Phase, e.Graceful, e.Forced)
	case ReportPublished:
		return "report " + e.Report.Completion.String()
	case Diagnostic:
		return fmt.Sprintf("debug %s %s: %s", e.Subject, e.Code, e.Message)
	}
	return fmt.Sprintf("unknown %T", e)
}

// testBundle is one coordinator over a fake engine and journal on a manual
// clock at t0.
type testBundle struct {
	t    *testing.T
	clk  *clocktest.Clock
	eng  *fakeEngine
	jrn  *fakeJournal
	opts Options
	c    *Coordinator

	mu     sync.Mutex
	closed []string // names of the owned resources etc. closed, in order
}

// setup builds a bundle; mod adjusts it (options, fakes) before New.
func setup(t *testing.T, mod func(b *testBundle)) *testBundle {
	t.Helper()
	b := &testBundle{t: t, clk: clocktest.New(t0), eng: newFakeEngine(), jrn: &fakeJournal{}}
	b.opts = Options{Clock: b.clk, Engine: b.eng, Journal: b.jrn}
	if mod != nil {
		mod(b)
	}
	c, err := New(b.opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b.c = c
	return b
}

// closer returns a CloseFunc that logs name and returns err.
func (b *testBundle) closer(name string, err error) func(context.Context) error {
	return func(context.Context) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.closed = append(b.closed, name)
		return err
	}
}

func (b *testBundle) closedNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.closed)
}

// owned hands the engine resources named names, in this order.
func (b *testBundle) owned(names ...string) {
	for _, n := range names {
		b.opts.OwnedResources = append(b.opts.OwnedResources, OwnedResource{Name: n, CloseFunc: b.closer(n, nil)})
	}
}

// finish waits for the end of phase 6 and returns the report and result.
func (b *testBundle) finish() (*Report, error) {
	b.t.Helper()
	err := b.c.Wait(context.Background())
	rep := b.c.Report()
	if rep == nil {
		b.t.Fatalf("no report after phase 6")
	}
	return rep, err
}

// entered waits until the blocking step s is called and the coordinator has
// armed its timer for it, and returns the call's ctx.
func (b *testBundle) entered(s *step) context.Context {
	b.t.Helper()
	ctx := <-s.entered
	b.clk.BlockUntil(1)
	return ctx
}

// wantNext fails unless the earliest armed timer fires at want.
func (b *testBundle) wantNext(want time.Time) {
	b.t.Helper()
	got, ok := b.clk.Next()
	if !ok || !got.Equal(want) {
		b.t.Fatalf("next timer at t0%+v (armed %v), want t0%+v", got.Sub(t0), ok, want.Sub(t0))
	}
}

func wantEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = t0%+v, want t0%+v", what, got.Sub(t0), want.Sub(t0))
	}
}

func wantSlice[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

// wantActions compares the report's actions as "component graceful/forced".
func wantActions(t *testing.T, rep *Report, want ...string) {
	t.Helper()
	got := make([]string, len(rep.Actions))
	for i, a := range rep.Actions {
		got[i] = fmt.Sprintf("%s %s/%s", a.Component, a.Graceful, a.Forced)
	}
	wantSlice(t, "actions", got, want)
}

// blockedDrain builds a bundle whose drain and attempt join block until
// released or cancelled, initiates a shutdown by trigger and waits until
// the drain was called and its timer armed. It returns the drain's ctx.
func blockedDrain(t *testing.T, trigger Trigger) (*testBundle, context.Context) {
	t.Helper()
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		b.eng.await.block = true
	})
	b.c.Initiate(trigger)
	return b, b.entered(&b.eng.drain)
}

// forcedAtFive is blockedDrain whose shutdown is forced by trigger 5 s in:
// it waits until the drain's force path joins the attempts, and returns
// that join's ctx.
func forcedAtFive(t *testing.T, trigger Trigger) (*testBundle, context.Context) {
	t.Helper()
	b, _ := blockedDrain(t, trigger)
	b.clk.Advance(5 * time.Second)
	if err := b.c.Force(trigger); err != nil {
		t.Fatalf("Force = %v", err)
	}
	return b, b.entered(&b.eng.await)
}
