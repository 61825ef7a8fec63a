package api_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// JB-1, WF-22: Delay counts from an enqueue and is not among the options
// a handler registration layers under each enqueue, so Handle refuses it
// (even Delay(0)) instead of registering the handler and dropping the
// delay. The refusal is an *OptionError naming Delay, matching
// ErrInvalidOption as a workflow step's refusal of Delay does, and it
// registers nothing: the name stays free and unknown to Enqueue.
func TestJB1_HandleRefusesDelayAndRegistersNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		opts    []api.JobOption
		without []api.JobOption // opts less the Delay
	}{
		{"hour, first", []api.JobOption{api.Delay(time.Hour), api.Unique(), api.WithPriority(api.Urgent)},
			[]api.JobOption{api.Unique(), api.WithPriority(api.Urgent)}},
		{"zero, alone", []api.JobOption{api.Delay(0)}, nil},
		{"second, last", []api.JobOption{api.OnQueue("mail"), api.MaxAttempts(5), api.Delay(time.Second)},
			[]api.JobOption{api.OnQueue("mail"), api.MaxAttempts(5)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			err := api.Handle(b.eng, "h", okHandler(nil), c.opts...)
			wantOptionError(t, "Handle with Delay", err, "Delay")
			_, err = b.eng.Enqueue(b.ctx, "h", msg{N: 1})
			if !errors.Is(err, api.ErrUnknownHandler) {
				t.Fatalf("Enqueue after a refused Handle: err = %v, want ErrUnknownHandler", err)
			}
			// The name is still free: the same registration without
			// Delay is accepted, not a duplicate.
			if err := api.Handle(b.eng, "h", okHandler(nil), c.without...); err != nil {
				t.Fatalf("Handle without Delay after the refusal: %v", err)
			}
		})
	}
}
