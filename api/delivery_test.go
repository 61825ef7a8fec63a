package api_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// The tests of spec/delivery.md, DL-1..DL-46, driven through the real
// engine under a manual clock. Instants in comments are seconds after the
// attempt's origin unless marked.

// ms and sec build durations of fractional milliseconds and seconds.
func ms(f float64) time.Duration  { return time.Duration(f * float64(time.Millisecond)) }
func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// probe is a handler driven by the test: it reports its Delivery when it
// starts, then runs whatever action the test sends to that attempt, at
// the instant the test chooses. Without an action it ignores its
// cancellation.
type probe struct {
	started chan *api.Delivery
	mu      sync.Mutex
	ctxs    map[*api.Delivery]context.Context
	acts    map[*api.Delivery]chan func(context.Context) error
	latest  *api.Delivery
}

func newProbe() *probe {
	return &probe{started: make(chan *api.Delivery, 16), ctxs: map[*api.Delivery]context.Context{},
		acts: map[*api.Delivery]chan func(context.Context) error{}}
}

func (p *probe) handler() api.HandlerFunc[msg] {
	return func(ctx context.Context, d *api.Delivery, in msg) error {
		ch := make(chan func(context.Context) error, 1)
		p.mu.Lock()
		p.ctxs[d], p.acts[d], p.latest = ctx, ch, d
		p.mu.Unlock()
		p.started <- d
		return (<-ch)(ctx)
	}
}

// ctx returns the context the probe's attempt d received.
func (p *probe) ctx(d *api.Delivery) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctxs[d]
}

// send makes attempt d run f.
func (p *probe) send(d *api.Delivery, f func(context.Context) error) {
	p.mu.Lock()
	ch := p.acts[d]
	p.mu.Unlock()
	ch <- f
}

// do makes the latest attempt run f; ret makes it return err.
func (p *probe) do(f func(context.Context) error) {
	p.mu.Lock()
	d := p.latest
	p.mu.Unlock()
	p.send(d, f)
}

func (p *probe) ret(err error) { p.do(func(context.Context) error { return err }) }

// free lets every still-running probe return nil when the test ends.
func (p *probe) free(t *testing.T) {
	t.Cleanup(p.returnAll)
}

// workProbe registers a new probe as the handler "work" of b's engine,
// with opts, and lets its attempts return nil when the test ends.
func workProbe(t *testing.T, b *testBundle, opts ...api.JobOption) *probe {
	t.Helper()
	p := newProbe()
	p.free(t)
	if err := api.Handle(b.eng, "work", p.handler(), opts...); err != nil {
		t.Fatal(err)
	}
	return p
}

// returnAll makes every attempt of the probe still blocked return nil.
func (p *probe) returnAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ch := range p.acts {
		select {
		case ch <- func(context.Context) error { return nil }:
		default:
		}
	}
}

// returnAbandoned makes every attempt of the probe still blocked return,
// after the engine abandoned them, and waits until the engine saw them
// return: a graceful shutdown waits for abandoned goroutines until G
// (SD-13), so a test that reopens lets them return first.
func (b *testBundle) returnAbandoned(p *probe) {
	b.t.Helper()
	p.returnAll()
	if err := api.WaitQuarantine(b.eng); err != nil {
		b.t.Fatal(err)
	}
}

// moveTo moves the clock to origin+d and waits until the engine acted on
// every deadline due then, without waiting for blocked handlers.
func (b *testBundle) moveTo(origin time.Time, d time.Duration) {
	b.t.Helper()
	target := origin.Add(d)
	if target.Before(b.clk.Now()) {
		b.t.Fatalf("moveTo %v: the clock is at %v already", target, b.clk.Now())
	}
	b.clk.Set(target)
	if err := api.Sync(b.eng); err != nil {
		b.t.Fatalf("sync: %v", err)
	}
}

// settlement returns the one settlement record of job id, failing if there
// is not exactly one per token (DL-38).
func (b *testBundle) settlements(id string) []journalRecord {
	b.t.Helper()
	var out []journalRecord
	seen := map[uint64]bool{}
	for _, r := range b.records() {
		o := outcome(r)
		if o == nil || o.JobID != id {
			continue
		}
		if seen[o.Token] {
			b.t.Fatalf("DL-38: token %d settled twice", o.Token)
		}
		seen[o.Token] = true
		out = append(out, r)
	}
	return out
}

func (b *testBundle) lastSettlement(id string) (journalRecord, *record.Outcome) {
	b.t.Helper()
	s := b.settlements(id)
	if len(s) == 0 {
		b.t.Fatalf("job %s has no settlement", id)
	}
	return s[len(s)-1], outcome(s[len(s)-1])
}

func outcome(r journalRecord) *record.Outcome {
	switch s := r.Body.(type) {
	case *record.AttemptSucceeded:
		return &s.Outcome
	case *record.AttemptRetryScheduled:
		return &s.Outcome
	case *record.AttemptBuried:
		return &s.Outcome
	case *record.AttemptReleased:
		return &s.Outcome
	}
	return nil
}

// attemptsStarted returns the attempt_started records of job id.
func (b *testBundle) attemptsStarted(id string) []*record.AttemptStarted {
	var out []*record.AttemptStarted
	for _, r := range b.records() {
		if s, ok := r.Body.(*record.AttemptStarted); ok && s.JobID == id {
			out = append(out, s)
		}
	}
	return out
}

func wantReason(t *testing.T, d *api.Delivery, reason api.Reason, at time.Time) {
	t.Helper()
	got, gotAt, ok := d.Cancellation().Reason()
	if !ok || got != reason || !gotAt.Equal(at) {
		t.Fatalf("reason %v at %v (%v), want %v at %v", got, gotAt, ok, reason, at)
	}
	if !d.Cancellation().IsCancelled() {
		t.Fatal("IsCancelled is false with a reason recorded")
	}
}

func wantOutcome(t *testing.T, r journalRecord, kind record.Kind, code, reason string, reasonAt time.Time, joined bool) {
	t.Helper()
	o := outcome(r)
	if r.Kind() != kind || o.Code != code || o.Reason != reason || o.Joined != joined {
		t.Fatalf("settlement %s code %q reason %q joined %v, want %s %q %q %v (%+v)",
			r.Kind(), o.Code, o.Reason, o.Joined, kind, code, reason, joined, *o)
	}
	if reason != "" && o.ReasonAt != reasonAt.UnixNano() {
		t.Fatalf("reason_at %v, want %v", time.Unix(0, o.ReasonAt).UTC(), reasonAt)
	}
}

// closer is an io.Closer for the attempt scope.
type closer func() error

func (c closer) Close() error { return c() }

// ---------------------------------------------------------------------------
// §2 Configuration

// DL-1: journal records store the engine clock's instants as Unix
// nanoseconds; deadlines are absolute instants.
func TestDL1_RecordsCarryClockInstants(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	b.clk.Set(t0.Add(ms(1.5)))
	id := b.enqueue("work", msg{})
	b.start()
	d := <-p.started
	st := b.attemptsStarted(id)[0]
	s := t0.Add(ms(1.5))
	if st.StartAt != s.UnixNano() || st.HardAt != s.Add(30*time.Second).UnixNano() || st.NormalAt != s.Add(29*time.Second).UnixNano() {
		t.Fatalf("attempt_started %+v", st)
	}
	if !d.Deadline().At().Equal(s.Add(29 * time.Second)) {
		t.Fatalf("deadline %v", d.Deadline().At())
	}
	p.ret(nil)
	b.idle()
	b.checkReplay()
}

// DL-2: DeliveryTimeout is validated at every boundary with an error naming
// the field; absent means 30 s.
func TestDL2_DeliveryTimeoutRange(t *testing.T) {
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{{ms(99), false}, {ms(100), true}, {900 * time.Second, true}, {900*time.Second + time.Millisecond, false}} {
		_, err := api.Open(context.Background(), api.Options{FS: setup(t, nil).fs, Dir: "x", DeliveryTimeout: c.d})
		if (err == nil) != c.ok || (err != nil && (!errors.Is(err, api.ErrInvalidOption) || !strings.Contains(err.Error(), "Options.DeliveryTimeout"))) {
			t.Fatalf("Options.DeliveryTimeout %v: %v", c.d, err)
		}
		_, err = api.Open(context.Background(), api.Options{FS: setup(t, nil).fs, Dir: "x",
			QueueOptions: map[string]api.QueueOptions{"mail": {DeliveryTimeout: c.d}}})
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), `Options.QueueOptions["mail"].DeliveryTimeout`)) {
			t.Fatalf("queue DeliveryTimeout %v: %v", c.d, err)
		}
	}
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.DeliveryTimeout(ms(99))); !errors.Is(err, api.ErrInvalidOption) || !strings.Contains(err.Error(), "DeliveryTimeout") {
		t.Fatalf("job DeliveryTimeout: %v", err)
	}
	err := b.eng.Register(api.NewWorkflow("w").Then("s", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }, api.DeliveryTimeout(ms(99))))
	if !errors.Is(err, api.ErrInvalidOption) || !strings.Contains(err.Error(), "DeliveryTimeout") {
		t.Fatalf("step DeliveryTimeout: %v", err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	b.idle()
	if st := b.attemptsStarted(id)[0]; st.HardAt-st.StartAt != int64(30*time.Second) {
		t.Fatalf("absent DeliveryTimeout: H - S = %v", time.Duration(st.HardAt-st.StartAt))
	}
}

// DL-3: SettlementTimeout is 1 ms..60 s; zero means absent (5 s).
func TestDL3_SettlementTimeoutRange(t *testing.T) {
	fs := setup(t, nil).fs
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{{-time.Millisecond, false}, {time.Millisecond, true}, {60 * time.Second, true}, {60*time.Second + time.Millisecond, false}} {
		e, err := api.Open(context.Background(), api.Options{FS: fs, Dir: fmt.Sprint("s", c.d), SettlementTimeout: c.d})
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "Options.SettlementTimeout")) {
			t.Fatalf("SettlementTimeout %v: %v", c.d, err)
		}
		if e != nil {
			e.Close(context.Background())
		}
	}
}

// DL-4: retry fields may be set engine-wide, per queue, per handler and per
// job, each validated naming the field, and resolve job → handler → queue
// → engine.
func TestDL4_RetryFieldsResolveJobHandlerQueueEngine(t *testing.T) {
	fs := setup(t, nil).fs
	for _, c := range []struct {
		q     api.QueueOptions
		field string
	}{
		{api.QueueOptions{MaxAttempts: 101}, `Options.QueueOptions["mail"].MaxAttempts`},
		{api.QueueOptions{Backoff: &api.BackoffPolicy{Base: time.Millisecond}}, `Options.QueueOptions["mail"].Backoff.`},
		{api.QueueOptions{Middleware: []api.Middleware{nil}}, `Options.QueueOptions["mail"].Middleware[0]`},
	} {
		_, err := api.Open(context.Background(), api.Options{FS: fs, Dir: "x", QueueOptions: map[string]api.QueueOptions{"mail": c.q}})
		if !errors.Is(err, api.ErrInvalidOption) || !strings.Contains(err.Error(), c.field) {
			t.Fatalf("%+v: %v, want a field %s", c.q, err, c.field)
		}
	}
	b := setup(t, func(o *api.Options) {
		o.MaxAttempts = 2
		o.QueueOptions = map[string]api.QueueOptions{"mail": {MaxAttempts: 5, DeliveryTimeout: 4 * time.Second,
			Backoff: &api.BackoffPolicy{Kind: api.BackoffFixed, Base: 7 * time.Second}}}
	})
	if err := api.Handle(b.eng, "plain", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "mailer", okHandler(nil), api.OnQueue("mail"), api.MaxAttempts(7)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		handler string
		opts    []api.JobOption
		max     int
		timeout time.Duration
		base    time.Duration // of the backoff
	}{
		{"plain", nil, 2, 30 * time.Second, time.Second},                                                                   // engine
		{"plain", []api.JobOption{api.OnQueue("mail")}, 5, 4 * time.Second, 7 * time.Second},                               // queue
		{"mailer", nil, 7, 4 * time.Second, 7 * time.Second},                                                               // handler over queue
		{"mailer", []api.JobOption{api.MaxAttempts(9), api.DeliveryTimeout(time.Second)}, 9, time.Second, 7 * time.Second}, // job
		{"mailer", []api.JobOption{api.OnQueue("bulk")}, 7, 30 * time.Second, time.Second},                                 // job's queue over handler's
	} {
		id := b.enqueue(c.handler, msg{}, c.opts...)
		b.start()
		b.idle()
		for _, r := range b.records() {
			if e, ok := r.Body.(*record.JobEnqueued); ok && e.JobID == id &&
				(int(e.Retry.MaxAttempts) != c.max || time.Duration(e.Retry.BaseNanos) != c.base) {
				t.Fatalf("%s %d options: MaxAttempts %d backoff base %v, want %d %v", c.handler, len(c.opts),
					e.Retry.MaxAttempts, time.Duration(e.Retry.BaseNanos), c.max, c.base)
			}
		}
		if st := b.attemptsStarted(id)[0]; time.Duration(st.HardAt-st.StartAt) != c.timeout {
			t.Fatalf("%s %d options: timeout %v, want %v", c.handler, len(c.opts), time.Duration(st.HardAt-st.StartAt), c.timeout)
		}
	}
	b.checkReplay()
}

