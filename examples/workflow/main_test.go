package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
)

// The README's workflow demo, run as a user runs it: the first run stops
// with the order waiting for its signal, the second finds it there in the
// journal and ships it, the third finds it completed and appends nothing
// to it, and a fourth with another order number starts a new workflow.
func TestWorkflowDemoRunsAcrossRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "workflow-data")
	runs := make([]string, 4)
	for i, order := range []string{"1001", "1001", "1001", "1002"} {
		var out bytes.Buffer
		if err := run(dir, order, &out, 2*time.Minute); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out.String())
		}
		runs[i] = out.String()
	}
	ids := make([]string, 4)
	for i, out := range runs {
		m := regexp.MustCompile(`is workflow (wf_\S+), `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("run %d names no workflow:\n%s", i+1, out)
		}
		ids[i] = m[1]
	}
	if ids[1] != ids[0] || ids[2] != ids[0] || ids[3] == ids[0] {
		t.Fatalf("workflow ids %v: order 1001 must be one workflow in runs 1-3 (WF-14), order 1002 another", ids)
	}
	for i, want := range []string{
		"now waits for the warehouse's \"shipped\" signal",
		"order 1001 completed; its final state",
		"order 1001 shipped in an earlier run",
		"order 1002 now waits",
	} {
		if !strings.Contains(runs[i], want) {
			t.Errorf("run %d lacks %q:\n%s", i+1, want, runs[i])
		}
	}
	if !strings.Contains(runs[0], "reserve, attempt 2: reserved") || !strings.Contains(runs[1], "  tracking          JD01461001\n") {
		t.Errorf("the first run shows no retried reserve, or the second no shipped state:\n%s\n%s", runs[0], runs[1])
	}

	// The journal holds one workflow per order, and order 1001's history
	// is the one the demo describes: a retried reserve, two branches, the
	// wait, the signal across the restart, the close.
	j, err := journal.Open(dir, journal.Options{Clock: clocktest.New(time.Unix(0, 0)), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var kinds []string
	count := map[string]int{}
	it := j.ScanStream(ids[0], 1)
	for it.Next() {
		k := it.Record().Kind().String()
		count[k]++
		// The step jobs' records share the stream; their order between
		// the branches varies from run to run.
		if !strings.HasPrefix(k, "job_") && !strings.HasPrefix(k, "attempt_") {
			kinds = append(kinds, k)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"workflow_started", "step_completed", "step_completed", "workflow_waiting",
		"signal_received", "workflow_resumed", "step_completed", "step_completed", "workflow_completed",
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("workflow records %v, want %v", kinds, want)
	}
	// Four step jobs (reserve, two branches, close), five starts: the
	// reserve's first attempt was retried.
	if count["job_enqueued"] != 4 || count["attempt_started"] != 5 || count["attempt_retry_scheduled"] != 1 || count["attempt_succeeded"] != 4 {
		t.Fatalf("step job records %v, want 4 enqueued, 5 started, 1 retried, 4 succeeded", count)
	}
}
