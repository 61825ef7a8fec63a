package scheduler

import (
	"testing"

	"github.com/quire-dev/quire/journal/record"
)

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Watchers of a stream are woken by the first acknowledged record of
// that stream and no other; Unwatch removes one watcher and keeps the
// rest of its stream's.
func TestWatchWakesTheStreamsWatchersOnce(t *testing.T) {
	var r Runner
	a1, a2, a3, b1 := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	r.Watch("job_a", a1)
	r.Watch("job_a", a2)
	r.Watch("job_a", a3)
	r.Watch("wf_b", b1)
	r.Unwatch("job_a", a1)
	r.Unwatch("job_a", a1) // a second removal changes nothing
	r.Unwatch("wf_c", b1)  // nor does one under another stream
	if n := r.Watchers(); n != 3 {
		t.Fatalf("%d watchers, want 3", n)
	}

	r.wakeWatchers([]record.Record{{Seq: 1, Stream: record.EngineStream}, {Seq: 2, Stream: "job_a"}, {Seq: 3, Stream: "job_a"}})
	if closed(a1) || !closed(a2) || !closed(a3) || closed(b1) {
		t.Fatalf("woken: a1 %v a2 %v a3 %v b1 %v; want a2 and a3 only", closed(a1), closed(a2), closed(a3), closed(b1))
	}
	if n := r.Watchers(); n != 1 {
		t.Fatalf("%d watchers after the wake, want 1", n)
	}
	r.Unwatch("job_a", a2) // woken already: nothing to remove
	r.Unwatch("wf_b", b1)
	if n := r.Watchers(); n != 0 || len(r.watch.by) != 0 {
		t.Fatalf("%d watchers and %d streams left, want none", n, len(r.watch.by))
	}
	r.wakeWatchers([]record.Record{{Seq: 4, Stream: "wf_b"}})
	if closed(b1) {
		t.Fatal("an unwatched channel was closed")
	}
}