// DL-5: the chosen delay and available_at are written in the settlement.
func TestDL5_ChosenDelayIsRecorded(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "fail", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Retryable("NOPE", nil)
	}); err != nil {
		t.Fatal(err)
	}
	b.enqueue("fail", msg{})
	b.start()
	b.idle()
	b.advance(time.Second)
	var delays []time.Duration
	for _, r := range b.records() {
		if s, ok := r.Body.(*record.AttemptRetryScheduled); ok {
			delays = append(delays, time.Duration(s.DelayNanos))
			if s.AvailableAt != r.At+s.DelayNanos {
				t.Fatalf("available_at %d, want %d + %d", s.AvailableAt, r.At, s.DelayNanos)
			}
		}
	}
	if fmt.Sprint(delays) != "[1s 2s]" {
		t.Fatalf("delays %v, want [1s 2s] (DL-5 defaults)", delays)
	}
	b.checkReplay()
}

// DL-6: the worked example. MaxAttempts 3: #1 times out (consumed 1), #2 is
// interrupted by force (released, still 1), after a restart #3 and #4 fail
// (consumed 2, then 3) and the job is buried.
func TestDL6_WhatConsumesAnAttempt(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 4 * time.Second })
	p := newProbe()
	p.free(t)
	register := func(e *api.Engine) {
		if err := api.Handle(e, "work", p.handler()); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	origin := b.clk.Now()
	b.moveTo(origin, sec(3.25)) // P = 3, C = 3.25: abandoned
	b.idle()
	if j := b.status(id); j.Consumed != 1 || j.LastCode != api.CodeDeliveryTimeout {
		t.Fatalf("#1: %+v", j)
	}
	b.moveTo(origin, sec(4.25)) // retry after 1 s
	<-p.started
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	b.moveTo(origin, sec(4.5)) // C = at + 250 ms
	b.idle()
	if j := b.status(id); j.Consumed != 1 || j.Status != api.JobPending {
		t.Fatalf("#2 released: %+v", j)
	}
	b.returnAbandoned(p)
	b.reopen(register)
	b.start()
	for range 2 {
		<-p.started
		p.ret(api.Retryable("BAD", nil))
		b.idle()
		b.moveTo(b.clk.Now(), 2*time.Second)
	}
	j := b.wantStatus(id, api.JobBuried)
	if j.Consumed != 3 || j.Attempts != 4 {
		t.Fatalf("%+v", j)
	}
	var kinds []string
	for _, r := range b.settlements(id) {
		kinds = append(kinds, r.Kind().String())
	}
	if want := "attempt_retry_scheduled attempt_released attempt_retry_scheduled attempt_buried"; strings.Join(kinds, " ") != want {
		t.Fatalf("settlements %v, want %s", kinds, want)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// §3 The common budget

// DL-7: S is the instant the attempt acquires its worker slot; time spent
// waiting for a slot does not count.
func TestDL7_StartIsSlotAcquisition(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	p := workProbe(t, b)
	b.enqueue("work", msg{N: 1})
	second := b.enqueue("work", msg{N: 2})
	b.start()
	<-p.started
	b.moveTo(t0, 5*time.Second)
	p.ret(nil)
	<-p.started
	st := b.attemptsStarted(second)[0]
	if want := t0.Add(5 * time.Second); st.StartAt != want.UnixNano() || st.HardAt != want.Add(30*time.Second).UnixNano() {
		t.Fatalf("attempt_started %+v, want S = %v", st, want)
	}
	p.ret(nil)
	b.idle()
}

// DL-8, DL-12: every stage sees one absolute deadline; the Afters of a
// slow pipeline get what is left, not a fresh timeout.
func TestDL8_DL12_OneDeadlineForThePipeline(t *testing.T) {
	var seen []string
	noted := make(chan struct{}, 3)
	note := func(stage string, ctx context.Context, d *api.Delivery) {
		dl, _ := ctx.Deadline()
		seen = append(seen, fmt.Sprintf("%s:%v:%v:%v", stage, d.Deadline().At().Sub(t0), dl.Sub(t0), d.Deadline().Remaining()))
		noted <- struct{}{}
	}
	gate := make(chan struct{})
	mw := api.MiddlewareFuncs{
		Label:      "slow",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error { note("before", ctx, d); <-gate; return nil },
		AfterFunc:  func(ctx context.Context, d *api.Delivery, err error) error { note("after", ctx, d); return nil },
	}
	b := setup(t, func(o *api.Options) { o.Middleware = []api.Middleware{mw} })
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		note("handler", ctx, d)
		<-gate
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.enqueue("work", msg{})
	b.start()
	<-noted
	b.clk.Set(t0.Add(10 * time.Second)) // Before takes 10 s
	gate <- struct{}{}
	<-noted
	b.clk.Set(t0.Add(28 * time.Second)) // the handler 18 s
	gate <- struct{}{}
	<-noted
	b.idle()
	want := []string{"before:29s:29s:29s", "handler:29s:29s:19s", "after:29s:29s:1s"}
	if !slices.Equal(seen, want) {
		t.Fatalf("stages saw %v, want %v", seen, want)
	}
}

// DL-9: R = min((H − S)/4, 1 s), P = H − R, recorded at start.
func TestDL9_ReserveAndNormalCutoff(t *testing.T) {
	for _, c := range []struct{ t, p time.Duration }{
		{30 * time.Second, 29 * time.Second}, {4 * time.Second, 3 * time.Second},
		{2 * time.Second, ms(1500)}, {ms(100), ms(75)},
	} {
		b := setup(t, nil)
		if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
			t.Fatal(err)
		}
		id := b.enqueue("work", msg{}, api.DeliveryTimeout(c.t))
		b.start()
		b.idle()
		if st := b.attemptsStarted(id)[0]; time.Duration(st.NormalAt-st.StartAt) != c.p {
			t.Fatalf("T %v: P − S = %v, want %v", c.t, time.Duration(st.NormalAt-st.StartAt), c.p)
		}
	}
}

// DL-10, DL-12: a root caps a running attempt's budget at once; a later
// cap changes nothing; the handler deadline follows min(P, G).
func TestDL10_DL12_RootCapsOnlyShrink(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	b.clk.Set(t0.Add(-10 * time.Second)) // S = −10, T = 50: P = 39
	b.enqueue("work", msg{}, api.DeliveryTimeout(50*time.Second))
	b.start()
	d := <-p.started
	if got := d.Deadline().At().Sub(t0); got != 39*time.Second {
		t.Fatalf("D before the root %v, want 39s", got)
	}
	b.moveTo(t0, 0)
	if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// H 40 → 30, P 39 → 29, G = 28: D = 28 (DL-12 example 2).
	if got := d.Deadline().At().Sub(t0); got != 28*time.Second {
		t.Fatalf("D after the root %v, want 28s", got)
	}
	if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := d.Deadline().At().Sub(t0); got != 28*time.Second {
		t.Fatalf("D after a later root %v, want 28s: caps only shrink", got)
	}
	b.moveTo(t0, 28*time.Second)
	wantReason(t, d, api.ReasonShutdownDeadline, t0.Add(28*time.Second))
}

// DL-12 example 1: Remaining is max(0, D − now).
func TestDL12_RemainingNeverNegative(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	b.enqueue("work", msg{})
	b.start()
	d := <-p.started
	b.moveTo(t0, sec(28.5))
	if r := d.Deadline().Remaining(); r != ms(500) {
		t.Fatalf("at 28.5 s Remaining %v", r)
	}
	b.moveTo(t0, sec(29.2))
	if r := d.Deadline().Remaining(); r != 0 {
		t.Fatalf("at 29.2 s Remaining %v", r)
	}
}

// DL-13: budget checks are point-in-time; a handler refuses work with a
// typed error carrying a stable code.
func TestDL13_BudgetChecksArePointInTime(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	p := workProbe(t, b)
	check := func(ctx context.Context, d *api.Delivery) error {
		if d.Cancellation().IsCancelled() || d.Deadline().Remaining() == 0 {
			return api.Retryable("WORK_INTERRUPTED", nil)
		}
		return nil
	}
	id := b.enqueue("work", msg{})
	b.start()
	d := <-p.started
	if err := check(b.ctx, d); err != nil {
		t.Fatalf("budget left at S: %v", err)
	}
	b.moveTo(t0, ms(1500))
	if err := check(b.ctx, d); err == nil {
		t.Fatal("no budget at P")
	}
	p.do(func(ctx context.Context) error { return check(ctx, d) })
	b.idle()
	r, _ := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, "WORK_INTERRUPTED", "delivery_timeout", t0.Add(ms(1500)), true)
}

// ---------------------------------------------------------------------------
// §4 The cancellation signal

// DL-14: user code gets a read-only view: a done channel, IsCancelled and
// Reason, and nothing that cancels.
func TestDL14_ReadOnlyView(t *testing.T) {
	var names []string
	ty := reflect.TypeOf(api.Cancellation{})
	for i := range ty.NumMethod() {
		names = append(names, ty.Method(i).Name)
	}
	if fmt.Sprint(names) != "[Done IsCancelled Reason]" {
		t.Fatalf("Cancellation offers %v", names)
	}
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("REFUSED", errors.New("no"))
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	b.idle()
	r, o := b.lastSettlement(id)
	if r.Kind() != record.KindAttemptBuried || o.Code != "REFUSED" || o.Class != "permanent" {
		t.Fatalf("%s %+v", r.Kind(), *o)
	}
}

// DL-15: the five reasons, each recorded by its own path.
func TestDL15_FiveReasons(t *testing.T) {
	cases := []struct {
		name  string
		cause func(b *testBundle)
		want  api.Reason
		at    time.Duration
	}{
		{"delivery_timeout", func(b *testBundle) { b.moveTo(t0, 29*time.Second) }, api.ReasonDeliveryTimeout, 29 * time.Second},
		{"shutdown_deadline", func(b *testBundle) {
			if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, 10*time.Second)); err != nil {
				b.t.Fatal(err)
			}
			b.moveTo(t0, 8*time.Second)
		}, api.ReasonShutdownDeadline, 8 * time.Second},
		{"forced_shutdown", func(b *testBundle) { b.moveTo(t0, time.Second); api.Force(b.eng, api.ReasonForcedShutdown) }, api.ReasonForcedShutdown, time.Second},
		{"runtime_failure", func(b *testBundle) { b.moveTo(t0, time.Second); api.Force(b.eng, api.ReasonRuntimeFailure) }, api.ReasonRuntimeFailure, time.Second},
		{"runtime_cancellation", func(b *testBundle) { b.moveTo(t0, time.Second); api.Force(b.eng, deadlines.ReasonNone) }, api.ReasonRuntimeCancellation, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			p := workProbe(t, b)
			b.enqueue("work", msg{})
			b.start()
			d := <-p.started
			c.cause(b)
			wantReason(t, d, c.want, t0.Add(c.at))
			var cr *api.CancelReason
			if err := context.Cause(p.ctx(d)); !errors.As(err, &cr) || cr.Reason != c.want {
				t.Fatalf("context cause %v", err)
			}
		})
	}
}

