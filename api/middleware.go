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
// DELIVERY_TERMINATION_CLEANUP_FAILED (DL-36), its error naming the first
// such hook's middleware with its error or panic value. The cleanup
// context's cause is a [*CancelReason] with Hook set once the hook's own
// deadline passes; the attempt's reason is [Termination.Reason].
type TerminationHook interface {
	OnTermination(ctx context.Context, t *Termination) error
}

// Guard decides whether an attempt may go on to its handler. It returns
// nil, or a typed error built with [Retryable] or [Permanent]; any other
// error is retryable with code HANDLER_ERROR. Guards run after every
// Before, in the same order (DL-27): global, queue, then the workflow's
// ([Workflow.WithGuards]) or the handler's ([WithGuards]). A guard that
// panics gives MIDDLEWARE_PANICKED, recorded with the option that put it
// in the plan: "panic in guard Options.Guards[1]: <value>". A Before's
// panic is recorded the same way, with the middleware's name.
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
// queue and workflow together (DL-27). A step's job may run on any queue
// (a sub-workflow's steps run on their parent's), so the queue that adds
// the most counts, as it does for [Handle].
func (e *Engine) checkWorkflowPlan(w *Workflow) error {
	if reason := e.opts.planOverLimit(middlewareLimit, "workflow", "a step attempt", len(w.middleware)); reason != "" {
		return &WorkflowError{Workflow: w.name, Option: "WithMiddleware", Reason: reason}
	}
	if reason := e.opts.planOverLimit(guardsLimit, "workflow", "a step attempt", len(w.guards)); reason != "" {
		return &WorkflowError{Workflow: w.name, Option: "WithGuards", Reason: reason}
	}
	return nil
}

// checkHandlerPlan refuses a handler whose attempts could have more than
// [MiddlewareMax] middleware or [GuardsMax] guards in effect: global,
// queue and handler together (DL-27). Its jobs may be enqueued on any
// queue ([OnQueue] overrides the handler's), and jobs recovered from the
// journal keep the queue they were enqueued on, so the limit must hold on
// every queue: the queue that adds the most counts.
func (e *Engine) checkHandlerPlan(o jobOptions) error {
	if reason := e.opts.planOverLimit(middlewareLimit, "handler", "an attempt", len(o.middleware)); reason != "" {
		return &OptionError{Field: "Handle.Middleware", Value: len(o.middleware), Reason: reason}
	}
	if reason := e.opts.planOverLimit(guardsLimit, "handler", "an attempt", len(o.guards)); reason != "" {
		return &OptionError{Field: "Handle.Guards", Value: len(o.guards), Reason: reason}
	}
	return nil
}

// planLimit is one bound of an attempt's plan (DL-27): what it counts,
// how many the global layer and one queue add, and its maximum.
type planLimit struct {
	what   string
	global func(Options) int
	queue  func(QueueOptions) int
	max    int
}

var (
	middlewareLimit = planLimit{"middleware",
		func(o Options) int { return len(o.Middleware) }, func(q QueueOptions) int { return len(q.Middleware) }, MiddlewareMax}
	guardsLimit = planLimit{"guards",
		func(o Options) int { return len(o.Guards) }, func(q QueueOptions) int { return len(q.Guards) }, GuardsMax}
)

// planOverLimit returns why own entries of layer (a handler's or a
// workflow's) would put more than l.max in effect for one attempt on the
// queue that adds the most, or "" if they would not. The reason states
// the true count on that queue and the layers it sums: the caller's own
// queue may add fewer, but a job may run on any queue.
func (o Options) planOverLimit(l planLimit, layer, attempt string, own int) string {
	global := l.global(o)
	queue, n := o.largestQueue(l.queue)
	total := global + n + own
	if total <= l.max {
		return ""
	}
	if n == 0 {
		return fmt.Sprintf("%d global + %d %s = %d %s in effect for %s, limit %d",
			global, own, layer, total, l.what, attempt, l.max)
	}
	return fmt.Sprintf("%d global + %d of queue %q + %d %s = %d %s in effect for %s on queue %q, limit %d "+
		"(a job may run on any queue, so the queue that adds the most counts)",
		global, n, queue, own, layer, total, l.what, attempt, queue, l.max)
}

