package sim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// The examples of this file show one entry point each on small scenarios
// built from the application code below: a handler that fails once, a
// workflow with a delay, a workflow that waits for a signal and a handler
// that takes simulated time. Instants are printed as offsets from T0.

// email is the payload of handler "send".
type email struct{ To string }

// registerSend installs handler "send", whose first attempt fails with a
// retryable error and whose later attempts succeed, retried after a fixed
// second.
func registerSend(w *sim.World) {
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "send", func(ctx context.Context, d *api.Delivery, in email) error {
			if d.Attempt() == 1 {
				return api.Retryable("SMTP_BUSY", errors.New("try again"))
			}
			return nil
		}, api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second}))
	})
}

// registerOnboard installs workflow "onboard": a welcome step, a delay of
// one day, then a follow-up step.
func registerOnboard(w *sim.World) {
	w.Register(func(e *api.Engine) error {
		step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			return api.State{"sent": d.Attempt()}, nil
		}
		return e.Register(api.NewWorkflow("onboard").
			Then("welcome", step).
			Delay(24*time.Hour).
			Then("followup", step))
	})
}

// registerReview installs workflow "review": it waits for signal
// "approved", then publishes.
func registerReview(w *sim.World) {
	w.Register(func(e *api.Engine) error {
		publish := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			return api.State{"published": true}, nil
		}
		return e.Register(api.NewWorkflow("review").
			WaitForSignal("approved").
			Then("publish", publish))
	})
}

// registerExport installs handler "export", whose attempts take took of
// simulated time in mode, under a delivery timeout of one minute, and
// return a retryable STOPPED error if their context ends first.
func registerExport(w *sim.World, took time.Duration, mode sim.Mode) {
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "export", func(ctx context.Context, d *api.Delivery, in email) error {
			if err := w.Take(ctx, fmt.Sprintf("%s/%d", d.JobID(), d.Attempt()), took, mode); err != nil {
				return api.Retryable("STOPPED", err)
			}
			return nil
		}, api.DeliveryTimeout(time.Minute), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second}))
	})
}

// since prints an instant as its offset from T0.
func since(t time.Time) time.Duration { return t.Sub(sim.T0) }

// steps lists what each step of a trace did, from step from on.
func steps(tr []sim.Step, from int) []string {
	var out []string
	for _, s := range tr[from:] {
		out = append(out, s.What)
	}
	return out
}

// finish ends an example's world and prints its failure, if any.
func finish(w *sim.World) {
	if err := w.Finish(); err != nil {
		fmt.Println(err)
	}
}

// ExampleNew builds a world: nothing runs until the first step, which
// opens the engine under the world's clock at T0.
func ExampleNew() {
	w := sim.New(7)
	registerSend(w)
	fmt.Printf("seed %d at T0+%v, %d steps\n", w.Seed(), since(w.Now()), len(w.Trace()))
	w.Enqueue("send", email{To: "ada@example.com"})
	fmt.Println(steps(w.Trace(), 0))
	finish(w)
	// Output:
	// seed 7 at T0+0s, 0 steps
	// [open enqueue send]
}

// ExampleWorld tests a handler that fails once: the first attempt runs
// during the enqueue step and fails, and the retry runs one second later,
// when Advance stops at its timer.
func ExampleWorld() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"})
	j := w.Job(id)
	fmt.Println(j.Status, j.Attempts, j.LastCode, since(j.AvailableAt))
	w.Advance(time.Minute)
	j = w.Job(id)
	fmt.Println(j.Status, j.Attempts)
	finish(w)
	// Output:
	// pending 1 SMTP_BUSY 1s
	// completed 2
}

// ExampleWorld_Enqueue enqueues a job whose handler fails once and lets
// it retry. An enqueue the engine refuses fails the world; see
// [sim.World.Do] for one the scenario expects.
func ExampleWorld_Enqueue() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"}, api.MaxAttempts(3))
	w.Advance(time.Second)
	j := w.Job(id)
	fmt.Println(j.Handler, j.Status, j.Attempts, j.MaxAttempts)
	finish(w)
	// Output:
	// send completed 2 3
}

