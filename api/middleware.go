package api

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/quire-dev/quire/scheduler"
)

// Middleware wraps the pipeline of every attempt it applies to (DL-27).
// Before runs on the way in, outermost first: global middleware
// ([Options.Middleware]), then the queue's ([QueueOptions.Middleware]),
// then, for a workflow step, the workflow's ([Workflow.WithMiddleware]),
// or, for a job, the handler's ([WithMiddleware]). A middleware is entered
// when its Before returns nil; after the guards and the handler, the After
// of every entered middleware runs in reverse order with the result so far
// (nil on success). A Before that fails stops the forward pass, and the
// entered prefix unwinds. An After that returns an error replaces a
// success, never an earlier failure; a panic in an After stops the unwind
// at once (DL-28). Every stage shares the attempt's one deadline (DL-8).
//
// A middleware may also implement [TerminationHook]. A middleware may
// implement Name() string to name itself in the journal; otherwise its
// type names it.
type Middleware interface {
	Before(ctx context.Context, d *Delivery) error
	After(ctx context.Context, d *Delivery, err error) error
}

// TerminationHook is implemented by middleware that must clean up when
// their normal After could not complete: it was never started because the
// attempt was abandoned at its cooperative deadline, it was still running
// then (Interrupted), or it panicked, or an inner After panicked (DL-32).
// The engine calls OnTermination at most once, never retries it (not even
// after a crash), on its own goroutine, inner hooks first, with a cleanup
// context that has the hook's fair share of the time left (DL-33). A hook
// cannot change the attempt's result; a hook that fails, panics or
// overruns its deadline makes the settlement record
// DELIVERY_TERMINATION_CLEANUP_FAILED (DL-36).
type TerminationHook interface {
	OnTermination(ctx context.Context, t *Termination) error
}

// Guard decides whether an attempt may go on to its handler. It returns
// nil, or a typed error built with [Retryable] or [Permanent]; any other
// error is retryable with code HANDLER_ERROR. Guards run after every
// Before, in the same order (DL-27): global, queue, then the workflow's
// ([Workflow.WithGuards]) or the handler's ([WithGuards]).
type Guard func(ctx context.Context, d *Delivery) error

// Limits of one attempt's plan (DL-27).
const (
	// MiddlewareMax bounds the middleware in effect for one attempt:
	// global, queue and handler (or workflow) middleware together.
	MiddlewareMax = 64
	// GuardsMax bounds the guards in effect for one attempt.
	GuardsMax = 64
)

// Codes of the pipeline (DL-28).
const (
	CodeMiddlewarePanicked  = "MIDDLEWARE_PANICKED"
	CodeDeliveryInterrupted = scheduler.CodeDeliveryInterrupted
	// Cleanup failure codes (DL-36), all retryable.
	CodeTerminationCleanupFailed = scheduler.CodeTerminationCleanupFailed
	CodeScopeCleanupTimedOut     = scheduler.CodeScopeCleanupTimedOut
	CodeScopeCleanupFailed       = scheduler.CodeScopeCleanupFailed
	CodeScopeCleanupPanicked     = scheduler.CodeScopeCleanupPanicked
	CodeScopeResultUnobserved    = scheduler.CodeScopeResultUnobserved
	CodeResourceReleasePanicked  = scheduler.CodeResourceReleasePanicked
)

// MiddlewareFuncs adapts functions to a [Middleware]. A nil BeforeFunc or
// AfterFunc does nothing and returns nil (an AfterFunc that is nil passes
// no error of its own); with a nil OnTerminationFunc the middleware has no
// termination hook. Label names it in the journal.
type MiddlewareFuncs struct {
	Label             string
	BeforeFunc        func(ctx context.Context, d *Delivery) error
	AfterFunc         func(ctx context.Context, d *Delivery, err error) error
	OnTerminationFunc func(ctx context.Context, t *Termination) error
}

// Name returns m.Label.
func (m MiddlewareFuncs) Name() string { return m.Label }

