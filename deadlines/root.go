package deadlines

import "time"

// Root is the budget of one shutdown attempt (SD-3, SD-4): anchored at the
// first initiation, with graceful cutoff G and hard cutoff Hr. The zero
// Root means that no shutdown is in progress; every method accepts it and
// then applies no cap.
//
// A Root is a value. [Root.Install] and [Root.Shorten] return a new Root
// whose cutoffs are never later than the receiver's (SD-5), so an expired
// root stays expired and is never renewed (SD-3). G <= Hr always holds.
type Root struct {
	start     time.Time
	total     time.Duration
	reserve   time.Duration
	graceful  time.Time
	hard      time.Time
	installed bool
}

// NewRoot returns the root of a shutdown initiated at start with budget
// total (SD-4): Hr = start + total, reserve = min(total/4, 2 s) and
// G = max(Hr − reserve, start). Options reject a zero total
// ([ValidateShutdownTimeout]), but a zero-length root is allowed here for
// test harnesses: then G = Hr = start. A negative total counts as zero.
func NewRoot(start time.Time, total time.Duration) Root {
	if total < 0 {
		total = 0
	}
	hard := start.Add(total)
	reserve := minDuration(quarter(total), RootReserveMax)
	return Root{
		start:     start,
		total:     total,
		reserve:   reserve,
		graceful:  Latest(hard.Add(-reserve), start),
		hard:      hard,
		installed: true,
	}
}

// Installed reports whether r is an installed root, that is whether a
// shutdown is in progress. It is false for the zero Root.
func (r Root) Installed() bool { return r.installed }

// Start returns the instant of the first initiation, recorded in
// shutdown_initiated (SD-3). It is the zero time if r is not installed.
func (r Root) Start() time.Time { return r.start }

// Total returns the budget the root was created with (SD-1). Installing
// a later root never changes it.
func (r Root) Total() time.Duration { return r.total }

// Reserve returns min(total/4, 2 s) (SD-4), lowered to the smaller reserve
// of any root installed since.
func (r Root) Reserve() time.Duration { return r.reserve }

// G returns the graceful cutoff, or the zero time if r is not installed.
func (r Root) G() time.Time { return r.graceful }

// Hr returns the hard cutoff, or the zero time if r is not installed.
func (r Root) Hr() time.Time { return r.hard }

// Install returns the root in effect after next is installed over r
// (SD-5): G = min(old, new), Hr = min(old, new), reserve = min(old, new).
// The start and total stay those of the first initiation (SD-3). If r is
// not installed the result is next; if next is not installed it is r.
func (r Root) Install(next Root) Root {
	if !next.installed {
		return r
	}
	if !r.installed {
		return next
	}
	r.graceful = Earliest(r.graceful, next.graceful)
	r.hard = Earliest(r.hard, next.hard)
	r.reserve = minDuration(r.reserve, next.reserve)
	return r
}

// Shorten returns r with its hard cutoff lowered to hard if that is
// earlier, and G lowered with it so that G <= Hr (SD-5). A root that is not
// installed is returned unchanged: a hard instant alone does not make a
// shutdown.
func (r Root) Shorten(hard time.Time) Root {
	if !r.installed {
		return r
	}
	r.hard = Earliest(r.hard, hard)
	r.graceful = Earliest(r.graceful, r.hard)
	return r
}

// Cap returns cap_root(x) of DL-1: min(x, Hr) while r is installed, x
// otherwise. An action's own absolute force cutoff is clamped with Cap
// (SD-6), as is every wait during shutdown (SD-2).
func (r Root) Cap(x time.Time) time.Time {
	if !r.installed {
		return x
	}
	return Earliest(x, r.hard)
}

// GracefulExpired reports whether r is installed and now >= G: only force
// paths run from then on (SD-7).
func (r Root) GracefulExpired(now time.Time) bool { return r.installed && Expired(r.graceful, now) }

// Expired reports whether r is installed and now >= Hr.
func (r Root) Expired(now time.Time) bool { return r.installed && Expired(r.hard, now) }

// ForceDeadline returns the deadline of a force path that starts at now
// (SD-6): min(now + reserve', Hr) with reserve' = min(reserve, Hr − G). An
// action that supplies its own absolute force cutoff x uses r.Cap(x)
// instead. If r is not installed the result is now + reserve' = now.
func (r Root) ForceDeadline(now time.Time) time.Time {
	if !r.installed {
		return now
	}
	reserve := minDuration(r.reserve, since(r.hard, r.graceful))
	return Earliest(now.Add(reserve), r.hard)
}

// DrainForceDeadline returns the force deadline of the drain action
// (SD-8): max(r.ForceDeadline(now), latestOwnerCutoff) clamped to Hr, so
// that a short root still lets cooperating attempts reach their owner
// cutoff. latestOwnerCutoff is the latest owner cutoff O of the running
// attempts ([Budget.OwnerCutoff]); pass the zero time if none is running.
func (r Root) DrainForceDeadline(now, latestOwnerCutoff time.Time) time.Time {
	return r.Cap(Latest(r.ForceDeadline(now), latestOwnerCutoff))
}

// OwnerCutoff returns F(at) of DL-21 for a first reason other than
// [ReasonDeliveryTimeout] recorded at at: min(at + min((Hr − at)*3/4, 1 s),
// Hr) while r is installed, at + 1 s otherwise. The last quarter of the
// root time left at at stays free for joins, close evidence, owned
// resources and telemetry (SD-9).
func (r Root) OwnerCutoff(at time.Time) time.Time {
	if !r.installed {
		return at.Add(OwnerWindowMax)
	}
	window := minDuration(threeQuarters(since(r.hard, at)), OwnerWindowMax)
	return Earliest(at.Add(window), r.hard)
}

// SettlementWait returns how long one settlement append started at now may
// wait (DL-39): min(timeout, Hr − now), saturated at zero. Zero means that
// the root has expired and no settlement starts. If r is not installed it
// is timeout.
func (r Root) SettlementWait(timeout time.Duration, now time.Time) time.Duration {
	if timeout < 0 {
		timeout = 0
	}
	if !r.installed {
		return timeout
	}
	return minDuration(timeout, since(r.hard, now))
}

// DispatcherStopDeadline returns the instant until which the coordinator,
// starting at now, waits for the dispatcher to acknowledge its stop (SD-9):
// Hr − min((Hr − now)/4, 250 ms), which keeps that reserve for closing the
// internal queues and syncing the journal. If r is not installed the
// result is now.
func (r Root) DispatcherStopDeadline(now time.Time) time.Time {
	if !r.installed {
		return now
	}
	return r.hard.Add(-minDuration(quarter(since(r.hard, now)), CloseReserveMax))
}
