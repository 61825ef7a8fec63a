package qctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Exit codes of [Main]. They are part of qctl's interface: scripts branch
// on them, so a code keeps its meaning and its number. Each failure has
// one code, whichever command meets it; only [ExitOK] and [ExitFindings]
// say the command's output is complete.
const (
	// ExitOK means the command ran and found nothing wrong.
	ExitOK = 0
	// ExitFindings means the command ran, printed all of its output, and
	// found a problem: verify found a defect, inspect met a record replay
	// refuses, a command that replays the log set a stream with a damaged
	// record aside (spec/reliability.md §4.4; its output shows that
	// stream's jobs and workflow as corrupt), events listed a damaged
	// record, or shutdowns listed a shutdown that did not succeed (SD-26,
	// SD-30: a report other than graceful_completed or forced_completed,
	// or a shutdown that began and published no report).
	ExitFindings = 1
	// ExitUsage means bad flags or arguments: an unknown command or flag,
	// a flag value out of range, an id that cannot be one. Arguments are
	// checked before the journal is opened, so the journal's state plays
	// no part in it.
	ExitUsage = 2
	// ExitNotFound means the journal was read and holds nothing at what
	// the command was asked about: show's id names no job or workflow, or
	// state's --at is past the last seq. Listings that match nothing exit
	// [ExitOK].
	ExitNotFound = 3
	// ExitLocked means the journal's lock is held (journal.ErrLocked): an
	// engine runs on the directory, or another qctl reads it. The lock
	// does not say which. A script can retry once it is free, or point
	// qctl at a checkpoint (Engine.Checkpoint).
	ExitLocked = 4
	// ExitUnreadable means the journal cannot be opened or read: the
	// directory is missing, is a file, holds no journal, was written by a
	// newer version of quire, cannot be opened for lack of permission, or
	// holds damage that leaves the order in doubt, which the engine's Open
	// refuses too. verify reports damage it can name as [ExitFindings]
	// instead.
	ExitUnreadable = 5
	// ExitAborted means the command stopped before it finished, for a
	// reason outside the journal and the arguments: it was interrupted
	// (Ctrl-C, SIGTERM), or its output could not be written. What it
	// printed is incomplete. events --follow ends on an interrupt as
	// usual, with [ExitOK] or [ExitFindings].
	ExitAborted = 6
)

// Env is what a run of [Main] takes from its process.
type Env struct {
	// Stdout receives the command's output; Stderr its errors, warnings
	// and progress.
	Stdout, Stderr io.Writer
	// FS is the file system journals are read from. Nil means the
	// operating system's.
	FS vfs.FS
	// Now is the instant remaining and overdue times are measured against.
	// The --now flag overrides it. The zero value means the time of the
	// journal's last record.
	Now time.Time
	// Progress, when not nil, receives a progress line during scans that
	// run for more than a second. cmd/qctl sets it to stderr when stderr
	// is a terminal. The line is erased ("\r\x1b[K") before anything is
	// written to Stdout or Stderr, which may share its terminal, and when
	// the scan ends.
	Progress io.Writer
	// ElapsedFunc returns the time since the command started; it paces
	// progress lines. Nil disables progress.
	ElapsedFunc func() time.Duration
	// WaitFunc blocks for one poll interval of events --follow, or until
	// ctx ends (then it returns ctx's error). Nil makes --follow a usage
	// error.
	WaitFunc func(ctx context.Context) error
}

// exitError ends a command with a message on stderr and an exit code.
type exitError struct {
	code  int
	msg   string
	cause error // the error behind msg, if any
}

func (e *exitError) Error() string { return e.msg }

func (e *exitError) Unwrap() error { return e.cause }

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

func findingErr(format string, args ...any) error {
	return &exitError{code: ExitFindings, msg: fmt.Sprintf(format, args...)}
}

func notFoundErr(format string, args ...any) error {
	return &exitError{code: ExitNotFound, msg: fmt.Sprintf(format, args...)}
}

