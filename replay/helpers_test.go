package replay

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/journal/record"
)

// t0 is the origin of the test timelines: 10:00:00, as in the JB-4 example.
var t0 = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)

// at returns t0 + d in Unix nanoseconds, the form bodies carry.
func at(d time.Duration) int64 { return t0.Add(d).UnixNano() }

// policy is the default retry policy of DL-4: 3 attempts, exponential
// 1 s, cap 60 s, no jitter.
var policy = record.RetryPolicy{MaxAttempts: 3, BaseNanos: int64(time.Second), MaxNanos: int64(60 * time.Second)}

// tb is what the helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// testBundle is a journal under construction: every record it adds is
// applied to s at once, and kept in recs for refolding.
type testBundle struct {
	t    tb
	s    *State
	recs []record.Record
}

func setup(t tb) *testBundle {
	return &testBundle{t: t, s: New()}
}

// rec returns a record that would be the next one of the journal.
func (b *testBundle) rec(stream string, body record.Body) record.Record {
	return record.Record{Seq: b.s.LastSeq + 1, Stream: stream, Body: body}
}

// add applies body as the next record and returns its seq.
func (b *testBundle) add(stream string, body record.Body) uint64 {
	b.t.Helper()
	r := b.rec(stream, body)
	if err := Apply(b.s, r); err != nil {
		b.t.Fatalf("apply %s: %v", r.Kind(), err)
	}
	b.recs = append(b.recs, r)
	return r.Seq
}

// enqueue adds a job_enqueued for id, on queue "default", available at t0.
func (b *testBundle) enqueue(id string, mods ...func(*record.JobEnqueued)) uint64 {
	b.t.Helper()
	e := &record.JobEnqueued{JobID: id, Handler: "h", Queue: "default", AvailableAt: at(0), Retry: policy}
	for _, m := range mods {
		m(e)
	}
	return b.add(id, e)
}

func unique(key string) func(*record.JobEnqueued) {
	return func(e *record.JobEnqueued) { e.UniqueKey = key }
}

// start opens the next attempt of id and returns its token.
func (b *testBundle) start(id string) uint64 {
	b.t.Helper()
	return b.add(id, b.startBody(id))
}

func (b *testBundle) startBody(id string) *record.AttemptStarted {
	n := int32(1)
	if j, ok := b.s.Jobs[id]; ok {
		n = j.Attempts + 1
	}
	return &record.AttemptStarted{JobID: id, Attempt: n, StartAt: at(0), HardAt: at(time.Minute), NormalAt: at(59 * time.Second)}
}

func out(id string, tok uint64) record.Outcome {
	return record.Outcome{JobID: id, Token: tok, Joined: true}
}

func (b *testBundle) succeed(id string, tok uint64) {
	b.t.Helper()
	b.add(id, &record.AttemptSucceeded{Outcome: out(id, tok)})
}

func (b *testBundle) retry(id string, tok uint64, avail int64) {
	b.t.Helper()
	o := out(id, tok)
	o.Code, o.Error, o.Class = "E", "boom", "retryable"
	b.add(id, &record.AttemptRetryScheduled{Outcome: o, DelayNanos: int64(time.Second), AvailableAt: avail})
}

func (b *testBundle) buryAttempt(id string, tok uint64) {
	b.t.Helper()
	o := out(id, tok)
	o.Code, o.Error, o.Class = "E", "boom", "permanent"
	b.add(id, &record.AttemptBuried{Outcome: o})
}

func (b *testBundle) release(id string, tok uint64, avail int64) {
	b.t.Helper()
	b.add(id, &record.AttemptReleased{Outcome: out(id, tok), AvailableAt: avail})
}

func (b *testBundle) job(id string) *Job {
	b.t.Helper()
	j, ok := b.s.Jobs[id]
	if !ok {
		b.t.Fatalf("job %s is not in the state", id)
	}
	return j
}

// mustRefuse applies r, expects an *ApplyError wrapping want, and checks
// that the state did not move: same digest, same LastSeq.
func mustRefuse(t tb, s *State, r record.Record, want error) {
	t.Helper()
	before, last := Digest(s), s.LastSeq
	err := Apply(s, r)
	if !errors.Is(err, want) {
		t.Fatalf("Apply(%s) = %v, want %v", r.Kind(), err, want)
	}
	var ae *ApplyError
	if !errors.As(err, &ae) {
		t.Fatalf("Apply(%s) = %T, want *ApplyError", r.Kind(), err)
	}
	if ae.Seq != r.Seq || ae.Stream != r.Stream || ae.Kind != r.Kind() {
		t.Fatalf("ApplyError names seq %d stream %q kind %s, want %d %q %s", ae.Seq, ae.Stream, ae.Kind, r.Seq, r.Stream, r.Kind())
	}
	if Digest(s) != before || s.LastSeq != last {
		t.Fatalf("refused %s moved the state (LastSeq %d -> %d)", r.Kind(), last, s.LastSeq)
	}
	checkInvariants(t, s)
}

