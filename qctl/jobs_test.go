package qctl_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// jobJSON is what TestJobsAgreeWithShow compares of a job line.
type jobJSON struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	Status    string  `json:"status"`
	LastCode  *string `json:"last_code"`
	LastError *string `json:"last_error"`
}

// TestJobsAgreeWithShow: jobs lists each job's status and last failure as
// show (and api.Status, both from the terminal index for a finished job)
// give them: a job that failed once and then succeeded keeps its last
// error (api.JobStatus.LastError).
func TestJobsAgreeWithShow(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	_, stdout, _ := run(t, fs, "--json", "-d", fixtureDir, "jobs")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 2 {
		t.Fatalf("jobs --json:\n%s", stdout)
	}
	str := func(p *string) string {
		if p == nil {
			return "<none>"
		}
		return *p
	}
	sawRetry := false
	for _, line := range lines {
		var row jobJSON
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("jobs --json line %q: %v", line, err)
		}
		_, out, _ := run(t, fs, "--json", "-d", fixtureDir, "show", row.ID)
		first, _, _ := strings.Cut(out, "\n")
		var show jobJSON
		if err := json.Unmarshal([]byte(first), &show); err != nil || show.Type != "show_job" {
			t.Fatalf("show --json %s: first line %q (%v)", row.ID, first, err)
		}
		if row.Status != show.Status || str(row.LastCode) != str(show.LastCode) || str(row.LastError) != str(show.LastError) {
			t.Errorf("job %s: jobs says %s %s %q, show says %s %s %q", row.ID,
				row.Status, str(row.LastCode), str(row.LastError), show.Status, str(show.LastCode), str(show.LastError))
		}
		if row.ID == jobRetry {
			sawRetry = true
			if row.Status != "completed" || str(row.LastCode) != "HANDLER_ERROR" || str(row.LastError) != "image store: connection reset" {
				t.Errorf("jobs: %s is %s %s %q, want completed with its retry's error", jobRetry, row.Status, str(row.LastCode), str(row.LastError))
			}
		}
	}
	if !sawRetry {
		t.Fatalf("jobs --json does not list %s:\n%s", jobRetry, stdout)
	}
	_, text, _ := run(t, fs, "-d", fixtureDir, "jobs")
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, jobRetry) && !strings.HasSuffix(line, "HANDLER_ERROR: image store: connection reset") {
			t.Errorf("jobs: the ERROR column of %s does not show its last error:\n%s", jobRetry, line)
		}
	}
}

// TestListFilters: jobs and workflows list exactly the rows their flags
// select, in enqueue or dispatch order, completed jobs (read from the
// log) and the jobs and workflows of a stream set aside (status corrupt,
// spec/reliability.md §4.4) included: each filter applies to those too.
func TestListFilters(t *testing.T) {
	t.Parallel()
	sound, damaged := fixture(t), damagedFixture(t, damagedSeq)
	for _, c := range []struct {
		fs   vfs.FS
		args []string
		want []string
	}{
		{sound, []string{"jobs", "--status", "completed"}, []string{jobOK, jobRetry, jobLost, stepFetch, stepHello}},
		{sound, []string{"jobs", "--status", "buried,completed", "--queue", "billing"}, []string{jobBuried}},
		{damaged, []string{"jobs", "--handler", "greet"}, []string{stepHello}},
		{damaged, []string{"jobs", "--status", "buried"}, []string{jobBuried}},
		{sound, []string{"workflows", "--status", "completed"}, []string{wfHello}},
		{damaged, []string{"workflows", "--name", "hello"}, []string{wfHello}},
		{damaged, []string{"workflows", "--status", "failed,completed,corrupt"}, []string{wfNightly, wfHello}},
	} {
		args := append([]string{"--json", "-d", fixtureDir}, c.args...)
		_, stdout, stderr := run(t, c.fs, args...)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var row struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("qctl %s: %v: %q (stderr %s)", strings.Join(args, " "), err, line, stderr)
			}
			got = append(got, row.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("qctl %s lists %v, want %v", strings.Join(args, " "), got, c.want)
		}
	}
}

// TestWorkflowsAgreeWithShow: workflows --json and the first line of show
// --json give each workflow the same members (but type, stuck, and
// remaining_ns where the line omits it), whether it is live or ended and
// read from its terminal-index summary: start_seq included.
func TestWorkflowsAgreeWithShow(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	_, stdout, _ := run(t, fs, "--json", "-d", fixtureDir, "workflows")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) < 5 {
		t.Fatalf("workflows --json:\n%s", stdout)
	}
	for _, line := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("workflows --json line %q: %v", line, err)
		}
		id := row["id"].(string)
		_, out, _ := run(t, fs, "--json", "-d", fixtureDir, "show", id)
		first, _, _ := strings.Cut(out, "\n")
		var show map[string]any
		if err := json.Unmarshal([]byte(first), &show); err != nil || show["type"] != "show_workflow" {
			t.Fatalf("show --json %s: first line %q (%v)", id, first, err)
		}
		for _, k := range []string{"type", "stuck"} {
			delete(row, k)
			delete(show, k)
		}
		for k, v := range row {
			if got, ok := show[k]; !ok || !reflectEqual(got, v) {
				t.Errorf("workflow %s: workflows says %s=%v, show says %v (present %t)", id, k, v, got, ok)
			}
		}
		for k, v := range show {
			if _, ok := row[k]; !ok {
				t.Errorf("workflow %s: show says %s=%v, workflows has no %s", id, k, v, k)
			}
		}
	}
}

func reflectEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
