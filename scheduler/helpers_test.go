package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// t0 is 10:00:00, the origin of the JB-4 example.
var t0 = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)

// ts returns t0 + d.
func ts(d time.Duration) time.Time { return t0.Add(d) }

// defaultRetry is the DL-4 default: 3 attempts, exponential 1 s, cap 60 s,
// no jitter.
var defaultRetry = RetryPolicy(3, deadlines.Backoff{}.WithDefaults())

const deliveryTimeout = 30 * time.Second

// seqIDs returns a Config.NewIDFunc that numbers ids from 1 after their
// prefix: "job_1", "wf_2", ...
func seqIDs() func(prefix string, _ time.Time) string {
	ids := 0
	return func(prefix string, _ time.Time) string { ids++; return prefix + strconv.Itoa(ids) }
}

// tb is what the helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// testBundle drives one Machine. Every decision must go through take, which
// keeps the decided records as the journal would hold them; replayed
// checks the RL-7 equality of live and replayed state over them.
type testBundle struct {
	t    tb
	m    *Machine
	cfg  Config
	init []record.Record // records folded into the state before NewMachine
	base uint64          // LastSeq of the initial state
	recs []record.Record // records the machine decided, in order
	// unregistered handlers are parked; every other name is registered.
	unregistered map[string]bool
	// pick chooses jitter candidates; picks logs the n of each call.
	pick  func(n int) int
	picks []int
	ids   int
}

// setup returns a machine over the state folded from init, with four
// workers and a 30 s delivery timeout. It does not recover: tests call
// b.recover (or m.Recover) first, or Dispatch starts nothing.
func setup(t tb, init []record.Record, mods ...func(*Config)) *testBundle {
	t.Helper()
	b := &testBundle{t: t, init: init, unregistered: map[string]bool{}}
	b.pick = func(int) int { return 0 }
	b.cfg = Config{
		Workers:         4,
		DeliveryTimeout: deliveryTimeout,
		RegisteredFunc:  func(h string) bool { return !b.unregistered[h] },
		NewIDFunc: func(prefix string, _ time.Time) string {
			b.ids++
			return fmt.Sprintf("%s%04d", prefix, b.ids)
		},
		PickFunc: func(n int) int {
			b.picks = append(b.picks, n)
			return b.pick(n)
		},
	}
	for _, mod := range mods {
		mod(&b.cfg)
	}
	st := foldAll(t, init)
	b.base = st.LastSeq
	b.m = NewMachine(b.cfg, st)
	return b
}

func workers(n int) func(*Config) { return func(c *Config) { c.Workers = n } }

func foldAll(t tb, recs ...[]record.Record) *replay.State {
	t.Helper()
	s := replay.New()
	for _, rs := range recs {
		if err := replay.Fold(s, rs...); err != nil {
			t.Fatalf("fold: %v", err)
		}
	}
	return s
}

// take keeps the records of d as the journal would append them, checking
// that their seqs continue the journal without a gap.
func (b *testBundle) take(d Decision) Decision {
	b.t.Helper()
	if err := checkUnits(d.Records, d.Index, d.AllUnits()); err != nil {
		b.t.Fatalf("%v", err)
	}
	for _, r := range d.Records {
		if want := b.base + uint64(len(b.recs)) + 1; r.Seq != want {
			b.t.Fatalf("decided %s with seq %d, want %d", r.Kind(), r.Seq, want)
		}
		b.recs = append(b.recs, r)
	}
	if b.m.NextSeq() != b.m.State().LastSeq+1 {
		b.t.Fatalf("NextSeq %d after LastSeq %d", b.m.NextSeq(), b.m.State().LastSeq)
	}
	return d
}

// replayed is the RL-7 check: folding the initial records and every record
// the machine decided, in order, into a fresh state gives the machine's
// state. It returns the replayed state.
func (b *testBundle) replayed() *replay.State {
	b.t.Helper()
	s := foldAll(b.t, b.init, b.recs)
	if replay.Digest(s) != replay.Digest(b.m.State()) {
		b.t.Fatalf("live state differs from its replay over %d records", len(b.init)+len(b.recs))
	}
	if !maps.Equal(s.Unique, b.m.State().Unique) || !maps.Equal(s.Tokens, b.m.State().Tokens) {
		b.t.Fatalf("live unique/tokens %v %v differ from replay %v %v", b.m.State().Unique, b.m.State().Tokens, s.Unique, s.Tokens)
	}
	return s
}

func (b *testBundle) recover(now time.Time) Decision {
	b.t.Helper()
	d, _ := b.m.Recover(now, "run_test", "test")
	return b.take(d)
}

func req(handler string) EnqueueRequest {
	return EnqueueRequest{Handler: handler, Queue: "default", Retry: defaultRetry, Payload: []byte{0xa1, 'x'}}
}

// enqueue enqueues r at now and checks that one job_enqueued was decided.
func (b *testBundle) enqueue(now time.Time, r EnqueueRequest) string {
	b.t.Helper()
	d, id := b.m.Enqueue(now, r)
	b.take(d)
	if len(d.Records) != 1 || d.Records[0].Kind() != record.KindJobEnqueued || len(d.Starts) != 0 {
		b.t.Fatalf("Enqueue decided %s", kinds(d))
	}
	if e := d.Records[0].Body.(*record.JobEnqueued); e.JobID != id {
		b.t.Fatalf("Enqueue returned %s, decided %s", id, e.JobID)
	}
	return id
}

