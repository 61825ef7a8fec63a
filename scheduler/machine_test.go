package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

func TestJB1_EnqueueDecidesOneJobEnqueued(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	r := req("send_email")
	r.Queue, r.Priority, r.Delay, r.DeliveryTimeout = "mail", 2, 5*time.Second, time.Minute
	id := b.enqueue(t0, r)
	if id != "job_0001" {
		t.Fatalf("id = %s", id)
	}
	rec := b.recs[0]
	e := rec.Body.(*record.JobEnqueued)
	if rec.Seq != 1 || rec.Stream != id {
		t.Fatalf("record seq %d stream %q", rec.Seq, rec.Stream)
	}
	if e.AvailableAt != ts(5*time.Second).UnixNano() || e.Queue != "mail" || e.Priority != 2 ||
		e.Handler != "send_email" || e.DeliveryTimeoutNanos != int64(time.Minute) || e.Retry.MaxAttempts != 3 || e.UniqueKey != "" {
		t.Fatalf("job_enqueued = %+v", e)
	}
	if j := b.job(id); j.Status != replay.JobPending || j.EnqueueSeq != 1 {
		t.Fatalf("job = %+v", j)
	}
	b.replayed()
	// A step job lives on its workflow's stream.
	w := setup(t, []record.Record{{Seq: 1, Stream: "wf_1", Body: &record.WorkflowStarted{WorkflowID: "wf_1", Name: "wf", Steps: 5}}})
	s := req("step")
	s.WorkflowID, s.Step, s.Branch = "wf_1", 3, 1
	sid := w.enqueue(t0, s)
	if rec := w.recs[0]; rec.Stream != "wf_1" || rec.Body.(*record.JobEnqueued).Step != 3 {
		t.Fatalf("step job record = %+v", rec)
	}
	if j := w.job(sid); j.Stream != "wf_1" || j.WorkflowID != "wf_1" || j.Branch != 1 {
		t.Fatalf("step job = %+v", j)
	}
	w.replayed()
}

func TestRL1_DispatchStartsNothingBeforeRecover(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.enqueue(t0, req("h"))
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("started %v before recovery", ids(st))
	}
	d := b.recover(t0)
	wantKinds(t, d, record.KindRunStarted)
	if rs := d.Records[0].Body.(*record.RunStarted); rs.RunID != "run_test" || rs.Recovered != 0 || rs.At != t0.UnixNano() {
		t.Fatalf("run_started = %+v", rs)
	}
	only(t, b.dispatch(t0), "job_0001")
	b.replayed()
}

func TestJB2_StartOrderPriorityThenEnqueueSeq(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, workers(10))
	b.recover(t0)
	prio := map[string]uint8{}
	for _, p := range []uint8{0, 3, 1, 2, 3, 0, 1} { // Low, Urgent, Normal, High, Urgent, Low, Normal
		r := req("h")
		r.Priority = p
		prio[b.enqueue(t0, r)] = p
	}
	got := ids(b.dispatch(t0))
	want := []string{"job_0002", "job_0005", "job_0004", "job_0003", "job_0007", "job_0001", "job_0006"}
	if !slices.Equal(got, want) {
		t.Fatalf("start order %v, want %v (priority %v)", got, want, prio)
	}
	b.replayed()
}

func TestJB2_QueuesServedInConfiguredOrderThenName(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, workers(1), func(c *Config) { c.QueueOrder = []string{"zeta", "missing", "zeta"} })
	b.recover(t0)
	for _, q := range []string{"beta", "alpha", "zeta"} {
		r := req("h")
		r.Queue = q
		if q != "zeta" {
			r.Priority = 3 // priority orders within a queue, never across
		}
		b.enqueue(t0, r)
	}
	var order []string
	for range 3 {
		st := b.dispatch(t0)
		if len(st) != 1 {
			t.Fatalf("one worker started %v", ids(st))
		}
		order = append(order, st[0].Job.Queue)
		if more := b.dispatch(t0); len(more) != 0 {
			t.Fatalf("a busy worker started %v", ids(more))
		}
		b.settle(t0, Result{Token: st[0].Token})
	}
	if want := []string{"zeta", "alpha", "beta"}; !slices.Equal(order, want) {
		t.Fatalf("queues served %v, want %v", order, want)
	}
	b.replayed()
}

