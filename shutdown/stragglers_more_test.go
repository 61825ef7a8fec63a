package shutdown

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// stragglerRun runs a shutdown whose drain completes at once, over an
// engine whose counters are n and that lists named, and returns the
// diagnostics appended, failing if one comes after the report (SD-37:
// they are named before it).
func stragglerRun(t *testing.T, n Counters, named []Diagnostic) ([]Diagnostic, error) {
	t.Helper()
	b := setup(t, func(b *testBundle) {
		b.eng.counters = n
		b.eng.stragglers = named
	})
	b.c.Initiate(TriggerSigterm)
	_, err := b.finish()
	b.jrn.mu.Lock()
	defer b.jrn.mu.Unlock()
	var ds []Diagnostic
	reported := false
	for _, e := range b.jrn.events {
		switch e := e.(type) {
		case Diagnostic:
			if reported {
				t.Fatalf("a diagnostic after the report: %+v", e)
			}
			ds = append(ds, e)
		case ReportPublished:
			reported = true
		}
	}
	if !reported {
		t.Fatal("no report appended")
	}
	return ds, err
}

// jobs returns n stragglers' diagnostics, subjects job_00, job_01, ...
func jobs(n int) []Diagnostic {
	var out []Diagnostic
	for i := range n {
		out = append(out, Diagnostic{Subject: fmt.Sprintf("job_%02d", i), Code: CodeHandlerNotReturned,
			Message: fmt.Sprintf("handler \"h\" attempt 1 (token %d) not returned: still awaited", i+1)})
	}
	return out
}

// TestSD37_StragglersNamedWhenCountersShowThem: the coordinator asks the
// engine for its stragglers unless its counters show every goroutine
// joined and none quarantined. Handlers still awaited, not yet abandoned,
// leave Quarantined 0 but Joined false, and are named too; each
// diagnostic is appended as the engine gave it, in its order.
func TestSD37_StragglersNamedWhenCountersShowThem(t *testing.T) {
	t.Parallel()
	named := jobs(2)
	named[1].Message = "" // an empty message stays empty
	for _, tt := range []struct {
		name  string
		n     Counters
		named bool
	}{
		{"awaited, none quarantined", Counters{Quarantined: 0, Joined: false}, true},
		{"quarantined, joined", Counters{Quarantined: 1, Joined: true}, true},
		{"quarantined, not joined", Counters{Quarantined: 3}, true},
		{"clean", Counters{Drained: 5, Joined: true}, false},
	} {
		ds, err := stragglerRun(t, tt.n, named)
		if !tt.named {
			if len(ds) != 0 || err != nil {
				t.Fatalf("%s: diagnostics %+v, error %v", tt.name, ds, err)
			}
			continue
		}
		if len(ds) != len(named) || ds[0] != named[0] || ds[1] != named[1] {
			t.Fatalf("%s: diagnostics\n got %+v\nwant %+v", tt.name, ds, named)
		}
		// SD-37: a shutdown with a goroutine not joined is never success.
		if !errors.Is(err, ErrIncomplete) {
			t.Fatalf("%s: Wait = %v, want ErrIncomplete", tt.name, err)
		}
	}
}

// TestSD37_StragglerMessageClippedAtDiagnosticBytesMax: a straggler's
// message of DiagnosticBytesMax bytes is kept whole; a longer one is cut
// to at most that many bytes, never inside a rune. Subject and code are
// kept.
func TestSD37_StragglerMessageClippedAtDiagnosticBytesMax(t *testing.T) {
	t.Parallel()
	a := func(n int) string { return strings.Repeat("a", n) }
	const lim = DiagnosticBytesMax
	cases := []struct{ name, msg, want string }{
		{"at the limit", a(lim), a(lim)},
		{"one past", a(lim + 1), a(lim)},
		{"two-byte rune ending at the limit", a(lim-2) + "é", a(lim-2) + "é"},
		{"two-byte rune across the limit", a(lim-1) + "é", a(lim - 1)},
		{"three-byte rune across the limit", a(lim-2) + "€", a(lim - 2)},
		{"four-byte rune across the limit", a(lim-1) + "😀" + "b", a(lim - 1)},
		{"rune starting at the limit", a(lim) + "é", a(lim)},
	}
	var named []Diagnostic
	for i, c := range cases {
		named = append(named, Diagnostic{Subject: fmt.Sprintf("job_%d", i), Code: CodeHandlerNotReturned, Message: c.msg})
	}
	ds, _ := stragglerRun(t, Counters{Quarantined: len(cases)}, named)
	if len(ds) != len(cases) {
		t.Fatalf("%d diagnostics, want %d", len(ds), len(cases))
	}
	for i, c := range cases {
		d := ds[i]
		if d.Subject != named[i].Subject || d.Code != CodeHandlerNotReturned {
			t.Fatalf("%s: diagnostic %s %s", c.name, d.Subject, d.Code)
		}
		if d.Message != c.want || len(d.Message) > lim || !utf8.ValidString(d.Message) {
			t.Fatalf("%s: message of %d bytes (valid %t), want %d bytes", c.name, len(d.Message), utf8.ValidString(d.Message), len(c.want))
		}
	}
}

