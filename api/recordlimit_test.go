package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// RL-11: a workflow state and a step output, each up to PayloadBytesMax,
// are merged into one value, which the codec caps at record.ValueBytesMax.
// So PayloadBytesMax is at most half of that whatever RecordBytesMax
// allows, and its default respects the bound too.
func TestRL11_PayloadBytesMaxWithinHalfValueBytesMax(t *testing.T) {
	t.Parallel()
	if api.PayloadBytesMaxLimit*2 > record.ValueBytesMax {
		t.Fatalf("PayloadBytesMaxLimit %d is more than half of record.ValueBytesMax %d", api.PayloadBytesMaxLimit, record.ValueBytesMax)
	}
	for _, n := range []int{api.PayloadBytesMaxLimit + 1, api.RecordBytesMaxLimit / 2} {
		opts := memOptions()
		opts.RecordBytesMax, opts.PayloadBytesMax = api.RecordBytesMaxLimit, n
		eng, err := api.Open(t.Context(), opts)
		var oe *api.OptionError
		if !errors.As(err, &oe) || !errors.Is(err, api.ErrInvalidOption) || oe.Field != "Options.PayloadBytesMax" ||
			!strings.Contains(err.Error(), "ValueBytesMax") {
			if eng != nil {
				eng.Close(t.Context())
			}
			t.Fatalf("PayloadBytesMax %d with RecordBytesMax %d: %v, want an *OptionError naming Options.PayloadBytesMax and ValueBytesMax",
				n, api.RecordBytesMaxLimit, err)
		}
	}
	for _, c := range []struct{ record, payload, want int }{
		{api.RecordBytesMaxLimit, 0, api.PayloadBytesMaxDefault},
		{api.RecordBytesMaxLimit, api.PayloadBytesMaxLimit, api.PayloadBytesMaxLimit},
		{api.RecordBytesMin, 0, api.RecordBytesMin / 2},
	} {
		opts := memOptions()
		opts.RecordBytesMax, opts.PayloadBytesMax = c.record, c.payload
		eng, err := api.Open(t.Context(), opts)
		if err != nil {
			t.Fatalf("RecordBytesMax %d, PayloadBytesMax %d: %v", c.record, c.payload, err)
		}
		got := api.EffectiveOptions(eng).PayloadBytesMax
		if err := eng.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got != c.want || got > api.PayloadBytesMaxLimit {
			t.Fatalf("RecordBytesMax %d, PayloadBytesMax %d: runs with PayloadBytesMax %d, want %d (at most %d)",
				c.record, c.payload, got, c.want, api.PayloadBytesMaxLimit)
		}
	}
}

// RL-11, WF-3: at the bound, a state and a step output of PayloadBytesMax
// each still merge within record.ValueBytesMax, so the merged state is
// measured and the workflow fails on its size, not the engine.
func TestRL11_StateAndOutputAtPayloadBytesMaxLimitMerge(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) {
		o.RecordBytesMax, o.PayloadBytesMax = api.RecordBytesMaxLimit, api.PayloadBytesMaxLimit
	})
	// {"a": s} encodes to len(s)+8 bytes: a fixmap, the key, a str32 header.
	const n = api.PayloadBytesMaxLimit - 8
	wfRegister(t, b.eng, api.NewWorkflow("big").Then("grow", fill("b", n)).Then("after", wfReturn(nil)))
	b.start()
	id := wfDispatch(b, "big", api.State{"a": strings.Repeat("a", n)})
	b.idle()
	info := wfWant(b, id, api.WorkflowFailed)
	if want := fmt.Sprintf("limit %d", api.PayloadBytesMaxLimit); !strings.HasPrefix(info.Error, `step "grow" (1 of 2): workflow state would be `) || !strings.HasSuffix(info.Error, want) {
		t.Fatalf("error %q, want the merged state's size %s", info.Error, want)
	}
	b.checkReplay()
}

