package api_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

type msg struct {
	N int `msgpack:"n"`
}

func okHandler(rec *recorder) api.HandlerFunc[msg] {
	return func(ctx context.Context, d *api.Delivery, in msg) error {
		if rec != nil {
			rec.add(fmt.Sprint(in.N))
		}
		return nil
	}
}

func TestJB1_EnqueueRunsAndCompletes(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "work", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("work", msg{N: 7})
	if !strings.HasPrefix(id, "job_") {
		t.Fatalf("job id %q lacks the job_ prefix", id)
	}
	j := b.wantStatus(id, api.JobPending)
	if !j.AvailableAt.Equal(t0) || j.Queue != "default" || j.Priority != api.Low || j.MaxAttempts != 3 {
		t.Fatalf("defaults: %+v", j)
	}
	b.start()
	b.idle()
	j = b.wantStatus(id, api.JobCompleted)
	if j.Attempts != 1 {
		t.Fatalf("attempts %d, want 1", j.Attempts)
	}
	if got := rec.get(); len(got) != 1 || got[0] != "7" {
		t.Fatalf("handler saw %v", got)
	}
	recs := b.records()
	for _, k := range []record.Kind{record.KindJobEnqueued, record.KindAttemptStarted, record.KindAttemptSucceeded} {
		if countKind(recs, k) != 1 {
			t.Fatalf("want one %s, journal has %d", k, countKind(recs, k))
		}
	}
	b.checkReplay()
}

