package journal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

// tickClock moves on by 1µs at every reading. The journal reads its clock
// once per group (newGroup), so records share an At exactly when they
// share a group: the tests below see group boundaries in the log.
type tickClock struct{ *clocktest.Clock }

func (c tickClock) Now() time.Time {
	c.Advance(time.Microsecond)
	return c.Clock.Now()
}

func newTickClock() tickClock { return tickClock{clocktest.New(epoch)} }

// fataler is what the helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// unitShape describes one unit: its records, each with pad bytes of
// message padding, and its index entries, each with an ipad-byte value.
type unitShape struct{ recs, index, pad, ipad int }

// unitsCall is the input of one AppendUnits call.
type unitsCall struct {
	recs  []record.Record
	index []IndexEntry
	units []Unit
}

// makeUnits builds a call from shapes. Record messages, streams and index
// ids name the tag, the unit and the position, so that every record and
// entry of a test is distinct.
func makeUnits(tag string, shapes []unitShape) unitsCall {
	var c unitsCall
	for k, s := range shapes {
		stream := fmt.Sprintf("wf_%s_u%d", tag, k+1)
		for i := range s.recs {
			c.recs = append(c.recs, debugRec(stream, fmt.Sprintf("%s.u%d.r%d.%s", tag, k+1, i+1, strings.Repeat("p", s.pad))))
		}
		for e := range s.index {
			v := fmt.Sprintf("%s.u%d.i%d.%s", tag, k+1, e+1, strings.Repeat("v", s.ipad))
			c.index = append(c.index, IndexEntry{ID: fmt.Sprintf("ix_%s_u%d_%d", tag, k+1, e+1), Value: []byte(v)})
		}
		c.units = append(c.units, Unit{Records: s.recs, Index: s.index})
	}
	return c
}

// unitBytes returns each unit's size as GroupBytesMax counts it: record
// envelopes plus index ids and values.
func (c unitsCall) unitBytes(t fataler, recordBytesMax int) []int {
	t.Helper()
	out := make([]int, len(c.units))
	ri, ii := 0, 0
	for k, u := range c.units {
		for _, r := range c.recs[ri : ri+u.Records] {
			p, err := record.Prepare(r, recordBytesMax)
			if err != nil {
				t.Fatalf("prepare: %v", err)
			}
			out[k] += p.Size()
		}
		for _, e := range c.index[ii : ii+u.Index] {
			out[k] += len(e.ID) + len(e.Value)
		}
		ri += u.Records
		ii += u.Index
	}
	return out
}

// packModel is the packing AppendUnits promises a sole writer: units in
// order, a new group started only when the next unit does not fit in the
// current one, so a unit larger than a group is alone in its own. It
// returns whether each unit starts a group, or ok false when some unit is
// over the unit caps.
func packModel(c unitsCall, bytes []int, o Options) (starts []bool, ok bool) {
	recsMax, bytesMax := o.GroupRecordsMax, o.GroupBytesMax
	n, size := 0, 0
	for k, u := range c.units {
		if u.Records > o.UnitRecordsMax || bytes[k] > o.UnitBytesMax {
			return nil, false
		}
		start := k == 0 || n+u.Records > recsMax || size+bytes[k] > bytesMax
		if start {
			n, size = 0, 0
		}
		starts = append(starts, start)
		n += u.Records
		size += bytes[k]
	}
	return starts, true
}

