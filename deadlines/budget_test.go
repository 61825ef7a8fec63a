package deadlines

import (
	"testing"
	"time"
)

var noRoot Root

func TestDL7_HardCutoff(t *testing.T) {
	t.Parallel()
	// Pending since 11:00 does not count; the slot is acquired at 12:00:05.
	s := time.Date(2030, 1, 2, 12, 0, 5, 0, time.UTC)
	b := NewBudget(s, 30*time.Second, noRoot)
	if want := time.Date(2030, 1, 2, 12, 0, 35, 0, time.UTC); !b.H.Equal(want) {
		t.Fatalf("H = %v, want %v", b.H, want)
	}
	// Under a root, H = cap_root(S + T).
	b = NewBudget(t0, 30*time.Second, NewRoot(t0, 10*time.Second))
	wantTime(t, "H", b.H, ts("10s"))
	wantTime(t, "P", b.P, ts("9s"))
}

func TestDL8_OneBudgetForThePipeline(t *testing.T) {
	t.Parallel()
	// Before takes 10 s and the handler 18 s: the Afters have until P = S + 29 s.
	b := NewBudget(t0, 30*time.Second, noRoot)
	wantDur(t, "Remaining after Before and handler", b.Remaining(noRoot, ts("28s")), time.Second)
}

func TestDL9_ReserveTable(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		t    time.Duration
		r, p string
	}{
		{30 * time.Second, "1s", "29s"},
		{4 * time.Second, "1s", "3s"},
		{5 * time.Second, "1s", "4s"},
		{2 * time.Second, "500ms", "1.5s"},
		{100 * time.Millisecond, "25ms", "75ms"},
	} {
		b := NewBudget(t0, row.t, noRoot)
		wantTime(t, "H", b.H, t0.Add(row.t))
		wantDur(t, "R for T="+row.t.String(), b.Reserve(), dur(row.r))
		wantTime(t, "P for T="+row.t.String(), b.P, ts(row.p))
	}
	// Already expired: P == H.
	for _, tt := range []time.Duration{0, -time.Second} {
		b := NewBudget(t0, tt, noRoot)
		wantTime(t, "expired P", b.P, b.H)
	}
	// A root whose Hr is before S: H = Hr <= S, so P == H.
	b := NewBudget(t0, 30*time.Second, NewRoot(ts("-20s"), 10*time.Second))
	wantTime(t, "H under an expired root", b.H, ts("-10s"))
	wantTime(t, "P under an expired root", b.P, b.H)
}

func TestDL10_CapsOnlyShrink(t *testing.T) {
	t.Parallel()
	b := NewBudget(t0, 30*time.Second, noRoot)
	wantTime(t, "H", b.H, ts("30s"))
	wantTime(t, "P", b.P, ts("29s"))
	b = b.Cap(ts("100ms"))
	wantTime(t, "H after cap(100ms)", b.H, ts("100ms"))
	wantTime(t, "P after cap(100ms)", b.P, ts("75ms"))
	b = b.Cap(ts("30s"))
	wantTime(t, "H after cap(30s)", b.H, ts("100ms"))
	wantTime(t, "P after cap(30s)", b.P, ts("75ms"))
	if b.S != t0 {
		t.Fatalf("S changed: %v", b.S)
	}
	// P2 = min(P, H2 − R2): a recorded P is never raised by a cap.
	lit := Budget{S: t0, H: ts("30s"), P: ts("10s")}.Cap(ts("20s"))
	wantTime(t, "H of a literal budget", lit.H, ts("20s"))
	wantTime(t, "P of a literal budget", lit.P, ts("10s"))
}

func TestDL12_HandlerDeadline(t *testing.T) {
	t.Parallel()
	t.Run("example 1", func(t *testing.T) {
		b := NewBudget(t0, 30*time.Second, noRoot)
		wantTime(t, "D", b.HandlerDeadline(noRoot), ts("29s"))
		wantDur(t, "Remaining at S+28.5s", b.Remaining(noRoot, ts("28.5s")), 500*time.Millisecond)
		wantDur(t, "Remaining at S+29.2s", b.Remaining(noRoot, ts("29.2s")), 0)
	})
	t.Run("example 2", func(t *testing.T) {
		b := NewBudget(ts("-10s"), 50*time.Second, noRoot)
		wantTime(t, "D before the root", b.HandlerDeadline(noRoot), ts("39s"))
		root := NewRoot(t0, 30*time.Second)
		capped := b.CapRoot(root)
		wantTime(t, "H", capped.H, ts("30s"))
		wantTime(t, "P", capped.P, ts("29s"))
		wantTime(t, "D after the root", b.HandlerDeadline(root), ts("28s"))
		wantTime(t, "D from the capped budget", capped.HandlerDeadline(root), ts("28s"))
	})
}

