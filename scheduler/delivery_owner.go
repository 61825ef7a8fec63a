package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// Phases of an attempt's owner.
type phase uint8

const (
	phaseRunning phase = iota // waiting for the execution, until C
	phaseHooks                // running the eligible termination hooks, until Hk
	phaseScope                // releasing values and closing the scope, until E'
)

// Execution outcomes recorded in the settlement (DL-38).
const (
	executionReturned   = "returned"    // joined by its own return before C
	executionAbandoned  = "abandoned"   // not returned at C (DL-26)
	executionNotStarted = "not_started" // first observed after C: no user code ran (DL-24)
)

// Scope outcomes recorded in the settlement (DL-36, DL-37).
const (
	scopeClosed      = "closed"
	scopeFailed      = "failed"
	scopePanicked    = "panicked"
	scopeTimedOut    = "timed_out"
	scopeUnobserved  = "unobserved"
	scopeQuarantined = "quarantined"
)

// attempt is the owner of one started attempt (DL-29): it lives on the
// loop, outside the execution goroutine, from launch to settlement.
//
// Owners are reused (Runner.retire): nothing outside r.attempts and
// r.held keeps one, and the goroutines an owner starts report by token.
type attempt struct {
	att    *Attempt
	budget deadlines.Budget
	phase  phase
	// c is the cooperative deadline, set once a reason is recorded; it only
	// shrinks (DL-24, DL-25).
	c         time.Time
	returned  bool // the loop observed the execution goroutine's return
	abandoned bool
	result    Result
	execution string
	cause     Cause
	// Cleanup (DL-30, DL-31): first started at cleanupAt, cutoff e, hook
	// chain deadline hk, scope deadline scopeAt; all only shrink.
	cleanupAt    time.Time
	e, hk        time.Time
	scopeAt      time.Time
	hooks        []int // eligible ledger entries, in run order
	pos          int
	hook         *hookRun
	scopeRunning bool
	scope        string
	codes        []string // cleanup failure codes, in the order of DL-36
	texts        []string // each code's own text, as its failure reported it
	hookText     string   // the first failed termination hook's text
	armed        time.Time
	// launched is when the execution was handed to its goroutine, and
	// ackGen the acknowledgement that launched it (resultsHold).
	launched time.Time
	ackGen   uint64
	// torn is set once the owner is torn down (SD-14): it no longer
	// settles the token, and its cleanup is bounded by final, the cutoff
	// of the final reconciliation window (DL-30).
	torn  bool
	final time.Time
	// revoked is set by the final abort of a shutdown ([Runner.Revoke],
	// DL-41): when its cleanup ends, the abort's release is decided
	// instead of the owner's settlement.
	revoked bool
}

type hookRun struct {
	idx      int
	gen      uint64
	deadline time.Time
	ctx      *attemptContext
	sig      *Signal
	// done is the clock's instant the hook returned at, stored by its
	// goroutine before it reports the return.
	done atomic.Pointer[time.Time]
}

// returnedBefore reports whether the hook has returned, at an instant
// before t: its report is on its way to the loop (DL-33).
func (h *hookRun) returnedBefore(t time.Time) bool {
	d := h.done.Load()
	return d != nil && d.Before(t)
}

// lostExecution is an abandoned execution goroutine that has not returned
// (DL-26); scopeLost is set once its scope was withheld (DL-37).
type lostExecution struct {
	att       *Attempt
	scopeLost bool
}

type settleWait struct {
	token    uint64
	deadline time.Time
}

// Owner events sent by hook and scope goroutines.
const (
	ownerHookDone uint8 = iota + 1
	ownerScopeDone
	ownerLostScopeDone
)

type ownerEvent struct {
	kind  uint8
	token uint64
	gen   uint64
	state HookState
	text  string // a failed or panicked hook's error or panic value
	// scope close
	err             error
	panicked        bool
	unobserved      bool
	releasePanicked bool
	releaseText     string // the first Release panic, naming its value
	panicText       string // a panic that escaped the close itself
}

// quarantine counts what the engine stopped waiting for (DL-26, DL-37).
type quarantine struct {
	execs, hooks, scopes atomic.Int64
	fenced, unresolved   atomic.Int64
	// handlers counts on-deadline handler goroutines that have not
	// returned (WD-10), running or abandoned alike.
	handlers atomic.Int64
}

// QuarantineStats is what the runner stopped waiting for, for the shutdown
// report (SD-30): goroutines and scopes still quarantined now, and the
// late results fenced out and settlements left unresolved so far.
type QuarantineStats struct {
	// Executions counts abandoned execution goroutines not yet returned.
	Executions int
	// Hooks counts timed-out or interrupted hook goroutines not yet returned.
	Hooks int
	// Scopes counts attempt scopes withheld because their execution has not
	// returned, or whose close timed out and has not returned (DL-37).
	Scopes int
	// Handlers counts on-deadline handler goroutines that have not returned
	// (WD-10). A drain waits for them, and a shutdown cancels them at G, so
	// one still counted when the drain is over ignored its cancellation.
	Handlers int
	// Fenced counts late execution results discarded by token fencing.
	Fenced int
	// Unresolved counts settlements whose commit was not confirmed within
	// the settlement cap, or that an expired root never started (DL-39).
	Unresolved int
}

// Quarantine returns the runner's quarantine counts. It is safe to call
// from any goroutine, also after the runner stopped.
func (r *Runner) Quarantine() QuarantineStats {
	return QuarantineStats{
		Executions: int(r.q.execs.Load()), Hooks: int(r.q.hooks.Load()), Scopes: int(r.q.scopes.Load()),
		Handlers: int(r.q.handlers.Load()),
		Fenced:   int(r.q.fenced.Load()), Unresolved: int(r.q.unresolved.Load()),
	}
}

