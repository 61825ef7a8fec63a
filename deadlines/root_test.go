package deadlines

import (
	"math"
	"math/big"
	"testing"
	"time"
)

func TestSD4_RootCutoffs(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		total   time.Duration
		reserve string
		g, hr   string
	}{
		{30 * time.Second, "2s", "28s", "30s"},
		{8 * time.Second, "2s", "6s", "8s"},
		{4 * time.Second, "1s", "3s", "4s"},
		{time.Second, "250ms", "750ms", "1s"},
	} {
		r := NewRoot(t0, row.total)
		if !r.Installed() {
			t.Fatalf("NewRoot is not installed")
		}
		wantDur(t, "reserve for "+row.total.String(), r.Reserve(), dur(row.reserve))
		wantTime(t, "G for "+row.total.String(), r.G(), ts(row.g))
		wantTime(t, "Hr for "+row.total.String(), r.Hr(), ts(row.hr))
		wantTime(t, "start", r.Start(), t0)
		wantDur(t, "total", r.Total(), row.total)
	}
}

func TestSD4_ZeroLengthRoot(t *testing.T) {
	t.Parallel()
	r := NewRoot(t0, 0)
	wantTime(t, "G", r.G(), t0)
	wantTime(t, "Hr", r.Hr(), t0)
	if !r.GracefulExpired(t0) || !r.Expired(t0) {
		t.Fatalf("zero-length root not expired at its start")
	}
	// Every force path ends at once, at Hr.
	wantTime(t, "force deadline", r.ForceDeadline(t0), t0)
	wantTime(t, "force deadline later", r.ForceDeadline(ts("1s")), t0)
	wantTime(t, "drain force deadline", r.DrainForceDeadline(t0, ts("1s")), t0)
	// A negative total counts as zero.
	n := NewRoot(t0, -time.Second)
	wantTime(t, "negative total Hr", n.Hr(), t0)
	wantTime(t, "negative total G", n.G(), t0)
}

func TestSD3_RootAnchoredAtFirstInitiation(t *testing.T) {
	t.Parallel()
	// Initiated at 0 with 10 s; the coordinator first runs at 20.
	root := NewRoot(t0, 10*time.Second)
	now := ts("20s")
	if !root.Expired(now) {
		t.Fatalf("Hr = 10 not past at 20")
	}
	// A fresh 30 s root installed afterwards changes nothing.
	again := root.Install(NewRoot(now, 30*time.Second))
	wantTime(t, "Hr", again.Hr(), ts("10s"))
	wantTime(t, "G", again.G(), ts("8s"))
	wantTime(t, "start", again.Start(), t0)
	wantDur(t, "total", again.Total(), 10*time.Second)
	if !again.Expired(now) {
		t.Fatalf("expired root renewed by re-installation")
	}
	// Installing over no root, or installing no root, is the identity.
	if got := noRoot.Install(root); got != root {
		t.Fatalf("install over no root = %+v", got)
	}
	if got := root.Install(noRoot); got != root {
		t.Fatalf("install of no root = %+v", got)
	}
	if noRoot.Shorten(t0).Installed() {
		t.Fatalf("Shorten installed a root")
	}
}

func TestSD5_InstallOnlyShortens(t *testing.T) {
	t.Parallel()
	// A 30 s local operation; roots with Hr 100 ms, then 40 ms, then 60 s.
	b := NewBudget(t0, 30*time.Second, noRoot)
	var root Root
	for _, total := range []time.Duration{100 * time.Millisecond, 40 * time.Millisecond, 60 * time.Second} {
		root = root.Install(NewRoot(t0, total))
		b = b.CapRoot(root)
	}
	wantTime(t, "Hr", root.Hr(), ts("40ms"))
	wantTime(t, "G", root.G(), ts("30ms"))
	wantTime(t, "operation ends", b.H, ts("40ms"))
	wantTime(t, "P", b.P, ts("30ms"))

	// Shorten lowers Hr, and G with it; it never raises either.
	r := NewRoot(t0, 30*time.Second).Shorten(ts("27s"))
	wantTime(t, "shortened Hr", r.Hr(), ts("27s"))
	wantTime(t, "shortened G", r.G(), ts("27s"))
	r = r.Shorten(ts("60s"))
	wantTime(t, "Hr after a later shorten", r.Hr(), ts("27s"))
}