// TestSD37_StragglersMaxBoundary: StragglersMax stragglers are all named
// and nothing more; one more makes StragglersMax named, in the engine's
// order, and one diagnostic of the drain counting the one left out.
func TestSD37_StragglersMaxBoundary(t *testing.T) {
	t.Parallel()
	for _, n := range []int{StragglersMax, StragglersMax + 1} {
		named := jobs(n)
		ds, _ := stragglerRun(t, Counters{Quarantined: n}, named)
		if len(ds) < StragglersMax {
			t.Fatalf("%d stragglers: %d diagnostics", n, len(ds))
		}
		for i := range StragglersMax {
			if ds[i] != named[i] {
				t.Fatalf("%d stragglers: diagnostic %d = %+v, want %+v", n, i, ds[i], named[i])
			}
		}
		rest := ds[StragglersMax:]
		if n == StragglersMax {
			if len(rest) != 0 {
				t.Fatalf("%d stragglers: more diagnostics %+v", n, rest)
			}
			continue
		}
		const want = "1 more attempt whose handler had not returned is not named"
		if len(rest) != 1 || rest[0].Subject != "drain" || rest[0].Code != CodeHandlerNotReturned ||
			rest[0].Message != want {
			t.Fatalf("%d stragglers: rest %+v, want one drain diagnostic %q", n, rest, want)
		}
	}
}

// TestSD37_ErrorDetailWording pins the detail of a shutdown's error (SD-25,
// SD-37): goroutines not returned first, then settlements unresolved,
// then each action not completed in report order, joined by ", "; each
// count singular for 1 and plural otherwise; nothing for a zero count or
// a completed action.
func TestSD37_ErrorDetailWording(t *testing.T) {
	t.Parallel()
	admission := Action{Phase: PhaseCloseAdmission, Component: ComponentAdmission, Graceful: OutcomeCompleted}
	drain := Action{Phase: PhaseDrain, Component: ComponentDrain, Graceful: OutcomeTimedOut, Forced: OutcomeTimedOut}
	forcedClose := Action{Phase: PhaseCloseEvidence, Component: ComponentClose, Graceful: OutcomeCancelledByForce, Forced: OutcomeCompleted}
	telemetry := Action{Component: ComponentTelemetry, Graceful: OutcomeFailed, Forced: OutcomeNotAttempted}
	for _, tt := range []struct {
		rep  Report
		want string
	}{
		{Report{}, ""},
		{Report{Actions: []Action{admission, forcedClose}}, ""},
		{Report{Quarantined: 1}, "1 goroutine not returned"},
		{Report{Quarantined: 2}, "2 goroutines not returned"},
		{Report{Unresolved: 1}, "1 settlement unresolved"},
		{Report{Unresolved: 2}, "2 settlements unresolved"},
		{Report{Quarantined: 1, Unresolved: 1}, "1 goroutine not returned, 1 settlement unresolved"},
		{Report{Unresolved: 3, Actions: []Action{admission, drain}}, "3 settlements unresolved, drain timed_out/timed_out"},
		{Report{Quarantined: 2, Unresolved: 1, Actions: []Action{admission, drain, forcedClose, telemetry}},
			"2 goroutines not returned, 1 settlement unresolved, drain timed_out/timed_out, telemetry failed/not_attempted"},
	} {
		if got := detail(tt.rep); got != tt.want {
			t.Fatalf("detail(quarantined %d, unresolved %d, %d actions) = %q, want %q",
				tt.rep.Quarantined, tt.rep.Unresolved, len(tt.rep.Actions), got, tt.want)
		}
	}
}

// TestSD25_OnlyUnresolvedSettlementsInTheError: a shutdown whose
// goroutines all joined and whose actions all completed, but with one
// settlement unresolved (DL-39), fails Incomplete, and its error names
// only that settlement.
func TestSD25_OnlyUnresolvedSettlementsInTheError(t *testing.T) {
	t.Parallel()
	b := setup(t, func(b *testBundle) {
		b.eng.counters = Counters{Drained: 2, Unresolved: 1, Joined: true}
	})
	b.c.Initiate(TriggerSigterm)
	rep, err := b.finish()
	wantActions(t, rep, "admission completed/not_attempted", "drain completed/not_attempted", "close completed/not_attempted")
	wantEq(t, "quarantined", rep.Quarantined, 0)
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Wait = %v, want an incomplete *Error", err)
	}
	wantEq(t, "detail", se.Detail, "1 settlement unresolved")
	wantEq(t, "error", err.Error(), "shutdown: incomplete: 1 settlement unresolved")
}
