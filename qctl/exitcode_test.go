package qctl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// TestExitCodes: each exit code a script branches on, from a command run
// as a user runs it (qctl.Main, arguments and all) on the golden
// fixture, set up the way that code needs. One case per code; the codes
// are distinct, so each case also proves its failure is told apart from
// the others.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		code  int
		setup func(t *testing.T) vfs.FS // the fixture, changed as the case needs
		args  []string
		says  string // on stderr
		ctx   func() context.Context
		out   io.Writer // stdout, if not a buffer
	}{
		{name: "ok", code: qctl.ExitOK, setup: fixtureFS, args: []string{"verify", fixtureDir}},
		{name: "findings: damaged stream", code: qctl.ExitFindings, setup: func(t *testing.T) vfs.FS {
			return damagedFixture(t, damagedSeq)
		}, args: []string{"-d", fixtureDir, "jobs"}, says: "1 stream set aside"},
		{name: "findings: shutdown without report", code: qctl.ExitFindings, setup: func(t *testing.T) vfs.FS {
			return appendShutdown(t, false, nil) // began, no report
		}, args: []string{"-d", fixtureDir, "shutdowns"}, says: "1 shutdown did not succeed"},
		{name: "usage", code: qctl.ExitUsage, setup: fixtureFS,
			args: []string{"-d", fixtureDir, "jobs", "--status", "done"}, says: `--status "done"`},
		{name: "usage before the journal is opened", code: qctl.ExitUsage, setup: heldFS,
			args: []string{"-d", fixtureDir, "show", strings.Repeat("x", 200)}, says: "is not a job or workflow id"},
		{name: "not found: id", code: qctl.ExitNotFound, setup: fixtureFS,
			args: []string{"-d", fixtureDir, "show", "job_01KE4Z6R000000000000NONE"}, says: "holds no job or workflow job_01KE4Z6R000000000000NONE"},
		{name: "not found: seq", code: qctl.ExitNotFound, setup: fixtureFS,
			args: []string{"state", fixtureDir, "--at", "67"}, says: "ends at seq 66; there is no seq 67"},
		{name: "locked", code: qctl.ExitLocked, setup: heldFS,
			args: []string{"-d", fixtureDir, "jobs"}, says: lockedHint},
		{name: "unreadable: missing", code: qctl.ExitUnreadable, setup: fixtureFS,
			args: []string{"inspect", "nowhere"}, says: "nowhere does not exist"},
		{name: "unreadable: newer format", code: qctl.ExitUnreadable, setup: func(t *testing.T) vfs.FS {
			fs := fixture(t)
			editStore(t, fs, fixtureDir, func(db *pebble.DB) {
				set(t, db, []byte("m/format"), binary.BigEndian.AppendUint64(nil, journal.FormatVersion+1))
			})
			return fs
		}, args: []string{"verify", fixtureDir}, says: "written by a newer version of quire"},
		{name: "unreadable: order in doubt", code: qctl.ExitUnreadable, setup: func(t *testing.T) vfs.FS {
			fs := fixture(t)
			editStore(t, fs, fixtureDir, func(db *pebble.DB) {
				if err := db.Delete(record.LogKey(10), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			})
			return fs
		}, args: []string{"-d", fixtureDir, "timers"}, says: "record missing"},
		{name: "aborted: interrupted", code: qctl.ExitAborted, setup: fixtureFS,
			args: []string{"inspect", fixtureDir}, says: "interrupted: context canceled",
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			}},
		{name: "aborted: output not written", code: qctl.ExitAborted, setup: fixtureFS,
			args: []string{"-d", fixtureDir, "jobs"}, says: errFull.Error(),
			out: fullWriter{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := c.setup(t)
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx()
			}
			var out, errb bytes.Buffer
			var stdout io.Writer = &out
			if c.out != nil {
				stdout = c.out
			}
			code := qctl.Main(ctx, c.args, qctl.Env{Stdout: stdout, Stderr: &errb, FS: fs, Now: fixtureNow})
			if code != c.code {
				t.Fatalf("qctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), code, c.code, out.String(), errb.String())
			}
			if !strings.Contains(errb.String(), c.says) {
				t.Fatalf("qctl %s: stderr %q does not say %q", strings.Join(c.args, " "), errb.String(), c.says)
			}
		})
	}
}

var errFull = errors.New("no space left on device")

// fullWriter fails every write, as stdout redirected to a full disk does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errFull }

func fixtureFS(t *testing.T) vfs.FS { return fixture(t) }

// heldFS returns the fixture with its journal held open, as a running
// engine holds it, until the test ends.
func heldFS(t *testing.T) vfs.FS {
	fs := fixture(t)
	held, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	return fs
}

