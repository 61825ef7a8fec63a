package sim_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/sim"
)

// plant installs a before-reopen hook that appends, to the journal the
// engine is about to reopen, what forge returns for the first record it
// accepts: the write a buggy engine would have made before it stopped.
func plant(t *testing.T, forge func(r record.Record) (record.Record, bool)) *bool {
	t.Helper()
	planted := new(bool)
	sim.SetBeforeReopenHook(func(fs vfs.FS) {
		if *planted {
			return
		}
		j, err := journal.Open(sim.Dir, journal.Options{FS: fs, Clock: clocktest.New(sim.T0.Add(1000 * time.Hour))})
		if err != nil {
			t.Errorf("plant: open: %v", err)
			return
		}
		defer j.Close()
		it := j.Scan(1, math.MaxUint64)
		var bad record.Record
		found := false
		for it.Next() && !found {
			bad, found = forge(it.Record())
		}
		if err := it.Err(); err != nil {
			t.Errorf("plant: scan: %v", err)
		}
		it.Close()
		if !found {
			return
		}
		if _, err := j.Append(context.Background(), bad); err != nil {
			t.Errorf("plant: append: %v", err)
			return
		}
		*planted = true
	})
	t.Cleanup(func() { sim.SetBeforeReopenHook(nil) })
	return planted
}

// expectCaught runs a short scenario with one restart and expects the
// oracle to fail naming want.
func expectCaught(t *testing.T, planted *bool, want string) {
	t.Helper()
	w := sim.New(2) // no WithT: the failure is collected, not reported
	register(w)
	w.Enqueue("work", msg{N: 1})
	id := w.Dispatch("flow", api.State{})
	w.Advance(2 * time.Hour)
	w.Signal(id, "go", nil) // past the 1 h deadline: the workflow expires (WD-11)
	w.Advance(time.Minute)
	w.Restart()
	w.Advance(time.Minute)
	err := w.Finish()
	if !*planted {
		t.Fatal("the bug was not planted: no record to forge from")
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the oracle missed the planted bug: err = %v, want %q", err, want)
	}
	if !errors.Is(err, sim.ErrViolation) {
		t.Fatalf("errors.Is(%q, sim.ErrViolation) is false", err)
	}
	t.Logf("caught: %v", err)
}

// TestPlantedBug_SettlementWithoutFencing plants a second settlement of
// an already settled attempt token, as an engine that settles without
// checking the token against the job's open attempt would write it. The
// oracle must catch it at the reopen audit.
func TestPlantedBug_SettlementWithoutFencing(t *testing.T) {
	planted := plant(t, func(r record.Record) (record.Record, bool) {
		s, ok := r.Body.(*record.AttemptSucceeded)
		if !ok {
			return r, false
		}
		dup := *s
		return record.Record{Stream: r.Stream, Body: &dup}, true
	})
	expectCaught(t, planted, "settled twice")
}

// TestPlantedBug_RetryExtendsDeadline plants a workflow expiry whose
// deadline was pushed an hour later, as an engine whose retry re-arms the
// workflow deadline from the retry instant would record it. The oracle
// must catch it: a deadline never moves.
func TestPlantedBug_RetryExtendsDeadline(t *testing.T) {
	planted := plant(t, func(r record.Record) (record.Record, bool) {
		x, ok := r.Body.(*record.WorkflowDeadlineExceeded)
		if !ok {
			return r, false
		}
		moved := *x
		moved.DeadlineAt += int64(time.Hour)
		moved.DetectedAt += int64(time.Hour)
		return record.Record{Stream: r.Stream, Body: &moved}, true
	})
	expectCaught(t, planted, "deadline moved")
}

