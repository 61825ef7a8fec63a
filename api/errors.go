package api

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
)

// Errors callers branch on with errors.Is.
var (
	// ErrClosed is returned by every call on an engine that was closed,
	// except those whose docs say what they return then: Shutdown and
	// Close (the retained result), Force (nil) and the read-only
	// accessors of the engine's counters.
	ErrClosed = errors.New("quire: engine closed")
	// ErrShuttingDown refuses calls that would create runnable work once
	// shutdown has closed admission (SD-12).
	ErrShuttingDown = errors.New("quire: engine is shutting down")
	// ErrFailStop means the engine stopped after a failed journal commit:
	// the outcome of the call is unknown until the journal is reopened
	// (RL-2). The application should exit and restart.
	ErrFailStop = journal.ErrFailStop
	// ErrNotFound is returned for an id the journal does not know.
	ErrNotFound = errors.New("quire: not found")
	// ErrUnknownHandler refuses work for a handler that is not registered.
	ErrUnknownHandler = errors.New("quire: handler not registered")
	// ErrInvalidPayload refuses a nil, unencodable or oversized payload.
	ErrInvalidPayload = errors.New("quire: invalid payload")
	// ErrState refuses an operation the target's status does not allow,
	// such as burying a processing job.
	ErrState = errors.New("quire: operation not allowed in this state")
	// ErrInvalidName refuses a name that breaks its rule (empty, over
	// [NameBytesMax] bytes, not valid UTF-8, or holding a control
	// character; an id over 127 bytes): a handler's, queue's,
	// workflow's, step's, signal's or resource's name. The error is a
	// [*NameError] (or an [*OptionError] for an option's value) naming it.
	// A handler name that breaks it, given to [Engine.Enqueue] or
	// [Delivery.Enqueue], matches [ErrUnknownHandler] too, as every name
	// no handler is registered under does; a workflow name that breaks it,
	// given to [Engine.Dispatch], matches [ErrNotFound] too, as every
	// unregistered workflow name does. A malformed id given to a
	// status or control call matches [ErrNotFound] instead: no job or
	// workflow has it.
	ErrInvalidName = errors.New("quire: invalid name")
	// ErrDuplicate refuses a second registration under one name.
	ErrDuplicate = errors.New("quire: already registered")
	// ErrFollowUpLimit refuses a follow-up job ([Delivery.Enqueue]) past
	// [FollowUpsMax] jobs or twice Options.PayloadBytesMax of payloads in
	// one attempt: they and the settlement are one atomic append, which
	// must fit in one group commit (RL-4, RL-11).
	ErrFollowUpLimit = errors.New("quire: too many follow-up jobs for one settlement")
	// ErrFollowUpTooLate refuses a follow-up job ([Delivery.Enqueue])
	// once its attempt's follow-ups were handed to the settlement or can
	// no longer be: the pipeline returned, or the attempt passed its
	// cooperative deadline or was abandoned (DL-26). The job is not
	// enqueued; a goroutine the handler left behind must enqueue with
	// [Engine.Enqueue] instead.
	ErrFollowUpTooLate = errors.New("quire: follow-up job enqueued too late for its attempt's settlement")
	// ErrScopeClosed refuses [Scope.Register] once the attempt reached its
	// scope's disposal point (DL-36): the resource is not registered and
	// the caller must close it.
	ErrScopeClosed = scheduler.ErrScopeClosed
	// ErrSignalLimit refuses a signal the workflow would have to store
	// past [StoredSignalsMax] unconsumed signals, or past four times
	// Options.PayloadBytesMax of their payloads: stored signals are part
	// of its state, in memory and in every snapshot (RL-11). A signal its
	// wait needs (a name it waits for, none of that name stored) is always
	// accepted.
	ErrSignalLimit = scheduler.ErrSignalLimit
	// ErrCorrupt matches journal damage: an Open that refuses a damaged
	// journal, a damaged index entry read by a status call, and a call on
	// a job or workflow whose stream Open quarantined
	// ([QuarantinedStream]). errors.As with a *[CorruptError] gives the
	// seq, stream and file. It is journal.ErrCorrupt.
	ErrCorrupt = journal.ErrCorrupt
	// ErrLocked refuses an Open of a journal another engine or a qctl
	// holds (in this process or another). It is journal.ErrLocked.
	ErrLocked = journal.ErrLocked
	// ErrNotJournal refuses an Open of a directory that holds files but no
	// quire journal: another program's files or Pebble store. Open leaves
	// such a directory as it found it. It is journal.ErrNotJournal.
	ErrNotJournal = journal.ErrNotJournal
	// ErrNewerVersion refuses an Open of a journal written by a newer
	// version of quire, whose layout or records this one cannot read. It
	// is record.ErrNewerVersion.
	ErrNewerVersion = record.ErrNewerVersion
)