// appendShutdown returns the fixture with a shutdown of its newest run
// (run 3) appended: shutdown_initiated and phase 1, then report if not
// nil. With restart, a run 4 starts after it, as after a kill during the
// shutdown.
func appendShutdown(t *testing.T, restart bool, report *record.ShutdownReport) vfs.FS {
	t.Helper()
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	defer f.close()
	f.at(2 * time.Hour)
	start := f.now()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "sigterm", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	f.append(nil, rec(engine, &record.ShutdownPhaseStarted{Phase: 1, Name: "close_admission"}))
	if report != nil {
		f.at(2*time.Hour + 30*time.Second)
		report.InitiatedAt, report.Trigger, report.BudgetNanos = start, "sigterm", int64(30*time.Second)
		f.append(nil, rec(engine, report))
	}
	if restart {
		f.at(3 * time.Hour)
		f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R4", Version: "0.1.0", At: f.now(), Recovered: 1}))
	}
	return fs
}

// TestShutdownsFindings: shutdowns exits 1 for a shutdown that did not
// succeed, and names it. Only a report whose completion is
// graceful_completed or forced_completed is success (SD-30); a shutdown
// that began and published no report is never success (SD-26, SD-33),
// whether a run followed (SD-36: the process ended during it) or not. A
// run that never began a shutdown is shown as such (SD-33) and is not a
// finding: the fixture's run 1 crashed and its run 3 is still running.
func TestShutdownsFindings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		restart bool
		report  *record.ShutdownReport
		code    int
		says    string
	}{
		{"crash and running, no shutdown begun", false, nil, qctl.ExitOK, ""},
		{"began, no report, newest run", false, nil, qctl.ExitFindings, "run_01KE4Z6R00000000000000R3: began at seq 67, no report"},
		{"began, no report, a run after it", true, nil, qctl.ExitFindings, "run_01KE4Z6R00000000000000R3: began at seq 67, no report"},
		{"report incomplete (SD-31 c)", false, &record.ShutdownReport{Completion: "incomplete", Forced: true}, qctl.ExitFindings,
			"run_01KE4Z6R00000000000000R3: incomplete (report seq 69)"},
		{"report failed (SD-31 d)", true, &record.ShutdownReport{Completion: "failed", FailureCode: "OWNED_RESOURCE_CLOSE_FAILED"}, qctl.ExitFindings,
			"run_01KE4Z6R00000000000000R3: failed (report seq 69)"},
		{"report forced_completed (SD-31 b)", true, &record.ShutdownReport{Completion: "forced_completed", Forced: true}, qctl.ExitOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var fs vfs.FS = fixture(t)
			if c.name != cases[0].name {
				fs = appendShutdown(t, c.restart, c.report)
			}
			for _, args := range [][]string{{"-d", fixtureDir, "shutdowns"}, {"--json", "-d", fixtureDir, "shutdowns"}} {
				code, stdout, stderr := run(t, fs, args...)
				if code != c.code {
					t.Fatalf("qctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, c.code, stdout, stderr)
				}
				if c.code == qctl.ExitOK {
					if stderr != "" {
						t.Fatalf("qctl %s: stderr %q", strings.Join(args, " "), stderr)
					}
					continue
				}
				if !strings.Contains(stderr, "1 shutdown did not succeed ("+c.says+")") {
					t.Fatalf("qctl %s: stderr %q does not name %q", strings.Join(args, " "), stderr, c.says)
				}
				// The output is complete: every run is listed.
				if n := strings.Count(stdout, "run_01KE4Z6R0000000000000"); n < 3 {
					t.Fatalf("qctl %s: %d runs listed\n%s", strings.Join(args, " "), n, stdout)
				}
			}
			if c.report != nil {
				// inspect's last shutdown is the newest report, run 3's,
				// not run 2's from the fixture.
				_, stdout, _ := run(t, fs, "inspect", fixtureDir)
				if got := kvLine(t, stdout, "last shutdown"); !strings.HasPrefix(got, c.report.Completion+", ") || !strings.HasSuffix(got, "(run run_01KE4Z6R00000000000000R3)") {
					t.Errorf("inspect: last shutdown %q, want run 3's %s", got, c.report.Completion)
				}
			}
		})
	}
}