// checkInvariants checks the cross-references of a State: tokens name
// processing jobs that hold them, unique keys name active jobs that carry
// them, and 0 <= Consumed <= Attempts.
func checkInvariants(t tb, s *State) {
	t.Helper()
	for tok, id := range s.Tokens {
		j, ok := s.Jobs[id]
		if !ok || j.Status != JobProcessing || j.Token != tok {
			t.Fatalf("token %d names job %q, which does not hold it", tok, id)
		}
	}
	for id, j := range s.Jobs {
		if j.ID != id {
			t.Fatalf("job filed under %q has id %q", id, j.ID)
		}
		if (j.Status == JobProcessing) != (j.Token != 0) {
			t.Fatalf("job %s is %s with token %d", id, j.Status, j.Token)
		}
		if j.Token != 0 && s.Tokens[j.Token] != id {
			t.Fatalf("job %s token %d is not in Tokens", id, j.Token)
		}
		if j.Consumed < 0 || j.Consumed > j.Attempts {
			t.Fatalf("job %s consumed %d of %d attempts", id, j.Consumed, j.Attempts)
		}
		if j.Status == JobCompleted {
			t.Fatalf("completed job %s is still in the state", id)
		}
	}
	for key, id := range s.Unique {
		j, ok := s.Jobs[id]
		if !ok || j.UniqueKey != key || (j.Status != JobPending && j.Status != JobProcessing) {
			t.Fatalf("unique key %q names job %q, which is not an active holder", key, id)
		}
	}
	// JB-5: every other active job with a key waits in line for it, in
	// id order, behind a holder.
	lines := make(map[string][]string)
	for _, id := range s.JobIDs() {
		j := s.Jobs[id]
		if j.UniqueKey != "" && (j.Status == JobPending || j.Status == JobProcessing) && s.Unique[j.UniqueKey] != id {
			if _, held := s.Unique[j.UniqueKey]; !held {
				t.Fatalf("job %s is %s with unique key %q, which no job holds", id, j.Status, j.UniqueKey)
			}
			lines[j.UniqueKey] = append(lines[j.UniqueKey], id)
		}
	}
	if !reflect.DeepEqual(lines, s.uniqueWaiting) {
		t.Fatalf("unique key lines %v, want %v", s.uniqueWaiting, lines)
	}
	// byWorkflow holds exactly the step jobs of Jobs.
	steps := 0
	for id, j := range s.Jobs {
		if j.WorkflowID == "" {
			continue
		}
		steps++
		if s.byWorkflow[j.WorkflowID][id] != j {
			t.Fatalf("step job %s of workflow %s is not in its workflow's index", id, j.WorkflowID)
		}
	}
	indexed := 0
	for wf, js := range s.byWorkflow {
		if len(js) == 0 {
			t.Fatalf("workflow %s has an empty job index", wf)
		}
		indexed += len(js)
	}
	if indexed != steps {
		t.Fatalf("%d jobs indexed by workflow, %d step jobs in the state", indexed, steps)
	}
	// byName holds exactly the workflows of Workflows.
	named := 0
	for name, ws := range s.byName {
		if len(ws) == 0 {
			t.Fatalf("name %q has an empty workflow index", name)
		}
		for id, w := range ws {
			if s.Workflows[id] != w || w.Name != name {
				t.Fatalf("workflow %s indexed under %q is not in the state under that name", id, name)
			}
		}
		named += len(ws)
	}
	if named != len(s.Workflows) {
		t.Fatalf("%d workflows indexed by name, %d in the state", named, len(s.Workflows))
	}
}

// jobKinds are the kinds replay folds, workflow kinds excluded.
var jobKinds = []record.Kind{
	record.KindRunStarted, record.KindDebug,
	record.KindJobEnqueued, record.KindAttemptStarted, record.KindAttemptSucceeded,
	record.KindAttemptRetryScheduled, record.KindAttemptBuried, record.KindAttemptReleased,
	record.KindJobBuried, record.KindJobRequeued, record.KindQueuePaused, record.KindQueueResumed,
	record.KindShutdownInitiated, record.KindShutdownForceRequested,
	record.KindShutdownPhaseStarted, record.KindShutdownPhaseFinished, record.KindShutdownReport,
}