// DL-16: the first reason sticks and is stamped with the deadline
// instant, even when the engine observes it later; a later force reaches
// only the attempts without a reason, and a later timeout changes nothing.
func TestDL16_FirstReasonSticks(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	b.enqueue("work", msg{N: 1}, api.DeliveryTimeout(2*time.Second))
	b.enqueue("work", msg{N: 2}, api.DeliveryTimeout(4*time.Second))
	b.start()
	da, db := <-p.started, <-p.started
	if da.Deadline().At().After(db.Deadline().At()) {
		da, db = db, da
	}
	// Published before anyone is woken: a waiter finds the reason set.
	woke := make(chan error, 1)
	go func() {
		<-da.Cancellation().Done()
		if _, _, ok := da.Cancellation().Reason(); !ok {
			woke <- errors.New("woken before the reason was stored")
			return
		}
		woke <- nil
	}()
	b.moveTo(t0, ms(1510)) // P = 1.5 s, observed 10 ms late
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	wantReason(t, da, api.ReasonDeliveryTimeout, t0.Add(ms(1500)))
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	wantReason(t, da, api.ReasonDeliveryTimeout, t0.Add(ms(1500)))
	wantReason(t, db, api.ReasonForcedShutdown, t0.Add(ms(1510)))
	if err := api.Force(b.eng, api.ReasonRuntimeFailure); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, 3*time.Second) // B's own P passes
	wantReason(t, db, api.ReasonForcedShutdown, t0.Add(ms(1510)))
}

// DL-17: an attempt that times out never cancels a sibling.
func TestDL17_SiblingsAreIsolated(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	slow := b.enqueue("work", msg{N: 1}, api.DeliveryTimeout(ms(100)))
	fast := b.enqueue("work", msg{N: 2}, api.DeliveryTimeout(time.Second))
	b.start()
	d1, d2 := <-p.started, <-p.started
	if d1.JobID() != slow {
		d1, d2 = d2, d1
	}
	b.moveTo(t0, ms(81.25)) // slow: P = 75 ms, C = 81.25 ms
	if d2.Cancellation().IsCancelled() {
		t.Fatal("a sibling's timeout cancelled another attempt")
	}
	b.moveTo(t0, ms(200))
	p.send(d2, func(ctx context.Context) error { d2.SetValue("answer", 42); return nil })
	b.idle()
	r, _ := b.lastSettlement(slow)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, api.CodeDeliveryTimeout, "delivery_timeout", t0.Add(ms(75)), false)
	r, _ = b.lastSettlement(fast)
	wantOutcome(t, r, record.KindAttemptSucceeded, "", "", time.Time{}, true)
}

// DL-18: at N = min(P, G) the engine records shutdown_deadline when
// G <= P (ties go to shutdown) and delivery_timeout otherwise.
func TestDL18_WhichReasonFires(t *testing.T) {
	for _, c := range []struct {
		name  string
		total time.Duration // root from t0; the attempt has S = 0, T = 30 s
		want  api.Reason
		at    time.Duration
	}{
		{"tie_goes_to_shutdown", time.Second, api.ReasonShutdownDeadline, ms(750)}, // H = 1, P = 0.75, G = 0.75
		{"shutdown_first", 30 * time.Second, api.ReasonShutdownDeadline, 28 * time.Second},
		{"timeout_first", time.Hour, api.ReasonDeliveryTimeout, 29 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			p := workProbe(t, b)
			b.enqueue("work", msg{})
			b.start()
			d := <-p.started
			if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, c.total)); err != nil {
				t.Fatal(err)
			}
			b.moveTo(t0, c.at-1)
			if d.Cancellation().IsCancelled() {
				t.Fatal("cancelled before N")
			}
			b.moveTo(t0, c.at)
			wantReason(t, d, c.want, t0.Add(c.at))
		})
	}
	// Force publishes what deadlines.ForceReason chooses, synchronously.
	root := deadlines.NewRoot(t0, 30*time.Second)
	if deadlines.ForceReason(true, root, t0) != api.ReasonForcedShutdown ||
		deadlines.ForceReason(false, root, t0.Add(28*time.Second)) != api.ReasonShutdownDeadline ||
		deadlines.ForceReason(false, root, t0) != api.ReasonRuntimeFailure {
		t.Fatal("ForceReason")
	}
}

// DL-19, DL-43: closing admission cancels nothing and records no reason;
// work that was never started is not run, appends nothing, and runs after
// the next start.
func TestDL19_DL43_AdmissionClosureIsNotCancellation(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	p := newProbe()
	p.free(t)
	register := func(e *api.Engine) {
		if err := api.Handle(e, "work", p.handler()); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	first := b.enqueue("work", msg{N: 1})
	second := b.enqueue("work", msg{N: 2})
	b.start()
	d := <-p.started
	if err := api.CloseAdmission(b.eng); err != nil {
		t.Fatal(err)
	}
	if d.Cancellation().IsCancelled() {
		t.Fatal("DL-19: closing admission cancelled a running attempt")
	}
	p.ret(nil)
	b.idle()
	r, o := b.lastSettlement(first)
	if r.Kind() != record.KindAttemptSucceeded || o.Reason != "" {
		t.Fatalf("DL-19: %s reason %q", r.Kind(), o.Reason)
	}
	if n := len(b.attemptsStarted(second)); n != 0 {
		t.Fatalf("DL-43: never-started work got %d attempt_started", n)
	}
	b.wantStatus(second, api.JobPending)
	b.reopen(register)
	b.start()
	<-p.started
	p.ret(nil)
	b.idle()
	b.wantStatus(second, api.JobCompleted)
}

// ---------------------------------------------------------------------------
// §5 Bounded cooperative stop

// DL-20, DL-23: after notification the engine keeps waiting for the same
// execution: one start, one invocation, and a success returned just before
// C is kept as it is.
func TestDL20_SameExecutionUntilC(t *testing.T) {
	b := setup(t, nil)
	p := newProbe()
	p.free(t)
	calls := 0
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		calls++
		return p.handler()(ctx, d, in)
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, 29*time.Second)
	b.moveTo(t0, sec(29.25)-1)
	p.ret(nil)
	b.idle()
	r, _ := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptSucceeded, "", "delivery_timeout", t0.Add(29*time.Second), true)
	if calls != 1 || len(b.attemptsStarted(id)) != 1 {
		t.Fatalf("%d invocations, %d starts", calls, len(b.attemptsStarted(id)))
	}
}

// DL-21, DL-22: the rows of the table, through the engine: the reason and
// its instant, then C: the attempt is still running 1 ns before C and
// settled at exactly C.
func TestDL21_DL22_CooperativeDeadlineTable(t *testing.T) {
	origin := t0.Add(time.Minute) // the root's start; attempts may start before it
	for _, row := range []struct {
		n         int
		t, s      time.Duration // DeliveryTimeout, and S relative to origin
		root      time.Duration // root total from origin; 0: none
		force     time.Duration // explicit force at; 0: none
		reason    api.Reason
		at, c     time.Duration
		dispoKind record.Kind
	}{
		{1, 30 * time.Second, 0, 0, 0, api.ReasonDeliveryTimeout, 29 * time.Second, sec(29.25), record.KindAttemptRetryScheduled},
		{2, 4 * time.Second, 0, 0, 0, api.ReasonDeliveryTimeout, 3 * time.Second, sec(3.25), record.KindAttemptRetryScheduled},
		{3, 2 * time.Second, 0, 0, 0, api.ReasonDeliveryTimeout, ms(1500), ms(1625), record.KindAttemptRetryScheduled},
		{4, ms(100), 0, 0, 0, api.ReasonDeliveryTimeout, ms(75), ms(81.25), record.KindAttemptRetryScheduled},
		{5, 50 * time.Second, -10 * time.Second, 30 * time.Second, 0, api.ReasonShutdownDeadline, 28 * time.Second, sec(28.25), record.KindAttemptReleased},
		{6, 30 * time.Second, -5 * time.Second, 30 * time.Second, 0, api.ReasonDeliveryTimeout, 24 * time.Second, sec(24.25), record.KindAttemptRetryScheduled},
		{7, 60 * time.Second, -20 * time.Second, 10 * time.Second, 0, api.ReasonShutdownDeadline, 8 * time.Second, sec(8.25), record.KindAttemptReleased},
		{8, 30 * time.Second, 0, 30 * time.Second, 5 * time.Second, api.ReasonForcedShutdown, 5 * time.Second, sec(5.25), record.KindAttemptReleased},
		{9, 30 * time.Second, 0, time.Second, ms(200), api.ReasonForcedShutdown, ms(200), ms(350), record.KindAttemptReleased},
	} {
		t.Run(fmt.Sprint("row", row.n), func(t *testing.T) {
			b := setup(t, nil)
			p := workProbe(t, b)
			b.clk.Set(origin.Add(row.s))
			id := b.enqueue("work", msg{}, api.DeliveryTimeout(row.t))
			b.start()
			d := <-p.started
			if row.root != 0 {
				b.moveTo(origin, 0)
				if err := api.CloseAdmission(b.eng); err != nil { // shutdown phase 1 (SD-12)
					t.Fatal(err)
				}
				if err := api.InstallRoot(b.eng, deadlines.NewRoot(origin, row.root)); err != nil {
					t.Fatal(err)
				}
			}
			if row.force != 0 {
				b.moveTo(origin, row.force)
				if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
					t.Fatal(err)
				}
			} else {
				b.moveTo(origin, row.at)
			}
			wantReason(t, d, row.reason, origin.Add(row.at))
			b.moveTo(origin, row.c-1)
			if b.status(id).Status != api.JobProcessing {
				t.Fatalf("settled before C = %v", row.c)
			}
			b.moveTo(origin, row.c)
			b.idle()
			r, o := b.lastSettlement(id)
			code := api.CodeDeliveryTimeout
			if row.dispoKind == record.KindAttemptReleased {
				code = api.CodeDeliveryInterrupted
			}
			wantOutcome(t, r, row.dispoKind, code, row.reason.String(), origin.Add(row.at), false)
			if r.At != origin.Add(row.c).UnixNano() || o.Execution != "abandoned" {
				t.Fatalf("settled at %v (%s), want at C = %v", time.Unix(0, r.At).Sub(origin), o.Execution, row.c)
			}
			b.checkReplay()
		})
	}
}

