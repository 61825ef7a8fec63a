package qctl_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
	"github.com/quire-dev/quire/replay"
)

// t0 is the instant the fixture's clock starts at.
var t0 = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// fixtureNow is the instant the golden outputs measure against.
var fixtureNow = t0.Add(time.Hour + 5*time.Second)

// Fixed ids: the fixture needs no entropy at all.
const (
	jobOK       = "job_01KE4Z6R0000000000000OKA"
	jobRetry    = "job_01KE4Z6R000000000000RETB"
	jobBuried   = "job_01KE4Z6R000000000000BURC"
	jobDelayed  = "job_01KE4Z6R000000000000DLYD"
	jobPaused   = "job_01KE4Z6R000000000000PAUE"
	jobLost     = "job_01KE4Z6R000000000000LOSF"
	jobRunning  = "job_01KE4Z6R000000000000RUNG"
	stepFetch   = "job_01KE4Z6R000000000000STP1"
	stepSync    = "job_01KE4Z6R000000000000STP3"
	stepHello   = "job_01KE4Z6R000000000000STP4"
	stepReport  = "job_01KE4Z6R000000000000STP5"
	wfImport    = "wf_01KE4Z6R0000000000000WF1"
	wfApproval  = "wf_01KE4Z6R0000000000000WF2"
	wfNightly   = "wf_01KE4Z6R0000000000000WF3"
	wfHello     = "wf_01KE4Z6R0000000000000WF4"
	wfReport    = "wf_01KE4Z6R0000000000000WF5"
	fixtureDir  = "db"
	fixtureEID  = "01KE4Z6R00000000000ENGINE01"
	engine      = record.EngineStream
	deliveryTTL = 30 * time.Second
)

// fx builds a journal record by record under a manual clock.
type fx struct {
	t   testing.TB
	clk *clocktest.Clock
	j   *journal.Journal
	// lastFail is each job's last failure (code, error): the engine's
	// terminal-index summary of a job that succeeds after a failure
	// keeps it (replay.Summarize).
	lastFail map[string][2]string
}

func newFx(t testing.TB, fs vfs.FS, dir string) *fx {
	t.Helper()
	clk := clocktest.New(t0)
	j, err := journal.Open(dir, journal.Options{FS: fs, Clock: clk, EngineID: fixtureEID})
	if err != nil {
		t.Fatalf("open fixture journal: %v", err)
	}
	return &fx{t: t, clk: clk, j: j, lastFail: map[string][2]string{}}
}

// at moves the clock to t0+d.
func (f *fx) at(d time.Duration) { f.clk.Set(t0.Add(d)) }

func (f *fx) now() int64 { return f.clk.Now().UnixNano() }

func (f *fx) next() uint64 { return f.j.LastSeq() + 1 }

func (f *fx) append(idx []journal.IndexEntry, recs ...record.Record) {
	f.t.Helper()
	if _, err := f.j.AppendIndexed(context.Background(), idx, recs...); err != nil {
		f.t.Fatalf("append: %v", err)
	}
}

func (f *fx) close() {
	f.t.Helper()
	if err := f.j.Close(); err != nil {
		f.t.Fatalf("close fixture journal: %v", err)
	}
}

func rec(stream string, b record.Body) record.Record { return record.Record{Stream: stream, Body: b} }

