package property

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// The mixed scenario combines, on one engine and under seeded crashes,
// restarts, shutdowns, disk faults and clock jumps, the features the
// standard sim workload leaves apart: Parallel steps whose branches fail
// and retry (WF-4), SubWorkflow children (WF-8), WaitForWorkflows in All
// and Any modes (WF-7), signals sent before and after their wait (WF-6,
// WF-19), Delay steps (WF-5), deadlines crossed by clock jumps with an
// on-deadline handler (WD-7, WD-8, WD-10), Pause, Resume, Cancel and
// RetryWorkflow mid-flight (WF-15..WF-18), idempotent dispatch (WF-14),
// unique jobs (JB-5), follow-up jobs (Delivery.Enqueue), queue pause and
// resume (JB-8), Bury, Retry and RetryBuried (JB-6, JB-7), and handlers
// that take simulated time, so that crashes cut attempts open (DL-44).
// The sim oracle checks every step; the scenario then checks what an
// application relies on once faults stop.

type mixedMsg struct {
	N int
}

// mixedWorld is one world's scenario state: what the scenario was
// acknowledged, and what the handlers saw.
type mixedWorld struct {
	w *sim.World

	jobs    []string          // every job id an Enqueue returned
	unique  map[string]int    // job id -> unique payload, for the unique jobs
	wfs     []string          // every workflow id a Dispatch returned
	idem    map[string]string // idempotency key -> the id its first dispatch returned
	enqueue int

	mu    sync.Mutex
	calls map[string]int // handler calls per "job/attempt" (RL-10: one per acknowledged start)
	late  map[string]int // on-deadline handler calls per workflow, by its state's "i"
}

// mixedQueues are the queues of the scenario: step jobs and most jobs run
// on "default", follow-ups and some jobs on "side".
var mixedQueues = []string{api.QueueDefault, "side"}

// mixedWorkflows are the workflow names a dispatch draws from.
var mixedWorkflows = []string{"par", "parent", "waitall", "waitany", "quick", "sig"}

func (m *mixedWorld) called(d *api.Delivery) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[fmt.Sprintf("%s/%d", d.JobID(), d.Attempt())]++
}

// work is the body every handler and step shares: seeded retryable and
// permanent failures, a follow-up job on some successes and, for some
// attempts, simulated time taken after the side effect (the call is
// counted first), so that a crash can cut the attempt open.
func (m *mixedWorld) work(ctx context.Context, d *api.Delivery, permPct int) error {
	w := m.w
	m.called(d)
	id, n := d.JobID(), d.Attempt()
	if w.Fails(id+"/slow", n, 15) {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%d", w.Seed(), id, n)
		took := time.Duration(1+h.Sum64()%6000) * time.Millisecond
		mode := sim.Cooperate
		if w.Fails(id+"/ignore", n, 30) {
			mode = sim.Ignore
		}
		if err := w.Take(ctx, fmt.Sprintf("%s/%d", id, n), took, mode); err != nil {
			return api.Retryable("STOPPED", err)
		}
	}
	if w.Fails(id+"/perm", n, permPct) {
		return api.Permanent("BROKEN", errors.New("cannot do it"))
	}
	if w.Fails(id, n, 25) {
		return api.Retryable("FLAKY", errors.New("try again"))
	}
	if d.Handler() != "leaf" && w.Fails(id+"/follow", n, 30) {
		if err := d.Enqueue("leaf", mixedMsg{N: n}, api.OnQueue("side")); err != nil {
			return err
		}
	}
	return nil
}

