package invariant

// Check panics when cond is false, with msg naming the broken invariant. A
// panic, not an error: the state the caller holds can no longer be trusted.
func Check(cond bool, msg string) {
	if !cond {
		panic(Violation(msg))
	}
}

// Violation is the value a failed [Check] panics with.
type Violation string

// Error returns the message, prefixed so that a crash log names its cause.
func (v Violation) Error() string { return "quire: invariant violated: " + string(v) }