// RL-11: RecordBytesMax also caps the records read back. Lowered below a
// record the journal already holds, Open fails with an error that is
// still corruption for errors.Is but names RecordBytesMax, the record's
// size and the way out; raised back, the journal opens with nothing lost.
func TestRL11_LoweredRecordBytesMaxNamesTheOption(t *testing.T) {
	t.Parallel()
	big := func(o *api.Options) { o.RecordBytesMax, o.PayloadBytesMax = 4<<20, 2<<20 }
	b := setup(t, big)
	if err := api.Handle(b.eng, "big", func(_ context.Context, _ *api.Delivery, in blob) error { return nil }); err != nil {
		t.Fatal(err)
	}
	payload := strings.Repeat("p", 1536<<10)
	id := b.enqueue("big", blob{S: payload})
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	b.eng = nil
	seq, size := largestRecord(t, b)
	if size <= api.RecordBytesMaxDefault {
		t.Fatalf("largest record is %d bytes, want more than the default RecordBytesMax", size)
	}

	b.opts.RecordBytesMax, b.opts.PayloadBytesMax = 0, 0
	eng, err := api.Open(b.ctx, b.opts)
	if err == nil {
		eng.Close(b.ctx)
		t.Fatal("Open with a RecordBytesMax below a record's size succeeded")
	}
	var ce *journal.CorruptError
	if !errors.Is(err, journal.ErrCorrupt) || !errors.As(err, &ce) || ce.Seq != seq {
		t.Fatalf("Open: %v, want a *journal.CorruptError at seq %d", err, seq)
	}
	t.Logf("open with the default RecordBytesMax: %v", err)
	for _, s := range []string{"RecordBytesMax", strconv.Itoa(size), "written with a higher RecordBytesMax"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("Open: %v\nwant it to mention %q", err, s)
		}
	}

	big(&b.opts)
	b.open()
	if err := api.Handle(b.eng, "big", func(_ context.Context, _ *api.Delivery, in blob) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if st := b.eng.Stats(); st.RecordsReplayed < seq {
		t.Fatalf("open stats %+v: want the record at seq %d replayed", st, seq)
	}
	b.wantStatus(id, api.JobPending)
	b.checkReplay()
}

// A record over RecordBytesMax that also fails its checksum is damage, not
// a lowered option: its error does not send the operator to raise
// RecordBytesMax.
func TestRL11_OversizedDamagedRecordIsPlainCorruption(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) { o.RecordBytesMax, o.PayloadBytesMax = 4<<20, 2<<20 })
	if err := api.Handle(b.eng, "big", func(_ context.Context, _ *api.Delivery, in blob) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b.enqueue("big", blob{S: strings.Repeat("p", 1536<<10)})
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	b.eng = nil
	seq, _ := largestRecord(t, b)
	flipRecordByte(t, b, seq, func(n int) int { return n / 2 }) // a payload byte: the checksum fails

	b.opts.RecordBytesMax, b.opts.PayloadBytesMax = 0, 0
	eng, err := api.Open(b.ctx, b.opts)
	if err == nil {
		eng.Close(b.ctx)
		t.Fatal("Open of a journal with a damaged record succeeded")
	}
	var ce *journal.CorruptError
	if !errors.Is(err, journal.ErrCorrupt) || !errors.As(err, &ce) || ce.Seq != seq {
		t.Fatalf("Open: %v, want a *journal.CorruptError at seq %d", err, seq)
	}
	t.Logf("open with the default RecordBytesMax: %v", err)
	if strings.Contains(err.Error(), "written with a higher RecordBytesMax") {
		t.Fatalf("Open: %v\nblames RecordBytesMax for a damaged record", err)
	}
}

