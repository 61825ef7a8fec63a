package scheduler

import (
	"sync"
	"sync/atomic"

	"github.com/quire-dev/quire/journal/record"
)

// watches holds the channels of callers waiting for a stream to change:
// each is closed once a record of its stream is acknowledged. The api's
// AwaitJob and AwaitWorkflow read a job or workflow on the loop, and when
// it has not ended, watch its stream from the same loop step: a record of
// the stream decided after that read is acknowledged after the watch is
// registered, so no change is missed.
type watches struct {
	n  atomic.Int64 // registered channels, read without mu on every ack
	mu sync.Mutex
	by map[string][]chan struct{}
}

// Watch registers w to be closed once a record of stream is acknowledged,
// or removed by [Runner.Unwatch]. Call it from a function given to
// [Runner.Submit], after reading what the caller waits on, so that the
// read and the watch are one step of the loop.
func (r *Runner) Watch(stream string, w chan struct{}) {
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	if r.watch.by == nil {
		r.watch.by = make(map[string][]chan struct{})
	}
	r.watch.by[stream] = append(r.watch.by[stream], w)
	r.watch.n.Add(1)
}

// Unwatch removes w from stream's watchers if it is still registered: a
// caller that stops waiting (its ctx ended) calls it so that watchers do
// not pile up on a stream that does not change. Any goroutine may call it.
func (r *Runner) Unwatch(stream string, w chan struct{}) {
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	ws := r.watch.by[stream]
	for i, c := range ws {
		if c == w {
			ws[i] = ws[len(ws)-1]
			ws[len(ws)-1] = nil
			if ws = ws[:len(ws)-1]; len(ws) == 0 {
				delete(r.watch.by, stream)
			} else {
				r.watch.by[stream] = ws
			}
			r.watch.n.Add(-1)
			return
		}
	}
}

// wakeWatchers closes the watchers of the streams of recs, which are
// acknowledged. It costs an atomic load when nobody watches.
func (r *Runner) wakeWatchers(recs []record.Record) {
	if r.watch.n.Load() == 0 {
		return
	}
	r.watch.mu.Lock()
	defer r.watch.mu.Unlock()
	for i := range recs {
		ws, ok := r.watch.by[recs[i].Stream]
		if !ok {
			continue
		}
		for _, w := range ws {
			close(w)
		}
		delete(r.watch.by, recs[i].Stream)
		r.watch.n.Add(-int64(len(ws)))
	}
}

// Watchers returns how many watch channels are registered: tests use it
// to know a caller is waiting before they change what it waits on.
func (r *Runner) Watchers() int { return int(r.watch.n.Load()) }