// Quarantined returns how many goroutines and scopes are quarantined now:
// abandoned and not yet returned or closed (DL-26, DL-37, DL-46). A
// shutdown that ends with a non-zero count is Incomplete.
func (r *Runner) Quarantined() int {
	s := r.Quarantine()
	return s.Executions + s.Hooks + s.Scopes + s.Handlers
}

// WaitQuarantine returns once nothing is quarantined, or ctx ends. Tests
// call it after releasing a goroutine the engine abandoned.
func (r *Runner) WaitQuarantine(ctx context.Context) error {
	return r.await(ctx, func(w chan struct{}) { r.quarWait = append(r.quarWait, w) })
}

func (r *Runner) checkQuarantine() {
	if len(r.quarWait) == 0 || r.Quarantined() > 0 {
		return
	}
	for _, w := range r.quarWait {
		close(w)
	}
	r.quarWait = nil
}

// InstallRoot installs root over the one in effect (SD-5: cutoffs only
// shrink) and applies it at once to every attempt (DL-10, DL-12, DL-25):
// budgets are capped, handler deadlines lowered, cooperative and cleanup
// deadlines recomputed, attempts whose C has passed abandoned now, and
// settlement waits capped by Hr (DL-39). It returns once all of that is
// done.
func (r *Runner) InstallRoot(ctx context.Context, root deadlines.Root) error {
	return r.call(ctx, func(now time.Time) {
		r.root = r.root.Install(root)
		for _, tok := range r.tokens() {
			if a, ok := r.attempts[tok]; ok {
				r.recompute(a, now)
			}
		}
		r.boundHandlers(now)
		if r.root.Installed() {
			for seq, w := range r.settling {
				if hr := r.root.Hr(); hr.Before(w.deadline) {
					w.deadline = hr
					r.settling[seq] = w
					heapPush(&r.events, event{at: hr.UnixNano(), token: seq, kind: evSettle})
				}
			}
		}
	})
}

// Root returns the root in effect, the zero Root if none.
func (r *Runner) Root() deadlines.Root {
	var root deadlines.Root
	r.call(context.Background(), func(time.Time) { root = r.root })
	return root
}

// Force cancels the runtime source with reason at the current instant and
// publishes it synchronously to every attempt that has no reason of its
// own (DL-17, DL-18): it returns once every one of them has it. The first
// runtime reason sticks; attempts started later inherit it with its
// instant. The caller chooses the reason with [deadlines.ForceReason];
// ReasonNone, a cancellation that names no reason, is recorded as
// ReasonRuntimeCancellation, and a debug record with code
// [CodeReasonlessCancellation] is appended for every attempt it reaches
// (DL-15). Force revokes no settlement authority (DL-41).
func (r *Runner) Force(ctx context.Context, reason deadlines.Reason) error {
	return r.call(ctx, func(now time.Time) { r.force(reason, now) })
}

// force is Force on the loop at now.
func (r *Runner) force(reason deadlines.Reason, now time.Time) {
	r.runtime.record(reason, now)
	rr, at, _ := r.runtime.Reason()
	for _, exp := range sortedKeys(r.handlers) {
		r.handlers[exp].cancel(&CancelReason{Reason: rr, At: at}) // WD-10: force ends them too
	}
	for _, tok := range r.tokens() {
		a, ok := r.attempts[tok]
		if !ok {
			continue
		}
		// An attempt whose execution already returned keeps its result
		// and its accounting: the reason is evidence of intent only
		// (DL-19), and its cleanup is bounded by the root. So does one
		// that returned before the runtime's reason and that the loop
		// has yet to observe.
		if a.phase == phaseRunning && !a.att.returnedBefore(at) && a.att.sig.record(rr, at) {
			if r.runtime.defaultedReason() {
				r.noteReasonless(a)
			}
			r.setCooperative(a)
			r.supervise(a, now)
		}
	}
}

// CodeReasonlessCancellation is the code of the debug record appended when
// an attempt's source is cancelled by a path that recorded no reason: the
// attempt gets ReasonRuntimeCancellation, the defensive default (DL-15).
const CodeReasonlessCancellation = "DELIVERY_REASONLESS_CANCELLATION"

// noteReasonless appends the debug record of DL-15 for a, whose reason was
// recorded as ReasonRuntimeCancellation because the path that cancelled it
// named none. Its subject is the job; replay ignores it.
func (r *Runner) noteReasonless(a *attempt) {
	reason, at, _ := a.att.sig.Reason()
	r.enqueue(r.m.Note(&record.Debug{
		Subject: a.att.Job.ID,
		Code:    CodeReasonlessCancellation,
		Message: fmt.Sprintf("attempt %d (token %d) was cancelled by a path that recorded no reason: recorded %s at %s",
			a.att.Job.Attempts, a.att.Token, reason, at.UTC().Format(time.RFC3339Nano)),
	}), nil)
}

// tokens returns the running attempts' tokens in order, so that what the
// loop does to several attempts at one instant is reproducible.
func (r *Runner) tokens() []uint64 { return sortedKeys(r.attempts) }

