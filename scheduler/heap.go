package scheduler

// The scheduler's heaps (ready jobs, delayed jobs, the runner's events)
// are slices of small structs ordered by their Less method. container/heap
// moves elements through interface values, which allocates on every Push
// and every Pop; these do the same sifts on the typed slice. The order is
// container/heap's, element for element.

type ordered[T any] interface {
	~[]T
	Less(i, j int) bool
}

// heapPush adds x to the heap h.
func heapPush[T any, H ordered[T]](h *H, x T) {
	*h = append(*h, x)
	heapUp(*h, len(*h)-1)
}

// heapPop removes and returns the least element of the non-empty heap h.
func heapPop[T any, H ordered[T]](h *H) T {
	s := *h
	n := len(s) - 1
	s[0], s[n] = s[n], s[0]
	heapDown(s[:n], 0)
	x := s[n]
	var zero T
	s[n] = zero // release what x references
	*h = s[:n]
	return x
}

func heapUp[T any, H ordered[T]](h H, j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.Less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func heapDown[T any, H ordered[T]](h H, i int) {
	n := len(h)
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if j2 := j + 1; j2 < n && h.Less(j2, j) {
			j = j2
		}
		if !h.Less(j, i) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// heapInit orders h as a heap.
func heapInit[T any, H ordered[T]](h H) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
}