func TestJB2_RL9_DelayedJobsStartAtTheirInstantInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, workers(10))
	b.recover(t0)
	delays := []time.Duration{5 * time.Second, 3 * time.Second, 3 * time.Second, 0, time.Hour}
	for _, d := range delays {
		r := req("h")
		r.Delay = d
		b.enqueue(t0, r)
	}
	if next, ok := b.m.NextTimer(); !ok || !next.Equal(t0) {
		t.Fatalf("NextTimer = %v %v, want t0", next, ok)
	}
	only(t, b.dispatch(t0), "job_0004")
	if next, ok := b.m.NextTimer(); !ok || !next.Equal(ts(3*time.Second)) {
		t.Fatalf("NextTimer = %v, want t0+3s", next)
	}
	if st := b.dispatch(ts(3*time.Second - 1)); len(st) != 0 {
		t.Fatalf("started %v one nanosecond early", ids(st))
	}
	// Driven by its timer, the machine starts delayed jobs in (instant,
	// seq) order and never early.
	var order []string
	for i := 0; i < 2; i++ {
		next, ok := b.m.NextTimer()
		if !ok {
			t.Fatal("no timer armed")
		}
		for _, st := range b.dispatch(next) {
			order = append(order, st.Job.ID)
		}
	}
	if want := []string{"job_0002", "job_0003", "job_0001"}; !slices.Equal(order, want) {
		t.Fatalf("delayed start order %v, want %v", order, want)
	}
	// After a forward jump, every due job starts at once, in JB-2 order.
	if next, _ := b.m.NextTimer(); !next.Equal(ts(time.Hour)) {
		t.Fatalf("NextTimer = %v, want t0+1h", next)
	}
	only(t, b.dispatch(ts(48*time.Hour)), "job_0005")
	if _, ok := b.m.NextTimer(); ok {
		t.Fatal("a timer is armed with nothing delayed")
	}
	b.replayed()
}

func TestJB2_WorkersBoundStarts(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, workers(2))
	b.recover(t0)
	for range 5 {
		b.enqueue(t0, req("h"))
	}
	st := b.dispatch(t0)
	if len(st) != 2 || b.m.Inflight() != 2 {
		t.Fatalf("started %v, inflight %d", ids(st), b.m.Inflight())
	}
	if more := b.dispatch(t0); len(more) != 0 {
		t.Fatalf("started %v with no free slot", ids(more))
	}
	b.settle(t0, Result{Token: st[0].Token})
	if b.m.Inflight() != 1 {
		t.Fatalf("inflight %d after a settlement", b.m.Inflight())
	}
	only(t, b.dispatch(t0), "job_0003")
	b.replayed()
}

func TestDL7_StartBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	r := req("h")
	r.DeliveryTimeout = 2 * time.Second
	b.enqueue(t0, r)
	b.enqueue(t0, req("h"))
	st := b.dispatch(ts(time.Second))
	// Own timeout 2 s: H = S+2s, R = 0.5 s. Engine default 30 s: R = 1 s.
	if !st[0].H.Equal(ts(3*time.Second)) || !st[0].P.Equal(ts(2500*time.Millisecond)) {
		t.Fatalf("own timeout: H %v P %v", st[0].H.Sub(t0), st[0].P.Sub(t0))
	}
	if !st[1].H.Equal(ts(31*time.Second)) || !st[1].P.Equal(ts(30*time.Second)) {
		t.Fatalf("default timeout: H %v P %v", st[1].H.Sub(t0), st[1].P.Sub(t0))
	}
	b.replayed()
}