// sortedKeys returns m's keys in increasing order.
func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// launch starts an acknowledged attempt, whose attempt_started was in the
// append that returned at acked: its owner, and its execution goroutine
// unless its cooperative deadline has already passed (DL-24). It reports
// whether an execution goroutine started.
func (r *Runner) launch(st *Start, acked time.Time) bool {
	now := r.cfg.Clock.Now()
	b := deadlines.Budget{S: st.S, H: st.H, P: st.P}.CapRoot(r.root)
	att := new(Attempt)
	att.init(st, r.cfg.Clock, b.HandlerDeadline(r.root))
	// The gate knows from the start the latest C can be: the C of a
	// delivery timeout at P. Any reason comes at or before P with an owner
	// cutoff at or before H, so its C is no later (DL-21, DL-22); the loop
	// lowers it when it records one. Without it, a stage could start past
	// C whenever the loop was late to act on P (DL-20, DL-24).
	att.setC(deadlines.CooperativeDeadline(b.P, b.OwnerCutoff(deadlines.ReasonDeliveryTimeout, b.P, r.root), r.root))
	a := r.newOwner()
	a.att, a.budget, a.phase = att, b, phaseRunning
	r.attempts[st.Token] = a
	if reason, at, ok := r.runtime.Reason(); ok {
		att.sig.record(reason, at) // DL-17: inherited from the runtime
		if r.runtime.defaultedReason() {
			r.noteReasonless(a)
		}
		r.setCooperative(a)
	}
	if _, _, ok := att.sig.Reason(); !ok {
		if n, why := b.Notification(r.root); !now.Before(n) {
			r.notify(a, why, n)
		}
	}
	if !a.c.IsZero() && !now.Before(a.c) {
		// DL-24: first observed after C. Nothing runs; execution is
		// confirmed, since no goroutine was started.
		att.freeze()
		att.returned.Store(true)
		a.returned = true
		a.execution = executionNotStarted
		a.result = interrupted(&att.sig)
		r.startCleanup(a, now, CauseExecutionCancelled)
		return false
	}
	a.launched, a.ackGen = now, r.ackGen
	att.acked = acked
	r.execWG.Add(1)
	r.execs.run(att)
	r.schedule(a)
	return true
}

// newOwner returns a zero owner, a reused one if there is one.
func (r *Runner) newOwner() *attempt {
	if n := len(r.owners); n > 0 {
		a := r.owners[n-1]
		r.owners[n-1] = nil
		r.owners = r.owners[:n-1]
		return a
	}
	return new(attempt)
}

// retire takes back the owner of a settled attempt. It is cleared now, so
// that its Attempt goes with the execution that held it and any use of it
// from here on fails at once, and reused from the loop's next pass
// (reuseOwners), when no call that had it is still running. At 576 bytes
// an owner is the largest allocation a started attempt would make.
func (r *Runner) retire(a *attempt) {
	*a = attempt{}
	r.retired = append(r.retired, a)
}

// reuseOwners makes the owners retired during the loop's last pass
// available to newOwner, as many as there are worker slots: no more
// attempts than that run at once.
func (r *Runner) reuseOwners() {
	for i, a := range r.retired {
		if len(r.owners) < r.m.cfg.Workers {
			r.owners = append(r.owners, a)
		}
		r.retired[i] = nil
	}
	r.retired = r.retired[:0]
}

// execute runs att's pipeline on an execution goroutine and hands its
// result to the loop.
func (r *Runner) execute(att *Attempt) {
	r.startDelays.add(r.cfg.Clock.Now().Sub(att.acked))
	var res Result
	ended := false
	defer func() {
		if p := recover(); p != nil {
			res = Result{Failure: &Failure{Code: CodeHandlerPanicked, Message: fmt.Sprint(p), Stack: string(debug.Stack())}}
		} else if !ended {
			res = Result{Failure: &Failure{Code: CodeHandlerExited, Message: "the execution goroutine exited without returning"}}
		}
		att.retAt = r.cfg.Clock.Now()
		att.returned.Store(true)
		if att.orphaned.Load() {
			r.unquarantineOrphan(att)
		}
		res.Token = att.Token
		r.execWG.Done()
		r.results.put(res) // never waits, even once the loop has ended
	}()
	res = r.cfg.Execute(&att.ctx, att)
	ended = true
}

// interrupted is the outcome of an attempt abandoned at C (DL-23): a
// retryable DELIVERY_TIMEOUT for a timeout, DELIVERY_INTERRUPTED (released
// at settlement) for any other reason.
func interrupted(sig *Signal) Result {
	reason, _, _ := sig.Reason()
	if reason == deadlines.ReasonDeliveryTimeout {
		return Result{Failure: &Failure{Code: CodeDeliveryTimeout, Message: "attempt did not return by its cooperative deadline"}}
	}
	return Result{Failure: &Failure{Code: CodeDeliveryInterrupted, Message: "attempt interrupted: " + reason.String()}}
}

// supervise acts on whatever is due for a at now, then schedules its next
// instant.
func (r *Runner) supervise(a *attempt, now time.Time) {
	switch a.phase {
	case phaseRunning:
		// An execution that returned before N, or before C, and that the
		// loop observes only now, gets no reason after its return (DL-19)
		// and keeps its result (DL-23): the result is queued (put never
		// waits), and the owner takes it next.
		if _, _, ok := a.att.sig.Reason(); !ok {
			if n, why := a.budget.Notification(r.root); !now.Before(n) {
				if a.att.returnedBefore(n) {
					return
				}
				r.notify(a, why, n)
			}
		}
		if !a.c.IsZero() && !now.Before(a.c) {
			if a.att.returnedBefore(a.c) {
				return
			}
			r.abandon(a, now, CauseExecutionCancelled)
			return
		}
	case phaseHooks:
		// A hook or a scope close that returned before its deadline, and
		// that the loop observes only now, is not timed out: its report
		// is waiting for the loop, which takes it next (DL-33, DL-36).
		if a.hook != nil && !now.Before(a.hook.deadline) {
			if a.hook.returnedBefore(a.hook.deadline) {
				return
			}
			r.hookTimedOut(a, now)
			return
		}
	case phaseScope:
		if a.scopeRunning && !now.Before(a.scopeAt) {
			if a.att.scopeClosedBefore(a.scopeAt) {
				return
			}
			r.scopeTimedOut(a, now)
			return
		}
	}
	r.schedule(a)
}

