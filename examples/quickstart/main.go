// Command quickstart is the README's demo: it opens a quire engine on a
// local directory, enqueues a few jobs (one fails once and then succeeds,
// one is delayed, one is buried by a permanent error), shows their
// progress while they run and prints a summary. Run it twice: the second
// run reopens the same journal and shows that the first run's jobs and
// history survived.
//
//	go run ./examples/quickstart
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/quire-dev/quire/api"
)

type email struct {
	To      string `msgpack:"to"`
	Subject string `msgpack:"subject"`
}

type report struct {
	Name string `msgpack:"name"`
}

// labels names the demo's jobs, in the order it shows them.
var labels = []string{"email", "flaky", "delayed", "poison"}

// dirDefault is the default of the -dir flag.
const dirDefault = "quickstart-data"

func main() {
	dir := flag.String("dir", dirDefault, "journal directory")
	flag.Parse()
	if err := run(*dir, os.Stdout, 15*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run is the demo, writing to out. It waits at most wait for the jobs to
// settle before it prints the summary.
func run(dir string, out io.Writer, wait time.Duration) (err error) {
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: dir, Workers: 4})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := eng.Close(ctx); err == nil {
			err = cerr
		}
	}()

	st := eng.Stats()
	idsFile := dir + ".jobs"
	previous := readIDs(idsFile)
	fmt.Fprintf(out, "journal %s: %d records replayed at open (snapshot at seq %d), run %s\n",
		dir, st.RecordsReplayed, st.SnapshotSeq, st.RunID)

	if err := register(eng); err != nil {
		return err
	}
	if len(previous) > 0 {
		fmt.Fprintf(out, "\nthe journal survived: %d jobs from the previous run, read back from it:\n", len(previous))
		printJobs(ctx, out, eng, previous)
		fmt.Fprintln(out)
	}

	if err := eng.Start(ctx); err != nil {
		return err
	}
	ids := map[string]string{}
	enqueue := func(label, handler string, payload any, opts ...api.JobOption) error {
		id, err := eng.Enqueue(ctx, handler, payload, opts...)
		if err != nil {
			return fmt.Errorf("enqueue %s: %w", label, err)
		}
		ids[label] = id
		fmt.Fprintf(out, "enqueued %-9s %s\n", label, id)
		return nil
	}
	if err := enqueue("email", "send_email", email{To: "ann@example.com", Subject: "welcome"}); err != nil {
		return err
	}
	if err := enqueue("flaky", "flaky_report", report{Name: "weekly"},
		api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 500 * time.Millisecond})); err != nil {
		return err
	}
	if err := enqueue("delayed", "send_email", email{To: "bob@example.com", Subject: "reminder"},
		api.Delay(2*time.Second), api.WithPriority(api.High)); err != nil {
		return err
	}
	if err := enqueue("poison", "import_file", report{Name: "broken.csv"}); err != nil {
		return err
	}
	if err := writeIDs(idsFile, ids); err != nil {
		return err
	}

	// One AwaitJob per job: each returns once its job is completed or
	// buried, and a progress line follows every return. None polls.
	fmt.Fprintln(out, "\nprogress:")
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ended := make(chan error, len(labels))
	for _, label := range labels {
		go func() {
			_, err := eng.AwaitJob(waitCtx, ids[label])
			ended <- err
		}()
	}
	last, settled := "", false
	var waitErr error
	for waiting := len(labels); ; waiting-- {
		line, ok, err := progress(ctx, eng, ids)
		if err != nil {
			return err
		}
		settled = ok
		if line != last {
			fmt.Fprintln(out, "  "+line)
			last = line
		}
		if settled || waitErr != nil || waiting == 0 {
			break
		}
		waitErr = <-ended // a job ended, or the wait ran out
	}
	fmt.Fprintln(out, "\nsummary:")
	printJobs(ctx, out, eng, ids)
	if !settled {
		return fmt.Errorf("the jobs did not all settle within %v: %w", wait, waitErr)
	}
	again := "go run ./examples/quickstart"
	if dir != dirDefault {
		again += " -dir " + dir
	}
	fmt.Fprintf(out, "\nrun it again to see this journal reopened: %s\n", again)
	return nil
}

func register(eng *api.Engine) error {
	if err := api.Handle(eng, "send_email", func(ctx context.Context, d *api.Delivery, in email) error {
		return nil // a real handler would talk to an SMTP server, passing ctx
	}); err != nil {
		return err
	}
	if err := api.Handle(eng, "flaky_report", func(ctx context.Context, d *api.Delivery, in report) error {
		if d.Attempt() == 1 {
			return errors.New("report service unavailable")
		}
		return nil
	}); err != nil {
		return err
	}
	return api.Handle(eng, "import_file", func(ctx context.Context, d *api.Delivery, in report) error {
		return api.Permanent("BAD_INPUT", fmt.Errorf("%s: header row missing", in.Name))
	})
}

// progress returns one line with the status of each job, and whether every
// job has settled (completed or buried).
func progress(ctx context.Context, eng *api.Engine, ids map[string]string) (line string, settled bool, err error) {
	var parts []string
	settled = true
	for _, label := range labels {
		j, err := eng.Status(ctx, ids[label])
		if err != nil {
			return "", false, fmt.Errorf("status of %s: %w", label, err)
		}
		parts = append(parts, fmt.Sprintf("%s=%s", label, j.Status))
		if j.Status != api.JobCompleted && j.Status != api.JobBuried {
			settled = false
		}
	}
	return strings.Join(parts, " "), settled, nil
}

func printJobs(ctx context.Context, out io.Writer, eng *api.Engine, ids map[string]string) {
	fmt.Fprintf(out, "  %-9s %-32s %-10s %-8s %s\n", "JOB", "ID", "STATUS", "ATTEMPTS", "LAST ERROR")
	for _, label := range labels {
		id, ok := ids[label]
		if !ok {
			continue
		}
		j, err := eng.Status(ctx, id)
		if err != nil {
			fmt.Fprintf(out, "  %-9s %-32s %v\n", label, id, err)
			continue
		}
		fmt.Fprintf(out, "  %-9s %-32s %-10s %-8d %s\n", label, id, j.Status, j.Attempts, j.LastError)
	}
}

// writeIDs keeps the job ids of this run beside the journal, for the next
// run to read back.
func writeIDs(path string, ids map[string]string) error {
	var b strings.Builder
	for label, id := range ids {
		fmt.Fprintf(&b, "%s %s\n", label, id)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func readIDs(path string) map[string]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	ids := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if label, id, ok := strings.Cut(sc.Text(), " "); ok {
			ids[label] = id
		}
	}
	return ids
}
