package shutdown

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/deadlines"
)

// gatedAppend is one append a gateJournal holds.
type gatedAppend struct {
	ctx context.Context
	// at is the clock's instant when the append began.
	at time.Time
	// release ends the append: nil writes the record, an error fails it.
	release chan error
	// ended receives the clock's instant if the append's ctx ended first.
	ended chan time.Time
}

// gateJournal is a fakeJournal whose appends selected by gate block, as a
// journal that cannot commit does, until the test releases them or their
// ctx ends, and then return the ctx's cause. The other appends go through
// at once.
type gateJournal struct {
	*fakeJournal
	clk     *clocktest.Clock
	gate    func(e Event, now time.Time) bool
	entered chan *gatedAppend
}

// gated makes b's journal a gateJournal over b.jrn; call it from setup's
// mod.
func gated(b *testBundle, gate func(e Event, now time.Time) bool) *gateJournal {
	j := &gateJournal{fakeJournal: b.jrn, clk: b.clk, gate: gate, entered: make(chan *gatedAppend, 1)}
	b.opts.Journal = j
	return j
}

func (j *gateJournal) Append(ctx context.Context, e Event) error {
	now := j.clk.Now()
	if !j.gate(e, now) {
		return j.fakeJournal.Append(ctx, e)
	}
	g := &gatedAppend{ctx: ctx, at: now, release: make(chan error), ended: make(chan time.Time, 1)}
	select {
	case j.entered <- g:
	case <-ctx.Done():
		g.ended <- j.clk.Now()
		return context.Cause(ctx)
	}
	select {
	case err := <-g.release:
		if err != nil {
			return err
		}
		return j.fakeJournal.Append(ctx, e)
	case <-ctx.Done():
		g.ended <- j.clk.Now()
		return context.Cause(ctx)
	}
}

// endOnCleanup ends b's shutdown when a synctest test ends, also after a
// failure, so that no goroutine is left blocked in the bubble: it releases
// steps and moves the clock on until phase 6 has ended, which ends every
// wait of the coordinator and the ctx of every gated append.
func endOnCleanup(t *testing.T, b *testBundle, steps ...*step) {
	t.Cleanup(func() {
		for _, s := range steps {
			close(s.release)
		}
		for {
			select {
			case <-b.c.Done():
				return
			default:
			}
			b.clk.Advance(time.Minute)
			synctest.Wait()
		}
	})
}

// finished selects the shutdown_phase_finished record of p.
func finished(p Phase) func(Event, time.Time) bool {
	return func(e Event, _ time.Time) bool {
		f, ok := e.(PhaseFinished)
		return ok && f.Phase == p
	}
}

// leftAtHr takes the append that jrn holds from 27 s, with Hr = 30 s and
// a SettlementTimeout of 5 s: the phase waits for it until Hr, not 32, and
// then, with phases 3 to 5 run at Hr, the coordinator waits for it within
// SettlementTimeout before the report, its ctx still live.
func leftAtHr(t *testing.T, b *testBundle, jrn *gateJournal) *gatedAppend {
	t.Helper()
	g := <-jrn.entered
	wantTime(t, "append began", g.at, ts(sec(27)))
	b.clk.BlockUntil(1)
	b.wantNext(ts(sec(30))) // min(27 + 5, Hr = 30), not 32
	b.clk.Advance(3 * time.Second)
	b.clk.BlockUntil(1)
	b.wantNext(ts(sec(35)))
	if err := g.ctx.Err(); err != nil {
		t.Fatalf("append's ctx ended at Hr: %v", context.Cause(g.ctx))
	}
	return g
}

