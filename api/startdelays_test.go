package api_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
)

// Quantile picks the upper bound of the bucket holding the rank; the
// overflow bucket answers with the last bound; nothing counted is 0. Sub
// subtracts bucket by bucket.
func TestStartDelaysQuantileAndSub(t *testing.T) {
	bounds := []time.Duration{20 * time.Microsecond, 25 * time.Microsecond, 30 * time.Microsecond}
	s := api.StartDelays{Bounds: bounds, Counts: []uint64{90, 9, 1, 0}}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 20 * time.Microsecond},
		{0.9, 20 * time.Microsecond},
		{0.91, 25 * time.Microsecond},
		{0.99, 25 * time.Microsecond},
		{1, 30 * time.Microsecond},
		{0, 20 * time.Microsecond},
	} {
		if got := s.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	over := api.StartDelays{Bounds: bounds, Counts: []uint64{1, 0, 0, 3}}
	if got := over.Quantile(0.5); got != 30*time.Microsecond {
		t.Errorf("Quantile in the overflow bucket = %v, want the last bound", got)
	}
	// q = 0 is the smallest delay counted, not the first bucket.
	if got := (api.StartDelays{Bounds: bounds, Counts: []uint64{0, 5, 0, 0}}).Quantile(0); got != 25*time.Microsecond {
		t.Errorf("Quantile(0) with the first bucket empty = %v, want 25µs", got)
	}
	if got := (api.StartDelays{Bounds: bounds, Counts: make([]uint64, 4)}).Quantile(0.99); got != 0 {
		t.Errorf("Quantile of nothing = %v, want 0", got)
	}
	d := s.Sub(api.StartDelays{Bounds: bounds, Counts: []uint64{80, 9, 0, 0}})
	if !slices.Equal(d.Counts, []uint64{10, 0, 1, 0}) || d.Total() != 11 {
		t.Errorf("Sub: counts %v total %d, want [10 0 1 0] and 11", d.Counts, d.Total())
	}
	if s.Counts[0] != 90 {
		t.Errorf("Sub changed its receiver: %v", s.Counts)
	}
	// Readings swapped: no bucket wraps around to nearly 2^64.
	if w := (api.StartDelays{Bounds: bounds, Counts: []uint64{80, 9, 0, 0}}).Sub(s); !slices.Equal(w.Counts, []uint64{0, 0, 0, 0}) {
		t.Errorf("Sub of a later reading: counts %v, want all 0", w.Counts)
	}
}

// Every execution counts once, retries included, and an attempt
// acknowledged while the clock stands still starts within the first
// bucket.
func TestStartDelaysCountEveryExecution(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "flaky", func(ctx context.Context, d *api.Delivery, in msg) error {
		if d.Attempt() < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "ok", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := b.eng.StartDelays().Total(); got != 0 {
		t.Fatalf("%d start delays before anything ran", got)
	}
	flaky := b.enqueue("flaky", msg{})
	b.enqueue("ok", msg{})
	b.start()
	b.idle()
	b.advance(time.Second) // attempt 2
	b.advance(2 * time.Second)
	b.wantStatus(flaky, api.JobCompleted)
	s := b.eng.StartDelays()
	if len(s.Counts) != len(s.Bounds)+1 {
		t.Fatalf("%d counts for %d bounds", len(s.Counts), len(s.Bounds))
	}
	if s.Total() != 4 || s.Counts[0] != 4 {
		t.Fatalf("start delays %v, want all 4 executions (3 of flaky, 1 of ok) in the first bucket", s.Counts)
	}
}
