package qctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// showRows returns the rows of show's table whose header line starts
// with header, up to the blank line after it.
func showRows(out, header string) []string {
	_, after, ok := strings.Cut("\n"+out, "\n"+header)
	if !ok {
		return nil
	}
	var rows []string
	for _, l := range strings.Split(after, "\n")[1:] { // the rest of the header line
		if l == "" {
			break
		}
		rows = append(rows, l)
	}
	return rows
}

// stuckLines returns the values of show's "stuck" lines: the first one
// keyed "stuck", the ones after it continuing under it.
func stuckLines(out string) []string {
	var got []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "stuck "):
			in = true
			got = append(got, strings.TrimSpace(strings.TrimPrefix(line, "stuck ")))
		case in && strings.HasPrefix(line, " "):
			got = append(got, strings.TrimSpace(line))
		default:
			in = false
		}
	}
	return got
}

// hasStuck reports whether one of show's stuck lines starts with prefix.
func hasStuck(out, prefix string) bool {
	for _, s := range stuckLines(out) {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestDL44_ShowHardCutoffPassedAtH: at H itself the attempt's hard cutoff
// has passed (DL-7: H is the instant the budget ends), and show says what
// recovery will do; a millisecond before, it has not.
func TestDL44_ShowHardCutoffPassedAtH(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	// jobRunning started at t0+1h2s with a 30 s budget: H is t0+1h32s.
	h := t0.Add(time.Hour + 32*time.Second)
	const passed = "its hard cutoff has passed"
	for _, c := range []struct {
		now  time.Time
		want bool
	}{{h, true}, {h.Add(-time.Millisecond), false}} {
		_, stdout, stderr := run(t, fs, "-d", fixtureDir, "--now", c.now.Format(time.RFC3339Nano), "show", jobRunning)
		if got := hasStuck(stdout, passed); got != c.want {
			t.Errorf("show at %v (H %v): says %q: %v, want %v\n%s%s", c.now, h, passed, got, c.want, stdout, stderr)
		}
	}
}

// TestShowPendingJobEligibleAtItsAvailableAt: a job whose available_at is
// now waits on no timer: it is eligible; a millisecond earlier it waits.
func TestShowPendingJobEligibleAtItsAvailableAt(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	// jobDelayed was enqueued at t0+1s with a 2 h delay.
	avail := t0.Add(2*time.Hour + time.Second)
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "--now", avail.Format(time.RFC3339), "show", jobDelayed)
	if !hasStuck(stdout, "eligible since 2026-01-05T12:00:01.000Z (now) but not started") || hasStuck(stdout, "timer:") {
		t.Errorf("show at its available_at:\n%s%s", stdout, stderr)
	}
	_, stdout, stderr = run(t, fs, "-d", fixtureDir, "--now", avail.Add(-time.Millisecond).Format(time.RFC3339Nano), "show", jobDelayed)
	if !hasStuck(stdout, "timer: available at 2026-01-05T12:00:01.000Z (in 1ms), delayed at enqueue") {
		t.Errorf("show a millisecond before its available_at:\n%s%s", stdout, stderr)
	}
}

// TestShowPendingJobWaitsOnItsBackoff: a job whose last attempt scheduled a
// retry waits on that backoff, and show names the attempt; a job whose
// last attempt's code was HANDLER_NOT_REGISTERED and that is available is
// parked on its handler, not merely eligible.
func TestShowPendingJobWaitsOnItsBackoff(t *testing.T) {
	t.Parallel()
	const backoff, parked = "job_01KE4Z6R000000000000BKOF", "job_01KE4Z6R000000000000PARK"
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, f.enqueue(backoff, backoff, "resize_image", "images", 0, 0, nil),
		f.enqueue(parked, parked, "ocr", "images", 0, 0, nil))
	bt := f.start(backoff, backoff, 1)
	pt := f.start(parked, parked, 1)
	f.append(nil, f.retry(backoff, backoff, bt, "HANDLER_ERROR", "image store: connection reset", 5*time.Minute),
		f.retry(parked, parked, pt, "HANDLER_NOT_REGISTERED", "no handler ocr", 0))
	f.close()

	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "show", backoff)
	if want := "timer: available at 2026-01-05T11:05:03.000Z (in 4m58s), backoff after attempt 1 (retry_scheduled)"; !hasStuck(stdout, want) {
		t.Errorf("show %s does not say %q:\n%s%s", backoff, want, stdout, stderr)
	}
	_, stdout, stderr = run(t, fs, "-d", fixtureDir, "show", parked)
	if want := "parked on an unregistered handler: ocr was not registered when it was last delivered"; !hasStuck(stdout, want) || hasStuck(stdout, "eligible since") {
		t.Errorf("show %s does not say only %q:\n%s%s", parked, want, stdout, stderr)
	}
}

