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
		// go test -cpuprofile and -trace start readers that are no
		// part of any world, whatever they do.
		{"profile writer (Linux)", caller + loop + profileWriter("syscall", "runtime/pprof.readProfile()") + commit, true},
		{"profile writer (Darwin)", caller + loop + profileWriter("sleep", "time.Sleep(0x5f5e100)"), true},
		{"profile writer running", caller + loop + profileWriter("running", "runtime/pprof.(*profileBuilder).addCPUData(...)"), true},
		{"trace reader", caller + loop + "goroutine 12 [trace reader (blocked)]:\nruntime.ReadTrace()\n" +
			"runtime/trace.(*traceMultiplexer).startLocked.func1()\ncreated by runtime/trace.(*traceMultiplexer).startLocked in goroutine 1\n\n", true},
		{"other sleep", caller + loop + "goroutine 9 [sleep]:\ntime.Sleep(0x3e8)\nvfs.(*slowFS).Write()\n", false},
		{"profile writer and another sleeper", caller + profileWriter("sleep", "time.Sleep(0x5f5e100)") +
			"goroutine 9 [sleep]:\ntime.Sleep(0x3e8)\n", false},
	} {
		if got := allBlocked([]byte(tc.dump)); got != tc.want {
			t.Errorf("%s: allBlocked = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// profileWriter is runtime/pprof's CPU profile writer in a dump, in state
// with innermost frame top.
func profileWriter(state, top string) string {
	return "goroutine 9 [" + state + "]:\n" + top + "\nruntime/pprof.profileWriter({0x10460e0, 0x211bfe8b64c0})\n" +
		"created by runtime/pprof.StartCPUProfile in goroutine 1\n\n"
}
