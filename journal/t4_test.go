package journal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

// T4 runs a fixed workload in a child process (this test binary, re-run
// with t4ChildEnv naming the write op to fail) on a real temporary
// directory, and fails the i-th write op of the child's whole life for i =
// 0, 1, 2 ... until a run sees no injection. The write ops are every
// non-read errorfs op (errorfs.Writes): creates, writes, syncs, renames,
// removals, locks, mkdirs, on the journal's own goroutines and Pebble's
// background ones alike, during open (new and existing store), appends,
// snapshot writes, memtable flushes, compactions and close.
//
// Faults that reach Pebble's background goroutines end the process by
// design (spec/reliability.md §2.3), which is why the case runs in a child.
// The child prints what it was acknowledged on stdout as it goes (a pipe
// keeps what was written when the process dies), then the parent reopens
// the directory without faults.
const (
	t4ChildEnv = "QUIRE_T4_CHILD" // the index of the write op to fail
	t4DirEnv   = "QUIRE_T4_DIR"   // the journal directory

	// t4IndexMaxDefault bounds i in a default run; QUIRE_LONG=1 runs the
	// loop until a run sees no injection wherever that is. The workload
	// makes about 160 write ops, so the default covers it whole (the test
	// fails if it does not).
	t4IndexMaxDefault = 400

	// t4ChildWatchdog bounds one child run in real time: a child that has
	// not ended by then is stuck, and the test fails naming its index,
	// unless the runtime had reported a known death (t4Run).
	t4ChildWatchdog = 2 * time.Minute
)

// The child's workload: appends in t4Phases, each followed by a memtable
// flush (the first by a snapshot write too, the last by a manual
// compaction), then Close, then a reopen of the store, t4ReopenAppends more
// appends and Close again. Appends run one at a time, so the records of a
// surviving store must be appends 0..m-1 exactly.
const (
	t4Phases        = 4
	t4PhaseAppends  = 5
	t4ReopenAppends = 5
	t4Appends       = t4Phases*t4PhaseAppends + t4ReopenAppends
	t4IndexStreams  = 5
	t4Streams       = 7
)

// t4Append returns append k of the workload: 1 to 3 records and one
// terminal-index entry, derived from k alone so that the parent knows
// every append the child may have made.
func t4Append(k int) crashAppend {
	a := crashAppend{indexID: fmt.Sprintf("ix_%d", (k*3)%t4IndexStreams)}
	for r := range 1 + k%3 {
		a.msgs = append(a.msgs, fmt.Sprintf("a%d.r%d", k, r))
		a.streams = append(a.streams, fmt.Sprintf("wf_%d", (k+r)%t4Streams))
	}
	return a
}

