package qctl_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/qctl"
	"github.com/quire-dev/quire/replay"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// checkGolden compares got with testdata/name.golden, or rewrites it with
// -update. Review the diff of a rewrite like code.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./qctl -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (go test ./qctl -update rewrites it):\n%s", path, diff(string(want), got))
	}
}

// diff shows the first lines that differ.
func diff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 10; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, w, g)
			shown++
		}
	}
	return b.String()
}

// goldenCases are the commands whose output the golden files pin, each
// run in human and in JSON form on the fixture.
var goldenCases = []struct {
	name string
	args []string
	code int
}{
	{"inspect", []string{"inspect", fixtureDir}, qctl.ExitOK},
	{"jobs", []string{"-d", fixtureDir, "jobs"}, qctl.ExitOK},
	{"jobs_buried_pending", []string{"-d", fixtureDir, "jobs", "--status", "buried,pending", "--limit", "3"}, qctl.ExitOK},
	{"jobs_queue", []string{"-d", fixtureDir, "jobs", "--queue", "images"}, qctl.ExitOK},
	{"workflows", []string{"-d", fixtureDir, "workflows"}, qctl.ExitOK},
	{"workflows_limit", []string{"-d", fixtureDir, "workflows", "--limit", "2"}, qctl.ExitOK},
	{"jobs_limit", []string{"-d", fixtureDir, "jobs", "--limit", "4"}, qctl.ExitOK},
	{"workflows_failed", []string{"-d", fixtureDir, "workflows", "--status", "failed", "--name", "nightly_sync"}, qctl.ExitOK},
	{"show_retry", []string{"-d", fixtureDir, "show", jobRetry}, qctl.ExitOK},
	{"show_buried", []string{"-d", fixtureDir, "show", jobBuried}, qctl.ExitOK},
	{"show_delayed", []string{"-d", fixtureDir, "show", jobDelayed}, qctl.ExitOK},
	{"show_paused_queue", []string{"-d", fixtureDir, "show", jobPaused}, qctl.ExitOK},
	{"show_lost", []string{"-d", fixtureDir, "show", jobLost}, qctl.ExitOK},
	{"show_running", []string{"-d", fixtureDir, "show", jobRunning}, qctl.ExitOK},
	{"show_step_job", []string{"-d", fixtureDir, "show", stepReport}, qctl.ExitOK},
	{"show_step_buried", []string{"-d", fixtureDir, "show", stepSync}, qctl.ExitOK},
	{"show_wf_delay", []string{"-d", fixtureDir, "show", wfImport}, qctl.ExitOK},
	{"show_wf_signal", []string{"-d", fixtureDir, "show", wfApproval}, qctl.ExitOK},
	{"show_wf_deadline", []string{"-d", fixtureDir, "show", wfNightly}, qctl.ExitOK},
	{"show_wf_paused", []string{"-d", fixtureDir, "show", wfReport}, qctl.ExitOK},
	{"show_engine", []string{"-d", fixtureDir, "show", "engine"}, qctl.ExitOK},
	{"show_unknown", []string{"-d", fixtureDir, "show", "job_nope"}, qctl.ExitNotFound},
	{"events", []string{"-d", fixtureDir, "events"}, qctl.ExitOK},
	{"events_kind", []string{"-d", fixtureDir, "events", "--kind", "attempt_retry_scheduled", "--kind", "attempt_buried,job_buried"}, qctl.ExitOK},
	{"events_stream", []string{"-d", fixtureDir, "events", "--stream", wfNightly, "--from", "40"}, qctl.ExitOK},
	{"events_none", []string{"-d", fixtureDir, "events", "--kind", "job_requeued"}, qctl.ExitOK},
	{"events_range", []string{"-d", fixtureDir, "events", "--from", "10", "--to", "14", "--since", "2026-01-05T10:00:03Z", "--limit", "3"}, qctl.ExitOK},
	{"timers", []string{"-d", fixtureDir, "timers"}, qctl.ExitOK},
	{"deadlines", []string{"-d", fixtureDir, "deadlines"}, qctl.ExitOK},
	{"deadlines_later", []string{"-d", fixtureDir, "--now", "2026-01-06T09:00:00Z", "deadlines"}, qctl.ExitOK},
	{"shutdowns", []string{"-d", fixtureDir, "shutdowns"}, qctl.ExitOK},
	{"verify", []string{"verify", fixtureDir}, qctl.ExitOK},
	{"state", []string{"state", fixtureDir}, qctl.ExitOK},
	{"state_at", []string{"state", fixtureDir, "--at", "20"}, qctl.ExitOK},
	{"state_beyond", []string{"state", fixtureDir, "--at", "1000"}, qctl.ExitNotFound},
}

