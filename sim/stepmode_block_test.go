package sim_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// In step mode a handler that blocks on something of the test's (here a
// channel) is a quiescent point like any other wait: the step that started
// it returns with the handler blocked, and the test decides when it goes on.
// Outside step mode the world waits for the engine to be idle, which such a
// handler never lets it be ("Limits" in the package documentation).
func TestStepModeHandlerBlockedOnTheTestIsQuiescent(t *testing.T) {
	w := sim.New(1, sim.WithT(t), sim.StepMode())
	release := make(chan struct{})
	var entered, returned atomic.Bool
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		entered.Store(true)
		<-release
		returned.Store(true)
		return nil
	})
	id := w.Enqueue("a", msg{N: 1})
	if w.Failed() {
		t.Fatal(w.Err())
	}
	if !entered.Load() || returned.Load() {
		t.Fatalf("after the enqueue's step: handler entered %v, returned %v; want it blocked on the test's channel",
			entered.Load(), returned.Load())
	}
	if st := w.Job(id).Status; st != api.JobProcessing {
		t.Fatalf("job %s is %v while its handler is blocked, want processing", id, st)
	}
	close(release)
	w.Advance(time.Second)
	if st := w.Job(id).Status; st != api.JobCompleted {
		t.Fatalf("job %s is %v once its handler was let go, want completed", id, st)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}
