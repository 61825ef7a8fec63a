package deadlines

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

type rangeCase struct {
	value time.Duration
	ok    bool
}

func checkRange(t *testing.T, field string, validate func(time.Duration) error, cases []rangeCase) {
	t.Helper()
	for _, c := range cases {
		err := validate(c.value)
		if c.ok {
			if err != nil {
				t.Fatalf("%s %v: unexpected error %v", field, c.value, err)
			}
			continue
		}
		var re *RangeError
		if !errors.As(err, &re) || !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("%s %v: error %v, want a *RangeError matching ErrOutOfRange", field, c.value, err)
		}
		if re.Field != field || re.Value != c.value {
			t.Fatalf("%s %v: RangeError{Field: %q, Value: %v}", field, c.value, re.Field, re.Value)
		}
		if msg := err.Error(); !strings.Contains(msg, field) || !strings.Contains(msg, c.value.String()) {
			t.Fatalf("%s %v: message %q does not name the field and value", field, c.value, msg)
		}
	}
}

func TestDL2_DeliveryTimeoutRange(t *testing.T) {
	t.Parallel()
	checkRange(t, "DeliveryTimeout", ValidateDeliveryTimeout, []rangeCase{
		{99 * time.Millisecond, false},
		{100 * time.Millisecond, true},
		{900_000 * time.Millisecond, true},
		{900_001 * time.Millisecond, false},
		{0, false},
		{-time.Second, false},
	})
	wantDur(t, "absent DeliveryTimeout", DeliveryTimeoutDefault, 30_000*time.Millisecond)
	if err := ValidateDeliveryTimeout(DeliveryTimeoutDefault); err != nil {
		t.Fatalf("default rejected: %v", err)
	}
}

func TestDL3_SettlementTimeoutRange(t *testing.T) {
	t.Parallel()
	checkRange(t, "SettlementTimeout", ValidateSettlementTimeout, []rangeCase{
		{0, false},
		{time.Millisecond, true},
		{60_000 * time.Millisecond, true},
		{60_001 * time.Millisecond, false},
	})
	wantDur(t, "absent SettlementTimeout", SettlementTimeoutDefault, 5*time.Second)
}

func TestSD1_ShutdownTimeoutRange(t *testing.T) {
	t.Parallel()
	checkRange(t, "ShutdownTimeout", ValidateShutdownTimeout, []rangeCase{
		{0, false},
		{time.Second, true},
		{3_153_600_000 * time.Second, true},
		{3_153_600_001 * time.Second, false},
	})
	wantDur(t, "absent ShutdownTimeout", ShutdownTimeoutDefault, 30*time.Second)
	wantDur(t, "100 years", ShutdownTimeoutMax, 100*365*24*3600*time.Second)
}

// JB-1, WF-5, WD-3: delays and workflow deadlines reach 100 years at most,
// so the instants they give stay inside what a record holds.
func TestJB1_DelayRange(t *testing.T) {
	t.Parallel()
	checkRange(t, "Delay", func(d time.Duration) error { return ValidateDelay("Delay", d, 0) }, []rangeCase{
		{-1, false},
		{0, true},
		{DelayMax, true},
		{DelayMax + 1, false},
		{math.MaxInt64, false},
	})
	checkRange(t, "MustCompleteWithin", func(d time.Duration) error { return ValidateDelay("MustCompleteWithin", d, 1) }, []rangeCase{
		{0, false},
		{1, true},
		{DelayMax + 1, false},
	})
	wantDur(t, "100 years", DelayMax, 100*365*24*3600*time.Second)
}

func TestWD6_DeadlineCheckIntervalRange(t *testing.T) {
	t.Parallel()
	checkRange(t, "DeadlineCheckInterval", ValidateDeadlineCheckInterval, []rangeCase{
		{9 * time.Millisecond, false},
		{10 * time.Millisecond, true},
		{time.Duration(math.MaxInt64), true},
	})
	wantDur(t, "absent DeadlineCheckInterval", DeadlineCheckIntervalDefault, 60*time.Second)
}

