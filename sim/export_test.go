package sim

import "github.com/cockroachdb/pebble/v2/vfs"

// SetBeforeReopenHook installs f as the before-reopen hook; nil removes
// it. Tests using it must not run in parallel.
func SetBeforeReopenHook(f func(fs vfs.FS)) { testHookBeforeReopen = f }
