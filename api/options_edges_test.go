package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
)

// The name rule refuses a control character wherever it is, the first
// byte of the name included: a queue, handler or workflow name that
// starts with a NUL, a newline or a tab prints as something other than
// the name in qctl's tables and JSON.
func TestNameRule_ControlCharacterAtTheFirstByte(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, rule string }{
		{"\x00mail", "control character U+0000 at byte 0"},
		{"\nmail", "control character U+000A at byte 0"},
		{"\tmail", "control character U+0009 at byte 0"},
	} {
		opts := memOptions()
		opts.Queues = []string{"first", c.name}
		eng, err := api.Open(t.Context(), opts)
		if eng != nil {
			eng.Close(t.Context())
		}
		oe := wantOptionError(t, "Options.Queues "+c.rule, err, "Options.Queues[1]")
		if !errors.Is(err, api.ErrInvalidName) || !strings.Contains(oe.Error(), c.rule) {
			t.Fatalf("Options.Queues[1] = %q: err %v, want ErrInvalidName stating %q", c.name, err, c.rule)
		}

		eng, err = api.Open(t.Context(), memOptions())
		if err != nil {
			t.Fatal(err)
		}
		err = api.Handle(eng, c.name, func(ctx context.Context, d *api.Delivery, in struct{}) error { return nil })
		var ne *api.NameError
		if !errors.As(err, &ne) || ne.Kind != "handler" || !errors.Is(err, api.ErrInvalidName) || !strings.Contains(err.Error(), c.rule) {
			t.Fatalf("Handle(%q): err %v, want a *NameError stating %q", c.name, err, c.rule)
		}
		err = eng.Register(api.NewWorkflow(c.name).Then("step", func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			return nil, nil
		}))
		var we *api.WorkflowError
		if !errors.As(err, &we) || we.Option != "NewWorkflow" || !errors.Is(err, api.ErrInvalidName) || !strings.Contains(err.Error(), c.rule) {
			t.Fatalf("NewWorkflow(%q): err %v, want a *WorkflowError stating %q", c.name, err, c.rule)
		}
		if err := eng.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
