package scheduler

import "time"

// CheckDeadlines is CheckDeadlinesUpTo without a limit: the whole check in
// one decision, as the tests of WD-5 and WD-6 take it.
func (m *Machine) CheckDeadlines(now time.Time) Decision {
	d, _ := m.CheckDeadlinesUpTo(now, 0)
	return d
}

// RequeueBuried is RequeueBuriedUpTo without a limit.
func (m *Machine) RequeueBuried(now time.Time, queue string) (Decision, int) {
	d, n, _ := m.RequeueBuriedUpTo(now, queue, 0)
	return d, n
}