func TestJB3_SuccessCompletesAndIndexesSummary(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	id := b.enqueue(t0, req("h"))
	st := only(t, b.dispatch(t0), id)
	d := b.settle(ts(time.Second), Result{Token: st.Token, Output: []byte{0xc3}, Joined: true})
	wantKinds(t, d, record.KindAttemptSucceeded)
	s := d.Records[0].Body.(*record.AttemptSucceeded)
	if s.Token != st.Token || s.JobID != id || !s.Joined || string(s.Output) != "\xc3" {
		t.Fatalf("attempt_succeeded = %+v", s)
	}
	if len(d.Index) != 1 || d.Index[0].ID != id {
		t.Fatalf("index = %+v", d.Index)
	}
	sum, err := replay.DecodeSummary(d.Index[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != replay.JobCompleted || sum.ID != id || sum.Attempts != 1 || sum.Consumed != 1 ||
		sum.Seq != d.Records[0].Seq || sum.FinishedAt != ts(time.Second).UnixNano() || sum.Handler != "h" {
		t.Fatalf("summary = %+v", sum)
	}
	if _, ok := b.m.State().Jobs[id]; ok || b.m.State().Completed != 1 || b.m.Inflight() != 0 {
		t.Fatalf("completed job still in state, or Completed %d", b.m.State().Completed)
	}
	if more := b.dispatch(ts(time.Hour)); len(more) != 0 {
		t.Fatalf("a completed job started again: %v", ids(more))
	}
	b.replayed()
}

// TestJB4_WorkedExample follows JB-4 to the second: defaults, attempt 1
// fails at 10:00:00, attempt 2 at 10:00:03, attempt 3 buries.
func TestJB4_WorkedExample(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(ts(-time.Second))
	id := b.enqueue(ts(-time.Second), req("h"))
	failAt := func(startAt, failAt time.Duration, attempt int32) Decision {
		t.Helper()
		st := only(t, b.dispatch(ts(startAt)), id)
		if st.Job.Attempts != attempt {
			t.Fatalf("attempt %d, want %d", st.Job.Attempts, attempt)
		}
		return b.settle(ts(failAt), Result{Token: st.Token, Failure: fail(Retryable)})
	}
	d := failAt(-time.Second, 0, 1)
	wantKinds(t, d, record.KindAttemptRetryScheduled)
	if r := d.Records[0].Body.(*record.AttemptRetryScheduled); r.DelayNanos != int64(time.Second) || r.AvailableAt != ts(time.Second).UnixNano() ||
		r.Error != "boom" || r.Code != "E_BOOM" || r.Class != "retryable" {
		t.Fatalf("after attempt 1: %+v", r)
	}
	if j := b.job(id); j.Status != replay.JobPending || j.Consumed != 1 {
		t.Fatalf("after attempt 1: %+v", j)
	}
	if st := b.dispatch(ts(time.Second - 1)); len(st) != 0 {
		t.Fatal("attempt 2 started before 10:00:01")
	}
	d = failAt(time.Second, 3*time.Second, 2)
	if r := d.Records[0].Body.(*record.AttemptRetryScheduled); r.DelayNanos != int64(2*time.Second) || r.AvailableAt != ts(5*time.Second).UnixNano() {
		t.Fatalf("after attempt 2: %+v", r)
	}
	if st := b.dispatch(ts(5*time.Second - 1)); len(st) != 0 {
		t.Fatal("attempt 3 started before 10:00:05")
	}
	d = failAt(5*time.Second, 6*time.Second, 3)
	wantKinds(t, d, record.KindAttemptBuried)
	if r := d.Records[0].Body.(*record.AttemptBuried); r.Error != "boom" || r.Code != "E_BOOM" {
		t.Fatalf("attempt_buried = %+v", r)
	}
	if j := b.job(id); j.Status != replay.JobBuried || j.Consumed != 3 || j.Attempts != 3 || j.LastError != "boom" {
		t.Fatalf("buried job = %+v", j)
	}
	if st := b.dispatch(ts(time.Hour)); len(st) != 0 {
		t.Fatal("a buried job started")
	}
	if len(b.picks) != 0 {
		t.Fatalf("PickFunc called %v without jitter", b.picks)
	}
	b.replayed()
}

func TestJB4_PermanentFailureBuriesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	id := b.enqueue(t0, req("h"))
	st := only(t, b.dispatch(t0), id)
	d := b.settle(t0, Result{Token: st.Token, Failure: fail(Permanent)})
	wantKinds(t, d, record.KindAttemptBuried)
	if r := d.Records[0].Body.(*record.AttemptBuried); r.Class != "permanent" {
		t.Fatalf("attempt_buried = %+v", r)
	}
	if j := b.job(id); j.Status != replay.JobBuried || j.Consumed != 1 {
		t.Fatalf("job = %+v", j)
	}
	b.replayed()
}

// TestDL6_ReleaseConsumesNothing follows DL-6's example: a released
// attempt leaves the consumed count, so the next failure still waits 1 s.
func TestDL6_ReleaseConsumesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	id := b.enqueue(t0, req("h"))
	st := only(t, b.dispatch(t0), id)
	f := fail(Retryable)
	f.Release = true
	d := b.settle(ts(2*time.Second), Result{Token: st.Token, Failure: f, Reason: "shutdown_deadline", ReasonAt: ts(time.Second)})
	wantKinds(t, d, record.KindAttemptReleased)
	rel := d.Records[0].Body.(*record.AttemptReleased)
	if rel.AvailableAt != ts(2*time.Second).UnixNano() || rel.Reason != "shutdown_deadline" || rel.ReasonAt != ts(time.Second).UnixNano() {
		t.Fatalf("attempt_released = %+v", rel)
	}
	if j := b.job(id); j.Status != replay.JobPending || j.Consumed != 0 || j.Attempts != 1 || j.AvailableAt != ts(2*time.Second).UnixNano() {
		t.Fatalf("released job = %+v", j)
	}
	st = only(t, b.dispatch(ts(2*time.Second)), id)
	if st.Job.Attempts != 2 || st.Job.Consumed != 1 {
		t.Fatalf("redelivery = attempt %d consumed %d", st.Job.Attempts, st.Job.Consumed)
	}
	d = b.settle(ts(3*time.Second), Result{Token: st.Token, Failure: fail(Retryable)})
	if r := d.Records[0].Body.(*record.AttemptRetryScheduled); r.DelayNanos != int64(time.Second) {
		t.Fatalf("delay after one consumed attempt = %v", time.Duration(r.DelayNanos))
	}
	b.replayed()
}

