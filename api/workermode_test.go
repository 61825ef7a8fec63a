package api_test

import (
	"errors"
	"testing"

	"github.com/quire-dev/quire/api"
)

// JB-9: RunOnce is its own worker mode. On an engine started long-running
// it used to work off what was eligible and then close the engine under
// its owner, returning nil. It is refused with ErrState instead, appends
// nothing, and the engine keeps running.
func TestJB9_RunOnceRefusesStartedEngine(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "ok", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	b.start()
	before := api.JournalOf(b.eng).LastSeq()
	if err := b.eng.RunOnce(b.ctx); !errors.Is(err, api.ErrState) {
		t.Fatalf("JB-9: RunOnce on a started engine: err = %v, want one matching ErrState", err)
	}
	if after := api.JournalOf(b.eng).LastSeq(); after != before {
		t.Fatalf("refused RunOnce appended: seq %d -> %d", before, after)
	}
	if !b.eng.Ready() || b.eng.Lifecycle() != api.Ready {
		t.Fatalf("after a refused RunOnce: lifecycle %v, ready %v; want the engine still running", b.eng.Lifecycle(), b.eng.Ready())
	}
	id := b.enqueue("ok", msg{N: 1})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
}

// JB-9: while RunOnce works off an engine it will close, Start cannot
// turn it into a long-running one: it is refused with ErrState, and
// RunOnce still closes the engine when nothing more is eligible.
func TestJB9_StartRefusedDuringRunOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	started, release := blocking(t, b.eng)
	b.enqueue("block", msg{})
	res := make(chan error, 1)
	go func() { res <- b.eng.RunOnce(b.ctx) }()
	<-started
	if err := b.eng.Start(b.ctx); !errors.Is(err, api.ErrState) {
		t.Fatalf("JB-9: Start during RunOnce: err = %v, want one matching ErrState", err)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if l := b.eng.Lifecycle(); l != api.Stopped {
		t.Fatalf("after RunOnce: lifecycle %v, want stopped", l)
	}
}