func TestDL16_DeadlineReasonStampedAtP(t *testing.T) {
	t.Parallel()
	// T = 2 s: the reason is stamped at P = 1.5 s, whenever it is observed.
	b := NewBudget(t0, 2*time.Second, noRoot)
	n, reason := b.Notification(noRoot)
	wantTime(t, "N", n, ts("1.5s"))
	if reason != ReasonDeliveryTimeout {
		t.Fatalf("reason = %v", reason)
	}
}

func TestDL18_WhichReasonFires(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second) // G = 28
	for _, c := range []struct {
		name   string
		s      string
		t      time.Duration
		root   Root
		n      string
		reason Reason
	}{
		{"no root", "0s", 30 * time.Second, noRoot, "29s", ReasonDeliveryTimeout},
		{"P before G", "-5s", 30 * time.Second, root, "24s", ReasonDeliveryTimeout},
		{"tie goes to shutdown", "0s", 29 * time.Second, root, "28s", ReasonShutdownDeadline}, // P = 28 = G
		{"G before P", "0s", 30 * time.Second, root, "28s", ReasonShutdownDeadline},
		// SD-8, DL-6: under a 2 s root (G = 1.5) an attempt capped to Hr
		// = 2 gets P = 2 − min(12/4, 1) = 1, before G. The cutoff is the
		// shutdown's: the attempt is not charged a delivery timeout.
		{"root's cap moves P before G", "-10s", 30 * time.Second, NewRoot(t0, 2*time.Second), "1s", ReasonShutdownDeadline},
		// Its own hard cutoff before Hr: its own timeout fires first.
		{"own H before a short root's", "-0.5s", 2400 * time.Millisecond, NewRoot(t0, 2*time.Second), "1.3s", ReasonDeliveryTimeout},
	} {
		b := NewBudget(ts(c.s), c.t, noRoot)
		n, reason := b.Notification(c.root)
		wantTime(t, c.name+": N", n, ts(c.n))
		if reason != c.reason {
			t.Fatalf("%s: reason %v, want %v", c.name, reason, c.reason)
		}
	}

	// Forcing the running attempts.
	for _, c := range []struct {
		forced bool
		now    string
		want   Reason
	}{
		{true, "1s", ReasonForcedShutdown},
		{true, "29s", ReasonForcedShutdown},
		{false, "28s", ReasonShutdownDeadline},
		{false, "27.999999999s", ReasonRuntimeFailure},
	} {
		if got := ForceReason(c.forced, root, ts(c.now)); got != c.want {
			t.Fatalf("ForceReason(%v, %s) = %v, want %v", c.forced, c.now, got, c.want)
		}
	}
	if got := ForceReason(false, noRoot, t0); got != ReasonRuntimeFailure {
		t.Fatalf("ForceReason without a root = %v", got)
	}
}

func TestDL15_ReasonNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    Reason
		name string
	}{
		{ReasonNone, "none"},
		{ReasonDeliveryTimeout, "delivery_timeout"},
		{ReasonShutdownDeadline, "shutdown_deadline"},
		{ReasonForcedShutdown, "forced_shutdown"},
		{ReasonRuntimeFailure, "runtime_failure"},
		{ReasonRuntimeCancellation, "runtime_cancellation"},
	} {
		if c.r.String() != c.name {
			t.Fatalf("%d.String() = %q, want %q", c.r, c.r.String(), c.name)
		}
		if got, ok := ParseReason(c.name); !ok || got != c.r {
			t.Fatalf("ParseReason(%q) = %v, %v", c.name, got, ok)
		}
	}
	if s := Reason(6).String(); s != "Reason(6)" {
		t.Fatalf("undefined reason String = %q", s)
	}
	if _, ok := ParseReason("timeout"); ok {
		t.Fatalf("ParseReason accepted an unknown name")
	}
}

