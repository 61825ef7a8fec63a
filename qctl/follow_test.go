package qctl_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

func appendDebug(t *testing.T, fs vfs.FS, code string) {
	t.Helper()
	j, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0.Add(2 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(context.Background(), rec(engine, &record.Debug{Subject: "follow", Code: code})); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEventsFollow: --follow prints the records that appear between polls,
// waits out a directory an engine holds, and ends cleanly on Ctrl-C.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held *journal.Journal
	polls := 0
	var out, errb bytes.Buffer
	env := qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow, WaitFunc: func(ctx context.Context) error {
		polls++
		switch polls {
		case 1:
			appendDebug(t, fs, "FIRST")
		case 2:
			var err error
			held, err = journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0.Add(3 * time.Hour))})
			if err != nil {
				t.Fatal(err)
			}
		case 3:
			if err := held.Close(); err != nil {
				t.Fatal(err)
			}
			appendDebug(t, fs, "SECOND")
		default:
			cancel()
			return ctx.Err()
		}
		return nil
	}}
	code := qctl.Main(ctx, []string{"-d", fixtureDir, "events", "--follow", "--kind", "debug"}, env)
	if code != qctl.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "DEADLINE_HANDLER_FAILED") ||
		!strings.Contains(lines[2], " 67 ") || !strings.Contains(lines[2], "FIRST") ||
		!strings.Contains(lines[3], " 68 ") || !strings.Contains(lines[3], "SECOND") {
		t.Fatalf("follow printed:\n%s", out.String())
	}
	if n := strings.Count(errb.String(), "in use by an engine or another qctl"); n != 1 {
		t.Fatalf("stderr warned %d times about the lock: %q", n, errb.String())
	}
}

// inspectWithProgress runs inspect, on a terminal that has waited long
// enough for progress, over a journal of batches appends of perBatch debug
// records each, and returns the journal's FS, inspect's stdout and its
// progress output.
func inspectWithProgress(t *testing.T, batches, perBatch int) (fs vfs.FS, stdout, progress string) {
	t.Helper()
	fs = vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	recs := make([]record.Record, perBatch)
	for i := range batches {
		for k := range recs {
			recs[k] = rec(engine, &record.Debug{Subject: "load", Code: fmt.Sprint(i*perBatch + k)})
		}
		f.append(nil, recs...)
	}
	f.close()
	var out, prog bytes.Buffer
	env := qctl.Env{Stdout: &out, FS: fs, Now: fixtureNow, Progress: &prog,
		ElapsedFunc: func() time.Duration { return 2 * time.Second }}
	if code := qctl.Main(context.Background(), []string{"inspect", fixtureDir}, env); code != qctl.ExitOK {
		t.Fatalf("exit %d", code)
	}
	return fs, out.String(), prog.String()
}

// TestProgress: a long scan on a terminal shows progress and erases it.
func TestProgress(t *testing.T) {
	t.Parallel()
	fs, out, got := inspectWithProgress(t, 5, 1000)
	if !strings.Contains(got, "\rqctl inspect: seq 4096 of 5000 (81%)") || !strings.HasSuffix(got, "\r\033[K") {
		t.Fatalf("progress %q", got)
	}
	if strings.Contains(out, "\r") {
		t.Fatal("progress reached stdout")
	}
	var progress bytes.Buffer
	env := qctl.Env{Stdout: io.Discard, FS: fs, Now: fixtureNow, Progress: &progress,
		ElapsedFunc: func() time.Duration { return time.Millisecond }}
	if code := qctl.Main(context.Background(), []string{"verify", fixtureDir}, env); code != qctl.ExitOK || progress.Len() != 0 {
		t.Fatalf("exit %d; a scan under a second printed progress %q", code, progress.String())
	}
}

// terminal is a fake terminal that stdout, stderr and the progress line
// share: it keeps the screen's lines, with "\r" moving to the start of the
// line and "\x1b[K" erasing to its end, as a terminal does.
type terminal struct {
	lines []string
	col   int
	raw   strings.Builder // every byte written
}

func (t *terminal) Write(b []byte) (int, error) {
	t.raw.Write(b)
	if len(t.lines) == 0 {
		t.lines = []string{""}
	}
	for s := string(b); s != ""; {
		cur := &t.lines[len(t.lines)-1]
		switch {
		case strings.HasPrefix(s, "\x1b[K"):
			*cur = (*cur)[:t.col]
			s = s[3:]
		case s[0] == '\r':
			t.col = 0
			s = s[1:]
		case s[0] == '\n':
			t.lines = append(t.lines, "")
			t.col = 0
			s = s[1:]
		default:
			// Overwrite from the cursor, as far as the next control.
			n := strings.IndexAny(s, "\r\n\x1b")
			if n < 0 {
				n = len(s)
			} else if n == 0 {
				n = 1 // a lone ESC
			}
			if t.col+n < len(*cur) {
				*cur = (*cur)[:t.col] + s[:n] + (*cur)[t.col+n:]
			} else {
				*cur = (*cur)[:t.col] + s[:n]
			}
			t.col += n
			s = s[n:]
		}
	}
	return len(b), nil
}