// TestSD27_ShutdownsShowsForceAndDependencies: shutdowns shows a force
// request with its trigger and instant, and each dependency's four
// ResourceReport bits by name (SD-27), in text and JSON; shutdown records
// before any run_started, as an older journal holds them, belong to a run
// of their own.
func TestSD27_ShutdownsShowsForceAndDependencies(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	start := f.now()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "sigterm", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	f.at(2 * time.Second)
	f.append(nil, rec(engine, &record.ShutdownForceRequested{Trigger: "second_signal"}))
	f.at(3 * time.Second)
	f.append(nil, rec(engine, &record.ShutdownReport{Completion: "forced_completed", Forced: true, Trigger: "sigterm", InitiatedAt: start,
		BudgetNanos: int64(30 * time.Second), ElapsedNanos: int64(3 * time.Second), Dependencies: []uint8{0b0101, 0, 0b1111}}))
	f.close()

	code, stdout, stderr := run(t, fs, "-d", fixtureDir, "shutdowns")
	if code != qctl.ExitOK {
		t.Fatalf("shutdowns: exit %d, stderr %s", code, stderr)
	}
	for _, want := range []string{
		"run           (before the first run_started) (seq 1)\n",
		"force         requested by second_signal at 2026-01-05T10:00:02.000Z\n",
		"resources     owned-resources: owned not started terminal not succeeded\n",
		"              signal-monitor: not owned\n",
		"              telemetry: owned started terminal succeeded\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("shutdowns does not say %q:\n%s", want, stdout)
		}
	}
	_, stdout, _ = run(t, fs, "--json", "-d", fixtureDir, "shutdowns")
	for _, want := range []string{
		`"force":{"trigger":"second_signal","at":"2026-01-05T10:00:02Z"}`,
		`"dependencies":{"owned-resources":{"owned":true,"started":false,"terminal":true,"succeeded":false},` +
			`"signal-monitor":{"owned":false,"started":false,"terminal":false,"succeeded":false},` +
			`"telemetry":{"owned":true,"started":true,"terminal":true,"succeeded":true}}`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("shutdowns --json does not say %s:\n%s", want, stdout)
		}
	}
}

// TestSD33_InspectLastShutdownWithoutReportIsNotSuccess: a shutdown that
// began and published no report is never shown as success (SD-26,
// SD-33). inspect's last shutdown is the newest run's that began one, run
// 3's, not the newest report, run 2's graceful_completed: it used to skip
// run 3, so an operator asking whether the last shutdown succeeded read
// graceful_completed about a shutdown the process died in.
func TestSD33_InspectLastShutdownWithoutReportIsNotSuccess(t *testing.T) {
	t.Parallel()
	for _, restart := range []bool{false, true} {
		fs := appendShutdown(t, restart, nil)
		_, stdout, _ := run(t, fs, "inspect", fixtureDir)
		got := kvLine(t, stdout, "last shutdown")
		if !strings.HasPrefix(got, "incomplete: began at 2026-01-05T12:00:00.000Z, no report") ||
			!strings.HasSuffix(got, "(run run_01KE4Z6R00000000000000R3)") {
			t.Errorf("restart %t: inspect: last shutdown %q, want run 3's, with no report", restart, got)
		}
		_, stdout, _ = run(t, fs, "--json", "inspect", fixtureDir)
		if want := `"last_shutdown":{"run_id":"run_01KE4Z6R00000000000000R3","completion":"","forced":false,"trigger":"sigterm",` +
			`"initiated_at":"2026-01-05T12:00:00Z","budget_ns":30000000000}`; !strings.Contains(stdout, want) {
			t.Errorf("restart %t: inspect --json does not say %s:\n%s", restart, want, stdout)
		}
	}
}

