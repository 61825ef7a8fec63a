package scheduler

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
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
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("(*execPool).serve"))
}

func TestExecPoolReusesParkedGoroutines(t *testing.T) {
	done := make(chan struct{})
	p := execPool{work: make(chan func()), done: done}
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
	p := execPool{work: make(chan func()), done: done}
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