func TestDL21_OwnerCutoff(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second)
	// Root 30 s, force at 5 s: F(5) = min(5 + min(18.75, 1), 30) = 6.
	wantTime(t, "F(5)", root.OwnerCutoff(ts("5s")), ts("6s"))
	// Without a root, F(at) = at + 1 s.
	wantTime(t, "F without root", noRoot.OwnerCutoff(ts("5s")), ts("6s"))
	// Late in a root the last quarter stays free: F(29) = 29 + 0.75.
	wantTime(t, "F(29)", root.OwnerCutoff(ts("29s")), ts("29.75s"))
	// At or after Hr, F = Hr.
	wantTime(t, "F(31)", root.OwnerCutoff(ts("31s")), ts("30s"))
	// Three quarters is d*3/4 in integer nanoseconds (DL-1), not (d/4)*3:
	// with Hr − at = 1 s + 2 ns, d*3/4 = 750 000 001.5 ns, truncated.
	wantTime(t, "F(Hr − 1 s − 2 ns)", root.OwnerCutoff(ts("28.999999998s")), ts("29.749999999s"))

	b := NewBudget(t0, 30*time.Second, noRoot)
	wantTime(t, "O for a timeout", b.OwnerCutoff(ReasonDeliveryTimeout, ts("29s"), root), ts("30s"))
	wantTime(t, "O with no reason", b.OwnerCutoff(ReasonNone, ts("29s"), root), ts("30s"))
	wantTime(t, "O for force at 5", b.OwnerCutoff(ReasonForcedShutdown, ts("5s"), root), ts("6s"))
	// O = min(H, F): H wins when it is earlier.
	short := NewBudget(t0, 500*time.Millisecond, noRoot)
	wantTime(t, "O = H", short.OwnerCutoff(ReasonRuntimeFailure, ts("100ms"), noRoot), ts("500ms"))
}

func TestDL22_CooperativeDeadlineTable(t *testing.T) {
	t.Parallel()
	type rootSpec struct {
		start string
		total time.Duration
	}
	for _, row := range []struct {
		id     int
		root   *rootSpec
		s      string
		t      time.Duration
		at     string // "" means at = N from Notification
		reason Reason
		o, c   string
	}{
		{1, nil, "0s", 30 * time.Second, "29s", ReasonDeliveryTimeout, "30s", "29.25s"},
		{2, nil, "0s", 4 * time.Second, "3s", ReasonDeliveryTimeout, "4s", "3.25s"},
		{3, nil, "0s", 2 * time.Second, "1.5s", ReasonDeliveryTimeout, "2s", "1.625s"},
		{4, nil, "0s", 100 * time.Millisecond, "75ms", ReasonDeliveryTimeout, "100ms", "81.25ms"},
		{5, &rootSpec{"0s", 30 * time.Second}, "-10s", 50 * time.Second, "28s", ReasonShutdownDeadline, "29s", "28.25s"},
		{6, &rootSpec{"0s", 30 * time.Second}, "-5s", 30 * time.Second, "24s", ReasonDeliveryTimeout, "25s", "24.25s"},
		{7, &rootSpec{"0s", 10 * time.Second}, "-20s", 60 * time.Second, "8s", ReasonShutdownDeadline, "9s", "8.25s"},
		{8, &rootSpec{"0s", 30 * time.Second}, "0s", 30 * time.Second, "5s", ReasonForcedShutdown, "6s", "5.25s"},
		{9, &rootSpec{"0s", time.Second}, "0s", 30 * time.Second, "0.2s", ReasonForcedShutdown, "0.8s", "0.35s"},
	} {
		var root Root
		if row.root != nil {
			root = NewRoot(ts(row.root.start), row.root.total)
		}
		b := NewBudget(ts(row.s), row.t, noRoot).CapRoot(root)
		at := ts(row.at)
		if row.reason != ReasonForcedShutdown {
			// Deadline-driven reasons fire at N (DL-18).
			n, reason := b.Notification(root)
			if !n.Equal(at) || reason != row.reason {
				t.Fatalf("DL-22 row %d: N = t0%+v %v, want t0%+v %v", row.id, n.Sub(t0), reason, at.Sub(t0), row.reason)
			}
		}
		o := b.OwnerCutoff(row.reason, at, root)
		if !o.Equal(ts(row.o)) {
			t.Fatalf("DL-22 row %d: O = t0%+v, want %s", row.id, o.Sub(t0), row.o)
		}
		c := CooperativeDeadline(at, o, root)
		if !c.Equal(ts(row.c)) {
			t.Fatalf("DL-22 row %d: C = t0%+v, want %s", row.id, c.Sub(t0), row.c)
		}
	}
	// C caps O by the root itself: an O found before the root was
	// installed (row 1, O = 30) gives cap_root(O) = Hr = 29.6 under a later
	// root, so the window is min(0.6/4, 0.25) = 0.15 and C = 29.15, not
	// row 1's 29.25 (DL-22, DL-25).
	wantTime(t, "C of an O found before the root",
		CooperativeDeadline(ts("29s"), ts("30s"), NewRoot(t0, dur("29.6s"))), ts("29.15s"))

	// Rows 5 and 7 also pin the capped budgets.
	b5 := NewBudget(ts("-10s"), 50*time.Second, noRoot).CapRoot(NewRoot(t0, 30*time.Second))
	wantTime(t, "row 5 H", b5.H, ts("30s"))
	wantTime(t, "row 5 P", b5.P, ts("29s"))
	b7 := NewBudget(ts("-20s"), 60*time.Second, noRoot).CapRoot(NewRoot(t0, 10*time.Second))
	wantTime(t, "row 7 H", b7.H, ts("10s"))
	wantTime(t, "row 7 P", b7.P, ts("9s"))
}

