package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/replay"
)

// drain dispatches at now and settles every start, until a dispatch starts
// nothing, and returns the queues of the starts in order.
func (b *testBundle) drain(now time.Time) []string {
	b.t.Helper()
	var order []string
	for {
		starts := b.dispatch(now)
		if len(starts) == 0 {
			return order
		}
		for _, st := range starts {
			order = append(order, st.Job.Queue)
			b.settle(now, Result{Token: st.Token})
		}
	}
}

// TestRL11_DrainedQueuesLeaveTheIndex: once the one job of each of many
// queues has started and settled, the index holds no heap for them, and a
// dispatch ranges only over the queues with ready work: its work follows
// active work, never the queues ever used nor QueueOrder's length.
func TestRL11_DrainedQueuesLeaveTheIndex(t *testing.T) {
	t.Parallel()
	const n = 1000
	b := setup(t, nil, workers(8), func(c *Config) { c.QueueOrder = []string{"first"} })
	b.recover(t0)
	for i := range n {
		r := req("h")
		r.Queue = fmt.Sprintf("q%04d", i)
		b.enqueue(t0, r)
	}
	order := b.drain(t0)
	if len(order) != n || !slices.IsSorted(order) {
		t.Fatalf("started %d jobs, in queue order %v...; want %d, by queue name", len(order), order[:min(len(order), 5)], n)
	}
	if got := len(b.m.x.ready); got != 0 || len(b.m.x.names) != 0 {
		t.Fatalf("RL-11: the index holds %d heaps (%d names) after every queue drained", got, len(b.m.x.names))
	}
	if b.m.x.readyPeak > shrinkMin {
		t.Fatalf("RL-11: the ready map keeps the capacity of %d heaps", b.m.x.readyPeak)
	}
	if qs := b.m.queues(); len(qs) != 0 || cap(b.m.queueBuf) > shrinkMin {
		t.Fatalf("RL-11: a dispatch ranges over %v (buffer capacity %d)", qs, cap(b.m.queueBuf))
	}

	// One job at a time, each on a queue of its own: the index never holds
	// more than the heap of the queue at work.
	for i := range n {
		r := req("h")
		r.Queue = fmt.Sprintf("r%04d", i)
		b.enqueue(t0, r)
		if got := b.drain(t0); len(got) != 1 || got[0] != r.Queue {
			t.Fatalf("started on %v, want [%s]", got, r.Queue)
		}
		if got := len(b.m.x.ready); got != 0 {
			t.Fatalf("RL-11: the index holds %d heaps after queue %s drained", got, r.Queue)
		}
	}
	b.replayed()
}

// TestJB2_DrainedQueuesServedAgainInOrder: queues that were drained, and
// left the index, serve new jobs again in JB-2 order: QueueOrder first,
// then by name, priority ordering within a queue only.
func TestJB2_DrainedQueuesServedAgainInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, workers(1), func(c *Config) { c.QueueOrder = []string{"zeta", "missing"} })
	b.recover(t0)
	enqueue := func(qs ...string) {
		for _, q := range qs {
			r := req("h")
			r.Queue = q
			if q != "zeta" {
				r.Priority = 3 // priority orders within a queue, never across
			}
			b.enqueue(t0, r)
		}
	}
	want := []string{"zeta", "alpha", "beta", "beta"}
	for round := range 3 {
		enqueue("beta", "alpha", "zeta", "beta")
		if got := b.drain(t0); !slices.Equal(got, want) {
			t.Fatalf("round %d: queues served %v, want %v", round, got, want)
		}
		if got := len(b.m.x.ready); got != 0 {
			t.Fatalf("round %d: the index holds %d heaps after draining", round, got)
		}
	}
	b.replayed()
}