func TestSD6_ForceDeadline(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second) // reserve 2 s, G 28, Hr 30
	wantTime(t, "force at 10", root.ForceDeadline(ts("10s")), ts("12s"))
	wantTime(t, "force at 28", root.ForceDeadline(ts("28s")), ts("30s"))
	wantTime(t, "force at 29", root.ForceDeadline(ts("29s")), ts("30s"))
	wantTime(t, "force after Hr", root.ForceDeadline(ts("31s")), ts("30s"))
	// An action's own cutoff is clamped to Hr the same way.
	wantTime(t, "own cutoff 35", root.Cap(ts("35s")), ts("30s"))
	wantTime(t, "own cutoff 12", root.Cap(ts("12s")), ts("12s"))
	// reserve' = min(reserve, Hr − G) after a shortening.
	short := root.Shorten(ts("28.5s"))
	wantTime(t, "force with reserve' = 0.5 s", short.ForceDeadline(ts("20s")), ts("20.5s"))
	// Installing a root keeps the smaller reserve (SD-5), which bounds the
	// force deadline with Hr − G: a 1.6 s root anchored at 28.5 s (reserve
	// 0.4 s) over the 30 s root leaves G 28 and Hr 30 but a reserve of
	// 0.4 s, so force at 28 ends at 28.4, not at 30.
	merged := root.Install(NewRoot(ts("28.5s"), dur("1.6s")))
	wantTime(t, "merged G", merged.G(), ts("28s"))
	wantTime(t, "merged Hr", merged.Hr(), ts("30s"))
	wantDur(t, "merged reserve", merged.Reserve(), dur("400ms"))
	wantTime(t, "force at 28 after the install", merged.ForceDeadline(ts("28s")), ts("28.4s"))
	// Without a root there is no reserve and no cap.
	wantTime(t, "no root", noRoot.ForceDeadline(ts("5s")), ts("5s"))
	wantTime(t, "no root Cap", noRoot.Cap(ts("5s")), ts("5s"))
}

func TestSD7_AfterGOnlyForcePathsRun(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second)
	if root.GracefulExpired(ts("27.999s")) {
		t.Fatalf("graceful expired before G")
	}
	if !root.GracefulExpired(ts("28s")) {
		t.Fatalf("graceful not expired at G")
	}
	// The drain still running at 28: its force path runs until 30.
	wantTime(t, "drain force deadline", root.ForceDeadline(ts("28s")), ts("30s"))
	if noRoot.GracefulExpired(t0) || noRoot.Expired(t0) {
		t.Fatalf("zero root expired")
	}
}

func TestSD8_DrainForceDeadline(t *testing.T) {
	t.Parallel()
	// 1 s root, explicit force at 0.2 s.
	root := NewRoot(t0, time.Second)
	force := ts("0.2s")
	wantTime(t, "coordinator force deadline", root.ForceDeadline(force), ts("0.45s"))
	b := NewBudget(t0, 30*time.Second, root)
	o := b.OwnerCutoff(ReasonForcedShutdown, force, root)
	wantTime(t, "attempt owner cutoff", o, ts("0.8s"))
	wantTime(t, "drain force deadline", root.DrainForceDeadline(force, o), ts("0.8s"))
	wantTime(t, "C", CooperativeDeadline(force, o, root), ts("0.35s"))
	// No attempts: the coordinator's deadline alone.
	wantTime(t, "no attempts", root.DrainForceDeadline(force, time.Time{}), ts("0.45s"))
	// Clamped to Hr.
	wantTime(t, "clamped", root.DrainForceDeadline(force, ts("5s")), ts("1s"))
}

func TestSD9_DispatcherStopDeadline(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second)
	wantTime(t, "long remaining", root.DispatcherStopDeadline(ts("28s")), ts("29.75s"))
	wantTime(t, "short remaining", root.DispatcherStopDeadline(ts("29.6s")), ts("29.9s"))
	wantTime(t, "past Hr", root.DispatcherStopDeadline(ts("31s")), ts("30s"))
}

