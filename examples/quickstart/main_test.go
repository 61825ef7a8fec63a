package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// row is one line of the demo's job table.
type row struct {
	id, status, lastError string
	attempts              int
}

// table parses the job table that follows the line after in out.
func table(t *testing.T, out, after string) map[string]row {
	t.Helper()
	_, rest, ok := strings.Cut(out, after+"\n")
	if !ok {
		t.Fatalf("output has no %q:\n%s", after, out)
	}
	lines := strings.Split(rest, "\n")
	if len(lines) == 0 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "JOB ") {
		t.Fatalf("no table header after %q:\n%s", after, out)
	}
	rows := map[string]row{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 4 {
			break
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			t.Fatalf("attempts %q in %q: %v", f[3], l, err)
		}
		rows[f[0]] = row{id: f[1], status: f[2], attempts: n, lastError: strings.Join(f[4:], " ")}
	}
	return rows
}

// The README's demo, run twice on one journal as a user runs it: the first
// run settles the four jobs as the README says, the second reads them back
// from the journal, and the journal holds the history the README describes
// (one retry, a two-second delay, a bury).
func TestQuickstartRunTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "quickstart-data")

	var first bytes.Buffer
	if err := run(dir, &first, 2*time.Minute); err != nil {
		t.Fatalf("first run: %v\n%s", err, first.String())
	}
	if !strings.Contains(first.String(), ": 0 records replayed at open") {
		t.Fatalf("first run on a new journal replayed records:\n%s", first.String())
	}
	got := table(t, first.String(), "summary:")
	want := map[string]row{
		"email":   {status: "completed", attempts: 1},
		"flaky":   {status: "completed", attempts: 2, lastError: "report service unavailable"},
		"delayed": {status: "completed", attempts: 1},
		"poison":  {status: "buried", attempts: 1, lastError: "permanent BAD_INPUT: broken.csv: header row missing"},
	}
	if len(got) != len(want) {
		t.Fatalf("summary has %d jobs, want %d:\n%s", len(got), len(want), first.String())
	}
	for label, w := range want {
		g := got[label]
		if g.status != w.status || g.attempts != w.attempts || g.lastError != w.lastError {
			t.Errorf("summary %s = %+v, want status %s, %d attempts, last error %q", label, g, w.status, w.attempts, w.lastError)
		}
	}

	var second bytes.Buffer
	if err := run(dir, &second, 2*time.Minute); err != nil {
		t.Fatalf("second run: %v\n%s", err, second.String())
	}
	if strings.Contains(second.String(), ": 0 records replayed at open") {
		t.Fatalf("second run replayed nothing:\n%s", second.String())
	}
	back := table(t, second.String(), "the journal survived: 4 jobs from the previous run, read back from it:")
	for label, g := range got {
		if back[label] != g {
			t.Errorf("second run read %s back as %+v, want %+v", label, back[label], g)
		}
	}

	j, err := journal.Open(dir, journal.Options{Clock: clocktest.New(time.Unix(0, 0)), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	history := map[string][]string{
		"email":   {"job_enqueued", "attempt_started", "attempt_succeeded"},
		"flaky":   {"job_enqueued", "attempt_started", "attempt_retry_scheduled", "attempt_started", "attempt_succeeded"},
		"delayed": {"job_enqueued", "attempt_started", "attempt_succeeded"},
		"poison":  {"job_enqueued", "attempt_started", "attempt_buried"},
	}
	for label, w := range history {
		var recs []record.Record
		var kinds []string
		it := j.ScanStream(got[label].id, 1)
		for it.Next() {
			recs = append(recs, it.Record())
			kinds = append(kinds, it.Record().Kind().String())
		}
		if err := it.Close(); err != nil {
			t.Fatalf("scan %s: %v", label, err)
		}
		if !slices.Equal(kinds, w) {
			t.Errorf("journal of %s: %v, want %v", label, kinds, w)
			continue
		}
		// The delay counts from the Enqueue call, a little before the
		// record's stamp; the attempt starts no sooner (JB-1, JB-2).
		enq := recs[0].Body.(*record.JobEnqueued)
		delay := time.Duration(enq.AvailableAt - recs[0].At)
		if label == "delayed" && (delay <= 0 || delay > 2*time.Second) {
			t.Errorf("delayed job available %v after its enqueue record, want up to 2s", delay)
		}
		if label != "delayed" && delay > 0 {
			t.Errorf("%s available %v after its enqueue record, want at once", label, delay)
		}
		if recs[1].At < enq.AvailableAt {
			t.Errorf("%s started at %d, before its available_at %d", label, recs[1].At, enq.AvailableAt)
		}
	}
}