// schedule pushes an event for the next instant a's owner must act at.
func (r *Runner) schedule(a *attempt) {
	var next time.Time
	switch a.phase {
	case phaseRunning:
		if a.c.IsZero() {
			next, _ = a.budget.Notification(r.root)
		} else {
			next = a.c
		}
	case phaseHooks:
		if a.hook != nil {
			next = a.hook.deadline
		}
	case phaseScope:
		if a.scopeRunning {
			next = a.scopeAt
		}
	}
	if next.IsZero() || next.Equal(a.armed) {
		return
	}
	a.armed = next
	heapPush(&r.events, event{at: next.UnixNano(), token: a.att.Token, kind: evAttempt})
}

// notify records the first reason at at, the deadline instant for
// deadline-driven reasons (DL-16, DL-18), and fixes C.
func (r *Runner) notify(a *attempt, reason deadlines.Reason, at time.Time) {
	if a.att.sig.record(reason, at) {
		r.setCooperative(a)
	}
}

// setCooperative lowers C to the cooperative deadline of the recorded
// reason under the current root (DL-21, DL-22, DL-25).
func (r *Runner) setCooperative(a *attempt) {
	reason, at, ok := a.att.sig.Reason()
	if !ok {
		return
	}
	o := a.budget.OwnerCutoff(reason, at, r.root)
	c := deadlines.CooperativeDeadline(at, o, r.root)
	if a.c.IsZero() || c.Before(a.c) {
		a.c = c
		a.att.setC(c)
	}
}

// recompute applies the current root and reason to a (DL-10, DL-12,
// DL-25, DL-30): every cutoff is lowered, never raised, and whatever is
// then due happens at once.
func (r *Runner) recompute(a *attempt, now time.Time) {
	a.budget = a.budget.CapRoot(r.root)
	a.att.ctx.lower(a.budget.HandlerDeadline(r.root))
	if a.phase == phaseRunning {
		r.setCooperative(a)
	} else {
		reason, at, _ := a.att.sig.Reason()
		a.e = deadlines.Earliest(a.e, a.budget.CleanupCutoff(reason, at, r.root))
		if a.torn {
			a.e = deadlines.Earliest(a.e, a.final)
		}
		hk, scope := deadlines.HookChain(a.e, r.root, a.cleanupAt)
		a.hk = deadlines.Earliest(a.hk, hk)
		a.scopeAt = deadlines.Earliest(a.scopeAt, scope)
		if h := a.hook; h != nil {
			h.deadline = deadlines.Earliest(h.deadline, a.hk)
			h.ctx.lower(h.deadline)
		}
	}
	r.supervise(a, now)
}

// abandon stops waiting for the execution (DL-26), at C or when the owner
// is torn down: the ledger is fixed, the execution's result will be
// fenced out, and the attempt is Interrupted with its first reason. cause
// is what its termination hooks see (DL-35).
func (r *Runner) abandon(a *attempt, now time.Time, cause Cause) {
	a.att.freeze()
	a.abandoned = true
	a.execution = executionAbandoned
	r.lost[a.att.Token] = &lostExecution{att: a.att}
	r.q.execs.Add(1)
	a.result = interrupted(&a.att.sig)
	r.startCleanup(a, now, cause)
}

// onResult takes an execution's return.
func (r *Runner) onResult(res Result) {
	now := r.cfg.Clock.Now()
	a, ok := r.attempts[res.Token]
	if !ok || a.abandoned {
		// DL-26: a late return. Its result is discarded: only the owner
		// settles this token. If the owner still runs cleanup, the
		// execution counts as joined before the scope closes (DL-37).
		r.q.fenced.Add(1)
		if l, ok := r.lost[res.Token]; ok {
			delete(r.lost, res.Token)
			r.q.execs.Add(-1)
			if a != nil {
				a.returned = true
			}
			if l.scopeLost {
				r.closeLostScope(res.Token, l.att)
			}
		}
		return
	}
	if a.phase != phaseRunning {
		return
	}
	a.returned = true
	a.result = res
	a.execution = executionReturned
	// The ledger is final: an After whose goroutine exited without
	// returning (runtime.Goexit) never finished, and is Interrupted, not
	// left Running, so that it gets its termination hook (DL-28, DL-32).
	a.att.freeze()
	r.noteExecution(a, now)
	var cause Cause
	if a.att.afterPanicked() {
		cause = CausePanicked
	}
	r.startCleanup(a, now, cause)
}