// ExampleWorld_Dispatch starts a workflow with a one-day delay: the
// welcome step runs during the dispatch, the follow-up a day later.
func ExampleWorld_Dispatch() {
	w := sim.New(1)
	registerOnboard(w)
	id := w.Dispatch("onboard", api.State{"user": "ada"})
	info := w.Workflow(id)
	fmt.Println(info.Status, info.StepName, since(info.DelayUntil))
	w.Advance(24 * time.Hour)
	info = w.Workflow(id)
	fmt.Println(info.Status, info.Step, info.Steps)
	finish(w)
	// Output:
	// running delay_0 24h0m0s
	// completed 3 3
}

// ExampleWorld_Signal approves a review. The signal is stored whatever
// the workflow's status; a workflow the engine does not know refuses it,
// and the refusal is the engine's answer, not a failure of the world.
func ExampleWorld_Signal() {
	w := sim.New(1)
	registerReview(w)
	id := w.Dispatch("review", nil)
	fmt.Println(w.Workflow(id).Status)
	if err := w.Signal(id, "approved", nil); err != nil {
		fmt.Println(err)
	}
	fmt.Println(w.Workflow(id).Status, w.Workflow(id).State["published"])
	err := w.Signal("no-such-workflow", "approved", nil)
	fmt.Println(errors.Is(err, api.ErrNotFound), w.Failed())
	finish(w)
	// Output:
	// waiting_for_signal
	// completed true
	// true false
}

// ExampleWorld_Do makes API calls the world has no method for: a
// cancellation, and a retry the engine refuses (the job is not buried),
// whose error Do returns without failing the world.
func ExampleWorld_Do() {
	w := sim.New(1)
	registerReview(w)
	registerSend(w)
	wf := w.Dispatch("review", nil)
	err := w.Do("cancel review", func(ctx context.Context, e *api.Engine) error {
		return e.CancelWorkflow(ctx, wf)
	})
	fmt.Println(err, w.Workflow(wf).Status)
	job := w.Enqueue("send", email{To: "ada@example.com"})
	err = w.Do("retry send", func(ctx context.Context, e *api.Engine) error {
		return e.Retry(ctx, job)
	})
	fmt.Println(err != nil, w.Failed())
	finish(w)
	// Output:
	// <nil> cancelled
	// true false
}

// ExampleWorld_Job reads a job's status between steps.
func ExampleWorld_Job() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"}, api.Delay(time.Hour))
	j := w.Job(id)
	fmt.Println(j.Status, j.Attempts, since(j.AvailableAt))
	w.Advance(time.Hour)
	j = w.Job(id)
	fmt.Println(j.Status, j.Attempts, j.LastCode, since(j.AvailableAt))
	w.Advance(time.Second)
	fmt.Println(w.Job(id).Status)
	finish(w)
	// Output:
	// pending 0 1h0m0s
	// pending 1 SMTP_BUSY 1h0m1s
	// completed
}

// ExampleWorld_Workflow reads a workflow's status between steps.
func ExampleWorld_Workflow() {
	w := sim.New(1)
	registerOnboard(w)
	id := w.Dispatch("onboard", api.State{"user": "ada"})
	info := w.Workflow(id)
	fmt.Println(info.Name, info.Status, info.Step, info.Steps, info.State["user"], info.State["sent"])
	w.Advance(25 * time.Hour)
	info = w.Workflow(id)
	fmt.Println(info.Status, info.Step, info.Steps)
	finish(w)
	// Output:
	// onboard running 1 3 ada 1
	// completed 3 3
}

// ExampleWorld_At schedules the scenario's own events: a crash at 10 min
// and an approval at 1 h. Advance runs them at their instants, in order.
func ExampleWorld_At() {
	w := sim.New(1)
	registerReview(w)
	id := w.Dispatch("review", nil)
	w.At(time.Hour, "approve", func(w *sim.World) { w.Signal(id, "approved", nil) })
	w.At(10*time.Minute, "crash", func(w *sim.World) { w.CrashWith(0) })
	w.Advance(2 * time.Hour)
	for _, s := range w.Trace() {
		if !strings.HasPrefix(s.What, "clock") { // the clock's stops, every minute, are left out
			fmt.Println(s.N, s.What)
		}
	}
	fmt.Println(w.Workflow(id).Status)
	finish(w)
	// Output:
	// 0 open
	// 1 dispatch review
	// 12 event crash
	// 13 open
	// 14 crash 0%
	// 65 event approve
	// 66 signal wf_01KE6SJT80P5NHQF7ZYWY1XF2J approved
	// completed
}

