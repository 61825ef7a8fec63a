package scheduler

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"
)

// goid returns the calling goroutine's id from its stack header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// serving counts goroutines parked in or running execPool.serve.
func serving() int {
	buf := make([]byte, 1<<20)
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("(*execPool[...]).serve"))
}

func TestExecPoolReusesParkedGoroutines(t *testing.T) {
	done := make(chan struct{})
	p := newExecPool(done, func(f func()) { f() })
	ids := make(chan uint64, 1)
	p.run(func() { ids <- goid() })
	first := <-ids
	// The goroutine parks after fn returns; a run that finds it parked
	// hands the next fn to it. Spin until it is parked (no sleeping).
	var again uint64
	for again == 0 {
		select {
		case p.work <- func() { ids <- goid() }:
			again = <-ids
		default:
			runtime.Gosched()
		}
	}
	if again != first {
		t.Fatalf("second execution ran on goroutine %d, want the parked %d", again, first)
	}
	close(done)
	for serving() > 0 {
		runtime.Gosched()
	}
}

// An execution that ends its goroutine (runtime.Goexit) takes that
// goroutine out of the pool; the next run still runs, on a new one.
func TestExecPoolSurvivesGoexit(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	p := newExecPool(done, func(f func()) { f() })
	exited := make(chan uint64)
	p.run(func() {
		defer func() { exited <- goid() }()
		runtime.Goexit()
	})
	gone := <-exited
	ran := make(chan uint64)
	p.run(func() { ran <- goid() })
	if id := <-ran; id == gone {
		t.Fatalf("ran on goroutine %d, which exited", id)
	}
}

// frameAddr returns the address of a local in its own frame: equal at the
// same call depth on the same goroutine unless the stack was moved.
//
//go:noinline
func frameAddr() uintptr {
	var x byte
	return uintptr(unsafe.Pointer(&x))
}

// deep uses about depth × 256 bytes of stack.
//
//go:noinline
func deep(depth int) byte {
	var b [256]byte
	b[depth%256] = byte(depth)
	if depth == 0 {
		return b[0]
	}
	return deep(depth-1) + b[(depth*7)%256]
}

// A parked goroutine keeps the stack it grew. The garbage collector halves
// the stack of a goroutine that uses less than a quarter of it, by copying:
// every execution after a collection would grow it again by copying its
// frames, which in a burst of short executions was a large part of their
// cost. An execution's frames at the same depth are at the same address in
// a later execution on the same goroutine only if its stack never moved.
func TestExecPoolParkedGoroutinesKeepTheirStacks(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	p := newExecPool(done, func(f func()) { f() })
	addrs := make(chan uintptr, 1)
	others := parked()
	p.run(func() {
		deep(32) // 8 KiB: a handler's frames
		addrs <- frameAddr()
	})
	first := <-addrs
	for parked() <= others {
		runtime.Gosched()
	}
	runtime.GC()
	runtime.GC()
	p.work <- func() { addrs <- frameAddr() } // the parked goroutine
	if again := <-addrs; again != first {
		t.Fatalf("an execution's frame moved from %#x to %#x after a collection: the parked goroutine's stack was copied", first, again)
	}
}

// parked counts goroutines waiting in execPool.serve for their next
// execution.
func parked() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
		if bytes.Contains(g, []byte(" [select")) && bytes.Contains(g, []byte("(*execPool[...]).serve")) {
			n++
		}
	}
	return n
}

// Executions are handed over as a relay: at most relay goroutines at a
// time are handed an execution they have not started, so that the
// engine's own goroutines never wait behind hundreds of ready executions.
// Each hands over its successor before it runs its own, so one that blocks
// holds up none of the others, and they start in run order.
func TestExecPoolHandsOverAFewExecutionsAtATime(t *testing.T) {
	done := make(chan struct{})
	defer close(done)
	started := make(chan int)
	release := make(chan struct{})
	p := newExecPool(done, func(v int) {
		started <- v
		<-release // every execution blocks until the test ends
	})
	const relay = 2
	p.relay = relay
	var (
		mu      sync.Mutex
		spawned []func()
	)
	p.spawn = func(f func()) {
		mu.Lock()
		spawned = append(spawned, f)
		mu.Unlock()
	}
	nspawned := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(spawned)
	}
	// start lets spawned goroutine v run: it must start execution v.
	start := func(v int) {
		t.Helper()
		mu.Lock()
		f := spawned[v]
		mu.Unlock()
		go f()
		if got := <-started; got != v {
			t.Fatalf("execution %d started, want %d (run order)", got, v)
		}
	}
	const n = 6
	for v := range n {
		p.run(v)
	}
	if got := nspawned(); got != relay {
		t.Fatalf("%d goroutines handed an execution before any started, want %d", got, relay)
	}
	for v := range n - 1 {
		start(v)
		// The goroutine that started v handed over the next queued one
		// first, though v itself blocks.
		if want := min(v+1+relay, n); nspawned() != want {
			t.Fatalf("after execution %d started: %d goroutines handed one, want %d", v, nspawned(), want)
		}
	}
	// The queue is empty and n-1 is handed over, not started: of two more
	// runs, one is handed over at once and one waits.
	p.run(n)
	p.run(n + 1)
	if got := nspawned(); got != n+1 {
		t.Fatalf("two runs with %d execution handed over and not started: %d goroutines handed one in all, want %d",
			1, got, n+1)
	}
	start(n - 1)
	if got := nspawned(); got != n+2 {
		t.Fatalf("after execution %d started: %d goroutines handed one, want %d", n-1, got, n+2)
	}
	start(n)
	start(n + 1)
	close(release)
}
