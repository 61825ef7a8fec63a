package scheduler

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
)

// CancelReason is the cause an attempt's context (or a hook's cleanup
// context) is cancelled with: the first reason and the instant it was
// recorded (DL-16). Deadline-driven reasons carry the deadline instant.
type CancelReason struct {
	Reason deadlines.Reason
	At     time.Time
	// Hook is set on the cause of a termination hook's own cleanup
	// context (DL-33): Reason and At then describe that context, not the
	// attempt. ReasonDeliveryTimeout means the hook's own deadline (its
	// fair share of the hook chain) passed at At; the attempt's first
	// reason stays on the hook's [HookRun].
	Hook bool
}

func (c *CancelReason) Error() string {
	at := c.At.UTC().Format(time.RFC3339Nano)
	switch {
	case c.Hook && c.Reason == deadlines.ReasonDeliveryTimeout:
		return "quire: termination hook cancelled: its own deadline passed at " + at
	case c.Hook:
		return "quire: termination hook cancelled: " + c.Reason.String() + " at " + at
	}
	return "quire: attempt cancelled: " + c.Reason.String() + " at " + at
}

// Signal is the read-only view of one cancellation source (DL-14): a done
// channel, whether it fired, and its first reason with the instant it was
// recorded. Only the runner can record a reason; the view offers no way
// to cancel.
type Signal struct {
	mu     sync.Mutex
	reason deadlines.Reason
	at     time.Time
	// defaulted is set when the reason was recorded by a path that
	// recorded none (DL-15).
	defaulted bool
	// hook marks a termination hook's cleanup cancellation, whose cause
	// says so ([CancelReason.Hook]).
	hook bool
	// done is made by the first Done call, as a context's is: most
	// attempts end with nothing waiting on it.
	done   chan struct{}
	cancel context.CancelCauseFunc // the matching context, or nil
}

func newSignal(cancel context.CancelCauseFunc) *Signal {
	return &Signal{cancel: cancel}
}

// closedDone is the Done channel of a Signal first asked for it after a
// reason was recorded.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Done is closed once a reason is recorded.
func (s *Signal) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		if s.reason != deadlines.ReasonNone {
			return closedDone
		}
		s.done = make(chan struct{})
	}
	return s.done
}

// IsCancelled reports whether a reason is recorded. It says only what is
// true at the instant of the call (DL-13).
func (s *Signal) IsCancelled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason != deadlines.ReasonNone
}

// Reason returns the first reason and the instant it was recorded, or
// false if none is.
func (s *Signal) Reason() (deadlines.Reason, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == deadlines.ReasonNone {
		return deadlines.ReasonNone, time.Time{}, false
	}
	return s.reason, s.at, true
}

// record records r at at unless a reason is recorded already, and reports
// whether it did. The reason is stored before any waiter is woken: first
// the fields, then the done channel, then the context with the same cause
// (DL-16). A missing reason is recorded as ReasonRuntimeCancellation, the
// defensive default of DL-15, and remembered as defaulted.
func (s *Signal) record(r deadlines.Reason, at time.Time) bool {
	defaulted := r == deadlines.ReasonNone
	if defaulted {
		r = deadlines.ReasonRuntimeCancellation
	}
	s.mu.Lock()
	if s.reason != deadlines.ReasonNone {
		s.mu.Unlock()
		return false
	}
	s.reason, s.at, s.defaulted = r, at, defaulted
	done := s.done
	s.mu.Unlock()
	if done != nil {
		close(done)
	}
	if s.cancel != nil {
		s.cancel(&CancelReason{Reason: r, At: at, Hook: s.hook})
	}
	return true
}

// defaultedReason reports whether the first reason was recorded by a path
// that recorded none: ReasonRuntimeCancellation as the defensive default
// of DL-15, which the runner notes with a debug record.
func (s *Signal) defaultedReason() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.defaulted
}

// cancelContext cancels the matching context without recording a reason:
// its work has ended.
func (s *Signal) cancelContext() {
	if s.cancel != nil {
		s.cancel(errCleanupEnded)
	}
}

// Exit is the normal-exit state of one entered middleware (DL-29).
type Exit uint8

// Normal exits.
const (
	ExitNotStarted  Exit = 0
	ExitRunning     Exit = 1
	ExitCompleted   Exit = 2
	ExitFailed      Exit = 3
	ExitInterrupted Exit = 4
	ExitPanicked    Exit = 5
)

var exitNames = [...]string{"not_started", "running", "completed", "failed", "interrupted", "panicked"}

func (e Exit) String() string {
	if int(e) < len(exitNames) {
		return exitNames[e]
	}
	return "exit(?)"
}

// HookState is the termination state of one entered middleware (DL-32,
// DL-33). HookNone marks an entry that gets no hook: it has none, or its
// normal exit is terminal.
type HookState uint8

// Termination states.
const (
	HookNone            HookState = 0
	HookNotStarted      HookState = 1
	HookRunning         HookState = 2
	HookCompleted       HookState = 3
	HookFailed          HookState = 4
	HookPanicked        HookState = 5
	HookTimedOut        HookState = 6
	HookInterrupted     HookState = 7
	HookBudgetExhausted HookState = 8
)

