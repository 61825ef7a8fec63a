package sim

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// Seeds returns the seeds a simulation test runs: def of them by default,
// QUIRE_SEEDS=N of them for long runs, or exactly QUIRE_SEED=S (decimal or
// 0x hex) to reproduce one. -short divides the default count by 10 (not a
// count QUIRE_SEEDS asks for). The seeds are
// a fixed sequence, so a count names the same seeds on every machine.
// A def below 1 fails tb (Fatalf): a simulation test that runs no seed
// would pass without testing anything.
func Seeds(tb testing.TB, def int) []uint64 {
	tb.Helper()
	if def < 1 {
		tb.Fatalf("sim: def = %d, the default seed count of Run, Check or Seeds: want at least 1 (a simulation test that runs no seed passes without testing anything)", def)
	}
	if s := os.Getenv("QUIRE_SEED"); s != "" {
		seed, err := parseSeed(s)
		if err != nil {
			tb.Fatalf("QUIRE_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := def
	if s := os.Getenv("QUIRE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			tb.Fatalf("QUIRE_SEEDS=%q: want a positive integer", s)
		}
		n = v
	} else if testing.Short() {
		n = max(1, n/10)
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = mix(uint64(i) + 1)
	}
	return seeds
}

// parseSeed reads a seed as Seeds documents it: decimal, or hex after 0x
// (as failures print it). Go's other prefixes (0 for octal, 0b, 0o) and
// underscores are refused: "010" is ten, not eight.
func parseSeed(s string) (uint64, error) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return strconv.ParseUint(s[2:], 16, 64)
	}
	return strconv.ParseUint(s, 10, 64)
}

// Run runs scenario once per seed of [Seeds](t, def), each in a subtest
// named after its seed, on a world built with [WithT](subtest) and opts,
// and finishes the world; a world that failed fails its seed. It stops
// at the first failing seed. The
// scenario asserts through [World.T], the seed's subtest; a failure of t
// during a seed (an assertion on the outer t) is also charged to that
// seed and reported with what reproduces it. A def below 1 or a nil
// scenario fails t at once (Fatalf).
func Run(t *testing.T, def int, scenario func(w *World), opts ...Option) {
	t.Helper()
	if scenario == nil {
		t.Fatalf("sim.Run: the scenario is nil")
	}
	for _, seed := range Seeds(t, def) {
		ok := t.Run(fmt.Sprintf("seed=0x%x", seed), func(st *testing.T) {
			w := New(seed, append([]Option{WithT(st), under(t)}, opts...)...)
			scenario(w)
			finish(st, w)
		})
		if !ok {
			return
		}
	}
}

// checkRuns is how many times [Check] runs each seed.
const checkRuns = 3

// Check is the determinism check (T9, RL-8): it runs scenario three times
// per seed, twice as is and once under GOMAXPROCS=1, and fails unless the
// three traces are equal step by step and end in the same state digest.
// A mismatch names the first divergent step. Failures are reported as
// [Run] reports them, and so is a def below 1 or a nil scenario; a
// failure in the second or third run of a seed also says which run it
// was and that the runs before it passed.
func Check(t *testing.T, def int, scenario func(w *World), opts ...Option) {
	t.Helper()
	if scenario == nil {
		t.Fatalf("sim.Check: the scenario is nil")
	}
	outer := t
	for _, seed := range Seeds(t, def) {
		ok := t.Run(fmt.Sprintf("seed=0x%x", seed), func(t *testing.T) {
			var runs [checkRuns]*World
			for i := range runs {
				if i == checkRuns-1 {
					prev := runtime.GOMAXPROCS(1)
					defer runtime.GOMAXPROCS(prev)
				}
				w := New(seed, append([]Option{WithT(t), under(outer), checkRunOf(i + 1)}, opts...)...)
				scenario(w)
				finish(t, w)
				runs[i] = w
			}
			for i := 1; i < len(runs); i++ {
				if err := Diverge(runs[0], runs[i]); err != nil {
					t.Fatalf("RL-8: run %d of seed 0x%x diverges from run 0: %v\nrerun: %s", i, seed, err, rerunCommand(seed, t.Name()))
				}
			}
			t.Logf("seed 0x%x: trace hash %016x in 3 runs", seed, runs[0].TraceHash())
		})
		if !ok {
			return
		}
	}
}

// finish finishes the world of a seed's subtest t and fails t if the
// world failed, whether or not the failure was reported yet.
func finish(t *testing.T, w *World) {
	t.Helper()
	if err := w.Finish(); err != nil && !t.Failed() {
		t.Fatalf("%v", err)
	}
	if w.Failed() {
		t.FailNow()
	}
}

// Diverge compares two finished worlds' traces and final digests and
// describes the first difference, or returns nil. The description names
// the first step whose hash differs and, when the two runs' journals
// differ there, the first record that differs: its seq, kind and stream,
// and both versions.
func Diverge(a, b *World) error {
	for i := 0; i < min(len(a.steps), len(b.steps)); i++ {
		if a.steps[i] != b.steps[i] {
			return fmt.Errorf("step %d: %q (%016x) vs %q (%016x)%s", i, a.steps[i].What, a.steps[i].Hash, b.steps[i].What, b.steps[i].Hash, recordDiff(a, b, i))
		}
	}
	if len(a.steps) != len(b.steps) {
		return fmt.Errorf("%d steps vs %d", len(a.steps), len(b.steps))
	}
	if a.lastDig != b.lastDig {
		return fmt.Errorf("final digest %x vs %x", a.lastDig[:8], b.lastDig[:8])
	}
	return nil
}

// recordDiff describes the first journal record that differs between a
// and b among those mixed into their traces up to step i; if none does,
// it says so (then the step's instant or live digest differs).
func recordDiff(a, b *World, i int) string {
	n := min(a.mixedAt[i], b.mixedAt[i], len(a.orc.recs), len(b.orc.recs))
	for k := 0; k < n; k++ {
		ra, rb := a.orc.recs[k], b.orc.recs[k]
		if ra.Seq == rb.Seq && ra.At == rb.At && ra.Stream == rb.Stream && ra.Kind() == rb.Kind() && sameBody(ra, rb) {
			continue
		}
		return fmt.Sprintf(": first differing record seq %d (%s, stream %s)\n\t%s\nvs\n\t%s",
			ra.Seq, ra.Kind(), ra.Stream, describe(ra), describe(rb))
	}
	if a.mixedAt[i] != b.mixedAt[i] {
		return fmt.Sprintf(": the journal holds %d records after it vs %d", a.mixedAt[i], b.mixedAt[i])
	}
	return ": the same journal records up to it; the step's instant or live state digest differs"
}

// sameBody reports whether two records' bodies encode to the same bytes.
func sameBody(a, b record.Record) bool {
	ea, err1 := record.EncodeBody(a.Body)
	eb, err2 := record.EncodeBody(b.Body)
	return err1 == nil && err2 == nil && string(ea) == string(eb)
}

// describe prints a record for a divergence report, cut at 500 bytes.
func describe(r record.Record) string {
	s := fmt.Sprintf("seq %d at T0+%v %s %s %+v", r.Seq, time.Unix(0, r.At).Sub(t0), r.Stream, r.Kind(), r.Body)
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return s
}