// largestQueue returns the queue that adds the most entries by count, and
// how many; ties go to the first name in order, so that messages are
// reproducible. It returns "", 0 when no queue adds any.
func (o Options) largestQueue(count func(QueueOptions) int) (name string, n int) {
	for q, qo := range o.QueueOptions {
		if c := count(qo); c > n || (c == n && c > 0 && q < name) {
			name, n = q, c
		}
	}
	return name, n
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
	// Where each layer starts, to name an entry as its option does.
	queue          string
	step           bool
	mwQueue, mwOwn int
	gQueue, gOwn   int
}

func (e *Engine) plan(h *handlerEntry, queue string) plan {
	p := plan{queue: queue, step: h != nil && h.step}
	p.mw = append(p.mw, e.opts.Middleware...)
	p.guards = append(p.guards, e.opts.Guards...)
	p.mwQueue, p.gQueue = len(p.mw), len(p.guards)
	if q, ok := e.opts.QueueOptions[queue]; ok {
		p.mw = append(p.mw, q.Middleware...)
		p.guards = append(p.guards, q.Guards...)
	}
	p.mwOwn, p.gOwn = len(p.mw), len(p.guards)
	if h != nil {
		p.mw = append(p.mw, h.opts.middleware...)
		p.guards = append(p.guards, h.opts.guards...)
	}
	return p
}

// mwLabel names middleware i of the plan by the option that put it there,
// e.g. Options.QueueOptions["q"].Middleware[0].
func (p *plan) mwLabel(i int) string {
	return p.label("Middleware", "WithMiddleware", i, p.mwQueue, p.mwOwn)
}

// guardLabel names guard i of the plan by the option that put it there,
// e.g. Handle.Guards[1].
func (p *plan) guardLabel(i int) string { return p.label("Guards", "WithGuards", i, p.gQueue, p.gOwn) }

func (p *plan) label(field, workflowOption string, i, queue, own int) string {
	switch {
	case i < queue:
		return fmt.Sprintf("Options.%s[%d]", field, i)
	case i < own:
		return fmt.Sprintf("Options.QueueOptions[%q].%s[%d]", p.queue, field, i-queue)
	case p.step:
		return fmt.Sprintf("Workflow.%s[%d]", workflowOption, i-own)
	}
	return fmt.Sprintf("Handle.%s[%d]", field, i-own)
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
	for i, mw := range p.mw {
		if !a.Proceed() {
			return stopped()
		}
		if err, st := callBefore(ctx, mw, p.mwLabel(i), d); err != nil {
			primary, stack = err, st
			break
		}
		entered = append(entered, a.Enter(middlewareName(mw), hookFunc(hookOf(mw), d)))
	}
	if primary == nil {
		for i, g := range p.guards {
			if !a.Proceed() {
				return stopped()
			}
			if err, st := callGuard(ctx, g, p.guardLabel(i), d); err != nil {
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
	// Taken under the Delivery's lock: an Enqueue from a goroutine the
	// handler left behind is refused from here on, never lost.
	followUps := d.takeFollowUps()
	if primary == nil {
		return scheduler.Result{Output: out, FollowUps: followUps}
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
	if errors.As(err, &he) && he != nil {
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
		if pv.named {
			f.Message = pv.Error()
		}
	}
	return f
}

// panicValue is a recovered panic: the error an After sees says where it
// happened. The settlement's message is the panic value itself, or, when
// named is set, the whole error: a Before or guard that panicked is in no
// other field of the record (an After's is, in its normal exit).
type panicValue struct {
	where string
	value any
	named bool
}

func (p *panicValue) Error() string { return fmt.Sprintf("panic in %s: %v", p.where, p.value) }

func panicErr(code, where string, p any) error {
	return &HandlerError{Code: code, Err: &panicValue{where: where, value: p}}
}

func namedPanicErr(code, where string, p any) error {
	return &HandlerError{Code: code, Err: &panicValue{where: where, value: p, named: true}}
}

// callBefore runs mw's Before; label names mw in the plan.
func callBefore(ctx context.Context, mw Middleware, label string, d *Delivery) (err error, stack string) {
	defer func() {
		if p := recover(); p != nil {
			where := fmt.Sprintf("Before of middleware %q (%s)", middlewareName(mw), label)
			err, stack = namedPanicErr(CodeMiddlewarePanicked, where, p), string(debug.Stack())
		}
	}()
	return mw.Before(ctx, d), ""
}

// callGuard runs g; label names it in the plan.
func callGuard(ctx context.Context, g Guard, label string, d *Delivery) (err error, stack string) {
	defer func() {
		if p := recover(); p != nil {
			err, stack = namedPanicErr(CodeMiddlewarePanicked, "guard "+label, p), string(debug.Stack())
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
