package qctl_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
