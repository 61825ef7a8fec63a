package sim

import "errors"

// The kinds of a world's failure that are sim's own. [World.Err] wraps
// one of them, and the error of the engine (or of the scenario's own
// Setup or Register function) that the failure reports, if any, so that
// callers classify it with errors.Is: errors.Is(w.Err(),
// api.ErrUnknownHandler) for an enqueue the engine refused,
// errors.Is(w.Err(), sim.ErrViolation) for a broken guarantee. A failure
// of neither kind is an error of the engine or of the scenario's
// functions, a watchdog, or the test failing through [World.T].
var (
	// ErrViolation marks a failure in which the engine broke one of its
	// guarantees: an oracle check (see "Oracle" in the package
	// documentation), RL-2, or the shutdown checks SD-21, SD-26, SD-33
	// and SD-34.
	ErrViolation = errors.New("sim: the engine broke a guarantee")
	// ErrMisuse marks a failure in which the scenario or a handler used
	// the world as it must not be used: a step from a handler, a step
	// after [World.Finish], [World.Take] from the scenario or twice
	// under one key, a nil function, a negative duration, an option the
	// world cannot honour, a [World.Do] that shuts the engine down.
	ErrMisuse = errors.New("sim: misuse of the world")
)

// failure is a world's first failure: its message, which names the seed,
// step and instant, and what it wraps, its kind (nil if neither
// [ErrViolation] nor [ErrMisuse]) and the error its message was formatted
// from, whose %w operands errors.Is and errors.As reach.
type failure struct {
	msg   string
	kind  error
	cause error
}

func (f *failure) Error() string { return f.msg }

func (f *failure) Unwrap() []error {
	if f.kind == nil {
		return []error{f.cause}
	}
	return []error{f.kind, f.cause}
}
