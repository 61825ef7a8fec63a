package qctl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// editStore opens the fixture's Pebble store directly and lets edit change
// its keys, as a damaged disk or a hand edit would.
func editStore(t *testing.T, fs vfs.FS, dir string, edit func(db *pebble.DB)) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	edit(db)
	if err := db.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
}

// quietLogger keeps Pebble's informational lines out of the test output.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func get(t *testing.T, db *pebble.DB, key []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out
}

func set(t *testing.T, db *pebble.DB, key, val []byte) {
	t.Helper()
	if err := db.Set(key, val, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func wantExit(t *testing.T, fs vfs.FS, code int, stderrHas string, args ...string) string {
	t.Helper()
	got, stdout, stderr := run(t, fs, args...)
	if got != code {
		t.Fatalf("qctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, stdout, stderr)
	}
	if !strings.Contains(stderr, stderrHas) {
		t.Fatalf("qctl %s: stderr %q does not say %q", strings.Join(args, " "), stderr, stderrHas)
	}
	return stdout
}

// TestUnreadableInput: a missing directory, a file, an empty directory, a
// directory of something else, a newer format version and a record of a
// newer envelope version all exit 5 (unreadable) with a message that says
// which.
func TestUnreadableInput(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(tmp, "empty")
	other := filepath.Join(tmp, "other")
	for _, d := range []string{empty, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	osfs := vfs.Default
	for _, cmd := range []string{"inspect", "verify", "state"} {
		wantExit(t, osfs, qctl.ExitUnreadable, "does not exist", cmd, filepath.Join(tmp, "missing"))
		wantExit(t, osfs, qctl.ExitUnreadable, "is a file, not a journal directory", cmd, file)
		wantExit(t, osfs, qctl.ExitUnreadable, "is not a quire journal", cmd, empty)
		wantExit(t, osfs, qctl.ExitUnreadable, "is not a quire journal", cmd, other)
	}
	for _, cmd := range []string{"jobs", "workflows", "events", "timers", "deadlines", "shutdowns"} {
		wantExit(t, osfs, qctl.ExitUnreadable, "does not exist", "-d", filepath.Join(tmp, "missing"), cmd)
	}

	t.Run("newer format", func(t *testing.T) {
		t.Parallel()
		fs := fixture(t)
		editStore(t, fs, fixtureDir, func(db *pebble.DB) {
			set(t, db, []byte("m/format"), binary.BigEndian.AppendUint64(nil, journal.FormatVersion+1))
		})
		wantExit(t, fs, qctl.ExitUnreadable, "written by a newer version of quire", "inspect", fixtureDir)
		wantExit(t, fs, qctl.ExitUnreadable, "written by a newer version of quire", "verify", fixtureDir)
	})

	t.Run("newer record version", func(t *testing.T) {
		t.Parallel()
		fs := fixture(t)
		editStore(t, fs, fixtureDir, func(db *pebble.DB) {
			key := record.LogKey(10)
			v := get(t, db, key)
			v[2] = record.Version + 1
			body := v[:len(v)-4]
			binary.BigEndian.PutUint32(v[len(v)-4:], record.Checksum(append(append([]byte(nil), key...), body...)))
			set(t, db, key, v)
		})
		wantExit(t, fs, qctl.ExitUnreadable, "newer version of quire", "inspect", fixtureDir)
	})
}

// lockedHint is qctl's message on a directory whose lock is held. The
// lock does not say whether an engine or another qctl holds it
// (journal.ErrLocked), so neither does the message.
const lockedHint = "is in use by an engine or another qctl; if an engine runs on it, take a checkpoint with Engine.Checkpoint(dir) and inspect that"

// TestLockedDirectory: a directory held by a running engine (here its
// journal, open read-write) gets the message on taking a checkpoint, and
// the checkpoint itself reads.
func TestLockedDirectory(t *testing.T) {
	t.Parallel()
	const hint = lockedHint
	for _, onDisk := range []bool{false, true} {
		var fs vfs.FS = vfs.NewMem()
		dir := fixtureDir
		if onDisk {
			fs, dir = vfs.Default, filepath.Join(t.TempDir(), "db")
		}
		buildFixture(t, fs, dir)
		j, err := journal.Open(dir, journal.Options{FS: fs, Clock: clocktest.New(t0)})
		if err != nil {
			t.Fatal(err)
		}
		wantExit(t, fs, qctl.ExitLocked, hint, "inspect", dir)
		wantExit(t, fs, qctl.ExitLocked, hint, "-d", dir, "events")
		cp := dir + "-checkpoint"
		if err := j.Checkpoint(cp); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(context.Background(), rec(engine, &record.Debug{Subject: "test", Code: "AFTER_CHECKPOINT"})); err != nil {
			t.Fatal(err)
		}
		stdout := wantExit(t, fs, qctl.ExitOK, "", "verify", cp)
		if !strings.Contains(stdout, "OK: every check holds") {
			t.Fatalf("verify of the checkpoint:\n%s", stdout)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		wantExit(t, fs, qctl.ExitOK, "", "inspect", dir)
	}
}

// TestLockedByQctl: a directory another qctl reads (its journal open
// read-only, as qctl opens it) is refused with a message that names both
// possible holders, not only a running engine.
func TestLockedByQctl(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	held, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, args := range [][]string{{"inspect", fixtureDir}, {"verify", fixtureDir}, {"-d", fixtureDir, "jobs"}} {
		wantExit(t, fs, qctl.ExitLocked, fixtureDir+" "+lockedHint, args...)
	}
}

// TestLockFileAsDocumented: what the help says qctl does to a directory
// is what it does. It writes no journal file; it takes the journal's lock,
// which creates LOCK in a directory that has none (a checkpoint); and a
// directory that holds no journal gets nothing.
func TestLockFileAsDocumented(t *testing.T) {
	t.Parallel()
	_, help, _ := run(t, vfs.NewMem(), "--help")
	help = strings.Join(strings.Fields(help), " ")
	for _, want := range []string{"It never writes the journal, but it holds the journal's lock while it reads",
		"Taking the lock creates the LOCK file if it is absent", "qctl needs write access to LOCK, or to the directory when there is no LOCK"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not say %q", want)
		}
	}
	if strings.Contains(help, "read-only") {
		t.Errorf("--help says qctl opens the directory read-only, yet it takes the lock:\n%s", help)
	}

	dir := filepath.Join(t.TempDir(), "db")
	buildFixture(t, vfs.Default, dir)
	if err := os.Remove(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, dir)
	wantExit(t, vfs.Default, qctl.ExitOK, "", "inspect", dir)
	after := dirFiles(t, dir)
	if _, ok := after["LOCK"]; !ok {
		t.Fatalf("no LOCK after inspect: %v", after)
	}
	delete(after, "LOCK")
	if !maps.Equal(before, after) {
		t.Fatalf("inspect changed the journal's files:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}

	other := filepath.Join(t.TempDir(), "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantExit(t, vfs.Default, qctl.ExitUnreadable, "is not a quire journal", "inspect", other)
	if _, err := os.Stat(filepath.Join(other, "LOCK")); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("a directory that holds no journal got a LOCK file (%v)", err)
	}
}

// dirFiles maps each file of dir to its contents.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// lockDeniedFS fails every Lock as opening an unwritable LOCK file does,
// for a user who may read a journal but not write to its directory.
type lockDeniedFS struct{ vfs.FS }

func (lockDeniedFS) Lock(name string) (io.Closer, error) {
	return nil, &iofs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
}

// TestLockFileDenied: a LOCK file qctl may not open is a permission
// problem, not a running engine: exit 5 with what to do, and --follow
// stops at once rather than wait for an engine that is not there.
func TestLockFileDenied(t *testing.T) {
	t.Parallel()
	fs := lockDeniedFS{fixture(t)}
	const hint = "needs write access to the directory's LOCK file, or to the directory when there is no LOCK"
	for _, args := range [][]string{{"inspect", fixtureDir}, {"verify", fixtureDir}, {"-d", fixtureDir, "events"}} {
		wantExit(t, fs, qctl.ExitUnreadable, hint, args...)
		if _, _, stderr := run(t, fs, args...); strings.Contains(stderr, "in use by") {
			t.Fatalf("qctl %s blames another holder of the lock: %s", strings.Join(args, " "), stderr)
		}
	}
	var out, errb bytes.Buffer
	env := qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow, WaitFunc: func(context.Context) error {
		t.Error("--follow waits on a LOCK file it may not open")
		return context.Canceled
	}}
	if code := qctl.Main(context.Background(), []string{"-d", fixtureDir, "events", "--follow"}, env); code != qctl.ExitUnreadable || !strings.Contains(errb.String(), hint) {
		t.Fatalf("--follow: exit %d, stderr %q", code, errb.String())
	}
}

// TestUsageErrors: bad arguments exit 2 and say what is wrong.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"frobnicate"}, "unexpected argument frobnicate"},
		{[]string{"-d", fixtureDir, "jobs", "--status", "done"}, `--status "done": want one of pending, processing, buried, completed`},
		{[]string{"-d", fixtureDir, "workflows", "--status", "asleep"}, `--status "asleep"`},
		{[]string{"-d", fixtureDir, "jobs", "--limit=-1"}, "--limit must be >= 0"},
		{[]string{"-d", fixtureDir, "events", "--kind", "job_done"}, `--kind "job_done" is not a record kind`},
		{[]string{"-d", fixtureDir, "events", "--since", "yesterday"}, "--since"},
		{[]string{"-d", fixtureDir, "events", "--from", "9", "--to", "3"}, "--from 9 is after --to 3"},
		{[]string{"-d", fixtureDir, "events", "--since", "2026-01-05T11:00:00Z", "--until", "2026-01-05T10:00:00Z"}, "--since 2026-01-05T11:00:00Z is after --until 2026-01-05T10:00:00Z"},
		{[]string{"-d", "", "jobs"}, "no journal directory: -d (or $QUIRE_DIR) is empty"},
		{[]string{"-d", "", "verify"}, "no journal directory: -d (or $QUIRE_DIR) is empty"},
		{[]string{"-d", fixtureDir, "events", "--follow"}, "--follow is not available"},
		{[]string{"--now", "noon", "-d", fixtureDir, "timers"}, "--now"},
		{[]string{"-d", fixtureDir, "show"}, `expected "<id>"`},
		{[]string{"-d", fixtureDir, "show", strings.Repeat("x", 200)}, "is not a job or workflow id"},
		{[]string{"state", fixtureDir, "--at", "x"}, "--at"},
		{[]string{"state", fixtureDir, "--at", "0"}, "--at 0: seqs start at 1"},
	}
	for _, c := range cases {
		wantExit(t, fs, qctl.ExitUsage, c.says, c.args...)
	}
	// The edges of those checks are not errors: an empty time window, a
	// one-seq range, and the first seq.
	wantExit(t, fs, qctl.ExitOK, "", "-d", fixtureDir, "events", "--since", "2026-01-05T10:00:00Z", "--until", "2026-01-05T10:00:00Z")
	if out := wantExit(t, fs, qctl.ExitOK, "", "-d", fixtureDir, "events", "--from", "10", "--to", "10"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "\n 10  ") {
		t.Errorf("events --from 10 --to 10 lists more or less than seq 10:\n%s", out)
	}
	wantExit(t, fs, qctl.ExitOK, "", "state", fixtureDir, "--at", "1")
}

// TestEmptyJournal: a journal with no record yet reads as empty, not as
// an error.
func TestEmptyJournal(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	newFx(t, fs, fixtureDir).close()
	for _, args := range [][]string{
		{"inspect", fixtureDir}, {"verify", fixtureDir}, {"state", fixtureDir},
		{"-d", fixtureDir, "jobs"}, {"-d", fixtureDir, "workflows"}, {"-d", fixtureDir, "events"},
		{"-d", fixtureDir, "timers"}, {"-d", fixtureDir, "deadlines"}, {"-d", fixtureDir, "shutdowns"},
		{"--json", "inspect", fixtureDir}, {"--json", "verify", fixtureDir},
	} {
		if code, stdout, stderr := run(t, fs, args...); code != qctl.ExitOK {
			t.Fatalf("qctl %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	wantExit(t, fs, qctl.ExitNotFound, "holds no job or workflow", "-d", fixtureDir, "show", jobOK)
}