// DL-22, DL-23: handlers that cooperate, return just before C, return just
// after C, and panic just before C, for rows 1, 3, 4 (timeout) and 9
// (force): what returns by C is kept as it is (accounting follows the
// reason), what returns after C is fenced out.
func TestDL22_DL23_ReturnAroundC(t *testing.T) {
	type row struct {
		n         int
		t         time.Duration
		root      time.Duration
		force, at time.Duration
		c         time.Duration
	}
	rows := []row{
		{1, 30 * time.Second, 0, 0, 29 * time.Second, sec(29.25)},
		{3, 2 * time.Second, 0, 0, ms(1500), ms(1625)},
		{4, ms(100), 0, 0, ms(75), ms(81.25)},
		{9, 30 * time.Second, time.Second, ms(200), ms(200), ms(350)},
	}
	type behaviour struct {
		name string
		when func(r row) time.Duration // when the handler acts
		act  func(ctx context.Context) error
		// kind and code of the settlement under a timeout, and under force.
		timeoutKind, forceKind record.Kind
		code                   string
		joined                 bool
	}
	behaviours := []behaviour{
		{"cooperates", func(r row) time.Duration { return r.at }, func(ctx context.Context) error {
			<-ctx.Done()
			return api.Retryable("STOPPED", context.Cause(ctx))
		}, record.KindAttemptRetryScheduled, record.KindAttemptReleased, "STOPPED", true},
		{"returns_just_before_c", func(r row) time.Duration { return r.c - 1 }, func(ctx context.Context) error { return nil },
			record.KindAttemptSucceeded, record.KindAttemptSucceeded, "", true},
		{"panics_just_before_c", func(r row) time.Duration { return r.c - 1 }, func(ctx context.Context) error { panic("late panic") },
			record.KindAttemptRetryScheduled, record.KindAttemptReleased, api.CodeHandlerPanicked, true},
		{"returns_just_after_c", func(r row) time.Duration { return r.c }, func(ctx context.Context) error { return nil },
			record.KindAttemptRetryScheduled, record.KindAttemptReleased, "", false},
	}
	for _, r := range rows {
		for _, bh := range behaviours {
			t.Run(fmt.Sprintf("row%d/%s", r.n, bh.name), func(t *testing.T) {
				b := setup(t, nil)
				p := newProbe()
				if err := api.Handle(b.eng, "work", p.handler()); err != nil {
					t.Fatal(err)
				}
				id := b.enqueue("work", msg{}, api.DeliveryTimeout(r.t))
				b.start()
				<-p.started
				reason := "delivery_timeout"
				if r.root != 0 {
					if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, r.root)); err != nil {
						t.Fatal(err)
					}
					b.moveTo(t0, r.force)
					if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
						t.Fatal(err)
					}
					reason = "forced_shutdown"
				}
				b.moveTo(t0, bh.when(r))
				p.do(bh.act)
				if !bh.joined {
					if err := api.WaitQuarantine(b.eng); err != nil {
						t.Fatal(err)
					}
					if q := api.QuarantineOf(b.eng); q.Fenced != 1 || q.Executions != 0 {
						t.Fatalf("DL-26: %+v", q)
					}
				}
				b.idle()
				kind, code := bh.timeoutKind, bh.code
				if r.root != 0 {
					kind = bh.forceKind
				}
				if code == "" && kind != record.KindAttemptSucceeded {
					code = api.CodeDeliveryTimeout
					if r.root != 0 {
						code = api.CodeDeliveryInterrupted
					}
				}
				rec, _ := b.lastSettlement(id)
				wantOutcome(t, rec, kind, code, reason, t0.Add(r.at), bh.joined)
				if n := len(b.settlements(id)); n != 1 {
					t.Fatalf("%d settlements", n)
				}
				b.checkReplay()
			})
		}
	}
}

// DL-24: the window is never renewed: a repeated force does not restart
// it, and an attempt first observed after C runs no user code.
func TestDL24_WindowNeverRenewed(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	first := b.enqueue("work", msg{N: 1})
	b.start()
	<-p.started
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, ms(100))
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, ms(250)) // C of the first force
	b.idle()
	r, _ := b.lastSettlement(first)
	if r.At != t0.Add(ms(250)).UnixNano() {
		t.Fatalf("abandoned at %v, want 250ms: a repeated force renewed the window", time.Unix(0, r.At).Sub(t0))
	}
}

// DL-24 example: force is recorded at t; the attempt's start is
// acknowledged only at t + 2 s: the handler is never invoked and the
// attempt is Interrupted with execution confirmed.
func TestDL24_FirstObservedAfterCRunsNothing(t *testing.T) {
	arm, holding, hold := holdAfterAppend(t)
	b := setup(t, nil)
	invoked := make(chan struct{}, 1)
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		invoked <- struct{}{}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	arm()
	go b.eng.Start(b.ctx)
	<-holding // attempt_started is appended, not yet acknowledged
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	b.clk.Set(t0.Add(2 * time.Second))
	close(hold)
	b.idle()
	select {
	case <-invoked:
		t.Fatal("DL-24: user code ran after C")
	default:
	}
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptReleased, api.CodeDeliveryInterrupted, "forced_shutdown", t0, true)
	if o.Execution != "not_started" {
		t.Fatalf("execution %q", o.Execution)
	}
	b.checkReplay()
}

// DL-25: installing a root wakes the supervisor, which recomputes O and C
// at once: an attempt whose new C has passed is abandoned at that instant.
func TestDL25_RootShorteningTakesEffectAtOnce(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	id := b.enqueue("work", msg{})
	b.start()
	d := <-p.started
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil { // C = t0 + 250 ms
		t.Fatal(err)
	}
	b.moveTo(t0, ms(20))
	// Hr = t0 + 40 ms: F = t0 + 30 ms, C = t0 + 7.5 ms, already past.
	if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0.Add(ms(20)), ms(20))); err != nil {
		t.Fatal(err)
	}
	b.idle()
	r, _ := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptReleased, api.CodeDeliveryInterrupted, "forced_shutdown", t0, false)
	if r.At != t0.Add(ms(20)).UnixNano() {
		t.Fatalf("abandoned at %v, want 20ms", time.Unix(0, r.At).Sub(t0))
	}
	if got := d.Deadline().At(); got.After(t0.Add(ms(35))) {
		t.Fatalf("handler deadline %v not lowered to G", got.Sub(t0))
	}
}

// DL-26, DL-37, DL-46: an execution that never returns is abandoned at C,
// quarantined, its scope withheld; when it returns later its result is
// fenced out and its scope closed, and nothing more is appended.
func TestDL26_DL37_DL46_AbandonedExecutionIsQuarantined(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second; o.MaxAttempts = 1 })
	p := newProbe()
	closed := make(chan struct{}, 1)
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		if err := d.Scope().Register("conn", closer(func() error { closed <- struct{}{}; return nil })); err != nil {
			return err
		}
		return p.handler()(ctx, d, in)
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, ms(1625))
	b.idle()
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptBuried, api.CodeDeliveryTimeout, "delivery_timeout", t0.Add(ms(1500)), false)
	if o.Scope != "quarantined" || o.Execution != "abandoned" {
		t.Fatalf("%+v", *o)
	}
	if q := api.QuarantineOf(b.eng); q.Executions != 1 || q.Scopes != 1 {
		t.Fatalf("quarantine %+v", q)
	}
	select {
	case <-closed:
		t.Fatal("DL-37: a quarantined scope was closed while its execution runs")
	default:
	}
	n := len(b.records())
	p.ret(nil) // the goroutine returns late
	if err := api.WaitQuarantine(b.eng); err != nil {
		t.Fatal(err)
	}
	<-closed
	if q := api.QuarantineOf(b.eng); q.Fenced != 1 || q.Executions != 0 || q.Scopes != 0 {
		t.Fatalf("quarantine %+v", q)
	}
	b.idle()
	if m := len(b.records()); m != n {
		t.Fatalf("a late result appended %d records", m-n)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// §6 Pipeline, termination hooks and scope cleanup

// tracer builds middleware and guards that log what runs, in order.
type tracer struct {
	rec *recorder
}

func (tr tracer) mw(name string, before error, after error) api.MiddlewareFuncs {
	return api.MiddlewareFuncs{
		Label: name,
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			tr.rec.add("before:" + name)
			return before
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			tr.rec.add(fmt.Sprintf("after:%s(%v)", name, err != nil))
			return after
		},
		OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
			tr.rec.add("hook:" + name + ":" + t.Exit().String())
			return nil
		},
	}
}

func (tr tracer) guard(name string, err error) api.Guard {
	return func(ctx context.Context, d *api.Delivery) error {
		tr.rec.add("guard:" + name)
		return err
	}
}

// DL-27: Before outermost first (global, queue, handler), then guards in
// the same order, then the handler, then the entered Afters in reverse. A
// failing Before or guard stops the forward pass and the entered prefix
// unwinds.
func TestDL27_PipelineOrder(t *testing.T) {
	for _, c := range []struct {
		name       string
		qBefore    error
		hGuard     error
		want       string
		kind       record.Kind
		code       string
		middleware string
		qGuard     error
	}{
		{"all_pass", nil, nil,
			"before:g before:q before:h guard:g guard:q guard:h handler after:h(false) after:q(false) after:g(false)",
			record.KindAttemptSucceeded, "", "g q h", nil},
		{"before_fails", api.Permanent("NO_Q", nil), nil,
			"before:g before:q after:g(true)", record.KindAttemptBuried, "NO_Q", "g", nil},
		{"guard_fails", nil, api.Retryable("NOT_NOW", nil),
			"before:g before:q before:h guard:g guard:q guard:h after:h(true) after:q(true) after:g(true)",
			record.KindAttemptRetryScheduled, "NOT_NOW", "g q h", nil},
		// The first guard that refuses stops the forward pass: later
		// guards do not run, and its error is the attempt's.
		{"first_guard_stops", nil, api.Retryable("LATER", nil),
			"before:g before:q before:h guard:g guard:q after:h(true) after:q(true) after:g(true)",
			record.KindAttemptRetryScheduled, "FIRST", "g q h", api.Retryable("FIRST", nil)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec recorder
			tr := tracer{&rec}
			b := setup(t, func(o *api.Options) {
				o.Middleware = []api.Middleware{tr.mw("g", nil, nil)}
				o.Guards = []api.Guard{tr.guard("g", nil)}
				o.QueueOptions = map[string]api.QueueOptions{"default": {
					Middleware: []api.Middleware{tr.mw("q", c.qBefore, nil)}, Guards: []api.Guard{tr.guard("q", c.qGuard)}}}
			})
			if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
				rec.add("handler")
				return nil
			}, api.WithMiddleware(tr.mw("h", nil, nil)), api.WithGuards(tr.guard("h", c.hGuard))); err != nil {
				t.Fatal(err)
			}
			id := b.enqueue("work", msg{})
			b.start()
			b.idle()
			if got := strings.Join(rec.get(), " "); got != c.want {
				t.Fatalf("ran %s\nwant %s", got, c.want)
			}
			r, o := b.lastSettlement(id)
			if r.Kind() != c.kind || o.Code != c.code || strings.Join(o.Middleware, " ") != c.middleware {
				t.Fatalf("%s %q middleware %v", r.Kind(), o.Code, o.Middleware)
			}
			b.checkReplay()
		})
	}
}

// DL-27, DL-2: bad plans are validation errors naming the field: nil
// middleware or guards, and more than 64 middleware in effect.
func TestDL27_PlanValidation(t *testing.T) {
	mw := func(n int) []api.Middleware {
		out := make([]api.Middleware, n)
		for i := range out {
			out[i] = api.MiddlewareFuncs{Label: fmt.Sprint(i)}
		}
		return out
	}
	fs := setup(t, nil).fs
	for _, c := range []struct {
		opts  api.Options
		field string
	}{
		{api.Options{Middleware: mw(65)}, "Options.Middleware"},
		{api.Options{Middleware: []api.Middleware{nil}}, "Options.Middleware[0]"},
		{api.Options{Guards: []api.Guard{nil}}, "Options.Guards[0]"},
		{api.Options{Middleware: mw(40), QueueOptions: map[string]api.QueueOptions{"q": {Middleware: mw(25)}}}, `Options.QueueOptions["q"].Middleware`},
	} {
		c.opts.FS, c.opts.Dir = fs, "x"
		_, err := api.Open(context.Background(), c.opts)
		var oe *api.OptionError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Fatalf("want an OptionError for %s, got %v", c.field, err)
		}
	}
	b := setup(t, func(o *api.Options) { o.Middleware = mw(64) })
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatalf("64 middleware: %v", err)
	}
	for _, opt := range []api.JobOption{api.WithMiddleware(mw(1)...), api.WithMiddleware(nil), api.WithGuards(nil)} {
		if err := api.Handle(b.eng, "over", okHandler(nil), opt); !errors.Is(err, api.ErrInvalidOption) {
			t.Fatalf("Handle: %v", err)
		}
	}
	if _, err := b.eng.Enqueue(b.ctx, "ok", msg{}, api.WithMiddleware(mw(1)...)); !errors.Is(err, api.ErrInvalidOption) {
		t.Fatalf("Enqueue with middleware: %v", err)
	}
	if err := api.Handle[msg](b.eng, "nil", nil); err == nil {
		t.Fatal("a nil handler was registered")
	}
}

