package qctl_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// ExampleMain runs qctl as cmd/qctl does, with the process's streams and
// clock replaced: Env gives Main its output, error stream, file system and
// the instant remaining times are measured against. The journal here is
// one that an engine would have written (one run, one pending job), on an
// in-memory file system; a program reading a real one leaves FS nil. Main
// returns the exit code rather than exiting: 0 for the jobs listing, 3
// for a show of an id the journal does not hold, with the reason on Stderr.
func ExampleMain() {
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	fs := vfs.NewMem()
	j, err := journal.Open("data", journal.Options{FS: fs, Clock: clocktest.New(at), EngineID: "01KE4Z6R00000000000ENGINE01"})
	if err != nil {
		fmt.Println(err)
		return
	}
	payload, _ := record.EncodeValue(map[string]any{"to": "ann@example.com"})
	_, err = j.Append(context.Background(),
		record.Record{Stream: record.EngineStream, Body: &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: at.UnixNano()}},
		record.Record{Stream: "job_01KE4Z6R0000000000000OKA", Body: &record.JobEnqueued{
			JobID: "job_01KE4Z6R0000000000000OKA", Handler: "send_email", Queue: "mail", AvailableAt: at.Add(time.Minute).UnixNano(),
			Retry: record.RetryPolicy{MaxAttempts: 3, Backoff: record.BackoffExponential, BaseNanos: int64(time.Second), MaxNanos: int64(time.Minute)}, Payload: payload,
		}})
	if err == nil {
		err = j.Close()
	}
	if err != nil {
		fmt.Println(err)
		return
	}

	var stdout, stderr bytes.Buffer
	env := qctl.Env{Stdout: &stdout, Stderr: &stderr, FS: fs, Now: at}
	code := qctl.Main(context.Background(), []string{"-d", "data", "jobs"}, env)
	fmt.Printf("exit %d\n%s", code, stdout.String())
	code = qctl.Main(context.Background(), []string{"-d", "data", "show", "job_01KE4Z6R0000000000000XYZ"}, env)
	fmt.Printf("exit %d (ExitNotFound: %t)\n%s", code, code == qctl.ExitNotFound, stderr.String())
	// Output:
	// exit 0
	// ID                            STATUS   QUEUE  HANDLER     PRI  ATTEMPTS  AVAILABLE  WORKFLOW  ERROR
	// job_01KE4Z6R0000000000000OKA  pending  mail   send_email  low  0/3       in 1m0s    -         -
	// exit 3 (ExitNotFound: true)
	// qctl: data holds no job or workflow job_01KE4Z6R0000000000000XYZ
}