func TestDL4_RetryPolicyRanges(t *testing.T) {
	t.Parallel()
	checkRange(t, "BackoffBase", ValidateBackoffBase, []rangeCase{
		{99 * time.Millisecond, false},
		{100 * time.Millisecond, true},
		{300 * time.Second, true},
		{300*time.Second + 1, false},
	})
	checkRange(t, "MaxBackoff", func(d time.Duration) error { return ValidateMaxBackoff(d, 2*time.Second) },
		[]rangeCase{
			{2*time.Second - 1, false},
			{2 * time.Second, true},
			{900 * time.Second, true},
			{900*time.Second + 1, false},
		})

	for _, c := range []struct {
		n  int
		ok bool
	}{{0, false}, {1, true}, {100, true}, {101, false}} {
		err := ValidateMaxAttempts(c.n)
		if (err == nil) != c.ok {
			t.Fatalf("MaxAttempts %d: error %v", c.n, err)
		}
		if err != nil && !strings.Contains(err.Error(), "MaxAttempts") {
			t.Fatalf("MaxAttempts %d: message %q does not name the field", c.n, err)
		}
	}

	for _, c := range []struct {
		r  float64
		ok bool
	}{
		{-0.01, false}, {0, true}, {0.2, true}, {0.5, true}, {0.5000001, false},
		{math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		err := ValidateJitterRatio(c.r)
		if (err == nil) != c.ok {
			t.Fatalf("JitterRatio %v: error %v", c.r, err)
		}
		if err != nil && !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("JitterRatio %v: %v does not match ErrOutOfRange", c.r, err)
		}
	}

	long := make([]time.Duration, 101)
	for i := range long {
		long[i] = time.Second
	}
	for _, c := range []struct {
		name  string
		list  []time.Duration
		field string
	}{
		{"empty", nil, "BackoffList"},
		{"one", []time.Duration{100 * time.Millisecond}, ""},
		{"hundred", long[:100], ""},
		{"hundred and one", long, "BackoffList"},
		{"entry too short", []time.Duration{time.Second, 99 * time.Millisecond}, "BackoffList[1]"},
		{"entry too long", []time.Duration{900*time.Second + 1}, "BackoffList[0]"},
		{"bounds", []time.Duration{100 * time.Millisecond, 900 * time.Second}, ""},
	} {
		err := ValidateBackoffList(c.list)
		var re *RangeError
		switch {
		case c.field == "" && err != nil:
			t.Fatalf("%s: unexpected error %v", c.name, err)
		case c.field != "" && (!errors.As(err, &re) || re.Field != c.field):
			t.Fatalf("%s: error %v, want a RangeError on %s", c.name, err, c.field)
		}
	}

	def := Backoff{}.WithDefaults()
	if def.Kind != BackoffExponential || def.Base != time.Second || def.Max != 60*time.Second || def.JitterRatio != 0 {
		t.Fatalf("defaults = %+v", def)
	}
	if err := def.Validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	// DL-4: MaxBackoff is valid from BackoffBase up, so an absent one
	// never falls below a Base longer than its 60 s default.
	for _, c := range []struct{ base, max time.Duration }{
		{30 * time.Second, 60 * time.Second},
		{60 * time.Second, 60 * time.Second},
		{2 * time.Minute, 2 * time.Minute},
		{BackoffBaseMax, BackoffBaseMax},
	} {
		p := Backoff{Kind: BackoffFixed, Base: c.base}.WithDefaults()
		if p.Max != c.max {
			t.Fatalf("Base %v alone: Max defaults to %v, want %v", c.base, p.Max, c.max)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Base %v alone is refused: %v", c.base, err)
		}
	}
	if MaxAttemptsDefault != 3 {
		t.Fatalf("MaxAttemptsDefault = %d", MaxAttemptsDefault)
	}
	for _, c := range []struct {
		name  string
		p     Backoff
		field string
	}{
		{"bad kind", Backoff{Kind: 9, Base: time.Second, Max: time.Minute}, "Backoff"},
		// The first value past the last kind is not one of DL-4's four.
		{"kind just past list", Backoff{Kind: BackoffList + 1, Base: time.Second, Max: time.Minute}, "Backoff"},
		{"base", Backoff{Base: 50 * time.Millisecond, Max: time.Minute}, "BackoffBase"},
		{"max below base", Backoff{Base: 2 * time.Second, Max: time.Second}, "MaxBackoff"},
		{"jitter", Backoff{Base: time.Second, Max: time.Minute, JitterRatio: 0.6}, "JitterRatio"},
		{"list missing", Backoff{Kind: BackoffList, Base: time.Second, Max: time.Minute}, "BackoffList"},
		{"list ok", Backoff{Kind: BackoffList, Base: time.Second, Max: time.Minute, List: []time.Duration{time.Second}}, ""},
		// An explicit list is checked whatever the kind: an invalid list is
		// an invalid value even while another kind ignores it (DL-4).
		{"list with another kind", Backoff{Base: time.Second, Max: time.Minute, List: []time.Duration{50 * time.Millisecond}}, "BackoffList[0]"},
	} {
		err := c.p.Validate()
		var re *RangeError
		switch {
		case c.field == "" && err != nil:
			t.Fatalf("%s: unexpected error %v", c.name, err)
		case c.field != "" && (!errors.As(err, &re) || re.Field != c.field):
			t.Fatalf("%s: error %v, want a RangeError on %s", c.name, err, c.field)
		}
	}
}

func TestRangeErrorMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{ValidateDeliveryTimeout(99 * time.Millisecond), "deadlines: DeliveryTimeout = 99ms, want 100ms..15m0s"},
		{ValidateDeadlineCheckInterval(time.Millisecond), "deadlines: DeadlineCheckInterval = 1ms, want at least 10ms"},
		{ValidateMaxAttempts(0), "deadlines: MaxAttempts = 0, want 1..100"},
		{Backoff{Kind: 7, Base: time.Second, Max: time.Second}.Validate(), "deadlines: Backoff = BackoffKind(7) is not a valid value"},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Fatalf("message %v, want %q", c.err, c.want)
		}
	}
}
