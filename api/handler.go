package api

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
)

// HandlerFunc is a job handler: it receives the attempt's context
// (cancelled with the attempt's reason, DL-14), its read-only [Delivery]
// and the decoded payload. It returns nil on success, or an error: a
// [Permanent] one buries the job, any other is retried under the job's
// retry policy.
type HandlerFunc[T any] func(ctx context.Context, d *Delivery, in T) error

// handlerEntry is a registered handler with its input decoding erased:
// call returns the attempt's output (a step's state map, nil for jobs).
type handlerEntry struct {
	name string
	call func(ctx context.Context, d *Delivery, st scheduler.Start) ([]byte, error)
	opts jobOptions
	// step is set for the handlers a workflow registers for its steps:
	// they cannot be enqueued as jobs.
	step bool
}

// Handle registers fn under name. Payloads enqueued for name are decoded
// into T (msgpack, after the structural pre-scan of RL-6); a payload that
// does not decode buries its job with code PAYLOAD_DECODE_FAILED and the
// payload kept in the journal. opts set defaults for the handler's jobs
// (queue, priority, retry policy, timeout) that each Enqueue may override
// (WF-22). Registering a name twice, an empty name or a nil fn is an
// error, and so is registering once shutdown has begun.
func Handle[T any](e *Engine, name string, fn HandlerFunc[T], opts ...JobOption) error {
	if err := validateName(name); err != nil {
		return &NameError{Kind: "handler", Name: name, Err: err}
	}
	if fn == nil {
		return &NameError{Kind: "handler", Name: name, Err: errors.New("handler func is nil")}
	}
	jo, err := e.buildJobOptions(opts)
	if err != nil {
		return err
	}
	h := &handlerEntry{name: name, opts: jo}
	payloadBytesMax := e.opts.PayloadBytesMax
	h.call = func(ctx context.Context, d *Delivery, st scheduler.Start) ([]byte, error) {
		var in T
		payload := st.Job.Payload
		if len(payload) > payloadBytesMax {
			return nil, Permanent(CodePayloadDecodeFailed, fmt.Errorf("payload is %d bytes, limit %d", len(payload), payloadBytesMax))
		}
		if err := record.DecodeValue(payload, &in); err != nil {
			return nil, Permanent(CodePayloadDecodeFailed, err)
		}
		return nil, fn(ctx, d, in)
	}
	return e.register(h)
}

// run executes one attempt: the handler with panics recovered into a
// retryable failure carrying the stack.
func (e *Engine) run(ctx context.Context, st scheduler.Start) (res scheduler.Result) {
	h := e.handler(st.Job.Handler)
	if h == nil {
		// Parked jobs are never started; a handler can only vanish if the
		// machine raced a registration it had not seen. Release the attempt.
		return scheduler.Result{Failure: &scheduler.Failure{Code: CodeHandlerNotRegistered,
			Message: "handler " + st.Job.Handler + " is not registered", Release: true}}
	}
	d := &Delivery{
		jobID: st.Job.ID, handler: st.Job.Handler, queue: st.Job.Queue, attempt: int(st.Job.Attempts),
		workflow: st.Job.WorkflowID, deadline: st.P, clk: e.clk, ctx: ctx, eng: e,
	}
	defer func() {
		if p := recover(); p != nil {
			res = scheduler.Result{Failure: &scheduler.Failure{
				Code: CodeHandlerPanicked, Message: fmt.Sprint(p), Stack: string(debug.Stack()),
			}}
		}
	}()
	out, err := h.call(ctx, d, st)
	if err == nil {
		return scheduler.Result{Output: out, FollowUps: d.followUps}
	}
	f := &scheduler.Failure{Code: CodeHandlerError, Message: err.Error()}
	var he *HandlerError
	if errors.As(err, &he) {
		if he.Code != "" {
			f.Code = he.Code
		}
		if he.Permanent {
			f.Class = scheduler.Permanent
		}
	}
	return scheduler.Result{Failure: f}
}