// unreadableErr ends a command on a journal it cannot open or read;
// cause is the error that says why (nil if qctl found it out itself).
func unreadableErr(cause error, format string, args ...any) error {
	return &exitError{code: ExitUnreadable, msg: fmt.Sprintf(format, args...), cause: cause}
}

// interrupted ends a command whose ctx ended (Ctrl-C, SIGTERM) before it
// finished.
func interrupted(err error) error {
	return &exitError{code: ExitAborted, msg: fmt.Sprintf("interrupted: %v", err), cause: err}
}

// silentFindings ends a command whose output already says what was found.
var silentFindings = &exitError{code: ExitFindings}

const description = `qctl inspects, explains and verifies a quire journal from its directory
alone: no server and no running engine. It never writes the journal, but it
holds the journal's lock while it reads, as an engine does, so that no
engine opens the directory meanwhile. Taking the lock creates the LOCK file
if it is absent (a checkpoint has none) and rewrites it, updating its
modification time: qctl needs write access to LOCK, or to the directory
when there is no LOCK. A directory that holds no journal is left as it is.
A running engine holds the lock: take a checkpoint with
Engine.Checkpoint(dir) and point qctl at the checkpoint.

A record that fails its checks and that the journal's index attributes to
one job's or workflow's stream sets that stream aside, as the engine does
at open: commands that replay the log show its jobs and workflow as
corrupt, the other streams in full, and exit 1; events lists the record
with kind unknown, then the records after it, and exits 1. Damage that
leaves the order in doubt refuses the journal (exit 5), as it refuses the
engine's Open.

Exit codes, the same for every command:
  0  ok: the command ran and found nothing wrong
  1  findings: the output is complete and shows a problem: verify found one, replay refused
     a record or set a damaged stream aside, events listed a damaged record, shutdowns
     listed a shutdown that did not succeed (its report is not graceful_completed or
     forced_completed, or it began and published none)
  2  usage: bad flags or arguments
  3  not found: the journal holds no job or workflow with show's id, or no seq --at
  4  locked: an engine or another qctl holds the directory; retry when it is free, or
     inspect a checkpoint
  5  unreadable: the journal cannot be opened or read: a missing directory, a file, no
     journal, a newer format, no permission, damage that leaves the order in doubt
  6  aborted: interrupted, or the output could not be written; the output is incomplete
     (Ctrl-C is how events --follow ends: that exits as if the listing had ended there)

Examples:
  qctl inspect data
  qctl -d data jobs --status buried
  qctl -d data workflows --status waiting_for_signal --limit 20
  qctl -d data show job_01KE3T5W2C8F0000000000000B
  qctl -d data events --kind attempt_buried --since 2026-01-05T10:00:00Z
  qctl -d data events --stream wf_01KE3T5W2C8F0000000000000W --json
  qctl -d data timers
  qctl -d data deadlines --now 2026-01-06T09:00:00Z
  qctl -d data shutdowns
  qctl verify data && echo intact
  qctl state data --at 1200`

// cli is the command line. Global flags come before or after the command.
type cli struct {
	Dir  string `short:"d" env:"QUIRE_DIR" default:"quire-data" placeholder:"DIR" help:"Journal directory: a stopped engine's, or a checkpoint of a running one. Default quire-data; commands that take DIR as an argument use that instead."`
	JSON bool   `name:"json" help:"Print one JSON object per line instead of tables."`
	Now  string `placeholder:"TIME" help:"Measure remaining and overdue times against TIME (RFC 3339, or Unix nanoseconds) instead of the current time."`

	Inspect   inspectCmd   `cmd:"" help:"Summarize a journal: seq range, records, jobs and workflows by status, timers, the nearest deadline, the last shutdown."`
	Workflows workflowsCmd `cmd:"" help:"List workflows."`
	Jobs      jobsCmd      `cmd:"" help:"List jobs."`
	Show      showCmd      `cmd:"" help:"Show the timeline of one workflow or job, and why it is not progressing."`
	Events    eventsCmd    `cmd:"" help:"List records, filtered by kind, stream, seq and time."`
	Timers    timersCmd    `cmd:"" help:"List pending timers: delayed and retrying jobs, Delay steps, attempt deadlines."`
	Deadlines deadlinesCmd `cmd:"" help:"List workflow deadlines by instant, with the time remaining."`
	Shutdowns shutdownsCmd `cmd:"" help:"List every run and its shutdown report."`
	Verify    verifyCmd    `cmd:"" help:"Check checksums, chain, seq continuity, stream index, snapshots, terminal index and replay. Exit 0 only when all hold."`
	State     stateCmd     `cmd:"" help:"Print the replayed state as of a seq (time travel)."`
}

