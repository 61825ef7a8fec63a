package scheduler

import (
	"runtime"
	"sync"
)

// execPool runs attempts' executions on goroutines that are kept parked
// between attempts. A new goroutine starts on a small stack and grows it by
// copying on its way down the pipeline, whose frames (payload decoding by
// reflection among them) outgrow the initial size: in a profile of a
// 500-job burst of no-op handlers (BenchmarkBurstMem) that growth was about
// 9 % of all CPU. A parked goroutine has grown its stack already, and keeps
// it: see execStackKept.
//
// No more goroutines are parked than executions ever ran at once (at most
// Workers, plus abandoned ones that returned late), each holding a 32 KiB
// stack. They exit when the runner's loop ends; one still running user code
// exits when that returns.
//
// The pool hands each goroutine a value of T to run exec on, rather than a
// closure, so that handing over an execution allocates nothing.
//
// Executions are handed over as a relay: run hands a value to a goroutine
// only while fewer than GOMAXPROCS handed-over goroutines have yet to
// start, and queues it otherwise; each goroutine, as it starts, hands over
// the next queued value before it runs its own exec. The Go scheduler runs
// ready goroutines first in, first out, and an acknowledgement that
// launched a few hundred executions made that many ready together: the
// committer, Pebble's WAL writer and the loop, each made ready by the next
// step of a commit, then waited behind all of them, up to 3 ms on two
// cores (an execution trace of a 500-job burst at Workers 512), while the
// disk idled. Relayed, each of those goroutines waits behind about one
// execution per P, and the next commit's sync overlaps the executions. An
// exec that blocks holds up no other: it has handed over its successor
// before it runs. Handed over one at a time, executions cost a drain that
// never waits for the disk (api's BenchmarkBurstMem at Workers 64) 10-15 %
// of its pace on two cores; one per P, nothing measurable.
type execPool[T any] struct {
	work  chan T // unbuffered: a send succeeds only into a parked goroutine
	done  <-chan struct{}
	exec  func(T)
	spawn func(func()) // starts a goroutine; tests stub it

	mu      sync.Mutex
	queue   []T // values to hand over, from head on, in run order
	head    int // the first of queue not handed over
	handing int // handed-over goroutines that have not started yet
	relay   int // the most of those: GOMAXPROCS when the pool was made
}

func newExecPool[T any](done <-chan struct{}, exec func(T)) *execPool[T] {
	return &execPool[T]{
		work: make(chan T), done: done, exec: exec,
		spawn: func(f func()) { go f() },
		relay: max(runtime.GOMAXPROCS(0), 1),
	}
}

// run starts exec(v) on a parked goroutine, or on a new one if none is
// parked, once the executions run before it have started. exec must not
// block on the runner's loop after it ended.
func (p *execPool[T]) run(v T) {
	p.mu.Lock()
	if p.handing >= p.relay {
		p.queue = append(p.queue, v)
		p.mu.Unlock()
		return
	}
	p.handing++
	p.mu.Unlock()
	p.hand(v)
}

// hand gives v to a parked goroutine, or to a new one if none is parked.
func (p *execPool[T]) hand(v T) {
	select {
	case p.work <- v:
	default:
		p.spawn(func() { p.serve(v) })
	}
}

// started is called by a goroutine as it starts an execution: it hands
// over the next queued value, if any.
func (p *execPool[T]) started() {
	p.mu.Lock()
	if p.head == len(p.queue) {
		p.handing--
		p.queue = p.queue[:0]
		p.head = 0
		p.mu.Unlock()
		return
	}
	next := p.queue[p.head]
	var zero T
	p.queue[p.head] = zero // hold no attempt once it is handed over
	p.head++
	p.mu.Unlock()
	p.hand(next)
}

// serve runs exec(v), then exec of whatever it is handed next, until the
// loop ends. An exec that calls runtime.Goexit ends its goroutine; the
// pool starts another when it next finds none parked.
func (p *execPool[T]) serve(v T) {
	// The frame of serve holds execStackKept bytes, so a parked goroutine
	// always uses over a quarter of its stack.
	var pad [execStackKept]byte
	keepStack(&pad)
	for {
		p.started()
		p.exec(v)
		select {
		case v = <-p.work:
		case <-p.done:
			return
		}
	}
}

// execStackKept is the part of an execution goroutine's stack that serve's
// own frame takes. The garbage collector halves the stack of a goroutine
// that uses less than a quarter of it; serve's frame keeps a parked
// goroutine above that line, so its stack never shrinks below 32 KiB (the
// first growth, at the goroutine's start, goes straight there while the
// stack holds no other frame). Executions run on the 15 KiB above it.
const execStackKept = 17 << 10

// keepStack takes the address of serve's pad, which keeps the pad in
// serve's frame. It is not inlined, so the pad cannot be optimized away.
//
//go:noinline
func keepStack(*[execStackKept]byte) {}