// DL-28: an After error replaces a success, never an earlier failure; a
// panic in an After stops the unwind, gives MIDDLEWARE_PANICKED unless a
// failure stands, and makes the panicked entry and the outer entries whose
// After never started eligible for hooks, inner first; panics in a Before
// give MIDDLEWARE_PANICKED and in the handler HANDLER_PANICKED.
func TestDL28_NormalExits(t *testing.T) {
	boom := func(tr tracer, name string) api.MiddlewareFuncs {
		m := tr.mw(name, nil, nil)
		m.AfterFunc = func(ctx context.Context, d *api.Delivery, err error) error { panic("after " + name) }
		return m
	}
	for _, c := range []struct {
		name         string
		mw           func(tr tracer) []api.Middleware
		handler      error
		panicHandler bool
		kind         record.Kind
		code         string
		log          string
		exits, terms string
	}{
		{"after_error_replaces_success", func(tr tracer) []api.Middleware {
			return []api.Middleware{tr.mw("a", nil, api.Permanent("AFTER", nil))}
		}, nil, false, record.KindAttemptBuried, "AFTER", "before:a after:a(false)", "failed", "none"},
		{"after_error_never_replaces_a_failure", func(tr tracer) []api.Middleware {
			return []api.Middleware{tr.mw("a", nil, api.Retryable("AFTER", nil))}
		}, api.Permanent("HANDLER", nil), false, record.KindAttemptBuried, "HANDLER", "before:a after:a(true)", "failed", "none"},
		{"after_panic_stops_the_unwind", func(tr tracer) []api.Middleware {
			mid := boom(tr, "b")
			return []api.Middleware{tr.mw("a", nil, nil), mid, tr.mw("c", nil, nil)}
		}, nil, false, record.KindAttemptRetryScheduled, api.CodeMiddlewarePanicked,
			"before:a before:b before:c after:c(false) hook:b:panicked hook:a:not_started",
			"not_started panicked completed", "completed completed none"},
		{"after_panic_keeps_an_earlier_failure", func(tr tracer) []api.Middleware {
			return []api.Middleware{boom(tr, "a")}
		}, api.Permanent("HANDLER", nil), false, record.KindAttemptBuried, "HANDLER", "before:a hook:a:panicked", "panicked", "completed"},
		{"after_goexit_is_interrupted", func(tr tracer) []api.Middleware {
			// DL-28, DL-32: an After whose goroutine exits without
			// returning (runtime.Goexit) never finished: it is not left
			// Running, and it gets its hook, inner first.
			mid := tr.mw("b", nil, nil)
			mid.AfterFunc = func(ctx context.Context, d *api.Delivery, err error) error { runtimeGoexit(); return nil }
			return []api.Middleware{tr.mw("a", nil, nil), mid, tr.mw("c", nil, nil)}
		}, nil, false, record.KindAttemptRetryScheduled, "HANDLER_EXITED",
			"before:a before:b before:c after:c(false) hook:b:interrupted hook:a:not_started",
			"not_started interrupted completed", "completed completed none"},
		{"before_panic", func(tr tracer) []api.Middleware {
			m := tr.mw("b", nil, nil)
			m.BeforeFunc = func(ctx context.Context, d *api.Delivery) error { panic("before") }
			return []api.Middleware{tr.mw("a", nil, nil), m}
		}, nil, false, record.KindAttemptRetryScheduled, api.CodeMiddlewarePanicked, "before:a after:a(true)", "completed", "none"},
		{"handler_panic", func(tr tracer) []api.Middleware {
			return []api.Middleware{tr.mw("a", nil, nil)}
		}, nil, true, record.KindAttemptRetryScheduled, api.CodeHandlerPanicked, "before:a after:a(true)", "completed", "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec recorder
			tr := tracer{&rec}
			b := setup(t, nil)
			if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
				if c.panicHandler {
					panic("handler")
				}
				return c.handler
			}, api.WithMiddleware(c.mw(tr)...)); err != nil {
				t.Fatal(err)
			}
			id := b.enqueue("work", msg{})
			b.start()
			b.idle()
			r, o := b.lastSettlement(id)
			if r.Kind() != c.kind || o.Code != c.code {
				t.Fatalf("%s %q, want %s %q", r.Kind(), o.Code, c.kind, c.code)
			}
			if got := strings.Join(rec.get(), " "); got != c.log {
				t.Fatalf("ran %s\nwant %s", got, c.log)
			}
			if got := strings.Join(o.NormalExits, " "); got != c.exits {
				t.Fatalf("normal exits %s, want %s", got, c.exits)
			}
			if got := strings.Join(o.TerminationExits, " "); got != c.terms {
				t.Fatalf("termination exits %s, want %s", got, c.terms)
			}
			b.checkReplay()
		})
	}
}

// DL-28, DL-32: an After still running at C leaves the attempt
// Interrupted: that entry and the outer one whose After never started get
// hooks; a completed inner After gets none.
func TestDL28_DL32_AfterRunningAtCIsInterrupted(t *testing.T) {
	var rec recorder
	tr := tracer{&rec}
	release := make(chan struct{})
	defer close(release)
	inAfter := make(chan struct{}, 1)
	mid := tr.mw("b", nil, nil)
	mid.AfterFunc = func(ctx context.Context, d *api.Delivery, err error) error {
		inAfter <- struct{}{}
		<-release // ignores ctx
		return nil
	}
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	if err := api.Handle(b.eng, "work", okHandler(nil),
		api.WithMiddleware(tr.mw("a", nil, nil), mid, tr.mw("c", nil, nil))); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-inAfter
	b.moveTo(t0, ms(1500))
	b.moveTo(t0, ms(1625))
	b.idle()
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, api.CodeDeliveryTimeout, "delivery_timeout", t0.Add(ms(1500)), false)
	if got := strings.Join(o.NormalExits, " "); got != "not_started interrupted completed" {
		t.Fatalf("normal exits %s", got)
	}
	if got := strings.Join(o.TerminationExits, " "); got != "completed completed none" {
		t.Fatalf("termination exits %s", got)
	}
	if got := strings.Join(rec.get(), " "); !strings.HasSuffix(got, "after:c(false) hook:b:interrupted hook:a:not_started") {
		t.Fatalf("ran %s", got)
	}
}

// hookProbe is a termination hook driven by the test: it reports its
// Termination, then waits for the test's verdict or its own deadline.
type hookProbe struct {
	name    string
	entered chan *api.Termination
	verdict chan error
}

func newHookProbe(name string) *hookProbe {
	return &hookProbe{name: name, entered: make(chan *api.Termination, 1), verdict: make(chan error, 1)}
}

func (h *hookProbe) mw() api.MiddlewareFuncs {
	return api.MiddlewareFuncs{Label: h.name, OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
		h.entered <- t
		select {
		case err := <-h.verdict:
			return err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}}
}

func wantAt(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s at %v, want %v", what, got.Sub(t0), want.Sub(t0))
	}
}

// DL-11, DL-29, DL-31, DL-33, DL-34: the worked example, local timeout.
// T = 30 s, two eligible hooks, execution abandoned at C = 29.25: E = 30,
// Hk = 29.8125, the inner hook's deadline 29.53125; it times out, the
// outer hook gets 29.8125; the scope must close by 30.0.
func TestDL11_DL31_DL34_WorkedExampleLocalTimeout(t *testing.T) {
	outer, inner := newHookProbe("outer"), newHookProbe("inner")
	b := setup(t, nil)
	p := newProbe()
	p.free(t)
	closing := make(chan struct{}, 1)
	closeGate := make(chan struct{})
	defer close(closeGate)
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		d.Scope().Register("conn", closer(func() error { closing <- struct{}{}; <-closeGate; return nil }))
		return p.handler()(ctx, d, in)
	}, api.WithMiddleware(outer.mw(), inner.mw())); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, 29*time.Second)
	b.moveTo(t0, sec(29.25)) // C: abandoned; the inner hook starts
	ti := <-inner.entered
	wantAt(t, "inner hook deadline", ti.Deadline().At(), t0.Add(sec(29.53125)))
	if ti.Cause() != api.ExecutionCancelled || ti.Exit() != api.ExitNotStarted || ti.ExecutionReturned() {
		t.Fatalf("inner hook sees cause %v exit %v returned %v", ti.Cause(), ti.Exit(), ti.ExecutionReturned())
	}
	if ti.Cancellation().IsCancelled() {
		t.Fatal("DL-33: the hook's cleanup context shares the execution's cancellation")
	}
	b.moveTo(t0, sec(29.53125)) // the inner hook times out
	to := <-outer.entered
	wantAt(t, "outer hook deadline", to.Deadline().At(), t0.Add(sec(29.8125)))
	if r, at, ok := ti.Cancellation().Reason(); !ok || r != api.ReasonDeliveryTimeout || !at.Equal(t0.Add(sec(29.53125))) {
		t.Fatalf("inner hook's cleanup cancellation %v at %v", r, at)
	}
	p.ret(nil) // the execution returns before the scope step: it is joined
	if err := api.WaitQuarantine(b.eng); err != nil {
		t.Fatal(err)
	}
	outer.verdict <- nil
	<-closing
	b.moveTo(t0, 30*time.Second-1)
	if b.status(id).Status != api.JobProcessing {
		t.Fatal("settled before the scope's deadline E' = 30")
	}
	b.moveTo(t0, 30*time.Second)
	b.idle()
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, api.CodeTerminationCleanupFailed, "delivery_timeout", t0.Add(29*time.Second), true)
	if r.At != t0.Add(30*time.Second).UnixNano() || o.Scope != "timed_out" || o.Execution != "abandoned" ||
		strings.Join(o.TerminationExits, " ") != "completed timed_out" || strings.Join(o.Middleware, " ") != "outer inner" ||
		o.Cleanup != api.CodeTerminationCleanupFailed+","+api.CodeScopeCleanupTimedOut {
		t.Fatalf("settlement at %v: %+v", time.Unix(0, r.At).Sub(t0), *o)
	}
	b.checkReplay()
}

// DL-21, DL-30, DL-34 forced variant: root 30 s, shutdown_deadline at 28,
// abandoned at 28.25, E = 29, Hk = 28.8125, the inner hook's deadline
// 28.53125; the attempt is released, and the last second is left free.
func TestDL21_DL30_DL34_WorkedExampleShutdownDeadline(t *testing.T) {
	outer, inner := newHookProbe("outer"), newHookProbe("inner")
	b := setup(t, nil)
	p := workProbe(t, b, api.WithMiddleware(outer.mw(), inner.mw()))
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	if err := api.CloseAdmission(b.eng); err != nil {
		t.Fatal(err)
	}
	if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, 28*time.Second)
	b.moveTo(t0, sec(28.25))
	ti := <-inner.entered
	wantAt(t, "inner hook deadline", ti.Deadline().At(), t0.Add(sec(28.53125)))
	if r, at, ok := ti.Reason(); !ok || r != api.ReasonShutdownDeadline || !at.Equal(t0.Add(28*time.Second)) {
		t.Fatalf("hook sees reason %v at %v", r, at)
	}
	b.moveTo(t0, sec(28.53125))
	to := <-outer.entered
	wantAt(t, "outer hook deadline", to.Deadline().At(), t0.Add(sec(28.8125)))
	b.moveTo(t0, sec(28.8125)) // the outer one times out too
	b.idle()
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptReleased, api.CodeTerminationCleanupFailed, "shutdown_deadline", t0.Add(28*time.Second), false)
	if r.At != t0.Add(sec(28.8125)).UnixNano() || o.Scope != "quarantined" {
		t.Fatalf("settled at %v: %+v", time.Unix(0, r.At).Sub(t0), *o)
	}
	if q := api.QuarantineOf(b.eng); q.Executions != 1 || q.Scopes != 1 {
		t.Fatalf("quarantine %+v", q)
	}
}

// DL-33: a hook whose turn comes at or after Hk is not started and ends
// BudgetExhausted; the chain always continues outward.
func TestDL33_BudgetExhaustedHook(t *testing.T) {
	var rec recorder
	tr := tracer{&rec}
	inner := newHookProbe("inner")
	b := setup(t, nil)
	p := workProbe(t, b, api.WithMiddleware(tr.mw("outer", nil, nil), inner.mw()))
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, 29*time.Second)
	b.moveTo(t0, sec(29.25))
	<-inner.entered
	b.moveTo(t0, sec(29.9)) // observed late, past Hk = 29.8125
	b.idle()
	_, o := b.lastSettlement(id)
	if got := strings.Join(o.TerminationExits, " "); got != "budget_exhausted timed_out" || len(rec.get()) != 1 {
		t.Fatalf("termination exits %s, ran %v", got, rec.get())
	}
	if o.Code != api.CodeTerminationCleanupFailed {
		t.Fatalf("code %s", o.Code)
	}
}

