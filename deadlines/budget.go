package deadlines

import "time"

// Budget is the budget of one delivery attempt (DL-7..DL-12): start S,
// hard cutoff H and normal-pipeline cutoff P = H − R. It is computed once,
// at S, and afterwards only lowered by [Budget.Cap]; it is never
// re-derived from a later now (DL-1). attempt_started records S, H and P,
// so replay rebuilds a Budget from them with a composite literal.
//
// Invariants of every Budget returned by this package: P <= H, H − P <= 1 s,
// and S <= P whenever S <= H. If H <= S the attempt is already expired and
// P == H.
type Budget struct {
	// S is the instant the attempt acquired its worker slot (DL-7).
	S time.Time
	// H is the hard cutoff: cap_root(S + T), lowered by later caps.
	H time.Time
	// P is the normal-pipeline cutoff shared by every stage (DL-8).
	P time.Time
}

// NewBudget returns the budget of an attempt that starts at s with
// DeliveryTimeout t under root (DL-7, DL-9): H = cap_root(s + t),
// R = min((H − s)/4, 1 s), P = H − R; if H <= s, P = H.
func NewBudget(s time.Time, t time.Duration, root Root) Budget {
	h := root.Cap(s.Add(t))
	return Budget{S: s, H: h, P: h.Add(-reserve(s, h))}
}

// reserve returns R = min((h − s)/4, 1 s), which is zero when h <= s.
func reserve(s, h time.Time) time.Duration {
	return minDuration(quarter(since(h, s)), AttemptReserveMax)
}

// Reserve returns R = H − P, the stretch shared by the cooperative window,
// the termination hooks and the attempt-scope disposal (DL-11).
func (b Budget) Reserve() time.Duration { return since(b.H, b.P) }

// Cap returns b under a later hard instant h (DL-10), recomputed from the
// same S: H2 = min(H, h), R2 = min((H2 − S)/4, 1 s), P2 = min(P, H2 − R2).
// A cap by an instant later than H changes nothing; no cutoff ever grows.
func (b Budget) Cap(h time.Time) Budget {
	h2 := Earliest(b.H, h)
	return Budget{S: b.S, H: h2, P: Earliest(b.P, h2.Add(-reserve(b.S, h2)))}
}

// CapRoot returns b capped by root's hard cutoff Hr if root is installed
// (SD-8), and b otherwise. It is idempotent, so the methods that take a
// root apply it themselves.
func (b Budget) CapRoot(root Root) Budget {
	if !root.Installed() {
		return b
	}
	return b.Cap(root.Hr())
}

// HandlerDeadline returns the deadline D exposed to user code (DL-12):
// min(P, G) while root is installed, P otherwise, with P capped by root
// first. It never grows as roots are installed or shortened.
func (b Budget) HandlerDeadline(root Root) time.Time {
	p := b.CapRoot(root).P
	if !root.Installed() {
		return p
	}
	return Earliest(p, root.G())
}

// Remaining returns max(0, D − now) with D = b.HandlerDeadline(root)
// (DL-12). It says only whether budget exists at now (DL-13).
func (b Budget) Remaining(root Root, now time.Time) time.Duration {
	return Remaining(b.HandlerDeadline(root), now)
}

// Notification returns the notification instant N = min(P, G) (P without
// a root) and the reason the engine records at N if none is recorded yet
// (DL-18): [ReasonShutdownDeadline] when G <= P, ties going to shutdown,
// and [ReasonDeliveryTimeout] otherwise, except that an attempt whose
// hard cutoff is the root's (H capped to Hr, SD-8) is notified by the
// shutdown whenever N comes.
//
// That exception reads DL-18 together with SD-8 and DL-6. Capped by the
// root, P is recomputed from S (DL-10): P = Hr − min((Hr − S)/4, 1 s),
// while G = Hr − min(total/4, 2 s). Under a root shorter than 4 s the
// attempt's reserve is the larger, P falls before G, and DL-18's rule
// alone would record a delivery timeout, which consumes the attempt (DL-6)
// and buries one on its last: a graceful shutdown with a 2 s budget would
// bury a cooperating job whose own timeout is 30 s. The cutoff that fires
// is the shutdown's, so its reason is. The reason is stamped with N, not
// with the instant the engine observes it (DL-16).
func (b Budget) Notification(root Root) (time.Time, Reason) {
	c := b.CapRoot(root)
	if !root.Installed() {
		return c.P, ReasonDeliveryTimeout
	}
	if !root.G().After(c.P) {
		return root.G(), ReasonShutdownDeadline
	}
	if !c.H.Before(root.Hr()) {
		return c.P, ReasonShutdownDeadline
	}
	return c.P, ReasonDeliveryTimeout
}

