package qctl

import (
	"errors"
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
// that holds no journal gets no LOCK. Every failure is an *exitError with
// ExitUsage whose message says what the directory is and what to do.
func (x *runCtx) openJournal(dir string) (*journal.Journal, error) {
	if dir == "" {
		return nil, usageErr("no journal directory: -d (or $QUIRE_DIR) is empty; give the directory as DIR or with -d DIR")
	}
	fs := x.env.FS
	st, err := fs.Stat(dir)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return nil, usageErr("%s does not exist (give the journal directory as DIR or with -d)", dir)
	case err != nil:
		return nil, usageErr("cannot read %s: %v", dir, err)
	case !st.IsDir():
		return nil, usageErr("%s is a file, not a journal directory", dir)
	}
	j, err := journal.Open(dir, journal.Options{
		FS:             fs,
		Clock:          stoppedClock{},
		ReadOnly:       true,
		RecordBytesMax: recordBytesMaxRead,
		GroupBytesMax:  recordBytesMaxRead,
	})
	if err != nil {
		ee := openError(dir, err).(*exitError)
		ee.cause = err
		return nil, ee
	}
	return j, nil
}

// openError turns an error of journal.Open into the message an operator
// needs.
func openError(dir string, err error) error {
	switch {
	case isLockError(err):
		// The lock does not say who holds it: an engine, or another
		// qctl (journal.ErrLocked).
		return usageErr("%s is in use by an engine or another qctl; if an engine runs on it, take a checkpoint with Engine.Checkpoint(dir) and inspect that", dir)
	case errors.Is(err, journal.ErrNotJournal):
		return usageErr("%s is not a quire journal: %v", dir, err)
	case errors.Is(err, record.ErrNewerVersion):
		return usageErr("%s was written by a newer version of quire; use a qctl of that version: %v", dir, err)
	case errors.Is(err, journal.ErrCorrupt):
		return usageErr("%s is corrupt: %s (qctl verify %s lists every problem)", dir, corruptText(err), dir)
	case errors.Is(err, iofs.ErrPermission):
		return usageErr("cannot open %s: %v (qctl takes the journal's lock as an engine does, so it needs write access to the directory's LOCK file, or to the directory when there is no LOCK: run it as the engine's user, or inspect a checkpoint taken with Engine.Checkpoint)", dir, err)
	}
	return usageErr("cannot open %s: %v", dir, err)
}

// isLockError reports whether err is journal.Open finding the directory
// locked by another open journal (an engine, or another qctl).
func isLockError(err error) bool { return errors.Is(err, journal.ErrLocked) }

// stoppedClock satisfies journal.Options.Clock for read-only opens, which
// never stamp a record. qctl never reads the wall clock (Env.Now).
type stoppedClock struct{}

func (stoppedClock) Now() time.Time { return time.Unix(0, 0).UTC() }

func (stoppedClock) NewTimer(time.Duration) clock.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) C() <-chan time.Time      { return nil }
func (stoppedTimer) Stop() bool               { return false }
func (stoppedTimer) Reset(time.Duration) bool { return false }
