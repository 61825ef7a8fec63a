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
type execPool struct {
	work chan func() // unbuffered: a send succeeds only into a parked goroutine
	done <-chan struct{}
}

// run starts fn on a parked goroutine, or on a new one if none is parked.
// fn must not block on the runner's loop after it ended (executions select
// on loopDone).
func (p *execPool) run(fn func()) {
	select {
	case p.work <- fn:
	default:
		go p.serve(fn)
	}
}

// serve runs fn, then whatever it is handed next, until the loop ends. An
// fn that calls runtime.Goexit ends its goroutine; the pool starts another
// when it next finds none parked.
func (p *execPool) serve(fn func()) {
	// The frame of serve holds execStackKept bytes, so a parked goroutine
	// always uses over a quarter of its stack.
	var pad [execStackKept]byte
	keepStack(&pad)
	for {
		fn()
		select {
		case fn = <-p.work:
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
