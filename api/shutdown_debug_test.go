package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
)

// TestSD28_OwnedCloseErrorTextInDebugRecords: the report keeps only the
// failure code (SD-28), so an operator learns which owned resource failed
// to close, and why, from the debug records phase 5 appends: one per
// failed or panicking close, naming the resource, between phase 5's
// started and finished records. A close that succeeds gets none. The
// records are inert for replay (RL-7).
func TestSD28_OwnedCloseErrorTextInDebugRecords(t *testing.T) {
	b := setup(t, func(o *api.Options) {
		o.OwnedResources = []api.OwnedResource{
			{Name: "db", Closer: closerFunc(func() error { return nil })},
			{Name: "cache", CloseFunc: func(context.Context) error { return errors.New("flush failed: disk full") }},
			{Name: "queue", CloseFunc: func(context.Context) error { panic("queue close panics") }},
		}
	})
	b.start()
	b.checkReplay()
	if err := b.eng.Shutdown(b.ctx); !errors.Is(err, shutdown.ErrFailed) {
		t.Fatalf("shutdown: %v, want ErrFailed", err)
	}
	b.opts.OwnedResources = nil
	b.open()
	b.checkReplay()

	var got []string
	inPhase5 := false
	for _, r := range b.records() {
		switch body := r.Body.(type) {
		case *record.ShutdownPhaseStarted:
			inPhase5 = body.Phase == int8(shutdown.PhaseReleaseResources)
		case *record.ShutdownPhaseFinished:
			inPhase5 = false
		case *record.Debug:
			if !inPhase5 {
				t.Fatalf("debug record outside phase 5: %+v", body)
			}
			got = append(got, body.Subject+" "+body.Code+" "+body.Message)
		}
	}
	want := []string{
		"owned-resources/queue OWNED_RESOURCE_CLOSE_FAILED panicked: queue close panics",
		"owned-resources/cache OWNED_RESOURCE_CLOSE_FAILED failed: flush failed: disk full",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("debug records:\n got %q\nwant %q", got, want)
	}
}