// DL-29, DL-35, DL-36: the owner keeps the invocation after abandonment:
// a hook reads the attempt's identity and values, takes one, resolves from
// the still-open scope, while the execution may still run; then the values
// left are released and the scope closes once, in reverse registration
// order, and only then is the settlement appended.
func TestDL29_DL35_DL36_OwnerRunsCleanupInOrder(t *testing.T) {
	var rec recorder
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	p := newProbe()
	p.free(t)
	inHook := make(chan *api.Termination, 1)
	hookGo := make(chan struct{})
	hook := api.MiddlewareFuncs{Label: "h", OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
		inHook <- t
		<-hookGo
		v, _ := t.Value("kept")
		took, _ := t.TakeValue("taken")
		_, ok := t.Lookup("conn")
		rec.add(fmt.Sprintf("hook:%d:%s:%s:%v", t.Attempt(), v.(releaser).name, took.(releaser).name, ok))
		return nil
	}}
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		d.SetValue("kept", releaser{&rec, "kept"})
		d.SetValue("taken", releaser{&rec, "taken"})
		d.Scope().Register("conn", closer(func() error { rec.add("scope:conn"); return nil }))
		d.Scope().Register("file", closer(func() error { rec.add("scope:file"); return nil }))
		return p.handler()(ctx, d, in)
	}, api.WithMiddleware(hook)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, ms(1500))
	b.moveTo(t0, ms(1625)) // abandoned: the owner runs the hook
	term := <-inHook
	if term.ExecutionReturned() {
		t.Fatal("DL-35: the execution is still running")
	}
	p.ret(nil) // it returns while the hook runs, before the scope step
	if err := api.WaitQuarantine(b.eng); err != nil {
		t.Fatal(err)
	}
	if !term.ExecutionReturned() {
		t.Fatal("DL-35: the hook does not see the execution's return")
	}
	n := len(b.settlements(id))
	close(hookGo)
	b.idle()
	if got, want := strings.Join(rec.get(), " "), "hook:1:kept:taken:true release:kept scope:file scope:conn"; got != want {
		t.Fatalf("cleanup ran %s\nwant %s", got, want)
	}
	if n != 0 {
		t.Fatal("DL-36: settled before the scope closed")
	}
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, api.CodeDeliveryTimeout, "delivery_timeout", t0.Add(ms(1500)), true)
	if o.Scope != "closed" || o.Execution != "abandoned" || o.Cleanup != "" {
		t.Fatalf("%+v", *o)
	}
	b.checkReplay()
}

// releaser is an attempt-local value that logs its release.
type releaser struct {
	rec  *recorder
	name string
}

func (r releaser) Release() { r.rec.add("release:" + r.name) }

// DL-30: the cleanup cutoff is H for a timeout and min(H, F(at)) for any
// other reason: a forced attempt's single hook gets until Hk = 5.8125 with
// E = F(5) = 6 (root 30 s, force at 5, abandoned at C = 5.25).
func TestDL21_DL30_DL31_CleanupCutoff(t *testing.T) {
	h := newHookProbe("h")
	b := setup(t, nil)
	p := workProbe(t, b, api.WithMiddleware(h.mw()))
	b.enqueue("work", msg{})
	b.start()
	<-p.started
	if err := api.CloseAdmission(b.eng); err != nil {
		t.Fatal(err)
	}
	if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, 5*time.Second)
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, sec(5.25))
	term := <-h.entered
	// E = 6, u = 5.25: scope reserve min(0.75/4, 0.25) = 0.1875.
	wantAt(t, "hook deadline", term.Deadline().At(), t0.Add(sec(5.8125)))
	h.verdict <- nil
	b.idle()
}

// DL-32: a Before that did not complete arms nothing: a middleware whose
// Before is still running at C gets no hook; the entered outer one does.
func TestDL32_UnfinishedBeforeArmsNothing(t *testing.T) {
	var rec recorder
	tr := tracer{&rec}
	release := make(chan struct{})
	defer close(release)
	inBefore := make(chan struct{}, 1)
	stuck := tr.mw("stuck", nil, nil)
	stuck.BeforeFunc = func(ctx context.Context, d *api.Delivery) error {
		inBefore <- struct{}{}
		<-release
		return nil
	}
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	if err := api.Handle(b.eng, "work", okHandler(nil), api.WithMiddleware(tr.mw("outer", nil, nil), stuck)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-inBefore
	b.moveTo(t0, ms(1500))
	b.moveTo(t0, ms(1625))
	b.idle()
	if got := strings.Join(rec.get(), " "); got != "before:outer hook:outer:not_started" {
		t.Fatalf("ran %s", got)
	}
	_, o := b.lastSettlement(id)
	if strings.Join(o.Middleware, " ") != "outer" || strings.Join(o.TerminationExits, " ") != "completed" {
		t.Fatalf("%+v", *o)
	}
}

// DL-36: the cleanup codes and their precedence: a success with a cleanup
// failure settles as a retryable failure with the cleanup code; a
// handler's own error keeps its code, the cleanup code recorded beside it;
// an interrupted attempt carries the cleanup code, never DELIVERY_TIMEOUT.
func TestDL36_CleanupCodes(t *testing.T) {
	for _, c := range []struct {
		name    string
		scope   func() error
		value   any
		handler error
		kind    record.Kind
		code    string
		cleanup string
		scopeAs string
	}{
		{"scope_close_fails", func() error { return errors.New("disk gone") }, nil, nil,
			record.KindAttemptRetryScheduled, api.CodeScopeCleanupFailed, api.CodeScopeCleanupFailed, "failed"},
		{"scope_close_panics", func() error { panic("close") }, nil, nil,
			record.KindAttemptRetryScheduled, api.CodeScopeCleanupPanicked, api.CodeScopeCleanupPanicked, "panicked"},
		{"scope_close_exits", func() error { runtimeGoexit(); return nil }, nil, nil,
			record.KindAttemptRetryScheduled, api.CodeScopeResultUnobserved, api.CodeScopeResultUnobserved, "unobserved"},
		{"release_panics", nil, panicker{}, nil,
			record.KindAttemptRetryScheduled, api.CodeResourceReleasePanicked, api.CodeResourceReleasePanicked, "closed"},
		{"handler_error_keeps_its_code", func() error { return errors.New("x") }, nil, api.Permanent("MINE", nil),
			record.KindAttemptBuried, "MINE", api.CodeScopeCleanupFailed, "failed"},
		{"clean", func() error { return nil }, nil, nil, record.KindAttemptSucceeded, "", "", "closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
				if c.scope != nil {
					d.Scope().Register("r", closer(c.scope))
				}
				if c.value != nil {
					d.SetValue("v", c.value)
				}
				return c.handler
			}); err != nil {
				t.Fatal(err)
			}
			id := b.enqueue("work", msg{})
			b.start()
			b.idle()
			r, o := b.lastSettlement(id)
			if r.Kind() != c.kind || o.Code != c.code || o.Cleanup != c.cleanup || o.Scope != c.scopeAs || !o.Joined {
				t.Fatalf("%s %+v", r.Kind(), *o)
			}
			b.checkReplay()
		})
	}
}

// DL-6, DL-36: a pipeline that succeeds after a forced shutdown's reason
// and whose scope close then fails settles as a retryable failure with the
// cleanup code; the success consumed its attempt, and a cleanup failure
// never changes that, so it is not released.
func TestDL6_DL36_SuccessWithCleanupFailureAfterForceConsumes(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	id := b.enqueue("work", msg{})
	b.start()
	d := <-p.started
	d.Scope().Register("r", closer(func() error { return errors.New("disk gone") }))
	b.moveTo(t0, time.Second)
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	p.ret(nil)
	b.idle()
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, api.CodeScopeCleanupFailed, "forced_shutdown", t0.Add(time.Second), true)
	if o.Cleanup != api.CodeScopeCleanupFailed {
		t.Fatalf("cleanup %q", o.Cleanup)
	}
	if j := b.status(id); j.Consumed != 1 {
		t.Fatalf("DL-6: consumed %d, want 1: %+v", j.Consumed, j)
	}
	b.checkReplay()
}

type panicker struct{}

func (panicker) Release() { panic("release") }

// DL-36: a scope close that overruns E' is abandoned and the attempt
// settles with DELIVERY_SCOPE_CLEANUP_TIMED_OUT at E'.
func TestDL36_ScopeCloseTimesOut(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	closing := make(chan struct{}, 1)
	release := make(chan struct{})
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		d.Scope().Register("slow", closer(func() error { closing <- struct{}{}; <-release; return nil }))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{})
	b.start()
	<-closing
	b.moveTo(t0, 2*time.Second) // E' = H = 2 s
	b.idle()
	r, o := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptRetryScheduled, api.CodeScopeCleanupTimedOut, "", time.Time{}, true)
	if o.Scope != "timed_out" || api.QuarantineOf(b.eng).Scopes != 1 {
		t.Fatalf("%+v %+v", *o, api.QuarantineOf(b.eng))
	}
	close(release)
	if err := api.WaitQuarantine(b.eng); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// §7 Settlement

// DL-38, DL-40: each token settles once, and the disposition follows the
// result: success, retry while attempts remain, buried at MaxAttempts or
// on a permanent failure, released for an interruption by a non-timeout
// reason.
func TestDL38_DL40_Dispositions(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.MaxAttempts = 2 })
	p := workProbe(t, b)
	ok := b.enqueue("work", msg{N: 1})
	retry := b.enqueue("work", msg{N: 2})
	perm := b.enqueue("work", msg{N: 3})
	b.start()
	byJob := map[string]*api.Delivery{}
	for range 3 {
		d := <-p.started
		byJob[d.JobID()] = d
	}
	p.send(byJob[ok], func(context.Context) error { return nil })
	p.send(byJob[retry], func(context.Context) error { return errors.New("flaky") })
	p.send(byJob[perm], func(context.Context) error { return api.Permanent("BAD_INPUT", nil) })
	b.idle()
	released := b.enqueue("work", msg{N: 4})
	<-p.started
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	p.ret(errors.New("stopping"))
	b.idle()
	for id, want := range map[string]record.Kind{
		ok: record.KindAttemptSucceeded, retry: record.KindAttemptRetryScheduled,
		perm: record.KindAttemptBuried, released: record.KindAttemptReleased,
	} {
		if r, _ := b.lastSettlement(id); r.Kind() != want {
			t.Fatalf("job %s settled %s, want %s", id, r.Kind(), want)
		}
	}
	if j := b.status(released); j.Consumed != 0 || j.LastCode != api.CodeHandlerError {
		t.Fatalf("DL-23: a release keeps the handler's code and consumes nothing: %+v", j)
	}
	b.checkReplay()
}

// DL-41: after force, an attempt that returns within its cooperative
// window is still settled with its own result.
func TestDL41_ForceDoesNotRevokeAtOnce(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, time.Second)
	if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, ms(1249))
	p.ret(nil)
	b.idle()
	r, _ := b.lastSettlement(id)
	wantOutcome(t, r, record.KindAttemptSucceeded, "", "forced_shutdown", t0.Add(time.Second), true)
}