// ExampleWorld_Run runs every scheduled event, however far apart, and
// stops after the last one.
func ExampleWorld_Run() {
	w := sim.New(1)
	registerSend(w)
	var ids []string
	for _, at := range []time.Duration{3 * time.Hour, time.Minute, 3 * time.Hour} {
		w.At(at, "enqueue", func(w *sim.World) { ids = append(ids, w.Enqueue("send", email{To: "ada@example.com"})) })
	}
	w.Run()
	fmt.Println(len(ids), since(w.Now()))
	finish(w)
	// Output:
	// 3 3h0m0s
}

// ExampleWorld_Advance moves the clock by 10 s. It stops at every
// instant an engine timer is due: here the retry of the failed attempt at
// T0+1s, so the retry runs at its own instant.
func ExampleWorld_Advance() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"})
	n := len(w.Trace())
	w.Advance(10 * time.Second)
	fmt.Println(steps(w.Trace(), n), since(w.Now()))
	finish(w)
	// Output:
	// [clock 1s clock 10s] 10s
}

// ExampleWorld_AdvanceTo moves the clock to an instant; an instant
// already passed does nothing.
func ExampleWorld_AdvanceTo() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"}, api.Delay(30*time.Minute))
	w.AdvanceTo(sim.T0.Add(time.Hour))
	fmt.Println(w.Job(id).Status, since(w.Now()))
	w.AdvanceTo(sim.T0)
	fmt.Println(since(w.Now()))
	finish(w)
	// Output:
	// completed 1h0m0s
	// 1h0m0s
}

// ExampleWorld_Jump jumps the clock by 3 h in one move, past a job due
// at 1 h: it starts at the new instant, late but never early.
func ExampleWorld_Jump() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"}, api.Delay(time.Hour))
	n := len(w.Trace())
	w.Jump(3 * time.Hour)
	fmt.Println(steps(w.Trace(), n))
	for _, r := range w.Records() {
		if r.Kind() == record.KindAttemptStarted && r.Stream == id {
			fmt.Println("attempt started at", time.Unix(0, r.At).Sub(sim.T0))
		}
	}
	finish(w)
	// Output:
	// [jump +3h0m0s]
	// attempt started at 3h0m0s
}

// ExampleWorld_JumpBack sets the clock back by 10 min, as an NTP step
// might: the journal keeps its instants monotone, so a record appended
// after the jump is stamped no earlier than the last one (RL-9).
func ExampleWorld_JumpBack() {
	w := sim.New(1)
	registerSend(w)
	w.Advance(time.Hour)
	w.Enqueue("send", email{To: "ada@example.com"})
	w.JumpBack(10 * time.Minute)
	fmt.Println("clock at", since(w.Now()))
	w.Enqueue("send", email{To: "bob@example.com"})
	recs := w.Records()
	last := recs[len(recs)-1]
	fmt.Println(last.Kind(), "stamped", time.Unix(0, last.At).Sub(sim.T0))
	finish(w)
	// Output:
	// clock at 50m0s
	// attempt_retry_scheduled stamped 1h0m0s
}

// ExampleWorld_Crash crashes the engine while an export attempt is
// parked in Take: the attempt dies unsettled with its instance, and the
// reopened engine runs it again.
func ExampleWorld_Crash() {
	w := sim.New(1)
	registerExport(w, 10*time.Second, sim.Cooperate)
	id := w.Enqueue("export", email{To: "ada@example.com"})
	w.Advance(5 * time.Second)
	w.Crash()
	w.Advance(time.Minute)
	j := w.Job(id)
	fmt.Println(j.Status, j.Attempts)
	for _, wk := range w.Works() {
		fmt.Println(wk.Key[len(id):], since(wk.Start), since(wk.End), wk.Killed)
	}
	finish(w)
	// Output:
	// completed 2
	// /1 0s 5s true
	// /2 5s 15s false
}

// ExampleWorld_CrashWith crashes with 0 % and with 100 % of the unsynced
// data kept: at a quiescent point the journal has synced everything it
// acknowledged, so both reopen on the same records.
func ExampleWorld_CrashWith() {
	for _, pct := range []int{0, 100} {
		w := sim.New(1)
		registerSend(w)
		w.Enqueue("send", email{To: "ada@example.com"})
		w.CrashWith(pct)
		w.Advance(time.Second)
		fmt.Printf("%d%%: %d records, last %s\n", pct, len(w.Records()), w.Records()[len(w.Records())-1].Kind())
		finish(w)
	}
	// Output:
	// 0%: 7 records, last attempt_succeeded
	// 100%: 7 records, last attempt_succeeded
}