// Before calls m.BeforeFunc.
func (m MiddlewareFuncs) Before(ctx context.Context, d *Delivery) error {
	if m.BeforeFunc == nil {
		return nil
	}
	return m.BeforeFunc(ctx, d)
}

// After calls m.AfterFunc.
func (m MiddlewareFuncs) After(ctx context.Context, d *Delivery, err error) error {
	if m.AfterFunc == nil {
		return nil
	}
	return m.AfterFunc(ctx, d, err)
}

// OnTermination calls m.OnTerminationFunc.
func (m MiddlewareFuncs) OnTermination(ctx context.Context, t *Termination) error {
	if m.OnTerminationFunc == nil {
		return nil
	}
	return m.OnTerminationFunc(ctx, t)
}

// WithMiddleware adds handler-specific middleware, innermost of the plan
// (DL-27). Only [Handle] accepts it; Enqueue and workflow steps refuse it:
// a workflow's steps take [Workflow.WithMiddleware].
func WithMiddleware(mw ...Middleware) JobOption {
	return func(o *jobOptions) {
		o.middleware = append(o.middleware, mw...)
		o.registration = true
	}
}

// WithGuards adds handler-specific guards, run after the global and queue
// guards (DL-27). Only [Handle] accepts it.
func WithGuards(g ...Guard) JobOption {
	return func(o *jobOptions) {
		o.guards = append(o.guards, g...)
		o.registration = true
	}
}

// checkPlanParts refuses nil middleware or guards, naming the field.
func checkPlanParts(field string, mw []Middleware, guards []Guard) error {
	for i, m := range mw {
		if m == nil {
			return &OptionError{Field: fmt.Sprintf("%sMiddleware[%d]", field, i), Value: nil, Reason: "must not be nil"}
		}
	}
	for i, g := range guards {
		if g == nil {
			return &OptionError{Field: fmt.Sprintf("%sGuards[%d]", field, i), Value: nil, Reason: "must not be nil"}
		}
	}
	return nil
}

// checkPlanSize refuses a plan over [MiddlewareMax] or [GuardsMax].
func checkPlanSize(field string, middleware, guards int) error {
	if middleware > MiddlewareMax {
		return &OptionError{Field: field + "Middleware", Value: middleware,
			Reason: fmt.Sprintf("%d middleware in effect for one attempt, limit %d (global, queue and handler together)", middleware, MiddlewareMax)}
	}
	if guards > GuardsMax {
		return &OptionError{Field: field + "Guards", Value: guards,
			Reason: fmt.Sprintf("%d guards in effect for one attempt, limit %d", guards, GuardsMax)}
	}
	return nil
}

// checkWorkflowPlan refuses a workflow whose step attempts could have more
// than [MiddlewareMax] middleware or [GuardsMax] guards in effect: global,
// queue and workflow together (DL-27). A step job may run on any queue (a
// sub-workflow's steps inherit their parent's), so the largest queue plan
// counts, as it does for [Handle].
func (e *Engine) checkWorkflowPlan(w *Workflow) error {
	qmw, qg := e.opts.maxQueuePlan()
	if n := len(e.opts.Middleware) + qmw + len(w.middleware); n > MiddlewareMax {
		return &WorkflowError{Workflow: w.name, Option: "WithMiddleware",
			Reason: fmt.Sprintf("%d middleware in effect for one step attempt, limit %d (global, queue and workflow together)", n, MiddlewareMax)}
	}
	if n := len(e.opts.Guards) + qg + len(w.guards); n > GuardsMax {
		return &WorkflowError{Workflow: w.name, Option: "WithGuards",
			Reason: fmt.Sprintf("%d guards in effect for one step attempt, limit %d (global, queue and workflow together)", n, GuardsMax)}
	}
	return nil
}

// maxQueuePlan returns the most middleware and guards any configured queue
// adds.
func (o Options) maxQueuePlan() (mw, guards int) {
	for _, q := range o.QueueOptions {
		mw, guards = max(mw, len(q.Middleware)), max(guards, len(q.Guards))
	}
	return mw, guards
}

