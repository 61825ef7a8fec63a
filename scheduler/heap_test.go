package scheduler

import (
	"container/heap"
	"testing"

	"pgregory.net/rapid"
)

// tieHeap orders by at only, so equal keys tie and the order among them
// shows which sifts ran.
type tieHeap []event

func (h tieHeap) Len() int           { return len(h) }
func (h tieHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h tieHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *tieHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *tieHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// The typed heap pops exactly what container/heap pops, ties included,
// for any interleaving of pushes, pops and re-initializations: the
// machine's start order and the runner's event order did not change when
// the scheduler moved off container/heap.
func TestHeapMatchesContainerHeap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var ours, ref tieHeap
		token := uint64(0)
		for _, op := range rapid.SliceOfN(rapid.IntRange(0, 9), 1, 300).Draw(t, "ops") {
			switch {
			case op < 6: // push, with few distinct keys so that ties are common
				token++
				e := event{at: int64(rapid.IntRange(0, 5).Draw(t, "at")), token: token}
				heapPush(&ours, e)
				heap.Push(&ref, e)
			case op < 9 && len(ref) > 0:
				got, want := heapPop(&ours), heap.Pop(&ref).(event)
				if got != want {
					t.Fatalf("popped %+v, container/heap popped %+v", got, want)
				}
			case op == 9: // scramble both the same way, then re-heapify
				for i := range ours {
					j := rapid.IntRange(0, len(ours)-1).Draw(t, "j")
					ours[i], ours[j] = ours[j], ours[i]
					ref[i], ref[j] = ref[j], ref[i]
				}
				heapInit(ours)
				heap.Init(&ref)
			}
			if len(ours) != len(ref) {
				t.Fatalf("len %d, container/heap %d", len(ours), len(ref))
			}
			for i := range ours {
				if ours[i] != ref[i] {
					t.Fatalf("slot %d holds %+v, container/heap's holds %+v", i, ours[i], ref[i])
				}
			}
		}
	})
}
