package qctl_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// The jobs of the three-run journal buildRuns writes.
const (
	runsJobExport = "job_01KE4Z6R0000000000000EXA" // run 1: abandoned during its shutdown
	runsStepLedge = "job_01KE4Z6R0000000000000STL" // run 1: a step job, settled after the report
	runsJobCrash  = "job_01KE4Z6R0000000000000CRC" // run 2: abandoned by a delivery timeout; run 2 crashes
	runsJobLast   = "job_01KE4Z6R0000000000000LST" // run 3: abandoned during its shutdown
	runsWorkflow  = "wf_01KE4Z6R0000000000000LDG"
	// runsStepHandler is the step handler name of runsStepLedge, as the
	// api names a step's handler: workflow name, "/", step name. Both
	// are legal names (at most api.NameBytesMax = 100 bytes each; a step
	// handler's name is at most 206 bytes).
	runsStepHandler = "regional_ledger_reconciliation/fetch_entries_from_every_subsidiary_ledger_and_match_them_to_the_bank_feed"
	// runsCleanup is a long Outcome.Cleanup (DL-36: comma-separated
	// codes), which the abandoned table shows whole.
	runsCleanup = "HOOK_TIMED_OUT,SCOPE_CLEANUP_TIMED_OUT,VALUE_RELEASE_FAILED,HOOK_PANICKED"
)

// runsSeqs are the seqs and tokens buildRuns recorded.
type runsSeqs struct {
	tokExport, tokStep, tokLast     uint64
	exportSettled, stepSettled      uint64
	lastSettled                     uint64
	exportStraggler, stepStraggler  uint64
	exportStragglerMsg, stepStrgMsg string
}

// stragglerMessage is the message of a SHUTDOWN_HANDLER_NOT_RETURNED
// debug record, in the format api's shutdownEngine.Stragglers writes
// (SD-37): subject the job, message its handler, attempt, token, state
// and start.
func stragglerMessage(handler string, attempt int32, token uint64, abandoned bool, start time.Time) string {
	state := "still awaited"
	if abandoned {
		state = "abandoned (DL-26), quarantined"
	}
	return fmt.Sprintf("handler %q attempt %d (token %d) not returned: %s; started %s",
		handler, attempt, token, state, start.UTC().Format(time.RFC3339Nano))
}