// middlewareName is how the journal names a middleware.
func middlewareName(m Middleware) string {
	if n, ok := m.(interface{ Name() string }); ok && n.Name() != "" {
		return n.Name()
	}
	return fmt.Sprintf("%T", m)
}

// hookOf returns m's termination hook, or nil.
func hookOf(m Middleware) TerminationHook {
	switch f := m.(type) {
	case MiddlewareFuncs:
		if f.OnTerminationFunc == nil {
			return nil
		}
	case *MiddlewareFuncs:
		if f.OnTerminationFunc == nil {
			return nil
		}
	}
	th, _ := m.(TerminationHook)
	return th
}

// plan is the immutable middleware plan of one attempt (DL-29): global,
// then queue, then the handler's own, which for a workflow step are its
// workflow's (DL-27).
type plan struct {
	mw     []Middleware
	guards []Guard
}

func (e *Engine) plan(h *handlerEntry, queue string) plan {
	var p plan
	p.mw = append(p.mw, e.opts.Middleware...)
	p.guards = append(p.guards, e.opts.Guards...)
	if q, ok := e.opts.QueueOptions[queue]; ok {
		p.mw = append(p.mw, q.Middleware...)
		p.guards = append(p.guards, q.Guards...)
	}
	if h != nil {
		p.mw = append(p.mw, h.opts.middleware...)
		p.guards = append(p.guards, h.opts.guards...)
	}
	return p
}

// stopped is the result of a pipeline that did not start its next stage
// because the cooperative deadline passed (DL-20).
func stopped() scheduler.Result {
	return scheduler.Result{Failure: &scheduler.Failure{Code: CodeDeliveryInterrupted,
		Message: "pipeline stopped at its cooperative deadline"}}
}

// errNotRegistered fails the handler resolution stage.
var errNotRegistered = errors.New("handler is not registered")

// run executes one attempt's pipeline on its execution goroutine (DL-27,
// DL-28): Before in order, guards, handler resolution, payload decoding,
// the handler, then the After of every entered middleware in reverse.
// No stage starts once the cooperative deadline has passed (DL-20): the
// owner abandons the attempt then, and whatever this returns is fenced
// out. The runner's owner keeps the ledger of entered middleware and runs
// their termination hooks (DL-29).
func (e *Engine) run(ctx context.Context, a *scheduler.Attempt) scheduler.Result {
	d := newDelivery(e, a)
	h := e.handler(a.Job.Handler)
	p := e.plan(h, a.Job.Queue)
	var (
		primary error
		stack   string
		out     []byte
		entered []int // ledger index of each entered middleware, in entry order
	)
	if len(p.mw) > MiddlewareMax || len(p.guards) > GuardsMax {
		// Validation at Open and Handle makes this unreachable.
		primary = Permanent("MIDDLEWARE_LIMIT", checkPlanSize("", len(p.mw), len(p.guards)))
		p = plan{}
	}
	for _, mw := range p.mw {
		if !a.Proceed() {
			return stopped()
		}
		if err, st := callBefore(ctx, mw, d); err != nil {
			primary, stack = err, st
			break
		}
		entered = append(entered, a.Enter(middlewareName(mw), hookFunc(hookOf(mw), d)))
	}
	if primary == nil {
		for _, g := range p.guards {
			if !a.Proceed() {
				return stopped()
			}
			if err, st := callGuard(ctx, g, d); err != nil {
				primary, stack = err, st
				break
			}
		}
	}
	if primary == nil {
		if !a.Proceed() {
			return stopped()
		}
		switch {
		case h == nil:
			// Parked jobs are never started; a handler can only vanish if
			// the machine raced a registration it had not seen.
			primary = errNotRegistered
		case h.decode != nil:
			in, err := h.decode(a.Start)
			if err != nil {
				primary = Permanent(CodePayloadDecodeFailed, err)
				break
			}
			if !a.Proceed() {
				return stopped()
			}
			out, primary, stack = callHandler(func() ([]byte, error) { return h.invoke(ctx, d, in) })
		default:
			out, primary, stack = callHandler(func() ([]byte, error) { return h.call(ctx, d, a.Start) })
		}
	}
	for k := len(entered) - 1; k >= 0; k-- {
		if !a.Proceed() {
			return stopped()
		}
		i := entered[k]
		a.SetExit(i, scheduler.ExitRunning)
		err, st, panicked := callAfter(ctx, p.mw[k], d, primary)
		if panicked {
			a.SetExit(i, scheduler.ExitPanicked)
			if primary == nil {
				primary, stack = err, st
			}
			break // DL-28: the unwind stops at once
		}
		if err != nil {
			a.SetExit(i, scheduler.ExitFailed)
			if primary == nil {
				primary = err
			}
			continue
		}
		a.SetExit(i, scheduler.ExitCompleted)
	}
	if primary == nil {
		return scheduler.Result{Output: out, FollowUps: d.followUps}
	}
	return scheduler.Result{Failure: failureOf(primary, stack)}
}

