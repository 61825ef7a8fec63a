package sim_test

import (
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/sim"
)

// reportChildEnv names the way TestFailureReport (and
// TestFailureReportTwoTestsOneSeed) fails as its own child, in the test
// binary it re-executes.
const reportChildEnv = "QUIRE_SIM_REPORT_CHILD"

// reportChild fails every seed of a sim.Run the way mode says, after a
// crash and an enqueue the crash image does not hold.
func reportChild(t *testing.T, mode string) {
	sim.Run(t, 3, func(w *sim.World) {
		if mode == "before-open" {
			w.T().Fatalf("deliberate failure before the first step")
		}
		register(w)
		w.Dispatch("flow", nil)
		w.Enqueue("work", msg{N: 1})
		w.Advance(time.Minute)
		w.CrashWith(100)
		w.Enqueue("work", msg{N: 2}) // in the current image only
		switch mode {
		case "T.Fatalf":
			w.T().Fatalf("deliberate failure")
		case "T.Errorf":
			w.T().Errorf("deliberate failure")
		case "outer.Fatalf":
			t.Fatalf("deliberate failure")
		case "outer.Errorf":
			t.Errorf("deliberate failure")
		case "world":
			w.Job("job_01KE3T5W2C8F0000000000000B") // unknown: the world fails
		default:
			t.Fatalf("unknown mode %q", mode)
		}
		w.Advance(time.Minute)
	})
}

// TestFailureReport runs itself in a child process for each way
// a scenario can fail (the documented w.T(), the outer t, the world
// itself) and checks what the user gets: the failure charged to the first
// seed only (Run stops there), the rerun command, and journal images at
// the printed paths that open as journals, the current one holding the
// enqueue the last crash image lacks. A failure before the engine opened
// claims no image.
func TestFailureReport(t *testing.T) {
	if mode := os.Getenv(reportChildEnv); mode != "" {
		reportChild(t, mode) // the child: fails as mode says
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := strconv.FormatUint(sim.Seeds(t, 3)[0], 16) // the child's first seed: same environment
	failed := regexp.MustCompile(`--- FAIL: TestFailureReport/(seed=0x[0-9a-f]+)`)
	current := regexp.MustCompile(`journal image at step \d+: qctl --now 2026-01-05T\S+Z inspect (.+)`)
	crashed := regexp.MustCompile(`journal image of the last crash \(step \d+\): qctl --now 2026-01-05T\S+Z inspect (.+)`)
	for _, mode := range []string{"T.Fatalf", "T.Errorf", "outer.Fatalf", "outer.Errorf", "world", "before-open"} {
		t.Run(mode, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(exe, "-test.run=^TestFailureReport$", "-test.count=1")
			cmd.Env = append(os.Environ(), reportChildEnv+"="+mode, "QUIRE_SIM_OUT="+out)
			b, err := cmd.CombinedOutput()
			text := string(b)
			if err == nil {
				t.Fatalf("the child passed:\n%s", text)
			}
			fails := failed.FindAllStringSubmatch(text, -1)
			if want := "seed=0x" + seed; len(fails) != 1 || fails[0][1] != want {
				t.Fatalf("failed subtests %q, want only %s:\n%s", fails, want, text)
			}
			dir, _ := os.Getwd()
			rerun := "rerun: cd " + dir + " && QUIRE_SEED=0x" + seed + " go test -run '^TestFailureReport$/^seed=0x" + seed + "$' ."
			if !strings.Contains(text, rerun) {
				t.Fatalf("no %q in:\n%s", rerun, text)
			}
			if mode == "T.Fatalf" || mode == "T.Errorf" {
				if strings.Contains(text, "FailNow on a parent") {
					t.Fatalf("the documented pattern fails the parent:\n%s", text)
				}
			}
			if mode == "T.Errorf" || mode == "outer.Errorf" {
				// Reported at the next step, which it stops, not at the end.
				if want := regexp.MustCompile(`the test failed before step \d+ \("clock [^"]+"\), after step \d+ \("enqueue work"\)`); !want.MatchString(text) {
					t.Fatalf("no %s in:\n%s", want, text)
				}
			}
			if mode == "before-open" {
				if strings.Contains(text, " inspect ") || !strings.Contains(text, "journal image at step 0: none") {
					t.Fatalf("an image is claimed although the engine never opened:\n%s", text)
				}
				return
			}
			cur, img := current.FindStringSubmatch(text), crashed.FindStringSubmatch(text)
			if cur == nil || img == nil {
				t.Fatalf("the report does not name both images:\n%s", text)
			}
			for _, dir := range []string{cur[1], img[1]} {
				if !strings.HasPrefix(dir, out) {
					t.Fatalf("image %s is not under QUIRE_SIM_OUT=%s", dir, out)
				}
			}
			if nc, ni := countRecords(t, cur[1]), countRecords(t, img[1]); nc <= ni {
				t.Fatalf("the current image holds %d records, the last crash image %d: want more:\n%s", nc, ni, text)
			}
		})
	}
}

