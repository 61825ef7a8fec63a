package api

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/scheduler"
)

// Priority orders jobs of one queue: higher first, then enqueue order (JB-2).
type Priority uint8

// Priorities of JB-2.
const (
	Low    Priority = 0
	Normal Priority = 1
	High   Priority = 2
	Urgent Priority = 3
)

// String returns the priority's name: "low", "normal", "high" or "urgent".
func (p Priority) String() string {
	switch p {
	case Low:
		return "low"
	case Normal:
		return "normal"
	case High:
		return "high"
	case Urgent:
		return "urgent"
	}
	return fmt.Sprintf("priority(%d)", uint8(p))
}

// BackoffPolicy is a retry delay schedule (DL-4, DL-5); see
// [deadlines.Backoff] for its fields and ranges.
type BackoffPolicy = deadlines.Backoff

// Backoff kinds.
const (
	BackoffExponential = deadlines.BackoffExponential
	BackoffFixed       = deadlines.BackoffFixed
	BackoffLinear      = deadlines.BackoffLinear
	BackoffList        = deadlines.BackoffList
)

// QueueDefault is the queue of jobs enqueued without [OnQueue].
const QueueDefault = "default"

// JobOption sets one option of a job, or a handler's default for its jobs.
type JobOption func(*jobOptions)

type jobOptions struct {
	queue    *string
	priority *Priority
	delay    time.Duration
	// delaySet records that Delay was given, even Delay(0): [Handle]
	// refuses it, as Delay is per enqueue only.
	delaySet    bool
	maxAttempts *int
	backoff     *deadlines.Backoff
	timeout     *time.Duration
	unique      bool
	// middleware and guards are the handler's own (DL-27); registration
	// marks options only Handle accepts.
	middleware   []Middleware
	guards       []Guard
	registration bool
	err          error
}