// checkUnitsAppended checks a sole writer's successful call: seqs follow
// base in order, the log holds c's records after base and nothing else,
// every unit sits in one group, groups start exactly at starts and keep
// within the limits, and every index entry is in place. It returns the
// number of groups the call took.
func checkUnitsAppended(t fataler, j *Journal, c unitsCall, base uint64, seqs []uint64, starts []bool) int {
	t.Helper()
	if len(seqs) != len(c.recs) {
		t.Fatalf("%d seqs for %d records", len(seqs), len(c.recs))
	}
	for i, s := range seqs {
		if s != base+1+uint64(i) {
			t.Fatalf("seqs %v: want %d..%d in order", seqs, base+1, base+uint64(len(c.recs)))
		}
	}
	it := j.Scan(base+1, ^uint64(0))
	var got []record.Record
	for it.Next() {
		got = append(got, it.Record())
	}
	if err := it.Close(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if len(got) != len(c.recs) {
		t.Fatalf("log holds %d records after seq %d, want %d", len(got), base, len(c.recs))
	}
	for i, r := range got {
		d, ok := r.Body.(*record.Debug)
		want := c.recs[i].Body.(*record.Debug).Message
		if r.Seq != seqs[i] || r.Stream != c.recs[i].Stream || !ok || d.Message != want {
			t.Fatalf("seq %d: %q %+v, want record %d (%q)", r.Seq, r.Stream, r.Body, i, c.recs[i].Stream)
		}
	}
	ri, ii, groups := 0, 0, 0
	var groupRecs, groupBytes int
	var prevAt int64
	for k, u := range c.units {
		at := got[ri].At
		for _, r := range got[ri : ri+u.Records] {
			if r.At != at {
				t.Fatalf("unit %d of %d straddles two groups: seq %d at %d, seq %d at %d",
					k+1, len(c.units), got[ri].Seq, at, r.Seq, r.At)
			}
		}
		if start := k == 0 || at != prevAt; start != starts[k] {
			t.Fatalf("unit %d of %d: starts a group %v, want %v (greedy packing)", k+1, len(c.units), start, starts[k])
		}
		if k == 0 || at != prevAt {
			groups++
			groupRecs, groupBytes = 0, 0
		}
		groupRecs += u.Records
		for _, r := range c.recs[ri : ri+u.Records] {
			p, _ := record.Prepare(r, j.opts.RecordBytesMax)
			groupBytes += p.Size()
		}
		for _, e := range c.index[ii : ii+u.Index] {
			groupBytes += len(e.ID) + len(e.Value)
			v, ok, err := j.Index(e.ID)
			if err != nil || !ok || string(v) != string(e.Value) {
				t.Fatalf("Index(%s) = %q %v %v, want %q", e.ID, v, ok, err, e.Value)
			}
		}
		// A group over the caps holds one unit alone.
		over := groupRecs > j.opts.GroupRecordsMax || groupBytes > j.opts.GroupBytesMax
		if over && (groupRecs != u.Records || k+1 < len(c.units) && !starts[k+1]) {
			t.Fatalf("the group of unit %d holds %d records and %d bytes, over GroupRecordsMax %d or GroupBytesMax %d, and not that unit alone",
				k+1, groupRecs, groupBytes, j.opts.GroupRecordsMax, j.opts.GroupBytesMax)
		}
		prevAt = at
		ri += u.Records
		ii += u.Index
	}
	return groups
}

// appendUnitsChecked makes one call on a journal whose only writer is the
// test, and checks it all with packModel's packing.
func appendUnitsChecked(t *testing.T, j *Journal, c unitsCall) {
	t.Helper()
	starts, ok := packModel(c, c.unitBytes(t, j.opts.RecordBytesMax), j.opts)
	if !ok {
		t.Fatal("test bug: a unit is too large")
	}
	base, m0 := j.LastSeq(), j.Metrics()
	seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, c.units)
	if err != nil {
		t.Fatalf("AppendUnits: %v", err)
	}
	groups := checkUnitsAppended(t, j, c, base, seqs, starts)
	if groups < 2 {
		t.Fatalf("the call took %d group, want it split", groups)
	}
	m := j.Metrics()
	if m.Groups-m0.Groups != uint64(groups) || m.Records-m0.Records != uint64(len(c.recs)) {
		t.Fatalf("metrics count %d groups and %d records, want %d and %d",
			m.Groups-m0.Groups, m.Records-m0.Records, groups, len(c.recs))
	}
}

func TestAppendUnitsSplitsByBytes(t *testing.T) { // RL-4, RL-11
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), RecordBytesMax: 1 << 10, GroupBytesMax: 4 << 10})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_before", "before"))
	var shapes []unitShape
	for k := range 12 {
		shapes = append(shapes, unitShape{recs: 1 + k%3, index: k % 2, pad: 600, ipad: 100 * (k % 3)})
	}
	c := makeUnits("b", shapes) // about 14 KiB: four groups at least
	if len(c.recs) > GroupRecordsMaxDefault {
		t.Fatal("test bug: the record count alone would split the call")
	}
	appendUnitsChecked(t, j, c)
	mustAppend(t, j, debugRec("wf_after", "after")) // the writer goes on

	// The default limits, with 400 KiB payloads: 24 units of one record
	// are about 9.6 MiB, over the 4 MiB of a group.
	j2 := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock()})
	defer func() { _ = j2.Close() }()
	shapes = shapes[:0]
	for range 24 {
		shapes = append(shapes, unitShape{recs: 1, index: 1, pad: 400 << 10})
	}
	appendUnitsChecked(t, j2, makeUnits("big", shapes))
}