// startCleanup begins DL-36 once the execution returned or was abandoned:
// the cleanup cutoff E and hook chain deadline Hk are fixed at now (DL-30,
// DL-31), then the eligible hooks run, inner first.
func (r *Runner) startCleanup(a *attempt, now time.Time, cause Cause) {
	a.cause = cause
	if a.returned {
		// The pipeline is over: release what user code derived from its
		// context, without recording a reason.
		a.att.sig.cancelContext()
	}
	reason, at, _ := a.att.sig.Reason()
	a.cleanupAt = now
	a.e = a.budget.CleanupCutoff(reason, at, r.root)
	if a.torn {
		a.e = deadlines.Earliest(a.e, a.final) // DL-30: only ever shrinks
	}
	a.hk, a.scopeAt = deadlines.HookChain(a.e, r.root, now)
	a.hooks = a.att.eligible()
	a.phase = phaseHooks
	r.nextHook(a, now)
}

// nextHook starts the next eligible hook with its fair share of the time
// left before Hk, or marks it BudgetExhausted (DL-33); after the last one
// the scope closes.
func (r *Runner) nextHook(a *attempt, now time.Time) {
	for a.pos < len(a.hooks) {
		i := a.hooks[a.pos]
		k := len(a.hooks) - a.pos
		a.pos++
		deadline, ok := deadlines.HookDeadline(a.hk, k, now)
		if !ok {
			a.att.setTerm(i, HookBudgetExhausted)
			a.hookFailed(i, "was not started: the hook chain's deadline "+stamp(a.hk)+" had passed")
			continue
		}
		r.startHook(a, i, deadline)
		r.schedule(a)
		return
	}
	a.hook = nil
	r.startScope(a, now)
}

// startHook runs hook i on an engine-tracked goroutine with a fresh
// cleanup context: independent of the execution's cancellation and of
// other hooks', cancelled at its deadline (DL-33, DL-35).
func (r *Runner) startHook(a *attempt, i int, deadline time.Time) {
	ctx, cancel := newAttemptContext(context.Background(), deadline)
	sig := newSignal(cancel)
	sig.hook = true // its cause names the hook's own deadline, not the attempt's
	r.hookGen++
	h := &hookRun{idx: i, gen: r.hookGen, deadline: deadline, ctx: ctx, sig: sig}
	a.hook = h
	a.att.setTerm(i, HookRunning)
	fn, exit := a.att.entry(i)
	reason, at, _ := a.att.sig.Reason()
	run := &HookRun{Cause: a.cause, Reason: reason, ReasonAt: at, Exit: exit, sig: sig, ctx: ctx}
	tok, gen := a.att.Token, h.gen
	r.execWG.Add(1)
	go func() {
		st := HookFailed // runtime.Goexit in a hook leaves it Failed
		text := "exited without returning (runtime.Goexit)"
		defer func() {
			if p := recover(); p != nil {
				st, text = HookPanicked, "panicked: "+clip(fmt.Sprint(p), FailureMessageBytesMax)
			}
			done := r.cfg.Clock.Now()
			h.done.Store(&done)
			cancel(errCleanupEnded)
			r.execWG.Done()
			select {
			case r.owner <- ownerEvent{kind: ownerHookDone, token: tok, gen: gen, state: st, text: text}:
			case <-r.loopDone:
			}
		}()
		if err := fn(ctx, run); err != nil {
			// fmt recovers a panicking Error method.
			st, text = HookFailed, "failed: "+clip(fmt.Sprint(err), FailureMessageBytesMax)
		} else {
			st, text = HookCompleted, ""
		}
	}()
}

// errCleanupEnded cancels a context whose work has ended; it records no
// reason.
var errCleanupEnded = errors.New("scheduler: attempt work ended")

// hookTimedOut abandons the running hook at its deadline (DL-33): it is
// quarantined and the chain continues outward. A hook still running when
// the final window of a torn-down owner ends is Interrupted.
func (r *Runner) hookTimedOut(a *attempt, now time.Time) {
	h := a.hook
	st, text := HookTimedOut, "did not return by its deadline "+stamp(h.deadline)
	if a.torn {
		st, text = HookInterrupted, "was still running at "+stamp(h.deadline)+", the end of its share of the owner's final window"
	}
	a.att.setTerm(h.idx, st)
	a.hookFailed(h.idx, text)
	h.sig.record(deadlines.ReasonDeliveryTimeout, h.deadline)
	r.q.hooks.Add(1)
	a.hook = nil
	r.nextHook(a, now)
}

// startScope is DL-36 steps 3 and 4: attempt-local values released, then
// the scope closed once, by E'. A scope whose execution has not returned
// is withheld instead (DL-37).
func (r *Runner) startScope(a *attempt, now time.Time) {
	a.phase = phaseScope
	if !a.returned {
		a.scope = scopeQuarantined
		if l, ok := r.lost[a.att.Token]; ok {
			l.scopeLost = true
		}
		r.q.scopes.Add(1)
		r.settleAttempt(a, now)
		return
	}
	if a.att.scope.empty() && !a.att.hasValues() {
		a.scope = scopeClosed
		r.settleAttempt(a, now)
		return
	}
	a.scopeRunning = true
	r.closeScope(a.att, a.att.Token, ownerScopeDone)
	if !now.Before(a.scopeAt) {
		r.scopeTimedOut(a, now) // no time left: the close runs on, unobserved
		return
	}
	r.schedule(a)
}

// closeScope releases att's values and closes its scope on an
// engine-tracked goroutine, and reports on the owner channel.
func (r *Runner) closeScope(att *Attempt, tok uint64, kind uint8) {
	r.execWG.Add(1)
	go func() {
		ev := ownerEvent{kind: kind, token: tok, unobserved: true}
		defer func() {
			if p := recover(); p != nil {
				ev.unobserved, ev.panicked = false, true
				ev.panicText = "the attempt scope's close panicked: " + clip(fmt.Sprint(p), FailureMessageBytesMax)
			}
			done := r.cfg.Clock.Now()
			att.scopeDone.Store(&done)
			r.execWG.Done()
			select {
			case r.owner <- ev:
			case <-r.loopDone:
			}
		}()
		ev.releaseText = releaseValues(att.takeValues())
		ev.releasePanicked = ev.releaseText != ""
		ev.err, ev.panicked = att.scope.close()
		ev.unobserved = false
	}()
}

