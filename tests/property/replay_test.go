package property

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/sim"
)

// journals are real journals written by the engine under sim: jobs with
// retries, workflows with delays, signals and deadlines, crashes and
// restarts. They are built once and shared by the replay properties.
var (
	journalsOnce sync.Once
	journals     [][]record.Record
)

func simJournals(t *rapid.T) [][]record.Record {
	journalsOnce.Do(func() {
		for seed := uint64(1); seed <= 6; seed++ {
			w := sim.New(seed)
			registerStd(w)
			runStd(w, 25)
			if err := w.Finish(); err != nil {
				t.Fatalf("building journal %d: %v", seed, err)
			}
			journals = append(journals, w.Records())
		}
	})
	return journals
}

func fold(t *rapid.T, s *replay.State, recs []record.Record) *replay.State {
	for _, r := range recs {
		if err := replay.Apply(s, r); err != nil {
			t.Fatalf("apply seq %d (%s): %v", r.Seq, r.Kind(), err)
		}
	}
	return s
}

// TestT10_SnapshotPlusTail (RL-7, RL-12): for an engine-written journal
// and a random cut, fold(prefix) -> Encode -> Decode -> fold(tail) has the
// digest of the full fold, and folding twice gives the same digest
// (the fold is deterministic). Totality over arbitrary records is
// replay's TestRL6_FoldIsTotal.
func TestT10_SnapshotPlusTail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		js := simJournals(t)
		recs := js[rapid.IntRange(0, len(js)-1).Draw(t, "journal")]
		cut := rapid.IntRange(0, len(recs)).Draw(t, "cut")
		full := replay.Digest(fold(t, replay.New(), recs))
		if again := replay.Digest(fold(t, replay.New(), recs)); again != full {
			t.Fatalf("RL-8: two folds of the same journal differ")
		}
		b, err := replay.Encode(fold(t, replay.New(), recs[:cut]))
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		s, err := replay.Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got := replay.Digest(fold(t, s, recs[cut:])); got != full {
			t.Fatalf("RL-12: snapshot at seq %d + tail differs from the full fold of %d records", cut, len(recs))
		}
	})
}

// registerStd installs a flaky job handler and a workflow with a delay, a
// signal wait and a 1 h deadline.
func registerStd(w *sim.World) {
	w.Register(func(e *api.Engine) error {
		if err := api.Handle(e, "work", func(ctx context.Context, d *api.Delivery, in int) error {
			if w.Fails(d.JobID(), d.Attempt(), 30) {
				return api.Retryable("FLAKY", errors.New("try again"))
			}
			return nil
		}, api.MaxAttempts(3), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
			return err
		}
		step := func(ctx context.Context, d *api.Delivery, s api.State) (api.State, error) {
			if w.Fails(d.JobID(), d.Attempt(), 20) {
				return nil, api.Retryable("FLAKY", errors.New("try again"))
			}
			return api.State{"n": d.Attempt()}, nil
		}
		return e.Register(api.NewWorkflow("flow").Then("a", step).Delay(5*time.Minute).
			WaitForSignal("go").Then("b", step).MustCompleteWithin(time.Hour))
	})
}

// runStd drives w through n seeded steps.
func runStd(w *sim.World, n int) {
	r := w.Rand()
	var wfs []string
	for i := 0; i < n && !w.Failed(); i++ {
		switch p := r.IntN(100); {
		case p < 10:
			w.Crash()
		case p < 15:
			w.Restart()
		case p < 50:
			w.Enqueue("work", i)
		case p < 65:
			wfs = append(wfs, w.Dispatch("flow", api.State{}))
		case p < 75 && len(wfs) > 0:
			w.Signal(wfs[r.IntN(len(wfs))], "go", nil)
		default:
			w.Advance(time.Duration(1+r.IntN(900)) * time.Second)
		}
	}
	w.Advance(2 * time.Hour)
}