func TestAppendUnitsSplitsByRecords(t *testing.T) { // RL-4, RL-11
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), GroupRecordsMax: 4})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_before", "before"))
	var shapes []unitShape
	for k := range 10 {
		shapes = append(shapes, unitShape{recs: 1 + (k*7)%3, index: 1})
	}
	appendUnitsChecked(t, j, makeUnits("r", shapes))
}

// TestAppendUnitsNeverSplitsAUnit uses shapes where filling groups record
// by record (or byte by byte) would cut units in two.
func TestAppendUnitsNeverSplitsAUnit(t *testing.T) { // RL-4
	t.Parallel()
	t.Run("records", func(t *testing.T) {
		j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), GroupRecordsMax: 4})
		defer func() { _ = j.Close() }()
		c := makeUnits("r", []unitShape{{recs: 3}, {recs: 3}, {recs: 3}, {recs: 3}})
		seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, c.units)
		if err != nil {
			t.Fatal(err)
		}
		if g := checkUnitsAppended(t, j, c, 0, seqs, []bool{true, true, true, true}); g != 4 {
			t.Fatalf("%d groups, want one per unit", g)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), RecordBytesMax: 1 << 10, GroupBytesMax: 2 << 10})
		defer func() { _ = j.Close() }()
		// Units of about 1.5 KiB (two records plus an index value): two
		// never fit in a group, half of the next one always would.
		c := makeUnits("b", []unitShape{{recs: 2, index: 1, pad: 500, ipad: 400}, {recs: 2, index: 1, pad: 500, ipad: 400}, {recs: 2, index: 1, pad: 500, ipad: 400}})
		starts, ok := packModel(c, c.unitBytes(t, 1<<10), j.opts)
		if !ok || !starts[1] || !starts[2] {
			t.Fatalf("test bug: units must not share groups (%v %v)", starts, ok)
		}
		seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, c.units)
		if err != nil {
			t.Fatal(err)
		}
		if g := checkUnitsAppended(t, j, c, 0, seqs, starts); g != 3 {
			t.Fatalf("%d groups, want one per unit", g)
		}
	})
}

// refused checks that a call failed with want and appended nothing: no
// seq, no request joined a group, no index entry.
func refused(t *testing.T, j *Journal, c unitsCall, want error, msg string) {
	t.Helper()
	last, taken := j.LastSeq(), j.m.taken.Load()
	seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, c.units)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("AppendUnits: %v, want %v naming %q", err, want, msg)
	}
	if seqs != nil || j.LastSeq() != last || j.m.taken.Load() != taken {
		t.Fatalf("refused call: seqs %v, LastSeq %d (was %d), %d requests joined", seqs, j.LastSeq(), last, j.m.taken.Load()-taken)
	}
	for _, e := range c.index {
		if record.ValidateStream(e.ID) != nil {
			continue
		}
		if _, ok, err := j.Index(e.ID); ok || err != nil {
			t.Fatalf("refused call: Index(%s) = %v %v", e.ID, ok, err)
		}
	}
}

