package record

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrCorrupt marks every error caused by bytes that fail a check: a bad
	// checksum, header, chain link, length or msgpack structure. Match it
	// with errors.Is through any amount of wrapping.
	ErrCorrupt = errors.New("journal: corrupt record")
	// ErrNewerVersion marks data written by a newer format version.
	ErrNewerVersion = errors.New("journal: written by a newer format version")
	// ErrInvalid marks a record refused before it is written (bad stream id,
	// missing body, unknown kind).
	ErrInvalid = errors.New("journal: invalid record")
	// ErrTooLarge marks a record or payload over its size limit.
	ErrTooLarge = errors.New("journal: record too large")
)

// RecordError reports a failure on one record: Op names the check or
// operation ("checksum", "decode", "chain", ...), Seq and Stream say where
// (Stream is empty when it could not be trusted yet).
type RecordError struct {
	Op     string
	Seq    uint64
	Stream string
	Err    error
}

func (e *RecordError) Error() string {
	s := e.Op + " record seq " + strconv.FormatUint(e.Seq, 10)
	if e.Stream != "" {
		s += " stream " + strconv.Quote(e.Stream)
	}
	return s + ": " + e.Err.Error()
}

func (e *RecordError) Unwrap() error { return e.Err }

// ValueTypeError is a user value (a job's payload, a workflow's state)
// whose bytes passed their checks but do not decode into the type asked
// for: most often a payload enqueued for one type and read as another.
// It matches [ErrCorrupt] too, since the bytes could also be damaged.
type ValueTypeError struct {
	Type string // the Go type asked for, as %T prints it
	Err  error  // the decoder's error
}

func (e *ValueTypeError) Error() string {
	return "value does not decode into " + e.Type + ": " + e.Err.Error()
}

// Unwrap returns ErrCorrupt and the decoder's error.
func (e *ValueTypeError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

func corrupt(op string, seq uint64, stream string, err error) error {
	return &RecordError{Op: op, Seq: seq, Stream: stream, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
}
