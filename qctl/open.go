package qctl

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"time"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// recordBytesMaxRead is the record size qctl accepts: the largest an
// engine can be configured to write (api.RecordBytesMaxLimit), so that a
// journal written with a raised limit still reads.
const recordBytesMaxRead = 64 << 20

// openJournal opens dir to read it. It writes no journal data, but it
// takes the journal's lock (journal.Open does, read-only opens included),
// which creates dir's LOCK file if absent and rewrites it; a directory
// that holds no journal gets no LOCK. Every failure is an *exitError whose
// message says what the directory is and what to do: ExitUsage for an
// empty -d, ExitLocked for a lock another holds, ExitUnreadable for the
// rest, with journal.Open's error as its cause.
func (x *runCtx) openJournal(dir string) (*journal.Journal, error) {
	if dir == "" {
		return nil, usageErr("no journal directory: -d (or $QUIRE_DIR) is empty; give the directory as DIR or with -d DIR")
	}
	fs := x.env.FS
	st, err := fs.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, unreadableErr(err, "%s does not exist (give the journal directory as DIR or with -d)", dir)
	case err != nil:
		return nil, unreadableErr(err, "cannot read %s: %v", dir, err)
	case !st.IsDir():
		return nil, unreadableErr(nil, "%s is a file, not a journal directory", dir)
	}
	j, err := journal.Open(dir, journal.Options{
		FS:             fs,
		Clock:          stoppedClock{},
		ReadOnly:       true,
		RecordBytesMax: recordBytesMaxRead,
		GroupBytesMax:  recordBytesMaxRead,
	})
	if err != nil {
		return nil, openError(dir, err)
	}
	return j, nil
}

// openError turns an error of journal.Open into the message an operator
// needs and the exit code a script branches on.
func openError(dir string, err error) *exitError {
	code, msg := ExitUnreadable, ""
	switch {
	case errors.Is(err, journal.ErrLocked):
		// The lock does not say who holds it: an engine, or another
		// qctl.
		code, msg = ExitLocked, fmt.Sprintf("%s is in use by an engine or another qctl; if an engine runs on it, take a checkpoint with Engine.Checkpoint(dir) and inspect that", dir)
	case errors.Is(err, journal.ErrNotJournal):
		msg = fmt.Sprintf("%s is not a quire journal: %v", dir, err)
	case errors.Is(err, record.ErrNewerVersion):
		msg = fmt.Sprintf("%s was written by a newer version of quire; use a qctl of that version: %v", dir, err)
	case errors.Is(err, journal.ErrCorrupt):
		msg = fmt.Sprintf("%s is corrupt: %s (qctl verify %s lists every problem)", dir, corruptText(err), dir)
	case errors.Is(err, iofs.ErrPermission):
		msg = fmt.Sprintf("cannot open %s: %v (qctl takes the journal's lock as an engine does, so it needs write access to the directory's LOCK file, or to the directory when there is no LOCK: run it as the engine's user, or inspect a checkpoint taken with Engine.Checkpoint)", dir, err)
	default:
		msg = fmt.Sprintf("cannot open %s: %v", dir, err)
	}
	return &exitError{code: code, msg: msg, cause: err}
}

// stoppedClock satisfies journal.Options.Clock for read-only opens, which
// never stamp a record. qctl never reads the wall clock (Env.Now).
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Unix(0, 0).UTC() }

func (stoppedClock) NewTimer(time.Duration) clock.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) C() <-chan time.Time      { return nil }
func (stoppedTimer) Stop() bool               { return false }
func (stoppedTimer) Reset(time.Duration) bool { return false }
