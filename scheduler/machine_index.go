package scheduler

import (
	"github.com/quire-dev/quire/replay"
)

// entry is a heap entry for one pending job. Entries are invalidated
// lazily: an entry counts only while its gen equals the job's current gen.
type entry struct {
	id       string
	gen      uint64
	priority uint8
	seq      uint64 // enqueue seq
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
type index struct {
	gen     map[string]uint64
	ready   map[string]*readyHeap // by queue
	delayed timerHeap
	parked  map[string][]string // by handler: jobs whose handler is not registered
	held    map[string][]string // by workflow: jobs of workflows not running
	delays  timerHeap           // Delay steps of workflows
}

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
	}
	heapPush(h, entry{id: j.ID, gen: gen, priority: j.Priority, seq: j.EnqueueSeq, at: j.AvailableAt})
}

func (x *index) pushDelayed(j *replay.Job, gen uint64) {
	heapPush(&x.delayed, entry{id: j.ID, gen: gen, priority: j.Priority, seq: j.EnqueueSeq, at: j.AvailableAt})
}
