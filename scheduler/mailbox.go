package scheduler

import "sync"

// mailbox carries values from any goroutine to the loop without blocking
// the sender, even once the loop has ended. Note has a value to read
// whenever the box holds something the loop has not taken: a put into an
// empty box leaves one there.
//
// Attempts' executions report their results through a mailbox rather than
// a bounded channel. With a channel of 64 results, an execution whose
// result found the channel full waited on its goroutine for the loop; in a
// 500-job burst of no-op handlers at Workers 512 that kept 200-360
// execution goroutines alive at once, each a fresh 32 KiB stack to fault
// in and clear, and each a goroutine the loop's receive had to make
// runnable again. Posting never waits, so an execution goroutine is parked
// again as soon as its handler returns.
type mailbox[T any] struct {
	mu   sync.Mutex
	vals []T
	note chan struct{}
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{note: make(chan struct{}, 1)}
}

// put adds v to the box.
func (b *mailbox[T]) put(v T) {
	b.mu.Lock()
	b.vals = append(b.vals, v)
	first := len(b.vals) == 1
	b.mu.Unlock()
	if first {
		b.notify()
	}
}

// notify leaves a note for the loop, unless one is there already.
func (b *mailbox[T]) notify() {
	select {
	case b.note <- struct{}{}:
	default:
	}
}

// take moves up to max values (all of them if max <= 0) out of the box,
// oldest first, appending them to dst. If it leaves some, it leaves a note
// too, so the loop comes back for them after its other work.
func (b *mailbox[T]) take(dst []T, max int) []T {
	b.mu.Lock()
	n := len(b.vals)
	if max > 0 && n > max {
		n = max
	}
	dst = append(dst, b.vals[:n]...)
	rest := copy(b.vals, b.vals[n:])
	clear(b.vals[rest:])
	b.vals = b.vals[:rest]
	b.mu.Unlock()
	if rest > 0 {
		b.notify()
	}
	return dst
}
