//go:build invariants

package invariant

// Enabled reports whether expensive checks run: true, because the
// invariants build tag is set.
const Enabled = true