// register installs the scenario's handlers and workflows on every
// instance of the world. The workflows with a deadline name the
// on-deadline handler "late" (WD-10).
func (m *mixedWorld) register() {
	w := m.w
	backoff := api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 2 * time.Second})
	w.Register(func(e *api.Engine) error {
		if err := api.Handle(e, "job", func(ctx context.Context, d *api.Delivery, in mixedMsg) error {
			return m.work(ctx, d, 8)
		}, api.MaxAttempts(3), api.DeliveryTimeout(5*time.Second), backoff); err != nil {
			return err
		}
		if err := api.Handle(e, "leaf", func(ctx context.Context, d *api.Delivery, in mixedMsg) error {
			return m.work(ctx, d, 3)
		}, api.MaxAttempts(2), backoff); err != nil {
			return err
		}
		if err := api.HandleDeadline(e, "late", func(ctx context.Context, s api.State) error {
			// WD-10: some runs take time, so that a crash can cut them
			// and the next instance runs them again.
			m.mu.Lock()
			key := fmt.Sprintf("late/%v/%d", s["i"], m.late[fmt.Sprint(s["i"])])
			m.late[fmt.Sprint(s["i"])]++
			m.mu.Unlock()
			if w.Fails(key, 0, 30) {
				return w.Take(ctx, key, 3*time.Second, sim.Cooperate)
			}
			return nil
		}); err != nil {
			return err
		}
		step := func(perm int) api.StepFunc {
			return func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
				if err := m.work(ctx, d, perm); err != nil {
					return nil, err
				}
				return api.State{"by_" + d.JobID(): d.Attempt()}, nil
			}
		}
		defs := []*api.Workflow{
			// WF-4: branches fail and retry; one buried fails the workflow,
			// and RetryWorkflow re-enters only the branches without success.
			api.NewWorkflow("par").MaxAttempts(3).
				Parallel("p", step(6), step(6), step(6)).
				Then("after", step(2)),
			// WF-8: the child's state merges into the parent.
			api.NewWorkflow("child").MaxAttempts(3).
				Then("c1", step(3)).
				Delay(2*time.Minute).
				Then("c2", step(3)),
			// WF-8, WF-6, WD-7/8/10: a child, then a signal, under a
			// deadline with an on-deadline handler.
			api.NewWorkflow("parent").MaxAttempts(3).
				Then("a", step(2)).
				SubWorkflow("sub", "child").
				WaitForSignal("go").
				Then("b", step(2)).
				MustCompleteWithin(90 * time.Minute).
				OnDeadline("late"),
			// WF-7: waits on workflows named in the dispatch state.
			api.NewWorkflow("waitall").MaxAttempts(3).
				WaitForWorkflowsIn(api.All(), "deps").Into("deps_result").
				Then("z", step(2)),
			api.NewWorkflow("waitany").MaxAttempts(3).
				WaitForWorkflowsIn(api.Any(), "deps").
				Then("z", step(2)),
			// WF-5, WD-12: a delay and a wait under a deadline that clock
			// jumps cross.
			api.NewWorkflow("quick").MaxAttempts(3).
				Delay(10*time.Minute).
				WaitForSignal("go").
				Then("q", step(2)).
				MustCompleteWithin(20 * time.Minute).
				OnDeadline("late"),
			// WF-6: two signals, in either order.
			api.NewWorkflow("sig").MaxAttempts(3).
				WaitForSignal("go", "ok").Into("got").
				Then("s", step(2)),
		}
		for _, def := range defs {
			if err := e.Register(def); err != nil {
				return err
			}
		}
		return nil
	})
}

// pick returns a random element of ids, or "" if there is none.
func pick(r interface{ IntN(int) int }, ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[r.IntN(len(ids))]
}

// allowed is what a control call the scenario draws at random may be
// refused with: the target's status does not allow it (WF-10, JB-3, JB-7).
// Anything else is a failure of the seed.
func (m *mixedWorld) allowed(what string, err error) {
	if err != nil && !errors.Is(err, api.ErrState) {
		m.w.T().Fatalf("%s: %v", what, err)
	}
}

// do runs one engine call as a step of the world and checks its refusal.
func (m *mixedWorld) do(what string, f func(ctx context.Context, e *api.Engine) error) {
	if err := m.w.Do(what, f); err != nil && !m.w.Failed() {
		m.allowed(what, err)
	}
}