// TestWD5_ShowRunningWorkflowExpiresAtItsDeadline: WD-5's predicate is
// inclusive: at deadline_at itself a running workflow is expired, and show
// says the next check fails it.
func TestWD5_ShowRunningWorkflowExpiresAtItsDeadline(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	// data_import was dispatched at t0+70s with a 24 h deadline.
	dl := t0.Add(70*time.Second + 24*time.Hour)
	const passed = "deadline_at passed 0s ago: the next deadline check fails it (WD-5, WD-6)"
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "--now", dl.Format(time.RFC3339), "show", wfImport)
	if !hasStuck(stdout, passed) {
		t.Errorf("show %s at its deadline does not say %q:\n%s%s", wfImport, passed, stdout, stderr)
	}
	// The deadline_at line agrees with the stuck line: reached, not 0s left.
	if want := "(overdue 0s)"; !strings.Contains(kvLine(t, stdout, "deadline_at"), want) {
		t.Errorf("show %s at its deadline: deadline_at line %q, want %s", wfImport, kvLine(t, stdout, "deadline_at"), want)
	}
	_, stdout, _ = run(t, fs, "-d", fixtureDir, "--now", dl.Add(-time.Millisecond).Format(time.RFC3339Nano), "show", wfImport)
	if hasStuck(stdout, "deadline_at passed") {
		t.Errorf("show %s before its deadline says it passed:\n%s", wfImport, stdout)
	}
	if want := "(1ms remaining)"; !strings.Contains(kvLine(t, stdout, "deadline_at"), want) {
		t.Errorf("show %s 1ms before its deadline: deadline_at line %q, want %s", wfImport, kvLine(t, stdout, "deadline_at"), want)
	}
}

// TestWD11_ShowPausedWorkflowPastItsDeadline: a paused workflow does not
// expire (WD-11), and show says what happens after Resume.
func TestWD11_ShowPausedWorkflowPastItsDeadline(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	// report was dispatched at t0+210s with a 2 h deadline: 12:03:30.
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "--now", "2026-01-05T13:03:30Z", "show", wfReport)
	want := "deadline_at passed 1h0m0s ago: a paused workflow does not expire; after Resume the next deadline check fails it (WD-11)"
	if !hasStuck(stdout, want) {
		t.Errorf("show %s past its deadline does not say %q:\n%s%s", wfReport, want, stdout, stderr)
	}
}

// TestWF7_ShowWaitingOnAQuorum: a workflow waiting on other workflows
// names them and the mode, with the quorum it needs (WF-7).
func TestWF7_ShowWaitingOnAQuorum(t *testing.T) {
	t.Parallel()
	const wf = "wf_01KE4Z6R0000000000000QRM"
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil,
		rec(wf, &record.WorkflowStarted{WorkflowID: wf, Name: "fan_in", DefinitionHash: "sha256:ab", Steps: 2, At: f.now(),
			State: value(t, map[string]any{})}),
		rec(wf, &record.WorkflowWaiting{WorkflowID: wf, Step: 0, Status: "waiting_for_workflows",
			Workflows: []string{wfImport, wfApproval, wfReport}, Mode: "quorum", Quorum: 2}))
	f.close()
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "show", wf)
	want := "waiting on workflows " + wfImport + ", " + wfApproval + ", " + wfReport + " (mode quorum 2, WF-7)"
	if !hasStuck(stdout, want) {
		t.Errorf("show %s does not say %q:\n%s%s", wf, want, stdout, stderr)
	}
}