// buildRuns writes a journal of three runs. Run 1 shuts down (initiated
// at t0+10s, the record appended 250ms later), abandons an attempt during
// the drain, names two stragglers in debug records, publishes an
// incomplete report, and a step job's settlement whose append was in
// flight lands after the report. Run 2 starts, abandons an attempt by a
// delivery timeout and crashes without a shutdown. Run 3 shuts down and
// abandons one more attempt.
func buildRuns(t *testing.T) (vfs.FS, runsSeqs) {
	t.Helper()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	var s runsSeqs
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

	// Run 1.
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: f.now()}))
	f.at(sec(1))
	f.append(nil, f.enqueue(runsJobExport, runsJobExport, "export", "default", 0, 0, nil))
	f.append(nil,
		rec(runsWorkflow, &record.WorkflowStarted{WorkflowID: runsWorkflow, Name: "regional_ledger_reconciliation", DefinitionHash: "sha256:1e",
			Steps: 1, At: f.now(), State: value(t, map[string]any{"region": "emea"})}),
		f.enqueue(runsWorkflow, runsStepLedge, runsStepHandler, "default", 0, 0, func(b *record.JobEnqueued) {
			b.WorkflowID, b.Payload = runsWorkflow, nil
		}))
	f.at(sec(2))
	exportStart := f.clk.Now()
	s.tokExport = f.start(runsJobExport, runsJobExport, 1)
	stepStart := f.clk.Now()
	s.tokStep = f.start(runsWorkflow, runsStepLedge, 1)

	f.at(sec(10.25))
	start := t0.Add(sec(10)).UnixNano()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "sigterm", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	f.at(sec(38.5))
	s.exportSettled = f.next()
	f.append(nil, rec(runsJobExport, &record.AttemptReleased{Outcome: record.Outcome{JobID: runsJobExport, Token: s.tokExport,
		Reason: "forced_shutdown", Execution: "abandoned", Scope: "quarantined", Cleanup: runsCleanup}, AvailableAt: f.now()}))
	f.at(sec(39.75))
	s.exportStragglerMsg = stragglerMessage("export", 1, s.tokExport, true, exportStart)
	s.stepStrgMsg = stragglerMessage(runsStepHandler, 1, s.tokStep, false, stepStart)
	s.exportStraggler = f.next()
	s.stepStraggler = s.exportStraggler + 1
	f.append(nil,
		rec(engine, &record.Debug{Subject: runsJobExport, Code: "SHUTDOWN_HANDLER_NOT_RETURNED", Message: s.exportStragglerMsg}),
		rec(engine, &record.Debug{Subject: runsStepLedge, Code: "SHUTDOWN_HANDLER_NOT_RETURNED", Message: s.stepStrgMsg}))
	f.at(sec(40))
	f.append(nil, rec(engine, &record.ShutdownReport{Completion: "incomplete", Forced: true, Trigger: "sigterm", InitiatedAt: start,
		BudgetNanos: int64(30 * time.Second), ElapsedNanos: int64(30 * time.Second), Released: 1, Quarantined: 2}))
	f.at(sec(40.2))
	s.stepSettled = f.next()
	f.append(nil, rec(runsWorkflow, &record.AttemptReleased{Outcome: record.Outcome{JobID: runsStepLedge, Token: s.tokStep,
		Reason: "forced_shutdown", Execution: "abandoned", Scope: "closed"}, AvailableAt: f.now()}))

	// Run 2: an attempt abandoned by its delivery timeout, then a crash.
	f.at(sec(60))
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R2", Version: "0.1.0", At: f.now()}))
	f.at(sec(61))
	f.append(nil, f.enqueue(runsJobCrash, runsJobCrash, "export", "default", 0, 0, nil))
	tokCrash := f.start(runsJobCrash, runsJobCrash, 1)
	f.at(sec(91.5))
	f.append(nil, rec(runsJobCrash, &record.AttemptReleased{Outcome: record.Outcome{JobID: runsJobCrash, Token: tokCrash,
		Reason: "delivery_timeout", Execution: "abandoned", Scope: "closed"}, AvailableAt: f.now()}))

	// Run 3 shuts down and abandons one attempt.
	f.at(sec(120))
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R3", Version: "0.1.0", At: f.now(), Recovered: 0}))
	f.at(sec(121))
	f.append(nil, f.enqueue(runsJobLast, runsJobLast, "export", "default", 0, 0, nil))
	s.tokLast = f.start(runsJobLast, runsJobLast, 1)
	f.at(sec(130.1))
	start = t0.Add(sec(130)).UnixNano()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "api", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	f.at(sec(158.25))
	s.lastSettled = f.next()
	f.append(nil, rec(runsJobLast, &record.AttemptReleased{Outcome: record.Outcome{JobID: runsJobLast, Token: s.tokLast,
		Reason: "shutdown_deadline", Execution: "abandoned", Scope: "closed"}, AvailableAt: f.now()}))
	f.at(sec(160))
	f.append(nil, rec(engine, &record.ShutdownReport{Completion: "incomplete", Forced: false, Trigger: "api", InitiatedAt: start,
		BudgetNanos: int64(30 * time.Second), ElapsedNanos: int64(30 * time.Second), Released: 1, Quarantined: 1}))
	f.close()
	return fs, s
}

// runSections splits shutdowns' text output into its runs: each begins
// with its "run" line after a blank line.
func runSections(out string) []string {
	parts := strings.Split(out, "\n\nrun ")
	for i := 1; i < len(parts); i++ {
		parts[i] = "run " + parts[i]
	}
	return parts
}

// tableRows returns the rows (header excluded) of the table that follows
// the line starting with title in section, up to the next blank line, or
// nil if there is no such title.
func tableRows(section, title string) []string {
	_, after, ok := strings.Cut(section, "\n"+title)
	if !ok {
		return nil
	}
	lines := strings.Split(after, "\n")
	var rows []string
	for _, l := range lines[2:] { // the rest of the title line, the header
		if l == "" {
			break
		}
		rows = append(rows, l)
	}
	return rows
}

