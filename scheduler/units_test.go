package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// debugs returns a decision of n debug records, each with an index entry
// when indexed, as one unit.
func debugs(n int, indexed bool) Decision {
	var d Decision
	for range n {
		d.Records = append(d.Records, record.Record{Stream: record.EngineStream, Body: &record.Debug{Code: "X"}})
		if indexed {
			d.Index = append(d.Index, IndexEntry{ID: "job_x", Value: []byte{1}})
		}
	}
	return d
}

// RL-4: merging decisions into one batch keeps each of them whole: the
// batch's units are the decisions' units, in order.
func TestRL4_MergedDecisionsStayUnits(t *testing.T) {
	t.Parallel()
	var b Decision
	b.merge(debugs(2, true))
	if u := b.AllUnits(); u != nil {
		t.Fatalf("one decision: units %v, want nil (one unit)", u)
	}
	b.merge(debugs(3, false))
	cut := debugs(1, true)
	cut.cut()
	cut.Records = append(cut.Records, debugs(2, false).Records...)
	b.merge(cut) // a decision with a unit of 1 and a tail of 2
	b.merge(debugs(1, false))
	want := []Unit{{2, 2}, {3, 0}, {1, 1}, {2, 0}, {1, 0}}
	if got := b.AllUnits(); !slices.Equal(got, want) {
		t.Fatalf("units %v, want %v", got, want)
	}
	if err := checkUnits(b.Records, b.Index, b.AllUnits()); err != nil {
		t.Fatal(err)
	}
	// A recycled batch starts over: no unit carries into the next one.
	r := &Runner{}
	bt := &batch{d: b}
	r.recycle(bt)
	bt.d.merge(debugs(4, false))
	if u := bt.d.AllUnits(); u != nil {
		t.Fatalf("recycled batch with one decision: units %v, want nil", u)
	}
}

// RL-11: a dispatch starting more jobs than one group commit holds (1024
// records by default) makes each start its own unit, so that the journal
// can spread them over several groups instead of refusing the append.
func TestRL11_DispatchCutsAUnitPerStart(t *testing.T) {
	t.Parallel()
	const n = 1500
	b := setup(t, nil, workers(2*n))
	b.recover(t0)
	for range n {
		b.enqueue(t0, req("h"))
	}
	d := b.take(b.m.Dispatch(t0))
	if len(d.Starts) != n {
		t.Fatalf("%d starts, want %d", len(d.Starts), n)
	}
	units := d.AllUnits()
	if len(units) != n {
		t.Fatalf("%d units for %d starts", len(units), n)
	}
	for i, u := range units {
		if u != (Unit{Records: 1}) {
			t.Fatalf("unit %d = %+v, want one record", i, u)
		}
	}
	b.replayed()
}

// RL-4: a settlement and the follow-ups it enqueues are one unit: they are
// appended together or not at all (DL-38).
func TestRL4_SettlementWithFollowUpsIsOneUnit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	b.enqueue(t0, req("h"))
	st := b.dispatch(t0)
	fus := make([]EnqueueRequest, 300)
	for i := range fus {
		fus[i] = req("next")
	}
	d := b.settle(ts(time.Second), Result{Token: st[0].Token, FollowUps: fus})
	if len(d.Records) != 1+len(fus) {
		t.Fatalf("settlement decided %d records", len(d.Records))
	}
	if u := d.AllUnits(); u != nil {
		t.Fatalf("settlement split into units %v", u)
	}
}

// DL-44, RL-11: recovery buries each exhausted lost job in its own unit,
// after the run_started, so that any number of them fits the journal.
func TestRL11_RecoverCutsAUnitPerBurial(t *testing.T) {
	t.Parallel()
	var j journal
	one := defaultRetry
	one.MaxAttempts = 1
	for _, id := range []string{"job_a", "job_b", "job_c"} {
		j.enqueue(id, one)
		j.start(id, 1)
	}
	b := setup(t, j.recs)
	d, _ := b.m.Recover(ts(time.Minute), "run_2", "v2")
	b.take(d)
	want := []Unit{{1, 0}, {1, 0}, {1, 0}, {1, 0}}
	if got := d.AllUnits(); !slices.Equal(got, want) {
		t.Fatalf("units %v, want %v (%v)", got, want, kinds(d))
	}
}

// RL-4: unitSize counts the unit being decided, envelopes and index
// entries as the journal counts them against its cap, and starts again
// after each cut and merge.
func TestRL4_UnitSizeCountsTheOpenUnit(t *testing.T) {
	t.Parallel()
	one, err := record.Prepare(record.Record{Stream: record.EngineStream, Body: &record.Debug{Code: "X"}}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	entry := len("job_x") + 1
	d := debugs(2, true)
	if recs, bytes, _ := d.unitSize(nil); recs != 2 || bytes != 2*(one.Size()+entry) {
		t.Fatalf("two records: %d records, %d bytes; want 2, %d", recs, bytes, 2*(one.Size()+entry))
	}
	more := debugs(1, false)
	d.Records = append(d.Records, more.Records...)
	if recs, bytes, _ := d.unitSize(nil); recs != 3 || bytes != 3*one.Size()+2*entry {
		t.Fatalf("one more record: %d records, %d bytes; want 3, %d", recs, bytes, 3*one.Size()+2*entry)
	}
	d.cut()
	if recs, bytes, _ := d.unitSize(nil); recs != 0 || bytes != 0 {
		t.Fatalf("after a cut: %d records, %d bytes; want 0, 0", recs, bytes)
	}
	d.Records = append(d.Records, debugs(1, false).Records...)
	if recs, bytes, _ := d.unitSize(nil); recs != 1 || bytes != one.Size() {
		t.Fatalf("a record after the cut: %d records, %d bytes; want 1, %d", recs, bytes, one.Size())
	}
	d.merge(debugs(1, true))
	if recs, bytes, _ := d.unitSize(nil); recs != 1 || bytes != one.Size()+entry {
		t.Fatalf("after a merge: %d records, %d bytes; want 1, %d", recs, bytes, one.Size()+entry)
	}
}
