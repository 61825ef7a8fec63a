package journal

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/quire-dev/quire/journal/record"
)

var (
	// ErrCorrupt marks every error caused by journal bytes that fail a check,
	// whether quire's record checks (spec/reliability.md §4.2) or Pebble's
	// own checksums found it. It is [record.ErrCorrupt], so errors.Is works
	// with either name. A [*CorruptError] says where.
	ErrCorrupt = record.ErrCorrupt

	// ErrFailStop is returned by every call after the journal stopped for
	// good (RL-2): a commit failed, Pebble called Logger.Fatalf, or Pebble
	// reported data corruption. It means "outcome unknown": an append that
	// got it may or may not be durable, which a reopen tells. The instance
	// makes no further call into its Pebble store, so its directory lock
	// stays held until the process exits. [Journal.FailStopped] returns the
	// cause.
	ErrFailStop = errors.New("journal: stopped after a failure (outcome unknown)")

	// ErrClosed is returned by calls made after [Journal.Close].
	ErrClosed = errors.New("journal: closed")

	// ErrNotJournal is returned by [Open] for a directory that holds files
	// but no quire journal.
	ErrNotJournal = errors.New("journal: not a journal")

	// ErrLocked is returned by [Open] when another open journal holds the
	// directory's lock: an engine or qctl, in this process or another.
	// Only one may have a journal directory open at a time, read-only
	// ones included.
	ErrLocked = errors.New("journal: directory in use")

	// ErrReadOnly is returned by writes to a journal opened with
	// [Options.ReadOnly].
	ErrReadOnly = errors.New("journal: opened read-only")

	// ErrNotFound is returned for a seq or snapshot that is not (yet)
	// acknowledged.
	ErrNotFound = errors.New("journal: not found")
)

// CorruptError reports damaged journal data. Seq and Stream say where; they
// are zero where nobody can say, e.g. a damaged WAL found by Pebble at open,
// and File then names the file when Pebble does. The stream of a record
// whose own bytes fail a check comes from its s/ index entry, never from the
// damaged bytes (spec/reliability.md §4.4). Every CorruptError satisfies
// errors.Is(err, [ErrCorrupt]).
type CorruptError struct {
	Seq    uint64
	Stream string
	File   string
	Reason string
	Err    error
}

func (e *CorruptError) Error() string {
	s := "journal: corrupt"
	if e.Seq != 0 {
		s += " at seq " + strconv.FormatUint(e.Seq, 10)
	}
	if e.Stream != "" {
		s += " stream " + strconv.Quote(e.Stream)
	}
	if e.File != "" {
		s += " file " + e.File
	}
	s += ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error (Pebble's, or a [record.RecordError]).
func (e *CorruptError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrCorrupt].
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// OptionError reports an [Options] field that is out of range.
type OptionError struct {
	Field  string
	Value  any
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("journal: option %s = %v: %s", e.Field, e.Value, e.Reason)
}

// corruptAt builds the CorruptError of a record check failure at seq.
// stream must come from an independent source (the s/ index) when the
// record's own bytes failed.
func corruptAt(seq uint64, stream, reason string, err error) *CorruptError {
	return &CorruptError{Seq: seq, Stream: stream, Reason: reason, Err: err}
}
