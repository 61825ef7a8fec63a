package sim

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/quire-dev/quire/api"
)

// Enqueue enqueues a job and returns its id. An acknowledged enqueue is
// recorded by the oracle: it must survive every later crash.
func (w *World) Enqueue(handler string, payload any, opts ...api.JobOption) string {
	var id string
	w.step(fmt.Sprintf("enqueue %s", handler), func() {
		var err error
		id, err = w.eng.Enqueue(w.ctx, handler, payload, opts...)
		if err != nil {
			w.fail("enqueue %s: %v", handler, err)
			return
		}
		w.orc.ackJob(id)
	})
	return id
}

// Dispatch starts a workflow and returns its id; the oracle records the
// acknowledged dispatch.
func (w *World) Dispatch(name string, state api.State, opts ...api.DispatchOption) string {
	var id string
	w.step(fmt.Sprintf("dispatch %s", name), func() {
		var err error
		id, err = w.eng.Dispatch(w.ctx, name, state, opts...)
		if err != nil {
			w.fail("dispatch %s: %v", name, err)
			return
		}
		w.orc.ackWorkflow(id)
	})
	return id
}

// Signal sends a signal to a workflow and returns the engine's answer
// ([api.Engine.Signal], WF-19): the signal is stored whatever the
// workflow's status, so one sent before its wait is reached satisfies it
// later; an unknown, completed or cancelled workflow refuses it. A refusal
// is not a failure of the world.
func (w *World) Signal(id, name string, payload api.State) error {
	var err error
	w.step(fmt.Sprintf("signal %s %s", id, name), func() {
		err = w.eng.Signal(w.ctx, id, name, payload)
	})
	return err
}

// Do runs f against the engine as one step, for API calls the world has no
// method for (cancel, pause, retry); what names the step in the trace.
func (w *World) Do(what string, f func(ctx context.Context, e *api.Engine) error) error {
	var err error
	w.step(what, func() { err = f(w.ctx, w.eng) })
	return err
}

// Job returns a job's status; a job the engine no longer knows fails the
// world.
func (w *World) Job(id string) api.Job {
	w.ensureOpen()
	if w.err != nil {
		return api.Job{}
	}
	j, err := w.eng.Status(w.ctx, id)
	if err != nil {
		w.fail("status %s: %v", id, err)
	}
	return j
}

// Workflow returns a workflow's status; a workflow the engine no longer
// knows fails the world.
func (w *World) Workflow(id string) api.WorkflowInfo {
	w.ensureOpen()
	if w.err != nil {
		return api.WorkflowInfo{}
	}
	info, err := w.eng.Workflow(w.ctx, id)
	if err != nil {
		w.fail("workflow %s: %v", id, err)
	}
	return info
}

// At schedules f to run as a step when the clock reaches T0+offset (or at
// once, at the next Advance or Run, if that instant has passed). Events at
// the same instant run in the order they were scheduled.
func (w *World) At(offset time.Duration, what string, f func(w *World)) {
	w.evSeq++
	heap.Push(&w.events, &event{at: T0.Add(offset), seq: w.evSeq, what: what, f: f})
}

// Run advances the clock through every scheduled event, in (instant,
// scheduling order) order, and returns when none is left.
func (w *World) Run() {
	for w.events.Len() > 0 && w.err == nil {
		w.AdvanceTo(w.events[0].at)
	}
}

// Advance moves the clock forward by d, stopping at every instant at which
// an engine timer or a scheduled event is due, so that each fires at its
// own instant; the engine is quiescent and checked at each stop.
func (w *World) Advance(d time.Duration) {
	if d < 0 {
		w.fail("advance by %v: negative", d)
		return
	}
	w.AdvanceTo(w.clk.Now().Add(d))
}

// AdvanceTo is [World.Advance] to an instant.
func (w *World) AdvanceTo(target time.Time) {
	if w.err != nil || w.done {
		return
	}
	w.ensureOpen()
	for stops := 0; w.err == nil; stops++ {
		now := w.clk.Now()
		next := target
		if stops < maxStops {
			if t, ok := w.clk.Next(); ok && t.Before(next) {
				next = t
			}
			if t, ok := w.act.next(now); ok && t.Before(next) {
				next = t
			}
		}
		if w.events.Len() > 0 && w.events[0].at.Before(next) {
			next = w.events[0].at
		}
		if next.After(now) {
			w.step(fmt.Sprintf("clock %s", next.Sub(T0)), func() { w.clk.Advance(next.Sub(now)) })
		}
		for w.err == nil && w.events.Len() > 0 && !w.events[0].at.After(w.clk.Now()) {
			ev := heap.Pop(&w.events).(*event)
			w.step("event "+ev.what, func() {})
			ev.f(w)
		}
		if !w.clk.Now().Before(target) {
			return
		}
		if next.Equal(now) && stops >= maxStops {
			return
		}
	}
}

// Jump moves the clock forward by d in one move, as a clock jump does:
// every timer due fires at the new instant (late, never early).
func (w *World) Jump(d time.Duration) {
	w.step(fmt.Sprintf("jump +%s", d), func() { w.clk.Advance(d) })
}

// JumpBack sets the clock back by d. Nothing fires; the journal keeps its
// instants monotone (RL-9).
func (w *World) JumpBack(d time.Duration) {
	w.step(fmt.Sprintf("jump -%s", d), func() { w.clk.Set(w.clk.Now().Add(-d)) })
}

// Crash kills the engine at the current (quiescent) point and reopens it
// on a crash image of the filesystem, with a share of unsynced data drawn
// from the seed: 0, 100 or 1..99 percent.
func (w *World) Crash() {
	pct := []int{0, 100, 1 + w.crashes.IntN(99)}[w.crashes.IntN(3)]
	w.CrashWith(pct)
}

// CrashWith is [World.Crash] with a chosen share of unsynced data kept.
func (w *World) CrashWith(pct int) {
	w.step(fmt.Sprintf("crash %d%%", pct), func() {
		w.crashN++
		img := w.crashImage(pct)
		w.kill()
		w.reopenOn(img)
		w.orc.crashed()
		w.open()
	})
}

// Finish ends the scenario: it runs the remaining events, checks the
// final state once more, shuts the engine down (moving the clock while the
// shutdown waits for parked work, see [World.Take]) and audits the journal
// it leaves. Work still parked then is ended as a process exit would end
// it. [WithT] worlds call Finish when the test ends.
func (w *World) Finish() error {
	if w.done {
		return w.err
	}
	if w.cfg.tb != nil {
		w.failedIn = !w.failedBefore && w.testFailed()
	}
	w.Run()
	w.step("finish", func() {})
	if w.err == nil && w.eng != nil {
		if w.shut == nil {
			w.step("shutdown begin", w.beginShutdown)
		}
		w.awaitShutdown()
	}
	w.act.kill(-1, w.clk.Now())
	if w.err == nil {
		if !w.orc.audit(w.fs, w.clk.Now()) {
			w.fail("final audit: %s", w.orc.first())
		}
	}
	w.done = true
	if tb := w.cfg.tb; tb != nil && w.err == nil {
		tb.Logf("sim: seed 0x%x: %d steps, trace hash %016x, digest %x", w.seed, len(w.steps), w.trace, w.lastDig[:8])
	}
	return w.err
}

type event struct {
	at   time.Time
	seq  uint64
	what string
	f    func(*World)
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
