package qctl_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// TestRL11_BuriedStepJobsThatLeftWithTheirWorkflowStayBuried: a cancelled
// workflow's buried step jobs leave the state with it (RL-11): those
// buried before, taken along by a workflow_cancelled marked
// archive_buried, and its pending ones, buried by a job_buried marked
// final. inspect still counts them buried, and jobs lists them buried;
// a step job that is not buried is not taken along.
func TestRL11_BuriedStepJobsThatLeftWithTheirWorkflowStayBuried(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	// nightly_sync failed with its step job buried; report is paused with
	// its step job pending.
	f.append(nil, rec(wfNightly, &record.WorkflowCancelled{WorkflowID: wfNightly, ArchiveBuried: true}))
	f.append(nil,
		rec(wfReport, &record.WorkflowCancelled{WorkflowID: wfReport}),
		rec(wfReport, &record.JobBuried{JobID: stepReport, Code: "WORKFLOW_CANCELLED", Error: "Workflow cancelled", Final: true}))
	f.close()

	_, stdout, stderr := run(t, fs, "inspect", fixtureDir)
	// jobBuried is buried in the state; stepSync and stepReport left it.
	if got, want := kvLine(t, stdout, "jobs"), "pending 2  processing 1  buried 3  completed 5  corrupt 0"; got != want {
		t.Errorf("inspect: jobs %q, want %q\n%s", got, want, stderr)
	}
	_, stdout, stderr = run(t, fs, "--json", "-d", fixtureDir, "jobs", "--status", "buried")
	var ids []string
	for id := range jsonByID(t, stdout) {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if got, want := strings.Join(ids, " "), strings.Join([]string{jobBuried, stepSync, stepReport}, " "); got != want {
		t.Errorf("jobs --status buried: %s, want %s\n%s", got, want, stderr)
	}
}

// TestRL11_ArchiveBuriedTakesTheBuriedStepJobsAlong: a workflow_cancelled
// marked archive_buried takes the workflow's buried step jobs out of the
// state, and inspect counts them buried all the same; without the mark
// they stay in the state, buried, and count once.
func TestRL11_ArchiveBuriedTakesTheBuriedStepJobsAlong(t *testing.T) {
	t.Parallel()
	for _, archive := range []bool{true, false} {
		fs := fixture(t)
		f := newFx(t, fs, fixtureDir)
		f.at(time.Hour + 3*time.Second)
		f.append(nil, rec(wfNightly, &record.WorkflowCancelled{WorkflowID: wfNightly, ArchiveBuried: archive}))
		f.close()
		_, stdout, _ := run(t, fs, "inspect", fixtureDir)
		if got, want := kvLine(t, stdout, "jobs"), "pending 3  processing 1  buried 2  completed 5  corrupt 0"; got != want {
			t.Errorf("archive_buried %v: inspect: jobs %q, want %q", archive, got, want)
		}
	}
}

// TestProgressReachesAllOfTheLog: the progress line of a scan counts the
// records read against the last seq: at the last record it says 100%.
func TestProgressReachesAllOfTheLog(t *testing.T) {
	t.Parallel()
	if _, _, got := inspectWithProgress(t, 4, 1024); !strings.Contains(got, "\rqctl inspect: seq 4096 of 4096 (100%)") {
		t.Fatalf("progress %q", got)
	}
}