// releaseValues releases attempt-local values that hold something and
// returns the text of the first Release that panicked, or "".
func releaseValues(keys []string, vs []any) (panicked string) {
	for i, v := range vs {
		if rl, ok := v.(Releaser); ok {
			func() {
				defer func() {
					if p := recover(); p != nil && panicked == "" {
						panicked = fmt.Sprintf("Release of attempt-local value %q panicked: %s",
							keys[i], clip(fmt.Sprint(p), FailureMessageBytesMax))
					}
				}()
				rl.Release()
			}()
		}
	}
	return panicked
}

// closeLostScope closes a withheld scope once its execution returned while
// the engine still runs (DL-37).
func (r *Runner) closeLostScope(tok uint64, att *Attempt) {
	r.closeScope(att, tok, ownerLostScopeDone)
}

func (r *Runner) scopeTimedOut(a *attempt, now time.Time) {
	a.scopeRunning = false
	a.scope = scopeTimedOut
	a.cleanupFailed(CodeScopeCleanupTimedOut, "the attempt scope's close did not return by its deadline "+stamp(a.scopeAt))
	r.q.scopes.Add(1)
	r.settleAttempt(a, now)
}

// onOwner takes a hook's or a scope close's return.
func (r *Runner) onOwner(ev ownerEvent) {
	now := r.cfg.Clock.Now()
	a, ok := r.attempts[ev.token]
	switch ev.kind {
	case ownerHookDone:
		if !ok || a.hook == nil || a.hook.gen != ev.gen {
			r.q.hooks.Add(-1) // a timed-out hook returned
			return
		}
		a.att.setTerm(a.hook.idx, ev.state)
		if ev.state.failed() {
			a.hookFailed(a.hook.idx, ev.text)
		}
		a.hook = nil
		r.nextHook(a, now)
	case ownerScopeDone:
		if !ok || !a.scopeRunning {
			r.q.scopes.Add(-1) // a timed-out close returned
			return
		}
		a.scopeRunning = false
		if ev.releasePanicked {
			a.cleanupFailed(CodeResourceReleasePanicked, ev.releaseText)
		}
		// The close's joined errors name each resource that failed or
		// panicked: close "db": <its error>.
		text := ev.panicText
		if ev.err != nil {
			text = clip(ev.err.Error(), FailureMessageBytesMax)
		}
		switch {
		case ev.unobserved:
			a.scope = scopeUnobserved
			a.cleanupFailed(CodeScopeResultUnobserved, "the attempt scope's close exited without returning (runtime.Goexit)")
		case ev.panicked:
			a.scope = scopePanicked
			a.cleanupFailed(CodeScopeCleanupPanicked, text)
		case ev.err != nil:
			a.scope = scopeFailed
			a.cleanupFailed(CodeScopeCleanupFailed, text)
		default:
			a.scope = scopeClosed
		}
		r.settleAttempt(a, now)
	case ownerLostScopeDone:
		r.q.scopes.Add(-1)
	}
}

// settleAttempt is DL-36 steps 5 and 6: the primary result is fixed under
// the precedence of cleanup failures and the reason's accounting, and the
// one settlement of the token is decided (DL-38, DL-40).
func (r *Runner) settleAttempt(a *attempt, now time.Time) {
	if a.revoked {
		delete(r.attempts, a.att.Token)
		r.releaseRevoked(a, now) // DL-41: the final abort settles it
		return
	}
	if r.holdForAbort(a, now) {
		return // DL-41: past its forced owner cutoff; Revoke settles it
	}
	tok := a.att.Token
	delete(r.attempts, tok)
	defer r.retire(a)
	if a.torn {
		// SD-14: a torn-down owner has lost its settlement authority. Its
		// token stays open unless the shutdown settles it (DL-41), and
		// recovery decides otherwise (DL-44).
		return
	}
	res := a.result
	res.Token = tok
	res.Joined = a.returned
	reason, at, hasReason := a.att.sig.Reason()
	if hasReason {
		res.Reason, res.ReasonAt = reason.String(), at
	}
	// DL-6, DL-23: accounting follows the first reason, not the error,
	// and only for an attempt that did not succeed: a success consumed
	// its attempt, and a cleanup failure that replaces it (DL-36) never
	// changes that.
	release := res.Failure != nil &&
		(res.Failure.Release || hasReason && reason != deadlines.ReasonDeliveryTimeout)
	codes, text := cleanupCodes(a)
	switch {
	case len(codes) == 0:
	case res.Failure == nil || a.abandoned || a.execution == executionNotStarted:
		// DL-36: a success or an interruption with a cleanup failure
		// settles as a retryable failure with the cleanup code.
		res.Failure = &Failure{Code: codes[0], Message: cleanupMessage(codes, text, FailureMessageBytesMax)}
		res.Output, res.FollowUps = nil, nil
	default:
		// A handler's own error keeps its code and comes first; the
		// cleanup failure is recorded beside it.
		f := *res.Failure
		f.Message = withCleanup(f.Message, codes, text)
		res.Failure = &f
	}
	if res.Failure != nil {
		f := *res.Failure
		f.Release = release
		// User text is bounded so that a settlement always fits a record.
		f.Code = clip(f.Code, FailureCodeBytesMax)
		f.Message, f.Stack = clip(f.Message, FailureMessageBytesMax), clip(f.Stack, FailureStackBytesMax)
		res.Failure = &f
	}
	if r.root.Expired(now) {
		r.q.unresolved.Add(1) // DL-39: an expired root starts no settlement
		return
	}
	r.decideSettlement(now, res, a, codes)
}