// ExampleWorld_Restart shuts the engine down gracefully and opens a new
// instance: the delayed job survives and runs on the new one.
func ExampleWorld_Restart() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"}, api.Delay(time.Minute))
	before := w.Engine()
	w.Restart()
	fmt.Println(w.LastShutdown().Report.Completion, w.Engine() != before)
	w.Advance(time.Hour)
	fmt.Println(w.Job(id).Status)
	finish(w)
	// Output:
	// graceful_completed true
	// completed
}

// ExampleWorld_Shutdown shuts down while an export takes 20 s: the
// shutdown waits for it (the world moves the clock meanwhile), and the
// attempt completes within the shutdown's budget.
func ExampleWorld_Shutdown() {
	w := sim.New(1)
	registerExport(w, 20*time.Second, sim.Cooperate)
	id := w.Enqueue("export", email{To: "ada@example.com"})
	err := w.Shutdown()
	r := w.LastShutdown().Report
	fmt.Println(err, r.Completion, r.Drained, r.Elapsed, since(w.Now()))
	fmt.Println(w.Job(id).Status) // the next step reopens the engine
	finish(w)
	// Output:
	// <nil> graceful_completed 1 20s 20s
	// completed
}

// ExampleWorld_BeginShutdown starts a shutdown and keeps stepping while
// it runs: admission is closed, so an enqueue is refused (expected, so
// through Do), and the shutdown ends once the running export does.
func ExampleWorld_BeginShutdown() {
	w := sim.New(1)
	registerExport(w, 20*time.Second, sim.Cooperate)
	w.Enqueue("export", email{To: "ada@example.com"})
	w.BeginShutdown()
	err := w.Do("enqueue while stopping", func(ctx context.Context, e *api.Engine) error {
		_, err := e.Enqueue(ctx, "export", email{To: "bob@example.com"})
		return err
	})
	fmt.Println(errors.Is(err, api.ErrShuttingDown), w.ShuttingDown())
	w.Advance(30 * time.Second)
	fmt.Println(w.ShuttingDown(), w.LastShutdown().Report.Completion)
	finish(w)
	// Output:
	// true true
	// false graceful_completed
}

// ExampleWorld_ShuttingDown reports whether a shutdown runs between
// steps.
func ExampleWorld_ShuttingDown() {
	w := sim.New(1)
	registerExport(w, 20*time.Second, sim.Cooperate)
	w.Enqueue("export", email{To: "ada@example.com"})
	fmt.Println(w.ShuttingDown())
	w.BeginShutdown()
	fmt.Println(w.ShuttingDown())
	w.Advance(20 * time.Second)
	fmt.Println(w.ShuttingDown())
	finish(w)
	// Output:
	// false
	// true
	// false
}

// ExampleWorld_Force forces a shutdown that waits for an export which
// ignores its context: the running attempt is cut off and the report
// says the shutdown was forced.
func ExampleWorld_Force() {
	w := sim.New(1)
	registerExport(w, time.Hour, sim.Ignore)
	w.Enqueue("export", email{To: "ada@example.com"})
	w.BeginShutdown()
	w.Advance(5 * time.Second)
	w.Force()
	w.Advance(time.Minute)
	r := w.LastShutdown()
	fmt.Println(w.ShuttingDown(), r.Report.Forced, r.Report.Completion, r.Err)
	finish(w)
	// Output:
	// false true incomplete shutdown: incomplete: 2 goroutines not returned, drain cancelled_by_force/timed_out, close cancelled_by_force/timed_out
}

// ExampleWorld_ForceShutdown forces a shutdown at once. The export never
// returns, so the shutdown ends Incomplete: an outcome it returns, not a
// failure of the world.
func ExampleWorld_ForceShutdown() {
	w := sim.New(1)
	registerExport(w, time.Hour, sim.Ignore)
	w.Enqueue("export", email{To: "ada@example.com"})
	err := w.ForceShutdown()
	r := w.LastShutdown().Report
	fmt.Println(err, r.Forced, r.Completion, w.Failed())
	finish(w)
	// Output:
	// shutdown: incomplete: 2 goroutines not returned, drain cancelled_by_force/timed_out, close cancelled_by_force/timed_out true incomplete false
}