func TestAppendUnitsUnitTooLarge(t *testing.T) { // RL-4, RL-11
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), RecordBytesMax: 1 << 10, GroupBytesMax: 2 << 10, GroupRecordsMax: 4,
		UnitBytesMax: 3 << 10, UnitRecordsMax: 6})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_before", "before"))
	small := unitShape{recs: 2, index: 1, pad: 500}
	// Unit 2 is over UnitBytesMax by its records; units 1 and 3 alone
	// would each fit in a group, and do go in when unit 2 is left out.
	c := makeUnits("b", []unitShape{small, {recs: 4, pad: 800}, small})
	refused(t, j, c, record.ErrTooLarge, "unit 2 of 3")
	// ... or by an index value.
	refused(t, j, makeUnits("i", []unitShape{small, small, {recs: 1, index: 3, pad: 100, ipad: 1000}}), record.ErrTooLarge, "unit 3 of 3")
	// ... or over UnitRecordsMax.
	refused(t, j, makeUnits("r", []unitShape{{recs: 1}, {recs: 7}, {recs: 1}}), record.ErrTooLarge, "unit 2 of 3")
	// Nil units: one unit, under the same caps.
	c = makeUnits("nb", []unitShape{{recs: 4, pad: 800}})
	c.units = nil
	refused(t, j, c, record.ErrTooLarge, "UnitBytesMax")
	c = makeUnits("n", []unitShape{{recs: 7}})
	c.units = nil
	refused(t, j, c, record.ErrTooLarge, "UnitRecordsMax")
	ok := makeUnits("ok", []unitShape{small, small, small})
	if _, err := j.AppendUnits(context.Background(), ok.index, ok.recs, ok.units); err != nil {
		t.Fatalf("the same units without the large one: %v", err)
	}
}

// A unit larger than a group, but within the unit caps, commits alone in
// a group of its own (RL-4: it must be one batch), between the groups of
// its neighbours; a lone append as large does too.
func TestAppendUnitsLargerThanAGroupGoAlone(t *testing.T) { // RL-4, RL-11
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), RecordBytesMax: 1 << 10, GroupBytesMax: 2 << 10, GroupRecordsMax: 4})
	defer func() { _ = j.Close() }()
	small := unitShape{recs: 1, pad: 100}
	for _, c := range []unitsCall{
		makeUnits("b", []unitShape{small, {recs: 3, pad: 900}, small}), // over GroupBytesMax
		makeUnits("r", []unitShape{small, {recs: 9}, small, small}),    // over GroupRecordsMax
	} {
		starts, ok := packModel(c, c.unitBytes(t, 1<<10), j.opts)
		if !ok || !starts[1] || !starts[2] {
			t.Fatalf("test bug: the large unit must be alone (%v %v)", starts, ok)
		}
		base := j.LastSeq()
		seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, c.units)
		if err != nil {
			t.Fatalf("AppendUnits: %v", err)
		}
		checkUnitsAppended(t, j, c, base, seqs, starts)
	}
	c := makeUnits("lone", []unitShape{{recs: 9, pad: 300}})
	base := j.LastSeq()
	seqs, err := j.AppendIndexed(context.Background(), c.index, c.recs...)
	if err != nil {
		t.Fatalf("AppendIndexed of 9 records: %v", err)
	}
	checkUnitsAppended(t, j, c, base, seqs, []bool{true})
}

func TestAppendUnitsBadUnits(t *testing.T) { // RL-4
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{RecordBytesMax: 1 << 10, GroupBytesMax: 2 << 10, GroupRecordsMax: 4})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_before", "before"))
	shapes := []unitShape{{recs: 2, index: 1, pad: 500}, {recs: 2, index: 1, pad: 500}, {recs: 2, index: 1, pad: 500}}
	for _, tc := range []struct {
		name  string
		units []Unit
		msg   string
	}{
		{"records short", []Unit{{2, 1}, {2, 1}, {1, 1}}, "3 units hold 5 records"},
		{"records over", []Unit{{2, 1}, {2, 1}, {3, 1}}, "unit 3 of 3"},
		{"index short", []Unit{{2, 1}, {2, 1}, {2, 0}}, "2 index entries"},
		{"index over", []Unit{{2, 1}, {2, 2}, {2, 1}}, "unit 3 of 3"},
		{"no records", []Unit{{2, 1}, {0, 0}, {2, 1}, {2, 1}}, "unit 2 of 4"},
		{"index without a record", []Unit{{2, 1}, {2, 0}, {0, 1}, {2, 1}}, "unit 3 of 4"},
		{"negative records", []Unit{{2, 1}, {-1, 1}, {5, 1}}, "unit 2 of 3"},
		{"negative index", []Unit{{2, 2}, {2, -1}, {2, 1}}, "unit 2 of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := makeUnits(strings.ReplaceAll(tc.name, " ", "_"), shapes)
			c.units = tc.units
			refused(t, j, c, record.ErrInvalid, tc.msg)
		})
	}
	// An invalid record or index entry in a late unit fails the call
	// before its first units, which would go in a group of their own,
	// join one.
	c := makeUnits("badrec", shapes)
	c.recs[5].Body = (*record.Debug)(nil)
	refused(t, j, c, record.ErrInvalid, "record 6 of 6")
	c = makeUnits("badidx", shapes)
	c.index[2].ID = ""
	refused(t, j, c, record.ErrInvalid, "index entry 3 of 3")
	if _, err := j.AppendUnits(context.Background(), nil, nil, nil); !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("no records: %v", err)
	}
}

