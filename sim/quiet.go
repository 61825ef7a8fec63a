package sim

import (
	"bytes"
	"runtime"
	"time"
)

// blockedStates are the goroutine states (as runtime.Stack prints them) of
// a goroutine that waits for another goroutine: a channel, select, cond,
// wait group or lock, or for outside input (a world does no real IO, so
// that is a pipe of the test binary's). Any other state (running,
// runnable, syscall, sleep, GC assist, ...) means work is in progress.
// time.Sleep counts as work: in a world it only comes from a slow disk's
// injected latency.
//
// A bare "semacquire" counts as work too: no goroutine of a world waits on
// a plain runtime semaphore for another goroutine (sync's locks, conds and
// wait groups have states of their own). It is the runtime's own: a
// goroutine whose allocation starts a GC cycle waits there for the GC and
// stop-the-world semaphores, held by the dump itself (runtime.Stack stops
// the world) or by the runtime's hidden GC workers. That goroutine is in
// the middle of its work (a WAL write, a decision of the engine's loop)
// and goes on once the runtime lets it, with no goroutine of the world
// acting; a world that took it for blocked would act while an append or a
// decision is still under way.
var blockedStates = [][]byte{
	[]byte("chan receive"),
	[]byte("chan send"),
	[]byte("select"),
	[]byte("sync.Cond.Wait"),
	[]byte("sync.WaitGroup.Wait"),
	[]byte("sync.Mutex.Lock"),
	[]byte("sync.RWMutex.Lock"),
	[]byte("sync.RWMutex.RLock"),
	[]byte("finalizer wait"),
	[]byte("IO wait"), // a pipe, e.g. the one go test reads an example's output from
	[]byte("force gc (idle)"),
}

// quiet reports whether every goroutine of the process other than the
// caller is blocked waiting for another goroutine, in one stop-the-world
// snapshot (runtime.Stack). Then nothing can happen until the caller acts:
// the engine's goroutines never wait on real time (only Pebble's
// background ticker does, and what it wakes for is no part of the
// engine's decisions), so the state the caller sees next is a function of
// what it did before. buf is reused between calls.
func quiet(buf *[]byte) bool {
	for {
		n := runtime.Stack(*buf, true)
		if n < len(*buf) {
			return allBlocked((*buf)[:n])
		}
		*buf = make([]byte, 2*len(*buf))
	}
}

// allBlocked reads a runtime.Stack dump: the caller's goroutine comes
// first, then every other one, each headed "goroutine N [state...]:".
func allBlocked(dump []byte) bool {
	first := true
	for len(dump) > 0 {
		line := dump
		if i := bytes.IndexByte(dump, '\n'); i >= 0 {
			line, dump = dump[:i], dump[i+1:]
		} else {
			dump = nil
		}
		if !bytes.HasPrefix(line, []byte("goroutine ")) {
			continue
		}
		if first {
			first = false // the caller
			continue
		}
		open := bytes.IndexByte(line, '[')
		if open < 0 {
			return false
		}
		state := line[open+1:]
		blocked := false
		for _, s := range blockedStates {
			if bytes.HasPrefix(state, s) {
				blocked = true
				break
			}
		}
		if !blocked {
			return false
		}
	}
	return true
}

// waitQuiet returns once [quiet] holds, or false once limit fires (the
// watchdog, in real time; no outcome ever depends on real time). It
// yields between snapshots so that the goroutines at work can finish.
func waitQuiet(buf *[]byte, limit <-chan time.Time) bool {
	for i := 0; ; i++ {
		if quiet(buf) {
			return true
		}
		// A snapshot stops the world: take fewer while work goes on.
		for j := 0; j < min(1+i, 64); j++ {
			runtime.Gosched()
		}
		select {
		case <-limit:
			return false
		default:
		}
	}
}