// step draws one operation from the world's workload source.
func (m *mixedWorld) step() {
	w := m.w
	r := w.Rand()
	switch p := r.IntN(100); {
	case p < 14:
		var opts []api.JobOption
		if r.IntN(3) == 0 {
			opts = append(opts, api.Delay(time.Duration(1+r.IntN(120))*time.Second))
		}
		if r.IntN(3) == 0 {
			opts = append(opts, api.OnQueue("side"))
		}
		if r.IntN(3) == 0 {
			opts = append(opts, api.WithPriority(api.Priority(r.IntN(4))))
		}
		payload := mixedMsg{N: m.enqueue}
		unique := r.IntN(4) == 0
		if unique {
			payload.N = -1 - r.IntN(3) // a few payloads, so that some enqueues collide (JB-5)
			opts = append(opts, api.Unique())
		}
		m.enqueue++
		id := w.Enqueue("job", payload, opts...)
		if id != "" {
			m.jobs = append(m.jobs, id)
			if unique {
				m.unique[id] = payload.N
			}
		}
	case p < 30:
		name := mixedWorkflows[r.IntN(len(mixedWorkflows))]
		st := api.State{"i": len(m.wfs)}
		if name == "waitall" || name == "waitany" {
			if len(m.wfs) == 0 {
				return
			}
			deps := []string{}
			for k := 1 + r.IntN(3); k > 0; k-- {
				if d := pick(r, m.wfs); !slices.Contains(deps, d) {
					deps = append(deps, d)
				}
			}
			st["deps"] = deps
		}
		var opts []api.DispatchOption
		key := ""
		if r.IntN(5) == 0 {
			key = fmt.Sprintf("%s-%d", name, r.IntN(3)) // WF-14: a few keys, reused
			opts = append(opts, api.IdempotencyKey(key))
		}
		id := w.Dispatch(name, st, opts...)
		if id == "" {
			return
		}
		if key != "" {
			if first, ok := m.idem[key]; ok {
				if first != id {
					w.T().Fatalf("WF-14: key %s dispatched %s, then %s", key, first, id)
				}
				return
			}
			m.idem[key] = id
		}
		m.wfs = append(m.wfs, id)
	case p < 40:
		if id := pick(r, m.wfs); id != "" {
			name := []string{"go", "ok"}[r.IntN(2)]
			if err := w.Signal(id, name, api.State{"from": name}); err != nil && !w.Failed() {
				m.allowed("signal", err)
			}
		}
	case p < 48:
		id := pick(r, m.allWorkflows())
		if id == "" {
			return
		}
		switch r.IntN(4) {
		case 0:
			m.do("pause "+id, func(ctx context.Context, e *api.Engine) error { return e.PauseWorkflow(ctx, id) })
		case 1:
			m.do("resume "+id, func(ctx context.Context, e *api.Engine) error { return e.ResumeWorkflow(ctx, id) })
		case 2:
			m.do("retry "+id, func(ctx context.Context, e *api.Engine) error { return e.RetryWorkflow(ctx, id) })
		default:
			if r.IntN(3) == 0 {
				m.do("cancel "+id, func(ctx context.Context, e *api.Engine) error { return e.CancelWorkflow(ctx, id) })
			}
		}
	case p < 53:
		q := mixedQueues[r.IntN(len(mixedQueues))]
		switch r.IntN(4) {
		case 0:
			m.do("pause queue "+q, func(ctx context.Context, e *api.Engine) error { return e.PauseQueue(ctx, q) })
		case 1:
			m.do("resume queue "+q, func(ctx context.Context, e *api.Engine) error { return e.ResumeQueue(ctx, q) })
		default:
			m.do("retry buried "+q, func(ctx context.Context, e *api.Engine) error {
				_, err := e.RetryBuried(ctx, q)
				return err
			})
		}
	case p < 57:
		id := pick(r, m.allJobs())
		if id == "" {
			return
		}
		if r.IntN(2) == 0 {
			m.do("bury "+id, func(ctx context.Context, e *api.Engine) error { return e.Bury(ctx, id) })
		} else {
			m.do("retry job "+id, func(ctx context.Context, e *api.Engine) error { return e.Retry(ctx, id) })
		}
	case p < 67:
		w.Crash()
	case p < 70:
		// Not w.Restart, which fails on any shutdown but a success: a
		// handler that ignores its cancellation, parked when the clock
		// steps back, ends past the shutdown's budget (Incomplete, SD-30).
		w.Shutdown()
	case p < 73:
		switch r.IntN(3) {
		case 0:
			w.Shutdown()
		case 1:
			w.BeginShutdown()
			w.Advance(time.Duration(1+r.IntN(20000)) * time.Millisecond)
			if w.ShuttingDown() {
				w.ForceShutdown()
			}
		default:
			w.ForceShutdown()
		}
	case p < 75:
		w.DiskFault("job", mixedMsg{N: -100})
	case p < 80:
		if r.IntN(4) == 0 {
			w.JumpBack(time.Duration(1+r.IntN(600)) * time.Second)
		} else {
			w.Jump(time.Duration(1 + r.Int64N(int64(3*time.Hour))))
		}
	default:
		w.Advance(time.Duration(1+r.IntN(300)) * time.Second)
	}
}

