package api_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quire-dev/quire/api"
)

// wantBadArgument checks that err is a *NameError naming name and that it
// matches ErrInvalidOption, the error of every bad argument.
func wantBadArgument(t *testing.T, what string, err error, kind, name string) {
	t.Helper()
	var ne *api.NameError
	if !errors.As(err, &ne) || ne.Kind != kind || ne.Name != name || !errors.Is(err, api.ErrInvalidOption) {
		t.Fatalf("%s: err = %v, want a *NameError naming %s %q that matches ErrInvalidOption", what, err, kind, name)
	}
}

// A nil func given to Handle or HandleDeadline is a bad argument like a
// nil step func given to the workflow builder (WF-2, WD-2): a *NameError
// naming the handler that matches ErrInvalidOption. Nothing is
// registered, so the name stays free.
func TestHandle_NilFuncMatchesErrInvalidOption(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	wantBadArgument(t, "Handle(nil fn)", api.Handle[msg](b.eng, "h", nil), "handler", "h")
	wantBadArgument(t, "HandleDeadline(nil fn)", api.HandleDeadline(b.eng, "d", nil), "deadline handler", "d")
	if err := api.Handle(b.eng, "h", func(ctx context.Context, d *api.Delivery, in msg) error { return nil }); err != nil {
		t.Fatalf("Handle after a refused one: %v", err)
	}
	if err := api.HandleDeadline(b.eng, "d", func(ctx context.Context, st api.State) error { return nil }); err != nil {
		t.Fatalf("HandleDeadline after a refused one: %v", err)
	}
}
