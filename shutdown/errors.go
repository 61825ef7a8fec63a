package shutdown

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalidOptions is matched by every error [New] returns. Range
	// errors of durations also match [deadlines.ErrOutOfRange].
	ErrInvalidOptions = errors.New("shutdown: invalid options")
	// ErrNotInitiated is returned by [Coordinator.Force] before any
	// initiation: force needs a shutdown to force.
	ErrNotInitiated = errors.New("shutdown: force requested before initiation")
	// ErrWithheld is matched by the error of an [Engine] call that withheld
	// a close because its barrier never opened (SD-18: CloseEvidence when
	// the drain was not reconciled). The action then ends TimedOut, as a
	// withheld action does, not Failed: nothing was closed that failed.
	ErrWithheld = errors.New("shutdown: withheld: its barrier never opened")
	// ErrIncomplete is matched by the [*Error] of a shutdown whose report is
	// [Incomplete].
	ErrIncomplete = errors.New("shutdown: incomplete")
	// ErrFailed is matched by the [*Error] of a shutdown whose report is
	// [Failed].
	ErrFailed = errors.New("shutdown: failed")
)

// Error is the result of a shutdown that did not succeed or whose journal
// did not confirm (SD-17, SD-21). Every observer of one shutdown gets the
// same *Error. The report itself is [Coordinator.Report].
type Error struct {
	// Completion and FailureCode are the report's.
	Completion  Completion
	FailureCode string
	// Detail says in a few words what the report did not confirm: the
	// goroutines that had not returned, the settlements unresolved, the
	// actions not completed. Empty when it confirmed everything.
	Detail string
	// Err is the first error of the journal: a failed append (records
	// skipped from there on) or the failed close. Nil if the journal
	// confirmed everything.
	Err error
}

// Error describes the completion, the failure code and the journal error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("shutdown: ")
	b.WriteString(e.Completion.String())
	if e.FailureCode != "" {
		b.WriteString(" (")
		b.WriteString(e.FailureCode)
		b.WriteString(")")
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": journal: ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the journal error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is matches [ErrIncomplete] and [ErrFailed] by Completion.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrIncomplete:
		return e.Completion == Incomplete
	case ErrFailed:
		return e.Completion == Failed
	}
	return false
}

// detail is [Error].Detail for rep.
func detail(rep Report) string {
	var parts []string
	if rep.Quarantined > 0 {
		parts = append(parts, fmt.Sprintf("%d goroutine%s not returned", rep.Quarantined, plural(rep.Quarantined)))
	}
	if rep.Unresolved > 0 {
		parts = append(parts, fmt.Sprintf("%d settlement%s unresolved", rep.Unresolved, plural(rep.Unresolved)))
	}
	for _, a := range rep.Actions {
		if !a.Complete() {
			parts = append(parts, fmt.Sprintf("%s %s/%s", a.Component, a.Graceful, a.Forced))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