func TestJB5_UniqueEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	u := req("send_email")
	u.Unique, u.Payload = true, []byte{0x81, 0xa2, 't', 'o', 0xa3, 'a', '@', 'x'}
	first := b.enqueue(t0, u)
	if b.job(first).UniqueKey != UniqueKey("send_email", u.Payload) {
		t.Fatalf("unique key = %q", b.job(first).UniqueKey)
	}
	again := func(want string) {
		t.Helper()
		d, id := b.m.Enqueue(t0, u)
		if id != want || !d.Empty() {
			t.Fatalf("second enqueue = %s deciding %v, want %s and nothing", id, kinds(d), want)
		}
	}
	again(first)
	// Another payload, another handler, or no Unique: new jobs.
	other := u
	other.Payload = []byte{0xa1, 'y'}
	b.enqueue(t0, other)
	other = u
	other.Handler = "send_sms"
	b.enqueue(t0, other)
	plain := u
	plain.Unique = false
	b.enqueue(t0, plain)
	// Processing still blocks; completion frees the key.
	st := b.dispatch(t0)
	again(first)
	b.settle(t0, Result{Token: st[0].Token})
	second := b.enqueue(t0, u)
	if second == first {
		t.Fatal("a completed job blocked its unique key")
	}
	// A buried job does not block either.
	if _, err := b.take2(b.m.Bury(t0, second, "", "buried by operator")); err != nil {
		t.Fatal(err)
	}
	third := b.enqueue(t0, u)
	again(third)
	b.replayed()
}

// take2 passes a (Decision, error) pair through take.
func (b *testBundle) take2(d Decision, err error) (Decision, error) {
	b.t.Helper()
	return b.take(d), err
}

func TestJB6_Bury(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, workers(1))
	b.recover(t0)
	pending := b.enqueue(t0, req("h"))
	busy := b.enqueue(t0, req("h"))
	// A pending job that already failed once keeps its history when buried.
	st := only(t, b.dispatch(t0), pending)
	b.settle(t0, Result{Token: st.Token, Failure: fail(Retryable)})
	only(t, b.dispatch(t0), busy)

	d, err := b.take2(b.m.Bury(t0, pending, "", "buried by operator"))
	if err != nil {
		t.Fatal(err)
	}
	wantKinds(t, d, record.KindJobBuried)
	if jb := d.Records[0].Body.(*record.JobBuried); jb.JobID != pending || jb.Error != "buried by operator" {
		t.Fatalf("job_buried = %+v", jb)
	}
	if j := b.job(pending); j.Status != replay.JobBuried || j.Attempts != 1 || j.Consumed != 1 || j.LastError != "buried by operator" {
		t.Fatalf("buried job = %+v", j)
	}
	d, err = b.m.Bury(t0, busy, "", "buried by operator")
	refused(t, d, err, ErrState)
	d, err = b.m.Bury(t0, pending, "", "again")
	refused(t, d, err, ErrState)
	d, err = b.m.Bury(t0, "job_none", "", "x")
	refused(t, d, err, ErrNotFound)
	if st := b.dispatch(ts(time.Hour)); len(st) != 0 {
		t.Fatalf("started %v with the one worker busy", ids(st))
	}
	b.replayed()
}

