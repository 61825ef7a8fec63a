package walltimer

import (
	"syscall"
	"time"
)

// sleep blocks the calling thread in the kernel for about d. It may return
// early (a signal interrupts nanosleep, and the Go runtime sends them for
// preemption); the caller loops on the time left.
var sleep = func(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: the caller measures again
}
