package property

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// schedMachine drives the real engine (sim) with random enqueue, dispatch,
// signal, advance, jump, crash and restart actions against a simple model:
// the set of acknowledged jobs and workflows and the handler calls per job.
// The sim oracle checks the engine's journal after every action; the model
// checks what the application sees.
type schedMachine struct {
	w     *sim.World
	jobs  []string
	wfs   []string
	mu    sync.Mutex
	calls map[string]int // handler calls per job
}

func (m *schedMachine) Enqueue(t *rapid.T) {
	var opts []api.JobOption
	if rapid.Bool().Draw(t, "delayed") {
		opts = append(opts, api.Delay(time.Duration(rapid.IntRange(1, 60).Draw(t, "delay_s"))*time.Second))
	}
	m.jobs = append(m.jobs, m.w.Enqueue("work", len(m.jobs), opts...))
}

func (m *schedMachine) Dispatch(t *rapid.T) {
	m.wfs = append(m.wfs, m.w.Dispatch("flow", api.State{}))
}

func (m *schedMachine) Signal(t *rapid.T) {
	if len(m.wfs) == 0 {
		t.Skip("no workflow")
	}
	m.w.Signal(rapid.SampledFrom(m.wfs).Draw(t, "wf"), "go", nil)
}

func (m *schedMachine) Advance(t *rapid.T) {
	m.w.Advance(time.Duration(rapid.Int64Range(1, int64(20*time.Minute)).Draw(t, "d")))
}

func (m *schedMachine) Jump(t *rapid.T) {
	m.w.Jump(time.Duration(rapid.Int64Range(1, int64(400*24*time.Hour)).Draw(t, "jump")))
}

func (m *schedMachine) Crash(t *rapid.T) { m.w.Crash() }

func (m *schedMachine) Restart(t *rapid.T) { m.w.Restart() }

// Check: the oracle found nothing, and no job's handler ran more often
// than its attempts allow plus one per crash (an attempt a crash left open
// is redelivered, DL-44).
func (m *schedMachine) Check(t *rapid.T) {
	if err := m.w.Err(); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	crashes := 0
	for _, s := range m.w.Trace() {
		if len(s.What) > 5 && s.What[:5] == "crash" {
			crashes++
		}
	}
	for id, n := range m.calls {
		if n > 3+crashes {
			t.Fatalf("job %s: %d handler calls, at most %d allowed", id, n, 3+crashes)
		}
	}
}

// TestSchedulerModel runs random action sequences, then lets every piece
// of work settle and checks that each acknowledged job ends completed or
// buried and each workflow completed or failed. The pure Machine's own
// property is scheduler's TestRL7_MachineLiveEqualsReplay.
func TestSchedulerModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &schedMachine{calls: map[string]int{}}
		m.w = sim.New(rapid.Uint64().Draw(t, "seed"))
		m.w.Register(func(e *api.Engine) error {
			if err := api.Handle(e, "work", func(ctx context.Context, d *api.Delivery, in int) error {
				m.mu.Lock()
				m.calls[d.JobID()]++
				m.mu.Unlock()
				if m.w.Fails(d.JobID(), d.Attempt(), 40) {
					return api.Retryable("FLAKY", fmt.Errorf("attempt %d", d.Attempt()))
				}
				return nil
			}, api.MaxAttempts(3), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
				return err
			}
			ok := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) { return nil, nil }
			return e.Register(api.NewWorkflow("flow").Then("a", ok).WaitForSignal("go").MustCompleteWithin(time.Hour))
		})
		defer m.w.Finish()
		t.Repeat(rapid.StateMachineActions(m))
		for _, id := range m.wfs {
			m.w.Signal(id, "go", nil)
		}
		m.w.Advance(2 * time.Hour)
		for _, id := range m.jobs {
			if s := m.w.Job(id).Status; !m.w.Failed() && s != api.JobCompleted && s != api.JobBuried {
				t.Fatalf("job %s is %s after the settle phase", id, s)
			}
		}
		for _, id := range m.wfs {
			if s := m.w.Workflow(id).Status; !m.w.Failed() && s != api.WorkflowCompleted && s != api.WorkflowFailed {
				t.Fatalf("workflow %s is %s after the settle phase", id, s)
			}
		}
		if err := m.w.Finish(); err != nil {
			t.Fatal(err)
		}
	})
}
