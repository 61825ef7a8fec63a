package scheduler

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
type execPool[T any] struct {
	work chan T // unbuffered: a send succeeds only into a parked goroutine
	done <-chan struct{}
	exec func(T)
}

func newExecPool[T any](done <-chan struct{}, exec func(T)) *execPool[T] {
	return &execPool[T]{work: make(chan T), done: done, exec: exec}
}

// run starts exec(v) on a parked goroutine, or on a new one if none is
// parked. exec must not block on the runner's loop after it ended.
func (p *execPool[T]) run(v T) {
	select {
	case p.work <- v:
	default:
		go p.serve(v)
	}
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
