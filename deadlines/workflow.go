package deadlines

import "time"

// WorkflowExpired reports whether a workflow deadline_at has passed at a
// check at now (WD-5): deadlineAt <= now, inclusive. The zero deadlineAt
// means that the workflow has no deadline and never expires (WD-4). The
// status condition of WD-5 (only running workflows expire) is the
// caller's.
func WorkflowExpired(deadlineAt, now time.Time) bool {
	return !deadlineAt.IsZero() && Expired(deadlineAt, now)
}
