package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// TestJB5_UniqueWithMapPayload: the unique key hashes the canonical
// encoding, so a payload holding a map msgpack writes in Go's iteration
// order (map[string]int) still dedupes: the second Enqueue returns the
// first job's id and appends nothing, even from a copy filled in another
// order.
func TestJB5_UniqueWithMapPayload(t *testing.T) {
	b := setup(t, nil)
	type tally struct {
		Day    string         `msgpack:"day"`
		Counts map[string]int `msgpack:"counts"`
	}
	if err := api.Handle(b.eng, "tally", func(ctx context.Context, d *api.Delivery, in tally) error {
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fill := func(rev bool) tally {
		p := tally{Day: "2024-01-01", Counts: map[string]int{}}
		for i := range 20 {
			if rev {
				i = 19 - i
			}
			p.Counts[fmt.Sprintf("metric_%02d", i)] = i * 7
		}
		return p
	}
	first := b.enqueue("tally", fill(false), api.Unique())
	before := b.lastSeq()
	for i := range 10 {
		if again := b.enqueue("tally", fill(i%2 == 1), api.Unique()); again != first {
			t.Fatalf("unique enqueue %d: id %s, first %s", i, again, first)
		}
	}
	if b.lastSeq() != before {
		t.Fatalf("unique enqueues appended: seq %d -> %d", before, b.lastSeq())
	}
	if n := countKind(b.records(), record.KindJobEnqueued); n != 1 {
		t.Fatalf("%d job_enqueued, want 1", n)
	}
	b.checkReplay()
}

// TestJB5_UniqueStructAndMapAreOnePayload: the canonical encoding sorts a
// struct's fields too, so a struct whose fields are not declared in key
// order and a map holding the same fields are one payload: the map's
// unique Enqueue returns the struct's job and appends nothing.
func TestJB5_UniqueStructAndMapAreOnePayload(t *testing.T) {
	b := setup(t, nil)
	type mail struct {
		To string `msgpack:"to"`
		Cc string `msgpack:"cc"`
	}
	if err := api.Handle(b.eng, "mail", func(ctx context.Context, d *api.Delivery, in mail) error {
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first := b.enqueue("mail", mail{To: "a@x", Cc: "b@x"}, api.Unique())
	before := b.lastSeq()
	if again := b.enqueue("mail", map[string]any{"cc": "b@x", "to": "a@x"}, api.Unique()); again != first {
		t.Fatalf("the map's unique enqueue: id %s, the struct's %s", again, first)
	}
	if b.lastSeq() != before {
		t.Fatalf("the map's unique enqueue appended: seq %d -> %d", before, b.lastSeq())
	}
	b.checkReplay()
}