// TestSD2_NoPhaseWaitsForARecordPastHr: a record of phases 2 to 5 whose
// append hangs from 3 s before Hr, with a SettlementTimeout of 5 s, holds
// its phase only until Hr, not Hr + 2 s: SettlementTimeout is clamped to
// Hr, never added to it (SD-2). The append is not given up there: the
// records after it wait behind it, and before the report the coordinator
// waits for it within one SettlementTimeout (SD-17). A journal that never
// returns fails it there, the later records are skipped and
// CloseReconciled is false (SD-11); one that returns gets every record
// written, and the shutdown is complete.
func TestSD2_NoPhaseWaitsForARecordPastHr(t *testing.T) {
	t.Parallel()
	t.Run("hung", func(t *testing.T) {
		t.Parallel()
		var jrn *gateJournal
		b := setup(t, func(b *testBundle) {
			b.eng.drain.block = true
			b.owned("db")
			jrn = gated(b, finished(PhaseDrain))
		})
		b.c.Initiate(TriggerSigterm)
		b.entered(&b.eng.drain)
		b.wantNext(ts(sec(28)))
		b.clk.Advance(27 * time.Second)
		b.eng.drain.release <- nil // the drain completes at 27

		g := leftAtHr(t, b, jrn)
		b.clk.Advance(5 * time.Second)
		wantTime(t, "append's ctx ended", <-g.ended, ts(sec(35)))
		wantEq(t, "append's ctx cause", context.Cause(g.ctx), errAppendTimeout)

		rep, err := b.finish()
		if !errors.Is(err, errAppendTimeout) || !errors.Is(err, ErrIncomplete) {
			t.Fatalf("Wait = %v, want the append's error and ErrIncomplete", err)
		}
		wantEq(t, "elapsed", rep.Elapsed, 30*time.Second)
		wantSlice(t, "records", b.jrn.records(), allPhases[:4])
		wantEq(t, "journal closes", b.jrn.closed, 1)
		// Phases 3 to 5 still ran, at Hr: close evidence had no time
		// left and the owned resource was withheld behind it (SD-18).
		wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted",
			"close timed_out/timed_out", "owned-resources timed_out/not_attempted")
		wantEq(t, "close reconciled", rep.CloseReconciled, false)
		wantEq(t, "completion", rep.Completion, Incomplete)
	})
	t.Run("returns", func(t *testing.T) {
		t.Parallel()
		closeStep := (&step{block: true}).init()
		var mu sync.Mutex
		var jrn *gateJournal
		b := setup(t, func(b *testBundle) {
			b.opts.OwnedResources = []OwnedResource{{
				Name: "db", CloseFunc: func(ctx context.Context) error { return closeStep.run(&mu, ctx) },
			}}
			jrn = gated(b, finished(PhaseReleaseResources))
		})
		b.c.Initiate(TriggerSigterm)
		b.entered(closeStep)
		b.wantNext(ts(sec(28))) // the close's graceful path ends at G
		b.clk.Advance(27 * time.Second)
		closeStep.release <- nil // the close completes at 27

		g := leftAtHr(t, b, jrn)
		b.clk.Advance(time.Second)
		g.release <- nil // the journal commits the record at 31

		rep, err := b.finish()
		if err != nil {
			t.Fatalf("Wait = %v, want success", err)
		}
		wantEq(t, "elapsed", rep.Elapsed, 30*time.Second)
		wantSlice(t, "records", b.jrn.records(), allPhases)
		wantEq(t, "journal closes", b.jrn.closed, 1)
		wantEq(t, "close reconciled", rep.CloseReconciled, true)
		wantEq(t, "completion", rep.Completion, GracefulCompleted)
	})
}

// TestSD5_RecordWaitFollowsAShortenedRoot: a root installed while a
// record's append hangs shortens the phase's wait for it, as it does every
// other wait (SD-5): armed for Hr = 30, it ends at the new Hr = 29. A
// journal that then commits the record, as a healthy one does when Close
// cuts the root to now, loses none of the records after it.
func TestSD5_RecordWaitFollowsAShortenedRoot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var jrn *gateJournal
		b := setup(t, func(b *testBundle) {
			b.eng.drain.block = true
			jrn = gated(b, finished(PhaseDrain))
		})
		endOnCleanup(t, b, &b.eng.drain)
		b.c.Initiate(TriggerSigterm)
		b.entered(&b.eng.drain)
		b.clk.Advance(27 * time.Second)
		b.eng.drain.release <- nil

		g := <-jrn.entered
		b.clk.BlockUntil(1)
		b.wantNext(ts(sec(30)))
		b.c.Install(deadlines.NewRoot(t0, 29*time.Second))
		synctest.Wait() // the wait has re-armed
		b.wantNext(ts(sec(29)))
		b.clk.Advance(2 * time.Second)
		synctest.Wait() // phases 3 to 5 ran at the new Hr
		b.wantNext(ts(sec(34)))
		if err := g.ctx.Err(); err != nil {
			t.Fatalf("append's ctx ended at Hr: %v", context.Cause(g.ctx))
		}
		g.release <- nil

		rep, err := b.finish()
		if !errors.Is(err, ErrIncomplete) || errors.Unwrap(err) != nil {
			t.Fatalf("Wait = %v, want ErrIncomplete alone: no record lost", err)
		}
		wantEq(t, "elapsed", rep.Elapsed, 29*time.Second)
		recs := b.jrn.records()
		wantSlice(t, "first records", recs[:5], allPhases[:5])
		if n := len(recs); n != len(allPhases) || recs[n-1] != "finished publish_report completed/not_attempted" {
			t.Fatalf("records %q: want every phase's and the report's", recs)
		}
	})
}

