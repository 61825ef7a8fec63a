package sim

import (
	"strings"
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