// TestProgressErasedBeforeOutput: on a terminal, a row printed while the
// progress line shows starts on a clean line: the progress line is erased
// first, and nothing of it is left on the screen at the end.
func TestProgressErasedBeforeOutput(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	recs := make([]record.Record, 1000)
	for i := 0; i < 5; i++ {
		for k := range recs {
			code := "LOAD"
			if i == 4 && k == len(recs)-1 {
				code = "LAST"
			}
			recs[k] = rec(engine, &record.Debug{Subject: "load", Code: code})
		}
		f.append(nil, recs...)
	}
	f.close()
	for _, args := range [][]string{
		{"-d", fixtureDir, "events", "--kind", "debug"},
		{"--json", "-d", fixtureDir, "events", "--kind", "debug"},
		{"-d", fixtureDir, "show", "job_unknown"}, // progress, then an error on stderr
	} {
		term := &terminal{}
		env := qctl.Env{Stdout: term, Stderr: term, Progress: term, FS: fs, Now: fixtureNow,
			ElapsedFunc: func() time.Duration { return 2 * time.Second }}
		qctl.Main(context.Background(), args, env)
		if len(term.lines) < 2 || !strings.Contains(term.raw.String(), ": seq 4096 of 5000 (81%)") {
			t.Fatalf("qctl %s: no progress line, or no output; screen:\n%s", strings.Join(args, " "), strings.Join(term.lines, "\n"))
		}
		for i, line := range term.lines {
			if strings.Contains(line, "qctl events: seq") || strings.Contains(line, "qctl show: seq") {
				t.Fatalf("qctl %s: the progress line is left on screen line %d: %q", strings.Join(args, " "), i+1, line)
			}
		}
		if args[0] != "--json" && args[2] == "events" && !strings.HasPrefix(term.lines[len(term.lines)-2], "5000 ") {
			t.Errorf("qctl %s: last line %q, want the row of seq 5000", strings.Join(args, " "), term.lines[len(term.lines)-2])
		}
		if args[0] == "--json" && !strings.HasPrefix(term.lines[len(term.lines)-2], `{"type":"record","seq":5000,`) {
			t.Errorf("qctl %s: last line %q, want the record of seq 5000", strings.Join(args, " "), term.lines[len(term.lines)-2])
		}
	}
}

// TestEventsFollowWaitsAtFirst: --follow on a directory an engine holds
// when it starts waits it out as later polls do: it warns once, polls,
// and prints once the engine let go. Without --follow a locked directory
// is still exit 4 (locked).
func TestEventsFollowWaitsAtFirst(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	held, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0.Add(3 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	wantExit(t, fs, qctl.ExitLocked, "in use by an engine or another qctl", "-d", fixtureDir, "events", "--kind", "debug")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polls := 0
	var out, errb bytes.Buffer
	env := qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow, WaitFunc: func(ctx context.Context) error {
		polls++
		switch polls {
		case 1:
			if out.Len() != 0 || !strings.Contains(errb.String(), "in use by an engine or another qctl") || !strings.HasSuffix(errb.String(), "; waiting for it to stop\n") {
				t.Errorf("before the first poll: stdout %q, stderr %q", out.String(), errb.String())
			}
		case 2:
			if _, err := held.Append(context.Background(), rec(engine, &record.Debug{Subject: "follow", Code: "HELD"})); err != nil {
				t.Fatal(err)
			}
			if err := held.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			cancel()
			return ctx.Err()
		}
		return nil
	}}
	code := qctl.Main(ctx, []string{"-d", fixtureDir, "events", "--follow", "--kind", "debug"}, env)
	if code != qctl.ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SEQ") || !strings.Contains(lines[1], "DEADLINE_HANDLER_FAILED") ||
		!strings.Contains(lines[2], " 67 ") || !strings.Contains(lines[2], "HELD") {
		t.Fatalf("follow printed:\n%s", out.String())
	}
	if n := strings.Count(errb.String(), "in use by an engine or another qctl"); n != 1 {
		t.Fatalf("stderr warned %d times about the lock: %q", n, errb.String())
	}
}

// TestEventsFollowEndsAtUntil: a record appended at or after --until
// means no later one can match (At never goes back, RL-9), so --follow
// ends there, with the log's records as with --stream, instead of
// polling on.
func TestEventsFollowEndsAtUntil(t *testing.T) {
	t.Parallel()
	for _, extra := range [][]string{nil, {"--stream", engine}} {
		fs := fixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		polls := 0
		var out, errb bytes.Buffer
		env := qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow, WaitFunc: func(ctx context.Context) error {
			polls++
			if polls == 1 {
				appendDebug(t, fs, "AT_UNTIL") // appended at t0+2h
				return nil
			}
			cancel()
			return ctx.Err()
		}}
		args := append([]string{"-d", fixtureDir, "events", "--follow", "--kind", "debug",
			"--until", t0.Add(2 * time.Hour).Format(time.RFC3339Nano)}, extra...)
		code := qctl.Main(ctx, args, env)
		cancel()
		if code != qctl.ExitOK || polls != 1 {
			t.Fatalf("%v: exit %d after %d polls, want 0 after 1; stderr %s", extra, code, polls, errb.String())
		}
		if got := out.String(); !strings.Contains(got, "DEADLINE_HANDLER_FAILED") || strings.Contains(got, "AT_UNTIL") {
			t.Fatalf("%v: follow printed:\n%s", extra, got)
		}
	}
}