// kongExit carries kong's exit request (after --help) out of Parse.
type kongExit struct{ code int }

// Main runs the qctl command line args (without the program name) and
// returns the exit code. It never calls os.Exit.
func Main(ctx context.Context, args []string, env Env) (code int) {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.FS == nil {
		env.FS = vfs.Default
	}
	var line *progressLine
	if env.Progress != nil && env.ElapsedFunc != nil {
		line = &progressLine{w: env.Progress}
		env.Stdout = eraseFirst{w: env.Stdout, line: line}
		env.Stderr = eraseFirst{w: env.Stderr, line: line}
	}
	var c cli
	parser, err := kong.New(&c,
		kong.Name("qctl"),
		kong.Description(description),
		kong.Writers(env.Stdout, env.Stderr),
		kong.Exit(func(code int) { panic(kongExit{code}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, WrapUpperBound: 100}),
	)
	if err != nil {
		fmt.Fprintf(env.Stderr, "qctl: %v\n", err)
		return ExitUsage
	}
	defer func() {
		if r := recover(); r != nil {
			ke, ok := r.(kongExit)
			if !ok {
				panic(r)
			}
			code = ke.code
			if code != ExitOK {
				code = ExitUsage
			}
		}
	}()
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "qctl: %v\n", err)
		fmt.Fprintln(env.Stderr, "Run qctl --help for usage and examples.")
		return ExitUsage
	}
	x := &runCtx{ctx: ctx, env: env, json: c.JSON, dir: c.Dir, now: env.Now, line: line}
	if c.Now != "" {
		t, err := parseTime(c.Now)
		if err != nil {
			fmt.Fprintf(env.Stderr, "qctl: --now: %v\n", err)
			return ExitUsage
		}
		x.now, x.nowSet = t, true
	} else {
		x.nowSet = !env.Now.IsZero()
	}
	err = kctx.Run(x)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// Every failure of the journal or the arguments is an *exitError
		// where it happens: what is left is writing the output.
		ee = &exitError{code: ExitAborted, msg: err.Error()}
	}
	if ee.msg != "" {
		fmt.Fprintf(env.Stderr, "qctl: %s\n", ee.msg)
	}
	return ee.code
}

// runCtx is what every command's Run receives.
type runCtx struct {
	ctx    context.Context
	env    Env
	json   bool
	dir    string
	now    time.Time
	nowSet bool
	line   *progressLine // nil: no progress
}

// nowFor returns the instant to measure against: --now, else Env.Now,
// else the journal's last record time.
func (x *runCtx) nowFor(lastAt int64) time.Time {
	if x.nowSet {
		return x.now
	}
	return time.Unix(0, lastAt).UTC()
}

// pick returns the positional DIR if given, else the --dir flag.
func (x *runCtx) pick(dir string) string {
	if dir != "" {
		return dir
	}
	return x.dir
}

// parseTime reads RFC 3339 (with or without fractional seconds) or Unix
// nanoseconds.
func parseTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(0, n).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2026-01-05T10:00:00Z) nor Unix nanoseconds", s)
	}
	return t.UTC(), nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
