package sim_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/sim"
)

// signalChildEnv makes TestStepModeAfterSignalNotify run as its own
// child, in the test binary it re-executes.
const signalChildEnv = "QUIRE_SIM_SIGNAL_CHILD"

// TestStepModeAfterSignalNotify checks that a world finds its quiescent
// points in step mode in a process where signal.Notify was called: the
// receiver goroutine os/signal then leaves in a system call waits for an
// OS signal, outside input, and does not hold back the world. It used to
// count as work, so every such world failed through the watchdog after
// 60 s of real time; the child is given 45 s. The world runs in a child
// process so that the receiver stays out of this one.
func TestStepModeAfterSignalNotify(t *testing.T) {
	if os.Getenv(signalChildEnv) != "" {
		signalNotifyChild(t)
		return
	}
	runChild(t, []string{signalChildEnv + "=1", "QUIRE_SIM_OUT=" + t.TempDir()}, "-test.run=^TestStepModeAfterSignalNotify$", "-test.v")
}

// signalNotifyChild calls signal.Notify, as Engine.Run or an
// application's own code in the same test binary does, which leaves
// os/signal's receiver goroutine in a system call for the rest of the
// process, then runs a world in step mode: a handler parked in Take and
// the shutdown of Finish.
func signalNotifyChild(t *testing.T) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	signal.Stop(c) // the receiver goroutine stays all the same
	w := sim.New(1, sim.WithT(t))
	handleA(w, func(ctx context.Context, d *api.Delivery, in msg) error {
		return w.Take(ctx, d.JobID(), time.Second, sim.Cooperate)
	})
	id := w.Enqueue("a", msg{N: 1})
	w.Advance(2 * time.Second)
	if j := w.Job(id); j.Status != api.JobCompleted {
		t.Fatalf("job %s, want completed", j.Status)
	}
}

// runChild runs this test binary once more, with env added to this
// process's and args after -test.count=1, and fails t unless it passes
// within 45 s (less than a world's 60 s watchdog).
func runChild(t *testing.T, env []string, args ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append([]string{"-test.count=1"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child failed (%v):\n%s", err, out)
	}
}

// TestStepModeUnderProfileAndTrace runs a world in step mode in a child
// test binary started with -test.cpuprofile and -test.trace, as go test
// -cpuprofile and -trace start it: the profile's writer and the trace's
// reader, which wait for what the runtime records, do not hold back the
// world. They used to count as work, so every such world failed through
// the watchdog after 60 s of real time; the child is given 45 s.
func TestStepModeUnderProfileAndTrace(t *testing.T) {
	dir := t.TempDir()
	runChild(t, []string{"QUIRE_SEEDS=1", "QUIRE_SIM_OUT=" + dir}, "-test.run=^TestRL8_DeterminismWithManyWorkers$",
		"-test.cpuprofile="+filepath.Join(dir, "cpu.out"), "-test.trace="+filepath.Join(dir, "trace.out"))
	for _, f := range []string{"cpu.out", "trace.out"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("the child wrote no %s: %v", f, err)
		}
	}
}
