package deadlines

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Defaults and inclusive bounds of the options whose arithmetic this
// package owns. The api package applies the defaults when an option is
// absent and checks the range with the Validate functions below, at the
// boundary and before anything is appended.
const (
	// DeliveryTimeoutDefault is the execution and cleanup budget of one
	// attempt when none is configured (DL-2).
	DeliveryTimeoutDefault = 30 * time.Second
	// DeliveryTimeoutMin is the smallest valid DeliveryTimeout (DL-2).
	DeliveryTimeoutMin = 100 * time.Millisecond
	// DeliveryTimeoutMax is the largest valid DeliveryTimeout (DL-2).
	DeliveryTimeoutMax = 900 * time.Second

	// SettlementTimeoutDefault caps one settlement append (DL-3).
	SettlementTimeoutDefault = 5 * time.Second
	// SettlementTimeoutMin is the smallest valid SettlementTimeout (DL-3).
	SettlementTimeoutMin = time.Millisecond
	// SettlementTimeoutMax is the largest valid SettlementTimeout (DL-3).
	SettlementTimeoutMax = 60 * time.Second

	// ShutdownTimeoutDefault is the total budget of one shutdown (SD-1).
	ShutdownTimeoutDefault = 30 * time.Second
	// ShutdownTimeoutMin is the smallest valid ShutdownTimeout (SD-1).
	ShutdownTimeoutMin = time.Second
	// ShutdownTimeoutMax is 100 years of 365 days, 3 153 600 000 s, the
	// largest valid ShutdownTimeout (SD-1). It fits in time.Duration.
	ShutdownTimeoutMax = 3_153_600_000 * time.Second

	// DelayMax is the longest valid job Delay, workflow Delay step and
	// workflow deadline (MustCompleteWithin): 100 years of 365 days, as
	// [ShutdownTimeoutMax]. The instants they give are recorded in Unix
	// nanoseconds; see [InstantAfter].
	DelayMax = ShutdownTimeoutMax

	// MaxAttemptsDefault is the default number of attempts of a job,
	// including the first (DL-4).
	MaxAttemptsDefault = 3
	// MaxAttemptsMin is the smallest valid MaxAttempts (DL-4).
	MaxAttemptsMin = 1
	// MaxAttemptsMax is the largest valid MaxAttempts (DL-4).
	MaxAttemptsMax = 100

	// BackoffBaseDefault is the default backoff base (DL-4).
	BackoffBaseDefault = time.Second
	// BackoffBaseMin is the smallest valid BackoffBase (DL-4).
	BackoffBaseMin = 100 * time.Millisecond
	// BackoffBaseMax is the largest valid BackoffBase (DL-4).
	BackoffBaseMax = 300 * time.Second

	// MaxBackoffDefault is the default backoff cap (DL-4). Its lower bound
	// is the BackoffBase in effect.
	MaxBackoffDefault = 60 * time.Second
	// MaxBackoffMax is the largest valid MaxBackoff (DL-4).
	MaxBackoffMax = 900 * time.Second

	// JitterRatioDefault is the default jitter ratio: no jitter (DL-4).
	JitterRatioDefault = 0.0
	// JitterRatioMax is the largest valid JitterRatio (DL-4). The smallest
	// is 0, and the ratio must be finite.
	JitterRatioMax = 0.5

	// BackoffListLenMin is the fewest entries of an explicit backoff list
	// (DL-4).
	BackoffListLenMin = 1
	// BackoffListLenMax is the most entries of an explicit backoff list
	// (DL-4).
	BackoffListLenMax = 100
	// BackoffListEntryMin is the smallest valid entry of an explicit
	// backoff list (DL-4).
	BackoffListEntryMin = 100 * time.Millisecond
	// BackoffListEntryMax is the largest valid entry of an explicit backoff
	// list (DL-4).
	BackoffListEntryMax = 900 * time.Second

	// DeadlineCheckIntervalDefault is the default period of the workflow
	// deadline check (WD-6).
	DeadlineCheckIntervalDefault = 60 * time.Second
	// DeadlineCheckIntervalMin is the smallest valid DeadlineCheckInterval
	// (WD-6). It has no maximum.
	DeadlineCheckIntervalMin = 10 * time.Millisecond
)

// ErrOutOfRange is matched by every [*RangeError] with errors.Is.
var ErrOutOfRange = errors.New("deadlines: option out of range")

// RangeError reports an option value outside its valid range. Min and Max
// are inclusive; Max is nil when the range has no upper bound, and both are
// nil when the value is not one of an enumeration. Value, Min and Max hold
// a time.Duration, an int or a float64, as the option does.
type RangeError struct {
	// Field is the option's name, e.g. "DeliveryTimeout", or
	// "BackoffList[3]" for one entry of the explicit list, whose length is
	// reported as Field "BackoffList".
	Field string
	Value any
	Min   any
	Max   any
}

