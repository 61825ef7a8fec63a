package deadlines

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestDL5_DefaultSchedule(t *testing.T) {
	t.Parallel()
	p := Backoff{}.WithDefaults()
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60}
	for i, w := range want {
		n := i + 1
		wantDur(t, "exponential Nominal", p.Nominal(n), w*time.Second)
		// r = 0: a single candidate and no draw.
		got := p.Delay(n, func(int) int { t.Fatalf("pick called without jitter"); return 0 })
		wantDur(t, "exponential Delay", got, w*time.Second)
	}
	for _, n := range []int{63, 64, 1000, math.MaxInt} {
		wantDur(t, "exponential Nominal, huge n", p.Nominal(n), 60*time.Second)
	}
	wantDur(t, "n < 1 counts as 1", p.Nominal(0), time.Second)
}

func TestDL5_Kinds(t *testing.T) {
	t.Parallel()
	fixed := Backoff{Kind: BackoffFixed, Base: 3 * time.Second, Max: 10 * time.Second}
	linear := Backoff{Kind: BackoffLinear, Base: 3 * time.Second, Max: 10 * time.Second}
	for n, w := range map[int][2]time.Duration{
		1:           {3 * time.Second, 3 * time.Second},
		2:           {3 * time.Second, 6 * time.Second},
		3:           {3 * time.Second, 9 * time.Second},
		4:           {3 * time.Second, 10 * time.Second},
		math.MaxInt: {3 * time.Second, 10 * time.Second},
	} {
		wantDur(t, "fixed", fixed.Nominal(n), w[0])
		wantDur(t, "linear", linear.Nominal(n), w[1])
	}

	// exponential: min(base·2^(n−1), cap) exactly, also when the cap lies
	// less than a doubling step above base·2^(n−1): 2 s is below a cap of
	// 2 s + 1 ns, so the cap is not reached yet.
	exp := Backoff{Kind: BackoffExponential, Base: time.Second, Max: 2*time.Second + 1}
	wantDur(t, "exponential just below the cap", exp.Nominal(2), 2*time.Second)
	wantDur(t, "exponential capped", exp.Nominal(3), 2*time.Second+1)

	// list: verbatim, no cap, no jitter, last entry repeats.
	list := Backoff{Kind: BackoffList, Base: time.Second, Max: time.Second, JitterRatio: 0.5,
		List: []time.Duration{500 * time.Millisecond, 5 * time.Second, 900 * time.Second}}
	for n, w := range map[int]time.Duration{1: 500 * time.Millisecond, 2: 5 * time.Second, 3: 900 * time.Second, 4: 900 * time.Second, math.MaxInt: 900 * time.Second} {
		wantDur(t, "list Nominal", list.Nominal(n), w)
		if c := list.Candidates(n); len(c) != 1 || c[0] != w {
			t.Fatalf("list Candidates(%d) = %v", n, c)
		}
	}
}

func TestDL5_JitterTable(t *testing.T) {
	t.Parallel()
	p := Backoff{Kind: BackoffExponential, Base: time.Second, Max: 5 * time.Second, JitterRatio: 0.2}
	ms := time.Millisecond
	for _, row := range []struct {
		n    int
		want []time.Duration
	}{
		{1, []time.Duration{1000 * ms, 1200 * ms}}, // 800 clamps to 1000, de-duplicated
		{2, []time.Duration{1600 * ms, 2000 * ms, 2400 * ms}},
		{3, []time.Duration{3200 * ms, 4000 * ms, 4800 * ms}},
		{4, []time.Duration{4000 * ms, 5000 * ms}}, // nominal capped at 5000; 6000 clamps to 5000
	} {
		got := p.Candidates(row.n)
		if !slices.Equal(got, row.want) {
			t.Fatalf("DL-5 n=%d: candidates %v, want %v", row.n, got, row.want)
		}
		for i, w := range row.want {
			if d := p.Delay(row.n, func(k int) int {
				if k != len(row.want) {
					t.Fatalf("pick(%d), want pick(%d)", k, len(row.want))
				}
				return i
			}); d != w {
				t.Fatalf("DL-5 n=%d pick %d: %v, want %v", row.n, i, d, w)
			}
		}
	}
}

func TestDL5_SpreadRoundsToMillisecond(t *testing.T) {
	t.Parallel()
	// nominal 1001 ms, r = 0.25: 250.25 ms rounds to 250 ms.
	p := Backoff{Kind: BackoffFixed, Base: 1001 * time.Millisecond, Max: 2 * time.Second, JitterRatio: 0.25}
	want := []time.Duration{1001 * time.Millisecond, 1251 * time.Millisecond}
	if got := p.Candidates(1); !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
	// nominal 1002 ms, r = 0.25: 250.5 ms rounds half away from zero to 251 ms.
	p.Base = 1002 * time.Millisecond
	want = []time.Duration{1002 * time.Millisecond, 1253 * time.Millisecond}
	if got := p.Candidates(1); !slices.Equal(got, want) {
		t.Fatalf("candidates %v, want %v", got, want)
	}
}

func TestDL5_DelayRejectsBadPick(t *testing.T) {
	t.Parallel()
	p := Backoff{Base: time.Second, Max: 5 * time.Second, JitterRatio: 0.2}
	defer func() {
		if recover() == nil {
			t.Fatalf("Delay accepted an index out of range")
		}
	}()
	p.Delay(2, func(k int) int { return k })
}

func TestBackoffKindNames(t *testing.T) {
	t.Parallel()
	for k, name := range map[BackoffKind]string{
		BackoffExponential: "exponential", BackoffFixed: "fixed", BackoffLinear: "linear", BackoffList: "list",
	} {
		if k.String() != name {
			t.Fatalf("%d.String() = %q, want %q", k, k.String(), name)
		}
		if got, ok := ParseBackoffKind(name); !ok || got != k {
			t.Fatalf("ParseBackoffKind(%q) = %v, %v", name, got, ok)
		}
	}
	if _, ok := ParseBackoffKind("geometric"); ok {
		t.Fatalf("ParseBackoffKind accepted an unknown name")
	}
	if s := BackoffKind(9).String(); s != "BackoffKind(9)" {
		t.Fatalf("String of an undefined kind = %q", s)
	}
}