var hookNames = [...]string{"none", "not_started", "running", "completed", "failed", "panicked", "timed_out", "interrupted", "budget_exhausted"}

func (h HookState) String() string {
	if int(h) < len(hookNames) {
		return hookNames[h]
	}
	return "hook(?)"
}

// failed reports whether h counts as a termination cleanup failure (DL-36).
func (h HookState) failed() bool {
	switch h {
	case HookFailed, HookPanicked, HookTimedOut, HookInterrupted, HookBudgetExhausted:
		return true
	}
	return false
}

// Cause is why termination hooks run (DL-35).
type Cause uint8

// Termination causes.
const (
	// CauseExecutionCancelled: the execution was abandoned at its
	// cooperative deadline after a reason was recorded.
	CauseExecutionCancelled Cause = 1
	// CausePanicked: a normal After panicked and stopped the unwind (DL-28).
	CausePanicked Cause = 2
	// CauseOwnerAbandoned: the attempt's owner was torn down.
	CauseOwnerAbandoned Cause = 3
)

func (c Cause) String() string {
	switch c {
	case CauseExecutionCancelled:
		return "execution_cancelled"
	case CausePanicked:
		return "panicked"
	case CauseOwnerAbandoned:
		return "owner_abandoned"
	}
	return "none"
}

// HookFunc is the termination hook of one entered middleware. The owner
// calls it at most once, never on the execution goroutine, with a fresh
// cleanup context whose deadline is the hook's fair share (DL-33). It
// cannot change the attempt's result (DL-35).
type HookFunc func(ctx context.Context, run *HookRun) error

// HookRun is what a termination hook may read (DL-35).
type HookRun struct {
	// Cause is why the hooks run; Reason and ReasonAt the attempt's first
	// reason (ReasonNone when a panic, not a cancellation, ended it).
	Cause    Cause
	Reason   deadlines.Reason
	ReasonAt time.Time
	// Exit is the hook's own middleware's normal exit.
	Exit Exit
	sig  *Signal
	ctx  *attemptContext
}

// Signal returns the hook's own cleanup cancellation: independent of the
// execution's and of other hooks', fired at the hook's deadline.
func (h *HookRun) Signal() *Signal { return h.sig }

// Deadline returns the hook's deadline.
func (h *HookRun) Deadline() time.Time { d, _ := h.ctx.Deadline(); return d }

// Releaser is implemented by attempt-local values that hold something to
// release: the owner calls Release once, after the termination hooks and
// before the attempt scope closes (DL-36 step 3).
type Releaser interface {
	Release()
}

type ledgerEntry struct {
	name string
	hook HookFunc
	exit Exit
	term HookState
}

// Attempt is one started attempt as its execution sees it: the start, the
// context and read-only cancellation handed to user code, the ledger of
// the entered middleware, the attempt scope and the attempt-local values.
// The runner's owner keeps the same Attempt after the execution goroutine
// returns or is abandoned, and runs cleanup from it (DL-29); everything
// here is safe for concurrent use.
type Attempt struct {
	*Start

	clk clock.Clock

	c        atomic.Pointer[time.Time] // cooperative deadline: that of a delivery timeout, lowered when a reason is recorded
	returned atomic.Bool
	// retAt is the clock's instant the execution goroutine returned at,
	// written before returned is set (Runner.execute).
	retAt time.Time
	// scopeDone is the clock's instant the scope's close returned at,
	// stored before the close reports it (Runner.closeScope).
	scopeDone atomic.Pointer[time.Time]
	// orphaned is set when a fail-stop abandons the attempt while its
	// execution runs: the loop is gone, so the goroutine itself takes its
	// count out of the quarantine when it returns; uncounted makes that
	// happen once (Runner.abandonAll).
	orphaned, uncounted atomic.Bool

	mu     sync.Mutex
	frozen bool
	ledger []ledgerEntry
	values map[string]any

	// acked is when the append that acknowledged its attempt_started
	// returned (Runner.StartDelays).
	acked time.Time

	// The context, signal and scope, allocated with the attempt.
	ctx   attemptContext
	sig   Signal
	scope Scope
}

// init sets up a zero Attempt in place; its owner holds it ([attempt]).
func (a *Attempt) init(st *Start, clk clock.Clock, deadline time.Time) {
	a.Start, a.clk = st, clk
	a.sig.cancel = a.ctx.init(context.Background(), deadline)
}

// Context returns the context handed to the pipeline: cancelled with a
// [*CancelReason] cause at notification (DL-16), with the deadline of
// [Attempt.Deadline].
func (a *Attempt) Context() context.Context { return &a.ctx }

// Signal returns the attempt's read-only cancellation (DL-14).
func (a *Attempt) Signal() *Signal { return &a.sig }

// Deadline returns the deadline user code sees: min(P, G) during a
// shutdown, P otherwise (DL-12). It never grows.
func (a *Attempt) Deadline() time.Time { d, _ := a.ctx.Deadline(); return d }

// Scope returns the attempt scope (DL-36).
func (a *Attempt) Scope() *Scope { return &a.scope }