func TestDL25_RootShorteningAbandonsAtOnce(t *testing.T) {
	t.Parallel()
	// ReasonForcedShutdown at t0, T = 30 s, no root: C = t0 + 250 ms.
	b := NewBudget(ts("-1s"), 30*time.Second, noRoot)
	at := t0
	o := b.OwnerCutoff(ReasonForcedShutdown, at, noRoot)
	wantTime(t, "O before the root", o, ts("1s"))
	wantTime(t, "C before the root", CooperativeDeadline(at, o, noRoot), ts("250ms"))

	// At t0 + 20 ms a root with Hr = t0 + 40 ms is installed.
	now := ts("20ms")
	root := NewRoot(now, 20*time.Millisecond)
	wantTime(t, "Hr", root.Hr(), ts("40ms"))
	wantTime(t, "F", root.OwnerCutoff(at), ts("30ms"))
	o = b.OwnerCutoff(ReasonForcedShutdown, at, root)
	wantTime(t, "O after the root", o, ts("30ms"))
	c := CooperativeDeadline(at, o, root)
	wantTime(t, "C after the root", c, ts("7.5ms"))
	if !Expired(c, now) {
		t.Fatalf("C is not past at t0+20ms")
	}
	// Already past: abandoned at exactly now, not at C.
	wantTime(t, "abandoned at", Latest(c, now), now)
}

func TestDL30_CleanupCutoff(t *testing.T) {
	t.Parallel()
	// Local timeout, T = 30 s: E = H = 30.
	b := NewBudget(t0, 30*time.Second, noRoot)
	wantTime(t, "local timeout E", b.CleanupCutoff(ReasonDeliveryTimeout, ts("29s"), noRoot), ts("30s"))
	wantTime(t, "no reason E", b.CleanupCutoff(ReasonNone, time.Time{}, noRoot), ts("30s"))

	// Root 30 s, ReasonShutdownDeadline at 28: E = 29.
	root := NewRoot(t0, 30*time.Second)
	wantTime(t, "shutdown E", b.CleanupCutoff(ReasonShutdownDeadline, ts("28s"), root), ts("29s"))

	// Owner torn down at 25 with H = 40, Hr = 30: E = 25.1.
	b40 := NewBudget(t0, 40*time.Second, noRoot)
	e := b40.FinalCleanupCutoff(root, ts("25s"))
	wantTime(t, "torn-down E", e, ts("25.1s"))
	// Capped by the root and by H.
	wantTime(t, "torn down near Hr", b40.FinalCleanupCutoff(root, ts("29.95s")), ts("30s"))
	wantTime(t, "torn down near H", b.FinalCleanupCutoff(noRoot, ts("29.95s")), ts("30s"))
	// A cleanup deadline only shrinks.
	wantTime(t, "shrink", Earliest(ts("29s"), e), ts("25.1s"))
	wantTime(t, "no growth", Earliest(e, ts("29s")), ts("25.1s"))
}