// TestSD37_ShutdownsAbandonedWindowEndsAtTheNextRun: the abandoned
// attempts listed under a shutdown are the settlements whose execution was
// abandoned (DL-26) from its initiation up to the next run's run_started
// (findAbandoned): one whose append landed after the report belongs to it,
// one appended in the next run does not, whatever that run did. A run
// that began no shutdown (run 2 crashed) lists no abandoned attempts,
// though one of its attempts was abandoned by a delivery timeout. Each
// row's SEQ is the settlement's seq and AT its record's instant relative
// to the shutdown's start (the trigger's instant, as the phases table
// counts), not to the initiation record's own instant; the token is the
// attempt's, a long cleanup is shown whole.
func TestSD37_ShutdownsAbandonedWindowEndsAtTheNextRun(t *testing.T) {
	t.Parallel()
	fs, s := buildRuns(t)
	code, stdout, stderr := run(t, fs, "-d", fixtureDir, "shutdowns")
	if code != qctl.ExitFindings {
		t.Fatalf("shutdowns: exit %d, want %d (two incomplete reports); stderr %s", code, qctl.ExitFindings, stderr)
	}
	runs := runSections(stdout)
	if len(runs) != 3 {
		t.Fatalf("%d runs listed, want 3:\n%s", len(runs), stdout)
	}
	for i, want := range [][][]string{
		// Run 1: settled at t0+38.5s and t0+40.2s, its shutdown started at
		// t0+10s (its initiation record at t0+10.25s).
		{
			{fmt.Sprint(s.exportSettled), "+28.5s", runsJobExport, fmt.Sprint(s.tokExport), "attempt_released", "forced_shutdown", "quarantined", "no", runsCleanup},
			{fmt.Sprint(s.stepSettled), "+30.2s", runsStepLedge, fmt.Sprint(s.tokStep), "attempt_released", "forced_shutdown", "closed", "no", "-"},
		},
		nil, // run 2: no shutdown, no table
		// Run 3: settled at t0+158.25s, its shutdown started at t0+130s.
		{
			{fmt.Sprint(s.lastSettled), "+28.25s", runsJobLast, fmt.Sprint(s.tokLast), "attempt_released", "shutdown_deadline", "closed", "no", "-"},
		},
	} {
		rows := tableRows(runs[i], "abandoned attempts:")
		if want == nil {
			if strings.Contains(runs[i], "abandoned attempts") || rows != nil {
				t.Errorf("run %d began no shutdown and lists abandoned attempts:\n%s", i+1, runs[i])
			}
			continue
		}
		if len(rows) != len(want) {
			t.Errorf("run %d lists %d abandoned attempts, want %d:\n%s", i+1, len(rows), len(want), runs[i])
			continue
		}
		for k, row := range rows {
			if got := strings.Fields(row); strings.Join(got, "|") != strings.Join(want[k], "|") {
				t.Errorf("run %d abandoned row %d:\n got  %q\n want %q", i+1, k, got, want[k])
			}
		}
	}
	// Run 2's abandoned attempt is no shutdown's, and appears nowhere.
	if strings.Contains(stdout, runsJobCrash) {
		t.Errorf("shutdowns lists %s, abandoned in run 2 (after run 1's window, before run 3's):\n%s", runsJobCrash, stdout)
	}
	if !strings.Contains(runs[1], "shutdown   no shutdown: the process ended without one (crash or kill)") {
		t.Errorf("run 2 is not shown as ended without a shutdown:\n%s", runs[1])
	}
}

// shutdownsJSONRun is the part of a run line of shutdowns --json these
// tests read.
type shutdownsJSONRun struct {
	RunID     string `json:"run_id"`
	Abandoned []struct {
		Seq     uint64 `json:"seq"`
		At      string `json:"at"`
		Stream  string `json:"stream"`
		JobID   string `json:"job_id"`
		Token   uint64 `json:"token"`
		Kind    string `json:"kind"`
		Reason  string `json:"reason"`
		Scope   string `json:"scope"`
		Joined  bool   `json:"joined"`
		Cleanup string `json:"cleanup"`
	} `json:"abandoned"`
	Diagnostics []struct {
		Seq     uint64 `json:"seq"`
		At      string `json:"at"`
		Subject string `json:"subject"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"diagnostics"`
}

func shutdownsJSON(t *testing.T, fs vfs.FS) []shutdownsJSONRun {
	t.Helper()
	_, stdout, stderr := run(t, fs, "--json", "-d", fixtureDir, "shutdowns")
	var runs []shutdownsJSONRun
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r shutdownsJSONRun
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("shutdowns --json: %v in %s (stderr %s)", err, line, stderr)
		}
		runs = append(runs, r)
	}
	return runs
}