func TestJB7_RequeueAndRequeueBuried(t *testing.T) {
	t.Parallel()
	b := setup(t, []record.Record{{Seq: 1, Stream: "wf_1", Body: &record.WorkflowStarted{WorkflowID: "wf_1", Name: "wf", Steps: 5}}}, workers(10))
	b.recover(t0)
	var jobs []string
	for _, q := range []string{"q", "other", "q", "q", "q"} {
		r := req("h")
		r.Queue = q
		jobs = append(jobs, b.enqueue(t0, r))
	}
	step := req("h")
	step.Queue, step.WorkflowID = "q", "wf_1"
	stepJob := b.enqueue(t0, step)
	// Bury all but jobs[4]: attempts failing permanently, then by operator.
	for _, st := range b.dispatch(t0) {
		if st.Job.ID == jobs[4] {
			b.settle(t0, Result{Token: st.Token, Failure: fail(Retryable)})
			continue
		}
		b.settle(t0, Result{Token: st.Token, Failure: fail(Permanent)})
	}
	d, err := b.take2(b.m.Requeue(ts(time.Minute), jobs[0]))
	if err != nil {
		t.Fatal(err)
	}
	wantKinds(t, d, record.KindJobRequeued)
	if j := b.job(jobs[0]); j.Status != replay.JobPending || j.Consumed != 0 || j.AvailableAt != ts(time.Minute).UnixNano() || j.Attempts != 1 {
		t.Fatalf("requeued job = %+v", j)
	}
	d, err = b.m.Requeue(t0, jobs[0])
	refused(t, d, err, ErrState)
	d, err = b.m.Requeue(t0, "job_none")
	refused(t, d, err, ErrNotFound)

	// At most max per decision, the first in enqueue order, saying more
	// are left (RL-12: Engine.RetryBuried bounds its appends so).
	d, n, more := b.m.RequeueBuriedUpTo(ts(2*time.Minute), "q", 1)
	b.take(d)
	if n != 1 || !more || len(d.Records) != 1 || d.Records[0].Body.(*record.JobRequeued).JobID != jobs[2] {
		t.Fatalf("RequeueBuriedUpTo 1 = %d (more %t) with %v", n, more, kinds(d))
	}
	d, n = b.m.RequeueBuried(ts(2*time.Minute), "q")
	b.take(d)
	if n != 1 || len(d.Records) != 1 {
		t.Fatalf("RequeueBuried after it = %d with %v", n, kinds(d))
	}
	if got := d.Records[0].Body.(*record.JobRequeued); got.JobID != jobs[3] || got.AvailableAt != ts(2*time.Minute).UnixNano() {
		t.Fatalf("requeue = %+v, want %s", got, jobs[3])
	}
	if j := b.job(jobs[1]); j.Status != replay.JobBuried {
		t.Fatal("RequeueBuried touched another queue")
	}
	if j := b.job(stepJob); j.Status != replay.JobBuried {
		t.Fatal("RequeueBuried requeued a step job")
	}
	if d, n := b.m.RequeueBuried(t0, "q"); n != 0 || !d.Empty() {
		t.Fatalf("second RequeueBuried = %d", n)
	}
	got := ids(b.dispatch(ts(2 * time.Minute)))
	if want := []string{jobs[0], jobs[2], jobs[3], jobs[4]}; !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", got, want)
	}
	b.replayed()
}

func TestJB8_PauseQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	mail := req("h")
	mail.Queue = "mail"
	d := b.take(b.m.PauseQueue("mail"))
	wantKinds(t, d, record.KindQueuePaused)
	if d := b.m.PauseQueue("mail"); !d.Empty() {
		t.Fatalf("pausing a paused queue decided %v", kinds(d))
	}
	if d := b.m.ResumeQueue("default"); !d.Empty() {
		t.Fatalf("resuming a running queue decided %v", kinds(d))
	}
	mailJob := b.enqueue(t0, mail) // enqueue is still accepted
	dflt := b.enqueue(t0, req("h"))
	only(t, b.dispatch(t0), dflt)
	if st := b.dispatch(ts(time.Hour)); len(st) != 0 {
		t.Fatalf("paused queue started %v", ids(st))
	}
	// The paused state survives replay: a new machine over the journal
	// keeps the queue paused.
	if s := b.replayed(); !s.PausedQueues["mail"] {
		t.Fatalf("replayed paused queues = %v", s.PausedQueues)
	}
	r := setup(t, append(slices.Clone(b.init), b.recs...))
	r.recover(ts(time.Hour))
	for _, st := range r.dispatch(ts(time.Hour)) {
		if st.Job.Queue == "mail" {
			t.Fatal("a restarted machine started a job of a paused queue")
		}
	}
	r.replayed()

	d = b.take(b.m.ResumeQueue("mail"))
	wantKinds(t, d, record.KindQueueResumed)
	if d := b.m.ResumeQueue("mail"); !d.Empty() {
		t.Fatalf("resuming twice decided %v", kinds(d))
	}
	only(t, b.dispatch(ts(time.Hour)), mailJob)
	if s := b.replayed(); len(s.PausedQueues) != 0 {
		t.Fatalf("replayed paused queues = %v", s.PausedQueues)
	}
}

func TestRL10_DL38_SettleRefusesStaleTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	id := b.enqueue(t0, req("h"))
	st := only(t, b.dispatch(t0), id)
	for _, tok := range []uint64{0, 1, st.Token + 1, 1 << 62} {
		d, err := b.m.Settle(t0, Result{Token: tok})
		refused(t, d, err, ErrStaleToken)
	}
	if b.m.Inflight() != 1 {
		t.Fatalf("inflight %d after refused settlements", b.m.Inflight())
	}
	b.settle(t0, Result{Token: st.Token, Failure: fail(Retryable)})
	for _, res := range []Result{{Token: st.Token}, {Token: st.Token, Failure: fail(Permanent)}} {
		d, err := b.m.Settle(t0, res)
		refused(t, d, err, ErrStaleToken)
	}
	if b.m.Inflight() != 0 {
		t.Fatalf("inflight %d", b.m.Inflight())
	}
	// A new attempt revokes nothing it should not: the old token stays
	// refused while the new one settles.
	st2 := only(t, b.dispatch(ts(time.Minute)), id)
	d, err := b.m.Settle(t0, Result{Token: st.Token})
	refused(t, d, err, ErrStaleToken)
	b.settle(ts(time.Minute), Result{Token: st2.Token})
	b.replayed()
}

