package sim

import (
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SetBeforeReopenHook installs f as the before-reopen hook; nil removes
// it. Tests using it must not run in parallel.
func SetBeforeReopenHook(f func(fs vfs.FS)) { testHookBeforeReopen = f }

// SetLiveHook installs f as the hook that rewrites what the engine reports
// it holds in memory; nil removes it. Tests using it must not run in
// parallel.
func SetLiveHook(f func(jobs, workflows []string) ([]string, []string)) { testHookLive = f }

// SetDoWatchdog sets how long the function of a World.Do may run, in real
// time, and returns the previous bound. Tests using it must not run in
// parallel.
func SetDoWatchdog(d time.Duration) time.Duration {
	prev := doWatchdog
	doWatchdog = d
	return prev
}