// CorruptError is journal damage named by seq, stream and file (RL-5);
// see [ErrCorrupt].
type CorruptError = journal.CorruptError

// StoredSignalsMax bounds the unconsumed signals one workflow stores
// ([ErrSignalLimit]).
const StoredSignalsMax = scheduler.StoredSignalsMax

// FollowUpsMax bounds the follow-up jobs one attempt enqueues with its
// settlement ([Delivery.Enqueue]).
const FollowUpsMax = 256

// Error codes recorded in settlements.
const (
	CodeHandlerError         = "HANDLER_ERROR"
	CodeHandlerPanicked      = "HANDLER_PANICKED"
	CodePayloadDecodeFailed  = "PAYLOAD_DECODE_FAILED"
	CodeHandlerNotRegistered = "HANDLER_NOT_REGISTERED"
	CodeBuriedByOperator     = record.CodeBuriedByOperator
	MessageBuriedByOperator  = "buried by operator"
	CodeDeliveryTimeout      = "DELIVERY_TIMEOUT"
	CodeInterruptedByCrash   = "DELIVERY_INTERRUPTED_BY_CRASH"
)

// HandlerError is an error a handler returns to choose how its attempt
// settles: retryable or permanent, with a stable code (DL-14). Build one
// with [Retryable] or [Permanent]; any other error is retryable with code
// HANDLER_ERROR. An empty Code is recorded, and printed, as HANDLER_ERROR.
type HandlerError struct {
	Code      string
	Permanent bool
	Err       error
}

// Error returns "<class> <code>: <err>", or "<class> <code>" for a nil
// Err: "permanent BAD_INPUT: line 3", "retryable HANDLER_ERROR". A nil
// *HandlerError, which a handler returns as a non-nil error when it
// returns a nil pointer of this type, reads "nil *api.HandlerError", and
// fails its attempt as any other error does: retryable, HANDLER_ERROR.
func (e *HandlerError) Error() string {
	if e == nil {
		return "nil *api.HandlerError"
	}
	kind := "retryable"
	if e.Permanent {
		kind = "permanent"
	}
	code := handlerCode(e.Code)
	if e.Err == nil {
		return kind + " " + code
	}
	return fmt.Sprintf("%s %s: %v", kind, code, e.Err)
}

// Unwrap returns the handler's error.
func (e *HandlerError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Retryable returns an error that fails the attempt and lets it be retried
// under the job's retry policy, with code recorded in the settlement. An
// empty code becomes HANDLER_ERROR; err may be nil, and the settlement's
// message is then the class and code alone ("retryable HANDLER_ERROR").
func Retryable(code string, err error) error {
	return &HandlerError{Code: handlerCode(code), Err: err}
}

// Permanent returns an error that buries the job at once, whatever
// attempts remain (JB-3). An empty code becomes HANDLER_ERROR; err may be
// nil, and the settlement's message is then the class and code alone
// ("permanent HANDLER_ERROR").
func Permanent(code string, err error) error {
	return &HandlerError{Code: handlerCode(code), Permanent: true, Err: err}
}

// handlerCode is the code a [HandlerError] records: code, or
// HANDLER_ERROR for an empty one.
func handlerCode(code string) string {
	if code == "" {
		return CodeHandlerError
	}
	return code
}

// NameError reports a call naming a handler, queue, job or other named
// thing that is unknown, malformed, taken or given with a bad argument:
// Kind says which ("handler", "queue", "job", "workflow", "signal",
// "resource", ...), Name what was given.
type NameError struct {
	Kind string
	Name string
	Err  error
}

// Error names the kind and the name, then the reason.
func (e *NameError) Error() string {
	return fmt.Sprintf("quire: %s %q: %s", e.Kind, e.Name, reasonText(e.Err))
}

// reasonText is err's text without the "quire: " its sentinel starts
// with, for an error that wraps it after a "quire: " of its own.
func reasonText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.TrimPrefix(err.Error(), "quire: ")
}

// Unwrap returns the reason, such as [ErrNotFound] or [ErrDuplicate].
func (e *NameError) Unwrap() error { return e.Err }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// checkContext refuses a nil ctx. Every call that takes a ctx checks it
// before anything else, so that a refused call changes nothing: a nil ctx
// that got further would panic on the caller's goroutine after the call
// had acted (Shutdown initiates first), and, given to Run on an engine
// already started, on the goroutine that watches it, which no caller can
// recover.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return &OptionError{Field: "ctx", Value: nil, Reason: "must not be nil: pass context.Background() or a context with a deadline"}
	}
	return nil
}
