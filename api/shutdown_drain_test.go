package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/shutdown"
)

// TestSD13_DrainWaitsForAGoroutineAbandonedBeforeTheShutdown: the drain's
// graceful path is Completed only once every attempt goroutine has
// returned (SD-13), those abandoned before the shutdown included. An
// attempt abandoned at its own timeout whose handler returns during the
// drain, long before G, leaves a graceful shutdown: the runtime joined,
// the owned resources closed (SD-18). The drain used to stop at the
// settlements, so the goroutine still counted quarantined when the drain
// was judged, the owned resources were withheld and never closed, and the
// report was Incomplete although everything returned within the budget.
func TestSD13_DrainWaitsForAGoroutineAbandonedBeforeTheShutdown(t *testing.T) {
	var log closeLog
	b := setup(t, func(o *api.Options) {
		o.DeliveryTimeout = 2 * time.Second
		o.MaxAttempts = 1
		o.OwnedResources = []api.OwnedResource{
			{Name: "db", Closer: closerFunc(func() error { log.add("db"); return nil })},
		}
	})
	endOnFailure(b)
	started, release := make(chan struct{}, 1), make(chan struct{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	if err := api.Handle(b.eng, "stuck", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- struct{}{}
		<-release // ignores its context
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.enqueue("stuck", msg{})
	b.start()
	<-started
	b.moveTo(t0, ms(1625)) // abandoned at C = 1.5 s + 125 ms (DL-26), buried
	b.idle()
	if q := api.QuarantineOf(b.eng); q.Executions != 1 {
		t.Fatalf("quarantine %+v, want the execution quarantined", q)
	}

	waiting := make(chan struct{}, 1)
	api.SetDrainJoinHook(func() { waiting <- struct{}{} })
	t.Cleanup(func() { api.SetDrainJoinHook(nil) })
	res := make(chan error, 1)
	go func() { res <- b.eng.Shutdown(b.ctx) }()
	select {
	case <-waiting:
	case err := <-res:
		t.Fatalf("SD-13: the shutdown ended (%v, report %+v) without waiting for the quarantined goroutine", err, b.eng.ShutdownReport())
	}
	released = true
	close(release) // returns at 1.625 s, before G = 28 s
	if err := <-res; err != nil {
		t.Fatalf("shutdown: %v (report %+v)", err, b.eng.ShutdownReport())
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.GracefulCompleted || !rep.RuntimeJoined || !rep.DrainReconciled ||
		rep.Quarantined != 0 || rep.Forced || rep.Elapsed != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := log.get(); len(got) != 1 || got[0] != "db" {
		t.Fatalf("owned resources closed: %v, want db", got)
	}
}

// TestSD25_UnresolvedBeforeTheShutdownIsNotTheShutdowns: the report counts
// the settlements the shutdown could not confirm (SD-25). A settlement
// whose wait ran out before the shutdown (DL-39), and whose commit landed
// since, is not one of them: the drain found every commit acknowledged,
// so a later graceful shutdown is GracefulCompleted and closes the owned
// resources. The report used to count every Unresolved since Open, so one
// slow commit at any time made every later report Incomplete, with its
// owned resources withheld.
func TestSD25_UnresolvedBeforeTheShutdownIsNotTheShutdowns(t *testing.T) {
	var log closeLog
	g := newCommitGate(t)
	b := setup(t, func(o *api.Options) {
		o.SettlementTimeout = 5 * time.Second
		o.OwnedResources = []api.OwnedResource{
			{Name: "db", Closer: closerFunc(func() error { log.add("db"); return nil })},
		}
	})
	t.Cleanup(g.stop)
	p := workProbe(t, b)
	id := b.enqueue("work", msg{})
	b.start()
	<-p.started
	g.on.Store(true)
	p.ret(nil)
	<-g.held                           // the settlement is committed, the engine has not observed it
	b.clk.Set(t0.Add(5 * time.Second)) // its wait ends: Unresolved (DL-39)
	if err := api.Observe(b.eng); err != nil {
		t.Fatal(err)
	}
	if q := api.QuarantineOf(b.eng); q.Unresolved != 1 {
		t.Fatalf("quarantine %+v, want the settlement unresolved", q)
	}
	g.stop() // the commit lands
	b.idle()
	if s := b.settlements(id); len(s) != 1 {
		t.Fatalf("%d settlements", len(s))
	}

	if err := b.eng.Shutdown(b.ctx); err != nil {
		t.Fatalf("shutdown: %v (report %+v)", err, b.eng.ShutdownReport())
	}
	rep := b.eng.ShutdownReport()
	if rep.Completion != shutdown.GracefulCompleted || rep.Unresolved != 0 || !rep.DrainReconciled || !rep.CloseReconciled {
		t.Fatalf("report %+v", rep)
	}
	if got := log.get(); len(got) != 1 || got[0] != "db" {
		t.Fatalf("owned resources closed: %v, want db", got)
	}
}