// TestAppendUnitsIndexTravelsWithUnit crashes a split call between its
// groups: the synced image holds the first group's units with their index
// entries and nothing of the later units, records or index entries.
func TestAppendUnitsIndexTravelsWithUnit(t *testing.T) { // RL-4
	t.Parallel()
	g := newGateFS()
	j := openJ(t, g, "db", Options{Clock: newTickClock(), GroupRecordsMax: 4})
	defer func() { _ = j.Close() }()
	mustAppend(t, j, debugRec("wf_before", "before"))
	// Six units of two records: three groups of two units each.
	shapes := make([]unitShape, 6)
	for k := range shapes {
		shapes[k] = unitShape{recs: 2, index: 1 + k%2}
	}
	c := makeUnits("x", shapes)
	// Hold the first WAL sync that comes after the first group of the call
	// was acknowledged: the second group's.
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(path string) {
		if strings.HasSuffix(path, ".log") && j.LastSeq() > 1 {
			once.Do(func() { close(held); <-release })
		}
	}
	g.syncHook.Store(&hook)
	defer once.Do(func() {}) // a failed test does not hold the sync
	done := appendUnitsAsync(j, c)
	<-held
	image := g.crashImage(0, 1) // what a crash now keeps: the synced state
	close(release)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	checkUnitsAppended(t, j, c, 1, res.seqs, []bool{true, false, true, false, true, false})

	ji := openJ(t, image, "db", Options{})
	defer func() { _ = ji.Close() }()
	recs := scanAll(t, ji)
	if len(recs) != 5 { // the record before, units 1 and 2
		t.Fatalf("the crash image holds %d records, want 5", len(recs))
	}
	ri, ii := 0, 0
	for k, u := range c.units {
		in := k < 2
		for i := ri; i < ri+u.Records; i++ {
			if have := i+2 <= len(recs) && msgOf(t, recs[i+1]) == c.recs[i].Body.(*record.Debug).Message; have != in {
				t.Fatalf("unit %d record %d in the image: %v, want %v", k+1, i-ri+1, have, in)
			}
		}
		for _, e := range c.index[ii : ii+u.Index] {
			v, ok, err := ji.Index(e.ID)
			if err != nil || ok != in || (in && string(v) != string(e.Value)) {
				t.Fatalf("unit %d: Index(%s) in the image = %q %v %v, want present %v", k+1, e.ID, v, ok, err, in)
			}
		}
		ri += u.Records
		ii += u.Index
	}
}