// cleanupCodes returns a's cleanup failure codes (DL-36), led by
// CodeTerminationCleanupFailed when a termination hook failed, and the
// first one's own text.
func cleanupCodes(a *attempt) (codes []string, first string) {
	for _, i := range a.hooks {
		if a.att.term(i).failed() {
			return append([]string{CodeTerminationCleanupFailed}, a.codes...), a.hookText
		}
	}
	if len(a.codes) == 0 {
		return nil, ""
	}
	return a.codes, a.texts[0]
}

// cleanupFailed records a cleanup failure with its own text.
func (a *attempt) cleanupFailed(code, text string) {
	a.codes = append(a.codes, code)
	a.texts = append(a.texts, text)
}

// hookFailed keeps the text of the first termination hook that failed,
// in run order, naming its middleware.
func (a *attempt) hookFailed(i int, text string) {
	if a.hookText == "" {
		a.hookText = fmt.Sprintf("termination hook of middleware %q %s", a.att.entryName(i), text)
	}
}

// cleanupMessage is the settlement text of cleanup failures (DL-36), at
// most n bytes: "attempt cleanup failed: CODE: its text", then "(also
// CODE2, ...)" for the others. The first failure's text is what gets cut,
// so that every code stays.
func cleanupMessage(codes []string, text string, n int) string {
	head := "attempt cleanup failed: " + codes[0]
	var tail string
	if len(codes) > 1 {
		tail = " (also " + strings.Join(codes[1:], ", ") + ")"
	}
	if room := n - len(head) - len(": ") - len(tail); text != "" && room > 0 {
		head += ": " + clip(text, room)
	}
	return clip(head+tail, n)
}

// withCleanup appends the cleanup failures to msg, a failure's own text,
// within [FailureMessageBytesMax]: msg comes first and is never cut for
// them, and the codes stay in the record's cleanup field anyway.
func withCleanup(msg string, codes []string, text string) string {
	msg = clip(msg, FailureMessageBytesMax)
	const sep = "; "
	if room := FailureMessageBytesMax - len(msg) - len(sep); room > 0 {
		msg += sep + cleanupMessage(codes, text, room)
	}
	return msg
}

// stamp formats an instant for a failure's text.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// decideSettlement decides the settlement of a's token with result res
// (res.Token is a's token), annotated with a's audit and cleanup codes,
// and arms its settlement cap (DL-39). A token the machine refuses (not
// the job's open attempt, RL-10) decides nothing.
func (r *Runner) decideSettlement(now time.Time, res Result, a *attempt, codes []string) {
	d, err := r.m.Settle(now, res)
	if err != nil {
		return
	}
	seq := annotate(&d, res.Token, a, codes)
	r.enqueue(d, nil)
	if seq != 0 {
		deadline := now.Add(r.root.SettlementWait(r.cfg.SettlementTimeout, now))
		r.settling[seq] = settleWait{token: res.Token, deadline: deadline}
		heapPush(&r.events, event{at: deadline.UnixNano(), token: seq, kind: evSettle})
	}
}

// Bounds of the user-provided text a settlement records.
const (
	// FailureCodeBytesMax bounds a failure's code.
	FailureCodeBytesMax = 128
	// FailureMessageBytesMax bounds a failure's message, and the error a
	// workflow fails with or an on-deadline handler's failure is recorded
	// with.
	FailureMessageBytesMax = 1 << 10
	// FailureStackBytesMax bounds a recovered panic's stack.
	FailureStackBytesMax = 2 << 10
	// MiddlewareNameBytesMax bounds one middleware name in the audit.
	MiddlewareNameBytesMax = 32
)

// clip returns s cut to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// settleExpired marks a settlement Unresolved when its cap passed without
// a commit (DL-39). No second settlement is ever decided for its token.
func (r *Runner) settleExpired(seq uint64, now time.Time) {
	w, ok := r.settling[seq]
	if !ok || now.Before(w.deadline) {
		return
	}
	delete(r.settling, seq)
	r.q.unresolved.Add(1)
}

// annotate adds the audit of the attempt to its settlement record (DL-38):
// how the execution ended, the ledger's normal and termination exits, the
// scope's close and the cleanup codes. Replay reads none of these fields,
// so the machine's state is unchanged. It returns the record's seq.
func annotate(d *Decision, tok uint64, a *attempt, codes []string) uint64 {
	for _, rec := range d.Records {
		out := record.OutcomeOf(rec.Body)
		if out == nil || out.Token != tok {
			continue
		}
		out.Execution = a.execution
		out.Middleware, out.NormalExits, out.TerminationExits = a.att.audit()
		out.Scope = a.scope
		out.Cleanup = strings.Join(codes, ",")
		return rec.Seq
	}
	return 0
}

// unquarantineOrphan takes an execution abandoned by a fail-stop out of
// the quarantine count once it has returned, whichever of its goroutine
// and abandonAll sees both flags first.
func (r *Runner) unquarantineOrphan(att *Attempt) {
	if att.uncounted.CompareAndSwap(false, true) {
		r.q.execs.Add(-1)
	}
}

