package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/deadlines"
)

// wantOptionError checks that err is an *OptionError naming field as the
// caller writes it, whose text names it too and carries no internal
// package prefix or internal field name.
func wantOptionError(t *testing.T, what string, err error, field string) *api.OptionError {
	t.Helper()
	var oe *api.OptionError
	if !errors.As(err, &oe) || !errors.Is(err, api.ErrInvalidOption) {
		t.Fatalf("%s: err = %v, want an *OptionError", what, err)
	}
	if oe.Field != field {
		t.Fatalf("%s: Field = %q, want %q (err %v)", what, oe.Field, field, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, field) {
		t.Fatalf("%s: %q does not name %s", what, msg, field)
	}
	// DL-4's names of the policy's fields; the kind constant BackoffList
	// is the api's own and may appear.
	for _, internal := range []string{"deadlines:", "BackoffBase", "MaxBackoff", ".BackoffList", "Backoff.Backoff"} {
		if strings.Contains(msg, internal) {
			t.Fatalf("%s: %q exposes %q", what, msg, internal)
		}
	}
	return oe
}

// Options that fail validation name the field as written in Options: a
// duplicate queue in Options.Queues, and the fields of a BackoffPolicy
// under their struct names (Base, Max, Kind, List), not DL-4's.
func TestOptions_ErrorsNameFieldsAsWritten(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	for _, c := range []struct {
		name  string
		opts  api.Options
		field string
	}{
		{"duplicate queue", api.Options{Queues: []string{"a", "b", "a"}}, "Options.Queues[2]"},
		{"DeliveryTimeout", api.Options{DeliveryTimeout: time.Millisecond}, "Options.DeliveryTimeout"},
		{"MaxAttempts", api.Options{MaxAttempts: 101}, "Options.MaxAttempts"},
		{"Backoff.Base", api.Options{Backoff: api.BackoffPolicy{Base: time.Millisecond}}, "Options.Backoff.Base"},
		{"Backoff.Max", api.Options{Backoff: api.BackoffPolicy{Base: 2 * time.Second, Max: time.Second}}, "Options.Backoff.Max"},
		{"Backoff.Kind", api.Options{Backoff: api.BackoffPolicy{Kind: 99}}, "Options.Backoff.Kind"},
		{"Backoff.JitterRatio", api.Options{Backoff: api.BackoffPolicy{JitterRatio: 0.9}}, "Options.Backoff.JitterRatio"},
		{"queue Backoff.List", api.Options{QueueOptions: map[string]api.QueueOptions{
			"q": {Backoff: &api.BackoffPolicy{Kind: api.BackoffList}}}}, `Options.QueueOptions["q"].Backoff.List`},
		{"queue Backoff.List entry", api.Options{QueueOptions: map[string]api.QueueOptions{
			"q": {Backoff: &api.BackoffPolicy{Kind: api.BackoffList, List: []time.Duration{time.Second, time.Hour}}}}},
			`Options.QueueOptions["q"].Backoff.List[1]`},
	} {
		c.opts.FS, c.opts.Dir = fs, "db"
		e, err := api.Open(context.Background(), c.opts)
		if e != nil {
			e.Close(context.Background())
		}
		wantOptionError(t, c.name, err, c.field)
	}
	_, err := api.Open(context.Background(), api.Options{FS: fs, Dir: "db", Queues: []string{"a", "a"}})
	if oe := wantOptionError(t, "duplicate queue", err, "Options.Queues[1]"); oe.Value != "a" || !strings.Contains(oe.Reason, "Queues[0]") {
		t.Fatalf("duplicate queue: Value %v, Reason %q: want the duplicate and the first index", oe.Value, oe.Reason)
	}
	// The range error stays reachable for callers that branch on it.
	_, err = api.Open(context.Background(), api.Options{FS: fs, Dir: "db", Backoff: api.BackoffPolicy{Base: time.Millisecond}})
	var re *deadlines.RangeError
	if !errors.As(err, &re) || !errors.Is(err, deadlines.ErrOutOfRange) {
		t.Fatalf("Backoff.Base: %v does not wrap a *deadlines.RangeError", err)
	}
}

// JB-1, DL-4: job options that fail validation name the option as the
// caller writes it (Backoff.Base for the Backoff option's Base field).
func TestJB1_JobOptionErrorsNameFieldsAsWritten(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opt   api.JobOption
		field string
	}{
		{api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: -1}), "Backoff.Base"},
		{api.Backoff(api.BackoffPolicy{Max: time.Hour}), "Backoff.Max"},
		{api.Backoff(api.BackoffPolicy{Kind: 99}), "Backoff.Kind"},
		{api.MaxAttempts(0), "MaxAttempts"},
		{api.DeliveryTimeout(time.Millisecond), "DeliveryTimeout"},
	} {
		_, err := b.eng.Enqueue(b.ctx, "ok", msg{N: 1}, c.opt)
		wantOptionError(t, c.field, err, c.field)
	}
}
