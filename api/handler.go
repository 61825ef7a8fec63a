package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
)

// HandlerFunc is a job handler: it receives the attempt's context
// (cancelled with the attempt's reason, DL-14), its read-only [Delivery]
// and the decoded payload. It returns nil on success, or an error: a
// [Permanent] one buries the job, any other is retried under the job's
// retry policy.
type HandlerFunc[T any] func(ctx context.Context, d *Delivery, in T) error

// handlerEntry is a registered handler with its input decoding erased.
// Handlers registered with [Handle] have decode and invoke, run as the
// pipeline's decoding and handler stages; workflow steps have call, which
// decodes the state itself. Both return the attempt's output (a step's
// state map, nil for jobs).
type handlerEntry struct {
	name   string
	call   func(ctx context.Context, d *Delivery, st *scheduler.Start) ([]byte, error)
	decode func(st *scheduler.Start) (any, error)
	// check decodes an encoded payload as decode would, for Enqueue to
	// refuse one that could only bury its job; nil for step handlers.
	check  func(payload []byte) error
	invoke func(ctx context.Context, d *Delivery, in any) ([]byte, error)
	opts   jobOptions
	// step is set for the handlers a workflow registers for its steps:
	// they cannot be enqueued as jobs.
	step bool
	// ref names the step a step handler runs, for the errors that refuse
	// its name to Handle, Enqueue and other workflows; nil for a job
	// handler.
	ref *stepRef
}

// Handle registers fn under name. Payloads enqueued for name are decoded
// into T (msgpack, after the structural pre-scan of RL-6). [Engine.Enqueue]
// and [Delivery.Enqueue] decode a payload into T before they append it and
// refuse one that does not decode with [ErrInvalidPayload]; a payload that
// still fails at delivery (a journal written when the handler took another
// type) buries its job with code PAYLOAD_DECODE_FAILED and the decode
// error, the payload staying in the journal. opts set defaults for
// the handler's jobs ([OnQueue], [WithPriority], [MaxAttempts], [Backoff],
// [DeliveryTimeout]) that each Enqueue may override (WF-22), [Unique] for
// every enqueue of the handler, and the handler's own middleware and
// guards ([WithMiddleware], [WithGuards]). [Delay] is per enqueue only:
// given to Handle, even as Delay(0), it is an [*OptionError] naming it,
// and nothing is registered, as for every invalid option. The name shares
// one namespace with the handlers of workflow steps (see [NewWorkflow]): a
// name a step holds is refused with an error naming the step and matching
// [ErrDuplicate]. Registering a name twice, an empty name, a nil fn (a
// [*NameError] matching [ErrInvalidOption]), nil middleware or guards,
// more than [MiddlewareMax] middleware (or [GuardsMax] guards) in effect for an
// attempt on any queue (global, the queue's and the handler's together:
// Enqueue may put a job on any queue), or registering once shutdown has
// begun is an error.
func Handle[T any](e *Engine, name string, fn HandlerFunc[T], opts ...JobOption) error {
	if err := validateName(name); err != nil {
		return &NameError{Kind: "handler", Name: name, Err: err}
	}
	if fn == nil {
		return &NameError{Kind: "handler", Name: name, Err: argRuleError("handler func is nil")}
	}
	jo, err := buildOptions(opts)
	if err != nil {
		return err
	}
	// A delay counts from an enqueue, and resolve takes it from the
	// enqueue's options alone: refused rather than ignored, as a workflow
	// step refuses it, so a registration never says more than it does
	// (JB-1, WF-22).
	if jo.delaySet {
		return &OptionError{Field: "Delay", Value: jo.delay,
			Reason: "a handler takes no default Delay: give Delay to each Enqueue"}
	}
	if err := checkPlanParts("Handle.", jo.middleware, jo.guards); err != nil {
		return err
	}
	if err := e.checkHandlerPlan(jo); err != nil {
		return err
	}
	h := &handlerEntry{name: name, opts: jo}
	payloadBytesMax := e.opts.PayloadBytesMax
	h.decode = func(st *scheduler.Start) (any, error) {
		var in T
		payload := st.Job.Payload
		if len(payload) > payloadBytesMax {
			return nil, fmt.Errorf("payload is %d bytes, limit %d", len(payload), payloadBytesMax)
		}
		if err := decodePayload(payload, &in); err != nil {
			return nil, err
		}
		return in, nil
	}
	h.check = func(payload []byte) error {
		var in T
		return decodePayload(payload, &in)
	}
	h.invoke = func(ctx context.Context, d *Delivery, in any) ([]byte, error) {
		v, _ := in.(T) // a nil interface T decodes to nil
		return nil, fn(ctx, d, v)
	}
	err = e.register(h)
	if errors.Is(err, ErrDuplicate) {
		// Handlers are never unregistered, so the holder found now is the
		// one that refused h.
		if held := e.handler(name); held != nil && held.ref != nil {
			return &NameError{Kind: "handler", Name: name, Err: stepNameReason{
				text: "already registered as the handler of " + held.ref.long() + ": give the job handler another name",
				is:   ErrDuplicate}}
		}
	}
	return err
}

// decodePayload decodes a job's payload into in (a pointer to the
// handler's input type), saying which type a mismatched payload missed.
func decodePayload[T any](payload []byte, in *T) error {
	if err := record.DecodeValue(payload, in); err != nil {
		var te *record.ValueTypeError
		if errors.As(err, &te) {
			// Most often a payload enqueued for another type: say so,
			// rather than "corrupt record".
			return fmt.Errorf("payload does not decode into %T: %w", *in, te.Err)
		}
		return err
	}
	return nil
}
