package qctl

import (
	"container/heap"
	"sort"
)

// firstN keeps the n values with the smallest keys added to it, so that a
// listing with --limit holds n rows of a journal's history, not all of
// them. n = 0 keeps every value. Keys are seqs: unique, so the order is
// total.
type firstN[T any] struct {
	n     int
	key   func(T) uint64
	items []T // a max-heap on key while n > 0
}

func newFirstN[T any](n int, key func(T) uint64) *firstN[T] {
	return &firstN[T]{n: n, key: key}
}

func (f *firstN[T]) add(v T) {
	switch {
	case f.n == 0 || len(f.items) < f.n:
		heap.Push(f, v)
	case f.key(v) < f.key(f.items[0]):
		f.items[0] = v
		heap.Fix(f, 0)
	}
}

// sorted returns the values kept, smallest key first.
func (f *firstN[T]) sorted() []T {
	out := f.items
	sort.Slice(out, func(i, k int) bool { return f.key(out[i]) < f.key(out[k]) })
	return out
}

// heap.Interface, on items, largest key on top.
func (f *firstN[T]) Len() int           { return len(f.items) }
func (f *firstN[T]) Less(i, k int) bool { return f.key(f.items[i]) > f.key(f.items[k]) }
func (f *firstN[T]) Swap(i, k int)      { f.items[i], f.items[k] = f.items[k], f.items[i] }
func (f *firstN[T]) Push(x any)         { f.items = append(f.items, x.(T)) }
func (f *firstN[T]) Pop() any {
	v := f.items[len(f.items)-1]
	f.items = f.items[:len(f.items)-1]
	return v
}
