// Package cputime reads the process's CPU time, for benchmarks that
// report CPU per unit of work: unlike wall time it hardly depends on the
// machine's other load (though a shared virtual machine still moves it).
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time the process has used so far, user and
// system, or 0 if the system does not say.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