// TestSD37_ShutdownsNamesAbandonedAttempts: an Incomplete report counts
// the attempts whose handlers did not return (SD-25, SD-37); shutdowns
// names them, from the settlements between the shutdown's initiation and
// its report whose execution was abandoned (DL-26), and lists the debug
// records of that window (SD-28: a close call abandoned), and points at
// the attempts it left unsettled (DL-44). An attempt
// abandoned before the shutdown (a delivery timeout) is not the
// shutdown's, and one that returned is not listed.
func TestSD37_ShutdownsNamesAbandonedAttempts(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: f.now()}))
	const early, stuck, fine, late = "job_01KE4Z6R0000000000000EA1", "job_01KE4Z6R0000000000000ST1", "job_01KE4Z6R0000000000000FN1",
		"job_01KE4Z6R0000000000000LT1"
	f.append(nil, f.enqueue(early, early, "report", "default", 0, 0, nil), f.enqueue(stuck, stuck, "export", "default", 0, 0, nil),
		f.enqueue(fine, fine, "email", "default", 0, 0, nil), f.enqueue(late, late, "email", "default", 0, 0, nil))
	tokEarly := f.start(early, early, 1)
	f.at(time.Second)
	f.append(nil, rec(early, &record.AttemptReleased{Outcome: record.Outcome{JobID: early, Token: tokEarly,
		Reason: "delivery_timeout", Execution: "abandoned", Scope: "closed"}, AvailableAt: f.now()}))
	tokStuck := f.start(stuck, stuck, 1)
	tokFine := f.start(fine, fine, 1)
	tokLate := f.start(late, late, 1)

	f.at(10 * time.Second)
	start := f.now()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "sigterm", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	f.at(38 * time.Second)
	f.append(nil, rec(fine, &record.AttemptReleased{Outcome: record.Outcome{JobID: fine, Token: tokFine,
		Reason: "shutdown_deadline", Joined: true, Execution: "returned", Scope: "closed"}, AvailableAt: f.now()}))
	stuckSeq := f.next()
	f.append(nil, rec(stuck, &record.AttemptReleased{Outcome: record.Outcome{JobID: stuck, Token: tokStuck,
		Reason: "forced_shutdown", Execution: "abandoned", Scope: "quarantined", Cleanup: "HOOK_TIMED_OUT"}, AvailableAt: f.now()}))
	f.at(39 * time.Second)
	f.append(nil, rec(engine, &record.Debug{Subject: "db", Code: "SHUTDOWN_CLOSE_ABANDONED", Message: "did not return by its deadline"}))
	f.at(40 * time.Second)
	f.append(nil, rec(engine, &record.ShutdownReport{Completion: "incomplete", Forced: true, Trigger: "sigterm", InitiatedAt: start,
		BudgetNanos: int64(30 * time.Second), ElapsedNanos: int64(30 * time.Second), Released: 2, Unresolved: 2, Quarantined: 1}))
	// A settlement whose append was in flight lands after the report: it
	// is the shutdown's. A debug record after the report is not.
	f.append(nil, rec(late, &record.AttemptReleased{Outcome: record.Outcome{JobID: late, Token: tokLate,
		Reason: "forced_shutdown", Execution: "abandoned", Scope: "closed"}, AvailableAt: f.now()}))
	f.append(nil, rec(engine, &record.Debug{Subject: "x", Code: "LATER", Message: "after the report"}))
	f.close()

	code, stdout, stderr := run(t, fs, "-d", fixtureDir, "shutdowns")
	if code != qctl.ExitFindings {
		t.Fatalf("shutdowns: exit %d, want %d; stderr %s", code, qctl.ExitFindings, stderr)
	}
	_, tail, ok := strings.Cut(stdout, "abandoned attempts:")
	if !ok {
		t.Fatalf("shutdowns names no abandoned attempt:\n%s", stdout)
	}
	rows := strings.Split(strings.TrimSpace(tail), "\n")
	if len(rows) < 3 {
		t.Fatalf("no abandoned attempt listed:\n%s", stdout)
	}
	if got := strings.Fields(rows[2]); len(got) != 9 || got[0] != fmt.Sprint(stuckSeq) || got[2] != stuck || got[3] != fmt.Sprint(tokStuck) ||
		got[4] != "attempt_released" || got[5] != "forced_shutdown" || got[6] != "quarantined" || got[7] != "no" || got[8] != "HOOK_TIMED_OUT" {
		t.Fatalf("abandoned row %q, want job %s token %d released by forced_shutdown, scope quarantined, not returned:\n%s", rows[2], stuck, tokStuck, stdout)
	}
	if len(rows) < 4 || !strings.Contains(rows[3], late) {
		t.Errorf("the settlement after the report is not listed:\n%s", stdout)
	}
	for _, absent := range []string{early, fine, "LATER"} {
		if strings.Contains(stdout, absent) {
			t.Errorf("shutdowns lists %s, which is not the shutdown's:\n%s", absent, stdout)
		}
	}
	if !strings.Contains(stdout, "2 attempts left without a settlement (unresolved): the next start delivers them again (DL-44);\n"+
		"until then, qctl jobs --status processing names their jobs\n") {
		t.Errorf("shutdowns does not point at the unresolved attempts:\n%s", stdout)
	}
	if !strings.Contains(stdout, "SHUTDOWN_CLOSE_ABANDONED") || !strings.Contains(stdout, "did not return by its deadline") {
		t.Errorf("shutdowns does not list the shutdown's debug record:\n%s", stdout)
	}

	_, stdout, _ = run(t, fs, "--json", "-d", fixtureDir, "shutdowns")
	for _, want := range []string{
		fmt.Sprintf(`"abandoned":[{"seq":%d,"at":"2026-01-05T10:00:38Z","stream":"%s","job_id":"%s","token":%d,"kind":"attempt_released",`+
			`"reason":"forced_shutdown","scope":"quarantined","joined":false,"cleanup":"HOOK_TIMED_OUT"},{`, stuckSeq, stuck, stuck, tokStuck),
		`"diagnostics":[{"seq":`,
		`"subject":"db","code":"SHUTDOWN_CLOSE_ABANDONED","message":"did not return by its deadline"}]`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("shutdowns --json does not say %s:\n%s", want, stdout)
		}
	}
}