// ExampleWorld_LastShutdown reads the result of the last finished
// shutdown: none before the first, then each one's error and report.
func ExampleWorld_LastShutdown() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"})
	fmt.Println(w.LastShutdown() == nil)
	w.Advance(time.Hour)
	w.Restart()
	r := w.LastShutdown()
	fmt.Println(r.Err, r.Report.Completion, r.Report.Trigger, since(r.Report.InitiatedAt))
	finish(w)
	// Output:
	// true
	// <nil> graceful_completed api 1h0m0s
}

// ExampleWorld_DiskFault fails the WAL commit of one enqueue: the
// engine fail-stops, that enqueue is never acknowledged, and the world
// reopens on a crash image; the job acknowledged before is still there.
func ExampleWorld_DiskFault() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"}, api.Delay(time.Minute))
	n := len(w.Trace())
	w.DiskFault("send", email{To: "bob@example.com"})
	fmt.Println(steps(w.Trace(), n))
	w.Advance(time.Hour)
	enqueued := 0
	for _, r := range w.Records() {
		if r.Kind() == record.KindJobEnqueued {
			enqueued++
		}
	}
	fmt.Println(w.Job(id).Status, enqueued, w.Failed())
	finish(w)
	// Output:
	// [open disk fault on enqueue send]
	// completed 1 false
}

// ExampleWorld_Fails makes a handler flaky reproducibly: whether an
// attempt fails depends only on the seed, the key and the attempt.
func ExampleWorld_Fails() {
	for _, seed := range []uint64{1, 2} {
		w := sim.New(seed)
		fmt.Print("seed ", seed, ":")
		for attempt := 1; attempt <= 6; attempt++ {
			fmt.Print(" ", w.Fails("charge", attempt, 50))
		}
		fmt.Println()
		finish(w)
	}
	// Output:
	// seed 1: false true false false true true
	// seed 2: false true false false true false
}

// ExampleWorld_Rand draws a scenario from the seed: the same seed draws
// the same workload.
func ExampleWorld_Rand() {
	for range 2 {
		w := sim.New(1)
		var delays []time.Duration
		for range 4 {
			delays = append(delays, time.Duration(w.Rand().IntN(60))*time.Minute)
		}
		fmt.Println(delays)
		finish(w)
	}
	// Output:
	// [59m0s 6m0s 51m0s 54m0s]
	// [59m0s 6m0s 51m0s 54m0s]
}

// ExampleWorld_Seed prints the seed a world was built with, which
// reproduces it.
func ExampleWorld_Seed() {
	w := sim.New(0x2a)
	fmt.Printf("0x%x\n", w.Seed())
	finish(w)
	// Output:
	// 0x2a
}

// ExampleWorld_Now reads the simulated time, from the scenario and from
// a handler, which records when it ran.
func ExampleWorld_Now() {
	w := sim.New(1)
	var ran []time.Duration
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "tick", func(ctx context.Context, d *api.Delivery, in email) error {
			ran = append(ran, since(w.Now()))
			return nil
		})
	})
	w.Enqueue("tick", email{}, api.Delay(90*time.Second))
	w.Advance(time.Hour)
	fmt.Println(since(w.Now()), ran)
	finish(w)
	// Output:
	// 1h0m0s [1m30s]
}

// ExampleWorld_Clock reads the world's manual clock: the instant of the
// engine's next timer, its periodic workflow deadline check (every 60 s
// by default), which is due before the job delayed by an hour. Move the
// clock only through the world's steps.
func ExampleWorld_Clock() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"}, api.Delay(time.Hour))
	next, ok := w.Clock().Next()
	fmt.Println(since(w.Clock().Now()), since(next), ok)
	finish(w)
	// Output:
	// 0s 1m0s true
}

// ExampleWorld_Engine reaches the current engine instance, which changes
// at every crash and restart, and is nil after Finish.
func ExampleWorld_Engine() {
	w := sim.New(1)
	first := w.Engine()
	fmt.Println(first.Lifecycle(), first.Ready())
	w.CrashWith(0)
	fmt.Println(w.Engine() == first)
	finish(w)
	// Output:
	// ready true
	// false
}

