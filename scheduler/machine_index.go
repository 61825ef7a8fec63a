package scheduler

import (
	"maps"
	"slices"

	"github.com/quire-dev/quire/replay"
)

// entry is a heap entry for one pending job. Entries are invalidated
// lazily: an entry counts only while its gen equals the job's current gen.
type entry struct {
	id       string
	gen      uint64
	priority uint8
	seq      uint64 // enqueue seq; a Delay step's: its step_delayed
	at       int64  // available at
	step     int32  // a Delay step's index
}

// readyHeap orders jobs for start: higher priority first, then lower
// enqueue seq (JB-2).
type readyHeap []entry

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].seq < h[j].seq
}

// timerHeap orders delayed jobs by (available at, enqueue seq): overdue
// timers fire in (instant, seq) order (RL-9).
type timerHeap []entry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}

// index holds the machine's derived views of the pending jobs. It is
// rebuilt from replay.State at open and maintained as records apply.
//
// Its maps drop the keys left with no pending work (RL-11): a queue's
// heap, a handler's parked jobs, a workflow's held jobs. Neither their
// memory nor the work of a Dispatch grows with the names ever used. Keys
// are dropped lazily, by [index.readyQueues] and [index.sweep], which
// every Dispatch with a free slot calls (through [Machine.queues]): a
// drained heap at the next such Dispatch, parked and held keys once their
// map has doubled since its last sweep.
type index struct {
	gen map[string]uint64
	// ready holds a heap for each queue with entries. names holds their
	// queues in name order, but for those added since the last
	// readyQueues, which fresh holds in no order.
	ready        map[string]*readyHeap // by queue
	names, fresh []string
	// readyPeak is the most heaps ready has held since it was allocated.
	// A Go map keeps the capacity of its peak after deletes: ready is
	// reallocated once it holds under a quarter of its peak.
	readyPeak int
	delayed   timerHeap
	parked    map[string][]string // by handler: jobs whose handler is not registered
	held      map[string][]string // by workflow: jobs of workflows not running
	delays    timerHeap           // Delay steps of workflows
	// parkedSwept and heldSwept are the sizes of parked and held after
	// their last sweep.
	parkedSwept, heldSwept int
}

// shrinkMin is the size under which the index neither reallocates a map
// nor sweeps it: below it, the work saved is not worth a pass.
const shrinkMin = 64

func newIndex() *index {
	return &index{gen: make(map[string]uint64), ready: make(map[string]*readyHeap),
		parked: make(map[string][]string), held: make(map[string][]string)}
}

// touch invalidates every heap entry of job id.
func (x *index) touch(id string) uint64 {
	x.gen[id]++
	return x.gen[id]
}

func (x *index) forget(id string) { delete(x.gen, id) }

func (x *index) valid(e entry) bool { return x.gen[e.id] == e.gen }

func (x *index) pushReady(j *replay.Job, gen uint64) {
	h := x.ready[j.Queue]
	if h == nil {
		h = &readyHeap{}
		x.ready[j.Queue] = h
		x.fresh = append(x.fresh, j.Queue)
		x.readyPeak = max(x.readyPeak, len(x.ready))
	}
	heapPush(h, entry{id: j.ID, gen: gen, priority: j.Priority, seq: j.EnqueueSeq, at: j.AvailableAt})
}

func (x *index) pushDelayed(j *replay.Job, gen uint64) {
	heapPush(&x.delayed, entry{id: j.ID, gen: gen, priority: j.Priority, seq: j.EnqueueSeq, at: j.AvailableAt})
}