// replayDigests returns the replay digest of the fixture at every seq, so
// that golden files name "the digest at seq N" rather than bytes that
// change with replay's encoding. state must print exactly these.
func replayDigests(t *testing.T, fs vfs.FS) map[string]string {
	t.Helper()
	j, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	out := map[string]string{}
	st := replay.New()
	it := j.Scan(1, math.MaxUint64)
	defer it.Close()
	for it.Next() {
		if err := replay.Apply(st, it.Record()); err != nil {
			t.Fatal(err)
		}
		d := replay.Digest(st)
		out[hex.EncodeToString(d[:])] = fmt.Sprintf("<replay digest at seq %d>", st.LastSeq)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var hexDigest = regexp.MustCompile(`[0-9a-f]{64}`)

func TestGolden(t *testing.T) {
	fs := fixture(t)
	digests := replayDigests(t, fs)
	for _, c := range goldenCases {
		for _, json := range []bool{false, true} {
			name, args := c.name, c.args
			if json {
				name, args = name+".json", append([]string{"--json"}, args...)
			}
			t.Run(name, func(t *testing.T) {
				code, stdout, stderr := run(t, fs, args...)
				if code != c.code {
					t.Errorf("qctl %s: exit %d, want %d; stderr: %s", strings.Join(args, " "), code, c.code, stderr)
				}
				got := fmt.Sprintf("$ qctl %s\n# exit %d\n%s", strings.Join(args, " "), code, stdout)
				if stderr != "" {
					got += "# stderr\n" + stderr
				}
				got = hexDigest.ReplaceAllStringFunc(got, func(d string) string {
					if name, ok := digests[d]; ok {
						return name
					}
					return d
				})
				checkGolden(t, name, got)
			})
		}
	}
}

// TestGoldenHelp pins --help of the program and of each command.
func TestGoldenHelp(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	fs := fixture(t)
	for _, cmd := range []string{"", "inspect", "workflows", "jobs", "show", "events", "timers", "deadlines", "shutdowns", "verify", "state"} {
		args := []string{"--help"}
		name := "help"
		if cmd != "" {
			args = []string{cmd, "--help"}
			name = "help_" + cmd
		}
		code, stdout, stderr := run(t, fs, args...)
		if code != qctl.ExitOK || stderr != "" {
			t.Errorf("qctl %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		if !strings.Contains(stdout, "Examples:") {
			t.Errorf("qctl %s: no examples in the help", strings.Join(args, " "))
		}
		checkGolden(t, name, stdout)
	}
}

// TestNowSources: the instant remaining and overdue times are measured
// against is --now, given as RFC 3339 or as Unix nanoseconds alike; else
// Env.Now; else, when Env.Now is zero, the time of the journal's last
// record (seq 66, at t0+1h2s in the fixture), or for state --at N the
// time of seq N.
func TestNowSources(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	qctlAt := func(env qctl.Env, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		env.Stdout, env.Stderr, env.FS = &out, &errb, fs
		if code := qctl.Main(context.Background(), args, env); code != qctl.ExitOK {
			t.Fatalf("qctl %v: exit %d, stderr %s", args, code, errb.String())
		}
		return out.String()
	}
	deadlines := func(env qctl.Env, args ...string) string {
		t.Helper()
		return qctlAt(env, append([]string{"-d", fixtureDir, "deadlines"}, args...)...)
	}
	later := time.Date(2026, 1, 6, 9, 0, 0, 0, time.UTC)
	if rfc, ns := deadlines(qctl.Env{}, "--now", later.Format(time.RFC3339)), deadlines(qctl.Env{}, "--now", fmt.Sprint(later.UnixNano())); ns != rfc {
		t.Errorf("--now in Unix nanoseconds:\n%s\n--now in RFC 3339:\n%s", ns, rfc)
	}
	last := t0.Add(time.Hour + 2*time.Second)
	got, want := deadlines(qctl.Env{}), deadlines(qctl.Env{}, "--now", last.Format(time.RFC3339))
	if got != want {
		t.Errorf("zero Env.Now:\n%s\nwant as at the last record:\n%s", got, want)
	}
	if fromEnv := deadlines(qctl.Env{Now: fixtureNow}); fromEnv == want {
		t.Errorf("Env.Now %v measures as the last record's time:\n%s", fixtureNow, fromEnv)
	}
	// Seq 30 was appended at t0+80s; approval's deadline is 30m later.
	got = qctlAt(qctl.Env{}, "state", fixtureDir, "--at", "30")
	want = qctlAt(qctl.Env{}, "--now", t0.Add(80*time.Second).Format(time.RFC3339), "state", fixtureDir, "--at", "30")
	if got != want || !strings.Contains(got, "30m0s") {
		t.Errorf("state --at 30 with a zero Env.Now:\n%s\nwant as at seq 30:\n%s", got, want)
	}
}