func (o *jobOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// OnQueue puts the job on queue q (default "default").
func OnQueue(q string) JobOption {
	return func(o *jobOptions) {
		if err := validateName(q); err != nil {
			o.fail(&OptionError{Field: "OnQueue", Value: q, Reason: err.Error(), Err: err})
			return
		}
		o.queue = &q
	}
}

// WithPriority sets the job's priority (default Low).
func WithPriority(p Priority) JobOption {
	return func(o *jobOptions) {
		if p > Urgent {
			o.fail(&OptionError{Field: "WithPriority", Value: uint8(p), Reason: "must be Low, Normal, High or Urgent"})
			return
		}
		o.priority = &p
	}
}

// DelayMax is the longest job [Delay], workflow [Workflow.Delay] step and
// workflow deadline ([Workflow.MustCompleteWithin]): 100 years of 365 days.
// Instants are journaled in Unix nanoseconds, which end in 2262; past the
// year 2162 on the clock, an instant this far ahead is recorded as that
// end instead.
const DelayMax = deadlines.DelayMax

// Delay makes the job available d after it is enqueued (JB-1): 0 up to
// [DelayMax], 100 years. It is the one job option that applies only to the
// enqueue it is given to: [Handle] refuses it as a handler default, and a
// workflow step refuses it too (use a [Workflow.Delay] step), since a
// delay is counted from an enqueue and neither names one.
func Delay(d time.Duration) JobOption {
	return func(o *jobOptions) {
		if err := deadlines.ValidateDelay("Delay", d, 0); err != nil {
			o.fail(optionErr("", err))
			return
		}
		o.delay, o.delaySet = d, true
	}
}

// MaxAttempts sets the attempts of the job, the first included (1..100;
// DL-4). Without it a job takes its handler's default (given to
// [Handle]), else its queue's (QueueOptions.MaxAttempts), else
// Options.MaxAttempts, which is 3 unless set.
func MaxAttempts(n int) JobOption {
	return func(o *jobOptions) {
		if err := deadlines.ValidateMaxAttempts(n); err != nil {
			o.fail(optionErr("", err))
			return
		}
		o.maxAttempts = &n
	}
}

// Backoff sets the job's retry delay policy (DL-4, DL-5). Zero Base and
// Max take their defaults.
func Backoff(b BackoffPolicy) JobOption {
	// A copy of the list: Handle keeps the policy as a default, validated
	// once, and the caller may reuse its slice. The policy is completed
	// and checked here, once: the option only reads it, so that one
	// option value may be given to any number of calls at once.
	b.List = slices.Clone(b.List)
	b = b.WithDefaults()
	err := b.Validate()
	return func(o *jobOptions) {
		if err != nil {
			o.fail(backoffErr("Backoff.", b, err))
			return
		}
		p := b
		o.backoff = &p
	}
}

// DeliveryTimeout overrides, for the job, its handler's default, its
// queue's (QueueOptions.DeliveryTimeout) and the engine's
// (Options.DeliveryTimeout, 30 s unless set): 100 ms..900 s (DL-2).
func DeliveryTimeout(d time.Duration) JobOption {
	return func(o *jobOptions) {
		if err := deadlines.ValidateDeliveryTimeout(d); err != nil {
			o.fail(optionErr("", err))
			return
		}
		o.timeout = &d
	}
}

// Unique dedupes the job while a pending or processing job enqueued with
// Unique for the same handler and payload exists: Enqueue returns that
// job's id and appends nothing (JB-5). The key is the handler name and a
// hash of the payload, so the queue and other options take no part in the
// match, and a job enqueued without Unique carries no key and blocks
// nothing. Completed and buried jobs do not block. A buried job retried
// ([Engine.Retry], JB-7) while another job holds its key waits in line
// for it: Enqueue keeps returning the holder, and once the holder
// completes or is buried, the retried job (if several, the one whose id
// sorts first) is the one returned. Given to [Handle], it applies to
// every enqueue for that handler.
func Unique() JobOption {
	return func(o *jobOptions) { o.unique = true }
}

// buildJobOptions builds the options of an enqueue or a workflow step,
// which refuse handler middleware and guards.
func (e *Engine) buildJobOptions(opts []JobOption) (jobOptions, error) {
	o, err := buildOptions(opts)
	if err == nil && o.registration {
		field, n := "WithMiddleware", len(o.middleware)
		if n == 0 {
			field, n = "WithGuards", len(o.guards)
		}
		err = &OptionError{Field: field, Value: n,
			Reason: "handler middleware and guards are set when the handler is registered with Handle"}
	}
	return o, err
}

// buildOptions applies opts in order; the first invalid one fails.
func buildOptions(opts []JobOption) (jobOptions, error) {
	var o jobOptions
	for _, opt := range opts {
		if opt == nil {
			return o, &OptionError{Field: "JobOption", Value: nil, Reason: "must not be nil"}
		}
		opt(&o)
	}
	return o, o.err
}

// enqueueRequest validates an enqueue and resolves its options: the call's,
// then the handler's, then the engine's (WF-22).
func (e *Engine) enqueueRequest(handler string, payload any, opts []JobOption) (scheduler.EnqueueRequest, error) {
	var req scheduler.EnqueueRequest
	if err := handlerNameError(handler); err != nil {
		return req, err
	}
	h := e.handler(handler)
	if h == nil || h.step {
		return req, unknownHandlerError(handler, h)
	}
	o, err := e.buildJobOptions(opts)
	if err != nil {
		return req, err
	}
	if payload == nil {
		return req, fmt.Errorf("%w: payload for handler %q is nil", ErrInvalidPayload, handler)
	}
	if isNil(payload) {
		return req, fmt.Errorf("%w: payload for handler %q is a nil %T", ErrInvalidPayload, handler, payload)
	}
	b, err := record.EncodeValue(payload)
	if err != nil {
		return req, fmt.Errorf("%w: payload for handler %q: %v", ErrInvalidPayload, handler, err)
	}
	if len(b) > e.opts.PayloadBytesMax {
		return req, fmt.Errorf("%w: payload for handler %q is %d bytes, limit %d (Options.PayloadBytesMax)",
			ErrInvalidPayload, handler, len(b), e.opts.PayloadBytesMax)
	}
	if h.check != nil {
		// A payload the handler cannot decode would only bury its job at
		// its first delivery: refuse it while the caller can fix it.
		if err := h.check(b); err != nil {
			return req, fmt.Errorf("%w: payload for handler %q: %v", ErrInvalidPayload, handler, err)
		}
	}
	req = e.resolve(h, o)
	req.Handler, req.Payload = handler, b
	return req, nil
}

// isNil reports whether v is nil or holds a nil pointer, map, slice, func,
// channel or interface: Enqueue refuses all of them as a nil payload,
// which msgpack would otherwise encode as nil or fail on.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// resolve layers job options: the call's (or a workflow step's, then its
// workflow's) over the handler's registration, over the job's queue's
// [QueueOptions], over the engine's defaults (WF-22, DL-2, DL-4).
func (e *Engine) resolve(h *handlerEntry, o jobOptions) scheduler.EnqueueRequest {
	queue := QueueDefault
	for _, layer := range []*jobOptions{&h.opts, &o} {
		if layer.queue != nil {
			queue = *layer.queue
		}
	}
	prio := Low
	maxAttempts := e.opts.MaxAttempts
	backoff := e.opts.Backoff
	timeout := time.Duration(0)
	if q, ok := e.opts.QueueOptions[queue]; ok {
		if q.MaxAttempts != 0 {
			maxAttempts = q.MaxAttempts
		}
		if q.Backoff != nil {
			backoff = *q.Backoff
		}
		timeout = q.DeliveryTimeout
	}
	for _, layer := range []*jobOptions{&h.opts, &o} {
		if layer.priority != nil {
			prio = *layer.priority
		}
		if layer.maxAttempts != nil {
			maxAttempts = *layer.maxAttempts
		}
		if layer.backoff != nil {
			backoff = *layer.backoff
		}
		if layer.timeout != nil {
			timeout = *layer.timeout
		}
	}
	return scheduler.EnqueueRequest{
		Queue: queue, Priority: uint8(prio), Delay: o.delay,
		Retry: scheduler.RetryPolicy(maxAttempts, backoff), DeliveryTimeout: timeout,
		Unique: o.unique || h.opts.unique,
	}
}

// queueJob returns the retry policy and delivery timeout of a job of queue
// that sets none of its own (scheduler.Config.QueueJobFunc): the queue's
// options over the engine's.
func (e *Engine) queueJob(queue string) (record.RetryPolicy, time.Duration) {
	req := e.resolve(&handlerEntry{}, jobOptions{queue: &queue})
	return req.Retry, req.DeliveryTimeout
}