// failureOf classifies a pipeline error: a [*HandlerError] keeps its code
// and class; any other error is retryable HANDLER_ERROR.
func failureOf(err error, stack string) *scheduler.Failure {
	if errors.Is(err, errNotRegistered) {
		return &scheduler.Failure{Code: CodeHandlerNotRegistered, Message: err.Error(), Release: true}
	}
	f := &scheduler.Failure{Code: CodeHandlerError, Message: err.Error(), Stack: stack}
	var he *HandlerError
	if errors.As(err, &he) {
		if he.Code != "" {
			f.Code = he.Code
		}
		if he.Permanent {
			f.Class = scheduler.Permanent
		}
	}
	var pv *panicValue
	if errors.As(err, &pv) {
		f.Message = fmt.Sprint(pv.value)
	}
	return f
}

// panicValue is a recovered panic: the error an After sees says where it
// happened; the settlement's message is the panic value itself.
type panicValue struct {
	where string
	value any
}

func (p *panicValue) Error() string { return fmt.Sprintf("panic in %s: %v", p.where, p.value) }

func panicErr(code, where string, p any) error {
	return &HandlerError{Code: code, Err: &panicValue{where: where, value: p}}
}

func callBefore(ctx context.Context, mw Middleware, d *Delivery) (err error, stack string) {
	defer func() {
		if p := recover(); p != nil {
			err, stack = panicErr(CodeMiddlewarePanicked, "Before of "+middlewareName(mw), p), string(debug.Stack())
		}
	}()
	return mw.Before(ctx, d), ""
}

func callGuard(ctx context.Context, g Guard, d *Delivery) (err error, stack string) {
	defer func() {
		if p := recover(); p != nil {
			err, stack = panicErr(CodeMiddlewarePanicked, "guard", p), string(debug.Stack())
		}
	}()
	return g(ctx, d), ""
}

func callHandler(fn func() ([]byte, error)) (out []byte, err error, stack string) {
	defer func() {
		if p := recover(); p != nil {
			out, err, stack = nil, panicErr(CodeHandlerPanicked, "handler", p), string(debug.Stack())
		}
	}()
	out, err = fn()
	return out, err, ""
}

func callAfter(ctx context.Context, mw Middleware, d *Delivery, in error) (err error, stack string, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			err, stack, panicked = panicErr(CodeMiddlewarePanicked, "After of "+middlewareName(mw), p), string(debug.Stack()), true
		}
	}()
	return mw.After(ctx, d, in), "", false
}

// hookFunc binds a termination hook to the attempt's delivery.
func hookFunc(th TerminationHook, d *Delivery) scheduler.HookFunc {
	if th == nil {
		return nil
	}
	return func(ctx context.Context, run *scheduler.HookRun) error {
		return th.OnTermination(ctx, &Termination{d: d, run: run})
	}
}
