package api_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

// closeLog records the closes of owned resources and telemetry, in order.
type closeLog struct {
	mu    sync.Mutex
	names []string
}

func (l *closeLog) add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
}

func (l *closeLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

// closerFunc is an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// journaledReport returns the shutdown_report of the engine's previous
// run, reopening the engine on the same files. The new engine is handed
// no resources: the previous one owned them.
func (b *testBundle) journaledReport() *record.ShutdownReport {
	b.t.Helper()
	b.opts.OwnedResources, b.opts.Telemetry = nil, nil
	b.open()
	recs := b.records()
	var rep *record.ShutdownReport
	for _, r := range recs {
		if s, ok := r.Body.(*record.ShutdownReport); ok {
			rep = s
		}
	}
	if rep == nil {
		b.t.Fatal("no shutdown_report in the journal")
	}
	return rep
}

// journaledAction returns the action of component in a journaled report,
// as "graceful/forced".
func journaledAction(t *testing.T, rep *record.ShutdownReport, component string) string {
	t.Helper()
	for i, c := range rep.ActionComponents {
		if c == component {
			return rep.ActionGraceful[i] + "/" + rep.ActionForced[i]
		}
	}
	t.Fatalf("no %s action in %v", component, rep.ActionComponents)
	return ""
}

// Resource report bits as shutdown_report stores them: owned, started,
// terminal, succeeded.
const (
	rrOwned     = 1
	rrStarted   = 2
	rrTerminal  = 4
	rrSucceeded = 8
)

// TestSD16_SD19_OwnedResourcesCloseInReverseAfterCloseEvidence: owned
// resources close once each, in reverse order of hand-over, in phase 5
// after close evidence (SD-18), then telemetry is flushed and closed; a
// caller-owned resource the handlers use is never touched; the outcome is
// in the report and in the journal.
func TestSD16_SD19_OwnedResourcesCloseInReverseAfterCloseEvidence(t *testing.T) {
	var log closeLog
	var phaseAtClose []string
	var b *testBundle
	lastRecord := func() string {
		recs := b.records()
		switch body := recs[len(recs)-1].Body.(type) {
		case *record.ShutdownPhaseStarted:
			return "started " + body.Name
		default:
			return recs[len(recs)-1].Kind().String()
		}
	}
	owned := func(name string) api.OwnedResource {
		return api.OwnedResource{Name: name, Closer: closerFunc(func() error {
			log.add(name)
			phaseAtClose = append(phaseAtClose, lastRecord())
			return nil
		})}
	}
	callerOwned := closerFunc(func() error { log.add("caller-owned"); return nil })
	b = setup(t, func(o *api.Options) {
		o.OwnedResources = []api.OwnedResource{owned("db"), {Name: "cache", CloseFunc: func(ctx context.Context) error {
			log.add("cache")
			return nil
		}}, owned("queue")}
		o.Telemetry = &api.OwnedTelemetry{
			FlushFunc: func(context.Context) error { log.add("flush"); return nil },
			CloseFunc: func(context.Context) error { log.add("telemetry"); return nil },
		}
	})
	if err := api.Handle(b.eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		_ = callerOwned // the application keeps it, and closes it itself
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.enqueue("work", msg{})
	b.start()
	b.idle()
	if got := log.get(); len(got) != 0 {
		t.Fatalf("closed before the shutdown: %v", got)
	}
	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	want := []string{"queue", "cache", "db", "flush", "telemetry"}
	if got := log.get(); len(got) != len(want) {
		t.Fatalf("closed %v, want %v", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("closed %v, want %v", got, want)
			}
		}
	}
	for _, p := range phaseAtClose {
		if p != "started release_resources" {
			t.Fatalf("SD-18: a close ran while the journal's last record was %q", p)
		}
	}
	rep := b.eng.ShutdownReport()
	all := shutdown.ResourceReport{Owned: true, Started: true, Terminal: true, Succeeded: true}
	if rep.Completion != shutdown.GracefulCompleted || rep.Dependencies.OwnedResources != all ||
		rep.Dependencies.Telemetry != all || rep.Dependencies.SignalMonitor != (shutdown.ResourceReport{}) {
		t.Fatalf("report %+v", rep)
	}
	jr := b.journaledReport()
	if got := journaledAction(t, jr, shutdown.ComponentOwnedResources); got != "completed/not_attempted" {
		t.Fatalf("journaled owned-resources action %s", got)
	}
	if jr.Dependencies[0] != rrOwned|rrStarted|rrTerminal|rrSucceeded || jr.Dependencies[2] != jr.Dependencies[0] {
		t.Fatalf("journaled dependencies %v", jr.Dependencies)
	}
}

// TestSD29_SD31d_OwnedClosePanicsOrFails: a close that panics and one that
// returns an error are recorded (terminal, not successful) and do not stop
// the next close; the report is Failed with the owned-resource failure
// code, in memory and in the journal.
func TestSD29_SD31d_OwnedClosePanicsOrFails(t *testing.T) {
	var log closeLog
	b := setup(t, func(o *api.Options) {
		o.OwnedResources = []api.OwnedResource{
			{Name: "db", Closer: closerFunc(func() error { log.add("db"); return nil })},
			{Name: "cache", CloseFunc: func(context.Context) error { log.add("cache"); return errors.New("flush failed") }},
			{Name: "queue", CloseFunc: func(context.Context) error { log.add("queue"); panic("close panics") }},
		}
	})
	err := b.eng.Shutdown(b.ctx)
	if !errors.Is(err, shutdown.ErrFailed) {
		t.Fatalf("shutdown: %v, want ErrFailed", err)
	}
	if got := log.get(); len(got) != 3 || got[0] != "queue" || got[1] != "cache" || got[2] != "db" {
		t.Fatalf("closed %v", got)
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.Failed || rep.FailureCode != shutdown.CodeOwnedResourceCloseFailed ||
		rep.Dependencies.OwnedResources != (shutdown.ResourceReport{Owned: true, Started: true, Terminal: true}) {
		t.Fatalf("report %+v", rep)
	}
	if a := rep.Actions[3]; a.Component != shutdown.ComponentOwnedResources || a.Graceful != shutdown.OutcomePanicked {
		t.Fatalf("action %+v", a)
	}
	jr := b.journaledReport()
	if got := journaledAction(t, jr, shutdown.ComponentOwnedResources); got != "panicked/not_attempted" {
		t.Fatalf("journaled owned-resources action %s", got)
	}
	if jr.Completion != "failed" || jr.FailureCode != shutdown.CodeOwnedResourceCloseFailed ||
		jr.Dependencies[0] != rrOwned|rrStarted|rrTerminal {
		t.Fatalf("journaled report %+v", jr)
	}
}

// TestSD37_HangingOwnedCloseIsAbandonedAtItsShare: a close that ignores its
// context takes only its share of the budget: with four calls in phase 5
// (cache, db, telemetry's flush and close) it gets (30 − 0)/4 = 7.5 s.
// The shutdown then ends at 7.5, far before Hr = 30; db, which cache may
// still use, stays open; telemetry is withheld; the report is Incomplete,
// never a success.
func TestSD37_HangingOwnedCloseIsAbandonedAtItsShare(t *testing.T) {
	var log closeLog
	entered, release := make(chan context.Context, 1), make(chan struct{})
	t.Cleanup(func() { close(release) })
	b := setup(t, func(o *api.Options) {
		o.ShutdownTimeout = 30 * time.Second
		o.OwnedResources = []api.OwnedResource{
			{Name: "db", Closer: closerFunc(func() error { log.add("db"); return nil })},
			{Name: "cache", CloseFunc: func(ctx context.Context) error {
				entered <- ctx
				<-release // ignores ctx
				return nil
			}},
		}
		o.Telemetry = &api.OwnedTelemetry{
			FlushFunc: func(context.Context) error { log.add("flush"); return nil },
			CloseFunc: func(context.Context) error { log.add("telemetry"); return nil },
		}
	})
	endOnFailure(b)
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	ctx := <-entered
	b.clk.Set(t0.Add(ms(7499)))
	select {
	case err := <-res:
		t.Fatalf("shutdown returned before the close's share ended: %v", err)
	default:
	}
	if ctx.Err() != nil {
		t.Fatal("the close's ctx ended before its share")
	}
	b.clk.Set(t0.Add(ms(7500)))
	if err := <-res; !errors.Is(err, shutdown.ErrIncomplete) {
		t.Fatalf("shutdown: %v, want ErrIncomplete", err)
	}
	<-ctx.Done()
	if got := log.get(); len(got) != 0 {
		t.Fatalf("closed %v behind a close that may still use them", got)
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.Incomplete || rep.IsSuccess() || rep.Elapsed != ms(7500) || rep.RuntimeJoined ||
		rep.Quarantined != 1 || rep.Dependencies.OwnedResources != (shutdown.ResourceReport{Owned: true, Started: true}) ||
		rep.Dependencies.Telemetry != (shutdown.ResourceReport{Owned: true}) {
		t.Fatalf("report %+v", rep)
	}
	jr := b.journaledReport()
	if got := journaledAction(t, jr, shutdown.ComponentOwnedResources); got != "timed_out/timed_out" {
		t.Fatalf("journaled owned-resources action %s", got)
	}
	if got := journaledAction(t, jr, shutdown.ComponentTelemetry); got != "timed_out/not_attempted" {
		t.Fatalf("journaled telemetry action %s", got)
	}
	if jr.Completion != "incomplete" || jr.Dependencies[0] != rrOwned|rrStarted || jr.Dependencies[2] != rrOwned {
		t.Fatalf("journaled report %+v", jr)
	}
}

// TestSD35_InvalidOptionsOwnNothing: options that fail validation hand
// nothing over: Open returns the option error and closes nothing.
func TestSD35_InvalidOptionsOwnNothing(t *testing.T) {
	var log closeLog
	c := closerFunc(func() error { log.add("db"); return nil })
	tooMany := make([]api.OwnedResource, api.OwnedResourcesMax+1)
	for i := range tooMany {
		tooMany[i] = api.OwnedResource{Name: "r" + strconv.Itoa(i), Closer: c}
	}
	for _, o := range []api.Options{
		{OwnedResources: tooMany},
		{OwnedResources: []api.OwnedResource{{Name: "db", Closer: c, CloseFunc: func(context.Context) error { return nil }}}},
		{OwnedResources: []api.OwnedResource{{Closer: c}}},
		{OwnedResources: []api.OwnedResource{{Name: "db", Closer: c}}, Workers: -1},
		{OwnedResources: []api.OwnedResource{{Name: "db", Closer: c}}, Telemetry: &api.OwnedTelemetry{}},
	} {
		o.FS = vfs.NewMem()
		if _, err := api.Open(context.Background(), o); !errors.Is(err, api.ErrInvalidOption) {
			t.Fatalf("open: %v, want an option error", err)
		}
	}
	// Names identify resources in diagnostics: a second "db" is refused,
	// and the error names it.
	dup := []api.OwnedResource{{Name: "db", Closer: c}, {Name: "cache", Closer: c}, {Name: "db", Closer: c}}
	_, err := api.Open(context.Background(), api.Options{FS: vfs.NewMem(), OwnedResources: dup})
	var oe *api.OptionError
	if !errors.As(err, &oe) || oe.Field != "Options.OwnedResources[2].Name" || oe.Value != "db" {
		t.Fatalf("open with two resources named db: %v, want an option error naming Options.OwnedResources[2].Name", err)
	}
	if got := log.get(); len(got) != 0 {
		t.Fatalf("closed %v", got)
	}
}