func TestDL44_RecoverReopensLostAttempt(t *testing.T) {
	t.Parallel()
	var j journal
	j.enqueue("job_lost", defaultRetry)
	oldTok := j.start("job_lost", 1)
	j.enqueue("job_idle", defaultRetry)
	b := setup(t, j.recs)
	if st := b.dispatch(t0); len(st) != 0 {
		t.Fatalf("started %v before recovery", ids(st))
	}
	// The lost attempt never settles, not even before recovery revokes it.
	sd, err := b.m.Settle(t0, Result{Token: oldTok})
	refused(t, sd, err, ErrNotRecovered)
	if b.m.Inflight() != 0 {
		t.Fatalf("inflight %d before recovery", b.m.Inflight())
	}
	d, lost := b.m.Recover(ts(time.Minute), "run_2", "v2")
	b.take(d)
	if lost != 1 {
		t.Fatalf("Recover found %d lost attempts", lost)
	}
	wantKinds(t, d, record.KindRunStarted)
	if rs := d.Records[0].Body.(*record.RunStarted); rs.Recovered != 1 || rs.RunID != "run_2" || rs.Version != "v2" || rs.At != ts(time.Minute).UnixNano() {
		t.Fatalf("run_started = %+v", rs)
	}
	if jb := b.job("job_lost"); jb.Status != replay.JobPending || !jb.Lost || jb.Consumed != 1 || jb.Token != 0 {
		t.Fatalf("lost job after recovery = %+v", jb)
	}
	sd, err = b.m.Settle(ts(time.Minute), Result{Token: oldTok})
	refused(t, sd, err, ErrStaleToken)
	got := b.dispatch(ts(time.Minute))
	if len(got) != 2 || got[0].Job.ID != "job_lost" || got[0].Job.Attempts != 2 || got[0].Job.Consumed != 2 || got[0].Job.Lost {
		t.Fatalf("after recovery started %+v", got)
	}
	// The crashed attempt counted: the next failure waits 2 s (n = 2).
	d = b.settle(ts(2*time.Minute), Result{Token: got[0].Token, Failure: fail(Retryable)})
	if r := d.Records[0].Body.(*record.AttemptRetryScheduled); r.DelayNanos != int64(2*time.Second) {
		t.Fatalf("delay after a crash and a failure = %v", time.Duration(r.DelayNanos))
	}
	b.replayed()
}

func TestDL44_RecoverBuriesExhaustedLostAttempts(t *testing.T) {
	t.Parallel()
	var j journal
	// job_b: its third start crashed. job_a: its only attempt crashed.
	j.enqueue("job_b", defaultRetry)
	tok := j.start("job_b", 1)
	j.add("job_b", &record.AttemptRetryScheduled{Outcome: record.Outcome{JobID: "job_b", Token: tok}, AvailableAt: t0.UnixNano()})
	tok = j.start("job_b", 2)
	j.add("job_b", &record.AttemptRetryScheduled{Outcome: record.Outcome{JobID: "job_b", Token: tok}, AvailableAt: t0.UnixNano()})
	j.start("job_b", 3)
	one := defaultRetry
	one.MaxAttempts = 1
	j.enqueue("job_a", one)
	j.start("job_a", 1)
	j.enqueue("job_ok", defaultRetry)
	j.start("job_ok", 1)
	b := setup(t, j.recs)
	d, lost := b.m.Recover(ts(time.Minute), "run_2", "v2")
	b.take(d)
	if lost != 3 {
		t.Fatalf("lost = %d", lost)
	}
	// Buried in enqueue order, after the run_started.
	wantKinds(t, d, record.KindRunStarted, record.KindJobBuried, record.KindJobBuried)
	for i, want := range []string{"job_b", "job_a"} {
		jb := d.Records[i+1].Body.(*record.JobBuried)
		if jb.JobID != want || jb.Code != "DELIVERY_INTERRUPTED_BY_CRASH" {
			t.Fatalf("job_buried %d = %+v, want %s", i, jb, want)
		}
		if j := b.job(want); j.Status != replay.JobBuried || j.LastCode != CodeInterruptedByCrash {
			t.Fatalf("%s = %+v", want, j)
		}
	}
	only(t, b.dispatch(ts(time.Minute)), "job_ok")
	b.replayed()
}

