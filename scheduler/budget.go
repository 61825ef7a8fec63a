package scheduler

import (
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// Policy converts a recorded retry policy to the deadlines arithmetic.
func Policy(p record.RetryPolicy) deadlines.Backoff {
	b := deadlines.Backoff{
		Kind:        deadlines.BackoffKind(p.Backoff),
		Base:        time.Duration(p.BaseNanos),
		Max:         time.Duration(p.MaxNanos),
		JitterRatio: p.JitterRatio,
	}
	for _, d := range p.ListNanos {
		b.List = append(b.List, time.Duration(d))
	}
	return b
}

// RetryPolicy converts a validated policy to its recorded form.
func RetryPolicy(maxAttempts int, b deadlines.Backoff) record.RetryPolicy {
	p := record.RetryPolicy{
		MaxAttempts: int32(maxAttempts),
		Backoff:     record.Backoff(b.Kind),
		BaseNanos:   int64(b.Base),
		MaxNanos:    int64(b.Max),
		JitterRatio: b.JitterRatio,
	}
	for _, d := range b.List {
		p.ListNanos = append(p.ListNanos, int64(d))
	}
	return p
}

// retryDelay returns the delay before the next attempt after n consumed
// attempts (DL-5), drawing jitter from pick.
func retryDelay(p record.RetryPolicy, n int32, pick func(int) int) time.Duration {
	if pick == nil {
		pick = func(int) int { return 0 }
	}
	return Policy(p).Delay(int(n), pick)
}
