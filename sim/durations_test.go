package sim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/shutdown"
	"github.com/quire-dev/quire/sim"
)

// The DL-22, DL-34 and SD-10 worked examples as sim scenarios: handlers
// and termination hooks take simulated time ([sim.World.Take]) while the
// world moves its clock, and every instant is read back from the journal
// (and, for the hooks, from [sim.World.Works]). Instants in comments are
// seconds after the scenario's origin, T0 unless said otherwise.

func ms(f float64) time.Duration  { return time.Duration(f * float64(time.Millisecond)) }
func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// key names an attempt's work for Take.
func key(d *api.Delivery) string { return fmt.Sprintf("%s/%d", d.JobID(), d.Attempt()) }

// slowFirst registers handler "work" whose first attempt runs act and
// whose later attempts return at once.
func slowFirst(w *sim.World, act func(ctx context.Context, d *api.Delivery) error, opts ...api.JobOption) {
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
			if d.Attempt() > 1 {
				return nil
			}
			return act(ctx, d)
		}, opts...)
	})
}

// takes is a handler action that takes d in mode and then returns nil, or
// a retryable STOPPED if its context ended it first.
func takes(w *sim.World, d time.Duration, mode sim.Mode) func(ctx context.Context, dl *api.Delivery) error {
	return func(ctx context.Context, dl *api.Delivery) error {
		if err := w.Take(ctx, key(dl), d, mode); err != nil {
			return api.Retryable("STOPPED", err)
		}
		return nil
	}
}

// settlementOf returns the first settlement record of job id in recs.
func settlementOf(t testing.TB, recs []record.Record, id string) (record.Record, record.Outcome) {
	t.Helper()
	for _, r := range recs {
		var o *record.Outcome
		switch b := r.Body.(type) {
		case *record.AttemptSucceeded:
			o = &b.Outcome
		case *record.AttemptRetryScheduled:
			o = &b.Outcome
		case *record.AttemptBuried:
			o = &b.Outcome
		case *record.AttemptReleased:
			o = &b.Outcome
		}
		if o != nil && o.JobID == id {
			return r, *o
		}
	}
	t.Fatalf("job %s has no settlement in the journal", id)
	return record.Record{}, record.Outcome{}
}

// wantSettled checks job id's first settlement: its kind, code, reason,
// the instants of the reason and of the settlement, and whether the
// execution was joined.
func wantSettled(t testing.TB, w *sim.World, origin time.Time, id string, kind record.Kind, code, reason string, reasonAt, at time.Duration, joined bool) {
	t.Helper()
	r, o := settlementOf(t, w.Records(), id)
	if r.Kind() != kind || o.Code != code || o.Reason != reason || o.Joined != joined {
		t.Fatalf("settlement %s code %q reason %q joined %v, want %s %q %q %v (%+v)", r.Kind(), o.Code, o.Reason, o.Joined, kind, code, reason, joined, o)
	}
	if reason != "" && o.ReasonAt != origin.Add(reasonAt).UnixNano() {
		t.Fatalf("%s recorded at %v, want %v", reason, time.Unix(0, o.ReasonAt).Sub(origin), reasonAt)
	}
	if r.At != origin.Add(at).UnixNano() {
		t.Fatalf("settled at %v, want %v (%+v)", time.Unix(0, r.At).Sub(origin), at, o)
	}
}

// shutdownAt returns the instants, relative to origin, of the journal's
// shutdown records as "kind[:name[:graceful/forced]]@instant".
func shutdownAt(w *sim.World, origin time.Time) []string {
	var out []string
	for _, r := range w.Records() {
		at := time.Unix(0, r.At).Sub(origin)
		switch b := r.Body.(type) {
		case *record.ShutdownInitiated:
			out = append(out, fmt.Sprintf("initiated(G=%v,Hr=%v)@%v", time.Unix(0, b.GracefulAt).Sub(origin), time.Unix(0, b.HardAt).Sub(origin), at))
		case *record.ShutdownForceRequested:
			out = append(out, fmt.Sprintf("force@%v", at))
		case *record.ShutdownPhaseStarted:
			out = append(out, fmt.Sprintf("start:%s@%v", b.Name, at))
		case *record.ShutdownPhaseFinished:
			out = append(out, fmt.Sprintf("finish:%s:%s/%s@%v", b.Name, b.Graceful, b.Forced, at))
		case *record.ShutdownReport:
			out = append(out, fmt.Sprintf("report:%s@%v", b.Completion, at))
		}
	}
	return out
}

