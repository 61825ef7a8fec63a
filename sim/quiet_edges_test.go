package sim

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// waitOn calls wait; its frame marks the waiting goroutine in a dump.
//
//go:noinline
func waitOn(wait func()) { wait() }

// stateOf takes runtime.Stack dumps until one shows the goroutine whose
// frames hold marker in a state that is not running or runnable, and
// returns that goroutine's header and frames as the dump prints them.
func stateOf(t *testing.T, marker string) (header, frames []byte) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for tries := 0; ; tries++ {
		n := runtime.Stack(buf, true)
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			if !bytes.Contains(g, []byte(marker)) {
				continue
			}
			h, f := nextLine(g)
			if !bytes.Contains(h, []byte("[running")) && !bytes.Contains(h, []byte("[runnable")) {
				return h, f
			}
		}
		if tries > 100_000 {
			t.Fatalf("no goroutine waiting in %s", marker)
		}
		runtime.Gosched()
	}
}

// Every way a goroutine of a world waits for another one (a channel, a
// select, a mutex, either side of a RWMutex, a cond, a wait group) is,
// as the runtime itself prints it in a dump, a goroutine quiet counts as
// blocked: a state it missed would keep every world in step mode from
// its quiescent points until the watchdog.
func TestBlockedKnowsEveryWaitOfTheRuntime(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(release chan struct{}) (wait func(), unblock func())
	}{
		{"chan receive", func(release chan struct{}) (func(), func()) {
			return func() { <-release }, func() {}
		}},
		{"chan send", func(release chan struct{}) (func(), func()) {
			ch := make(chan int)
			return func() { ch <- 1 }, func() { <-ch }
		}},
		{"select", func(release chan struct{}) (func(), func()) {
			other := make(chan int)
			return func() {
				select {
				case <-release:
				case <-other:
				}
			}, func() {}
		}},
		{"sync.Mutex.Lock", func(release chan struct{}) (func(), func()) {
			var mu sync.Mutex
			mu.Lock()
			return func() { mu.Lock() }, mu.Unlock
		}},
		{"sync.RWMutex.Lock", func(release chan struct{}) (func(), func()) {
			var mu sync.RWMutex
			mu.RLock()
			return func() { mu.Lock() }, mu.RUnlock
		}},
		{"sync.RWMutex.RLock", func(release chan struct{}) (func(), func()) {
			var mu sync.RWMutex
			mu.Lock()
			return func() { mu.RLock() }, mu.Unlock
		}},
		{"sync.Cond.Wait", func(release chan struct{}) (func(), func()) {
			var mu sync.Mutex
			cond := sync.NewCond(&mu)
			done := false
			return func() {
					mu.Lock()
					for !done {
						cond.Wait()
					}
					mu.Unlock()
				}, func() {
					mu.Lock()
					done = true
					mu.Unlock()
					cond.Broadcast()
				}
		}},
		{"sync.WaitGroup.Wait", func(release chan struct{}) (func(), func()) {
			var wg sync.WaitGroup
			wg.Add(1)
			return wg.Wait, wg.Done
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			wait, unblock := c.start(release)
			exited := make(chan struct{})
			go func() {
				defer close(exited)
				waitOn(wait)
			}()
			header, frames := stateOf(t, "sim.waitOn(")
			close(release)
			unblock()
			<-exited
			if !bytes.Contains(header, []byte("["+c.name)) {
				t.Fatalf("the goroutine waits in %q, want the state %q", header, c.name)
			}
			if !blocked(header, frames) {
				t.Fatalf("blocked(%q) = false: a goroutine waiting for another counts as at work", header)
			}
		})
	}
}

// quiet grows a buffer too small for the dump and reads the whole dump,
// never the part that fitted: a goroutine at work past the first bytes
// still keeps the process from a quiescent point.
func TestQuietReadsTheWholeDump(t *testing.T) {
	defer spinners(t, 1)()
	for _, size := range []int{1, 64} {
		buf := make([]byte, size)
		if quiet(&buf) {
			t.Fatalf("quiet with a %d-byte buffer = true while a goroutine spins", size)
		}
		if len(buf) <= size {
			t.Fatalf("quiet kept its %d-byte buffer, too small for any dump", size)
		}
	}
}

// spinners starts n goroutines that compute until the returned stop runs.
func spinners(t *testing.T, n int) (stop func()) {
	t.Helper()
	var flag atomic.Bool
	var wg sync.WaitGroup
	started := make([]atomic.Bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spinUntil(&started[i], &flag)
		}()
	}
	for i := range n {
		for !started[i].Load() {
			runtime.Gosched()
		}
	}
	return func() { flag.Store(true); wg.Wait() }
}

// The watchdog's message lists at most busyListMax goroutines at work and
// counts the others ("(n more)"); with fewer, it lists them all and
// counts none.
func TestBusyListsAtMostBusyListMax(t *testing.T) {
	buf := make([]byte, 64<<10)

	stop := spinners(t, 1)
	got := busy(&buf)
	stop()
	if !strings.Contains(got, "sim.spinUntil") || strings.Contains(got, "more)") {
		t.Fatalf("one goroutine at work: busy =\n%s\nwant it listed and no count of others", got)
	}

	stop = spinners(t, busyListMax+2)
	got = busy(&buf)
	stop()
	if n := len(regexp.MustCompile(`(?m)^goroutine \d+ \[`).FindAllString(got, -1)); n != busyListMax {
		t.Fatalf("busy lists %d goroutines, want busyListMax (%d):\n%s", n, busyListMax, got)
	}
	var more int
	if _, err := fmt.Sscanf(got[strings.LastIndex(got, "\n")+1:], "(%d more)", &more); err != nil || more < 2 {
		t.Fatalf("busy's last line does not count the %d goroutines left out (%v):\n%s", 2, err, got)
	}
}

// spinDeep computes, never blocking, depth frames down until stop is set.
//
//go:noinline
func spinDeep(depth int, started, stop *atomic.Bool) int {
	if depth > 0 {
		return spinDeep(depth-1, started, stop) + 1
	}
	spinUntil(started, stop)
	return 0
}

// The watchdog's message stays within busyBytesMax of goroutine dumps,
// however deep the stacks of the goroutines at work: one whose dump would
// not fit is counted, not listed.
func TestBusyListsAtMostBusyBytesMax(t *testing.T) {
	var started, stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		spinDeep(400, &started, &stop)
	}()
	defer func() { stop.Store(true); <-done }()
	for !started.Load() {
		runtime.Gosched()
	}
	buf := make([]byte, 64<<10)
	got := busy(&buf)
	if len(got) > busyBytesMax+len("\n\n(1000 more)") {
		t.Fatalf("busy's message is %d bytes, want at most busyBytesMax (%d) of dumps and a count", len(got), busyBytesMax)
	}
	if !strings.Contains(got, "more)") {
		t.Fatalf("the goroutine whose dump does not fit is not counted:\n%s", got)
	}
}