// readyQueues appends to dst, in name order, the queues whose heap holds
// an entry and that are not paused. It drops the heaps left empty, as
// Dispatch leaves the heaps it drains, after popping the stale entries at
// the top of those of paused queues, which Dispatch does not pop: the
// index then holds a heap only for a queue with ready work (RL-11). A
// paused queue's name then leaves the list it scans, its heap kept until
// wake puts the name back: when the queue resumes, or when a burial may
// have left it only stale entries. Its work follows the running queues
// with heaps and those new or woken since its last call, never the queues
// ever used nor the paused ones holding jobs.
func (x *index) readyQueues(dst []string, paused map[string]bool) []string {
	names := x.names
	if len(x.fresh) > 0 {
		slices.Sort(x.fresh)
		x.fresh = slices.Compact(x.fresh)
		names = mergeNames(make([]string, 0, len(names)+len(x.fresh)), names, x.fresh)
		clear(x.fresh)
		x.fresh = x.fresh[:0]
		if cap(x.fresh) > shrinkMin {
			x.fresh = nil
		}
	}
	kept := names[:0]
	for _, q := range names {
		h := x.ready[q]
		for paused[q] && h.Len() > 0 && !x.valid((*h)[0]) {
			heapPop(h) // Dispatch pops a running queue's, not a paused one's
		}
		if h.Len() == 0 {
			delete(x.ready, q)
			continue
		}
		if paused[q] {
			continue // until wake
		}
		kept = append(kept, q)
		dst = append(dst, q)
	}
	clear(names[len(kept):])
	if cap(kept) > shrinkMin && len(kept) < cap(kept)/4 {
		kept = slices.Clone(kept)
	}
	x.names = kept
	if x.readyPeak > shrinkMin && len(x.ready) < x.readyPeak/4 {
		ready := make(map[string]*readyHeap, len(x.ready))
		maps.Copy(ready, x.ready)
		x.ready, x.readyPeak = ready, len(ready)
	}
	return dst
}

// wake puts queue q back in the list readyQueues scans, once q resumes.
func (x *index) wake(q string) {
	if x.ready[q] != nil {
		x.fresh = append(x.fresh, q)
	}
}

// mergeNames appends to dst the union of the sorted lists a and b, in
// order.
func mergeNames(dst, a, b []string) []string {
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			dst, a = append(dst, a[0]), a[1:]
		case b[0] < a[0]:
			dst, b = append(dst, b[0]), b[1:]
		default:
			dst, a, b = append(dst, a[0]), a[1:], b[1:]
		}
	}
	dst = append(dst, a...)
	return append(dst, b...)
}

// sweep drops from parked and held the ids of jobs that are no longer
// pending, and the handlers and workflows left with none: a handler never
// registered whose jobs were buried, a workflow that left the state with
// its held jobs buried. Nothing else drops them; Unpark and release would
// only touch such jobs, whose heap entries are already stale. A map is
// swept once it holds over shrinkMin keys and has doubled since its last
// sweep: each key costs O(1) sweeping work over its life, and a map
// holds about twice the keys it kept at its last sweep, or shrinkMin, at
// most by the next Dispatch, never the keys of its whole history.
func (x *index) sweep(jobs map[string]*replay.Job) {
	if n := len(x.parked); n > shrinkMin && n > 2*x.parkedSwept {
		x.parked = sweepPending(x.parked, jobs)
		x.parkedSwept = len(x.parked)
	}
	if n := len(x.held); n > shrinkMin && n > 2*x.heldSwept {
		x.held = sweepPending(x.held, jobs)
		x.heldSwept = len(x.held)
	}
}

// sweepPending returns ids without the leading ids of jobs that are not
// pending in each list, and without the lists left empty, in a map of its
// own size. A list is trimmed only up to its first pending job, so that a
// sweep costs the keys and the ids it drops, not every pending job again;
// the next append past the list's capacity leaves the trimmed array.
func sweepPending(ids map[string][]string, jobs map[string]*replay.Job) map[string][]string {
	out := make(map[string][]string, len(ids))
	for k, l := range ids {
		i := 0
		for i < len(l) {
			if j, ok := jobs[l[i]]; ok && j.Status == replay.JobPending {
				break
			}
			i++
		}
		clear(l[:i]) // release the dropped ids
		if i < len(l) {
			out[k] = l[i:]
		}
	}
	return out
}
