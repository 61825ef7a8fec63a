package scheduler

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"strings"
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
//  1. its settlement authority is revoked: it leaves the owner's table, so
//     no later owner event or execution return can settle its token
//     (DL-26, DL-38);
//  2. its remaining execution and cleanup contexts are cancelled: an
//     attempt with no reason yet gets reason stamped at, a running hook
//     is interrupted and the hooks after it are not started (DL-33), an
//     execution still running is abandoned and quarantined with its scope
//     withheld (DL-37), a scope close still running is left to return on
//     its own, quarantined, and a scope cleanup never reached is closed
//     without waiting for its result;
//  3. its token is settled as the shutdown's decision: attempt_released
//     with [CodeSettlementRevoked], keeping the first reason, whether the
//     execution returned, and the cleanup codes so far; or, if the root
//     has expired, nothing, and the attempt counts Unresolved (DL-39).
//
// It returns once all of that is decided, without waiting for the
// commits (each bounded like any settlement, DL-39) or for the
// goroutines; [Runner.Drain] and [Runner.WaitQuarantine] observe both.
// Settlements already being appended are left alone (DL-42). It returns
// the number of tokens revoked.
func (r *Runner) Revoke(ctx context.Context, reason deadlines.Reason, at time.Time) (int, error) {
	n := 0
	err := r.call(ctx, func(now time.Time) {
		r.fire()
		// (1) Held attempts lost their authority at their owner cutoff;
		// the others lose it now, leaving the owners' table.
		revoked := make([]*attempt, 0, len(r.held)+len(r.attempts))
		for _, tok := range sortedTokens(r.held) {
			revoked = append(revoked, r.held[tok])
		}
		r.held = nil
		nHeld := len(revoked)
		for _, tok := range r.tokens() {
			revoked = append(revoked, r.attempts[tok])
			delete(r.attempts, tok)
		}
		for _, a := range revoked[nHeld:] {
			r.cancelRevoked(a, reason, at) // (2)
		}
		slices.SortFunc(revoked, func(a, b *attempt) int { return cmp.Compare(a.att.Token, b.att.Token) })
		for _, a := range revoked {
			r.releaseRevoked(a, now) // (3)
		}
		n = len(revoked)
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

// cancelRevoked cancels what remains of a revoked attempt.
func (r *Runner) cancelRevoked(a *attempt, reason deadlines.Reason, at time.Time) {
	a.att.sig.record(reason, at)
	a.att.freeze()
	switch {
	case a.phase == phaseRunning:
		a.abandoned = true
		a.execution = executionAbandoned
		r.q.execs.Add(1) // its return is counted back by onResult
		r.lost[a.att.Token] = &lostExecution{att: a.att}
	case a.hook != nil:
		a.att.setTerm(a.hook.idx, HookInterrupted)
		a.hook.sig.record(reason, at)
		r.q.hooks.Add(1) // its return is counted back by the owner (onOwner)
		a.hook = nil
	}
	if a.phase != phaseScope {
		for _, i := range a.hooks[min(a.pos, len(a.hooks)):] {
			a.att.setTerm(i, HookBudgetExhausted)
		}
		a.pos = len(a.hooks)
	}
	switch {
	case a.scope != "":
		// Closed, timed out or withheld by the owner already.
	case !a.returned:
		a.scope = scopeQuarantined
		if l, ok := r.lost[a.att.Token]; ok {
			l.scopeLost = true // closed if the execution returns in time (DL-37)
		}
		r.q.scopes.Add(1)
	case a.scopeRunning:
		a.scopeRunning = false
		a.scope = scopeTimedOut
		a.codes = append(a.codes, CodeScopeCleanupTimedOut)
		r.q.scopes.Add(1) // its return is counted back by the owner (onOwner)
	default:
		// Cleanup never reached the scope: it is closed now, as the
		// owner would have after its hooks, but the settlement does not
		// wait for the result; the close stays quarantined until it
		// returns.
		a.scope = scopeUnobserved
		a.codes = append(a.codes, CodeScopeResultUnobserved)
		r.q.scopes.Add(1) // counted back when the close returns (onOwner)
		r.closeLostScope(a.att.Token, a.att)
	}
}

// releaseRevoked decides the release of a revoked token (DL-41, DL-40).
func (r *Runner) releaseRevoked(a *attempt, now time.Time) {
	tok := a.att.Token
	if r.root.Expired(now) {
		r.q.unresolved.Add(1) // DL-39: an expired root starts no settlement
		return
	}
	codes := a.codes
	for _, i := range a.hooks {
		if a.att.term(i).failed() {
			codes = append([]string{CodeTerminationCleanupFailed}, codes...)
			break
		}
	}
	res := Result{Token: tok, Joined: a.returned}
	if reason, at, ok := a.att.sig.Reason(); ok {
		res.Reason, res.ReasonAt = reason.String(), at
	}
	msg := "settlement authority revoked at the forced owner cutoff; released by the shutdown"
	if len(codes) > 0 {
		msg += " (cleanup: " + strings.Join(codes, ", ") + ")"
	}
	res.Failure = &Failure{Code: CodeSettlementRevoked, Message: msg, Release: true}
	d, err := r.m.Settle(now, res)
	if err != nil {
		return // not the job's open attempt: nothing to settle (RL-10)
	}
	seq := annotate(&d, tok, a, codes)
	r.enqueue(d, nil)
	if seq != 0 {
		deadline := now.Add(r.root.SettlementWait(r.cfg.SettlementTimeout, now))
		r.settling[seq] = settleWait{token: tok, deadline: deadline}
		heap.Push(&r.events, event{at: deadline.UnixNano(), token: seq, kind: evSettle})
	}
}