// TestT4_WriteFaultsEverywhere is T4 (RL-2, RL-5). Each child run must end
// in a returned error, ErrFailStop, success, or one of Pebble's deliberate
// process deaths, each logged under its own name: Logger.Fatalf in a
// Pebble goroutine (our logger panics and nothing recovers it), Pebble's
// panic on a failed directory fsync while it moves a marker file
// (atomicfs.Marker.Move: "fsync errors are unrecoverable"), and Pebble
// v2.1.7's "fatal error: sync: unlock of unlocked mutex" when a WAL write
// fails while it rotates the WAL (a Pebble bug; a crash all the same). In
// every case the parent's reopen must pass Verify with every acknowledged
// append, index entry and snapshot present and nothing beyond the append
// in flight, or, only when nothing was acknowledged, fail with a typed
// error. A run that ends any other way fails the test.
//
// By default i stops at t4IndexMaxDefault, above the workload's write ops
// (the test fails if the loop is cut short by it); QUIRE_LONG=1 lifts the
// bound. -short runs every 10th index. The log (go test -v) lists each
// run: the op that failed, the outcome, acknowledged and surviving appends.
func TestT4_WriteFaultsEverywhere(t *testing.T) { // RL-2, RL-5
	if os.Getenv(t4ChildEnv) != "" {
		t4Child(t)
		return
	}
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	limit := t4IndexMaxDefault
	if os.Getenv("QUIRE_LONG") == "1" {
		limit = 1 << 30
	}
	step := 1
	if testing.Short() {
		step = 10
	}
	root := t.TempDir()
	workers := min(4, runtime.GOMAXPROCS(0))

	var (
		mu      sync.Mutex
		results = map[int]t4Result{}
		clean   = -1 // the lowest index whose run saw no injection
		next    = 0
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if (clean >= 0 && next > clean) || next > limit || t.Failed() {
			return 0, false
		}
		i := next
		next += step
		return i, true
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				res := t4Run(t, exe, filepath.Join(root, strconv.Itoa(i)), i)
				mu.Lock()
				results[i] = res
				if !res.injected && (clean < 0 || i < clean) {
					clean = i
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if clean < 0 {
		t.Fatalf("every run up to index %d saw an injection: the workload outgrew t4IndexMaxDefault; raise it or run with QUIRE_LONG=1", limit)
	}
	counts := map[string]int{}
	runs := 0
	for _, i := range slices.Sorted(maps.Keys(results)) {
		r := results[i]
		if i > clean {
			continue
		}
		runs++
		counts[r.outcome]++
		t.Logf("i=%d inject=%s outcome=%s acked=%d survived=%d", i, r.op, r.outcome, r.acked, r.survived)
	}
	var summary []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		summary = append(summary, fmt.Sprintf("%s: %d", k, counts[k]))
	}
	t.Logf("T4: %d runs, each failing one write op (ops 0..%d, every %d), run %d saw no injection; outcomes: %s",
		runs, clean-step, step, clean, strings.Join(summary, ", "))
}

// t4Result is what the parent learned from one child run.
type t4Result struct {
	injected bool
	op       string // the failed op, "-" if none
	outcome  string
	acked    int // appends acknowledged
	survived int // appends found after the reopen
}

// Outcome classes of a child run, as the test log names them.
const (
	t4Completed      = "completed"            // the workload ran to its end, fault absorbed or none
	t4FailStop       = "failstop"             // a call returned ErrFailStop
	t4Error          = "error"                // a call returned another error
	t4FatalExit      = "pebble-fatal-exit"    // Logger.Fatalf in a Pebble goroutine ended the process
	t4DirSyncPanic   = "pebble-dirsync-panic" // Pebble panicked on a failed directory fsync (marker move)
	t4RotationPanic  = "pebble-wal-rotation"  // Pebble v2.1.7 "unlock of unlocked mutex" on a WAL write error
	t4WALSwitchPanic = "pebble-wal-switch"    // Pebble panicked on a failed close, creation or reuse of a WAL while rotating
	t4ChildEndPrefix = "t4:end "
)

// t4Run runs child i on dir and checks the directory it leaves.
func t4Run(t *testing.T, exe, dir string, i int) t4Result {
	ctx, cancel := context.WithTimeout(context.Background(), t4ChildWatchdog)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestT4_WriteFaultsEverywhere$", "-test.count=1")
	cmd.Env = append(os.Environ(), t4ChildEnv+"="+strconv.Itoa(i), t4DirEnv+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	stuck := ctx.Err() != nil

	res := t4Result{op: "-"}
	acked := map[int]uint64{} // append k -> its first seq
	var snaps []uint64
	var end string
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "t4:ack":
			k, err1 := strconv.Atoi(f[1])
			seq, err2 := strconv.ParseUint(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Errorf("i=%d: bad line %q", i, line)
				return res
			}
			acked[k] = seq
		case len(f) == 2 && f[0] == "t4:snap":
			seq, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Errorf("i=%d: bad line %q", i, line)
				return res
			}
			snaps = append(snaps, seq)
		case len(f) >= 3 && f[0] == "t4:inject":
			res.injected = true
			res.op = f[1] + ":" + f[2]
			if end != "" {
				res.op += "(after the workload)"
			}
		case strings.HasPrefix(line, t4ChildEndPrefix):
			end = strings.TrimPrefix(line, t4ChildEndPrefix)
		}
	}
	res.acked = len(acked)

	errOut := stderr.String()
	death, known := t4Death(errOut, res.op)
	if stuck {
		// A known death the Go runtime reported as a fatal error, after
		// which the process did not exit: no code of the child's runs
		// past that report, so the watchdog's kill ends the same death.
		if !known || !strings.Contains(errOut, "fatal error: ") {
			t.Errorf("i=%d: the child did not end within %v (stuck); stdout:\n%s\nstderr:\n%s", i, t4ChildWatchdog, stdout.String(), errOut)
			return t4Result{injected: true}
		}
		t.Logf("i=%d (%s): the runtime reported %s, then the process did not exit; killed by the watchdog", i, res.op, death)
	}
	switch {
	case end != "":
		res.outcome = strings.Fields(end)[0]
		if runErr != nil {
			// The workload stopped (on a fail-stop or an error) and a
			// Pebble goroutine then died before the process exited.
			if !known {
				t.Errorf("i=%d: the child ended its workload (%s) and then exited with %v:\n%s", i, end, runErr, errOut)
				return res
			}
			res.outcome += "+" + death
		}
		// The end line counts the injections made before it; one made
		// after it (by a goroutine Pebble left running) is printed after it.
		before := res.injected && !strings.HasSuffix(res.op, "(after the workload)")
		if counted := !strings.HasSuffix(end, " injected=0"); counted != before {
			t.Errorf("i=%d: the end line %q and the inject lines disagree on whether a fault was injected; stdout:\n%s", i, end, stdout.String())
			return res
		}
	case runErr == nil:
		t.Errorf("i=%d: the child exited 0 without finishing its workload; stdout:\n%s\nstderr:\n%s", i, stdout.String(), errOut)
		return res
	case known:
		res.outcome = death
	default:
		t.Errorf("i=%d (%s): the child died in an unexpected way (%v); stdout:\n%s\nstderr:\n%s", i, res.op, runErr, stdout.String(), errOut)
		return res
	}
	if !res.injected && res.outcome != t4Completed {
		t.Errorf("i=%d: the child ended with %s (%s) but no fault was injected", i, res.outcome, end)
		return res
	}

	res.survived = t4CheckReopen(t, i, dir, acked, snaps, res)
	return res
}

