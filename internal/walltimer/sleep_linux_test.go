package walltimer

import (
	"runtime"
	"syscall"
	"testing"
)

// timerSlack is the calling thread's timer slack in nanoseconds.
func timerSlack(t *testing.T) uintptr {
	t.Helper()
	v, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prGetTimerSlack, 0, 0)
	if errno != 0 {
		t.Fatalf("PR_GET_TIMERSLACK: %v", errno)
	}
	return v
}

func setSlack(t *testing.T, ns uintptr) {
	t.Helper()
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, ns, 0); errno != 0 {
		t.Fatalf("PR_SET_TIMERSLACK: %v", errno)
	}
}

// The fine sleep runs with a 1 ns timer slack, and the thread, which other
// goroutines use after it, gets its own slack back.
func TestFineSleepTightensTimerSlackAndRestoresIt(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A known slack other than 1 ns, so that both changes show.
	orig := timerSlack(t)
	const before = 50_000
	setSlack(t, before)
	defer setSlack(t, orig)
	var during uintptr
	withTightSlack(func() { during = timerSlack(t) })
	if during != 1 {
		t.Errorf("slack during the sleep = %d ns, want 1", during)
	}
	if after := timerSlack(t); after != before {
		t.Errorf("slack after the sleep = %d ns, want the thread's own %d", after, before)
	}
}