func TestParkedJobsWaitForTheirHandler(t *testing.T) {
	t.Parallel()
	var j journal
	j.enqueue("job_old", defaultRetry) // handler "h", parked from NewMachine
	b := setup(t, j.recs)
	b.unregistered["h"], b.unregistered["later"] = true, true
	b.m = NewMachine(b.cfg, foldAll(t, j.recs)) // again, with "h" unregistered
	b.recover(t0)
	parked := b.enqueue(t0, req("later"))
	ready := b.enqueue(t0, req("now"))
	only(t, b.dispatch(t0), ready)
	if st := b.dispatch(ts(time.Hour)); len(st) != 0 {
		t.Fatalf("parked jobs started: %v", ids(st))
	}
	if got := b.m.Parked(); !slices.Equal(got, []string{"h", "later"}) {
		t.Fatalf("Parked = %v", got)
	}
	delete(b.unregistered, "later")
	b.m.Unpark("later")
	only(t, b.dispatch(ts(time.Hour)), parked)
	if got := b.m.Parked(); !slices.Equal(got, []string{"h"}) {
		t.Fatalf("Parked = %v", got)
	}
	delete(b.unregistered, "h")
	b.m.Unpark("h")
	only(t, b.dispatch(ts(time.Hour)), "job_old")
	b.replayed()
}

func TestDL38_FollowUpsInTheSettlementDecision(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	id := b.enqueue(t0, req("h"))
	st := only(t, b.dispatch(t0), id)
	next := req("next")
	next.Delay = time.Second
	d := b.settle(ts(time.Second), Result{Token: st.Token, FollowUps: []EnqueueRequest{next, req("other")}})
	wantKinds(t, d, record.KindAttemptSucceeded, record.KindJobEnqueued, record.KindJobEnqueued)
	e := d.Records[1].Body.(*record.JobEnqueued)
	if e.Handler != "next" || e.AvailableAt != ts(2*time.Second).UnixNano() || e.JobID != "job_0002" {
		t.Fatalf("follow-up = %+v", e)
	}
	if len(d.Starts) != 0 {
		t.Fatal("a settlement started work")
	}
	got := ids(b.dispatch(ts(2 * time.Second)))
	if !slices.Equal(got, []string{"job_0002", "job_0003"}) {
		t.Fatalf("started %v", got)
	}
	// A failed attempt enqueues no follow-up.
	d = b.settle(ts(3*time.Second), Result{Token: b.job("job_0002").Token, Failure: fail(Retryable), FollowUps: []EnqueueRequest{req("x")}})
	wantKinds(t, d, record.KindAttemptRetryScheduled)
	b.replayed()
}

func TestRL7_PredictedSeqsFollowTheJournal(t *testing.T) {
	t.Parallel()
	var j journal
	j.add(record.EngineStream, &record.RunStarted{RunID: "run_1"})
	j.enqueue("job_x", defaultRetry)
	j.add(record.EngineStream, &record.Debug{Subject: "x"})
	b := setup(t, j.recs)
	if b.m.NextSeq() != 4 {
		t.Fatalf("NextSeq = %d, want 4", b.m.NextSeq())
	}
	b.recover(t0) // seq 4
	b.enqueue(t0, req("h"))
	st := b.dispatch(t0)
	b.settle(t0, Result{Token: st[0].Token, FollowUps: []EnqueueRequest{req("h"), req("h")}})
	b.take(b.m.PauseQueue("q"))
	for i, r := range b.recs {
		if r.Seq != uint64(4+i) {
			t.Fatalf("record %d has seq %d, want %d", i, r.Seq, 4+i)
		}
	}
	if b.m.NextSeq() != uint64(4+len(b.recs)) {
		t.Fatalf("NextSeq = %d after %d records", b.m.NextSeq(), len(b.recs))
	}
	b.replayed()
}

