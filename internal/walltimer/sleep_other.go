//go:build !linux

package walltimer

import "time"

// sleep waits about d on a runtime timer: this system has no precise sleep
// wired in, so the timer is as precise as the runtime's own.
var sleep = time.Sleep
