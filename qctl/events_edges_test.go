package qctl_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/qctl"
)

// TestEventsNegativeLimitIsAUsageError: --limit counts rows; a negative
// one is refused before the journal is read.
func TestEventsNegativeLimitIsAUsageError(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	wantExit(t, fs, qctl.ExitUsage, "--limit must be >= 0", "-d", fixtureDir, "events", "--limit=-1")
}

// TestRL5_EventsDamagedFindingNamesEachStream: the finding of a listing
// that showed damaged records names each one and says the engine sets
// "that stream" or "those streams" aside, as there are one or several.
func TestRL5_EventsDamagedFindingNamesEachStream(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq)
	stderr := wantExitQuiet(t, fs, qctl.ExitFindings, "-d", fixtureDir, "events")
	if !strings.Contains(stderr, "(seq 34 of "+wfNightly+"); the engine sets that stream aside at open") {
		t.Errorf("one damaged record: %q", stderr)
	}
	// Seq 10 is jobRetry's attempt_retry_scheduled.
	editStore(t, fs, fixtureDir, func(db *pebble.DB) { flipRecord(t, db, 10) })
	stderr = wantExitQuiet(t, fs, qctl.ExitFindings, "-d", fixtureDir, "events")
	if !strings.Contains(stderr, "(seq 10 of "+jobRetry+", seq 34 of "+wfNightly+"); the engine sets those streams aside at open") {
		t.Errorf("two damaged records: %q", stderr)
	}
}

// wantExitQuiet runs qctl, fails t unless it exits code, and returns its
// stderr.
func wantExitQuiet(t *testing.T, fs vfs.FS, code int, args ...string) string {
	t.Helper()
	got, _, stderr := run(t, fs, args...)
	if got != code {
		t.Fatalf("qctl %s: exit %d, want %d; stderr %q", strings.Join(args, " "), got, code, stderr)
	}
	return stderr
}

// TestRL5_EventsLimitCountsDamagedRows: damaged records held until the
// next sound record count against --limit as they are printed: the
// listing stops at the limit, also between two of them.
func TestRL5_EventsLimitCountsDamagedRows(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq)
	editStore(t, fs, fixtureDir, func(db *pebble.DB) { flipRecord(t, db, damagedSeq+1) })
	for _, c := range []struct {
		limit string
		want  []uint64
	}{{"1", []uint64{34}}, {"2", []uint64{34, 35}}, {"3", []uint64{34, 35, 36}}} {
		args := []string{"--json", "-d", fixtureDir, "events", "--from", "34", "--limit", c.limit}
		code, stdout, stderr := run(t, fs, args...)
		var got []uint64
		for _, r := range eventRows(t, stdout) {
			got = append(got, r.Seq)
		}
		if code != qctl.ExitFindings || !slices.Equal(got, c.want) {
			t.Errorf("qctl %s: exit %d, seqs %v; want exit 1, seqs %v; stderr %q", strings.Join(args, " "), code, got, c.want, stderr)
		}
	}
}

// TestEventsFollowExcludesTo: --follow keeps listing what is appended,
// which --to would stop; the two together are a usage error, and nothing
// is polled.
func TestEventsFollowExcludesTo(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	var out, errb bytes.Buffer
	polls := 0
	env := qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow, WaitFunc: func(context.Context) error {
		polls++
		return errors.New("interrupted")
	}}
	code := qctl.Main(context.Background(), []string{"-d", fixtureDir, "events", "--follow", "--to", "5"}, env)
	if code != qctl.ExitUsage || !strings.Contains(errb.String(), "--follow and --to exclude each other") || out.Len() != 0 || polls != 0 {
		t.Errorf("events --follow --to 5: exit %d, %d polls, stdout %q, stderr %q", code, polls, out.String(), errb.String())
	}
}