// ExampleWorld_Err classifies a world's failure: an enqueue of a handler
// that is not registered fails the world with the engine's error, and
// every step after it does nothing.
func ExampleWorld_Err() {
	w := sim.New(1)
	w.Enqueue("nosuch", email{})
	err := w.Err()
	fmt.Println(errors.Is(err, api.ErrUnknownHandler), errors.Is(err, sim.ErrMisuse))
	w.Advance(-time.Second) // refused: the world has failed already
	fmt.Println(w.Err() == err)
	fmt.Println(w.Finish() == err)
	// Output:
	// true false
	// true
	// true
}

// ExampleWorld_Failed stops a scenario at the world's first failure, here
// a negative advance (ErrMisuse).
func ExampleWorld_Failed() {
	w := sim.New(1)
	fmt.Println(w.Failed())
	w.Advance(-time.Minute)
	fmt.Println(w.Failed(), errors.Is(w.Err(), sim.ErrMisuse))
	w.Finish()
	// Output:
	// false
	// true true
}

// ExampleWorld_Finish ends a scenario: it shuts the engine down and
// audits the journal. Finish may be called again; any other step after it
// fails the world.
func ExampleWorld_Finish() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"})
	w.Advance(time.Second)
	fmt.Println(w.Finish(), w.Finish())
	n := len(w.Trace())
	fmt.Println(steps(w.Trace(), n-2), w.LastShutdown().Report.Completion)
	w.Advance(time.Second)
	fmt.Println(errors.Is(w.Err(), sim.ErrMisuse))
	// Output:
	// <nil> <nil>
	// [finish shutdown begin] graceful_completed
	// true
}

// ExampleWorld_Records reads the acknowledged journal: the records of a
// job whose handler fails once.
func ExampleWorld_Records() {
	w := sim.New(1)
	registerSend(w)
	id := w.Enqueue("send", email{To: "ada@example.com"})
	w.Advance(time.Second)
	for _, r := range w.Records() {
		if r.Stream == id {
			fmt.Println(r.Seq, time.Unix(0, r.At).Sub(sim.T0), r.Kind())
		}
	}
	finish(w)
	// Output:
	// 2 0s job_enqueued
	// 3 0s attempt_started
	// 4 0s attempt_retry_scheduled
	// 5 1s attempt_started
	// 6 1s attempt_succeeded
}

// ExampleWorld_Register registers the application's handlers on every
// engine instance: before the first step, and on an open engine at once.
// A crash's new instance gets both again.
func ExampleWorld_Register() {
	w := sim.New(1)
	registerSend(w) // before the engine opens
	w.Enqueue("send", email{To: "ada@example.com"})
	registerOnboard(w) // on the open engine, now
	id := w.Dispatch("onboard", nil)
	w.CrashWith(0)
	w.Advance(25 * time.Hour)
	fmt.Println(w.Workflow(id).Status)
	finish(w)
	// Output:
	// completed
}

// ExampleWorld_T is nil for a world built without WithT, which reports
// through Err instead; under Run and Check it is the seed's subtest.
func ExampleWorld_T() {
	w := sim.New(1)
	fmt.Println(w.T() == nil)
	finish(w)
	// Output:
	// true
}

// ExampleWorld_Trace lists the steps of a scenario: an enqueue, a crash
// and each instant an advance stopped at.
func ExampleWorld_Trace() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"})
	w.CrashWith(0)
	w.Advance(time.Minute)
	for _, s := range w.Trace() {
		fmt.Println(s.N, s.What)
	}
	finish(w)
	// Output:
	// 0 open
	// 1 enqueue send
	// 2 open
	// 3 crash 0%
	// 4 clock 1s
	// 5 clock 1m0s
}

// ExampleWorld_TraceHash compares runs: the same seed and scenario give
// the same trace hash; another seed draws other ids.
func ExampleWorld_TraceHash() {
	run := func(seed uint64) uint64 {
		w := sim.New(seed)
		registerSend(w)
		w.Enqueue("send", email{To: "ada@example.com"})
		w.Advance(time.Minute)
		finish(w)
		return w.TraceHash()
	}
	fmt.Println(run(1) == run(1), run(1) == run(2))
	// Output:
	// true false
}