func TestJB1_BadInputAppendsNothing(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "work", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	wfRegister(t, b.eng, api.NewWorkflow("flow").Then("s", func(context.Context, *api.Delivery, api.State) (api.State, error) { return nil, nil }))
	before := b.lastSeq()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name  string
		call  func() error
		match func(error) bool
	}{
		{"unknown handler", func() error { _, err := b.eng.Enqueue(b.ctx, "nope", msg{}); return err },
			func(err error) bool {
				return errors.Is(err, api.ErrUnknownHandler) && strings.Contains(err.Error(), `"nope"`)
			}},
		{"nil payload", func() error { _, err := b.eng.Enqueue(b.ctx, "work", nil); return err },
			func(err error) bool { return errors.Is(err, api.ErrInvalidPayload) }},
		{"oversized payload", func() error {
			_, err := b.eng.Enqueue(b.ctx, "work", strings.Repeat("x", api.PayloadBytesMaxDefault+1))
			return err
		}, func(err error) bool {
			return errors.Is(err, api.ErrInvalidPayload) && strings.Contains(err.Error(), "PayloadBytesMax")
		}},
		{"negative delay", func() error { _, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.Delay(-time.Second)); return err },
			func(err error) bool { var oe *api.OptionError; return errors.As(err, &oe) && oe.Field == "Delay" }},
		// RL-9: a delay past DelayMax used to wrap round into an instant
		// in the past, and the job ran at once.
		{"delay over 100 years", func() error {
			_, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.Delay(api.DelayMax+1))
			return err
		}, func(err error) bool {
			var oe *api.OptionError
			return errors.As(err, &oe) && oe.Field == "Delay" && errors.Is(err, api.ErrInvalidOption) &&
				strings.Contains(err.Error(), api.DelayMax.String())
		}},
		{"max attempts over 100", func() error { _, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.MaxAttempts(101)); return err },
			func(err error) bool {
				var oe *api.OptionError
				return errors.As(err, &oe) && strings.Contains(oe.Field, "MaxAttempts") && errors.Is(err, api.ErrInvalidOption)
			}},
		{"timeout out of range", func() error {
			_, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.DeliveryTimeout(99*time.Millisecond))
			return err
		}, func(err error) bool {
			return errors.Is(err, api.ErrInvalidOption) && strings.Contains(err.Error(), "DeliveryTimeout")
		}},
		{"empty queue", func() error { _, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.OnQueue("")); return err },
			func(err error) bool { var oe *api.OptionError; return errors.As(err, &oe) && oe.Field == "OnQueue" }},
		{"cancelled context", func() error { _, err := b.eng.Enqueue(cancelled, "work", msg{}); return err },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
		// An ended ctx is refused before the loop takes the call, with the
		// package's prefix, whatever the call.
		{"cancelled context to pause", func() error { return b.eng.PauseQueue(cancelled, "q") },
			func(err error) bool {
				return errors.Is(err, context.Canceled) && strings.HasPrefix(err.Error(), "quire: ")
			}},
		{"priority over Urgent", func() error {
			_, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.WithPriority(api.Urgent+1))
			return err
		},
			func(err error) bool {
				var oe *api.OptionError
				return errors.As(err, &oe) && oe.Field == "WithPriority"
			}},
		{"nil JobOption", func() error { _, err := b.eng.Enqueue(b.ctx, "work", msg{}, nil); return err },
			func(err error) bool { var oe *api.OptionError; return errors.As(err, &oe) && oe.Field == "JobOption" }},
		// A workflow's step handler is enqueued by its workflow only.
		{"step handler", func() error { _, err := b.eng.Enqueue(b.ctx, "flow/s", msg{}); return err },
			func(err error) bool {
				return errors.Is(err, api.ErrUnknownHandler) && strings.Contains(err.Error(), `"flow/s"`)
			}},
		// Names that break their rule match ErrInvalidName, whichever call
		// refuses them.
		{"empty handler name", func() error { return api.Handle(b.eng, "", okHandler(nil)) },
			func(err error) bool {
				var ne *api.NameError
				return errors.As(err, &ne) && errors.Is(err, api.ErrInvalidName)
			}},
		{"handler name over NameBytesMax", func() error {
			return api.Handle(b.eng, strings.Repeat("h", api.NameBytesMax+1), okHandler(nil))
		}, func(err error) bool { return errors.Is(err, api.ErrInvalidName) }},
		{"empty queue to pause", func() error { return b.eng.PauseQueue(b.ctx, "") },
			func(err error) bool { return errors.Is(err, api.ErrInvalidName) }},
		{"empty queue option", func() error { _, err := b.eng.Enqueue(b.ctx, "work", msg{}, api.OnQueue("")); return err },
			func(err error) bool {
				return errors.Is(err, api.ErrInvalidName) && errors.Is(err, api.ErrInvalidOption)
			}},
	}
	for _, c := range cases {
		err := c.call()
		if err == nil || !c.match(err) {
			t.Errorf("%s: got error %v", c.name, err)
		}
	}
	if after := b.lastSeq(); after != before {
		t.Fatalf("refused calls appended records: seq %d -> %d", before, after)
	}
	if err := b.eng.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.Enqueue(b.ctx, "work", msg{}); !errors.Is(err, api.ErrClosed) {
		t.Fatalf("enqueue after close: %v", err)
	}
}

func TestJB2_StartOrderPriorityThenEnqueueOrder(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1 })
	var rec recorder
	if err := api.Handle(b.eng, "work", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	b.enqueue("work", msg{N: 1}, api.WithPriority(api.Low))
	b.enqueue("work", msg{N: 2}, api.WithPriority(api.Urgent))
	b.enqueue("work", msg{N: 3}, api.WithPriority(api.Normal))
	b.enqueue("work", msg{N: 4}, api.WithPriority(api.High))
	b.enqueue("work", msg{N: 5}, api.WithPriority(api.Normal))
	b.start()
	b.idle()
	if got, want := strings.Join(rec.get(), ","), "2,4,3,5,1"; got != want {
		t.Fatalf("start order %s, want %s", got, want)
	}
	b.checkReplay()
}

func TestJB2_QueuesServedInConfiguredOrder(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.Workers = 1; o.Queues = []string{"urgent", "bulk"} })
	var rec recorder
	if err := api.Handle(b.eng, "work", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	b.enqueue("work", msg{N: 1}, api.OnQueue("zeta"))
	b.enqueue("work", msg{N: 2}, api.OnQueue("bulk"))
	b.enqueue("work", msg{N: 3}, api.OnQueue("alpha"))
	b.enqueue("work", msg{N: 4}, api.OnQueue("urgent"))
	b.start()
	b.idle()
	if got, want := strings.Join(rec.get(), ","), "4,2,3,1"; got != want {
		t.Fatalf("start order %s, want %s", got, want)
	}
}

