package api_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// The signal tests run the engine's Run in a child process (this test
// binary, re-executed with QUIRE_SIGNAL_CHILD naming the journal
// directory) and deliver real signals to it (SD-20).
func TestMain(m *testing.M) {
	if dir := os.Getenv("QUIRE_SIGNAL_CHILD"); dir != "" {
		os.Exit(signalChild(dir, os.Getenv("QUIRE_SIGNAL_MODE")))
	}
	os.Exit(m.Run())
}

// signalChild opens an engine on dir and runs it until its signals end
// it. It enqueues one job: in mode "block" its handler returns only when
// its attempt is cancelled, so a graceful shutdown cannot drain it and
// only force ends it; otherwise it returns at once. The handler starting
// proves Run installed its signal listener (Run installs it before it
// starts work). The child tells the parent, on stdout, when it is ready
// and when the shutdown has started.
func signalChild(dir, mode string) int {
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: dir, ShutdownTimeout: 60 * time.Second})
	if err != nil {
		fmt.Println("open:", err)
		return 3
	}
	started := make(chan struct{})
	if err := api.Handle(eng, "work", func(ctx context.Context, d *api.Delivery, in msg) error {
		close(started)
		if mode == "block" {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}); err != nil {
		fmt.Println("handle:", err)
		return 3
	}
	if _, err := eng.Enqueue(ctx, "work", msg{}); err != nil {
		fmt.Println("enqueue:", err)
		return 3
	}
	go func() {
		<-started
		fmt.Println("ready")
		<-eng.ShutdownStarted()
		fmt.Println("initiated")
	}()
	if err := eng.Run(ctx); err != nil {
		fmt.Println("run:", err)
	}
	fmt.Println("done")
	return 0
}

type childProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, dir, mode string) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUIRE_SIGNAL_CHILD="+dir, "QUIRE_SIGNAL_MODE="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childProc{t: t, cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// expect waits for the child to print want; the child's own progress, not
// a timer, decides when the test goes on.
func (c *childProc) expect(want string) {
	c.t.Helper()
	for line := range c.lines {
		if line == want {
			return
		}
		if strings.HasPrefix(line, "open:") || strings.HasPrefix(line, "handle:") || strings.HasPrefix(line, "enqueue:") {
			c.t.Fatalf("child: %s", line)
		}
	}
	c.t.Fatalf("child exited before printing %q", want)
}

func (c *childProc) signal(s syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(s); err != nil {
		c.t.Fatal(err)
	}
}

func (c *childProc) wait() {
	c.t.Helper()
	c.expect("done")
	if err := c.cmd.Wait(); err != nil {
		c.t.Fatalf("child: %v", err)
	}
}

// lastReport replays the journal in dir and returns the newest run's
// shutdown report and initiation.
func lastReport(t *testing.T, dir string) (*record.ShutdownReport, *record.ShutdownInitiated, bool) {
	t.Helper()
	j, err := journal.Open(dir, journal.Options{Clock: clocktest.New(t0), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	st := replay.New()
	it := j.Scan(1, math.MaxUint64)
	defer it.Close()
	for it.Next() {
		if err := replay.Apply(st, it.Record()); err != nil {
			t.Fatal(err)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	run := st.LastRun()
	if run == nil || run.Shutdown.Report == nil {
		t.Fatalf("the child's run has no shutdown report in the journal")
	}
	return run.Shutdown.Report, run.Shutdown.Initiated, run.Shutdown.Forced
}

func TestSD20_RunShutsDownGracefullyOnSIGTERM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	c := startChild(t, dir, "idle")
	c.expect("ready")
	c.signal(syscall.SIGTERM)
	c.wait()
	rep, init, forceRequested := lastReport(t, dir)
	if init.Trigger != "sigterm" || rep.Completion != "graceful_completed" || rep.Forced || forceRequested {
		t.Fatalf("SD-20: trigger %q completion %q forced %t", init.Trigger, rep.Completion, rep.Forced)
	}
	// SD-16: Run's listener is the shutdown's signal monitor, stopped and
	// joined in phase 5: owned, started, terminal and succeeded.
	if len(rep.Dependencies) != 3 || rep.Dependencies[1] != 0b1111 {
		t.Fatalf("SD-16: signal monitor bits %v, want owned|started|terminal|succeeded", rep.Dependencies)
	}
}

func TestSD20_SecondSIGTERMForces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	c := startChild(t, dir, "block")
	c.expect("ready")
	c.signal(syscall.SIGTERM)
	c.expect("initiated")
	c.signal(syscall.SIGTERM)
	c.wait()
	// The force must come from the second signal (shutdown_force_requested),
	// not from the graceful cutoff passing.
	rep, init, forceRequested := lastReport(t, dir)
	if init.Trigger != "sigterm" || !forceRequested || !rep.Forced || rep.Completion != "forced_completed" {
		t.Fatalf("SD-20, SD-22: trigger %q completion %q forced %t", init.Trigger, rep.Completion, rep.Forced)
	}
}

func TestSD20_SIGQUITForcesAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	c := startChild(t, dir, "block")
	c.expect("ready")
	c.signal(syscall.SIGQUIT)
	c.wait()
	rep, init, forceRequested := lastReport(t, dir)
	if init.Trigger != "sigquit" || !forceRequested || !rep.Forced || rep.Completion != "forced_completed" {
		t.Fatalf("SD-20: trigger %q completion %q forced %t", init.Trigger, rep.Completion, rep.Forced)
	}
}
