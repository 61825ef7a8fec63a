package sim

import (
	"fmt"
	"path"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/api"
)

// injector is the world's fault injector, wrapped around every instance's
// filesystem: a WAL write fault switched by a Toggle at a scheduled step
// (never counted or random, whose counters would see Pebble's background
// operations), and optionally a slow disk.
type injector struct {
	wal  *errorfs.Toggle
	slow errorfs.Injector
}

func (i *injector) String() string { return "sim" }

func (i *injector) MaybeError(op errorfs.Op) error {
	if i.slow != nil {
		if err := i.slow.MaybeError(op); err != nil {
			return err
		}
	}
	return i.wal.MaybeError(op)
}

// walWrite matches only writes and syncs of WAL files in the journal
// directory.
func walWrite(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		if ok, _ := path.Match(path.Join(Dir, "*.log"), op.Path); ok {
			return errorfs.ErrInjected
		}
	}
	return nil
}

func newInjector() *injector {
	return &injector{wal: &errorfs.Toggle{Injector: errorfs.InjectorFunc(walWrite)}}
}

func (w *World) engineFS() vfs.FS { return errorfs.Wrap(w.fs, w.inj) }

// SlowDisk delays the engine's filesystem writes by real time (an
// exponential delay of the given mean, at most limit in total per world).
// Real delay must never change a simulation: the trace of a seed is the
// same with and without it (T15).
func SlowDisk(mean, limit time.Duration) Option {
	return func(c *config) { c.slow, c.slowLimit = mean, limit }
}

// DiskFault makes the next WAL commit fail: the engine fail-stops (RL-2),
// the enqueue that hit the fault is never acknowledged (a maybe), and the
// world crashes and reopens on an image taken after the fail-stop, as a
// supervisor restarting the process would.
//
// The fail-stopped instance is abandoned with its Pebble store open: the
// engine makes no further call into it, Close included (RL-2). Its
// goroutines (about eight, all blocked) stay in the process after
// [World.Finish], until the test binary exits.
func (w *World) DiskFault(handler string, payload any) {
	if tb := w.cfg.tb; tb != nil {
		tb.Helper()
	}
	if !w.enter("DiskFault") {
		return
	}
	w.step(fmt.Sprintf("disk fault on enqueue %s", handler), func() {
		w.inj.wal.On()
		_, err := w.eng.Enqueue(w.ctx, handler, payload)
		w.inj.wal.Off()
		if err == nil {
			w.violation("RL-2: an enqueue was acknowledged although its WAL commit failed")
			return
		}
		if s := w.eng.Snapshot(); s.Live || s.Ready || s.Lifecycle != api.Failed {
			w.violation("SD-34: after a failed WAL commit the engine is %s (live %t, ready %t), want failed and neither", s.Lifecycle, s.Live, s.Ready)
		}
		w.crashN++
		w.kill() // fail-stopped: errors ignored
		pct := []int{0, 100}[w.crashes.IntN(2)]
		w.reopenOn(w.crashImage(pct))
		w.open()
	})
}