// wantShutdown checks that the journal's shutdown records contain want, in
// order (other records may come between).
func wantShutdown(t testing.TB, w *sim.World, origin time.Time, want ...string) {
	t.Helper()
	got := shutdownAt(w, origin)
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("shutdown records lack %q (in order)\n got %s", want[i], strings.Join(got, "\n     "))
	}
}

// TestDL21_DL22_CooperativeDeadlineTable reproduces the nine rows of
// DL-22's table with a handler that ignores its cancellation and takes far
// longer than its budget: the reason and its instant, and the settlement
// at exactly C (abandoned, not joined), read from the journal. A root is
// a real shutdown initiated at the row's origin (the attempt started S
// before it); an explicit force is a Force step.
func TestDL21_DL22_CooperativeDeadlineTable(t *testing.T) {
	for _, row := range []struct {
		n      int
		t      time.Duration // DeliveryTimeout
		s      time.Duration // the attempt's start, relative to origin (<= 0)
		root   time.Duration // ShutdownTimeout of a shutdown at origin; 0: none
		force  time.Duration // explicit force at; 0: none
		reason string
		at, c  time.Duration
		kind   record.Kind
	}{
		{1, 30 * time.Second, 0, 0, 0, "delivery_timeout", 29 * time.Second, sec(29.25), record.KindAttemptRetryScheduled},
		{2, 4 * time.Second, 0, 0, 0, "delivery_timeout", 3 * time.Second, sec(3.25), record.KindAttemptRetryScheduled},
		{3, 2 * time.Second, 0, 0, 0, "delivery_timeout", ms(1500), ms(1625), record.KindAttemptRetryScheduled},
		{4, ms(100), 0, 0, 0, "delivery_timeout", ms(75), ms(81.25), record.KindAttemptRetryScheduled},
		{5, 50 * time.Second, -10 * time.Second, 30 * time.Second, 0, "shutdown_deadline", 28 * time.Second, sec(28.25), record.KindAttemptReleased},
		{6, 30 * time.Second, -5 * time.Second, 30 * time.Second, 0, "delivery_timeout", 24 * time.Second, sec(24.25), record.KindAttemptRetryScheduled},
		{7, 60 * time.Second, -20 * time.Second, 10 * time.Second, 0, "shutdown_deadline", 8 * time.Second, sec(8.25), record.KindAttemptReleased},
		{8, 30 * time.Second, 0, 30 * time.Second, 5 * time.Second, "forced_shutdown", 5 * time.Second, sec(5.25), record.KindAttemptReleased},
		{9, 30 * time.Second, 0, time.Second, ms(200), "forced_shutdown", ms(200), ms(350), record.KindAttemptReleased},
	} {
		t.Run(fmt.Sprint("row", row.n), func(t *testing.T) {
			var opts []sim.Option
			if row.root != 0 {
				opts = append(opts, sim.EngineOptions(func(o *api.Options) { o.ShutdownTimeout = row.root }))
			}
			sim.Run(t, 1, func(w *sim.World) {
				t := w.T() // the seed's subtest
				slowFirst(w, takes(w, time.Hour, sim.Ignore))
				origin := sim.T0.Add(-row.s)
				id := w.Enqueue("work", msg{}, api.DeliveryTimeout(row.t))
				w.AdvanceTo(origin)
				if row.root != 0 {
					w.BeginShutdown()
				}
				if row.force != 0 {
					w.AdvanceTo(origin.Add(row.force))
					w.Force()
				}
				w.AdvanceTo(origin.Add(row.c - 1))
				if s := w.Job(id).Status; s != api.JobProcessing {
					t.Fatalf("job %s 1 ns before C = %v", s, row.c)
				}
				w.AdvanceTo(origin.Add(row.c))
				code := api.CodeDeliveryTimeout
				if row.kind == record.KindAttemptReleased {
					code = api.CodeDeliveryInterrupted
				}
				wantSettled(t, w, origin, id, row.kind, code, row.reason, row.at, row.c, false)
				if _, o := settlementOf(t, w.Records(), id); o.Execution != "abandoned" {
					t.Fatalf("execution %q, want abandoned", o.Execution)
				}
			}, opts...)
		})
	}
}

