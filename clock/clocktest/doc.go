// Package clocktest provides a manual [clock.Clock] for tests and for the
// simulator (package sim): time moves only when the test says so, and
// timers fire in one deterministic order.
//
// It owns the fire order of fake timers: when [Clock.Advance] or [Clock.Set]
// moves the clock forward, every timer whose instant is reached fires in
// order of (instant, arming order), where [clock.Timer] Reset counts as a new
// arming, and each delivers its own fire instant. Callbacks registered with
// [Clock.AfterFunc] run synchronously on the goroutine that moves the clock,
// with Now equal to their fire instant. Tests wait for the code under test to
// arm its timers with [Clock.BlockUntil], never by sleeping.
//
// It must not import any quire package but clock.
//
// # Usage
//
//	clk := clocktest.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
//	go worker(ctx, clk) // arms clk.NewTimer(time.Minute) and waits on C
//	clk.BlockUntil(1)   // the worker's timer is armed
//	clk.Advance(time.Minute)
//	// the worker receives 2025-01-01 00:01:00 UTC on its timer's channel
package clocktest
