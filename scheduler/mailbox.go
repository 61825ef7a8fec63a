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
	vals []T // values put, from head on not yet taken
	head int
	note chan struct{}
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{note: make(chan struct{}, 1)}
}

// put adds v to the box.
func (b *mailbox[T]) put(v T) {
	b.mu.Lock()
	b.vals = append(b.vals, v)
	first := len(b.vals)-b.head == 1
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
	end := len(b.vals)
	if max > 0 && end-b.head > max {
		end = b.head + max
	}
	dst = append(dst, b.vals[b.head:end]...)
	clear(b.vals[b.head:end]) // the box holds nothing it handed over
	b.head = end
	left := len(b.vals) - end
	if b.head > left {
		// Move what is left to the front, so that a box the loop never
		// quite empties does not grow without bound.
		n := copy(b.vals, b.vals[b.head:])
		clear(b.vals[b.head:]) // [n, head) is clear already: taken
		b.vals, b.head = b.vals[:n], 0
	}
	b.mu.Unlock()
	if left > 0 {
		b.notify()
	}
	return dst
}