// TestDL22_DL23_ReturnAroundC runs rows 1, 3 and 4 (timeout) and 9 (force)
// of DL-22 with handlers that cooperate, return 1 ns before C, panic 1 ns
// before C, and return at C: what returns before C is kept as it is
// (accounting follows the reason, DL-23), what returns at C is too late
// and fenced out (DL-26).
func TestDL22_DL23_ReturnAroundC(t *testing.T) {
	type row struct {
		n            int
		t, root, at  time.Duration
		c            time.Duration
		forced       bool
		timeoutKind  record.Kind // kind of a consuming failure under this reason
		reason, code string
	}
	rows := []row{
		{1, 30 * time.Second, 0, 29 * time.Second, sec(29.25), false, record.KindAttemptRetryScheduled, "delivery_timeout", api.CodeDeliveryTimeout},
		{3, 2 * time.Second, 0, ms(1500), ms(1625), false, record.KindAttemptRetryScheduled, "delivery_timeout", api.CodeDeliveryTimeout},
		{4, ms(100), 0, ms(75), ms(81.25), false, record.KindAttemptRetryScheduled, "delivery_timeout", api.CodeDeliveryTimeout},
		{9, 30 * time.Second, time.Second, ms(200), ms(350), true, record.KindAttemptReleased, "forced_shutdown", api.CodeDeliveryInterrupted},
	}
	type behaviour struct {
		name string
		act  func(w *sim.World, r row) func(ctx context.Context, d *api.Delivery) error
		// the settlement: its instant, whether it is a success, its code
		// ("" for the row's interruption code) and whether it was joined.
		at      func(r row) time.Duration
		success bool
		code    string
		joined  bool
	}
	behaviours := []behaviour{
		{"cooperates", func(w *sim.World, r row) func(context.Context, *api.Delivery) error {
			return takes(w, time.Hour, sim.Cooperate)
		}, func(r row) time.Duration { return r.at }, false, "STOPPED", true},
		{"returns_just_before_c", func(w *sim.World, r row) func(context.Context, *api.Delivery) error {
			return takes(w, r.c-1, sim.Ignore)
		}, func(r row) time.Duration { return r.c - 1 }, true, "", true},
		{"panics_just_before_c", func(w *sim.World, r row) func(context.Context, *api.Delivery) error {
			return func(ctx context.Context, d *api.Delivery) error {
				w.Take(ctx, key(d), r.c-1, sim.Ignore)
				panic("late panic")
			}
		}, func(r row) time.Duration { return r.c - 1 }, false, api.CodeHandlerPanicked, true},
		{"returns_at_c", func(w *sim.World, r row) func(context.Context, *api.Delivery) error {
			return takes(w, r.c, sim.Ignore)
		}, func(r row) time.Duration { return r.c }, false, "", false},
	}
	for _, r := range rows {
		for _, bh := range behaviours {
			t.Run(fmt.Sprintf("row%d/%s", r.n, bh.name), func(t *testing.T) {
				var opts []sim.Option
				if r.root != 0 {
					opts = append(opts, sim.EngineOptions(func(o *api.Options) { o.ShutdownTimeout = r.root }))
				}
				sim.Run(t, 1, func(w *sim.World) {
					t := w.T() // the seed's subtest
					slowFirst(w, bh.act(w, r))
					id := w.Enqueue("work", msg{}, api.DeliveryTimeout(r.t))
					if r.forced {
						w.BeginShutdown()
						w.AdvanceTo(sim.T0.Add(r.at))
						w.Force()
					}
					w.AdvanceTo(sim.T0.Add(r.c + time.Millisecond))
					kind, code := r.timeoutKind, bh.code
					if bh.success {
						kind = record.KindAttemptSucceeded
					}
					if code == "" && !bh.success {
						code = r.code
					}
					wantSettled(t, w, sim.T0, id, kind, code, r.reason, r.at, bh.at(r), bh.joined)
				}, opts...)
			})
		}
	}
}