// TestAppendUnitsQueueDepthOne runs split calls beside single appends with
// one queue slot: a call that held a slot across its groups, or joined a
// group before the previous one's answer, would deadlock here.
func TestAppendUnitsQueueDepthOne(t *testing.T) {
	t.Parallel()
	j := openJ(t, vfs.NewMem(), "db", Options{Clock: newTickClock(), QueueDepth: 1, GroupRecordsMax: 4})
	defer func() { _ = j.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	type call struct {
		c    unitsCall
		seqs []uint64
	}
	const splitters, singles, rounds = 4, 2, 5
	calls := make(chan call, splitters*rounds)
	errs := make(chan error, splitters+singles)
	for s := range splitters {
		go func() {
			for n := range rounds {
				var shapes []unitShape
				for k := range 6 {
					shapes = append(shapes, unitShape{recs: 1 + (s+n+k)%3, index: k % 2})
				}
				c := makeUnits(fmt.Sprintf("s%dn%d", s, n), shapes)
				seqs, err := j.AppendUnits(ctx, c.index, c.recs, c.units)
				if err != nil {
					errs <- err
					return
				}
				calls <- call{c, seqs}
			}
			errs <- nil
		}()
	}
	for s := range singles {
		go func() {
			for n := range 2 * rounds {
				if _, err := j.Append(ctx, debugRec(fmt.Sprintf("wf_single%d", s), fmt.Sprint(n))); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range splitters + singles {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("appends with QueueDepth 1 did not finish: %v", ctx.Err())
		}
	}
	close(calls)
	for cl := range calls {
		ri := 0
		for k, u := range cl.c.units {
			var at int64
			for i := ri; i < ri+u.Records; i++ {
				r, err := j.Get(cl.seqs[i])
				if err != nil || msgOf(t, r) != cl.c.recs[i].Body.(*record.Debug).Message {
					t.Fatalf("seq %d: %v %v, want record %d of its call", cl.seqs[i], r, err, i)
				}
				if i > 0 && cl.seqs[i] <= cl.seqs[i-1] {
					t.Fatalf("seqs %v not in order", cl.seqs)
				}
				if i > ri && (cl.seqs[i] != cl.seqs[i-1]+1 || r.At != at) {
					t.Fatalf("unit %d (seqs %v) is not one stretch of one group", k+1, cl.seqs[ri:ri+u.Records])
				}
				at = r.At
			}
			ri += u.Records
		}
	}
	if rep, err := j.Verify(); err != nil || rep.Records != int(j.LastSeq()) {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// TestAppendUnitsCloseWaits closes the journal while a split call waits
// for its first group's sync: the call still appends every unit, and
// Close returns after it.
func TestAppendUnitsCloseWaits(t *testing.T) {
	t.Parallel()
	g := newGateFS()
	j := openJ(t, g, "db", Options{GroupRecordsMax: 2})
	held, release := holdSync(g)
	defer release()
	c := makeUnits("c", []unitShape{{recs: 2}, {recs: 2}, {recs: 2}})
	done := appendUnitsAsync(j, c)
	<-held
	for j.m.taken.Load() < 1 { // the call's first group joined
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- j.Close() }()
	<-j.closedCh // Close refuses new appends now
	if _, err := j.Append(context.Background(), debugRec("wf_late", "late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close began: %v, want ErrClosed", err)
	}
	release()
	res := <-done
	if res.err != nil || len(res.seqs) != 6 || res.seqs[5] != 6 {
		t.Fatalf("split call across Close: %v %v, want seqs 1..6", res.seqs, res.err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	j2 := openJ(t, g, "db", Options{})
	defer func() { _ = j2.Close() }()
	if recs := scanAll(t, j2); len(recs) != 6 {
		t.Fatalf("reopened journal holds %d records, want 6", len(recs))
	}
}

// TestAppendUnitsCancelBeforeJoin checks that ctx withdraws a split call
// only before its first group joined.
func TestAppendUnitsCancelBeforeJoin(t *testing.T) {
	t.Parallel()
	g := newGateFS()
	j := openJ(t, g, "db", Options{QueueDepth: 1, GroupRecordsMax: 2})
	defer func() { _ = j.Close() }()
	c := makeUnits("q", []unitShape{{recs: 2}, {recs: 2}})

	// Waiting for the only queue slot: ctx ends, nothing is appended.
	held, release := holdSync(g)
	first := make(chan error, 1)
	go func() { _, err := j.Append(context.Background(), debugRec("wf_a", "1")); first <- err }()
	<-held
	for j.m.taken.Load() < 1 { // "1" holds the only queue slot
		runtime.Gosched()
	}
	qctx := &queuedCtx{Context: context.Background(), done: make(chan struct{})}
	close(qctx.done)
	if _, err := j.AppendUnits(qctx, c.index, c.recs, c.units); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "queue space") {
		t.Fatalf("split call cancelled while waiting for queue space: %v", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if j.LastSeq() != 1 {
		t.Fatalf("LastSeq %d, want 1: the cancelled call appended", j.LastSeq())
	}

	// Cancelled once the first group joined: the call goes on to the end,
	// even when its second group has to wait for the queue slot, which an
	// append queued meanwhile takes first.
	held, release = holdSync(g)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	var seqs []uint64
	go func() {
		var err error
		seqs, err = j.AppendUnits(ctx, c.index, c.recs, c.units)
		done <- err
	}()
	<-held
	for j.m.taken.Load() < 2 { // the first group is in, holding the only slot
		runtime.Gosched()
	}
	xctx := &waitingCtx{Context: context.Background(), waiting: make(chan struct{})}
	go func() { _, err := j.Append(xctx, debugRec("wf_x", "x")); first <- err }()
	<-xctx.waiting // the other append waits for the slot
	cancel()
	release()
	if err := <-done; err != nil || len(seqs) != 4 || seqs[0] != 2 || seqs[1] != 3 || seqs[3]-seqs[2] != 1 {
		t.Fatalf("split call cancelled after its first group joined: %v %v, want seqs 2, 3 and two more", seqs, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if j.LastSeq() != 6 {
		t.Fatalf("LastSeq %d, want 6", j.LastSeq())
	}
}

// waitingCtx is a live context that closes waiting when an append asks
// for its Done channel, which join does only once it has to wait.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// TestAppendUnitsProperty draws unit shapes and limits: a call with a unit
// over the unit caps is refused whole, any other is appended in order,
// packed greedily, never splitting a unit (one larger than a group is
// alone in its own), with its index entries.
func TestAppendUnitsProperty(t *testing.T) { // RL-4, RL-11
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		opts := Options{
			Clock:           newTickClock(),
			RecordBytesMax:  1 << 10,
			GroupRecordsMax: rapid.IntRange(1, 8).Draw(rt, "group_records_max"),
			GroupBytesMax:   rapid.IntRange(1<<10, 6<<10).Draw(rt, "group_bytes_max"),
			QueueDepth:      rapid.IntRange(1, 4).Draw(rt, "queue_depth"),
		}
		opts.UnitRecordsMax = opts.GroupRecordsMax + rapid.IntRange(0, 4).Draw(rt, "unit_records_over")
		opts.UnitBytesMax = opts.GroupBytesMax + rapid.IntRange(0, 2<<10).Draw(rt, "unit_bytes_over")
		j, err := Open("db", withFS(opts, vfs.NewMem()))
		if err != nil {
			rt.Fatalf("Open: %v", err)
		}
		defer func() { _ = j.Close() }()
		for call := range rapid.IntRange(1, 3).Draw(rt, "calls") {
			n := rapid.IntRange(1, 12).Draw(rt, "units")
			shapes := make([]unitShape, n)
			for k := range shapes {
				shapes[k] = unitShape{
					recs:  rapid.IntRange(1, 5).Draw(rt, "recs"),
					index: rapid.IntRange(0, 2).Draw(rt, "index"),
					pad:   rapid.IntRange(0, 900).Draw(rt, "pad"),
					ipad:  rapid.IntRange(0, 600).Draw(rt, "ipad"),
				}
			}
			c := makeUnits(fmt.Sprint(call), shapes)
			if rapid.Bool().Draw(rt, "nil_units") {
				c.units = []Unit{{Records: len(c.recs), Index: len(c.index)}}
			}
			starts, fits := packModel(c, c.unitBytes(rt, opts.RecordBytesMax), j.opts)
			units := c.units
			if len(units) == 1 && rapid.Bool().Draw(rt, "as_nil") {
				units = nil
			}
			base, m0, taken := j.LastSeq(), j.Metrics(), j.m.taken.Load()
			seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, units)
			if !fits {
				if !errors.Is(err, record.ErrTooLarge) || j.LastSeq() != base || j.m.taken.Load() != taken {
					rt.Fatalf("call with a unit over the unit caps: %v, LastSeq %d (was %d), want ErrTooLarge and nothing appended", err, j.LastSeq(), base)
				}
				continue
			}
			if err != nil {
				rt.Fatalf("AppendUnits: %v", err)
			}
			groups := checkUnitsAppended(rt, j, c, base, seqs, starts)
			if m := j.Metrics(); m.Groups-m0.Groups != uint64(groups) {
				rt.Fatalf("metrics count %d groups, the log shows %d", m.Groups-m0.Groups, groups)
			}
		}
	})
}

func withFS(o Options, fs vfs.FS) Options {
	o.FS = fs
	return o
}

// unitsResult is what an AppendUnits call returned.
type unitsResult struct {
	seqs []uint64
	err  error
}

// appendUnitsAsync makes c's call on a goroutine of its own.
func appendUnitsAsync(j *Journal, c unitsCall) <-chan unitsResult {
	done := make(chan unitsResult, 1)
	go func() {
		seqs, err := j.AppendUnits(context.Background(), c.index, c.recs, c.units)
		done <- unitsResult{seqs, err}
	}()
	return done
}
