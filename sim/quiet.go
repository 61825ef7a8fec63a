package sim

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
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
// first, then every other one, each headed "goroutine N [state...]:" and
// followed by its frames, innermost first, with a blank line between
// goroutines.
func allBlocked(dump []byte) bool {
	for i, g := range bytes.Split(dump, []byte("\n\n")) {
		header, frames := nextLine(g)
		if i > 0 && bytes.HasPrefix(header, []byte("goroutine ")) && !blocked(header, frames) {
			return false
		}
	}
	return true
}

// nextLine splits b after its first line, which it returns without the
// newline.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// signalRecv is the innermost frame of the goroutine os/signal starts at
// the process's first signal.Notify, which waits for the next OS signal
// in a system call for the rest of the process's life.
var signalRecv = []byte("os/signal.signal_recv(")

// observers are frames of goroutines the runtime's own tools start for
// the whole process: the CPU profile's writer (go test -cpuprofile,
// pprof.StartCPUProfile), which waits for samples in a system call on
// Linux and in time.Sleep on Darwin, and the execution trace's reader
// (go test -trace, trace.Start), which waits in a state of its own. They
// only read what the runtime records and write it out; nothing of a
// world waits for them or is started by them.
var observers = [][]byte{
	[]byte("runtime/pprof.profileWriter("),
	[]byte("runtime/trace.(*traceMultiplexer)"),
}

// blocked reads a goroutine of a dump, its header "goroutine N
// [state...]:" and its frames, and reports whether it waits: its state is
// one of blockedStates; or it is os/signal's receiver in its system call,
// which waits for outside input (a signal) as a pipe in "IO wait" does;
// or it is one of the observers, whatever it does. Any other goroutine in
// a system call is at work. Without the receiver's exception a test
// binary in which anything had called signal.Notify (Engine.Run does, and
// so may the application's own code) never reached a quiescent point in
// step mode again: every later world that parked work or shut down failed
// through the watchdog; without the observers', neither did one run with
// go test -cpuprofile or -trace.
func blocked(header, frames []byte) bool {
	open := bytes.IndexByte(header, '[')
	if open < 0 {
		return false
	}
	state := header[open+1:]
	for _, s := range blockedStates {
		if bytes.HasPrefix(state, s) {
			return true
		}
	}
	if bytes.HasPrefix(state, []byte("syscall")) && bytes.HasPrefix(frames, signalRecv) {
		return true
	}
	for _, o := range observers {
		if bytes.Contains(frames, o) {
			return true
		}
	}
	return false
}

// quietMu lets one world of the process at a time wait for a quiescent
// point. A world that waits keeps its own goroutine running (it takes
// snapshots and yields), which another world must see blocked: two worlds
// waiting at once (tests run with t.Parallel) would each wait for the
// other until the watchdog. A world waiting for the lock is blocked on a
// mutex, which is what the one holding it needs to see.
var quietMu sync.Mutex

// quietBackoff is how long waitQuiet sleeps between snapshots once a wait
// has taken more than a few.
const quietBackoff = 50 * time.Microsecond

// waitQuiet returns once [quiet] holds, or false once limit fires (the
// watchdog, in real time; no outcome ever depends on real time). It
// yields between snapshots so that the goroutines at work can finish.
func waitQuiet(buf *[]byte, limit <-chan time.Time) bool {
	select {
	case <-limit:
		return false
	default:
	}
	quietMu.Lock()
	defer quietMu.Unlock()
	for i := 0; ; i++ {
		// A snapshot formats every goroutine's stack, which costs in the
		// goroutines of the whole test binary; the scheduler's counts
		// cost in its Ps. While they show work, skip the snapshot, but
		// take one every few tries all the same: the counts are
		// approximate, and include the runtime's own goroutines (the
		// garbage collector's), which a snapshot leaves out.
		if (i%8 == 7 || !scheduling()) && quiet(buf) {
			return true
		}
		// A snapshot stops the world: take fewer while work goes on.
		for j := 0; j < min(1+i, 64); j++ {
			runtime.Gosched()
		}
		// Gosched gives the P back to the run queues, but the scheduler
		// takes the global queue, where Gosched put this goroutine, before
		// it steals from another P: work queued on the other P waits, and
		// each snapshot preempts what does run. A world's close, whose
		// goroutines take turns with Pebble's, took 0.3–2.6 s of snapshots
		// that way. Past the first few, the wait sleeps a little between
		// snapshots, which leaves both Ps to the work. Only how often the
		// world looks changes; what it finds when it looks does not.
		if i >= 64 {
			time.Sleep(quietBackoff)
		}
		select {
		case <-limit:
			return false
		default:
		}
	}
}