// tearDown is the final abort of every owner when the loop stops (SD-14):
// it runs once the appends in flight are acknowledged, and again on every
// pass of the loop until it reports that the loop may end. Each owner is
// torn down once ([Runner.tear]): it loses its settlement authority and
// its cleanup gets the final bounded window of DL-30 instead of being cut
// at once. The loop ends when no owner has cleanup left and every record
// decided meanwhile (the debug records of DL-15, the releases of revoked
// attempts) is acknowledged. An owner torn down already, by the final
// abort of a shutdown, keeps its window: nothing is restarted. Other
// tokens stay open in the journal and recovery redelivers them (DL-44);
// what has not returned stays quarantined.
func (r *Runner) tearDown() bool {
	now := r.cfg.Clock.Now()
	torn := false
	for _, tok := range r.tokens() {
		if a, ok := r.attempts[tok]; ok && !a.torn {
			r.tear(a, deadlines.ReasonNone, now)
			torn = true
		}
	}
	if torn {
		r.step() // flush the debug records; arm the timer for the window
	}
	if len(r.attempts) > 0 || r.committing != nil || len(r.pending) > 0 {
		return false
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	return true
}

// tear tears down a's owner at now (SD-14, DL-30): its settlement
// authority is revoked, an attempt without a reason gets reason stamped
// at now (ReasonNone records ReasonRuntimeCancellation with its debug
// record, DL-15), and its cleanup cutoff is lowered to the final
// reconciliation window E = cap_root(min(H, now + 100 ms)), never raised
// and never restarted. An execution still running is abandoned now and
// its termination hooks run with cause OwnerAbandoned inside that window;
// hooks and a scope close already running keep running inside it, hooks
// until the hook chain deadline of the lowered cutoff (DL-31), the scope
// close until the window ends. [Runner.Stop] and the final abort of a
// shutdown ([Runner.Revoke]) both tear owners down through it; only the
// latter settles the token, once that cleanup ends.
func (r *Runner) tear(a *attempt, reason deadlines.Reason, now time.Time) {
	if a.att.sig.record(reason, now) && a.att.sig.defaultedReason() {
		r.noteReasonless(a)
	}
	if f := a.budget.FinalCleanupCutoff(r.root, now); !a.torn || f.Before(a.final) {
		a.final = f // never restarted by a later teardown
	}
	a.torn = true
	if a.phase == phaseRunning {
		r.abandon(a, now, CauseOwnerAbandoned)
		return
	}
	r.recompute(a, now)
}

// Observe returns once the loop has acted on every deadline due at the
// clock's current instant. Unlike [Runner.Sync] it does not wait for the
// appends in flight: a test that holds a settlement's commit observes the
// settlement cap with it (DL-39).
func (r *Runner) Observe(ctx context.Context) error {
	return r.call(ctx, func(time.Time) { r.fire() })
}

// abandonAll tears down every attempt's owner at once when the loop ends
// on a failed append: nothing can be appended any more, so there is no
// final window; tokens stay open in the journal and recovery redelivers
// them (DL-44). What has not returned stays quarantined.
func (r *Runner) abandonAll() {
	now := r.cfg.Clock.Now()
	for _, tok := range r.tokens() {
		a := r.attempts[tok]
		// SD-23: a failed commit forces running attempts with
		// ReasonRuntimeFailure (DL-18).
		a.att.sig.record(deadlines.ReasonRuntimeFailure, now)
		a.att.freeze()
		switch {
		case a.phase == phaseRunning:
			// Counted until its goroutine returns, which it reports
			// itself: the loop that would observe it ends here.
			r.q.execs.Add(1)
			a.att.orphaned.Store(true)
			if a.att.returned.Load() {
				r.unquarantineOrphan(a.att)
			}
		case a.hook != nil:
			a.att.setTerm(a.hook.idx, HookInterrupted)
			a.hook.sig.record(deadlines.ReasonRuntimeFailure, now)
			r.q.hooks.Add(1)
		}
		if a.scopeRunning || !a.att.scope.empty() {
			r.q.scopes.Add(1) // not closed: its resources stay undisposed
		}
		delete(r.attempts, tok)
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// Straggler is an attempt whose handler had not returned when
// [Runner.Stragglers] looked: still awaited by its owner, or abandoned
// (DL-26) and quarantined.
type Straggler struct {
	Token     uint64
	JobID     string
	Handler   string
	Attempt   int32
	Start     time.Time // S (DL-7)
	Abandoned bool
}

// Stragglers lists, in token order, the attempts whose execution
// goroutine the loop has not seen return: the running ones and the
// abandoned ones it still counts as quarantined. A shutdown names them
// in debug records, since its report only counts them (SD-25, SD-37).
func (r *Runner) Stragglers(ctx context.Context) ([]Straggler, error) {
	var out []Straggler
	err := r.call(ctx, func(time.Time) {
		for _, tok := range r.tokens() {
			if a := r.attempts[tok]; !a.returned && !a.abandoned {
				out = append(out, straggler(a.att, false))
			}
		}
		for _, tok := range sortedKeys(r.lost) {
			out = append(out, straggler(r.lost[tok].att, true))
		}
	})
	slices.SortFunc(out, func(a, b Straggler) int { return cmp.Compare(a.Token, b.Token) })
	return out, err
}

func straggler(att *Attempt, abandoned bool) Straggler {
	return Straggler{Token: att.Token, JobID: att.Job.ID, Handler: att.Job.Handler, Attempt: att.Job.Attempts,
		Start: att.S, Abandoned: abandoned}
}
