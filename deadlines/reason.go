package deadlines

import (
	"strconv"
	"time"
)

// Reason is why an attempt was cancelled (DL-15). The first reason recorded
// for an attempt sticks (DL-16). The zero value, [ReasonNone], means that
// no reason has been recorded.
//
// The numeric values and the names returned by [Reason.String] may be
// persisted: never renumber or rename them.
type Reason uint8

// Reasons of DL-15.
const (
	// ReasonNone means that no reason has been recorded. It is not one of
	// the reasons of DL-15.
	ReasonNone Reason = 0
	// ReasonDeliveryTimeout is recorded when the attempt's own P is reached.
	ReasonDeliveryTimeout Reason = 1
	// ReasonShutdownDeadline is recorded when the root graceful cutoff G is
	// reached.
	ReasonShutdownDeadline Reason = 2
	// ReasonForcedShutdown is recorded when force was requested explicitly
	// (SD-22).
	ReasonForcedShutdown Reason = 3
	// ReasonRuntimeFailure is recorded when a supervised engine goroutine
	// failed (SD-23).
	ReasonRuntimeFailure Reason = 4
	// ReasonRuntimeCancellation is the defensive default when the attempt's
	// source was cancelled by a path that recorded no reason.
	ReasonRuntimeCancellation Reason = 5
)

var reasonNames = [...]string{
	ReasonNone:                "none",
	ReasonDeliveryTimeout:     "delivery_timeout",
	ReasonShutdownDeadline:    "shutdown_deadline",
	ReasonForcedShutdown:      "forced_shutdown",
	ReasonRuntimeFailure:      "runtime_failure",
	ReasonRuntimeCancellation: "runtime_cancellation",
}

// String returns the stable snake_case name of r, e.g. "delivery_timeout",
// or "Reason(n)" for a value that is not defined.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// ParseReason returns the Reason whose [Reason.String] is s, and false if
// there is none.
func ParseReason(s string) (Reason, bool) {
	for i, name := range reasonNames {
		if name == s {
			return Reason(i), true
		}
	}
	return ReasonNone, false
}

// ForceReason returns the reason the engine publishes to every running
// attempt when it forces them (DL-18): [ReasonForcedShutdown] if force was
// requested, else [ReasonShutdownDeadline] if root's G has passed at now
// (deadline escalation), else [ReasonRuntimeFailure].
func ForceReason(forceRequested bool, root Root, now time.Time) Reason {
	switch {
	case forceRequested:
		return ReasonForcedShutdown
	case root.GracefulExpired(now):
		return ReasonShutdownDeadline
	default:
		return ReasonRuntimeFailure
	}
}