// TestSD37_ShutdownsJSONAbandonedStreamAndJobID: in --json each abandoned
// attempt carries the stream its settlement was appended to and its job
// id, which differ for a workflow step job (its records are in the
// workflow's stream), and its seq and absolute instant; the windows are
// the text listing's.
func TestSD37_ShutdownsJSONAbandonedStreamAndJobID(t *testing.T) {
	t.Parallel()
	fs, s := buildRuns(t)
	runs := shutdownsJSON(t, fs)
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3: %+v", len(runs), runs)
	}
	type row struct {
		seq             uint64
		at, stream, job string
		token           uint64
		reason, scope   string
		cleanup         string
	}
	want := [][]row{
		{
			{s.exportSettled, "2026-01-05T10:00:38.5Z", runsJobExport, runsJobExport, s.tokExport, "forced_shutdown", "quarantined", runsCleanup},
			{s.stepSettled, "2026-01-05T10:00:40.2Z", runsWorkflow, runsStepLedge, s.tokStep, "forced_shutdown", "closed", ""},
		},
		nil,
		{{s.lastSettled, "2026-01-05T10:02:38.25Z", runsJobLast, runsJobLast, s.tokLast, "shutdown_deadline", "closed", ""}},
	}
	for i, r := range runs {
		if len(r.Abandoned) != len(want[i]) {
			t.Errorf("run %d (%s): %d abandoned, want %d: %+v", i+1, r.RunID, len(r.Abandoned), len(want[i]), r.Abandoned)
			continue
		}
		for k, a := range r.Abandoned {
			w := want[i][k]
			got := row{a.Seq, a.At, a.Stream, a.JobID, a.Token, a.Reason, a.Scope, a.Cleanup}
			if got != w || a.Kind != "attempt_released" || a.Joined {
				t.Errorf("run %d abandoned %d: %+v (kind %s, joined %t), want %+v", i+1, k, got, a.Kind, a.Joined, w)
			}
		}
	}
}

// TestSD37_ShutdownsDiagnosticsShowStragglerMessagesWhole: the debug
// records of a shutdown name each handler that had not returned (code
// SHUTDOWN_HANDLER_NOT_RETURNED, subject its job, SD-37); their messages
// run past 100 bytes (handler, attempt, token, state, start) and a step
// handler's name alone may take up to 206. The text listing shows each
// message whole, after its SEQ (the record's seq) and AT (its instant
// relative to the shutdown's start), as --json does: it used to cut them
// at 96 bytes, which dropped the start instant of every straggler, and
// the state and even the handler's name of a step job with a long name.
func TestSD37_ShutdownsDiagnosticsShowStragglerMessagesWhole(t *testing.T) {
	t.Parallel()
	fs, s := buildRuns(t)
	_, stdout, _ := run(t, fs, "-d", fixtureDir, "shutdowns")
	runs := runSections(stdout)
	if len(runs) != 3 {
		t.Fatalf("%d runs listed, want 3:\n%s", len(runs), stdout)
	}
	rows := tableRows(runs[0], "diagnostics (debug records)")
	want := []struct {
		seq       uint64
		job, msg  string
		handlerIn string
	}{
		{s.exportStraggler, runsJobExport, s.exportStragglerMsg, `handler "export"`},
		{s.stepStraggler, runsStepLedge, s.stepStrgMsg, fmt.Sprintf("handler %q", runsStepHandler)},
	}
	if len(rows) != len(want) {
		t.Fatalf("run 1 lists %d diagnostics, want %d:\n%s", len(rows), len(want), runs[0])
	}
	for k, w := range want {
		f := strings.Fields(rows[k])
		// Appended at t0+39.75s; the shutdown started at t0+10s.
		if len(f) < 5 || f[0] != fmt.Sprint(w.seq) || f[1] != "+29.75s" || f[2] != w.job || f[3] != "SHUTDOWN_HANDLER_NOT_RETURNED" {
			t.Errorf("diagnostic row %d %q, want seq %d at +29.75s subject %s", k, rows[k], w.seq, w.job)
		}
		if len(w.msg) <= 96 || !strings.Contains(w.msg, w.handlerIn) {
			t.Fatalf("message %q: the test needs one over 96 bytes naming its handler", w.msg)
		}
		if !strings.HasSuffix(rows[k], "  "+w.msg) {
			t.Errorf("diagnostic row %d does not end with its whole message\n row %q\n msg %q", k, rows[k], w.msg)
		}
	}
	if strings.Contains(runs[0], "…") {
		t.Errorf("run 1's listing cuts a cell:\n%s", runs[0])
	}
	// Run 3's shutdown published no debug record.
	if strings.Contains(runs[2], "diagnostics") {
		t.Errorf("run 3 lists diagnostics:\n%s", runs[2])
	}

	j := shutdownsJSON(t, fs)
	if len(j) != 3 || len(j[0].Diagnostics) != 2 || len(j[2].Diagnostics) != 0 || len(j[1].Diagnostics) != 0 {
		t.Fatalf("shutdowns --json diagnostics: %+v", j)
	}
	for k, w := range want {
		d := j[0].Diagnostics[k]
		if d.Seq != w.seq || d.At != "2026-01-05T10:00:39.75Z" || d.Subject != w.job || d.Code != "SHUTDOWN_HANDLER_NOT_RETURNED" || d.Message != w.msg {
			t.Errorf("shutdowns --json diagnostic %d: %+v, want seq %d subject %s message %q", k, d, w.seq, w.job, w.msg)
		}
	}
}