// DL-45: attempt state comes from the journal only: a replay equals the
// live state, and a reopened engine reads the same outcomes.
func TestDL45_ReplayIsDeterministic(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	p := newProbe()
	p.free(t)
	register := func(e *api.Engine) {
		if err := api.Handle(e, "work", p.handler()); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	b.moveTo(t0, ms(1625))
	b.idle()
	before := b.status(id)
	b.returnAbandoned(p) // fenced out: it changes nothing
	b.reopen(register)
	if after := b.status(id); after.Consumed != before.Consumed || after.LastCode != before.LastCode ||
		!after.AvailableAt.Equal(before.AvailableAt) {
		t.Fatalf("before %+v\nafter %+v", before, after)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// Bad input: typed errors or recorded dispositions, never a crash.

// Enqueue refuses a payload its handler's type cannot decode: the job
// could only be buried at its first delivery. Nothing is appended.
func TestEnqueueRefusesAPayloadTheHandlerCannotDecode(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "text", okHandler(nil)); err != nil { // expects msg{N int}
		t.Fatal(err)
	}
	before := b.lastSeq()
	_, err := b.eng.Enqueue(b.ctx, "text", "not a struct")
	if !errors.Is(err, api.ErrInvalidPayload) || !strings.Contains(err.Error(), `"text"`) ||
		!strings.Contains(err.Error(), "does not decode into api_test.msg") {
		t.Fatalf("err %v, want ErrInvalidPayload naming the handler and its type", err)
	}
	// A value of another type that decodes is accepted: msgpack matches
	// fields by name, and a map is how a producer without the type sends.
	if _, err := b.eng.Enqueue(b.ctx, "text", map[string]any{"n": 3}); err != nil {
		t.Fatalf("a map with the type's fields: %v", err)
	}
	if got := b.lastSeq(); got != before+1 {
		t.Fatalf("last seq %d, want %d: the refused enqueue appended", got, before+1)
	}
}

// A payload that does not decode at delivery (here enqueued while the
// handler took a string, delivered after a restart registered it for a
// struct) buries its job permanently with the decode error; the payload
// stays in the journal.
func TestDL27_PayloadDecodeFailureIsBuried(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "text", func(ctx context.Context, d *api.Delivery, in string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	id, err := b.eng.Enqueue(b.ctx, "text", "not a struct")
	if err != nil {
		t.Fatal(err)
	}
	b.reopen(func(e *api.Engine) {
		if err := api.Handle(e, "text", okHandler(nil)); err != nil { // expects msg{N int}
			t.Fatal(err)
		}
	})
	b.start()
	b.idle()
	r, o := b.lastSettlement(id)
	if r.Kind() != record.KindAttemptBuried || o.Code != api.CodePayloadDecodeFailed || o.Class != "permanent" || o.Error == "" {
		t.Fatalf("%s %+v", r.Kind(), *o)
	}
	// A payload of another type is not journal damage: the error says
	// what it is and names the handler's type.
	if !strings.Contains(o.Error, "payload does not decode into api_test.msg") || strings.Contains(o.Error, "corrupt") {
		t.Fatalf("decode error %q", o.Error)
	}
	for _, rec := range b.records() {
		if e, ok := rec.Body.(*record.JobEnqueued); ok && e.JobID == id && len(e.Payload) == 0 {
			t.Fatal("the payload was not kept")
		}
	}
	b.checkReplay()
}

// A handler that never returns is abandoned at C and recorded; the engine
// keeps serving other work.
func TestDL26_HandlerThatNeverReturns(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = ms(100); o.MaxAttempts = 1; o.Workers = 1 })
	forever := make(chan struct{})
	defer close(forever)
	entered := make(chan struct{}, 1)
	if err := api.Handle(b.eng, "hang", func(ctx context.Context, d *api.Delivery, in msg) error {
		entered <- struct{}{}
		<-forever
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	hung := b.enqueue("hang", msg{})
	next := b.enqueue("ok", msg{})
	b.start()
	<-entered
	b.moveTo(t0, ms(81.25))
	b.idle()
	b.wantStatus(hung, api.JobBuried)
	b.wantStatus(next, api.JobCompleted)
	if api.QuarantineOf(b.eng).Executions != 1 {
		t.Fatalf("%+v", api.QuarantineOf(b.eng))
	}
}

func runtimeGoexit() { runtime.Goexit() }

// DL-38: a settlement always fits a record: a handler's oversized error
// text is clipped, never a fail-stop.
func TestDL38_OversizedErrorIsClipped(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMin })
	if err := api.Handle(b.eng, "loud", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("LOUD", errors.New(strings.Repeat("é", 1<<20)))
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("loud", msg{})
	b.start()
	b.idle()
	_, o := b.lastSettlement(id)
	if o.Code != "LOUD" || len(o.Error) > 1<<10 || b.eng.Lifecycle() != api.Ready {
		t.Fatalf("code %s, %d bytes of error, lifecycle %v", o.Code, len(o.Error), b.eng.Lifecycle())
	}
}

// DL-27, §1: a workflow step's attempt runs through the same pipeline and
// the same cooperative stop as a job's.
func TestDL27_WorkflowStepsUseThePipeline(t *testing.T) {
	var rec recorder
	tr := tracer{&rec}
	b := setup(t, func(o *api.Options) { o.Middleware = []api.Middleware{tr.mw("g", nil, nil)} })
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	attempt := 0
	if err := b.eng.Register(api.NewWorkflow("w").Then("s", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
		attempt = d.Attempt()
		rec.add("step")
		if attempt == 1 {
			entered <- struct{}{}
			<-release // ignores ctx
		}
		return api.State{"done": true}, nil
	}, api.DeliveryTimeout(2*time.Second))); err != nil {
		t.Fatal(err)
	}
	b.start()
	id, err := b.eng.Dispatch(b.ctx, "w", api.State{})
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	b.moveTo(t0, ms(1625)) // abandoned at C; the retry waits 1 s
	b.idle()
	b.moveTo(t0, ms(2625))
	b.idle()
	info, err := b.eng.Workflow(b.ctx, id)
	if err != nil || info.Status != api.WorkflowCompleted {
		t.Fatalf("workflow %+v: %v", info, err)
	}
	if got := strings.Join(rec.get(), " "); got != "before:g step hook:g:not_started before:g step after:g(false)" {
		t.Fatalf("ran %s", got)
	}
	b.checkReplay()
}

// ---------------------------------------------------------------------------
// Reasonless cancellation, owner teardown, workflow middleware and the
// settlement cap, through the engine

// debugRecords returns the journal's debug records with code, in order.
func (b *testBundle) debugRecords(code string) []*record.Debug {
	b.t.Helper()
	var out []*record.Debug
	for _, r := range b.records() {
		if d, ok := r.Body.(*record.Debug); ok && d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

// DL-15: an attempt whose source is cancelled by a path that names no
// reason gets ReasonRuntimeCancellation, and the engine appends a debug
// record about its job; a path that names its reason appends none.
func TestDL15_ReasonlessCancellationAppendsDebugRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		force  api.Reason
		want   api.Reason
		debugs int
	}{
		{"no_reason", deadlines.ReasonNone, api.ReasonRuntimeCancellation, 1},
		{"named_reason", api.ReasonRuntimeFailure, api.ReasonRuntimeFailure, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			p := workProbe(t, b)
			id := b.enqueue("work", msg{})
			b.start()
			d := <-p.started
			b.moveTo(t0, time.Second)
			if err := api.Force(b.eng, c.force); err != nil {
				t.Fatal(err)
			}
			wantReason(t, d, c.want, t0.Add(time.Second))
			if err := api.Sync(b.eng); err != nil {
				t.Fatal(err)
			}
			debugs := b.debugRecords(api.CodeReasonlessCancellation)
			if len(debugs) != c.debugs {
				t.Fatalf("%d debug records %s, want %d", len(debugs), api.CodeReasonlessCancellation, c.debugs)
			}
			if c.debugs == 1 && (debugs[0].Subject != id || !strings.Contains(debugs[0].Message, "runtime_cancellation")) {
				t.Fatalf("debug record %+v, want one about job %s", *debugs[0], id)
			}
			p.ret(nil)
			b.idle()
			b.checkReplay()
		})
	}
}

// DL-30, DL-15, SD-14: when an attempt's owner is torn down (here the
// runner stops because the engine is closed without a shutdown) while a
// reason is set and cleanup is unfinished, its cleanup is not cut at once:
// E = cap_root(min(H, now + 100 ms)). The spec's example: torn down at 25
// with H = 40 and Hr = 30 → E = 25.1. The execution, still in its
// cooperative window (forced at 24.9: F = 25.9, C = 25.15), is abandoned
// at the teardown; its hook runs with cause OwnerAbandoned and Hk = 25.1 −
// min(0.1/4, 0.25) = 25.075, and is still running when that ends. An
// attempt with no reason gets ReasonRuntimeCancellation at the teardown,
// with its debug record (DL-15). The owner settles nothing: the token
// stays open for recovery (DL-44).
func TestDL30_DL15_TornDownOwnerGetsFinalWindow(t *testing.T) {
	at := func(s, ms int) time.Time {
		return t0.Add(time.Duration(s)*time.Second + time.Duration(ms)*time.Millisecond)
	}
	for _, c := range []struct {
		name     string
		force    bool
		reason   api.Reason
		reasonAt time.Time
		debugs   int
	}{
		{"forced_before", true, api.ReasonForcedShutdown, at(24, 900), 0},
		{"no_reason", false, api.ReasonRuntimeCancellation, at(25, 0), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHookProbe("h")
			b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 40 * time.Second })
			t.Cleanup(func() { h.verdict <- nil }) // a failed test leaves no hook running
			p := workProbe(t, b, api.WithMiddleware(h.mw()))
			id := b.enqueue("work", msg{})
			b.start()
			d := <-p.started // S = 0, H = 40
			if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, 30*time.Second)); err != nil {
				t.Fatal(err) // Hr = 30, G = 28: H becomes 30, P 29
			}
			b.moveTo(t0, at(24, 900).Sub(t0))
			if c.force {
				if err := api.Force(b.eng, api.ReasonForcedShutdown); err != nil {
					t.Fatal(err)
				}
			}
			b.moveTo(t0, 25*time.Second)
			dead, cancel := context.WithCancel(b.ctx)
			cancel()
			closed := make(chan error, 1)
			go func() { closed <- b.eng.Close(dead) }()
			var term *api.Termination
			select {
			case term = <-h.entered:
			case err := <-closed:
				t.Fatalf("the teardown cut cleanup at once: the engine closed (%v) and no hook ran", err)
			}
			wantAt(t, "hook deadline", term.Deadline().At(), at(25, 75))
			if r, rat, ok := term.Reason(); !ok || r != c.reason || !rat.Equal(c.reasonAt) {
				t.Fatalf("hook sees reason %v at %v", r, rat.Sub(t0))
			}
			if term.Cause() != api.OwnerAbandoned || term.Exit() != api.ExitNotStarted || term.ExecutionReturned() {
				t.Fatalf("hook sees cause %v, exit %v, returned %v", term.Cause(), term.Exit(), term.ExecutionReturned())
			}
			wantReason(t, d, c.reason, c.reasonAt)
			b.clk.Set(at(25, 75))
			if err := <-closed; err != nil {
				t.Fatalf("close: %v", err)
			}
			if r, rat, ok := term.Cancellation().Reason(); !ok || !rat.Equal(at(25, 75)) {
				t.Fatalf("the hook's cleanup was cancelled with %v at %v, want at 25.075", r, rat.Sub(t0))
			}
			if q := api.QuarantineOf(b.eng); q.Executions != 1 || q.Unresolved != 0 {
				t.Fatalf("quarantine %+v", q)
			}
			b.open()
			if s := b.settlements(id); len(s) != 0 {
				t.Fatalf("SD-14: a torn-down owner settled: %d settlements", len(s))
			}
			if debugs := b.debugRecords(api.CodeReasonlessCancellation); len(debugs) != c.debugs ||
				(c.debugs == 1 && debugs[0].Subject != id) {
				t.Fatalf("debug records %v, want %d about job %s", debugs, c.debugs, id)
			}
		})
	}
}

// labelled returns n middleware named by their index.
func labelled(n int) []api.Middleware {
	out := make([]api.Middleware, n)
	for i := range out {
		out[i] = api.MiddlewareFuncs{Label: fmt.Sprint(i)}
	}
	return out
}