// dispatch dispatches at now and returns the ids started, in order.
func (b *testBundle) dispatch(now time.Time) []*Start {
	b.t.Helper()
	d := b.take(b.m.Dispatch(now))
	if len(d.Records) != len(d.Starts) {
		b.t.Fatalf("Dispatch decided %d records for %d starts", len(d.Records), len(d.Starts))
	}
	for i, st := range d.Starts {
		r := d.Records[i]
		a, ok := r.Body.(*record.AttemptStarted)
		if !ok || st.Token != r.Seq || a.JobID != st.Job.ID || a.Attempt != st.Job.Attempts {
			b.t.Fatalf("start %d = token %d job %s attempt %d, record %s seq %d", i, st.Token, st.Job.ID, st.Job.Attempts, r.Kind(), r.Seq)
		}
		if !st.S.Equal(now) || st.H.Before(st.P) || a.StartAt != st.S.UnixNano() || a.HardAt != st.H.UnixNano() || a.NormalAt != st.P.UnixNano() {
			b.t.Fatalf("start %s budget S %v H %v P %v, record %+v", st.Job.ID, st.S, st.H, st.P, a)
		}
		if st.Job.AvailableAt > now.UnixNano() {
			b.t.Fatalf("job %s started at %v before its instant %v", st.Job.ID, now, time.Unix(0, st.Job.AvailableAt))
		}
		if b.m.State().PausedQueues[st.Job.Queue] {
			b.t.Fatalf("job %s of paused queue %s started", st.Job.ID, st.Job.Queue)
		}
	}
	if b.m.Inflight() > b.cfg.Workers {
		b.t.Fatalf("inflight %d over %d workers", b.m.Inflight(), b.cfg.Workers)
	}
	return d.Starts
}

func ids(starts []*Start) []string {
	out := make([]string, 0, len(starts))
	for _, s := range starts {
		out = append(out, s.Job.ID)
	}
	return out
}

func (b *testBundle) settle(now time.Time, res Result) Decision {
	b.t.Helper()
	d, err := b.m.Settle(now, res)
	if err != nil {
		b.t.Fatalf("Settle(token %d): %v", res.Token, err)
	}
	return b.take(d)
}

func fail(class Class) *Failure {
	return &Failure{Code: "E_BOOM", Message: "boom", Class: class}
}

func (b *testBundle) job(id string) *replay.Job {
	b.t.Helper()
	j, ok := b.m.State().Jobs[id]
	if !ok {
		b.t.Fatalf("job %s is not in the state", id)
	}
	return j
}

// only returns the one start of starts, for job id.
func only(t tb, starts []*Start, id string) *Start {
	t.Helper()
	if len(starts) != 1 || starts[0].Job.ID != id {
		t.Fatalf("started %v, want [%s]", ids(starts), id)
	}
	return starts[0]
}

func kinds(d Decision) []record.Kind {
	out := make([]record.Kind, 0, len(d.Records))
	for _, r := range d.Records {
		out = append(out, r.Kind())
	}
	return out
}

// wantKinds fails unless d decided exactly the kinds want, in order.
func wantKinds(t tb, d Decision, want ...record.Kind) {
	t.Helper()
	got := kinds(d)
	if len(got) != len(want) {
		t.Fatalf("decided %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("decided %v, want %v", got, want)
		}
	}
}

// refused fails unless err wraps want and d decides and starts nothing.
func refused(t tb, d Decision, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	if !d.Empty() || len(d.Index) != 0 {
		t.Fatalf("a refused input decided %v", kinds(d))
	}
}

// journal builds initial records for a state that exists before NewMachine
// (a previous run's journal).
type journal struct{ recs []record.Record }

func (j *journal) add(stream string, body record.Body) uint64 {
	seq := uint64(len(j.recs) + 1)
	j.recs = append(j.recs, record.Record{Seq: seq, Stream: stream, Body: body})
	return seq
}

func (j *journal) enqueue(id string, retry record.RetryPolicy) {
	j.add(id, &record.JobEnqueued{JobID: id, Handler: "h", Queue: "default", AvailableAt: t0.UnixNano(), Retry: retry})
}

func (j *journal) start(id string, attempt int32) uint64 {
	return j.add(id, &record.AttemptStarted{JobID: id, Attempt: attempt, StartAt: t0.UnixNano(),
		HardAt: ts(deliveryTimeout).UnixNano(), NormalAt: ts(deliveryTimeout - time.Second).UnixNano()})
}

// seqsOf returns the seqs of recs, as an [Appender] returns them.
func seqsOf(recs []record.Record) []uint64 {
	seqs := make([]uint64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	return seqs
}

// checkUnits returns an error unless units (nil: one unit) partition recs
// and index in order, each with at least one record: what an [Appender]
// requires (RL-4).
func checkUnits(recs []record.Record, index []IndexEntry, units []Unit) error {
	if units == nil {
		return nil
	}
	nr, ni := 0, 0
	for i, u := range units {
		if u.Records < 1 || u.Index < 0 {
			return fmt.Errorf("unit %d of %d is %+v", i, len(units), u)
		}
		nr += u.Records
		ni += u.Index
	}
	if nr != len(recs) || ni != len(index) {
		return fmt.Errorf("units cover %d records and %d index entries of %d and %d", nr, ni, len(recs), len(index))
	}
	return nil
}

// dispatchWithChecks turns on starting attempts and the periodic workflow
// deadline check (WD-6), whose first check runs at once.
func dispatchWithChecks(t *testing.T, r *Runner) {
	t.Helper()
	ctx := context.Background()
	if err := r.SetDispatch(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := r.EnableDeadlineChecks(ctx); err != nil {
		t.Fatal(err)
	}
}
