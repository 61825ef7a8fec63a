package scheduler

import (
	"context"
	"slices"
	"time"

	"github.com/quire-dev/quire/deadlines"
)

// CodeSettlementRevoked is the code of an attempt_released decided by the
// final abort of a shutdown (DL-41): the attempt's settlement authority
// was revoked at the forced owner cutoff before its owner settled it, and
// the shutdown released the token for redelivery. Like every release, it
// consumes nothing (DL-6).
const CodeSettlementRevoked = "DELIVERY_SETTLEMENT_REVOKED"

// DeferFinalAbort makes the final abort of a shutdown the caller's (DL-41,
// SD-14): from now on, an owner that reaches its settlement at or after
// its owner cutoff O, with a root installed and a first reason other than
// [deadlines.ReasonDeliveryTimeout], no longer settles its token: its
// authority has run out, and it keeps the attempt, inert, for
// [Runner.Revoke]. Attempts that settle before O are unaffected (DL-41:
// force revokes nothing at once), and so are attempts stopped by their
// own timeout, whose owner cutoff is H. The shutdown coordinator calls it
// once a root is installed; without it the owner settles on its own at
// its cleanup cutoff, and teardown at [Runner.Stop] applies.
func (r *Runner) DeferFinalAbort(ctx context.Context) error {
	return r.call(ctx, func(time.Time) { r.abortDeferred = true })
}

// holdForAbort is called by an owner just before it would settle a at
// now. If the final abort is deferred ([Runner.DeferFinalAbort]) and a is
// at or past its forced owner cutoff, its authority has run out: the
// owner hands the attempt to the final abort, which settles it, and
// reports true. The attempt leaves the owners' table, so owner events and
// late returns find it gone as if it had settled, but [Runner.Drain] keeps
// waiting for it.
func (r *Runner) holdForAbort(a *attempt, now time.Time) bool {
	if !r.abortDeferred || !r.root.Installed() {
		return false
	}
	reason, at, ok := a.att.sig.Reason()
	if !ok || reason == deadlines.ReasonDeliveryTimeout || now.Before(a.budget.OwnerCutoff(reason, at, r.root)) {
		return false
	}
	delete(r.attempts, a.att.Token)
	if r.held == nil {
		r.held = make(map[uint64]*attempt)
	}
	r.held[a.att.Token] = a
	return true
}

// Revoke is the final abort of a shutdown at the forced owner cutoff
// (DL-41, SD-14, SD-24). First every deadline due now is acted on, so an
// owner whose own cutoff is now acts before it loses its authority. Then,
// for every attempt not yet settled, in token order:
//
//  1. its settlement authority is revoked: neither its owner nor a late
//     execution return can settle its token any more (DL-26, DL-38);
//  2. its remaining execution and cleanup are cut: an attempt with no
//     reason yet gets reason stamped at, and its owner is torn down
//     ([Runner.tear]): an execution still running is abandoned, and
//     unfinished cleanup (hooks, scope close) gets the final window of
//     DL-30, its cutoff lowered to at most cap_root(min(H, now + 100 ms)),
//     never raised; cleanup is cancelled at the window's ends rather than
//     at once: a hook still running at the end of its share of the window
//     (DL-31) is Interrupted, and a scope close still running at the end
//     of the window is timed out; both stay quarantined until they return;
//  3. its token is settled as the shutdown's decision once its cleanup
//     ended: at once for an attempt whose cleanup ended already (held at
//     its owner cutoff), otherwise when the window's cleanup finishes or
//     the window ends, whichever comes first. The settlement is
//     attempt_released with [CodeSettlementRevoked], keeping the first
//     reason, whether the execution returned, and the cleanup as it
//     really ended; or, if the root has expired by then, nothing, and the
//     attempt counts Unresolved (DL-39).
//
// It returns once all of that is set in motion, without waiting for the
// windows, the commits (each bounded like any settlement, DL-39) or the
// goroutines; [Runner.Drain] waits for every release to be decided and
// committed, and [Runner.WaitQuarantine] for the goroutines. Settlements
// already being appended are left alone (DL-42). It returns the number of
// tokens revoked.
func (r *Runner) Revoke(ctx context.Context, reason deadlines.Reason, at time.Time) (int, error) {
	n := 0
	err := r.call(ctx, func(now time.Time) {
		r.fire()
		// (1) Held attempts lost their authority at their owner cutoff;
		// the others lose it now. They stay in the owners' table until
		// their cleanup ends, so that its events still reach them.
		held := r.held
		r.held = nil
		toks := r.tokens()
		for _, tok := range toks {
			r.attempts[tok].revoked = true
		}
		toks = append(toks, sortedTokens(held)...)
		slices.Sort(toks)
		for _, tok := range toks {
			if a, ok := held[tok]; ok {
				r.releaseRevoked(a, now) // (3) its cleanup has ended
				continue
			}
			// (2) The torn-down owner settles through releaseRevoked (3)
			// when its cleanup ends, which may be now.
			a := r.attempts[tok]
			if a.att.sig.record(reason, at) && a.att.sig.defaultedReason() {
				r.noteReasonless(a)
			}
			r.tear(a, reason, now)
		}
		n = len(toks)
	})
	return n, err
}

// sortedTokens returns the keys of m in order.
func sortedTokens(m map[uint64]*attempt) []uint64 {
	out := make([]uint64, 0, len(m))
	for tok := range m {
		out = append(out, tok)
	}
	slices.Sort(out)
	return out
}

// releaseRevoked decides the release of a revoked token (DL-41, DL-40),
// once its cleanup has ended or its final window has (DL-30).
func (r *Runner) releaseRevoked(a *attempt, now time.Time) {
	tok := a.att.Token
	if r.root.Expired(now) {
		r.q.unresolved.Add(1) // DL-39: an expired root starts no settlement
		return
	}
	codes, text := cleanupCodes(a)
	res := Result{Token: tok, Joined: a.returned}
	if reason, at, ok := a.att.sig.Reason(); ok {
		res.Reason, res.ReasonAt = reason.String(), at
	}
	msg := "settlement authority revoked at the forced owner cutoff; released by the shutdown"
	if len(codes) > 0 {
		msg = withCleanup(msg, codes, text)
	}
	res.Failure = &Failure{Code: CodeSettlementRevoked, Message: msg, Release: true}
	r.decideSettlement(now, res, a, codes)
}