// hooks returns two middleware, outer and inner, whose termination hooks
// take an hour cooperatively: each runs until its fair-share deadline
// ends its cleanup context (DL-33).
func hooks(w *sim.World) api.JobOption {
	hook := func(name string) api.MiddlewareFuncs {
		return api.MiddlewareFuncs{Label: name, OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
			return w.Take(ctx, fmt.Sprintf("%s/%d/hook-%s", t.JobID(), t.Attempt(), name), time.Hour, sim.Cooperate)
		}}
	}
	return api.WithMiddleware(hook("outer"), hook("inner"))
}

// wantWork checks the start and end of work key as [sim.World.Works]
// reports them.
func wantWork(t testing.TB, w *sim.World, origin time.Time, key string, start, end time.Duration) {
	t.Helper()
	for _, wk := range w.Works() {
		if wk.Key == key {
			if !wk.Start.Equal(origin.Add(start)) || !wk.End.Equal(origin.Add(end)) {
				t.Fatalf("%s ran %v..%v, want %v..%v", key, wk.Start.Sub(origin), wk.End.Sub(origin), start, end)
			}
			return
		}
	}
	t.Fatalf("no work %s among %+v", key, w.Works())
}

// TestDL34_WorkedExampleLocalTimeout: T = 30 s, two eligible hooks, the
// execution abandoned at C = 29.25: E = H = 30, Hk = 29.8125; the inner
// hook runs 29.25..29.53125 and times out, the outer one gets
// 29.53125..29.8125 and times out too; the scope closes at once and the
// attempt settles at Hk with the cleanup failure code (DL-31, DL-33,
// DL-36).
func TestDL34_WorkedExampleLocalTimeout(t *testing.T) {
	sim.Run(t, 1, func(w *sim.World) {
		t := w.T() // the seed's subtest
		slowFirst(w, takes(w, time.Hour, sim.Ignore), hooks(w))
		id := w.Enqueue("work", msg{}, api.DeliveryTimeout(30*time.Second))
		w.AdvanceTo(sim.T0.Add(31 * time.Second))
		k := id + "/1"
		wantWork(t, w, sim.T0, k+"/hook-inner", sec(29.25), sec(29.53125))
		wantWork(t, w, sim.T0, k+"/hook-outer", sec(29.53125), sec(29.8125))
		wantSettled(t, w, sim.T0, id, record.KindAttemptRetryScheduled, api.CodeTerminationCleanupFailed, "delivery_timeout",
			29*time.Second, sec(29.8125), false)
		// The world's own middleware ("sim", which notes handler calls for
		// the oracle) comes first and has no hook.
		if _, o := settlementOf(t, w.Records(), id); strings.Join(o.TerminationExits, " ") != "none timed_out timed_out" ||
			strings.Join(o.Middleware, " ") != "sim outer inner" || o.Execution != "abandoned" {
			t.Fatalf("settlement %+v", o)
		}
	})
}

// TestDL34_WorkedExampleShutdownDeadline is the forced variant: root 30 s
// from 0, ShutdownDeadline at G = 28, abandoned at 28.25, E = 29, so
// Hk = 28.8125 and the inner hook's deadline is 28.53125; the attempt is
// released, and the last second (29..30) is left to the shutdown.
func TestDL34_WorkedExampleShutdownDeadline(t *testing.T) {
	sim.Run(t, 1, func(w *sim.World) {
		t := w.T() // the seed's subtest
		slowFirst(w, takes(w, time.Hour, sim.Ignore), hooks(w))
		id := w.Enqueue("work", msg{}, api.DeliveryTimeout(30*time.Second))
		w.BeginShutdown()
		w.AdvanceTo(sim.T0.Add(29 * time.Second))
		k := id + "/1"
		wantWork(t, w, sim.T0, k+"/hook-inner", sec(28.25), sec(28.53125))
		wantWork(t, w, sim.T0, k+"/hook-outer", sec(28.53125), sec(28.8125))
		wantSettled(t, w, sim.T0, id, record.KindAttemptReleased, api.CodeTerminationCleanupFailed, "shutdown_deadline",
			28*time.Second, sec(28.8125), false)
	})
}

