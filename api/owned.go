package api

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/quire-dev/quire/shutdown"
)

// OwnedResourcesMax bounds [Options.OwnedResources].
const OwnedResourcesMax = 64

// OwnedResource is one resource handed to the engine to dispose (see
// [Options.OwnedResources]). Set exactly one of Closer and CloseFunc.
//
// The close runs in phase 5 of the shutdown with a fair share of the
// budget left when its turn comes: (Hr − now)/k, where k counts the closes
// of phase 5 not yet run, this one included (SD-9). A close that returns
// an error or panics is recorded (the report is then Failed, with failure
// code [shutdown.CodeOwnedResourceCloseFailed]); one still running when
// its share ends is abandoned, never waited for again, and the resources
// handed over before it are left open, since it may still use them: the
// report is then Incomplete (SD-37).
type OwnedResource struct {
	// Name identifies the resource in diagnostics. Required; at most
	// NameBytesMax bytes, under the name rule ([ErrInvalidName]); no two
	// resources of one Options share a name.
	Name string
	// Closer is closed with Close. Close takes no context, so one that
	// blocks can only be abandoned; prefer CloseFunc for resources whose
	// close can be cancelled.
	Closer io.Closer
	// CloseFunc closes the resource. Its ctx is cancelled when the close's
	// share of the budget ends.
	CloseFunc func(ctx context.Context) error
}

// OwnedTelemetry is telemetry handed to the engine to flush and close
// last (see [Options.Telemetry]). Set at least one of the two; each gets
// its fair share of the budget, like an owned resource's close.
type OwnedTelemetry struct {
	// FlushFunc flushes what the telemetry buffers.
	FlushFunc func(ctx context.Context) error
	// CloseFunc closes the telemetry and joins its worker goroutines.
	CloseFunc func(ctx context.Context) error
}

func (o Options) validateOwned() error {
	if n := len(o.OwnedResources); n > OwnedResourcesMax {
		return &OptionError{Field: "Options.OwnedResources", Value: n, Reason: fmt.Sprintf("at most %d resources", OwnedResourcesMax)}
	}
	for i, r := range o.OwnedResources {
		field := fmt.Sprintf("Options.OwnedResources[%d]", i)
		if err := validateName(r.Name); err != nil {
			return &OptionError{Field: field + ".Name", Value: r.Name, Reason: err.Error(), Err: err}
		}
		if j := slices.IndexFunc(o.OwnedResources[:i], func(p OwnedResource) bool { return p.Name == r.Name }); j >= 0 {
			return &OptionError{Field: field + ".Name", Value: r.Name, Reason: fmt.Sprintf("also the name of Options.OwnedResources[%d]: names identify resources in diagnostics", j)}
		}
		if (r.Closer == nil) == (r.CloseFunc == nil) {
			return &OptionError{Field: field, Value: r.Name, Reason: "set exactly one of Closer and CloseFunc"}
		}
	}
	if t := o.Telemetry; t != nil && t.FlushFunc == nil && t.CloseFunc == nil {
		return &OptionError{Field: "Options.Telemetry", Value: "{}", Reason: "set FlushFunc, CloseFunc or both"}
	}
	return nil
}

// owned returns what the shutdown coordinator disposes for o (SD-16).
func (o Options) owned() ([]shutdown.OwnedResource, *shutdown.Telemetry) {
	var rs []shutdown.OwnedResource
	for _, r := range o.OwnedResources {
		fn := r.CloseFunc
		if fn == nil {
			c := r.Closer
			fn = func(context.Context) error { return c.Close() }
		}
		rs = append(rs, shutdown.OwnedResource{Name: r.Name, CloseFunc: fn})
	}
	var t *shutdown.Telemetry
	if o.Telemetry != nil {
		t = &shutdown.Telemetry{FlushFunc: o.Telemetry.FlushFunc, CloseFunc: o.Telemetry.CloseFunc}
	}
	return rs, t
}