func TestSD10_WorkedTimeline(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second)
	wantTime(t, "G", root.G(), ts("28s"))
	wantTime(t, "Hr", root.Hr(), ts("30s"))
	b := NewBudget(t0, 30*time.Second, noRoot)
	// 00.000: the handler deadline becomes min(P, 28).
	wantTime(t, "handler deadline", b.HandlerDeadline(root), ts("28s"))

	t.Run("G at 28", func(t *testing.T) {
		at, reason := b.Notification(root)
		wantTime(t, "N", at, ts("28s"))
		if reason != ReasonShutdownDeadline {
			t.Fatalf("reason = %v", reason)
		}
		o := b.OwnerCutoff(reason, at, root)
		wantTime(t, "owner cutoff", o, ts("29s"))
		wantTime(t, "window end", CooperativeDeadline(at, o, root), ts("28.25s"))
		wantTime(t, "E", b.CleanupCutoff(reason, at, root), ts("29s"))
		wantTime(t, "phase 3 force deadline", root.ForceDeadline(at), ts("30s"))
		wantTime(t, "drain force deadline", root.DrainForceDeadline(at, o), ts("30s"))
	})
	t.Run("second SIGTERM at 5", func(t *testing.T) {
		at := ts("5s")
		o := b.OwnerCutoff(ReasonForcedShutdown, at, root)
		wantTime(t, "owner cutoff", o, ts("6s"))
		wantTime(t, "window end", CooperativeDeadline(at, o, root), ts("5.25s"))
		wantTime(t, "drain force deadline", root.DrainForceDeadline(at, o), ts("7s"))
		wantTime(t, "Hr unchanged", root.Hr(), ts("30s"))
	})
}

func TestDL1_Arithmetic(t *testing.T) {
	t.Parallel()
	if !Expired(t0, t0) || Expired(ts("1ns"), t0) {
		t.Fatalf("Expired is not now >= x")
	}
	wantDur(t, "Remaining saturates", Remaining(t0, ts("1s")), 0)
	wantDur(t, "Remaining", Remaining(ts("1s"), t0), time.Second)
	wantDur(t, "d/4 truncates", quarter(7), 1)
	wantDur(t, "3/4 truncates", threeQuarters(7), 5)
	for _, d := range []time.Duration{0, 1, 2, 3, 4, 5, 7, 1<<62 + 3, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64} {
		want := new(big.Int).Mul(big.NewInt(int64(d)), big.NewInt(3))
		want.Quo(want, big.NewInt(4))
		if got := threeQuarters(d); int64(got) != want.Int64() {
			t.Fatalf("threeQuarters(%d) = %d, want %s", d, got, want)
		}
	}
	wantDur(t, "threeQuarters negative", threeQuarters(-8), 0)
	if addDuration(math.MaxInt64, 1) != math.MaxInt64 || addDuration(math.MinInt64, -1) != math.MinInt64 {
		t.Fatalf("addDuration does not saturate")
	}
	if subDuration(math.MinInt64, 1) != math.MinInt64 || subDuration(math.MaxInt64, -1) != math.MaxInt64 {
		t.Fatalf("subDuration does not saturate")
	}
	if Earliest(t0, ts("1s")) != t0 || Latest(t0, ts("1s")) != ts("1s") {
		t.Fatalf("Earliest/Latest")
	}
}

func TestWD5_WorkflowExpired(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	if WorkflowExpired(deadline, time.Date(2030, 1, 2, 9, 59, 59, 0, time.UTC)) {
		t.Fatalf("expired at 09:59:59")
	}
	if !WorkflowExpired(deadline, deadline) {
		t.Fatalf("not expired at 10:00:00")
	}
	// WD-4: no deadline, no expiry.
	if WorkflowExpired(time.Time{}, time.Unix(0, math.MaxInt64)) {
		t.Fatalf("a workflow without deadline expired")
	}
}