// diagnosticMessageMax is the bound on a debug record's message in the
// text listing: shutdown.DiagnosticBytesMax, the bound the engine clips
// a diagnostic's message to (qctl's tests may not import shutdown).
const diagnosticMessageMax = 1024

// TestShutdownsDiagnosticMessageBound: a debug record's message in the
// text listing is shown whole up to diagnosticMessageMax bytes, which
// every diagnostic the shutdown coordinator writes fits; a longer one
// (a record not written by it) is cut to diagnosticMessageMax-1 bytes and
// "…", never inside a character; a newline reads as a space, so that a
// row stays one line. --json carries every message as it is.
func TestShutdownsDiagnosticMessageBound(t *testing.T) {
	t.Parallel()
	fill := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	exact := fill("close failed:\nline two ", diagnosticMessageMax)
	// "é" (2 bytes) straddles the cut: bytes diagnosticMessageMax-2 and -1.
	long := fill("x", diagnosticMessageMax-2) + "é" + "tail"
	longer := fill("plain ", diagnosticMessageMax+1)
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: f.now()}))
	start := f.now()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "sigterm", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	f.at(time.Second)
	f.append(nil,
		rec(engine, &record.Debug{Subject: "db", Code: "SHUTDOWN_CLOSE_FAILED", Message: exact}),
		rec(engine, &record.Debug{Subject: "db", Code: "SHUTDOWN_CLOSE_FAILED", Message: long}),
		rec(engine, &record.Debug{Subject: "db", Code: "SHUTDOWN_CLOSE_FAILED", Message: longer}))
	f.close()

	_, stdout, _ := run(t, fs, "-d", fixtureDir, "shutdowns")
	rows := tableRows(stdout, "diagnostics (debug records)")
	want := []string{
		strings.ReplaceAll(exact, "\n", " "),
		long[:diagnosticMessageMax-2] + "…", // the cut moves back to the start of "é"
		longer[:diagnosticMessageMax-1] + "…",
	}
	if len(rows) != len(want) {
		t.Fatalf("%d diagnostics listed, want %d:\n%s", len(rows), len(want), stdout)
	}
	for k, w := range want {
		if !strings.HasSuffix(rows[k], "SHUTDOWN_CLOSE_FAILED  "+w) {
			t.Errorf("diagnostic %d: row ends %q, want %q", k, rows[k][max(0, len(rows[k])-40):], w[max(0, len(w)-40):])
		}
	}
	j := shutdownsJSON(t, fs)
	if len(j) != 1 || len(j[0].Diagnostics) != 3 || j[0].Diagnostics[0].Message != exact || j[0].Diagnostics[1].Message != long ||
		j[0].Diagnostics[2].Message != longer {
		t.Errorf("shutdowns --json does not carry the messages whole")
	}
}

// TestShutdownsRunsGolden pins shutdowns' whole output, text and JSON, on
// the three-run journal of buildRuns.
func TestShutdownsRunsGolden(t *testing.T) {
	t.Parallel()
	fs, _ := buildRuns(t)
	for _, json := range []bool{false, true} {
		name, args := "shutdowns_runs", []string{"-d", fixtureDir, "shutdowns"}
		if json {
			name, args = name+".json", append([]string{"--json"}, args...)
		}
		code, stdout, stderr := run(t, fs, args...)
		got := fmt.Sprintf("$ qctl %s\n# exit %d\n%s# stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
		checkGolden(t, name, got)
	}
}
