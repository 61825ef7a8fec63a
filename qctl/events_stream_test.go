package qctl_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestEventsStreamOfAStepJob: a step job's records live in its workflow's
// stream (WF-1), so events --stream with a step job's id lists that
// stream's records of the job alone, whether the job is live or finished
// and known from the terminal index. A job's own stream, a workflow's
// (with its step jobs) and the other filters are unchanged.
func TestEventsStreamOfAStepJob(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	type row struct {
		Seq    uint64
		Stream string
		Kind   string
		Body   struct {
			JobID string `json:"job_id"`
		}
	}
	list := func(args ...string) []row {
		t.Helper()
		args = append([]string{"--json", "-d", fixtureDir, "events"}, args...)
		code, stdout, stderr := run(t, fs, args...)
		if code != 0 {
			t.Fatalf("qctl %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		var rows []row
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if line == "" {
				continue
			}
			var r row
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("qctl %s: %v: %q", strings.Join(args, " "), err, line)
			}
			rows = append(rows, r)
		}
		return rows
	}
	all := list()
	seqs := func(rows []row, keep func(row) bool) []uint64 {
		var out []uint64
		for _, r := range rows {
			if keep(r) {
				out = append(out, r.Seq)
			}
		}
		return out
	}
	for _, c := range []struct{ id, stream string }{
		{stepFetch, wfImport},  // completed: from its summary
		{stepSync, wfNightly},  // buried with its workflow
		{stepHello, wfHello},   // completed in a completed workflow
		{stepReport, wfReport}, // live
		{jobRetry, jobRetry},   // a job's own stream
		{wfImport, wfImport},   // a workflow with its step jobs
	} {
		want := seqs(all, func(r row) bool {
			return r.Stream == c.stream && (c.id == c.stream || r.Body.JobID == c.id)
		})
		if len(want) == 0 {
			t.Fatalf("fixture: %d records of %s", len(want), c.id)
		}
		if got := seqs(list("--stream", c.id), func(row) bool { return true }); !slices.Equal(got, want) {
			t.Errorf("events --stream %s lists seqs %v, want %v", c.id, got, want)
		}
	}
	got := list("--stream", stepFetch, "--kind", "attempt_started")
	if len(got) != 1 || got[0].Kind != "attempt_started" || got[0].Body.JobID != stepFetch {
		t.Errorf("events --stream %s --kind attempt_started: %+v", stepFetch, got)
	}
}