// OwnerCutoff returns the owner cutoff O of an attempt whose first reason
// was recorded at at (DL-21): H for [ReasonDeliveryTimeout] (and for
// [ReasonNone]), min(H, F(at)) for every other reason, where F is
// [Root.OwnerCutoff] and H is capped by root first. O never grows as roots
// are installed or shortened.
func (b Budget) OwnerCutoff(reason Reason, at time.Time, root Root) time.Time {
	h := b.CapRoot(root).H
	if reason == ReasonNone || reason == ReasonDeliveryTimeout {
		return h
	}
	return Earliest(h, root.OwnerCutoff(at))
}

// CooperativeDeadline returns C, the instant until which the engine keeps
// waiting for the same pipeline after the first reason was recorded at at
// (DL-22): C = min(at + min((cap_root(o) − at)/4, 250 ms), cap_root(o)),
// where o is the owner cutoff ([Budget.OwnerCutoff]). The window never
// exceeds 250 ms nor a quarter of the owner time left, and is never renewed
// (DL-24): if now >= C when the engine first observes the attempt, no user
// code runs, and the attempt is abandoned at now (DL-25).
func CooperativeDeadline(at, o time.Time, root Root) time.Time {
	o = root.Cap(o)
	window := minDuration(quarter(since(o, at)), CooperativeWindowMax)
	return Earliest(at.Add(window), o)
}

// CleanupCutoff returns the cleanup cutoff E of an attempt whose first
// reason was recorded at at (DL-30): H with [ReasonDeliveryTimeout] or
// [ReasonNone], min(H, F(at)) with any other reason, then capped by root.
// A cleanup deadline only shrinks: callers lower the stored E with
// [Earliest] and never restart it.
func (b Budget) CleanupCutoff(reason Reason, at time.Time, root Root) time.Time {
	return root.Cap(b.OwnerCutoff(reason, at, root))
}

// FinalCleanupCutoff returns the cleanup cutoff E when the attempt's
// supervising goroutine is torn down at now while a reason is set and
// cleanup is unfinished (DL-30): cap_root(min(H, now + 100 ms)), a final
// bounded reconciliation window. Callers lower the stored E with it.
func (b Budget) FinalCleanupCutoff(root Root, now time.Time) time.Time {
	return root.Cap(Earliest(b.H, now.Add(FinalCleanupWindow)))
}

// HookChain returns the deadlines of the cleanup that first starts at now
// with cleanup cutoff e (DL-31): scope = E' = cap_root(e), by which the
// attempt scope must be closed, and hooks = Hk = E' − min((E' − now)/4,
// 250 ms), by which the termination hooks must have finished. Hk <= E'.
func HookChain(e time.Time, root Root, now time.Time) (hooks, scope time.Time) {
	scope = root.Cap(e)
	hooks = scope.Add(-minDuration(quarter(since(scope, now)), ScopeReserveMax))
	return hooks, scope
}

// HookDeadline returns the deadline of the termination hook whose turn
// comes at now (DL-33): its fair share now + (hooks − now)/k of the chain
// deadline hooks, where k counts the eligible hooks not yet run, this one
// included (k < 1 counts as 1). ok is false if now >= hooks: the hook is
// not started and its state is BudgetExhausted. The deadline is never later
// than hooks.
func HookDeadline(hooks time.Time, k int, now time.Time) (deadline time.Time, ok bool) {
	if Expired(hooks, now) {
		return time.Time{}, false
	}
	if k < 1 {
		k = 1
	}
	return now.Add(since(hooks, now) / time.Duration(k)), true
}