// schedSamples are the scheduler's counts [scheduling] reads.
var schedSamples = []metrics.Sample{
	{Name: "/sched/goroutines/running:goroutines"},
	{Name: "/sched/goroutines/runnable:goroutines"},
}

// scheduling reports whether, by the scheduler's approximate counts, a
// goroutine other than the caller runs or waits only for a P. Then no
// snapshot can show a quiescent point. Callers hold quietMu, which also
// guards schedSamples.
func scheduling() bool {
	metrics.Read(schedSamples)
	running, runnable := schedSamples[0].Value, schedSamples[1].Value
	if running.Kind() != metrics.KindUint64 || runnable.Kind() != metrics.KindUint64 {
		return false // not supported: snapshots decide alone
	}
	return running.Uint64() > 1 || runnable.Uint64() > 0
}

// errBubble is why a world refuses to run inside a testing/synctest
// bubble.
const errBubble = "a world cannot run inside a testing/synctest bubble: it finds its quiescent points by reading " +
	"every goroutine's state, and the goroutine that runs the bubble (in synctest.Run) is never one it can count as " +
	"blocked, so no quiescent point ever comes; its watchdog would run on the bubble's fake clock, which does not " +
	"move while the world polls, so nothing would end the wait but go test's timeout; and the journal pools channels " +
	"that a bubble would own. Run the world outside synctest.Test: it has its own fake clock (World.Advance)"

// inBubble reports whether the calling goroutine runs in a
// testing/synctest bubble, which the runtime writes in the header of
// its stack dump ("goroutine 7 [running, synctest bubble 1]:").
func inBubble() bool {
	buf := make([]byte, 512)
	head := buf[:runtime.Stack(buf, false)]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	return bytes.Contains(head, []byte("synctest bubble"))
}

// busyListMax bounds the goroutines, and busyBytesMax the bytes, that
// [busy] lists.
const (
	busyListMax  = 8
	busyBytesMax = 8 << 10
)

// busy lists, from one snapshot, the goroutines other than the caller
// that [quiet] does not count as blocked (each as the dump prints it),
// at most busyListMax of them, for the watchdog's message: they are what
// kept the world from its quiescent point.
func busy(buf *[]byte) string {
	var dump []byte
	for {
		n := runtime.Stack(*buf, true)
		if n < len(*buf) {
			dump = (*buf)[:n]
			break
		}
		*buf = make([]byte, 2*len(*buf))
	}
	var out []byte
	listed, more := 0, 0
	for i, g := range bytes.Split(dump, []byte("\n\n")) {
		header, frames := nextLine(g)
		if i == 0 || !bytes.HasPrefix(header, []byte("goroutine ")) || blocked(header, frames) {
			continue // the caller, or blocked
		}
		if listed == busyListMax || len(out)+len(g) > busyBytesMax {
			more++
			continue
		}
		out = append(append(out, g...), "\n\n"...)
		listed++
	}
	if more > 0 {
		out = fmt.Appendf(out, "(%d more)\n", more)
	}
	return string(bytes.TrimRight(out, "\n"))
}