// t4Death names a process death the test allows from the child's stderr,
// or reports false.
func t4Death(errOut, op string) (string, bool) {
	switch {
	case strings.Contains(errOut, "journal.fatalPanic"):
		return t4FatalExit, true
	case strings.Contains(errOut, "fatal error: sync: unlock of unlocked mutex"):
		return t4RotationPanic, true
	case strings.HasPrefix(op, "sync:") && strings.Contains(errOut, "panic: injected error") &&
		strings.Contains(errOut, "pebble/v2/vfs/atomicfs.(*Marker).Move"):
		return t4DirSyncPanic, true
	case strings.Contains(errOut, "panic: injected error") && strings.Contains(errOut, "pebble/v2.(*DB).rotateWAL("):
		// rotateWAL panics with the error of closing the old WAL or of
		// creating (or reusing) the new one: the process dies there, as
		// a crash, and the reopen is checked like any other.
		return t4WALSwitchPanic, true
	}
	return "", false
}

// t4CheckReopen reopens dir without faults, as a restarted engine would,
// and checks what it holds against what the child was acknowledged. It
// returns the number of appends found.
func t4CheckReopen(t *testing.T, i int, dir string, acked map[int]uint64, snaps []uint64, res t4Result) int {
	where := fmt.Sprintf("i=%d (%s, %s)", i, res.op, res.outcome)
	j, err := Open(dir, Options{Clock: clocktest.New(epoch)})
	if err != nil {
		// Even with nothing acknowledged the directory must open: a first
		// Open that died while Pebble created the store leaves files the
		// next Open finishes, not a directory it refuses.
		t.Errorf("%s: reopen failed after %d acknowledged appends: %v", where, len(acked), err)
		return 0
	}
	defer func() {
		if err := j.Close(); err != nil {
			t.Errorf("%s: close after reopen: %v", where, err)
		}
	}()
	rep, err := j.Verify()
	if err != nil || !rep.OK() {
		t.Errorf("%s: Verify after reopen: %v, problems %v", where, err, rep.Problems)
		return 0
	}
	it := j.Scan(1, ^uint64(0))
	var recs []record.Record
	for it.Next() {
		recs = append(recs, it.Record())
	}
	if err := it.Close(); err != nil {
		t.Errorf("%s: scan after reopen: %v", where, err)
		return 0
	}
	// Appends ran one at a time: the log must be appends 0..m-1, whole,
	// in order; every acknowledged one among them at the seqs it was
	// acknowledged with; at most one more than the acknowledged ones (the
	// append in flight when the fault hit).
	var survived []crashAppend
	seq, m := uint64(1), 0
	for ; seq <= uint64(len(recs)); m++ {
		if m >= t4Appends {
			t.Errorf("%s: records beyond the workload's %d appends at seq %d", where, t4Appends, seq)
			return m
		}
		a := t4Append(m)
		if first, ok := acked[m]; ok && first != seq {
			t.Errorf("%s: append %d acknowledged at seq %d, found at seq %d", where, m, first, seq)
			return m
		}
		for r := range a.msgs {
			if seq > uint64(len(recs)) {
				t.Errorf("%s: append %d torn: %d of its %d records survived", where, m, r, len(a.msgs))
				return m
			}
			got := recs[seq-1]
			d, ok := got.Body.(*record.Debug)
			if !ok || d.Message != a.msgs[r] || got.Stream != a.streams[r] {
				t.Errorf("%s: seq %d holds %v of stream %q, want %q of %q (append %d)", where, seq, got.Body, got.Stream, a.msgs[r], a.streams[r], m)
				return m
			}
			seq++
		}
		survived = append(survived, a)
	}
	for k := range acked {
		if k >= m {
			t.Errorf("%s: acknowledged append %d lost (%d appends survived)", where, k, m)
		}
	}
	if m > len(acked)+1 {
		t.Errorf("%s: %d appends survived, %d were acknowledged: more than the one in flight", where, m, len(acked))
	}
	// The terminal index holds, for each id, the value of the last
	// surviving append that set it (RL-4: index entries commit with their
	// records).
	for n := range t4IndexStreams {
		id := fmt.Sprintf("ix_%d", n)
		want, wok := "", false
		for _, a := range survived {
			if a.indexID == id {
				want, wok = a.msgs[0], true
			}
		}
		v, ok, err := j.Index(id)
		if err != nil || ok != wok || string(v) != want {
			t.Errorf("%s: Index(%q) = %q, %v, %v; the surviving appends say %q, %v", where, id, v, ok, err, want, wok)
		}
	}
	// Acknowledged snapshots survive and pass their checks.
	have := map[uint64]bool{}
	sit := j.Snapshots()
	for sit.Next() {
		if s := sit.Snapshot(); s.Err == nil {
			have[s.Seq] = true
		}
	}
	if err := sit.Err(); err != nil {
		t.Errorf("%s: snapshots after reopen: %v", where, err)
	}
	sit.Close()
	for _, s := range snaps {
		if !have[s] {
			t.Errorf("%s: acknowledged snapshot at seq %d lost", where, s)
		}
	}
	// The reopened journal goes on.
	if _, err := j.Append(context.Background(), debugRec("wf_after", "after")); err != nil {
		t.Errorf("%s: append after reopen: %v", where, err)
	}
	return m
}