// TestRL11_StaleHeapOfPausedQueueLeaves: a paused queue whose only job was
// buried holds nothing to start; its heap leaves the index without waiting
// for the queue to resume, and the queue serves again once resumed.
func TestRL11_StaleHeapOfPausedQueueLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	b.take(b.m.PauseQueue("mail"))
	r := req("h")
	r.Queue = "mail"
	id := b.enqueue(t0, r)
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("paused queue started %v", ids(st))
	}
	if b.m.x.ready["mail"].Len() != 1 {
		t.Fatalf("the paused queue's job is not in its heap: %v", b.m.x.ready)
	}
	d, err := b.m.Bury(t0, id, "E_GONE", "gone")
	if err != nil {
		t.Fatal(err)
	}
	b.take(d)
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("started %v", ids(st))
	}
	if _, ok := b.m.x.ready["mail"]; ok {
		t.Fatal("RL-11: the heap of a paused queue with only a buried job stays in the index")
	}
	b.take(b.m.ResumeQueue("mail"))
	id2 := b.enqueue(t0, r)
	only(t, b.dispatch(t0), id2)
	b.replayed()
}

// flowBundle is a bundle with workflow "flow" of one Then step registered.
func flowBundle(t *testing.T, mods ...func(*Config)) *testBundle {
	def := &WorkflowDef{Name: "flow", Hash: "h1", Steps: []StepDef{defThen("a")}}
	mods = append(mods, func(c *Config) {
		c.WorkflowFunc = func(name string) *WorkflowDef {
			if name == "flow" {
				return def
			}
			return nil
		}
	})
	return setup(t, nil, mods...)
}

// pausedFlows starts n workflows and pauses them, their step job pending.
func (b *testBundle) pausedFlows(n int) []string {
	b.t.Helper()
	var wfs []string
	for range n {
		d, id, err := b.m.StartWorkflow(t0, DispatchRequest{Name: "flow"})
		if err != nil {
			b.t.Fatalf("StartWorkflow: %v", err)
		}
		b.take(d)
		if d, err = b.m.Pause(id); err != nil {
			b.t.Fatalf("Pause: %v", err)
		}
		b.take(d)
		wfs = append(wfs, id)
	}
	return wfs
}

// parkedJobs enqueues a job for each of n handlers never registered,
// named prefix and a number.
func (b *testBundle) parkedJobs(prefix string, n int) []string {
	b.t.Helper()
	var ids []string
	for i := range n {
		r := req(fmt.Sprintf("%s%04d", prefix, i))
		b.unregistered[r.Handler] = true
		ids = append(ids, b.enqueue(t0, r))
	}
	return ids
}

func (b *testBundle) cancel(id string) {
	b.t.Helper()
	d, err := b.m.Cancel(t0, id)
	if err != nil {
		b.t.Fatalf("Cancel(%s): %v", id, err)
	}
	b.take(d)
}

func (b *testBundle) bury(id string) {
	b.t.Helper()
	d, err := b.m.Bury(t0, id, "E_GONE", "gone")
	if err != nil {
		b.t.Fatalf("Bury(%s): %v", id, err)
	}
	b.take(d)
}

