package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// Every numeric field of Options is accepted at both ends of its range,
// refused just past either end with an *OptionError naming it, and takes
// its documented default when zero.
func TestOptions_EveryFieldAtItsBoundsAndDefault(t *testing.T) {
	t.Parallel()
	type set func(*api.Options)
	for _, c := range []struct {
		field    string
		ok, bad  []set
		zero     set
		got      func(api.Options) any
		fallback any
	}{
		{"Options.Workers",
			[]set{func(o *api.Options) { o.Workers = 1 }, func(o *api.Options) { o.Workers = api.WorkersMax }},
			[]set{func(o *api.Options) { o.Workers = -1 }, func(o *api.Options) { o.Workers = api.WorkersMax + 1 }},
			func(o *api.Options) { o.Workers = 0 }, func(o api.Options) any { return o.Workers }, api.WorkersDefault},
		{"Options.DeliveryTimeout",
			[]set{func(o *api.Options) { o.DeliveryTimeout = 100 * time.Millisecond }, func(o *api.Options) { o.DeliveryTimeout = 900 * time.Second }},
			[]set{func(o *api.Options) { o.DeliveryTimeout = 99 * time.Millisecond }, func(o *api.Options) { o.DeliveryTimeout = 900*time.Second + 1 }},
			func(o *api.Options) { o.DeliveryTimeout = 0 }, func(o api.Options) any { return o.DeliveryTimeout }, 30 * time.Second},
		{"Options.SettlementTimeout",
			[]set{func(o *api.Options) { o.SettlementTimeout = time.Millisecond }, func(o *api.Options) { o.SettlementTimeout = time.Minute }},
			[]set{func(o *api.Options) { o.SettlementTimeout = time.Millisecond - 1 }, func(o *api.Options) { o.SettlementTimeout = time.Minute + 1 }},
			func(o *api.Options) { o.SettlementTimeout = 0 }, func(o api.Options) any { return o.SettlementTimeout }, 5 * time.Second},
		{"Options.MaxAttempts",
			[]set{func(o *api.Options) { o.MaxAttempts = 1 }, func(o *api.Options) { o.MaxAttempts = 100 }},
			[]set{func(o *api.Options) { o.MaxAttempts = -1 }, func(o *api.Options) { o.MaxAttempts = 101 }},
			func(o *api.Options) { o.MaxAttempts = 0 }, func(o api.Options) any { return o.MaxAttempts }, 3},
		{"Options.ShutdownTimeout",
			[]set{func(o *api.Options) { o.ShutdownTimeout = time.Second }, func(o *api.Options) { o.ShutdownTimeout = api.DelayMax }},
			[]set{func(o *api.Options) { o.ShutdownTimeout = time.Second - 1 }, func(o *api.Options) { o.ShutdownTimeout = api.DelayMax + 1 }},
			func(o *api.Options) { o.ShutdownTimeout = 0 }, func(o api.Options) any { return o.ShutdownTimeout }, 30 * time.Second},
		{"Options.DeadlineCheckInterval",
			[]set{func(o *api.Options) { o.DeadlineCheckInterval = 10 * time.Millisecond }},
			[]set{func(o *api.Options) { o.DeadlineCheckInterval = 10*time.Millisecond - 1 }},
			func(o *api.Options) { o.DeadlineCheckInterval = 0 }, func(o api.Options) any { return o.DeadlineCheckInterval }, time.Minute},
		{"Options.RecordBytesMax",
			[]set{func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMin }, func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMaxLimit }},
			[]set{func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMin - 1 }, func(o *api.Options) { o.RecordBytesMax = api.RecordBytesMaxLimit + 1 }},
			func(o *api.Options) { o.RecordBytesMax = 0 }, func(o api.Options) any { return o.RecordBytesMax }, 1 << 20},
		{"Options.PayloadBytesMax",
			[]set{func(o *api.Options) { o.PayloadBytesMax = api.PayloadBytesMin },
				func(o *api.Options) {
					o.RecordBytesMax, o.PayloadBytesMax = api.RecordBytesMaxLimit, api.PayloadBytesMaxLimit
				}},
			[]set{func(o *api.Options) { o.PayloadBytesMax = api.PayloadBytesMin - 1 },
				func(o *api.Options) {
					o.RecordBytesMax, o.PayloadBytesMax = api.RecordBytesMaxLimit, api.PayloadBytesMaxLimit+1
				}},
			func(o *api.Options) { o.PayloadBytesMax = 0 }, func(o api.Options) any { return o.PayloadBytesMax }, 512 << 10},
		{"Options.SnapshotEvery",
			[]set{func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMin }, func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMax }},
			[]set{func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMin - 1 }, func(o *api.Options) { o.SnapshotEvery = api.SnapshotEveryMax + 1 }},
			func(o *api.Options) { o.SnapshotEvery = 0 }, func(o api.Options) any { return o.SnapshotEvery }, 10_000},
	} {
		open := func(mod set) (*api.Engine, error) {
			opts := memOptions()
			mod(&opts)
			return api.Open(t.Context(), opts)
		}
		for i, mod := range c.bad {
			eng, err := open(mod)
			if eng != nil {
				eng.Close(t.Context())
			}
			wantOptionError(t, fmt.Sprintf("%s bad[%d]", c.field, i), err, c.field)
		}
		for i, mod := range append(c.ok, c.zero) {
			eng, err := open(mod)
			if err != nil {
				t.Fatalf("%s ok[%d]: %v", c.field, i, err)
			}
			if i == len(c.ok) {
				if got := c.got(api.EffectiveOptions(eng)); got != c.fallback {
					t.Errorf("%s: zero runs with %v, want %v", c.field, got, c.fallback)
				}
			}
			if err := eng.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Names in Options follow the name rule (1..NameBytesMax bytes), and
// the field of a bad one is named with its index or queue; every such
// refusal matches ErrInvalidName, as a bad name given to a call does.
func TestOptions_QueueNamesFollowTheNameRule(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("q", api.NameBytesMax+1)
	for _, c := range []struct {
		name  string
		opts  api.Options
		field string
	}{
		{"empty queue", api.Options{Queues: []string{"a", ""}}, "Options.Queues[1]"},
		{"long queue", api.Options{Queues: []string{long}}, "Options.Queues[0]"},
		{"empty QueueOptions key", api.Options{QueueOptions: map[string]api.QueueOptions{"": {}}}, "Options.QueueOptions"},
		{"long QueueOptions key", api.Options{QueueOptions: map[string]api.QueueOptions{long: {}}}, "Options.QueueOptions"},
		// An owned resource's name did not match ErrInvalidName.
		{"empty owned resource", api.Options{OwnedResources: []api.OwnedResource{{CloseFunc: func(context.Context) error { return nil }}}}, "Options.OwnedResources[0].Name"},
		{"owned resource with a control character", api.Options{OwnedResources: []api.OwnedResource{{Name: "d\x00b", CloseFunc: func(context.Context) error { return nil }}}}, "Options.OwnedResources[0].Name"},
	} {
		opts := memOptions()
		opts.Queues, opts.QueueOptions, opts.OwnedResources = c.opts.Queues, c.opts.QueueOptions, c.opts.OwnedResources
		eng, err := api.Open(t.Context(), opts)
		if eng != nil {
			eng.Close(t.Context())
		}
		wantOptionError(t, c.name, err, c.field)
		if !errors.Is(err, api.ErrInvalidName) {
			t.Errorf("%s: %v does not match ErrInvalidName", c.name, err)
		}
	}
	opts := memOptions()
	opts.Queues = []string{strings.Repeat("q", api.NameBytesMax)}
	eng, err := api.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("queue name of NameBytesMax bytes: %v", err)
	}
	eng.Close(t.Context())
}

// An OptionError quotes a string value, so that an empty one reads "",
// and cuts a long one, so that an oversized key does not fill the
// message: the length says how long it was.
func TestOptionErrorQuotesAndCutsStringValues(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("w").WaitForSignal("go"))
	if err := api.Handle(b.eng, "h", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	_, err := b.eng.Enqueue(b.ctx, "h", msg{}, api.OnQueue(""))
	if got := err.Error(); !strings.HasPrefix(got, `quire: OnQueue = "": `) {
		t.Errorf("empty queue: %q", got)
	}
	key := strings.Repeat("k", 600)
	_, err = b.eng.Dispatch(b.ctx, "w", nil, api.IdempotencyKey(key))
	wantOptionError(t, "long key", err, "IdempotencyKey")
	if got := err.Error(); strings.Contains(got, key) || !strings.Contains(got, `"`+key[:64]+`"… (600 bytes)`) {
		t.Errorf("long key: %q", got)
	}
	if got := (&api.OptionError{Field: "X", Value: "a" + strings.Repeat("é", 41), Reason: "r"}).Error(); !utf8.ValidString(got) || !strings.Contains(got, `é"… (83 bytes)`) {
		t.Errorf("a cut inside a rune: %q", got)
	}
}