// ExampleWorld_Digest reads the live state digest after a step: it
// changes as the job goes from pending to completed, and the same seed
// and scenario end in the same digest.
func ExampleWorld_Digest() {
	run := func() (pending, done [32]byte) {
		w := sim.New(1)
		registerSend(w)
		w.Enqueue("send", email{To: "ada@example.com"})
		pending = w.Digest()
		w.Advance(time.Second)
		done = w.Digest()
		finish(w)
		return pending, done
	}
	pending, done := run()
	_, again := run()
	fmt.Println(pending == done, done == again)
	// Output:
	// false true
}

// ExampleWorld_Violations lists the oracle's findings; a correct engine
// has none.
func ExampleWorld_Violations() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"})
	w.CrashWith(100)
	w.Advance(time.Minute)
	finish(w)
	fmt.Println(len(w.Violations()), w.Err())
	// Output:
	// 0 <nil>
}

// ExampleWorld_Works reads the works that took simulated time: each of
// the three attempts of a 90 s export cooperates with its context, which
// the engine cancels at the attempt's notification instant, 59 s into its
// one-minute delivery timeout.
func ExampleWorld_Works() {
	w := sim.New(1)
	registerExport(w, 90*time.Second, sim.Cooperate)
	id := w.Enqueue("export", email{To: "ada@example.com"})
	w.Advance(5 * time.Minute)
	for _, wk := range w.Works() {
		fmt.Println(wk.Key[len(id):], since(wk.Start), since(wk.End), wk.Mode, wk.Cancelled)
	}
	finish(w)
	// Output:
	// /1 0s 59s cooperate true
	// /2 1m0s 1m59s cooperate true
	// /3 2m0s 2m59s cooperate true
}

// ExampleMode compares the two modes under a one-minute delivery
// timeout: Cooperate returns when the engine cancels the attempt's
// context, Ignore runs its two minutes to the end.
func ExampleMode() {
	for _, mode := range []sim.Mode{sim.Cooperate, sim.Ignore} {
		w := sim.New(1)
		registerExport(w, 2*time.Minute, mode)
		id := w.Enqueue("export", email{To: "ada@example.com"}, api.MaxAttempts(1))
		w.Advance(5 * time.Minute)
		wk := w.Works()[0]
		fmt.Println(mode, since(wk.End), wk.Cancelled, w.Job(id).Status, w.Job(id).LastCode)
		finish(w)
	}
	// Output:
	// cooperate 59s true buried STOPPED
	// ignore 2m0s false buried DELIVERY_TIMEOUT
}

// ExampleMode_String prints the modes.
func ExampleMode_String() {
	fmt.Println(sim.Cooperate, sim.Ignore)
	// Output:
	// cooperate ignore
}

// ExampleShutdownResult reads how the last shutdown ended: its error and
// its report.
func ExampleShutdownResult() {
	w := sim.New(1)
	registerExport(w, 20*time.Second, sim.Cooperate)
	w.Enqueue("export", email{To: "ada@example.com"})
	w.Shutdown()
	var r *sim.ShutdownResult = w.LastShutdown()
	fmt.Println(r.Err, r.Report.IsSuccess(), r.Report.Completion, r.Report.Drained, r.Report.Elapsed)
	finish(w)
	// Output:
	// <nil> true graceful_completed 1 20s
}

// ExampleStep reads one step of a trace: its index, what it did and the
// trace hash after it, which is the world's TraceHash for the last step.
func ExampleStep() {
	w := sim.New(1)
	registerSend(w)
	w.Enqueue("send", email{To: "ada@example.com"})
	tr := w.Trace()
	last := tr[len(tr)-1]
	fmt.Println(last.N, last.What, last.Hash == w.TraceHash())
	finish(w)
	// Output:
	// 1 enqueue send true
}

// ExampleWork reads a work parked across a crash: it ends killed, at the
// instant of the crash.
func ExampleWork() {
	w := sim.New(1)
	registerExport(w, 10*time.Second, sim.Ignore)
	w.Enqueue("export", email{To: "ada@example.com"})
	w.Advance(3 * time.Second)
	w.CrashWith(0)
	wk := w.Works()[0]
	fmt.Println(since(wk.Start), since(wk.End), wk.Mode, wk.Cancelled, wk.Killed)
	finish(w)
	// Output:
	// 0s 3s ignore false true
}