// t4Child is the child side: it runs the workload on a filesystem that
// fails the i-th write op, reporting each acknowledgement on stdout before
// doing anything else, and ends with one t4:end line unless the process
// dies first.
func t4Child(t *testing.T) {
	i, err := strconv.ParseInt(os.Getenv(t4ChildEnv), 10, 32)
	if err != nil {
		t.Fatalf("%s: %v", t4ChildEnv, err)
	}
	dir := os.Getenv(t4DirEnv)
	say := func(format string, args ...any) {
		// One write per line: os.Stdout is unbuffered, so a line reaches
		// the pipe before the next step can kill the process.
		_, _ = os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
	}
	counter := &errorfs.Counter{Injector: errorfs.ErrInjected.If(errorfs.And(errorfs.Writes, errorfs.OnIndex(int32(i))))}
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		err := counter.MaybeError(op)
		if err != nil {
			rel, rerr := filepath.Rel(dir, op.Path)
			if rerr != nil {
				rel = op.Path
			}
			say("t4:inject %s %s", t4OpName(op.Kind), rel)
		}
		return err
	})
	fs := errorfs.Wrap(vfs.Default, inj)
	outcome := t4Workload(fs, dir, say)
	say("%s%s injected=%d", t4ChildEndPrefix, outcome, counter.Load())
}