// allWorkflows is every workflow the journal started, children included,
// in journal order.
func (m *mixedWorld) allWorkflows() []string {
	var ids []string
	for _, r := range m.w.Records() {
		if b, ok := r.Body.(*record.WorkflowStarted); ok {
			ids = append(ids, b.WorkflowID)
		}
	}
	return ids
}

// allJobs is every job the journal enqueued, step jobs and follow-ups
// included, in journal order.
func (m *mixedWorld) allJobs() []string {
	var ids []string
	for _, r := range m.w.Records() {
		if b, ok := r.Body.(*record.JobEnqueued); ok {
			ids = append(ids, b.JobID)
		}
	}
	return ids
}

// checkUnique: at most one pending or processing job per unique key
// (JB-5), across crashes and restarts. A buried job that was requeued is
// left out: if another job took its key meanwhile, the requeued one is
// live beside it, waiting in line for the key (JB-7, job_requeued's
// keep_key); replay's and api's TestJB5_JB7_* tests pin the line.
func (m *mixedWorld) checkUnique() {
	requeued := map[string]bool{}
	for _, r := range m.w.Records() {
		if b, ok := r.Body.(*record.JobRequeued); ok {
			requeued[b.JobID] = true
		}
	}
	live := map[int]string{}
	ids := make([]string, 0, len(m.unique))
	for id := range m.unique {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if requeued[id] {
			continue
		}
		j := m.w.Job(id)
		if j.Status != api.JobPending && j.Status != api.JobProcessing {
			continue
		}
		n := m.unique[id]
		if other, ok := live[n]; ok && other != id {
			m.w.T().Fatalf("JB-5: unique payload %d has two live jobs, %s and %s", n, other, id)
		}
		live[n] = id
	}
}

// settle stops the faults and lets every piece of work end: queues and
// paused workflows resume, every workflow gets its signals, and the clock
// moves past every delay, retry and deadline.
func (m *mixedWorld) settle() {
	w := m.w
	for _, q := range mixedQueues {
		m.do("resume queue "+q, func(ctx context.Context, e *api.Engine) error { return e.ResumeQueue(ctx, q) })
	}
	for round := 0; round < 3 && !w.Failed(); round++ {
		for _, id := range m.allWorkflows() {
			switch w.Workflow(id).Status {
			case api.WorkflowPaused:
				m.do("resume "+id, func(ctx context.Context, e *api.Engine) error { return e.ResumeWorkflow(ctx, id) })
			case api.WorkflowWaitingSignal, api.WorkflowRunning:
				for _, s := range []string{"go", "ok"} {
					if err := w.Signal(id, s, nil); err != nil && !w.Failed() {
						m.allowed("signal", err)
					}
				}
			}
		}
		w.Advance(3 * time.Hour)
	}
}

