package shutdown

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
)

// Options configure a [Coordinator]. Clock and Engine are required; every
// other field has a usable zero value.
type Options struct {
	// Clock is the only source of time: the root, every deadline and every
	// wait use it. Required.
	Clock clock.Clock
	// Engine is what the phases drive. Required.
	Engine Engine
	// Journal receives the shutdown records. Nil means no records: nothing
	// is appended and CloseReconciled does not depend on records (test
	// harnesses).
	Journal Journal

	// ShutdownTimeout is the total budget of one shutdown (SD-1), shared by
	// every phase (SD-2). Zero means 30 s; otherwise 1 s..100 years
	// inclusive ([deadlines.ValidateShutdownTimeout]). A test harness that
	// needs a zero-length root installs one with [Coordinator.Install]
	// (SD-4).
	ShutdownTimeout time.Duration
	// SettlementTimeout bounds each journal append and the journal close of
	// the shutdown (SD-17, DL-3). It is a local cap clamped to Hr, never
	// added to it (SD-2): a phase waits for the append of one of its
	// records at most until min(now + SettlementTimeout, Hr). The records
	// it leaves behind at Hr are settled before the report, within one
	// SettlementTimeout; phase 6's records and the journal close each wait
	// at most SettlementTimeout. Zero means 5 s; otherwise 1 ms..60 s
	// inclusive.
	SettlementTimeout time.Duration

	// OwnedResources are the resources the engine owns, in hand-over order;
	// phase 5 closes them in reverse (SD-16). Caller-owned resources must
	// not be listed (SD-19).
	OwnedResources []OwnedResource
	// SignalMonitorStopFunc stops the OS signal listener and joins its
	// goroutine (SD-16, SD-20). Nil means no monitor (the context-only and
	// managed entry points).
	SignalMonitorStopFunc func(ctx context.Context) error
	// Telemetry is telemetry the engine owns. Nil means none.
	Telemetry *Telemetry
}

// withDefaults returns o with zero durations replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = deadlines.ShutdownTimeoutDefault
	}
	if o.SettlementTimeout == 0 {
		o.SettlementTimeout = deadlines.SettlementTimeoutDefault
	}
	return o
}

// validate checks o after withDefaults.
func (o Options) validate() error {
	var errs []error
	if o.Clock == nil {
		errs = append(errs, errors.New("Clock is nil"))
	}
	if o.Engine == nil {
		errs = append(errs, errors.New("Engine is nil"))
	}
	errs = append(errs,
		deadlines.ValidateShutdownTimeout(o.ShutdownTimeout),
		deadlines.ValidateSettlementTimeout(o.SettlementTimeout),
	)
	for i, r := range o.OwnedResources {
		if r.CloseFunc == nil {
			errs = append(errs, fmt.Errorf("OwnedResources[%d] (%q) has no CloseFunc", i, r.Name))
		}
	}
	if t := o.Telemetry; t != nil && t.FlushFunc == nil && t.CloseFunc == nil {
		errs = append(errs, errors.New("Telemetry has neither FlushFunc nor CloseFunc"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return nil
}
