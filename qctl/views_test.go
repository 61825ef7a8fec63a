package qctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
)

// TestWF15_TimersOfPausedWorkflow: timers lists the Delay step of a
// paused workflow, which fires while paused (WF-15), and orders timers
// due at the same instant by kind, then id: the attempt timeout of
// jobRunning (P at t0+1h31s) before a job that becomes available then,
// whose id sorts first.
func TestWF15_TimersOfPausedWorkflow(t *testing.T) {
	t.Parallel()
	const early = "job_01KE4Z6R000000000000AAAA"
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, rec(wfImport, &record.WorkflowPaused{WorkflowID: wfImport}),
		f.enqueue(early, early, "warm_cache", "default", 0, 28*time.Second, nil))
	f.close()

	_, stdout, stderr := run(t, fs, "--json", "-d", fixtureDir, "timers")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var tm struct{ At, Kind, ID string }
		if err := json.Unmarshal([]byte(line), &tm); err != nil {
			t.Fatalf("timers --json: %v: %q (stderr %s)", err, line, stderr)
		}
		got = append(got, tm.At+" "+tm.Kind+" "+tm.ID)
	}
	want := []string{
		"2026-01-05T11:00:31Z attempt_timeout " + jobRunning,
		"2026-01-05T11:00:31Z job_available " + early,
		"2026-01-05T11:01:15Z step_delay " + wfImport,
		"2026-01-05T12:00:01Z job_available " + jobDelayed,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("timers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestShowFinished: show of a finished step job names its workflow as the
// workflow's terminal-index summary has it; show of a finished workflow
// whose summary is missing (verify reports that) reads how it ended from
// its own records: completed, or cancelled.
func TestShowFinished(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	_, stdout, _ := run(t, fs, "-d", fixtureDir, "show", stepHello)
	if want := "workflow  " + wfHello + " step 1 of 1 (hello, completed)\n"; !strings.Contains(stdout, want) {
		t.Errorf("show %s does not say %q:\n%s", stepHello, want, stdout)
	}

	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, rec(wfApproval, &record.WorkflowCancelled{WorkflowID: wfApproval}))
	f.close()
	editStore(t, fs, fixtureDir, func(db *pebble.DB) {
		if err := db.Delete(indexKey(wfHello), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	})
	for id, want := range map[string]string{
		wfHello:    `"status":"completed",`,
		wfApproval: `"status":"cancelled",`,
	} {
		_, stdout, stderr := run(t, fs, "--json", "-d", fixtureDir, "show", id)
		if first, _, _ := strings.Cut(stdout, "\n"); !strings.Contains(first, want) {
			t.Errorf("show %s without a summary: %s, want %s (stderr %s)", id, first, want, stderr)
		}
	}
	// The listing shows the cancelled workflow as its cancellation left
	// it: no longer parked on its signal.
	_, stdout, _ = run(t, fs, "--json", "-d", fixtureDir, "workflows")
	if line := jsonByID(t, stdout)[wfApproval]; !strings.Contains(line, `"status":"cancelled"`) || strings.Contains(line, `"wait"`) {
		t.Errorf("workflows: %s", line)
	}
}

// TestTimersArmedByRequeue: a buried job requeued for later waits on a
// timer that job_requeued armed.
func TestTimersArmedByRequeue(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, rec(jobBuried, &record.JobRequeued{JobID: jobBuried, AvailableAt: f.now() + int64(time.Minute)}))
	f.close()
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "timers")
	if want := "job_available    " + jobBuried + "  queue=billing handler=charge_card set by job_requeued"; !strings.Contains(stdout, want) {
		t.Errorf("timers does not say %q:\n%s%s", want, stdout, stderr)
	}
}

// TestInspectSnapshots: inspect counts the snapshots that pass their
// checks, names the newest, and counts apart those that fail them, which
// Open ignores (spec/reliability.md §4.3).
func TestInspectSnapshots(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	snapshotAtEnd(t, fs, nil)
	_, stdout, _ := run(t, fs, "inspect", fixtureDir)
	if got, want := kvLine(t, stdout, "snapshots"), "2 (newest at seq 66)"; got != want {
		t.Errorf("inspect: snapshots %q, want %q", got, want)
	}
	damageFirstSnapshot(t, fs)
	_, stdout, _ = run(t, fs, "inspect", fixtureDir)
	if got, want := kvLine(t, stdout, "snapshots"), "1 (newest at seq 66), 1 failing their checks (ignored at open)"; got != want {
		t.Errorf("inspect with the snapshot at seq 19 damaged: snapshots %q, want %q", got, want)
	}
}