// TestSD10_WorkedTimeline is SD-10's 30 s timeline with a handler that
// ignores its cancellation and two hooks: shutdown_initiated at 0 with
// G = 28 and Hr = 30; the drain's graceful path times out at G, the
// attempt gets ShutdownDeadline at 28, is abandoned at the end of its
// cooperative window 28.25, its hooks run until Hk = 28.8125 within
// E = 29, and it is released then; the execution never returns, so the
// join times out at Hr = 30 and the report, published at 30, is
// Incomplete with the execution and its scope quarantined.
func TestSD10_WorkedTimeline(t *testing.T) {
	sim.Run(t, 1, func(w *sim.World) {
		t := w.T() // the seed's subtest
		slowFirst(w, takes(w, time.Hour, sim.Ignore), hooks(w))
		id := w.Enqueue("work", msg{}, api.DeliveryTimeout(15*time.Minute))
		err := w.Shutdown()
		wantShutdown(t, w, sim.T0,
			"initiated(G=28s,Hr=30s)@0s",
			"start:close_admission@0s", "finish:close_admission:completed/not_attempted@0s",
			"start:drain@0s", "finish:drain:timed_out/not_attempted@28s",
			"start:force@28s", "finish:force:timed_out/timed_out@30s",
			"start:close_evidence@30s", "report:incomplete@30s")
		wantSettled(t, w, sim.T0, id, record.KindAttemptReleased, api.CodeTerminationCleanupFailed, "shutdown_deadline",
			28*time.Second, sec(28.8125), false)
		res := w.LastShutdown()
		if res == nil || res.Report.Completion != shutdown.Incomplete || res.Report.Elapsed != 30*time.Second || err == nil ||
			res.Report.Quarantined != 2 { // the execution and its withheld scope (DL-37)
			t.Fatalf("shutdown %v, result %+v", err, res)
		}
	})
}

// TestSD10_ReturnsWithinCleanup: the same timeline with a handler that
// returns at 28.5, after its window (28.25) and before its cleanup cutoff
// E = 29: its late result is fenced out, the join succeeds at 28.5 and
// the report is ForcedCompleted, published before Hr.
func TestSD10_ReturnsWithinCleanup(t *testing.T) {
	sim.Run(t, 1, func(w *sim.World) {
		t := w.T() // the seed's subtest
		slowFirst(w, takes(w, sec(28.5), sim.Ignore))
		id := w.Enqueue("work", msg{}, api.DeliveryTimeout(15*time.Minute))
		w.Shutdown()
		wantSettled(t, w, sim.T0, id, record.KindAttemptReleased, api.CodeDeliveryInterrupted, "shutdown_deadline",
			28*time.Second, sec(28.25), false)
		wantShutdown(t, w, sim.T0, "finish:drain:timed_out/not_attempted@28s", "start:force@28s",
			"finish:force:timed_out/completed@28.5s", "report:forced_completed@28.5s")
		if res := w.LastShutdown(); res.Report.Completion != shutdown.ForcedCompleted || res.Report.Quarantined != 0 {
			t.Fatalf("report %+v", res.Report)
		}
	})
}

// TestSD10_SecondSignalForcesAt5: a force at 5 (the second SIGTERM of
// SD-10, here an API force) starts the same sequence at 5 with
// ForcedShutdown: the window ends at 5.25, the owner cutoff is 6, the
// drain's graceful path ends CancelledByForce at 5 and its force deadline
// is max(min(5 + 2, 30), 6) = 7; the hard cutoff stays 30.
func TestSD10_SecondSignalForcesAt5(t *testing.T) {
	sim.Run(t, 1, func(w *sim.World) {
		t := w.T() // the seed's subtest
		slowFirst(w, takes(w, time.Hour, sim.Ignore))
		id := w.Enqueue("work", msg{}, api.DeliveryTimeout(15*time.Minute))
		w.BeginShutdown()
		w.AdvanceTo(sim.T0.Add(5 * time.Second))
		w.ForceShutdown()
		wantShutdown(t, w, sim.T0, "initiated(G=28s,Hr=30s)@0s", "force@5s",
			"finish:drain:cancelled_by_force/not_attempted@5s", "start:force@5s",
			"finish:force:cancelled_by_force/timed_out@7s", "report:incomplete@7s")
		wantSettled(t, w, sim.T0, id, record.KindAttemptReleased, api.CodeDeliveryInterrupted, "forced_shutdown",
			5*time.Second, sec(5.25), false)
	})
}
