package api_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// Open validates the options once, at the boundary (DESIGN §1.6), so it
// must keep its own copy of every slice it reads later. It used to keep the
// caller's Middleware, Guards and backoff lists: a caller that
// reused its Options after Open could put a nil middleware into every
// attempt (MIDDLEWARE_PANICKED) or a retry delay out of DL-4's range into
// the journal, neither ever validated. Here the caller overwrites every
// slice after Open and Handle; the engine runs as it was configured.
func TestOpenKeepsItsOwnCopyOfOptionSlices(t *testing.T) {
	t.Parallel()
	var rec recorder
	mw := func(name string) api.Middleware {
		return api.MiddlewareFuncs{Label: name, BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			rec.add(name)
			return nil
		}}
	}
	guard := func(name string) api.Guard {
		return func(ctx context.Context, d *api.Delivery) error { rec.add(name); return nil }
	}
	b := setup(t, func(o *api.Options) {
		o.Workers = 1
		o.Middleware = []api.Middleware{mw("global")}
		o.Guards = []api.Guard{guard("global-guard")}
		o.Backoff = api.BackoffPolicy{Kind: api.BackoffList, List: []time.Duration{5 * time.Minute}}
		o.QueueOptions = map[string]api.QueueOptions{"q": {
			Middleware: []api.Middleware{mw("queue")},
			Guards:     []api.Guard{guard("queue-guard")},
			Backoff:    &api.BackoffPolicy{Kind: api.BackoffList, List: []time.Duration{6 * time.Minute}},
		}}
	})
	handlerList := []time.Duration{7 * time.Minute}
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error {
		rec.add("run " + d.Queue())
		if d.Attempt() == 1 && in.N > 0 {
			return errors.New("once")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "hb", func(ctx context.Context, d *api.Delivery, in msg) error {
		return errors.New("once")
	}, api.Backoff(api.BackoffPolicy{Kind: api.BackoffList, List: handlerList})); err != nil {
		t.Fatal(err)
	}
	// The caller reuses its slices: each write is one Open or Handle
	// would have refused.
	b.opts.Middleware[0] = nil
	b.opts.Guards[0] = nil
	b.opts.Backoff.List[0] = time.Nanosecond
	q := b.opts.QueueOptions["q"]
	q.Middleware[0], q.Guards[0], q.Backoff.List[0] = nil, nil, time.Nanosecond
	handlerList[0] = time.Nanosecond

	ja := b.enqueue("h", msg{}, api.OnQueue("a"))
	jb := b.enqueue("h", msg{}, api.OnQueue("b"))
	b.start()
	b.idle()
	b.wantStatus(ja, api.JobCompleted)
	b.wantStatus(jb, api.JobCompleted)
	want := []string{"global", "global-guard", "run a", "global", "global-guard", "run b"}
	if got := rec.get(); !slices.Equal(got, want) {
		t.Fatalf("attempts ran %q, want %q", got, want)
	}

	// DL-4, DL-5: the retry delays are the configured ones; DL-27: queue
	// q's attempt runs its queue's middleware and guard.
	for _, c := range []struct {
		handler, queue string
		delay          time.Duration
		ran            []string
	}{
		{"h", api.QueueDefault, 5 * time.Minute, []string{"global", "global-guard", "run default"}},
		{"h", "q", 6 * time.Minute, []string{"global", "queue", "global-guard", "queue-guard", "run q"}},
		{"hb", api.QueueDefault, 7 * time.Minute, []string{"global", "global-guard"}},
	} {
		n := len(rec.get())
		id := b.enqueue(c.handler, msg{N: 1}, api.OnQueue(c.queue))
		b.idle()
		j := b.wantStatus(id, api.JobPending)
		if got := j.AvailableAt.Sub(b.clk.Now()); got != c.delay {
			t.Errorf("%s on %s: retry available in %v, want %v", c.handler, c.queue, got, c.delay)
		}
		if got := rec.get()[n:]; !slices.Equal(got, c.ran) {
			t.Errorf("%s on %s: attempt ran %q, want %q", c.handler, c.queue, got, c.ran)
		}
	}
}
