package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
)

// JB-1, RL-4: Enqueue of a payload that contains itself through pointers
// and interfaces only, which msgpack would recurse on without writing a
// byte until the process died, returns ErrInvalidPayload naming the
// cycle, appends nothing, and leaves the engine serving.
func TestJB1_PointerCyclePayloadRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	b.start()
	j := api.JournalOf(b.eng)
	var x any
	x = &x
	for _, c := range []struct {
		name    string
		payload any
	}{
		{"interface holding a pointer to itself", x},
		{"inside a map", map[string]any{"a": &x}},
		{"inside a slice", []any{"ok", x}},
	} {
		before := j.LastSeq()
		id, err := b.eng.Enqueue(b.ctx, "ok", c.payload)
		if !errors.Is(err, api.ErrInvalidPayload) || id != "" || !strings.Contains(err.Error(), "contains itself") {
			t.Fatalf("Enqueue of %s: id %q, err %v; want ErrInvalidPayload naming the cycle", c.name, id, err)
		}
		if after := j.LastSeq(); after != before {
			t.Fatalf("Enqueue of %s appended: seq %d -> %d", c.name, before, after)
		}
	}
	id := b.enqueue("ok", msg{N: 1})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	b.checkReplay()
}