// forge installs a before-reopen hook that appends, once, the records
// forge returns for the journal's records so far (in seq order): the
// writes a buggy engine would have made before it stopped. forge gets the
// seq the first appended record will have.
func forge(t *testing.T, f func(recs []record.Record, next uint64) []record.Record) *bool {
	t.Helper()
	planted := new(bool)
	sim.SetBeforeReopenHook(func(fs vfs.FS) {
		if *planted {
			return
		}
		j, err := journal.Open(sim.Dir, journal.Options{FS: fs, Clock: clocktest.New(sim.T0.Add(1000 * time.Hour))})
		if err != nil {
			t.Errorf("forge: open: %v", err)
			return
		}
		defer j.Close()
		var recs []record.Record
		it := j.Scan(1, math.MaxUint64)
		for it.Next() {
			recs = append(recs, it.Record())
		}
		if err := it.Err(); err != nil {
			t.Errorf("forge: scan: %v", err)
		}
		it.Close()
		bad := f(recs, uint64(len(recs))+1)
		if len(bad) == 0 {
			return
		}
		if _, err := j.Append(context.Background(), bad...); err != nil {
			t.Errorf("forge: append: %v", err)
			return
		}
		*planted = true
	})
	t.Cleanup(func() { sim.SetBeforeReopenHook(nil) })
	return planted
}

// delayedJob returns the JobEnqueued of the first job in recs that is
// still waiting for its availability instant (it has no attempt yet).
func delayedJob(recs []record.Record) (record.Record, *record.JobEnqueued) {
	started := map[string]bool{}
	for _, r := range recs {
		if s, ok := r.Body.(*record.AttemptStarted); ok {
			started[s.JobID] = true
		}
	}
	for _, r := range recs {
		if e, ok := r.Body.(*record.JobEnqueued); ok && !started[e.JobID] {
			return r, e
		}
	}
	return record.Record{}, nil
}

// expectCaughtDelayed is expectCaught with a job delayed past a crash
// (no shutdown root caps the forged attempt), for the forgeries that
// start an attempt of it.
func expectCaughtDelayed(t *testing.T, planted *bool, want string) {
	t.Helper()
	w := sim.New(2)
	register(w)
	w.Enqueue("work", msg{N: 1}, api.Delay(10*time.Hour))
	w.Advance(time.Minute)
	w.CrashWith(0)
	w.Advance(time.Minute)
	err := w.Finish()
	if !*planted {
		t.Fatal("the bug was not planted: no record to forge from")
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the oracle missed the planted bug: err = %v, want %q", err, want)
	}
	if !errors.Is(err, sim.ErrViolation) {
		t.Fatalf("errors.Is(%q, sim.ErrViolation) is false", err)
	}
	t.Logf("caught: %v", err)
}

// forgedAttempt returns an attempt_started of job (its first attempt, with
// a 30 s budget from s) and a retry settlement of it by a delivery timeout
// recorded at reasonAt, as abandoned if abandoned is set.
func forgedAttempt(stream string, job *record.JobEnqueued, token uint64, s time.Time, reasonAt time.Duration, abandoned bool) []record.Record {
	started := &record.AttemptStarted{JobID: job.JobID, Attempt: 1, StartAt: s.UnixNano(),
		HardAt: s.Add(30 * time.Second).UnixNano(), NormalAt: s.Add(29 * time.Second).UnixNano()}
	out := record.Outcome{JobID: job.JobID, Token: token, Code: api.CodeDeliveryTimeout, Class: "retryable",
		Reason: "delivery_timeout", ReasonAt: s.Add(reasonAt).UnixNano(), Execution: "returned", Joined: true}
	if abandoned {
		out.Execution, out.Joined = "abandoned", false
	}
	retry := &record.AttemptRetryScheduled{Outcome: out, DelayNanos: int64(time.Second),
		AvailableAt: sim.T0.Add(1000*time.Hour + time.Second).UnixNano()}
	return []record.Record{{Stream: stream, Body: started}, {Stream: stream, Body: retry}}
}

// TestPlantedBug_DeliveryTimeoutFiresEarly plants an attempt whose
// delivery timeout was recorded a second before its normal cutoff P, as
// an engine that stamps the reason from a mis-armed timer would write it.
// The oracle must catch it: a deadline-driven reason is stamped with its
// notification instant (DL-16), never earlier.
func TestPlantedBug_DeliveryTimeoutFiresEarly(t *testing.T) {
	planted := forge(t, func(recs []record.Record, next uint64) []record.Record {
		r, job := delayedJob(recs)
		if job == nil {
			return nil
		}
		return forgedAttempt(r.Stream, job, next, sim.T0.Add(999*time.Hour), 28*time.Second, false)
	})
	expectCaughtDelayed(t, planted, "DL-16")
}