// TestDL16_ShowAttemptReasons: an attempt's cancellation reason shows with
// its instant relative to the enqueue (DL-16), a reason recorded without
// an instant alone; the error column and JSON carry an error that has no
// code; long errors are cut to the column's width with "…".
func TestDL16_ShowAttemptReasons(t *testing.T) {
	t.Parallel()
	const (
		id = "job_01KE4Z6R000000000000REAS"
		wf = "wf_01KE4Z6R0000000000000REA"
	)
	long := "upstream answered 503 Service Unavailable: " + strings.Repeat("retry later; ", 10)
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, f.enqueue(id, id, "sync", "default", 0, 0, nil))
	f.at(time.Hour + 4*time.Second)
	tok := f.start(id, id, 1)
	f.at(time.Hour + 6*time.Second)
	f.append(nil, rec(id, &record.AttemptReleased{Outcome: record.Outcome{JobID: id, Token: tok, Reason: "shutdown",
		ReasonAt: f.now() - int64(time.Second), Joined: true}, AvailableAt: f.now()}))
	tok = f.start(id, id, 2)
	f.append(nil, rec(id, &record.AttemptRetryScheduled{Outcome: record.Outcome{JobID: id, Token: tok, Class: "retryable",
		Error: long, Reason: "timeout", Joined: true}, DelayNanos: int64(time.Second), AvailableAt: f.now() + int64(time.Second)}))
	// A workflow whose step job failed with the same long error.
	f.append(nil,
		rec(wf, &record.WorkflowStarted{WorkflowID: wf, Name: "mirror", DefinitionHash: "sha256:cd", Steps: 1, At: f.now(),
			State: value(t, map[string]any{})}),
		f.enqueue(wf, "job_01KE4Z6R000000000000REAW", "sync", "default", 0, 0, func(b *record.JobEnqueued) { b.WorkflowID = wf }))
	tok = f.start(wf, "job_01KE4Z6R000000000000REAW", 1)
	f.append(nil, f.retry(wf, "job_01KE4Z6R000000000000REAW", tok, "HTTP_503", long, time.Minute))
	f.close()

	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "show", id)
	rows := showRows(stdout, "ATTEMPT ")
	if len(rows) != 2 {
		t.Fatalf("show %s: attempt rows %q\n%s%s", id, rows, stdout, stderr)
	}
	if !strings.Contains(rows[0], "  released  ") || !strings.Contains(rows[0], "  shutdown at +2s  ") {
		t.Errorf("released attempt: %q, want reason %q", rows[0], "shutdown at +2s")
	}
	// The error cell holds at most 64 bytes before its "…".
	wantErr := (long + " (retryable)")[:63] + "…"
	if !strings.Contains(rows[1], "  timeout  ") || !strings.HasSuffix(rows[1], wantErr) {
		t.Errorf("retried attempt: %q, want reason %q then error %q", rows[1], "timeout", wantErr)
	}

	_, stdout, stderr = run(t, fs, "--json", "-d", fixtureDir, "show", id)
	var atts []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if o["type"] == "attempt" {
			atts = append(atts, o)
		}
	}
	if len(atts) != 2 {
		t.Fatalf("show --json %s: %d attempts\n%s%s", id, len(atts), stdout, stderr)
	}
	if _, ok := atts[0]["error"]; ok {
		t.Errorf("released attempt without error has an error member: %v", atts[0])
	}
	if atts[1]["error"] != long || atts[1]["class"] != "retryable" || atts[1]["code"] != "" {
		t.Errorf("attempt that failed without a code: %v, want error %q, class retryable, code \"\"", atts[1], long)
	}

	_, stdout, stderr = run(t, fs, "-d", fixtureDir, "show", wf)
	steps := showRows(stdout, "STEP JOB ")
	wantStepErr := ("HTTP_503: " + long)[:39] + "…"
	if len(steps) != 1 || !strings.HasSuffix(steps[0], "  "+wantStepErr) {
		t.Errorf("show %s: step job rows %q, want the error cut to %q\n%s", wf, steps, wantStepErr, stderr)
	}
}

// TestShowStepJobOfAWorkflowWithoutItsSummary: a finished step job whose
// workflow left no trace but its id (its summary missing, which verify
// reports) still says which step it was, counting from 1.
func TestShowStepJobOfAWorkflowWithoutItsSummary(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	editStore(t, fs, fixtureDir, func(db *pebble.DB) {
		if err := db.Delete(indexKey(wfHello), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	code, stdout, stderr := run(t, fs, "-d", fixtureDir, "show", stepHello)
	if code != qctl.ExitOK {
		t.Fatalf("show %s: exit %d: %s", stepHello, code, stderr)
	}
	if got, want := kvLine(t, stdout, "workflow"), wfHello+" step 1"; got != want {
		t.Errorf("show %s: workflow %q, want %q", stepHello, got, want)
	}
}