// DL-27: workflow middleware and guards take the "queue or workflow" place
// of the order for every step attempt of their workflow, Parallel branches
// included: global → queue → workflow Before, guards in the same order,
// the step, then the Afters in reverse. Another workflow's steps do not
// get them.
func TestDL27_WorkflowMiddlewareOrder(t *testing.T) {
	var rec recorder
	tr := tracer{&rec}
	b := setup(t, func(o *api.Options) {
		o.Workers = 1 // one attempt at a time: one trace
		o.Middleware = []api.Middleware{tr.mw("g", nil, nil)}
		o.Guards = []api.Guard{tr.guard("g", nil)}
		o.QueueOptions = map[string]api.QueueOptions{"default": {
			Middleware: []api.Middleware{tr.mw("q", nil, nil)}, Guards: []api.Guard{tr.guard("q", nil)}}}
	})
	step := func(name string) api.StepFunc {
		return func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			rec.add("step:" + name)
			return nil, nil
		}
	}
	if err := b.eng.Register(api.NewWorkflow("w").
		WithMiddleware(tr.mw("w1", nil, nil)).WithMiddleware(tr.mw("w2", nil, nil)).
		WithGuards(tr.guard("w", nil)).
		Then("a", step("a")).Parallel("par", step("b0"), step("b1"))); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.Register(api.NewWorkflow("plain").Then("p", step("p"))); err != nil {
		t.Fatal(err)
	}
	b.start()
	for _, c := range []struct {
		workflow   string
		steps      []string
		want       string
		middleware string
	}{
		{"w", []string{"a", "b0", "b1"},
			"before:g before:q before:w1 before:w2 guard:g guard:q guard:w step:%s after:w2(false) after:w1(false) after:q(false) after:g(false)",
			"g q w1 w2"},
		{"plain", []string{"p"},
			"before:g before:q guard:g guard:q step:%s after:q(false) after:g(false)",
			"g q"},
	} {
		n := len(rec.get())
		settled := countKind(b.records(), record.KindAttemptSucceeded)
		id, err := b.eng.Dispatch(b.ctx, c.workflow, api.State{})
		if err != nil {
			t.Fatal(err)
		}
		b.idle()
		if info, err := b.eng.Workflow(b.ctx, id); err != nil || info.Status != api.WorkflowCompleted {
			t.Fatalf("workflow %s: %+v, %v", c.workflow, info, err)
		}
		var want []string
		for _, s := range c.steps {
			want = append(want, fmt.Sprintf(c.want, s))
		}
		if got := strings.Join(rec.get()[n:], " "); got != strings.Join(want, " ") {
			t.Fatalf("workflow %s ran\n%s\nwant\n%s", c.workflow, got, strings.Join(want, " "))
		}
		var audits []string
		for _, r := range b.records() {
			if r.Kind() == record.KindAttemptSucceeded {
				audits = append(audits, strings.Join(outcome(r).Middleware, " "))
			}
		}
		for _, got := range audits[settled:] {
			if got != c.middleware {
				t.Fatalf("workflow %s: settlement records middleware %q, want %q", c.workflow, got, c.middleware)
			}
		}
	}
	b.checkReplay()
}

// DL-27: workflow middleware count in the 64 in effect for one step
// attempt (global, the largest queue plan and workflow together); more, a
// nil entry, or middleware on one step is refused by Register with an
// error naming the option.
func TestDL27_WorkflowPlanValidation(t *testing.T) {
	b := setup(t, func(o *api.Options) {
		o.Middleware = labelled(40)
		o.QueueOptions = map[string]api.QueueOptions{"big": {Middleware: labelled(20)}}
	})
	step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
	if err := b.eng.Register(api.NewWorkflow("ok").WithMiddleware(labelled(4)...).Then("s", step)); err != nil {
		t.Fatalf("64 middleware in effect: %v", err)
	}
	guards := make([]api.Guard, api.GuardsMax+1)
	for i := range guards {
		guards[i] = func(context.Context, *api.Delivery) error { return nil }
	}
	for _, c := range []struct {
		w      *api.Workflow
		option string
		step   string
	}{
		{api.NewWorkflow("over").WithMiddleware(labelled(5)...).Then("s", step), "WithMiddleware", ""},
		{api.NewWorkflow("nil_mw").WithMiddleware(nil).Then("s", step), "WithMiddleware", ""},
		{api.NewWorkflow("guards_over").WithGuards(guards...).Then("s", step), "WithGuards", ""},
		{api.NewWorkflow("nil_guard").WithGuards(nil).Then("s", step), "WithGuards", ""},
		{api.NewWorkflow("step_mw").Then("s", step, api.WithMiddleware(labelled(1)...)), "WithMiddleware", "s"},
	} {
		err := b.eng.Register(c.w)
		var we *api.WorkflowError
		if !errors.As(err, &we) || !errors.Is(err, api.ErrInvalidOption) || we.Option != c.option || we.Step != c.step ||
			!strings.Contains(err.Error(), c.option) {
			t.Fatalf("want a WorkflowError naming %s, got %v", c.option, err)
		}
	}
}

// commitGate holds the engine's journal commits while on: an append, once
// committed, waits until the test passes it, so that the engine has not
// observed the commit yet.
type commitGate struct {
	on      atomic.Bool
	held    chan []uint64
	release chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// newCommitGate installs a gate on the engines opened afterwards. Call
// stop in a cleanup registered after setup's, so that it runs first.
func newCommitGate(t *testing.T) *commitGate {
	g := &commitGate{held: make(chan []uint64, 1), release: make(chan struct{}), done: make(chan struct{})}
	api.SetAfterAppendHook(func(seqs []uint64) {
		if !g.on.Load() {
			return
		}
		g.held <- seqs
		select {
		case <-g.release:
		case <-g.done:
		}
	})
	t.Cleanup(func() { api.SetAfterAppendHook(nil) })
	return g
}

// pass lets the held append return.
func (g *commitGate) pass() { g.release <- struct{}{} }

// stop lets every append through from now on.
func (g *commitGate) stop() {
	g.stopped.Do(func() {
		g.on.Store(false)
		close(g.done)
	})
}

// DL-39: one settlement append waits at most min(SettlementTimeout,
// Hr − now), from the instant the settlement is decided, and a root
// installed during the wait shortens the same wait. When it ends without
// a commit the engine stops waiting and marks the attempt Unresolved; it
// never appends a second settlement for the token: the held commit lands
// alone, and replay decides from it.
func TestDL39_SettlementWaitIsCapped(t *testing.T) {
	for _, c := range []struct {
		name       string
		timeout    time.Duration
		rootAt     time.Duration // when a root from t0 is installed; < 0 for none
		rootTotal  time.Duration
		settleAt   time.Duration // when the handler returns and the settlement is decided
		unresolved time.Duration // when the wait ends
	}{
		{"settlement_timeout", 5 * time.Second, -1, 0, time.Second, 6 * time.Second},
		{"root_time_left", 5 * time.Second, 0, time.Second, ms(300), time.Second}, // min(5, 1 − 0.3)
		{"timeout_under_root", ms(200), 0, time.Second, ms(300), ms(500)},
		{"root_during_wait", 5 * time.Second, 2 * time.Second, 3 * time.Second, time.Second, 3 * time.Second}, // 6 → 3
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newCommitGate(t)
			b := setup(t, func(o *api.Options) { o.SettlementTimeout = c.timeout })
			t.Cleanup(g.stop)
			p := workProbe(t, b)
			id := b.enqueue("work", msg{})
			b.start()
			<-p.started
			root := deadlines.NewRoot(t0, c.rootTotal)
			if c.rootAt == 0 {
				if err := api.InstallRoot(b.eng, root); err != nil {
					t.Fatal(err)
				}
			}
			b.moveTo(t0, c.settleAt)
			g.on.Store(true)
			p.ret(nil)
			<-g.held // the settlement is committed, the engine has not observed it
			if c.rootAt > 0 {
				b.clk.Set(t0.Add(c.rootAt))
				if err := api.InstallRoot(b.eng, root); err != nil {
					t.Fatal(err)
				}
			}
			observe := func(d time.Duration) int {
				t.Helper()
				b.clk.Set(t0.Add(d))
				if err := api.Observe(b.eng); err != nil {
					t.Fatal(err)
				}
				return api.QuarantineOf(b.eng).Unresolved
			}
			if n := observe(c.unresolved - 1); n != 0 {
				t.Fatalf("Unresolved %d before the wait ends", n)
			}
			if n := observe(c.unresolved); n != 1 {
				t.Fatalf("Unresolved %d once the wait ends", n)
			}
			g.stop()
			if err := api.Sync(b.eng); err != nil {
				t.Fatal(err)
			}
			if s := b.settlements(id); len(s) != 1 || api.QuarantineOf(b.eng).Unresolved != 1 {
				t.Fatalf("%d settlements, quarantine %+v", len(s), api.QuarantineOf(b.eng))
			}
			b.checkReplay()
		})
	}
}

// DL-39: an already expired root starts no settlement. The engine first
// observes the attempt at Hr = 1, past its cooperative deadline (notified
// at G = 0.75, C = 0.796875): it is abandoned there, its settlement is
// never appended and it counts Unresolved; the late return is fenced, and
// the token stays open for recovery (DL-44).
func TestDL39_ExpiredRootStartsNoSettlement(t *testing.T) {
	b := setup(t, nil)
	p := workProbe(t, b)
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	if err := api.InstallRoot(b.eng, deadlines.NewRoot(t0, time.Second)); err != nil {
		t.Fatal(err)
	}
	b.moveTo(t0, time.Second)
	if q := api.QuarantineOf(b.eng); q.Unresolved != 1 {
		t.Fatalf("quarantine %+v", q)
	}
	p.ret(nil)
	if err := api.WaitQuarantine(b.eng); err != nil {
		t.Fatal(err)
	}
	if err := api.Sync(b.eng); err != nil {
		t.Fatal(err)
	}
	if s := b.settlements(id); len(s) != 0 {
		t.Fatalf("%d settlements after the root expired", len(s))
	}
	b.wantStatus(id, api.JobProcessing)
	if q := api.QuarantineOf(b.eng); q.Fenced != 1 || q.Unresolved != 1 {
		t.Fatalf("quarantine %+v", q)
	}
}

// DL-39: a follow-up append never gets a new budget. The settlement decided
// at C = 1.625 (T = 2 s) waits behind a held commit until 6, and its own
// commit is then held too: it is Unresolved at 1.625 + 5 s, not 5 s after
// its append began, and it is never appended a second time.
func TestDL39_FollowUpAppendGetsNoNewBudget(t *testing.T) {
	g := newCommitGate(t)
	b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
	t.Cleanup(g.stop)
	p := workProbe(t, b)
	id := b.enqueue("work", msg{}, api.MaxAttempts(1)) // buried at C: no retry runs
	b.start()
	<-p.started
	g.on.Store(true)
	enqueued := make(chan error, 1)
	go func() {
		_, err := b.eng.Enqueue(b.ctx, "work", msg{N: 2}, api.Delay(time.Hour))
		enqueued <- err
	}()
	<-g.held // the committer is busy with the enqueue
	observe := func(d time.Duration) int {
		t.Helper()
		b.clk.Set(t0.Add(d))
		if err := api.Observe(b.eng); err != nil {
			t.Fatal(err)
		}
		return api.QuarantineOf(b.eng).Unresolved
	}
	observe(ms(1500)) // notified at P
	observe(ms(1625)) // abandoned at C: the settlement is decided, its wait ends at 6.625
	b.clk.Set(t0.Add(6 * time.Second))
	g.pass() // the enqueue is acknowledged; the settlement's append begins
	<-g.held
	if err := <-enqueued; err != nil {
		t.Fatal(err)
	}
	if n := observe(ms(6625) - 1); n != 0 {
		t.Fatalf("Unresolved %d before the wait ends", n)
	}
	if n := observe(ms(6625)); n != 1 {
		t.Fatalf("Unresolved %d at 6.625: the follow-up append got a new budget", n)
	}
	g.stop()
	if err := api.Sync(b.eng); err != nil {
		t.Fatal(err)
	}
	if s := b.settlements(id); len(s) != 1 || api.QuarantineOf(b.eng).Unresolved != 1 {
		t.Fatalf("%d settlements, quarantine %+v", len(s), api.QuarantineOf(b.eng))
	}
}

// holdAfterAppend installs an after-append hook for t. Once arm is
// called, the next append returns only after it is written and before it
// is acknowledged: holding then receives, and the append waits until
// hold is closed.
func holdAfterAppend(t *testing.T) (arm func(), holding <-chan struct{}, hold chan struct{}) {
	t.Helper()
	hold = make(chan struct{})
	held := make(chan struct{}, 1)
	var on atomic.Bool
	api.SetAfterAppendHook(func(seqs []uint64) {
		if on.CompareAndSwap(true, false) {
			held <- struct{}{}
			<-hold
		}
	})
	t.Cleanup(func() { api.SetAfterAppendHook(nil) })
	return func() { on.Store(true) }, held, hold
}
