//go:build !invariants

package invariant

// Enabled reports whether expensive checks run: false, because the
// invariants build tag is not set.
const Enabled = false
