package sim

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quire-dev/quire/api"
)

// An EngineOptions function that sets the middleware list keeps the
// world's own in front of it: it notes each handler call for the
// oracle's RL-10 check, which would otherwise pass without looking.
func TestEngineOptionsKeepTheWorldsMiddleware(t *testing.T) {
	w := New(1, EngineOptions(func(o *api.Options) {
		o.Middleware = []api.Middleware{api.MiddlewareFuncs{Label: "app"}}
	}))
	o, replaced := w.options()
	if len(replaced) > 0 {
		t.Fatalf("replaced %v", replaced)
	}
	var labels []string
	for _, m := range o.Middleware {
		f, ok := m.(api.MiddlewareFuncs)
		if !ok {
			t.Fatalf("middleware %T", m)
		}
		labels = append(labels, f.Label)
	}
	if strings.Join(labels, ",") != "sim,app" {
		t.Fatalf("middleware %v, want sim, then app", labels)
	}
}

// spinUntil works, never blocking, until stop is set: a goroutine of
// another test that computes.
//
//go:noinline
func spinUntil(started, stop *atomic.Bool) {
	started.Store(true)
	for !stop.Load() {
	}
}

// The watchdog's message lists the goroutines that kept the world from
// its quiescent point, and only them.
func TestBusyListsWorkingGoroutines(t *testing.T) {
	defer spinners(t, 1)()
	buf := make([]byte, 64<<10)
	got := busy(&buf)
	if !strings.Contains(got, "sim.spinUntil") {
		t.Fatalf("busy does not list the spinning goroutine:\n%s", got)
	}
	if strings.Contains(got, "TestBusyListsWorkingGoroutines(") {
		t.Fatalf("busy lists its caller:\n%s", got)
	}
	if strings.Contains(got, "[chan receive") || strings.Contains(got, "[select") {
		t.Fatalf("busy lists blocked goroutines:\n%s", got)
	}
}