func value(t testing.TB, v any) []byte {
	t.Helper()
	b, err := record.EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var defaultRetry = record.RetryPolicy{MaxAttempts: 3, Backoff: record.BackoffExponential, BaseNanos: int64(time.Second), MaxNanos: int64(time.Minute)}

func (f *fx) enqueue(stream, id, handler, queue string, prio uint8, delay time.Duration, mod func(*record.JobEnqueued)) record.Record {
	b := &record.JobEnqueued{
		JobID: id, Handler: handler, Queue: queue, Priority: prio, AvailableAt: f.now() + int64(delay),
		Retry: defaultRetry, DeliveryTimeoutNanos: int64(deliveryTTL), Payload: value(f.t, map[string]any{"job": handler}),
	}
	if mod != nil {
		mod(b)
	}
	return rec(stream, b)
}

// start opens attempt n of id now and returns its token (the seq it gets
// when appended alone).
func (f *fx) start(stream, id string, n int32) uint64 {
	tok := f.next()
	s := f.now()
	h := s + int64(deliveryTTL)
	f.append(nil, rec(stream, &record.AttemptStarted{JobID: id, Attempt: n, StartAt: s, HardAt: h, NormalAt: h - int64(time.Second)}))
	return tok
}

// succeeded is the settlement and terminal-index entry of a successful
// attempt, appended as the first record of its append.
func (f *fx) succeeded(stream, id, handler, queue string, prio uint8, tok uint64, attempts int32, wf string, output any) (record.Record, journal.IndexEntry) {
	f.t.Helper()
	var out []byte
	if output != nil {
		out = value(f.t, output)
	}
	last := f.lastFail[id]
	sum, err := replay.EncodeSummary(replay.JobSummary{
		ID: id, Handler: handler, Queue: queue, Priority: prio, Status: replay.JobCompleted,
		Attempts: attempts, Consumed: attempts, LastCode: last[0], LastError: last[1],
		FinishedAt: f.now(), WorkflowID: wf, Seq: f.next(),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return rec(stream, &record.AttemptSucceeded{Outcome: record.Outcome{JobID: id, Token: tok, Joined: true}, Output: out}),
		journal.IndexEntry{ID: id, Value: sum}
}

func (f *fx) retry(stream, id string, tok uint64, code, msg string, delay time.Duration) record.Record {
	f.lastFail[id] = [2]string{code, msg}
	return rec(stream, &record.AttemptRetryScheduled{
		Outcome:    record.Outcome{JobID: id, Token: tok, Code: code, Class: "retryable", Error: msg, Joined: true},
		DelayNanos: int64(delay), AvailableAt: f.now() + int64(delay),
	})
}

// buildFixture writes the golden fixture: three runs of an engine with
// jobs that succeed, fail then succeed, get buried, wait on a delay or a
// paused queue, are lost in a crash and recovered, and are still running;
// workflows that wait on a Delay step, on a signal, fail by deadline (with
// their on-deadline handler), complete, and are paused; a snapshot; and a
// graceful shutdown report. Everything is fixed: ids, instants, payloads.
func buildFixture(t testing.TB, fs vfs.FS, dir string) {
	t.Helper()
	f := newFx(t, fs, dir)
	defer f.close()
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

	// Run 1.
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: f.now()}))
	f.at(sec(1))
	f.append(nil, f.enqueue(jobOK, jobOK, "send_email", "default", 0, 0, func(b *record.JobEnqueued) {
		b.Payload = value(t, map[string]any{"to": "ann@example.com", "subject": "welcome"})
	}))
	f.append(nil, f.enqueue(jobRetry, jobRetry, "resize_image", "images", 1, 0, nil))
	f.append(nil, f.enqueue(jobBuried, jobBuried, "charge_card", "billing", 2, 0, func(b *record.JobEnqueued) {
		b.Retry.MaxAttempts = 2
		b.Payload = value(t, map[string]any{"amount": 1200, "currency": "EUR"})
	}))
	f.append(nil, f.enqueue(jobDelayed, jobDelayed, "send_digest", "default", 0, 2*time.Hour, func(b *record.JobEnqueued) {
		b.UniqueKey = "send_digest:4f1c"
	}))
	f.at(sec(2))
	okTok := f.start(jobOK, jobOK, 1)
	retryTok := f.start(jobRetry, jobRetry, 1)
	buryTok := f.start(jobBuried, jobBuried, 1)
	f.at(sec(2.5))
	r, idx := f.succeeded(jobOK, jobOK, "send_email", "default", 0, okTok, 1, "", nil)
	f.append([]journal.IndexEntry{idx}, r)
	f.at(sec(3))
	f.append(nil, f.retry(jobRetry, jobRetry, retryTok, "HANDLER_ERROR", "image store: connection reset", time.Second))
	f.append(nil, f.retry(jobBuried, jobBuried, buryTok, "CARD_DECLINED", "card declined", time.Second))
	f.at(sec(4))
	retryTok = f.start(jobRetry, jobRetry, 2)
	buryTok = f.start(jobBuried, jobBuried, 2)
	f.at(sec(4.2))
	r, idx = f.succeeded(jobRetry, jobRetry, "resize_image", "images", 1, retryTok, 2, "", map[string]any{"width": 640})
	f.append([]journal.IndexEntry{idx}, r)
	f.at(sec(4.5))
	f.append(nil, rec(jobBuried, &record.AttemptBuried{Outcome: record.Outcome{
		JobID: jobBuried, Token: buryTok, Code: "CARD_DECLINED", Class: "permanent", Error: "card declined: insufficient funds", Joined: true,
	}}))
	f.at(sec(5))
	f.append(nil, rec(engine, &record.QueuePaused{Queue: "mail"}))
	f.append(nil, f.enqueue(jobPaused, jobPaused, "send_newsletter", "mail", 0, 0, nil))
	f.at(sec(6))
	f.append(nil, f.enqueue(jobLost, jobLost, "export_report", "default", 0, 0, nil))
	f.start(jobLost, jobLost, 1)
	// A snapshot of the state here (an open attempt included), as the
	// engine writes them.
	writeSnapshot(t, f.j, nil)

	// Run 1 dies without a shutdown; run 2 recovers the open attempt.
	f.at(sec(60))
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R2", Version: "0.1.0", At: f.now(), Recovered: 1}))
	f.at(sec(61))
	lostTok := f.start(jobLost, jobLost, 2)
	f.at(sec(62))
	r, idx = f.succeeded(jobLost, jobLost, "export_report", "default", 0, lostTok, 2, "", nil)
	f.append([]journal.IndexEntry{idx}, r)

	// data_import: a step, then a Delay step that is still pending.
	f.at(sec(70))
	f.append(nil,
		rec(wfImport, &record.WorkflowStarted{WorkflowID: wfImport, Name: "data_import", DefinitionHash: "sha256:9a1f", Steps: 3, At: f.now(),
			State: value(t, map[string]any{"source": "s3://bucket/x"}), DeadlineAt: f.now() + int64(24*time.Hour)}),
		f.enqueue(wfImport, stepFetch, "fetch", "default", 0, 0, func(b *record.JobEnqueued) { b.WorkflowID = wfImport }))
	f.at(sec(71))
	fetchTok := f.start(wfImport, stepFetch, 1)
	f.at(sec(75))
	r, idx = f.succeeded(wfImport, stepFetch, "fetch", "default", 0, fetchTok, 1, wfImport, map[string]any{"rows": 120})
	f.append([]journal.IndexEntry{idx}, r,
		rec(wfImport, &record.StepCompleted{WorkflowID: wfImport, Step: 0, Next: 1, Output: value(t, map[string]any{"rows": 120})}),
		rec(wfImport, &record.StepDelayed{WorkflowID: wfImport, Step: 1, FireAt: f.now() + int64(time.Hour)}))

	// approval: waits for a signal, past its deadline.
	f.at(sec(80))
	f.append(nil,
		rec(wfApproval, &record.WorkflowStarted{WorkflowID: wfApproval, Name: "approval", DefinitionHash: "sha256:77b0", Steps: 2, At: f.now(),
			State: value(t, map[string]any{"doc": "contract-7"}), DeadlineAt: f.now() + int64(30*time.Minute)}),
		rec(wfApproval, &record.WorkflowWaiting{WorkflowID: wfApproval, Step: 0, Status: "waiting_for_signal", Signals: []string{"approve"}}))

	// nightly_sync: its step retries, then the deadline check fails it.
	f.at(sec(90))
	f.append(nil,
		rec(wfNightly, &record.WorkflowStarted{WorkflowID: wfNightly, Name: "nightly_sync", DefinitionHash: "sha256:c3d2", Steps: 1, At: f.now(),
			State: value(t, map[string]any{"since": "2026-01-04"}), DeadlineAt: f.now() + int64(time.Minute)}),
		f.enqueue(wfNightly, stepSync, "sync", "default", 0, 0, func(b *record.JobEnqueued) { b.WorkflowID = wfNightly }))
	f.at(sec(91))
	syncTok := f.start(wfNightly, stepSync, 1)
	f.at(sec(100))
	f.append(nil, f.retry(wfNightly, stepSync, syncTok, "HANDLER_ERROR", "upstream timeout", time.Minute))
	f.at(sec(150))
	expiry := f.next() + 1
	f.append(nil,
		rec(wfNightly, &record.WorkflowFailed{WorkflowID: wfNightly, Step: 0, Error: "Deadline exceeded", At: f.now()}),
		rec(wfNightly, &record.WorkflowDeadlineExceeded{WorkflowID: wfNightly, DeadlineAt: t0.Add(sec(150)).UnixNano(), DetectedAt: f.now(),
			DetectedBy: "check", Handler: "notify_ops"}),
		rec(wfNightly, &record.JobBuried{JobID: stepSync, Error: "Deadline exceeded"}))
	f.append(nil, rec(wfNightly, &record.DeadlineHandlerStarted{WorkflowID: wfNightly, Handler: "notify_ops", Expiry: expiry}))
	f.at(sec(151))
	f.append(nil,
		rec(wfNightly, &record.DeadlineHandlerFinished{WorkflowID: wfNightly, Expiry: expiry, Outcome: "failed"}),
		rec(engine, &record.Debug{Subject: wfNightly, Code: "DEADLINE_HANDLER_FAILED", Message: "smtp down"}))

	// hello: one step, completed; dispatched with an idempotency key.
	f.at(sec(200))
	helloStart := f.now()
	idem, err := replay.EncodeIdempotent(replay.Idempotent{WorkflowID: wfHello, Name: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	f.append([]journal.IndexEntry{{ID: replay.IdempotencyPrefix + "hello-2026-01-05", Value: idem}},
		rec(wfHello, &record.WorkflowStarted{WorkflowID: wfHello, Name: "hello", DefinitionHash: "sha256:0b1e", Steps: 1, At: f.now(),
			State: value(t, map[string]any{}), IdempotencyKey: "hello-2026-01-05"}),
		f.enqueue(wfHello, stepHello, "greet", "default", 0, 0, func(b *record.JobEnqueued) { b.WorkflowID = wfHello }))
	f.at(sec(201))
	helloTok := f.start(wfHello, stepHello, 1)
	f.at(sec(202))
	r, idx = f.succeeded(wfHello, stepHello, "greet", "default", 0, helloTok, 1, wfHello, map[string]any{"greeting": "hi"})
	wsum, err := replay.EncodeWorkflowSummary(replay.WorkflowSummary{
		ID: wfHello, Name: "hello", DefinitionHash: "sha256:0b1e", Status: replay.WorkflowCompleted, Step: 1, Steps: 1,
		State: value(t, map[string]any{"greeting": "hi"}), StartedAt: helloStart, FinishedAt: f.now(),
		IdempotencyKey: "hello-2026-01-05", Seq: f.next() + 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.append([]journal.IndexEntry{idx, {ID: wfHello, Value: wsum}}, r,
		rec(wfHello, &record.StepCompleted{WorkflowID: wfHello, Step: 0, Next: 1, Output: value(t, map[string]any{"greeting": "hi"})}),
		rec(wfHello, &record.WorkflowCompleted{WorkflowID: wfHello}))

	// report: paused with its step job pending.
	f.at(sec(210))
	f.append(nil,
		rec(wfReport, &record.WorkflowStarted{WorkflowID: wfReport, Name: "report", DefinitionHash: "sha256:5e5e", Steps: 1, At: f.now(),
			State: value(t, map[string]any{"month": "2025-12"}), DeadlineAt: f.now() + int64(2*time.Hour)}),
		f.enqueue(wfReport, stepReport, "render", "default", 0, 0, func(b *record.JobEnqueued) { b.WorkflowID = wfReport }))
	f.at(sec(211))
	f.append(nil, rec(wfReport, &record.WorkflowPaused{WorkflowID: wfReport}))

	// Run 2 shuts down gracefully.
	f.at(sec(300))
	start := f.now()
	f.append(nil, rec(engine, &record.ShutdownInitiated{Trigger: "signal", StartAt: start, TotalNanos: int64(30 * time.Second),
		GracefulAt: start + int64(28*time.Second), HardAt: start + int64(30*time.Second)}))
	phases := []string{"close_admission", "drain", "force", "close_evidence", "release_resources", "publish_report"}
	forced := []string{"not_attempted", "not_attempted", "not_attempted", "not_attempted", "unavailable", "not_attempted"}
	for i, name := range phases {
		f.at(sec(300) + time.Duration(i)*200*time.Millisecond)
		f.append(nil, rec(engine, &record.ShutdownPhaseStarted{Phase: int8(i + 1), Name: name}))
		f.at(sec(300) + time.Duration(i)*200*time.Millisecond + 150*time.Millisecond)
		fin := &record.ShutdownPhaseFinished{Phase: int8(i + 1), Name: name, Graceful: "completed", Forced: forced[i]}
		if name == "publish_report" {
			fin.Completion = "graceful_completed" // SD-11: phase 6 records the report's completion
		}
		f.append(nil, rec(engine, fin))
	}
	f.at(sec(301.2))
	f.append(nil, rec(engine, &record.ShutdownReport{
		Completion: "graceful_completed", Trigger: "signal", InitiatedAt: start, BudgetNanos: int64(30 * time.Second),
		ElapsedNanos: int64(1200 * time.Millisecond), CoordinatorAccounted: true, CoordinatorComplete: true,
		RuntimeJoined: true, DrainReconciled: true, CloseReconciled: true, Dependencies: []uint8{0b1111, 0, 0},
		ActionPhases:     []int8{1, 2, 3, 4, 5},
		ActionComponents: []string{"admission", "drain", "drain", "close", "owned-resources"},
		ActionGraceful:   []string{"completed", "completed", "completed", "completed", "completed"},
		ActionForced:     []string{"not_attempted", "not_attempted", "not_attempted", "not_attempted", "unavailable"},
		Drained:          0,
	}))

	// Run 3 is running: one attempt open.
	f.at(time.Hour)
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R3", Version: "0.1.0", At: f.now()}))
	f.at(time.Hour + sec(1))
	f.append(nil, f.enqueue(jobRunning, jobRunning, "rebuild_index", "default", 3, 0, nil))
	f.at(time.Hour + sec(2))
	f.start(jobRunning, jobRunning, 1)
}

// fixture returns a MemFS holding the golden fixture under fixtureDir.
func fixture(t testing.TB) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	buildFixture(t, fs, fixtureDir)
	return fs
}

// run runs qctl with args on fs at fixtureNow.
func run(t testing.TB, fs vfs.FS, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = qctl.Main(context.Background(), args, qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow})
	return code, out.String(), errb.String()
}