// Proceed reports whether the next pipeline stage may start: false once
// the cooperative deadline C has passed or the owner abandoned the
// execution (DL-20, DL-24). It reads the clock itself: before any reason
// is recorded, C is the one a delivery timeout at P would give, so no
// stage starts past it even while the loop has not yet acted on P.
func (a *Attempt) Proceed() bool {
	a.mu.Lock()
	frozen := a.frozen
	a.mu.Unlock()
	if frozen {
		return false
	}
	if c := a.c.Load(); c != nil && !a.clk.Now().Before(*c) {
		return false
	}
	return true
}

// Enter records that the Before of middleware name returned nil, with its
// termination hook (nil if it has none), and returns its ledger index, or
// -1 once the execution is abandoned (DL-27, DL-29).
func (a *Attempt) Enter(name string, hook HookFunc) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.frozen {
		return -1
	}
	a.ledger = append(a.ledger, ledgerEntry{name: clip(name, MiddlewareNameBytesMax), hook: hook})
	return len(a.ledger) - 1
}

// SetExit records the normal exit of entry i. It is ignored once the
// execution is abandoned: the owner's view is then fixed.
func (a *Attempt) SetExit(i int, e Exit) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.frozen || i < 0 || i >= len(a.ledger) {
		return
	}
	a.ledger[i].exit = e
}

// SetValue stores an attempt-local value under key.
func (a *Attempt) SetValue(key string, v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.values == nil {
		a.values = make(map[string]any)
	}
	a.values[key] = v
}

// Value returns the attempt-local value under key.
func (a *Attempt) Value(key string) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.values[key]
	return v, ok
}

// TakeValue returns and removes the attempt-local value under key: the
// owner no longer releases it.
func (a *Attempt) TakeValue(key string) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.values[key]
	delete(a.values, key)
	return v, ok
}

// ExecutionReturned reports whether the execution goroutine has returned
// (DL-35).
func (a *Attempt) ExecutionReturned() bool { return a.returned.Load() }

// scopeClosedBefore reports whether the scope's close has returned, at an
// instant before t: its report is on its way to the loop (DL-36).
func (a *Attempt) scopeClosedBefore(t time.Time) bool {
	d := a.scopeDone.Load()
	return d != nil && d.Before(t)
}

// returnedBefore reports whether the execution goroutine has returned, at
// an instant before c: its result is on its way to the loop (DL-23).
func (a *Attempt) returnedBefore(c time.Time) bool {
	return a.returned.Load() && !a.retAt.IsZero() && a.retAt.Before(c)
}

func (a *Attempt) setC(c time.Time) {
	for {
		old := a.c.Load()
		if old != nil && !c.Before(*old) {
			return
		}
		if a.c.CompareAndSwap(old, &c) {
			return
		}
	}
}

// freeze fixes the ledger when the owner stops waiting for the execution
// (DL-26) or takes its return: an After still running, or whose goroutine
// exited without returning, is Interrupted (DL-28), and later writes of
// an abandoned goroutine are ignored.
func (a *Attempt) freeze() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frozen = true
	for i := range a.ledger {
		if a.ledger[i].exit == ExitRunning {
			a.ledger[i].exit = ExitInterrupted
		}
	}
}

// eligible marks the entries that get a termination hook (DL-32) and
// returns them in the order they run: reverse entry order, inner first.
func (a *Attempt) eligible() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []int
	for i := len(a.ledger) - 1; i >= 0; i-- {
		e := &a.ledger[i]
		switch e.exit {
		case ExitNotStarted, ExitInterrupted, ExitPanicked:
			if e.hook != nil && e.term == HookNone {
				e.term = HookNotStarted
				out = append(out, i)
			}
		}
	}
	return out
}

// afterPanicked reports whether a normal After panicked (DL-28).
func (a *Attempt) afterPanicked() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.ledger {
		if e.exit == ExitPanicked {
			return true
		}
	}
	return false
}

// entryName returns the name entry i was entered under.
func (a *Attempt) entryName(i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ledger[i].name
}

func (a *Attempt) entry(i int) (HookFunc, Exit) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ledger[i].hook, a.ledger[i].exit
}

func (a *Attempt) setTerm(i int, s HookState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ledger[i].term = s
}

func (a *Attempt) term(i int) HookState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ledger[i].term
}

// audit returns the ledger as the settlement records it: names, normal
// exits and termination exits, in entry order.
func (a *Attempt) audit() (names, exits, terms []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.ledger {
		names = append(names, e.name)
		exits = append(exits, e.exit.String())
		terms = append(terms, e.term.String())
	}
	return names, exits, terms
}

// takeValues removes every attempt-local value, returning the keys in
// order and their values.
func (a *Attempt) takeValues() (keys []string, vals []any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys = make([]string, 0, len(a.values))
	for k := range a.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals = make([]any, 0, len(keys))
	for _, k := range keys {
		vals = append(vals, a.values[k])
	}
	a.values = nil
	return keys, vals
}

// hasValues reports whether attempt-local values remain.
func (a *Attempt) hasValues() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.values) > 0
}
