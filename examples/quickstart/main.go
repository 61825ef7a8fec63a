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

func main() {
	dir := flag.String("dir", "quickstart-data", "journal directory")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx := context.Background()
	eng, err := api.Open(ctx, api.Options{Dir: dir, Workers: 4})
	if err != nil {
		return err
	}
	defer eng.Close(ctx)

	st := eng.Stats()
	idsFile := dir + ".jobs"
	previous := readIDs(idsFile)
	fmt.Printf("journal %s: %d records replayed at open (snapshot at seq %d), run %s\n",
		dir, st.RecordsReplayed, st.SnapshotSeq, st.RunID)

	if err := register(eng); err != nil {
		return err
	}
	if len(previous) > 0 {
		fmt.Printf("\nthe journal survived: %d jobs from the previous run, read back from it:\n", len(previous))
		printJobs(ctx, eng, previous)
		fmt.Println()
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
		fmt.Printf("enqueued %-9s %s\n", label, id)
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
	writeIDs(idsFile, ids)

	fmt.Println("\nprogress:")
	last := ""
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		line, done := progress(ctx, eng, ids)
		if line != last {
			fmt.Println("  " + line)
			last = line
		}
		if done {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println("\nsummary:")
	printJobs(ctx, eng, ids)
	fmt.Printf("\nrun it again to see this journal reopened: go run ./examples/quickstart\n")
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

func progress(ctx context.Context, eng *api.Engine, ids map[string]string) (string, bool) {
	var parts []string
	done := true
	for _, label := range []string{"email", "flaky", "delayed", "poison"} {
		j, err := eng.Status(ctx, ids[label])
		if err != nil {
			return err.Error(), true
		}
		parts = append(parts, fmt.Sprintf("%s=%s", label, j.Status))
		if j.Status != api.JobCompleted && j.Status != api.JobBuried {
			done = false
		}
	}
	return strings.Join(parts, " "), done
}

func printJobs(ctx context.Context, eng *api.Engine, ids map[string]string) {
	fmt.Printf("  %-9s %-32s %-10s %-8s %s\n", "JOB", "ID", "STATUS", "ATTEMPTS", "LAST ERROR")
	for _, label := range []string{"email", "flaky", "delayed", "poison"} {
		id, ok := ids[label]
		if !ok {
			continue
		}
		j, err := eng.Status(ctx, id)
		if err != nil {
			fmt.Printf("  %-9s %-32s %v\n", label, id, err)
			continue
		}
		fmt.Printf("  %-9s %-32s %-10s %-8d %s\n", label, id, j.Status, j.Attempts, j.LastError)
	}
}

func writeIDs(path string, ids map[string]string) {
	var b strings.Builder
	for label, id := range ids {
		fmt.Fprintf(&b, "%s %s\n", label, id)
	}
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
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