// workload draws a valid journal of up to n records: each operation is
// drawn among those the state built so far allows, so every record folds.
// Job ids carry a random prefix so that id order differs from enqueue
// order, and unique keys come from a small set so that they collide.
func workload(t *rapid.T, n int) []record.Record {
	b := &testBundle{t: t, s: New()}
	for range n {
		var pending, processing, buried []string
		for _, id := range b.s.JobIDs() {
			switch b.s.Jobs[id].Status {
			case JobPending:
				pending = append(pending, id)
			case JobProcessing:
				processing = append(processing, id)
			case JobBuried:
				buried = append(buried, id)
			}
		}
		ops := []string{"enqueue", "pause", "resume", "run", "debug"}
		if len(pending) > 0 {
			ops = append(ops, "start", "start", "bury")
		}
		if len(processing) > 0 {
			ops = append(ops, "succeed", "retry", "buryAttempt", "release")
		}
		if len(buried) > 0 {
			ops = append(ops, "requeue")
		}
		if b.s.LastRun() != nil {
			ops = append(ops, "shutdown")
		}
		when := at(time.Duration(rapid.IntRange(0, 100).Draw(t, "at")) * time.Second)
		switch op := rapid.SampledFrom(ops).Draw(t, "op"); op {
		case "enqueue":
			id := fmt.Sprintf("job_%02d_%d", rapid.IntRange(0, 99).Draw(t, "id"), b.s.LastSeq+1)
			key := rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(t, "unique")
			if _, held := b.s.Unique[key]; held {
				key = ""
			}
			b.enqueue(id, unique(key), func(e *record.JobEnqueued) {
				e.Queue = rapid.SampledFrom([]string{"default", "mail"}).Draw(t, "queue")
				e.Priority = rapid.Uint8Range(0, 3).Draw(t, "priority")
				e.AvailableAt = when
			})
		case "start":
			b.start(rapid.SampledFrom(pending).Draw(t, "job"))
		case "bury":
			id := rapid.SampledFrom(pending).Draw(t, "job")
			b.add(id, &record.JobBuried{JobID: id, Code: "OP", Error: "buried by operator"})
		case "succeed", "retry", "buryAttempt", "release":
			id := rapid.SampledFrom(processing).Draw(t, "job")
			tok := b.s.Jobs[id].Token
			switch op {
			case "succeed":
				b.succeed(id, tok)
			case "retry":
				b.retry(id, tok, when)
			case "buryAttempt":
				b.buryAttempt(id, tok)
			default:
				b.release(id, tok, when)
			}
		case "requeue":
			id := rapid.SampledFrom(buried).Draw(t, "job")
			b.add(id, &record.JobRequeued{JobID: id, AvailableAt: when})
		case "pause":
			b.add(record.EngineStream, &record.QueuePaused{Queue: rapid.SampledFrom([]string{"default", "mail"}).Draw(t, "queue")})
		case "resume":
			b.add(record.EngineStream, &record.QueueResumed{Queue: rapid.SampledFrom([]string{"default", "mail"}).Draw(t, "queue")})
		case "run":
			b.add(record.EngineStream, &record.RunStarted{RunID: fmt.Sprintf("run_%d", b.s.LastSeq+1), Version: "test", At: when})
		case "debug":
			b.add(record.EngineStream, &record.Debug{Subject: "x", Code: "C", Message: "m"})
		case "shutdown":
			switch rapid.IntRange(0, 4).Draw(t, "phase") {
			case 0:
				b.add(record.EngineStream, &record.ShutdownInitiated{Trigger: "signal", StartAt: when, TotalNanos: int64(time.Second)})
			case 1:
				b.add(record.EngineStream, &record.ShutdownForceRequested{Trigger: "signal"})
			case 2:
				b.add(record.EngineStream, &record.ShutdownPhaseStarted{Phase: 1, Name: "admission"})
			case 3:
				b.add(record.EngineStream, &record.ShutdownPhaseFinished{Phase: 1, Name: "admission", Graceful: "ok"})
			default:
				if b.s.LastRun().Shutdown.Report == nil {
					b.add(record.EngineStream, &record.ShutdownReport{Completion: "clean", Dependencies: []uint8{1, 2, 3}})
				}
			}
		}
	}
	return b.recs
}

// fold folds recs into a fresh state, failing the test on any refusal.
func fold(t tb, recs []record.Record) *State {
	t.Helper()
	s := New()
	if err := Fold(s, recs...); err != nil {
		t.Fatalf("fold: %v", err)
	}
	return s
}

// refusal is a transition replay must refuse: prepare builds the journal
// on a fresh bundle and returns the record to refuse.
type refusal struct {
	name    string
	prepare func(b *testBundle) record.Record
}

// refuseAll checks each refusal in a subtest: Apply refuses its record
// with ErrImpossible, changing nothing, and the journal is still usable:
// the same seq then takes a valid record.
func refuseAll(t *testing.T, tests []refusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			r := tt.prepare(b)
			mustRefuse(t, b.s, r, ErrImpossible)
			b.add(record.EngineStream, &record.Debug{Subject: "after"})
		})
	}
}
