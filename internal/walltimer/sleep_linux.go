package walltimer

import (
	"runtime"
	"syscall"
	"time"
)

// prctl(2) options for a thread's timer slack.
const (
	prSetTimerSlack = 29 // PR_SET_TIMERSLACK
	prGetTimerSlack = 30 // PR_GET_TIMERSLACK
)

// sleep blocks the calling thread in the kernel for about d. It may return
// early (a signal interrupts nanosleep, and the Go runtime sends them for
// preemption); the caller loops on the time left.
var sleep = func(d time.Duration) {
	withTightSlack(func() {
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: the caller measures again
	})
}

// withTightSlack runs f with its thread's timer slack at 1 ns and puts the
// thread's own value back after.
//
// Linux may wake a sleeping thread as late as its timer slack after the
// instant it asked for, so that nearby wake-ups can share one interrupt:
// 50 µs by default. That was most of a fine sleep's lateness. The slack is
// a property of the thread, which the Go runtime shares between goroutines,
// so f runs locked to it and the old value is restored before the thread
// is released. If prctl refuses, f runs with the slack as it is.
func withTightSlack(f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTimerSlack, 0, 0)
	if errno != 0 {
		f()
		return
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0); errno != 0 {
		f()
		return
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, old, 0)
	f()
}