// TestRL11_HeldAndParkedLeaveWithTheirJobs: the held jobs of workflows
// cancelled while paused, and the parked jobs of handlers never
// registered, once buried, leave the index with their workflow's and
// handler's entries; a workflow still paused keeps its held job, which
// starts once it resumes, and a handler with a parked job keeps it.
func TestRL11_HeldAndParkedLeaveWithTheirJobs(t *testing.T) {
	t.Parallel()
	const n = 200
	b := flowBundle(t, workers(n+1))
	b.recover(t0)
	wfs := b.pausedFlows(n + 1)
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("held jobs started: %v", ids(st))
	}
	parked := b.parkedJobs("gone", n+1)
	if len(b.m.x.held) != n+1 || len(b.m.x.parked) != n+1 {
		t.Fatalf("%d workflows hold jobs, %d handlers park jobs; want %d each", len(b.m.x.held), len(b.m.x.parked), n+1)
	}
	// All but the last of each leave.
	for i := range n {
		b.cancel(wfs[i])
		b.bury(parked[i])
	}
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("started %v", ids(st))
	}
	last, lastHandler := wfs[n], fmt.Sprintf("gone%04d", n)
	if len(b.m.x.held) != 1 || len(b.m.x.held[last]) != 1 {
		t.Fatalf("RL-11: held = %d workflows after %d left, want only %s's", len(b.m.x.held), n, last)
	}
	if got := b.m.Parked(); !slices.Equal(got, []string{lastHandler}) || len(b.m.x.parked) != 1 {
		t.Fatalf("RL-11: Parked = %d handlers after %d had their jobs buried, want [%s]", len(got), n, lastHandler)
	}
	d, err := b.m.Resume(t0, last)
	if err != nil {
		t.Fatal(err)
	}
	b.take(d)
	st := b.dispatch(t0)
	if len(st) != 1 || st[0].Job.WorkflowID != last {
		t.Fatalf("the resumed workflow's held job did not start: %v", ids(st))
	}
	if len(b.m.x.held) != 0 {
		t.Fatalf("held = %v after the last workflow resumed", b.m.x.held)
	}
	delete(b.unregistered, lastHandler)
	b.m.Unpark(lastHandler)
	only(t, b.dispatch(t0), parked[n])
	if j := b.job(parked[n-1]); j.Status != replay.JobBuried {
		t.Fatalf("buried parked job is %s", j.Status)
	}
	b.replayed()
}

// TestRL11_HeldAndParkedBoundedUnderChurn: round after round of workflows
// held then cancelled, and of handlers never registered whose jobs are
// buried, the index keeps entries for at most a few rounds' worth of
// them, however many rounds pass.
func TestRL11_HeldAndParkedBoundedUnderChurn(t *testing.T) {
	t.Parallel()
	const n, rounds = 100, 10
	b := flowBundle(t, workers(n))
	b.recover(t0)
	for round := range rounds {
		wfs := b.pausedFlows(n)
		parked := b.parkedJobs(fmt.Sprintf("gone%02d_", round), n)
		b.dispatch(t0)
		for i := range n {
			b.cancel(wfs[i])
			b.bury(parked[i])
		}
		b.dispatch(t0)
		if h, p := len(b.m.x.held), len(b.m.x.parked); h > 3*n || p > 3*n {
			t.Fatalf("RL-11: round %d: %d workflows held and %d handlers parked, for %d of each live", round, h, p, n)
		}
	}
	b.replayed()
}

// RL-11, JB-8: paused queues holding jobs leave the list a dispatch scans,
// so that each dispatch costs the running queues with ready work, not
// every paused one (8 000 of them made draining another queue 170 times
// slower); their heaps stay, and a queue that resumes serves again.
func TestJB8_PausedQueuesWithJobsAreNotScanned(t *testing.T) {
	t.Parallel()
	const n = 100
	b := setup(t, nil, workers(1))
	b.recover(t0)
	var jobs []string
	for i := range n {
		q := fmt.Sprintf("p%03d", i)
		b.take(b.m.PauseQueue(q))
		r := req("h")
		r.Queue = q
		jobs = append(jobs, b.enqueue(t0, r))
	}
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("paused queues started %v", ids(st))
	}
	if len(b.m.x.names) != 0 || len(b.m.x.ready) != n {
		t.Fatalf("the index scans %d queues and holds %d heaps; want none scanned, %d heaps kept", len(b.m.x.names), len(b.m.x.ready), n)
	}
	b.take(b.m.ResumeQueue("p042"))
	only(t, b.dispatch(t0), jobs[42])
	if qs := b.m.queues(); len(qs) != 0 || len(b.m.x.names) != 0 { // the drained heap leaves at the next pass
		t.Fatalf("the index scans %v after the resumed queue drained", b.m.x.names)
	}
	b.replayed()
}
