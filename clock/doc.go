// Package clock is the one door through which time enters quire (DESIGN §1.3).
//
// Everything that needs the current instant or a timer takes a [Clock]. The
// engine's composition root (package api) is the only place that calls
// [System]; tests and the simulator use package clocktest instead, so that a
// run never depends on the wall clock.
//
// It must not import anything but the standard library's time package.
//
// # Usage
//
//	c := clock.System()
//	t := c.NewTimer(250 * time.Millisecond)
//	defer t.Stop()
//	select {
//	case at := <-t.C():
//		fmt.Println("fired at", at)
//	case <-ctx.Done():
//	}
//
// Code that waits for an instant it computed earlier arms the timer at the
// instant, so that a clock moved in between (a manual clock in a test) does
// not make it late:
//
//	t := clock.NewTimerAt(c, deadline)
package clock