// TestSD10_SD17_RecordsAfterHrAreStillAppended: phase 5 runs until Hr (an
// owned close that never returns is abandoned there); its debug and
// finished records, phase 6's records and the report are appended after
// Hr, each bounded by SettlementTimeout alone (SD-10, SD-17), not given up
// at once because Hr has passed.
func TestSD10_SD17_RecordsAfterHrAreStillAppended(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hang := (&step{block: true, ignoreCtx: true}).init()
		var mu sync.Mutex
		var jrn *gateJournal
		b := setup(t, func(b *testBundle) {
			b.opts.OwnedResources = []OwnedResource{{
				Name: "db", CloseFunc: func(ctx context.Context) error { return hang.run(&mu, ctx) },
			}}
			// Every append from Hr on waits for the test, or its ctx.
			jrn = gated(b, func(_ Event, now time.Time) bool { return !now.Before(ts(sec(30))) })
		})
		endOnCleanup(t, b, hang)
		b.c.Initiate(TriggerSigterm)
		b.entered(hang)
		b.wantNext(ts(sec(28)))
		b.clk.Advance(28 * time.Second) // G: the close goes on under force
		b.clk.BlockUntil(1)
		b.wantNext(ts(sec(30)))
		b.clk.Advance(2 * time.Second) // Hr: the close is abandoned

		want := []string{
			"debug owned-resources/db SHUTDOWN_CLOSE_ABANDONED: did not return by its deadline " +
				"(its share of the budget or the force deadline); abandoned, still running (SD-37)",
			"finished release_resources timed_out/timed_out",
			"started publish_report", "report incomplete", "finished publish_report completed/not_attempted",
		}
		for _, rec := range want {
			g := <-jrn.entered
			synctest.Wait() // the coordinator waits for the append, or gave it up
			if err := g.ctx.Err(); err != nil {
				t.Fatalf("%q: append's ctx ended at once after Hr: %v", rec, context.Cause(g.ctx))
			}
			wantTime(t, rec+": append began", g.at, ts(sec(30)))
			b.wantNext(ts(sec(35))) // 30 + SettlementTimeout
			g.release <- nil
		}

		rep, err := b.finish()
		if !errors.Is(err, ErrIncomplete) || errors.Unwrap(err) != nil {
			t.Fatalf("Wait = %v, want ErrIncomplete alone", err)
		}
		wantEq(t, "elapsed", rep.Elapsed, 30*time.Second)
		wantSlice(t, "records", b.jrn.records(), append(allPhases[:10:10], want...))
		wantEq(t, "journal closes", b.jrn.closed, 1)
		wantEq(t, "close reconciled", rep.CloseReconciled, true)
		wantEq(t, "quarantined", rep.Quarantined, 1)
	})
}

// TestSD17_ReportAppendBoundedBySettlementTimeoutAlone: phase 6 waits only
// for its appends, each bounded by SettlementTimeout (SD-17), also when it
// starts before Hr: a report append that begins at 27 may wait until 32.
func TestSD17_ReportAppendBoundedBySettlementTimeoutAlone(t *testing.T) {
	t.Parallel()
	var jrn *gateJournal
	b := setup(t, func(b *testBundle) {
		b.eng.drain.block = true
		jrn = gated(b, func(e Event, _ time.Time) bool { return e.Kind() == "shutdown_report" })
	})
	b.c.Initiate(TriggerSigterm)
	b.entered(&b.eng.drain)
	b.clk.Advance(27 * time.Second)
	b.eng.drain.release <- nil

	g := <-jrn.entered
	wantTime(t, "append began", g.at, ts(sec(27)))
	b.clk.BlockUntil(1)
	b.wantNext(ts(sec(32))) // 27 + SettlementTimeout, past Hr = 30
	b.clk.Advance(3 * time.Second)
	if err := g.ctx.Err(); err != nil {
		t.Fatalf("report append's ctx ended at Hr: %v", context.Cause(g.ctx))
	}
	g.release <- nil
	rep, err := b.finish()
	if err != nil {
		t.Fatalf("Wait = %v", err)
	}
	wantEq(t, "completion", rep.Completion, GracefulCompleted)
	wantSlice(t, "records", b.jrn.records(), allPhases)
}
