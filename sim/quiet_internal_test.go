package sim

import "testing"

// A goroutine that waits on a runtime semaphore (an allocation starting a
// GC cycle while the dump holds the world-stop semaphore) is at work: a
// dump showing one is no quiescent point, or the world would act while an
// append or a decision of the engine's loop is still under way.
func TestAllBlockedSemacquireIsWork(t *testing.T) {
	const caller = "goroutine 1 [running]:\nmain.main()\n\n"
	const loop = "goroutine 7 [select]:\nscheduler.(*Runner).loop()\n\n"
	const commit = "goroutine 8 [sync.WaitGroup.Wait]:\npebble.(*commitPipeline).publish()\n\n"
	const signalLoop = "goroutine 23 [syscall]:\nos/signal.signal_recv()\n\t/usr/local/go/src/runtime/sigqueue.go:152 +0x98\n" +
		"os/signal.loop()\n\t/usr/local/go/src/os/signal/signal_unix.go:23 +0x13\n\n"
	for _, tc := range []struct {
		name string
		dump string
		want bool
	}{
		{"all blocked", caller + loop + commit, true},
		{"semacquire", caller + loop + commit + "goroutine 9 [semacquire]:\nvfs.(*memFile).Write()\n", false},
		{"runnable", caller + loop + "goroutine 9 [runnable]:\nscheduler.(*Runner).fire()\n", false},
		{"mutex", caller + loop + "goroutine 9 [sync.Mutex.Lock]:\nsync.(*Mutex).Lock()\n", true},
		{"signal receiver", caller + loop + signalLoop + commit, true},
		{"signal receiver last", caller + loop + "goroutine 23 [syscall, 3 minutes]:\nos/signal.signal_recv()\n", true},
		{"other syscall", caller + loop + "goroutine 9 [syscall]:\nsyscall.Syscall()\n", false},
	} {
		if got := allBlocked([]byte(tc.dump)); got != tc.want {
			t.Errorf("%s: allBlocked = %v, want %v", tc.name, got, tc.want)
		}
	}
}