// t4Workload runs the child's workload and returns its outcome: "completed",
// or "failstop <step>: <error>" or "error <step>: <error>" for the first
// call that failed (the workload stops there, as an engine would).
func t4Workload(fs vfs.FS, dir string, say func(string, ...any)) string {
	ctx := context.Background()
	clk := clocktest.New(epoch)
	fail := func(step string, err error) string {
		class := t4Error
		if errors.Is(err, ErrFailStop) {
			class = t4FailStop
		}
		return fmt.Sprintf("%s %s: %s", class, step, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	k := 0
	appends := func(j *Journal, n int) error {
		for range n {
			a := t4Append(k)
			recs := make([]record.Record, len(a.msgs))
			for r := range recs {
				recs[r] = debugRec(a.streams[r], a.msgs[r])
			}
			seqs, err := j.AppendIndexed(ctx, []IndexEntry{{ID: a.indexID, Value: []byte(a.msgs[0])}}, recs...)
			if err != nil {
				return fmt.Errorf("append %d: %w", k, err)
			}
			say("t4:ack %d %d", k, seqs[0])
			k++
			clk.Advance(time.Millisecond)
		}
		return nil
	}

	j, err := Open(dir, Options{FS: fs, Clock: clk, EngineID: "t4"})
	if err != nil {
		return fail("open", err)
	}
	for p := range t4Phases {
		if err := appends(j, t4PhaseAppends); err != nil {
			return fail("appends", err)
		}
		if p == 0 {
			seq := j.LastSeq()
			if err := j.WriteSnapshot(ctx, seq, []byte("state")); err != nil {
				return fail("snapshot", err)
			}
			say("t4:snap %d", seq)
		}
		if err := j.t4Flush(); err != nil {
			return fail("flush", err)
		}
	}
	if err := j.t4Compact(); err != nil {
		return fail("compact", err)
	}
	if err := j.Close(); err != nil {
		return fail("close", err)
	}
	if j, err = Open(dir, Options{FS: fs, Clock: clk}); err != nil {
		return fail("reopen", err)
	}
	if err := appends(j, t4ReopenAppends); err != nil {
		return fail("appends after reopen", err)
	}
	if err := j.Close(); err != nil {
		return fail("close after reopen", err)
	}
	return t4Completed
}

// t4Flush flushes the memtable to an sstable between groups. Pebble runs
// the flush on its own goroutine: a fatal error there ends the process.
func (j *Journal) t4Flush() error {
	return j.exclusive(context.Background(), "flush", func() error {
		return j.t4Pebble("flush", j.db.Flush)
	})
}

// t4Compact compacts the whole store between groups (the flushes before
// it leave several L0 tables, so Pebble may have started compactions of
// its own already).
func (j *Journal) t4Compact() error {
	return j.exclusive(context.Background(), "compact", func() error {
		return j.t4Pebble("compact", func() error {
			return j.db.Compact(context.Background(), []byte{0}, []byte{0xff}, false)
		})
	})
}

// t4Pebble runs a direct Pebble call the way the journal runs its own:
// under guard, with a fatal error turned into a fail-stop.
func (j *Journal) t4Pebble(op string, f func() error) error {
	err := guard(f)
	switch {
	case errors.Is(err, errFatal):
		j.broken.Store(true)
		return j.failStopError(op)
	case err != nil:
		return pebbleError(op, err)
	}
	return nil
}

// t4OpName names an errorfs op kind in the child's report.
func t4OpName(k errorfs.OpKind) string {
	names := map[errorfs.OpKind]string{
		errorfs.OpCreate: "create", errorfs.OpLink: "link", errorfs.OpRemove: "remove",
		errorfs.OpRemoveAll: "removeall", errorfs.OpRename: "rename", errorfs.OpReuseForWrite: "reuse",
		errorfs.OpMkdirAll: "mkdir", errorfs.OpLock: "lock", errorfs.OpFilePreallocate: "preallocate",
		errorfs.OpFileClose: "close", errorfs.OpFileWrite: "write", errorfs.OpFileWriteAt: "writeat",
		errorfs.OpFileSync: "sync", errorfs.OpFileSyncData: "syncdata", errorfs.OpFileSyncTo: "syncto",
		errorfs.OpFileFlush: "flush",
	}
	if n, ok := names[k]; ok {
		return n
	}
	return fmt.Sprintf("op%d", int(k))
}