// TestFailureReportTwoTestsOneSeed runs two tests that fail on the same
// seed (TestFailureReport and itself, as children) in one child process: each keeps its journal images in a
// directory of its own, named after the test, so that the second does
// not overwrite the first's evidence (doc.go, "Reproduction").
func TestFailureReportTwoTestsOneSeed(t *testing.T) {
	if mode := os.Getenv(reportChildEnv); mode != "" {
		reportChild(t, mode) // the second of the child's two tests
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^(TestFailureReport|TestFailureReportTwoTestsOneSeed)$", "-test.count=1")
	cmd.Env = append(os.Environ(), reportChildEnv+"=T.Fatalf", "QUIRE_SIM_OUT="+out)
	b, err := cmd.CombinedOutput()
	text := string(b)
	if err == nil {
		t.Fatalf("the child passed:\n%s", text)
	}
	current := regexp.MustCompile(`journal image at step \d+: qctl --now \S+ inspect (.+)`)
	var dirs []string
	for _, m := range current.FindAllStringSubmatch(text, -1) {
		dirs = append(dirs, m[1])
	}
	if len(dirs) != 2 || dirs[0] == dirs[1] {
		t.Fatalf("images %q, want two distinct directories:\n%s", dirs, text)
	}
	for i, name := range []string{"TestFailureReport_seed", "TestFailureReportTwoTestsOneSeed_seed"} {
		if !strings.Contains(dirs[i], name) {
			t.Fatalf("image %s is not named after its test (%s)", dirs[i], name)
		}
		countRecords(t, dirs[i]) // both still open as journals
	}
}

// countRecords opens dir read-only as qctl does and counts its records.
func countRecords(t *testing.T, dir string) int {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{FS: vfs.Default, Clock: clocktest.New(sim.T0), ReadOnly: true})
	if err != nil {
		t.Fatalf("the printed image %s does not open as a journal: %v", dir, err)
	}
	defer j.Close()
	it := j.Scan(1, math.MaxUint64)
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("scan %s: %v", dir, err)
	}
	return n
}

// reportCheckChildEnv names the way TestFailureReportCheckRun fails as
// its own child, in the test binary it re-executes.
const reportCheckChildEnv = "QUIRE_SIM_REPORT_CHECK_CHILD"

// reportCheckChild runs a sim.Check whose scenario fails on the first
// run of its seed ("always") or, through a counter it shares between the
// runs, only on the second ("shared").
func reportCheckChild(t *testing.T, mode string) {
	runs := 0 // the scenario's bug: shared between the runs of a seed
	sim.Check(t, 1, func(w *sim.World) {
		runs++
		register(w)
		w.Enqueue("work", msg{N: 1})
		w.Advance(time.Second)
		if mode == "always" || runs > 1 {
			w.T().Fatalf("deliberate failure in run %d", runs)
		}
	})
}

// TestFailureReportCheckRun checks what a user of sim.Check reads when a
// scenario fails on a later run of a seed than the first (RL-8): the
// report says which run of the three failed and that the runs before it
// passed, so that the outcome is not the seed's alone; a failure on the
// first run says nothing of the kind. Without it, a failure in run 2
// looked like any failure of the seed, whose first run the user saw pass.
func TestFailureReportCheckRun(t *testing.T) {
	if mode := os.Getenv(reportCheckChildEnv); mode != "" {
		reportCheckChild(t, mode) // the child: fails as mode says
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"always", "shared"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^TestFailureReportCheckRun$", "-test.count=1")
			cmd.Env = append(os.Environ(), reportCheckChildEnv+"="+mode, "QUIRE_SIM_OUT="+t.TempDir())
			b, err := cmd.CombinedOutput()
			text := string(b)
			if err == nil {
				t.Fatalf("the child passed:\n%s", text)
			}
			seed := strconv.FormatUint(sim.Seeds(t, 1)[0], 16)
			note := "sim.Check: this is run 2 of 3 of seed 0x" + seed + ", and the runs before it passed"
			switch mode {
			case "always":
				if !strings.Contains(text, "deliberate failure in run 1") || strings.Contains(text, "sim.Check: this is run") {
					t.Fatalf("a failure in the first run, reported as a later run's:\n%s", text)
				}
			case "shared":
				if !strings.Contains(text, "deliberate failure in run 2") || !strings.Contains(text, note) {
					t.Fatalf("no %q in:\n%s", note, text)
				}
			}
			if !strings.Contains(text, "rerun: ") {
				t.Fatalf("no rerun command in:\n%s", text)
			}
		})
	}
}