// checkEnd checks what an application relies on once faults stop.
func (m *mixedWorld) checkEnd() {
	w := m.w
	if w.Failed() {
		return
	}
	t := w.T()
	status := map[string]api.WorkflowStatus{}
	for _, id := range m.allWorkflows() {
		status[id] = w.Workflow(id).Status
	}
	// Every workflow is terminal, failed, or waits on workflows of which
	// one is failed (WF-7: a failed dependency may still be retried).
	for _, id := range m.allWorkflows() {
		info := w.Workflow(id)
		switch info.Status {
		case api.WorkflowCompleted, api.WorkflowFailed, api.WorkflowCancelled:
		case api.WorkflowWaitingWorkflows:
			undecided := false
			for _, dep := range info.WaitingFor {
				if s, ok := status[dep]; ok && s != api.WorkflowCompleted && s != api.WorkflowCancelled {
					undecided = true
				}
			}
			if !undecided {
				t.Fatalf("workflow %s (%s) still waits for %v, all decided: %v", id, info.Name, info.WaitingFor, status)
			}
		default:
			t.Fatalf("workflow %s (%s) still %s at step %d after the settle phase", id, info.Name, info.Status, info.Step)
		}
	}
	// Every job completed or buried, except the step jobs of a workflow
	// that is not running (WF-15, WF-20 leave no pending job there).
	for _, id := range m.allJobs() {
		j := w.Job(id)
		switch j.Status {
		case api.JobCompleted, api.JobBuried:
		default:
			t.Fatalf("job %s (%s, workflow %q: %s) still %s after the settle phase", id, j.Handler, j.WorkflowID, status[j.WorkflowID], j.Status)
		}
	}
	// RL-10: one handler call per acknowledged start, never two.
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, n := range m.calls {
		if n != 1 {
			t.Fatalf("RL-10: attempt %s ran %d times", k, n)
		}
	}
	// WD-10: every expiry that names a handler has it finished.
	pending := map[string]int{}
	for _, r := range w.Records() {
		switch b := r.Body.(type) {
		case *record.WorkflowDeadlineExceeded:
			if b.Handler != "" {
				pending[b.WorkflowID]++
			}
		case *record.DeadlineHandlerFinished:
			pending[b.WorkflowID]--
		}
	}
	for id, n := range pending {
		if n > 0 {
			t.Fatalf("WD-10: workflow %s has %d expiries without a finished on-deadline handler", id, n)
		}
	}
}

// mixedScenario runs steps seeded operations, checking JB-5 along the
// way, then settles and checks the end state.
func mixedScenario(steps int) func(w *sim.World) {
	return func(w *sim.World) {
		m := &mixedWorld{w: w, unique: map[string]int{}, idem: map[string]string{}, calls: map[string]int{}, late: map[string]int{}}
		m.register()
		for i := 0; i < steps && !w.Failed(); i++ {
			m.step()
			if i%10 == 9 {
				m.checkUnique()
			}
		}
		m.checkUnique()
		m.settle()
		m.checkEnd()
	}
}

// TestMixedCrash_Workload runs the mixed scenario under the oracle (RL-1,
// RL-3, RL-7, RL-9, RL-10; WF-4..WF-20; JB-5..JB-8; DL-44).
// QUIRE_SEEDS=N runs more seeds.
func TestMixedCrash_Workload(t *testing.T) {
	sim.Run(t, 20, mixedScenario(60), mixedOptions)
}

// TestMixedCrash_ManyWorkers is TestMixedCrash_Workload on an engine with
// three workers: attempts start together and overlap in simulated time
// (the world runs their code in turns, so a failing seed reruns exactly).
func TestMixedCrash_ManyWorkers(t *testing.T) {
	sim.Run(t, 6, mixedScenario(60), mixedOptions, sim.EngineOptions(func(o *api.Options) { o.Workers = 3 }))
}

// mixedOptions checks deadlines every 5 min rather than every minute
// (WD-6): the settle phase's hours then stop the clock a few dozen times,
// not hundreds.
var mixedOptions = sim.EngineOptions(func(o *api.Options) { o.DeadlineCheckInterval = 5 * time.Minute })

// TestMixedCrash_Determinism runs each seed of the mixed scenario three
// times, the last under GOMAXPROCS=1: equal traces and digests (RL-8).
// Its deadlined workflows name the on-deadline handler, which the engine
// runs on its own goroutine beside the attempts; the world runs it in a
// turn of its own (sim's doc, "Limits"), so its records keep their place.
func TestMixedCrash_Determinism(t *testing.T) {
	sim.Check(t, 4, mixedScenario(40), mixedOptions)
}
