package api_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// Late calls on a Delivery: what a goroutine the handler left behind, or
// kept running concurrently, may add to its attempt (DL-36, DL-38, JB-1).

// enqueuedFor counts the job_enqueued records of handler.
func enqueuedFor(recs []journalRecord, handler string) int {
	n := 0
	for _, r := range recs {
		if e, ok := r.Body.(*record.JobEnqueued); ok && e.Handler == handler {
			n++
		}
	}
	return n
}

// DL-36: the attempt scope closes exactly once, at its disposal point,
// whether or not it held anything. A Register made after it is refused
// with ErrScopeClosed (the caller keeps the resource), and a Releaser
// stored with SetValue after it is released at once instead of being
// kept where nothing would ever release it.
func TestDL36_LateScopeUseIsRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(d *api.Delivery, rec *recorder)
	}{
		{"empty", func(*api.Delivery, *recorder) {}},
		{"values only", func(d *api.Delivery, rec *recorder) { d.SetValue("v", releaser{rec, "v"}) }},
		{"resources", func(d *api.Delivery, rec *recorder) {
			d.Scope().Register("conn", closer(func() error { rec.add("close:conn"); return nil }))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec recorder
			b := setup(t, nil)
			got := make(chan *api.Delivery, 1)
			if err := api.Handle(b.eng, "work", func(_ context.Context, d *api.Delivery, _ msg) error {
				c.setup(d, &rec)
				got <- d
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			b.start()
			id := b.enqueue("work", msg{})
			b.idle()
			b.wantStatus(id, api.JobCompleted)
			if _, o := b.lastSettlement(id); o.Scope != "closed" || o.Cleanup != "" {
				t.Fatalf("settlement %+v, want scope closed without cleanup codes", *o)
			}
			before := strings.Join(rec.get(), " ")
			d := <-got // the attempt has settled: this is a late caller

			err := d.Scope().Register("late", closer(func() error { rec.add("close:late"); return nil }))
			if !errors.Is(err, api.ErrScopeClosed) {
				t.Fatalf("late Register: %v, want ErrScopeClosed", err)
			}
			if _, ok := d.Scope().Lookup("late"); ok {
				t.Fatal("a refused resource resolves")
			}
			d.SetValue("late", releaser{&rec, "late"})
			if v, ok := d.Value("late"); ok {
				t.Fatalf("late SetValue stored %v", v)
			}
			if got, want := strings.Join(rec.get(), " "), strings.TrimSpace(before+" release:late"); got != want {
				t.Fatalf("after the late calls: %q, want %q (the late value released at once, nothing closed twice)", got, want)
			}
			b.idle()
			b.checkReplay()
		})
	}
}

// DL-38, JB-1: a follow-up exists if and only if its attempt succeeds, so
// Enqueue made once the attempt's follow-ups were taken (success or
// failure) or can no longer settle (abandoned at C, DL-26) reports
// ErrFollowUpTooLate, naming the follow-up's handler, and appends nothing.
func TestJB1_DL38_LateFollowUpIsRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		ret    error
		status api.JobStatus
	}{
		{"after success", nil, api.JobCompleted},
		{"after failure", api.Permanent("NO", nil), api.JobBuried},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			got := make(chan *api.Delivery, 1)
			if err := api.Handle(b.eng, "child", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if err := api.Handle(b.eng, "parent", func(_ context.Context, d *api.Delivery, _ msg) error {
				if err := d.Enqueue("child", msg{N: 1}); err != nil {
					return err
				}
				got <- d
				return c.ret
			}); err != nil {
				t.Fatal(err)
			}
			b.start()
			id := b.enqueue("parent", msg{})
			b.idle()
			b.wantStatus(id, c.status)
			d := <-got
			err := d.Enqueue("child", msg{N: 2})
			if !errors.Is(err, api.ErrFollowUpTooLate) || !strings.Contains(err.Error(), `"child"`) {
				t.Fatalf("late Enqueue: %v, want ErrFollowUpTooLate naming handler \"child\"", err)
			}
			b.idle()
			want := 0
			if c.ret == nil {
				want = 1
			}
			if n := enqueuedFor(b.records(), "child"); n != want {
				t.Fatalf("%d child jobs enqueued, want %d", n, want)
			}
			b.checkReplay()
		})
	}

	t.Run("after abandonment", func(t *testing.T) {
		b := setup(t, func(o *api.Options) { o.DeliveryTimeout = 2 * time.Second })
		started, proceed, errs := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		if err := api.Handle(b.eng, "child", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := api.Handle(b.eng, "parent", func(_ context.Context, d *api.Delivery, _ msg) error {
			close(started)
			<-proceed // ignores its cancellation past C
			errs <- d.Enqueue("child", msg{})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.start()
		id := b.enqueue("parent", msg{})
		<-started
		b.moveTo(t0, ms(1500)) // P: notified
		b.moveTo(t0, ms(1625)) // C: abandoned
		close(proceed)
		if err := <-errs; !errors.Is(err, api.ErrFollowUpTooLate) {
			t.Fatalf("Enqueue after abandonment: %v, want ErrFollowUpTooLate", err)
		}
		if err := api.WaitQuarantine(b.eng); err != nil {
			t.Fatal(err)
		}
		b.idle()
		if _, o := b.lastSettlement(id); o.Code != api.CodeDeliveryTimeout {
			t.Fatalf("settlement %+v, want %s", *o, api.CodeDeliveryTimeout)
		}
		if n := enqueuedFor(b.records(), "child"); n != 0 {
			t.Fatalf("%d child jobs enqueued by an abandoned attempt", n)
		}
		b.checkReplay()
	})

	t.Run("after hand-over", func(t *testing.T) {
		// The pipeline hands the list to the settlement once; from then
		// on the list is closed.
		b := setup(t, nil)
		var late error
		if err := api.Handle(b.eng, "child", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := api.Handle(b.eng, "parent", func(_ context.Context, d *api.Delivery, _ msg) error {
			if err := d.Enqueue("child", msg{N: 1}); err != nil {
				return err
			}
			if n := api.TakeFollowUps(d); n != 1 {
				return fmt.Errorf("handed over %d follow-ups, want 1", n)
			}
			late = d.Enqueue("child", msg{N: 2})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		b.start()
		id := b.enqueue("parent", msg{})
		b.idle()
		b.wantStatus(id, api.JobCompleted)
		if !errors.Is(late, api.ErrFollowUpTooLate) {
			t.Fatalf("Enqueue after the hand-over: %v, want ErrFollowUpTooLate", late)
		}
	})
}

// DL-38, JB-1: Enqueue, SetValue and Register are safe for concurrent use
// by goroutines the handler waits for: every follow-up added concurrently
// is journaled with the settlement, and every value is released once.
func TestJB1_DL38_ConcurrentFollowUpsAreAllEnqueued(t *testing.T) {
	const n = 32
	var rec recorder
	b := setup(t, nil)
	if err := api.Handle(b.eng, "child", func(context.Context, *api.Delivery, msg) error { return nil }); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 3*n)
	if err := api.Handle(b.eng, "parent", func(_ context.Context, d *api.Delivery, _ msg) error {
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-gate
				errs <- d.Enqueue("child", msg{N: i})
				d.SetValue(fmt.Sprint(i), releaser{&rec, "v"})
				errs <- d.Scope().Register(fmt.Sprint(i), closer(func() error { rec.add("close"); return nil }))
			})
		}
		close(gate)
		wg.Wait()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	id := b.enqueue("parent", msg{})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := enqueuedFor(b.records(), "child"); got != n {
		t.Fatalf("%d of %d concurrent follow-ups enqueued", got, n)
	}
	if got, want := strings.Join(rec.get(), " "), strings.TrimSpace(strings.Repeat("release:v ", n)+strings.Repeat("close ", n)); got != want {
		t.Fatalf("cleanup %q, want %d releases then %d closes", got, n, n)
	}
	b.checkReplay()
}

// JB-3, DL-14: Permanent and Retryable with an empty code and a nil error
// settle with code HANDLER_ERROR and the message "<class> HANDLER_ERROR",
// never a blank code or a message with a dangling space.
func TestJB3_HandlerErrorWithoutCodeOrCause(t *testing.T) {
	for _, c := range []struct {
		err       error
		code      string // the HandlerError's own Code
		text      string
		kind      record.Kind
		class     string
		permanent bool
	}{
		{api.Permanent("", nil), api.CodeHandlerError, "permanent HANDLER_ERROR", record.KindAttemptBuried, "permanent", true},
		{api.Retryable("", nil), api.CodeHandlerError, "retryable HANDLER_ERROR", record.KindAttemptRetryScheduled, "retryable", false},
		{api.Permanent("", errors.New("boom")), api.CodeHandlerError, "permanent HANDLER_ERROR: boom", record.KindAttemptBuried, "permanent", true},
		{&api.HandlerError{Permanent: true}, "", "permanent HANDLER_ERROR", record.KindAttemptBuried, "permanent", true},
	} {
		t.Run(c.text, func(t *testing.T) {
			if got := c.err.Error(); got != c.text {
				t.Fatalf("Error() = %q, want %q", got, c.text)
			}
			var he *api.HandlerError
			if !errors.As(c.err, &he) || he.Permanent != c.permanent || he.Code != c.code {
				t.Fatalf("%#v", c.err)
			}
			b := setup(t, func(o *api.Options) { o.MaxAttempts = 2 })
			if err := api.Handle(b.eng, "work", func(context.Context, *api.Delivery, msg) error { return c.err }); err != nil {
				t.Fatal(err)
			}
			b.start()
			id := b.enqueue("work", msg{})
			b.idle()
			r, o := b.lastSettlement(id)
			if r.Kind() != c.kind || o.Code != api.CodeHandlerError || o.Class != c.class || o.Error != c.text {
				t.Fatalf("settlement %s %+v, want %s code %s class %s error %q", r.Kind(), *o, c.kind, api.CodeHandlerError, c.class, c.text)
			}
			b.checkReplay()
		})
	}
}