// TestDL5_JitterChosenByPickFunc follows DL-5's table (base 1 s, cap 5 s,
// r = 0.2): each retry delay is the candidate PickFunc picks.
func TestDL5_JitterChosenByPickFunc(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.recover(t0)
	r := req("h")
	r.Retry = record.RetryPolicy{MaxAttempts: 6, BaseNanos: int64(time.Second), MaxNanos: int64(5 * time.Second), JitterRatio: 0.2}
	id := b.enqueue(t0, r)
	steps := []struct {
		candidates []time.Duration
		pick       int
	}{
		{[]time.Duration{1000 * time.Millisecond, 1200 * time.Millisecond}, 1},
		{[]time.Duration{1600 * time.Millisecond, 2000 * time.Millisecond, 2400 * time.Millisecond}, 2},
		{[]time.Duration{3200 * time.Millisecond, 4000 * time.Millisecond, 4800 * time.Millisecond}, 0},
		{[]time.Duration{4000 * time.Millisecond, 5000 * time.Millisecond}, 1},
		{[]time.Duration{4000 * time.Millisecond, 5000 * time.Millisecond}, 0},
	}
	now := t0
	for n, s := range steps {
		b.pick = func(int) int { return s.pick }
		b.picks = nil
		st := only(t, b.dispatch(now), id)
		now = now.Add(10 * time.Second)
		d := b.settle(now, Result{Token: st.Token, Failure: fail(Retryable)})
		rs := d.Records[0].Body.(*record.AttemptRetryScheduled)
		if !slices.Equal(b.picks, []int{len(s.candidates)}) {
			t.Fatalf("n=%d: PickFunc called with %v, want [%d]", n+1, b.picks, len(s.candidates))
		}
		want := s.candidates[s.pick]
		if rs.DelayNanos != int64(want) || rs.AvailableAt != now.Add(want).UnixNano() {
			t.Fatalf("n=%d: delay %v available %v, want %v", n+1, time.Duration(rs.DelayNanos), time.Unix(0, rs.AvailableAt).Sub(now), want)
		}
		now = now.Add(want)
	}
	b.replayed()
}

func TestPolicyRoundTrip(t *testing.T) {
	t.Parallel()
	p := record.RetryPolicy{MaxAttempts: 7, Backoff: record.BackoffList, BaseNanos: 1e8, MaxNanos: 9e9, JitterRatio: 0.5, ListNanos: []int64{1e8, 2e8}}
	back := RetryPolicy(int(p.MaxAttempts), Policy(p))
	if back.MaxAttempts != p.MaxAttempts || back.Backoff != p.Backoff || back.BaseNanos != p.BaseNanos ||
		back.MaxNanos != p.MaxNanos || back.JitterRatio != p.JitterRatio || !slices.Equal(back.ListNanos, p.ListNanos) {
		t.Fatalf("round trip = %+v, want %+v", back, p)
	}
	// No PickFunc: the lowest candidate, never a panic.
	if d := retryDelay(record.RetryPolicy{BaseNanos: 1e9, MaxNanos: 5e9, JitterRatio: 0.2}, 2, nil); d != 1600*time.Millisecond {
		t.Fatalf("retryDelay without pick = %v", d)
	}
}

// JB-5: the key hashes the payload's canonical encoding, every map's keys
// sorted: a struct whose fields are not in key order and a map holding
// the same fields are one payload. A job an earlier build journaled under
// the hash of the payload as encoded still holds its key for the payload
// it was enqueued with.
func TestJB5_UniqueKeyIsTheCanonicalEncoding(t *testing.T) {
	t.Parallel()
	// {"to": "a", "cc": "b"}, as a struct declaring To before Cc encodes
	// it, and the same map with its keys sorted, as a map encodes it.
	asStruct := []byte{0x82, 0xa2, 't', 'o', 0xa1, 'a', 0xa2, 'c', 'c', 0xa1, 'b'}
	asMap := []byte{0x82, 0xa2, 'c', 'c', 0xa1, 'b', 0xa2, 't', 'o', 0xa1, 'a'}
	if UniqueKey("h", asStruct) != UniqueKey("h", asMap) {
		t.Fatalf("a struct and a map with its fields have keys %s and %s", UniqueKey("h", asStruct), UniqueKey("h", asMap))
	}
	if UniqueKey("h", asStruct) == UniqueKey("h", []byte{0x82, 0xa2, 't', 'o', 0xa1, 'b', 0xa2, 'c', 'c', 0xa1, 'a'}) {
		t.Fatal("two payloads with their values swapped have one key")
	}

	b := setup(t, nil)
	b.recover(t0)
	u := req("h")
	u.Unique, u.Payload = true, asStruct
	first := b.enqueue(t0, u)
	u.Payload = asMap
	if d, id := b.m.Enqueue(t0, u); id != first || !d.Empty() {
		t.Fatalf("the map's enqueue = %s deciding %v, want %s and nothing", id, kinds(d), first)
	}

	// A journal of an earlier build: the job's key is the hash of the
	// struct's bytes as they were encoded.
	var j journal
	j.add("job_old", &record.JobEnqueued{JobID: "job_old", Handler: "h", Queue: "default", AvailableAt: t0.UnixNano(),
		Retry: record.RetryPolicy{MaxAttempts: 3}, UniqueKey: legacyUniqueKey("h", asStruct), Payload: asStruct})
	old := setup(t, j.recs)
	old.recover(t0)
	u.Payload = asStruct
	if d, id := old.m.Enqueue(t0, u); id != "job_old" || !d.Empty() {
		t.Fatalf("enqueue over the earlier build's job = %s deciding %v, want job_old and nothing", id, kinds(d))
	}
	old.replayed()
}
