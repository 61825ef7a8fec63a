package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
)

// TestDiskSlowThresholdRange checks Options.DiskSlowThreshold: zero and
// negative (check off) open, values inside 1 ms..1 h open, values outside
// are refused with an *OptionError naming the field, before anything is
// created on disk.
func TestDiskSlowThresholdRange(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{
		{0, true}, {-1, true}, {time.Millisecond, true}, {time.Hour, true},
		{time.Millisecond - 1, false}, {time.Hour + 1, false}, {1, false},
	} {
		fs := vfs.NewMem()
		eng, err := api.Open(context.Background(), api.Options{Dir: "db", FS: fs, DiskSlowThreshold: tc.d})
		if tc.ok {
			if err != nil {
				t.Fatalf("DiskSlowThreshold %v: %v", tc.d, err)
			}
			eng.Close(context.Background())
			continue
		}
		var oe *api.OptionError
		if !errors.As(err, &oe) || oe.Field != "Options.DiskSlowThreshold" || !errors.Is(err, api.ErrInvalidOption) {
			t.Fatalf("DiskSlowThreshold %v: err = %v, want an OptionError naming Options.DiskSlowThreshold", tc.d, err)
		}
		if names, _ := fs.List("db"); len(names) != 0 {
			t.Fatalf("DiskSlowThreshold %v: refused, but db holds %v", tc.d, names)
		}
	}
}

// TestJournalMetricsCountAppends checks that JournalMetrics reads the
// engine's own journal: an enqueue adds one record in one synced group,
// and the counters stay readable after Close.
func TestJournalMetricsCountAppends(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "noop", func(ctx context.Context, d *api.Delivery, in struct{}) error { return nil }); err != nil {
		t.Fatal(err)
	}
	before := b.eng.JournalMetrics()
	if _, err := b.eng.Enqueue(b.ctx, "noop", struct{}{}); err != nil {
		t.Fatal(err)
	}
	m := b.eng.JournalMetrics()
	if m.Records != before.Records+1 || m.Groups != before.Groups+1 || m.Fsyncs <= before.Fsyncs {
		t.Fatalf("after one enqueue: %+v, before: %+v; want one more record in one more synced group", m, before)
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	if after := b.eng.JournalMetrics(); after.Records < m.Records {
		t.Fatalf("after Close: %+v, want at least %+v", after, m)
	}
	b.eng = nil
}