func TestJB3_JB4_RetriesWithDefaultBackoffThenBury(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "fail", func(ctx context.Context, d *api.Delivery, in msg) error {
		rec.add(fmt.Sprintf("attempt %d at %s", d.Attempt(), b.clk.Now().Format("15:04:05")))
		return errors.New("smtp down")
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("fail", msg{})
	b.start()
	b.idle()
	// JB-4: attempt 1 fails at 10:00:00 -> available 10:00:01.
	j := b.wantStatus(id, api.JobPending)
	if want := t0.Add(time.Second); !j.AvailableAt.Equal(want) || j.Consumed != 1 {
		t.Fatalf("after attempt 1: available %v consumed %d, want %v and 1", j.AvailableAt, j.Consumed, want)
	}
	b.advance(time.Second) // 10:00:01: attempt 2 fails -> available +2 s
	j = b.wantStatus(id, api.JobPending)
	if want := t0.Add(3 * time.Second); !j.AvailableAt.Equal(want) {
		t.Fatalf("after attempt 2: available %v, want %v", j.AvailableAt, want)
	}
	b.advance(time.Second) // 10:00:02: not yet
	if got := len(rec.get()); got != 2 {
		t.Fatalf("%d attempts before the backoff elapsed, want 2", got)
	}
	b.advance(time.Second) // 10:00:03: attempt 3 fails -> buried
	j = b.wantStatus(id, api.JobBuried)
	if j.Attempts != 3 || j.Consumed != 3 || j.LastError != "smtp down" || j.LastCode != api.CodeHandlerError {
		t.Fatalf("buried job: %+v", j)
	}
	want := "attempt 1 at 10:00:00,attempt 2 at 10:00:01,attempt 3 at 10:00:03"
	if got := strings.Join(rec.get(), ","); got != want {
		t.Fatalf("attempts %s, want %s", got, want)
	}
	recs := b.records()
	if countKind(recs, record.KindAttemptRetryScheduled) != 2 || countKind(recs, record.KindAttemptBuried) != 1 {
		t.Fatalf("settlements: %d retries, %d buried", countKind(recs, record.KindAttemptRetryScheduled), countKind(recs, record.KindAttemptBuried))
	}
	b.checkReplay()
}

func TestJB3_PermanentErrorBuriesAtOnce(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "poison", func(ctx context.Context, d *api.Delivery, in msg) error {
		return api.Permanent("BAD_INPUT", errors.New("header row missing"))
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("poison", msg{})
	b.start()
	b.idle()
	j := b.wantStatus(id, api.JobBuried)
	if j.Attempts != 1 || j.LastCode != "BAD_INPUT" {
		t.Fatalf("%+v", j)
	}
}

func TestJB3_PanicIsRetryableWithStack(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.MaxAttempts = 1 })
	if err := api.Handle(b.eng, "boom", func(ctx context.Context, d *api.Delivery, in msg) error {
		panic("kaboom")
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("boom", msg{})
	b.start()
	b.idle()
	j := b.wantStatus(id, api.JobBuried)
	if j.LastCode != api.CodeHandlerPanicked || j.LastError != "kaboom" {
		t.Fatalf("%+v", j)
	}
	for _, r := range b.records() {
		if bur, ok := r.Body.(*record.AttemptBuried); ok {
			if bur.Class != "retryable" || !strings.Contains(bur.Stack, "goroutine") {
				t.Fatalf("panic settlement: class %q stack %q", bur.Class, bur.Stack)
			}
			return
		}
	}
	t.Fatal("no attempt_buried record")
}

// DL-4: a fixed backoff of 2 minutes needs no Max. MaxBackoff defaulted to
// 60 s whatever the Base, below its own lower bound, so the policy was
// refused unless the caller also set a Max that fixed backoff never uses.
func TestJB4_FixedBackoffLongerThanTheDefaultCapNeedsNoMax(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "fail", func(context.Context, *api.Delivery, msg) error { return errors.New("down") }); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("fail", msg{}, api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 2 * time.Minute}))
	b.start()
	b.idle()
	if j := b.wantStatus(id, api.JobPending); !j.AvailableAt.Equal(t0.Add(2 * time.Minute)) {
		t.Fatalf("retry available at %v, want %v", j.AvailableAt, t0.Add(2*time.Minute))
	}
}

