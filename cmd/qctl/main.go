// Command qctl inspects, explains and verifies a quire journal from its
// directory alone (docs/DESIGN.md §7). The commands live in package qctl; this
// program wires them to the process: arguments, stdout and stderr, the
// wall clock (the one place qctl reads it), Ctrl-C, and progress on a
// terminal. Run qctl --help for the commands and examples.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/quire-dev/quire/qctl"
)

// followInterval is how often events --follow polls the directory.
const followInterval = time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := qctl.Main(ctx, os.Args[1:], env(time.Now()))
	stop()
	os.Exit(code)
}

// env connects qctl to this process, with start as the instant remaining
// and overdue times are measured against (unless --now is given).
func env(start time.Time) qctl.Env {
	e := qctl.Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Now:    start,
		WaitFunc: func(ctx context.Context) error {
			t := time.NewTimer(followInterval)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		e.Progress = os.Stderr
		e.ElapsedFunc = func() time.Duration { return time.Since(start) }
	}
	return e
}
