package api

import (
	"context"
	"time"

	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)

// WaitIdle returns once the engine is quiescent at its clock's current
// instant: no attempt running, nothing due to start, everything decided
// acknowledged. It is meant for tests and simulations that drive the
// engine with a manual clock: move the clock, then WaitIdle, then assert.
// It does not return while a handler runs within its budget; a handler
// abandoned at its cooperative deadline (DL-26) no longer holds it.
func (e *Engine) WaitIdle(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if err := e.live(); err != nil {
		return err
	}
	return e.r.WaitIdle(ctx)
}

// StateDigest returns the SHA-256 of the engine's replayed state and the
// seq it reflects. A fresh replay of the journal up to that seq has the
// same digest (RL-7); tests and sim compare the two.
func (e *Engine) StateDigest(ctx context.Context) ([32]byte, uint64, error) {
	if err := checkContext(ctx); err != nil {
		return [32]byte{}, 0, err
	}
	var (
		sum [32]byte
		seq uint64
	)
	err := e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		sum = replay.Digest(m.State())
		seq = m.State().LastSeq
		return scheduler.Decision{}, nil
	})
	return sum, seq, err
}