// RL-5: a record the replay finds damaged refuses Open before the journal's
// read-write open changes the store. The replay used to run after it, so a
// refused journal had its WAL flushed into a new table and its MANIFEST
// rewritten, the old one deleted.
func TestRL5_ReplayRefusalLeavesTheDirectoryAsItWas(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		b.enqueue("work", msg{N: i})
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	b.eng = nil
	// A record of the engine's own stream, which no quarantine can set
	// aside (spec/reliability.md §4.4), and not in the final group: the
	// tail check does not read it.
	seq := firstRecordOf(t, b, record.EngineStream)
	flipRecordByte(t, b, seq, func(n int) int { return n - 1 }) // the checksum fails
	state := func() map[string]int64 {
		ls, err := b.fs.List(b.opts.Dir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, name := range ls {
			st, err := b.fs.Stat(b.fs.PathJoin(b.opts.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			out[name] = st.Size()
		}
		return out
	}
	before := state()
	eng, err := api.Open(b.ctx, b.opts)
	if err == nil {
		eng.Close(b.ctx)
		t.Fatal("Open of a journal with a damaged record succeeded")
	}
	var se *api.StartupError
	var ce *journal.CorruptError
	if !errors.As(err, &se) || se.Step != "replay" || !errors.As(err, &ce) || ce.Seq != seq {
		t.Fatalf("Open: %v, want a replay refusal at seq %d", err, seq)
	}
	if after := state(); !maps.Equal(before, after) {
		t.Fatalf("the refused Open changed the directory: %v, then %v", before, after)
	}
}

// flipRecordByte flips one byte of the closed journal's record seq, at
// at(its length).
func flipRecordByte(t *testing.T, b *testBundle, seq uint64, at func(n int) int) {
	t.Helper()
	rawEdit(t, b, func(db *pebble.DB) {
		val, closer, err := db.Get(record.LogKey(seq))
		if err != nil {
			t.Fatalf("raw get: %v", err)
		}
		val = bytes.Clone(val)
		_ = closer.Close()
		val[at(len(val))] ^= 0x01
		if err := db.Set(record.LogKey(seq), val, pebble.Sync); err != nil {
			t.Fatalf("raw set: %v", err)
		}
	})
}

// firstRecordOf returns the seq of the closed journal's first record of
// stream.
func firstRecordOf(t *testing.T, b *testBundle, stream string) (seq uint64) {
	t.Helper()
	rawEdit(t, b, func(db *pebble.DB) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: record.LogKey(0), UpperBound: record.LogKey(math.MaxUint64)})
		if err != nil {
			t.Fatalf("raw iter: %v", err)
		}
		defer it.Close()
		for it.First(); it.Valid() && seq == 0; it.Next() {
			s, _ := record.ParseLogKey(it.Key())
			if env, err := record.ParseEnvelope(s, it.Value(), record.RecordBytesMaxDefault); err == nil && env.Stream == stream {
				seq = s
			}
		}
	})
	if seq == 0 {
		t.Fatalf("no record of stream %q", stream)
	}
	return seq
}

// rawEdit opens the closed journal's Pebble store directly and runs f.
func rawEdit(t *testing.T, b *testBundle, f func(db *pebble.DB)) {
	t.Helper()
	db, err := pebble.Open(b.opts.Dir, &pebble.Options{FS: b.fs, FormatMajorVersion: pebble.FormatNewest, Logger: silentLogger{}})
	if err != nil {
		t.Fatalf("raw open: %v", err)
	}
	f(db)
	if err := db.Close(); err != nil {
		t.Fatalf("raw close: %v", err)
	}
}

// largestRecord returns the seq and stored size of the closed journal's
// largest record.
func largestRecord(t *testing.T, b *testBundle) (seq uint64, size int) {
	t.Helper()
	rawEdit(t, b, func(db *pebble.DB) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: record.LogKey(0), UpperBound: record.LogKey(math.MaxUint64)})
		if err != nil {
			t.Fatalf("raw iter: %v", err)
		}
		for it.First(); it.Valid(); it.Next() {
			if s, ok := record.ParseLogKey(it.Key()); ok && len(it.Value()) > size {
				seq, size = s, len(it.Value())
			}
		}
		if err := it.Close(); err != nil {
			t.Fatalf("raw iter: %v", err)
		}
	})
	return seq, size
}

// silentLogger keeps a raw Pebble open's recovery notes out of the test
// output.
type silentLogger struct{}

func (silentLogger) Infof(string, ...any)  {}
func (silentLogger) Errorf(string, ...any) {}
func (silentLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