// TestPlantedBug_AbandonedBeforeC plants an attempt abandoned at its
// notification instant instead of at the end of its cooperative window C
// = P + 250 ms, as an engine that skips the window (DL-20) would write it:
// the attempt settles (the journal's clock is at T0+1000h) before C.
func TestPlantedBug_AbandonedBeforeC(t *testing.T) {
	planted := forge(t, func(recs []record.Record, next uint64) []record.Record {
		r, job := delayedJob(recs)
		if job == nil {
			return nil
		}
		// P = s + 29 s = T0+1000h: the settlement at T0+1000h is at P,
		// 250 ms before C.
		s := sim.T0.Add(1000*time.Hour - 29*time.Second)
		return forgedAttempt(r.Stream, job, next, s, 29*time.Second, true)
	})
	expectCaughtDelayed(t, planted, "before its cooperative deadline")
}

// TestPlantedBug_MemoryKeepsFinishedWork makes the engine report, after
// its first job completed, that it still holds that job in memory, as an
// engine whose settlement forgets to drop finished work would. The oracle
// must catch it: memory holds only what the journal shows unfinished.
func TestPlantedBug_MemoryKeepsFinishedWork(t *testing.T) {
	var done string
	sim.SetLiveHook(func(jobs, wfs []string) ([]string, []string) {
		if done != "" {
			jobs = append(jobs, done)
		}
		return jobs, wfs
	})
	t.Cleanup(func() { sim.SetLiveHook(nil) })
	w := sim.New(2)
	w.Register(func(e *api.Engine) error {
		return api.Handle(e, "ok", func(ctx context.Context, d *api.Delivery, in msg) error { return nil })
	})
	id := w.Enqueue("ok", msg{N: 1})
	if w.Failed() {
		t.Fatalf("before the bug: %v", w.Err())
	}
	done = id
	w.Advance(time.Second)
	err := w.Finish()
	if err == nil || !strings.Contains(err.Error(), "memory holds job "+id+", which the journal finished") {
		t.Fatalf("the oracle missed the planted bug: err = %v", err)
	}
	if !errors.Is(err, sim.ErrViolation) {
		t.Fatalf("errors.Is(%q, sim.ErrViolation) is false", err)
	}
	t.Logf("caught: %v", err)
}

// TestPlantedBug_MemoryDiffers makes the engine report memory that
// differs from the unfinished work the journal shows in each other way:
// it lacks a pending job or a running workflow, or holds a workflow the
// journal does not know. The oracle must catch each.
func TestPlantedBug_MemoryDiffers(t *testing.T) {
	for _, c := range []struct {
		name string
		live func(job, wf string, jobs, wfs []string) ([]string, []string)
		want func(job, wf string) string
	}{
		{"lacks a job", func(job, wf string, jobs, wfs []string) ([]string, []string) {
			return slices.DeleteFunc(jobs, func(id string) bool { return id == job }), wfs
		}, func(job, wf string) string { return "memory lacks unfinished job " + job }},
		{"lacks a workflow", func(job, wf string, jobs, wfs []string) ([]string, []string) {
			return jobs, slices.DeleteFunc(wfs, func(id string) bool { return id == wf })
		}, func(job, wf string) string { return "memory lacks unfinished workflow " + wf }},
		{"holds an unknown workflow", func(job, wf string, jobs, wfs []string) ([]string, []string) {
			return jobs, append(wfs, "wf_unknown")
		}, func(job, wf string) string {
			return "memory holds workflow wf_unknown, which the journal does not know"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var job, wf string
			sim.SetLiveHook(func(jobs, wfs []string) ([]string, []string) {
				if wf == "" {
					return jobs, wfs
				}
				return c.live(job, wf, slices.Clone(jobs), slices.Clone(wfs))
			})
			t.Cleanup(func() { sim.SetLiveHook(nil) })
			w := sim.New(2)
			register(w)
			j := w.Enqueue("work", msg{N: 1}, api.Delay(time.Hour))
			id := w.Dispatch("flow", api.State{})
			if w.Failed() {
				t.Fatalf("before the bug: %v", w.Err())
			}
			job, wf = j, id
			w.Advance(time.Second)
			err := w.Finish()
			if err == nil || !strings.Contains(err.Error(), c.want(job, wf)) {
				t.Fatalf("the oracle missed the planted bug: err = %v, want %q", err, c.want(job, wf))
			}
		})
	}
}