func TestJB4_MaxAttemptsAndFixedBackoffPerJob(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "fail", func(ctx context.Context, d *api.Delivery, in msg) error {
		return errors.New("no")
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("fail", msg{}, api.MaxAttempts(5), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 10 * time.Second}))
	b.start()
	b.idle()
	for i := 0; i < 3; i++ {
		b.advance(10 * time.Second)
	}
	j := b.wantStatus(id, api.JobPending)
	if j.Attempts != 4 || j.MaxAttempts != 5 {
		t.Fatalf("%+v", j)
	}
	b.advance(10 * time.Second)
	b.wantStatus(id, api.JobBuried)
}

func TestJB5_UniqueDedupesWhilePendingOrProcessing(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "send_email", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	type email struct {
		To string `msgpack:"to"`
	}
	a := b.enqueue("send_email", email{To: "a@x"}, api.Unique())
	before := b.lastSeq()
	a2 := b.enqueue("send_email", email{To: "a@x"}, api.Unique())
	if a2 != a || b.lastSeq() != before {
		t.Fatalf("second unique enqueue: id %s (first %s), seq %d -> %d", a2, a, before, b.lastSeq())
	}
	other := b.enqueue("send_email", email{To: "b@x"}, api.Unique())
	if other == a {
		t.Fatal("different payload deduped")
	}
	if n := countKind(b.records(), record.KindJobEnqueued); n != 2 {
		t.Fatalf("%d job_enqueued, want 2", n)
	}
	b.start()
	b.idle()
	b.wantStatus(a, api.JobCompleted)
	if again := b.enqueue("send_email", email{To: "a@x"}, api.Unique()); again == a {
		t.Fatal("a completed job still blocks its unique key")
	}
	// Unique given to Handle applies to every enqueue for the handler.
	if err := api.Handle(b.eng, "digest", okHandler(nil), api.Unique(), api.OnQueue("paused")); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.PauseQueue(b.ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if d1, d2 := b.enqueue("digest", msg{N: 1}), b.enqueue("digest", msg{N: 1}); d1 != d2 {
		t.Fatalf("handler registered with Unique: ids %s and %s, want one job", d1, d2)
	}
	b.checkReplay()
}

// JB-5, JB-7: a buried unique job retried while another job holds its key
// waits for the key: Enqueue returns the holder while it is pending, and
// the retried job once the holder is buried, across a restart too. No
// enqueue creates a job while one with the key is pending.
func TestJB5_JB7_RetriedUniqueJobTakesTheKeyWhenTheHolderEnds(t *testing.T) {
	b := setup(t, nil)
	register := func(e *api.Engine) {
		if err := api.Handle(e, "digest", okHandler(nil), api.Unique(), api.OnQueue("held")); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil { // nothing runs: the jobs stay pending
		t.Fatal(err)
	}
	x := b.enqueue("digest", msg{N: 1})
	if err := b.eng.Bury(b.ctx, x); err != nil {
		t.Fatal(err)
	}
	y := b.enqueue("digest", msg{N: 1})
	if y == x {
		t.Fatal("a buried job blocked its key")
	}
	if err := b.eng.Retry(b.ctx, x); err != nil {
		t.Fatal(err)
	}
	b.wantStatus(x, api.JobPending)
	if got := b.enqueue("digest", msg{N: 1}); got != y {
		t.Fatalf("enqueue while %s holds the key and %s waits: %s, want the holder", y, x, got)
	}
	if err := b.eng.Bury(b.ctx, y); err != nil {
		t.Fatal(err)
	}
	if got := b.enqueue("digest", msg{N: 1}); got != x {
		t.Fatalf("enqueue once the holder %s was buried: %s, want the retried job %s", y, got, x)
	}
	b.reopen(register)
	if got := b.enqueue("digest", msg{N: 1}); got != x {
		t.Fatalf("enqueue after a restart: %s, want %s", got, x)
	}
	if n := countKind(b.records(), record.KindJobEnqueued); n != 2 {
		t.Fatalf("%d job_enqueued, want 2", n)
	}
	b.checkReplay()
}

func TestJB6_BuryPendingOnly(t *testing.T) {
	b := setup(t, nil)
	release := make(chan struct{})
	started := make(chan string, 1)
	if err := api.Handle(b.eng, "block", func(ctx context.Context, d *api.Delivery, in msg) error {
		started <- d.JobID()
		<-release
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pending := b.enqueue("block", msg{N: 1}, api.Delay(time.Hour))
	if err := b.eng.Bury(b.ctx, pending); err != nil {
		t.Fatal(err)
	}
	j := b.wantStatus(pending, api.JobBuried)
	if j.LastError != "buried by operator" {
		t.Fatalf("%+v", j)
	}
	running := b.enqueue("block", msg{N: 2})
	b.start()
	<-started
	if err := b.eng.Bury(b.ctx, running); !errors.Is(err, api.ErrState) {
		t.Fatalf("bury of a processing job: %v", err)
	}
	if err := b.eng.Bury(b.ctx, "job_unknown"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("bury of an unknown job: %v", err)
	}
	close(release)
	b.idle()
	b.wantStatus(running, api.JobCompleted)
	b.checkReplay()
}

// JB-6: a buried job keeps its last error, attempt number and consumed
// count. An operator's bury of a job waiting for its retry used to replace
// the handler's error with "buried by operator".
func TestJB6_BuryKeepsTheLastFailure(t *testing.T) {
	b := setup(t, nil)
	if err := api.Handle(b.eng, "charge", func(context.Context, *api.Delivery, msg) error {
		return api.Retryable("UPSTREAM_DOWN", errors.New("503 from billing"))
	}); err != nil {
		t.Fatal(err)
	}
	id := b.enqueue("charge", msg{})
	b.start()
	b.idle()
	failed := b.wantStatus(id, api.JobPending) // its retry is a second away
	if failed.LastCode != "UPSTREAM_DOWN" || failed.Attempts != 1 || failed.Consumed != 1 {
		t.Fatalf("after one failure: %+v", failed)
	}
	if err := b.eng.Bury(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	j := b.wantStatus(id, api.JobBuried)
	if j.LastCode != failed.LastCode || j.LastError != failed.LastError || j.Attempts != 1 || j.Consumed != 1 {
		t.Fatalf("buried: code %q error %q attempts %d consumed %d; want %q %q 1 1",
			j.LastCode, j.LastError, j.Attempts, j.Consumed, failed.LastCode, failed.LastError)
	}
	recs := b.records()
	if jb, ok := recs[len(recs)-1].Body.(*record.JobBuried); !ok || jb.Code != api.CodeBuriedByOperator || jb.Error != api.MessageBuriedByOperator {
		t.Fatalf("last record %+v, want the operator's job_buried", recs[len(recs)-1].Body)
	}
	b.reopen(nil) // the fold from the journal agrees
	if j := b.wantStatus(id, api.JobBuried); j.LastCode != failed.LastCode {
		t.Fatalf("after reopen: %+v", j)
	}
}

func TestJB7_RetryBuriedJobs(t *testing.T) {
	b := setup(t, func(o *api.Options) { o.MaxAttempts = 1 })
	fail := true
	var rec recorder
	if err := api.Handle(b.eng, "flaky", func(ctx context.Context, d *api.Delivery, in msg) error {
		rec.add(fmt.Sprint(in.N))
		if fail {
			return errors.New("down")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	x := b.enqueue("flaky", msg{N: 1}, api.OnQueue("q"))
	y := b.enqueue("flaky", msg{N: 2}, api.OnQueue("q"))
	z := b.enqueue("flaky", msg{N: 3}, api.OnQueue("other"))
	b.start()
	b.idle()
	for _, id := range []string{x, y, z} {
		if j := b.wantStatus(id, api.JobBuried); !j.AvailableAt.IsZero() {
			t.Fatalf("buried job %s: AvailableAt %v, want zero (only a pending job has one)", id, j.AvailableAt)
		}
	}
	if err := b.eng.Retry(b.ctx, x); !errors.Is(err, nil) {
		t.Fatal(err)
	}
	b.idle()
	if j := b.wantStatus(x, api.JobBuried); j.Attempts != 2 || j.Consumed != 1 {
		t.Fatalf("retried job: %+v", j)
	}
	fail = false // the handler runs on other goroutines only after Retry's append, so this is ordered
	n, err := b.eng.RetryBuried(b.ctx, "q")
	if err != nil || n != 2 {
		t.Fatalf("RetryBuried: %d, %v", n, err)
	}
	b.idle()
	// Read from the terminal index: three starts, one consumed since the
	// last requeue.
	if j := b.wantStatus(x, api.JobCompleted); j.Attempts != 3 || j.Consumed != 1 || !j.AvailableAt.IsZero() {
		t.Fatalf("completed job: attempts %d consumed %d available %v, want 3 1 zero", j.Attempts, j.Consumed, j.AvailableAt)
	}
	b.wantStatus(y, api.JobCompleted)
	b.wantStatus(z, api.JobBuried)
	if err := b.eng.Retry(b.ctx, x); !errors.Is(err, api.ErrState) || errors.Is(err, api.ErrNotFound) {
		t.Fatalf("retry of a completed job: %v", err)
	}
	b.checkReplay()
}

func TestJB8_QueuePauseSurvivesRestart(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	register := func(e *api.Engine) {
		if err := api.Handle(e, "work", okHandler(&rec)); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	if err := b.eng.PauseQueue(b.ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	seq := b.lastSeq()
	if err := b.eng.PauseQueue(b.ctx, "mail"); err != nil || b.lastSeq() != seq {
		t.Fatalf("pausing a paused queue appended: %v, seq %d -> %d", err, seq, b.lastSeq())
	}
	paused := b.enqueue("work", msg{N: 1}, api.OnQueue("mail"))
	free := b.enqueue("work", msg{N: 2})
	b.start()
	b.idle()
	b.wantStatus(free, api.JobCompleted)
	b.wantStatus(paused, api.JobPending)
	b.reopen(register)
	b.start()
	b.idle()
	b.wantStatus(paused, api.JobPending)
	if err := b.eng.ResumeQueue(b.ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	b.idle()
	b.wantStatus(paused, api.JobCompleted)
	b.checkReplay()
}

func TestJB9_RunOnceProcessesEligibleWorkThenStops(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "work", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	now1 := b.enqueue("work", msg{N: 1})
	now2 := b.enqueue("work", msg{N: 2})
	later := b.enqueue("work", msg{N: 3}, api.Delay(time.Minute))
	b.checkReplay()
	if err := b.eng.RunOnce(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(rec.get()); got != 2 {
		t.Fatalf("run-once ran %d jobs, want 2", got)
	}
	b.open()
	b.wantStatus(now1, api.JobCompleted)
	b.wantStatus(now2, api.JobCompleted)
	b.wantStatus(later, api.JobPending)
}

// RL-9, JB-1, WF-5, WD-3: an instant set DelayMax ahead is recorded as it
// is while it fits in Unix nanoseconds, and as their last instant once the
// clock is past 2162. Summed as now.Add(d).UnixNano(), such an instant
// wrapped round into the 17th century: the job ran at once, the Delay step
// fired at once and the workflow failed by its deadline at dispatch.
func TestRL9_InstantsPastTheirRangeSaturateAndNeverFireEarly(t *testing.T) {
	b := setup(t, nil)
	var rec recorder
	if err := api.Handle(b.eng, "work", okHandler(&rec)); err != nil {
		t.Fatal(err)
	}
	ran := false
	wfRegister(t, b.eng, api.NewWorkflow("far").Then("a", wfReturn(nil)).Delay(api.DelayMax).
		Then("after", func(context.Context, *api.Delivery, api.State) (api.State, error) { ran = true; return nil, nil }).
		MustCompleteWithin(api.DelayMax))
	b.start()

	near := b.enqueue("work", msg{N: 1}, api.Delay(api.DelayMax))
	if got, want := b.wantStatus(near, api.JobPending).AvailableAt, t0.Add(api.DelayMax); !got.Equal(want) {
		t.Fatalf("available at %v, want %v", got, want)
	}

	b.advance(time.Hour)
	b.wantStatus(near, api.JobPending)
	b.clk.Set(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
	b.idle()
	b.wantStatus(near, api.JobCompleted)

	end := time.Unix(0, math.MaxInt64)
	far := b.enqueue("work", msg{N: 2}, api.Delay(api.DelayMax))
	id := wfDispatch(b, "far", api.State{})
	b.idle() // step a completes before the clock moves
	b.advance(time.Hour)
	if got := b.wantStatus(far, api.JobPending).AvailableAt; !got.Equal(end) {
		t.Fatalf("available at %v, want the last instant %v", got, end)
	}
	info := wfInfo(b, id)
	if info.Status != api.WorkflowRunning || !info.DelayUntil.Equal(end) || !info.DeadlineAt.Equal(end) || ran {
		t.Fatalf("workflow %s at step %d %q, delay until %v, deadline %v, ran %v; want running, both at %v",
			info.Status, info.Step, info.StepName, info.DelayUntil, info.DeadlineAt, ran, end)
	}
	b.checkReplay()
}

// JB-7, WF-17: a step job buried by its workflow's cancel leaves the
// engine with the workflow; Retry of it is refused with ErrState saying
// so, not that only a buried job can be retried, and appends nothing.
func TestJB7_RetryOfAStepJobBuriedByCancelSaysWhy(t *testing.T) {
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("held").Then("a", wfReturn(nil), api.OnQueue("held")))
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := wfDispatch(b, "held", api.State{})
	b.idle()
	if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
		t.Fatal(err)
	}
	b.idle()
	var job string
	for _, r := range b.records() {
		if e, ok := r.Body.(*record.JobEnqueued); ok && e.WorkflowID == id {
			job = e.JobID
		}
	}
	if j := b.status(job); j.Status != api.JobBuried {
		t.Fatalf("step job %s is %s, want buried by the cancel", job, j.Status)
	}
	before := b.lastSeq()
	err := b.eng.Retry(b.ctx, job)
	if !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "buried step of workflow "+id+", which has ended") {
		t.Fatalf("Retry of %s: %v, want ErrState naming its ended workflow", job, err)
	}
	if after := b.lastSeq(); after != before {
		t.Fatalf("a refused Retry appended: seq %d -> %d", before, after)
	}
}

// stalePair registers workflow "stale": step "a" on queue "q" fails
// permanently until f heals, then step "b" on queue "held". rec records
// the runs of "a".
func stalePair(b *testBundle, rec *recorder, f *flaky) {
	b.t.Helper()
	wfRegister(b.t, b.eng, api.NewWorkflow("stale").
		Then("a", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
			rec.add("a")
			if f.fails() {
				return nil, api.Permanent("NO", errors.New("a broke"))
			}
			return api.State{"a": true}, nil
		}, api.OnQueue("q")).
		Then("b", wfReturn(api.State{"b": true}), api.OnQueue("held")))
}

// staleRetryRefused checks that neither RetryBuried of queue nor Retry of
// the replaced step job old requeues it, and that both append nothing
// (JB-7).
func staleRetryRefused(b *testBundle, queue, old string) {
	b.t.Helper()
	wfNoAppend(b, "RetryBuried", func() {
		if n, err := b.eng.RetryBuried(b.ctx, queue); err != nil || n != 0 {
			b.t.Fatalf("RetryBuried(%s) = %d, %v; want 0: the buried job was replaced by a retry of its workflow", queue, n, err)
		}
	})
	wfNoAppend(b, "Retry", func() {
		err := b.eng.Retry(b.ctx, old)
		if !errors.Is(err, api.ErrState) || !strings.Contains(err.Error(), "replaced") || !strings.Contains(err.Error(), "retry the workflow") {
			b.t.Fatalf("Retry(%s): %v, want ErrState saying a retry of its workflow replaced it", old, err)
		}
	})
	b.wantStatus(old, api.JobBuried)
}

// JB-7, WF-18, WF-20: a buried step job that a retry of its workflow
// replaced is not requeued once the workflow has moved past its step:
// RetryBuried skips it and Retry refuses it, though the workflow is
// running. Both used to requeue it, and the step ran again.
func TestJB7_StepJobReplacedByWorkflowRetryIsNotRequeuedPastItsStep(t *testing.T) {
	b, rec, f, id, old := staleFailed(t)
	wfHealAndRetry(b, f, id)
	if info := wfWant(b, id, api.WorkflowRunning); info.Step != 1 {
		t.Fatalf("workflow at step %d, want 1 (step b held)", info.Step)
	}
	staleRetryRefused(b, "q", old)
	b.idle()
	if got := strings.Join(rec.get(), ","); got != "a,a" {
		t.Fatalf("step a ran %s, want twice: the failure and the retry", got)
	}
	b.checkReplay()
}

// JB-7, WF-18, WF-20: a buried step job that a retry of its workflow
// replaced is not requeued while the retry's job of the same step is
// still pending. Requeued, it used to run beside that job and complete
// the step with its own output.
func TestJB7_StepJobReplacedByWorkflowRetryIsNotRequeuedBesideItsReplacement(t *testing.T) {
	b, rec, f, id, old := staleFailed(t)
	if err := b.eng.PauseQueue(b.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	wfHealAndRetry(b, f, id)
	steps := wfSteps(b.records(), id)
	if len(steps) != 2 || steps[1].Step != 0 {
		t.Fatalf("step jobs %d, want the retry's job of step 0 pending", len(steps))
	}
	b.wantStatus(steps[1].JobID, api.JobPending)
	staleRetryRefused(b, "q", old)
	if err := b.eng.ResumeQueue(b.ctx, "q"); err != nil {
		t.Fatal(err)
	}
	b.idle()
	if got := strings.Join(rec.get(), ","); got != "a,a" {
		t.Fatalf("step a ran %s, want twice: the failure and the retry", got)
	}
	if n := wfCount(b.records(), id, record.KindAttemptSucceeded); n != 1 {
		t.Fatalf("%d successes of step a, want the retry's only", n)
	}
	info := wfWant(b, id, api.WorkflowRunning)
	if info.Step != 1 || wfState(info.State) != "map[a:true]" {
		t.Fatalf("workflow at step %d with %s, want step 1 with a's output", info.Step, wfState(info.State))
	}
	b.checkReplay()
}

// staleFailed runs a "stale" workflow (stalePair) until its first step's
// job fails and the workflow with it, step b's queue held: old is that
// buried job, which a retry of the workflow replaces (WF-18).
func staleFailed(t *testing.T) (b *testBundle, rec *recorder, f *flaky, id, old string) {
	t.Helper()
	b = setup(t, nil)
	rec, f = &recorder{}, newFlaky()
	stalePair(b, rec, f)
	if err := b.eng.PauseQueue(b.ctx, "held"); err != nil {
		t.Fatal(err)
	}
	b.start()
	id = wfDispatch(b, "stale", api.State{})
	b.idle()
	wfWant(b, id, api.WorkflowFailed)
	return b, rec, f, id, wfSteps(b.records(), id)[0].JobID
}