// TestDL2_EnqueuedWithEngineDeliveryTimeout: a job_enqueued whose job
// took no DeliveryTimeout of its own, its handler's or its queue's records
// 0, which means the engine's Options.DeliveryTimeout when an attempt
// starts (DL-2): events and show say so rather than print a zero budget
// ("delivery_timeout=0s"); JSON keeps the record's 0.
func TestDL2_EnqueuedWithEngineDeliveryTimeout(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	const id = "job_01KE4Z6R000000000000ENGT"
	f.at(time.Hour + 3*time.Second)
	f.append(nil, f.enqueue(id, id, "send_email", "default", 0, 0, func(b *record.JobEnqueued) { b.DeliveryTimeoutNanos = 0 }))
	f.close()
	for _, args := range [][]string{{"events", "--stream", id}, {"show", id}} {
		_, stdout, stderr := run(t, fs, append([]string{"-d", fixtureDir}, args...)...)
		if !strings.Contains(stdout, " delivery_timeout=engine ") || strings.Contains(stdout, "delivery_timeout=0s") {
			t.Errorf("%v does not say the job takes the engine's delivery timeout:\n%s%s", args, stdout, stderr)
		}
	}
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "--json", "events", "--stream", id)
	if !strings.Contains(stdout, `"delivery_timeout_ns":0`) {
		t.Errorf("events --json does not keep the record's 0:\n%s%s", stdout, stderr)
	}
}

// TestWF8_ShowSubWorkflowWaitsOnItsChild: a running workflow whose
// current step is a SubWorkflow does not progress until its child ends
// (WF-8); show names the child and its status as why, in both forms.
func TestWF8_ShowSubWorkflowWaitsOnItsChild(t *testing.T) {
	t.Parallel()
	const (
		parent = "wf_01KE4Z6R0000000000000WF6"
		child  = "wf_01KE4Z6R0000000000000WF7"
	)
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil,
		rec(parent, &record.WorkflowStarted{WorkflowID: parent, Name: "order", DefinitionHash: "sha256:aa", Steps: 2, At: f.now(),
			State: value(t, map[string]any{})}),
		rec(parent, &record.StepCompleted{WorkflowID: parent, Step: 0, Next: 1}),
		rec(child, &record.WorkflowStarted{WorkflowID: child, Name: "ship", DefinitionHash: "sha256:bb", Steps: 1, At: f.now(),
			State: value(t, map[string]any{}), ParentID: parent, ParentStep: 1}),
		rec(child, &record.WorkflowWaiting{WorkflowID: child, Step: 0, Status: "waiting_for_signal", Signals: []string{"shipped"}}))
	f.close()

	want := "SubWorkflow step 2 of 2 waits on child " + child + " (ship, waiting_for_signal)"
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "show", parent)
	if !strings.Contains(stdout, "stuck        "+want) {
		t.Errorf("show %s does not say %q:\n%s%s", parent, want, stdout, stderr)
	}
	_, stdout, _ = run(t, fs, "--json", "-d", fixtureDir, "show", parent)
	var o struct{ Stuck []string }
	if err := json.Unmarshal([]byte(strings.SplitN(stdout, "\n", 2)[0]), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Stuck) != 1 || !strings.HasPrefix(o.Stuck[0], want) {
		t.Errorf("show --json %s: stuck %q, want %q", parent, o.Stuck, want)
	}
}

// TestShowTimesCountFromTheDecision: show's times count from the
// workflow's dispatch instant (workflow_started's at, the header's
// "dispatched"), and a job's from its enqueue decision, not from when
// the first record's group was written, which comes later: a workflow
// whose record was written 2 s after its dispatch read "at=-2s" in its
// own timeline and a 1 h deadline as +59m58s; a job
// available at once read "available_at=-1ms" and its first attempt
// "s=-1ms".
func TestShowTimesCountFromTheDecision(t *testing.T) {
	t.Parallel()
	const wf, job = "wf_01KE4Z6R0000000000000LATE", "job_01KE4Z6R000000000000LATE"
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	dispatched := f.now()
	f.at(2 * time.Second) // the group is written 2 s after the decision
	f.append(nil, rec(wf, &record.WorkflowStarted{WorkflowID: wf, Name: "report", DefinitionHash: "sha256:aa", Steps: 1,
		At: dispatched, State: value(t, map[string]any{}), DeadlineAt: dispatched + int64(time.Hour)}))
	decided := f.now()
	f.at(2*time.Second + time.Millisecond)
	f.append(nil, f.enqueue(job, job, "render", "default", 0, 0, func(b *record.JobEnqueued) { b.AvailableAt = decided }))
	f.clk.Set(time.Unix(0, decided))
	f.start(job, job, 1) // S at the decision, written at once
	f.close()

	_, stdout, _ := run(t, fs, "-d", fixtureDir, "show", wf)
	for _, want := range []string{"deadline_at=+1h0m0s", "  +2s  workflow_started", " at=+0s "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show %s does not say %q:\n%s", wf, want, stdout)
		}
	}
	_, stdout, _ = run(t, fs, "-d", fixtureDir, "show", job)
	if strings.Contains(stdout, "-1ms") || !strings.Contains(stdout, "available_at=+0s") || !strings.Contains(stdout, " s=+0s ") {
		t.Errorf("show %s counts from the record, not the decision:\n%s", job, stdout)
	}
}