func TestDL34_HookChainWorkedExample(t *testing.T) {
	t.Parallel()
	t.Run("local timeout", func(t *testing.T) {
		b := NewBudget(t0, 30*time.Second, noRoot)
		at, reason := b.Notification(noRoot)
		c := CooperativeDeadline(at, b.OwnerCutoff(reason, at, noRoot), noRoot)
		wantTime(t, "C", c, ts("29.25s"))
		e := b.CleanupCutoff(reason, at, noRoot)
		wantTime(t, "E", e, ts("30s"))
		hooks, scope := HookChain(e, noRoot, c)
		wantTime(t, "Hk", hooks, ts("29.8125s"))
		wantTime(t, "scope", scope, ts("30s"))
		inner, ok := HookDeadline(hooks, 2, c)
		if !ok {
			t.Fatalf("inner hook not started")
		}
		wantTime(t, "inner hook", inner, ts("29.53125s"))
		// The inner hook times out; the outer one gets the rest.
		outer, ok := HookDeadline(hooks, 1, inner)
		if !ok {
			t.Fatalf("outer hook not started")
		}
		wantTime(t, "outer hook", outer, ts("29.8125s"))
		if _, ok := HookDeadline(hooks, 1, outer); ok {
			t.Fatalf("a hook started at Hk, want BudgetExhausted")
		}
	})
	t.Run("forced", func(t *testing.T) {
		root := NewRoot(t0, 30*time.Second)
		b := NewBudget(t0, 30*time.Second, root)
		at, reason := b.Notification(root)
		wantTime(t, "N", at, ts("28s"))
		if reason != ReasonShutdownDeadline {
			t.Fatalf("reason = %v", reason)
		}
		c := CooperativeDeadline(at, b.OwnerCutoff(reason, at, root), root)
		wantTime(t, "C", c, ts("28.25s"))
		e := b.CleanupCutoff(reason, at, root)
		wantTime(t, "E", e, ts("29s"))
		hooks, scope := HookChain(e, root, c)
		wantTime(t, "Hk", hooks, ts("28.8125s"))
		wantTime(t, "scope", scope, ts("29s"))
		inner, _ := HookDeadline(hooks, 2, c)
		wantTime(t, "inner hook", inner, ts("28.53125s"))
		// The last second (29 -> 30) stays for joins, evidence, resources, telemetry.
		wantDur(t, "left after cleanup", root.Hr().Sub(scope), time.Second)
	})
}

func TestDL31_HookChainEdges(t *testing.T) {
	t.Parallel()
	// Plenty of time: the scope reserve reaches its 250 ms cap.
	hooks, scope := HookChain(ts("10s"), noRoot, t0)
	wantTime(t, "Hk", hooks, ts("9.75s"))
	wantTime(t, "scope", scope, ts("10s"))
	// E' = cap_root(E).
	hooks, scope = HookChain(ts("40s"), NewRoot(t0, 30*time.Second), ts("29s"))
	wantTime(t, "capped scope", scope, ts("30s"))
	wantTime(t, "capped Hk", hooks, ts("29.75s"))
	// Cleanup starting after E': no reserve, Hk = E', hooks exhausted.
	hooks, scope = HookChain(ts("1s"), noRoot, ts("2s"))
	wantTime(t, "late Hk", hooks, scope)
	if _, ok := HookDeadline(hooks, 3, ts("2s")); ok {
		t.Fatalf("hook started after Hk")
	}
	// k < 1 counts as 1.
	d, ok := HookDeadline(ts("1s"), 0, t0)
	if !ok {
		t.Fatalf("hook not started")
	}
	wantTime(t, "k = 0", d, ts("1s"))
}

func TestDL39_SettlementWait(t *testing.T) {
	t.Parallel()
	root := NewRoot(t0, 30*time.Second)
	wantDur(t, "at 29.9 s", root.SettlementWait(5*time.Second, ts("29.9s")), 100*time.Millisecond)
	wantDur(t, "early", root.SettlementWait(5*time.Second, ts("1s")), 5*time.Second)
	wantDur(t, "expired root", root.SettlementWait(5*time.Second, ts("30s")), 0)
	wantDur(t, "no root", noRoot.SettlementWait(5*time.Second, t0), 5*time.Second)
}