// Error names the field and the offending value, e.g.
// "deadlines: DeliveryTimeout = 99ms, want 100ms..15m0s".
func (e *RangeError) Error() string {
	switch {
	case e.Min == nil && e.Max == nil:
		return fmt.Sprintf("deadlines: %s = %v is not a valid value", e.Field, e.Value)
	case e.Max == nil:
		return fmt.Sprintf("deadlines: %s = %v, want at least %v", e.Field, e.Value, e.Min)
	}
	return fmt.Sprintf("deadlines: %s = %v, want %v..%v", e.Field, e.Value, e.Min, e.Max)
}

// Unwrap returns [ErrOutOfRange].
func (e *RangeError) Unwrap() error { return ErrOutOfRange }

func checkDuration(field string, v, lo, hi time.Duration) error {
	if v < lo || v > hi {
		return &RangeError{Field: field, Value: v, Min: lo, Max: hi}
	}
	return nil
}

// ValidateDeliveryTimeout checks a DeliveryTimeout, engine-wide or an
// override, against [DeliveryTimeoutMin]..[DeliveryTimeoutMax] (DL-2).
func ValidateDeliveryTimeout(d time.Duration) error {
	return checkDuration("DeliveryTimeout", d, DeliveryTimeoutMin, DeliveryTimeoutMax)
}

// ValidateSettlementTimeout checks a SettlementTimeout against
// [SettlementTimeoutMin]..[SettlementTimeoutMax] (DL-3).
func ValidateSettlementTimeout(d time.Duration) error {
	return checkDuration("SettlementTimeout", d, SettlementTimeoutMin, SettlementTimeoutMax)
}

// ValidateShutdownTimeout checks a ShutdownTimeout against
// [ShutdownTimeoutMin]..[ShutdownTimeoutMax] (SD-1).
func ValidateShutdownTimeout(d time.Duration) error {
	return checkDuration("ShutdownTimeout", d, ShutdownTimeoutMin, ShutdownTimeoutMax)
}

// ValidateDelay checks a duration that sets an instant ahead of now (a job
// Delay, a workflow Delay step, a workflow deadline) against min..[DelayMax].
// field names it in the error.
func ValidateDelay(field string, d, min time.Duration) error {
	return checkDuration(field, d, min, DelayMax)
}

// ValidateDeadlineCheckInterval checks a DeadlineCheckInterval against
// [DeadlineCheckIntervalMin] (WD-6).
func ValidateDeadlineCheckInterval(d time.Duration) error {
	if d < DeadlineCheckIntervalMin {
		return &RangeError{Field: "DeadlineCheckInterval", Value: d, Min: DeadlineCheckIntervalMin}
	}
	return nil
}

// ValidateMaxAttempts checks a MaxAttempts against
// [MaxAttemptsMin]..[MaxAttemptsMax] (DL-4).
func ValidateMaxAttempts(n int) error {
	if n < MaxAttemptsMin || n > MaxAttemptsMax {
		return &RangeError{Field: "MaxAttempts", Value: n, Min: MaxAttemptsMin, Max: MaxAttemptsMax}
	}
	return nil
}

// ValidateBackoffBase checks a BackoffBase against
// [BackoffBaseMin]..[BackoffBaseMax] (DL-4).
func ValidateBackoffBase(d time.Duration) error {
	return checkDuration("BackoffBase", d, BackoffBaseMin, BackoffBaseMax)
}

// ValidateMaxBackoff checks a MaxBackoff against base..[MaxBackoffMax],
// where base is the BackoffBase in effect (DL-4).
func ValidateMaxBackoff(d, base time.Duration) error {
	return checkDuration("MaxBackoff", d, base, MaxBackoffMax)
}

// ValidateJitterRatio checks that a JitterRatio is finite and within
// 0..[JitterRatioMax] (DL-4). NaN and infinities are rejected.
func ValidateJitterRatio(r float64) error {
	if !(r >= 0 && r <= JitterRatioMax) { // also false for NaN
		return &RangeError{Field: "JitterRatio", Value: r, Min: 0.0, Max: JitterRatioMax}
	}
	return nil
}

// ValidateBackoffList checks an explicit backoff list (DL-4): between
// [BackoffListLenMin] and [BackoffListLenMax] entries, each within
// [BackoffListEntryMin]..[BackoffListEntryMax]. The first offending entry
// is reported as Field "BackoffList[i]".
func ValidateBackoffList(list []time.Duration) error {
	if len(list) < BackoffListLenMin || len(list) > BackoffListLenMax {
		return &RangeError{Field: "BackoffList", Value: len(list), Min: BackoffListLenMin, Max: BackoffListLenMax}
	}
	for i, d := range list {
		if err := checkDuration("BackoffList["+strconv.Itoa(i)+"]", d, BackoffListEntryMin, BackoffListEntryMax); err != nil {
			return err
		}
	}
	return nil
}

// isFinite reports whether f is neither NaN nor an infinity.
func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
