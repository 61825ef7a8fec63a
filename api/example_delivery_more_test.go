package api_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/quire-dev/quire/api"
)

// The examples of this file cover the attempt's view from a handler or a
// middleware (Delivery, Scope, Deadline, Cancellation), the termination
// hook's (Termination), MiddlewareFuncs, Lifecycle.Live and the error and
// status types. Engines are opened with exampleOptions (example_test.go).

// A job's id is the same on every attempt, so it is the idempotency key
// to give an external system: here a payment provider that remembers the
// keys it has seen, so that a retry after a lost response charges once.
func ExampleDelivery_JobID() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	charged := map[string]bool{} // the provider's idempotency keys
	if err := api.Handle(eng, "charge", func(ctx context.Context, d *api.Delivery, in greeting) error {
		if charged[d.JobID()] {
			fmt.Println("attempt", d.Attempt(), "- already charged:", in.Name)
			return nil
		}
		charged[d.JobID()] = true
		fmt.Println("attempt", d.Attempt(), "- charged:", in.Name)
		return errors.New("connection reset before the provider's response")
	}, api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "charge", greeting{Name: "order 1001"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	clk.Advance(time.Second) // the retry's backoff
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, "after", job.Attempts, "attempts")
	// Output:
	// attempt 1 - charged: order 1001
	// attempt 2 - already charged: order 1001
	// completed after 2 attempts
}

// A handler can change course on a retry: the first attempt sends through
// the primary provider, later ones through the fallback.
func ExampleDelivery_Attempt() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "sms", func(ctx context.Context, d *api.Delivery, in greeting) error {
		provider := "primary"
		if d.Attempt() > 1 {
			provider = "fallback"
		}
		fmt.Printf("attempt %d: text %s via %s\n", d.Attempt(), in.Name, provider)
		if provider == "primary" {
			return errors.New("primary provider: 503")
		}
		return nil
	}, api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "sms", greeting{Name: "+44 20 7946 0018"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	clk.Advance(time.Second) // the retry's backoff
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// attempt 1: text +44 20 7946 0018 via primary
	// attempt 2: text +44 20 7946 0018 via fallback
}

// One function can serve several handler names and tell them apart.
func ExampleDelivery_Handler() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Workers = 1 // one attempt at a time, so that the lines come in order
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	notify := func(ctx context.Context, d *api.Delivery, in greeting) error {
		switch d.Handler() {
		case "notify_email":
			fmt.Println("email", in.Name)
		case "notify_push":
			fmt.Println("push notification to", in.Name)
		}
		return nil
	}
	for _, name := range []string{"notify_email", "notify_push"} {
		if err := api.Handle(eng, name, notify); err != nil {
			log.Fatal(err)
		}
	}
	for _, name := range []string{"notify_email", "notify_push"} {
		if _, err := eng.Enqueue(ctx, name, greeting{Name: "Ada"}); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// email Ada
	// push notification to Ada
}

// A global middleware counts attempts per queue, as a metrics exporter
// would label them.
func ExampleDelivery_Queue() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	var mu sync.Mutex
	attempts := map[string]int{}
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "metrics",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			attempts[d.Queue()]++
			return nil
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "send", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{"mail", "mail", "default"} {
		if _, err := eng.Enqueue(ctx, "send", greeting{Name: "Ada"}, api.OnQueue(q)); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(attempts) // fmt prints a map's keys sorted
	// Output: map[default:1 mail:2]
}

// Middleware sees workflow steps and plain jobs alike; WorkflowID tells a
// step from a job. Here an audit trail is kept per workflow.
func ExampleDelivery_WorkflowID() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	var mu sync.Mutex
	audit := map[string][]string{} // workflow id ("" for jobs) -> attempts
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "audit",
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			mu.Lock()
			defer mu.Unlock()
			audit[d.WorkflowID()] = append(audit[d.WorkflowID()], d.Handler())
			return nil
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return nil, nil }
	if err := eng.Register(api.NewWorkflow("signup").Then("create", step).Then("welcome", step)); err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "cleanup", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Dispatch(ctx, "signup", api.State{"user": "ann"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "cleanup", greeting{Name: "tmp"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("workflow:", audit[id])
	fmt.Println("jobs:", audit[""])
	// Output:
	// workflow: [signup/create signup/welcome]
	// jobs: [cleanup]
}

// pooledConn is a database connection checked out of a pool for one
// attempt. As a Releaser stored with SetValue, it goes back to the pool
// when the attempt ends, however it ends.
type pooledConn struct{ id int }

func (c *pooledConn) Release() { fmt.Println("conn", c.id, "back to the pool") }

// Middleware hands a handler what it prepared for the attempt through
// attempt-local values: here a pooled connection, which the engine gives
// back when the attempt ends.
func ExampleDelivery_SetValue() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "db",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			fmt.Println("conn 7 checked out")
			d.SetValue("conn", &pooledConn{id: 7})
			return nil
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "order", func(ctx context.Context, d *api.Delivery, in greeting) error {
		v, _ := d.Value("conn")
		fmt.Println("insert order for", in.Name, "on conn", v.(*pooledConn).id)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "order", greeting{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// conn 7 checked out
	// insert order for Ada on conn 7
	// conn 7 back to the pool
}

// A handler reads what middleware evaluated once for its attempt, here
// feature flags; a key nobody set reports false.
func ExampleDelivery_Value() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "flags",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			d.SetValue("flags", map[string]bool{"new_template": d.Handler() == "welcome"})
			return nil
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "welcome", func(ctx context.Context, d *api.Delivery, in greeting) error {
		template := "classic"
		if flags, ok := d.Value("flags"); ok && flags.(map[string]bool)["new_template"] {
			template = "new"
		}
		_, hasTenant := d.Value("tenant")
		fmt.Println("welcome", in.Name, "with the", template, "template; tenant set:", hasTenant)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "welcome", greeting{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: welcome Ada with the new template; tenant set: false
}

// Resources registered on the attempt scope are closed by the engine when
// the attempt ends, the last registered first. Once the attempt has ended,
// Register refuses (a goroutine the handler left behind would see this),
// and the caller keeps the resource and must close it.
func ExampleScope_Register() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	var scope *api.Scope
	if err := api.Handle(eng, "thumbnail", func(ctx context.Context, d *api.Delivery, in greeting) error {
		scope = d.Scope()
		if err := scope.Register("download", namedCloser("temp file "+in.Name)); err != nil {
			return err
		}
		if err := scope.Register("upload", namedCloser("upload session")); err != nil {
			return err
		}
		fmt.Println("resized", in.Name)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "thumbnail", greeting{Name: "cat.png"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	late := namedCloser("late upload session")
	if err := scope.Register("late", late); errors.Is(err, api.ErrScopeClosed) {
		late.Close()
	}
	// Output:
	// resized cat.png
	// closed upload session
	// closed temp file cat.png
	// closed late upload session
}

// Middleware opens a resource for the attempt and registers it on the
// scope; the handler resolves it by key.
func ExampleScope_Lookup() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "db",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			return d.Scope().Register("db", namedCloser("db session"))
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "report", func(ctx context.Context, d *api.Delivery, in greeting) error {
		db, ok := d.Scope().Lookup("db")
		if !ok {
			return api.Permanent("NO_DB", nil)
		}
		fmt.Printf("query sales for %s on the %s\n", in.Name, db)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "report", greeting{Name: "January"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// query sales for January on the db session
	// closed db session
}

// A liveness probe: a process whose engine is no longer live should be
// restarted, and restarting replays the journal.
func ExampleLifecycle_Live() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	healthz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l := eng.Lifecycle(); !l.Live() {
			http.Error(w, l.String(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	probe := func() {
		rec := httptest.NewRecorder()
		healthz.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	probe()
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
	probe()
	// Output:
	// 200 ok
	// 503 stopped
}

// A handler waiting on something outside the engine selects on Done too,
// so that it gives up when the attempt is told to stop: here at its
// deadline, 1.5 s into a 2 s delivery timeout.
func ExampleCancellation_Done() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	replies := make(chan string) // the carrier never answers
	waiting := make(chan struct{})
	if err := api.Handle(eng, "book_pickup", func(ctx context.Context, d *api.Delivery, in greeting) error {
		close(waiting)
		select {
		case r := <-replies:
			fmt.Println("booked:", r)
			return nil
		case <-d.Cancellation().Done():
			reason, _, _ := d.Cancellation().Reason()
			fmt.Println("gave up waiting for the carrier:", reason)
			return api.Retryable("CARRIER_NO_REPLY", ctx.Err()) // retried later
		}
	}, api.DeliveryTimeout(2*time.Second)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "book_pickup", greeting{Name: "parcel 17"})
	if err != nil {
		log.Fatal(err)
	}
	<-waiting
	clk.Advance(1500 * time.Millisecond)
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, job.LastCode)
	// Output:
	// gave up waiting for the carrier: delivery_timeout
	// pending CARRIER_NO_REPLY
}

// A metrics middleware tells attempts that were cancelled from those that
// failed on their own: its After checks IsCancelled.
func ExampleCancellation_IsCancelled() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "metrics",
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			switch {
			case d.Cancellation().IsCancelled():
				fmt.Println("timeouts_total +1")
			case err != nil:
				fmt.Println("failures_total +1")
			default:
				fmt.Println("successes_total +1")
			}
			return nil
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	started := make(chan struct{}, 1)
	if err := api.Handle(eng, "fetch", func(ctx context.Context, d *api.Delivery, in greeting) error {
		started <- struct{}{}
		if in.Name == "slow.example.com" {
			<-ctx.Done() // the request hangs until the attempt's deadline
			return ctx.Err()
		}
		return nil
	}, api.DeliveryTimeout(2*time.Second), api.MaxAttempts(1)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for _, host := range []string{"fast.example.com", "slow.example.com"} {
		if _, err := eng.Enqueue(ctx, "fetch", greeting{Name: host}); err != nil {
			log.Fatal(err)
		}
		<-started
		if host == "slow.example.com" {
			clk.Advance(1500 * time.Millisecond)
		}
		if err := eng.WaitIdle(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// successes_total +1
	// timeouts_total +1
}

// Reason reports nothing until the attempt is cancelled. A deadline-driven
// reason carries the deadline's instant, not the later instant at which
// the engine noticed it.
func ExampleCancellation_Reason() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	started := make(chan struct{})
	if err := api.Handle(eng, "export", func(ctx context.Context, d *api.Delivery, in greeting) error {
		_, _, cancelled := d.Cancellation().Reason()
		fmt.Println("cancelled at start:", cancelled)
		close(started)
		<-ctx.Done()
		reason, at, _ := d.Cancellation().Reason()
		fmt.Println("cancelled:", reason, "at", at.Format("15:04:05.000"))
		return ctx.Err()
	}, api.DeliveryTimeout(2*time.Second)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "export", greeting{Name: "invoices"}); err != nil {
		log.Fatal(err)
	}
	<-started
	clk.Advance(1600 * time.Millisecond) // past the deadline at 1.5 s
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("noticed by", clk.Now().Format("15:04:05.000"))
	// Output:
	// cancelled at start: false
	// cancelled: delivery_timeout at 10:00:01.500
	// noticed by 10:00:01.600
}

// A handler forwards its deadline to a downstream service that takes an
// absolute instant, so that the service stops working for it in time.
func ExampleDeadline_At() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "render", func(ctx context.Context, d *api.Delivery, in greeting) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://render.internal/pdf", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Request-Deadline", d.Deadline().At().UTC().Format(time.RFC3339Nano))
		fmt.Println("Request-Deadline:", req.Header.Get("Request-Deadline"))
		return nil
	}, api.DeliveryTimeout(10*time.Second)); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "render", greeting{Name: "invoice 7"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: Request-Deadline: 2026-01-05T10:00:09Z
}

// Remaining is read at the instant of the call. A handler that has used
// most of its budget hands the rest of its work to a follow-up job rather
// than start something it cannot finish.
func ExampleDeadline_Remaining() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "thumbnails", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("thumbnails for", in.Name, "with", d.Deadline().Remaining(), "left")
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "transcode", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("transcode", in.Name, "with", d.Deadline().Remaining(), "left")
		clk.Advance(15 * time.Second) // the transcoding (the manual clock stands in for the work)
		if left := d.Deadline().Remaining(); left < 5*time.Second {
			fmt.Println("only", left, "left: thumbnails in a follow-up job")
			return d.Enqueue("thumbnails", in)
		}
		return nil
	}, api.DeliveryTimeout(20*time.Second)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "transcode", greeting{Name: "talk.mp4"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// transcode talk.mp4 with 19s left
	// only 4s left: thumbnails in a follow-up job
	// thumbnails for talk.mp4 with 29s left
}

// Before runs on the way in. One that returns an error stops the forward
// pass: the handler does not run, and the middleware already entered see
// the error in their After.
func ExampleMiddlewareFuncs_Before() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{
		api.MiddlewareFuncs{
			Label: "logging",
			AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
				fmt.Println("attempt", d.Attempt(), "of", d.Handler(), "ended:", err)
				return nil
			},
		},
		api.MiddlewareFuncs{
			Label: "quota",
			BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
				return api.Retryable("QUOTA_EXCEEDED", errors.New("tenant acme: 1000 calls this hour"))
			},
		},
	}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "geocode", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("never runs")
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "geocode", greeting{Name: "10 Downing St"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: attempt 1 of geocode ended: retryable QUOTA_EXCEEDED: tenant acme: 1000 calls this hour
}

// dbTx is a database transaction, begun for one attempt.
type dbTx struct{ job string }

// After runs on the way out with the result so far, nil on success: a
// unit-of-work middleware commits or rolls back the transaction its
// Before began.
func ExampleMiddlewareFuncs_After() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "unit_of_work",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			d.SetValue("tx", &dbTx{job: d.Handler()})
			return nil
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			v, _ := d.Value("tx")
			if err != nil {
				fmt.Println("rollback", v.(*dbTx).job, "-", err)
				return nil
			}
			fmt.Println("commit", v.(*dbTx).job)
			return nil // an error here would fail the attempt
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "import", func(ctx context.Context, d *api.Delivery, in greeting) error {
		if in.Name == "broken.csv" {
			return api.Permanent("BAD_CSV", errors.New("header row missing"))
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for _, file := range []string{"users.csv", "broken.csv"} {
		if _, err := eng.Enqueue(ctx, "import", greeting{Name: file}); err != nil {
			log.Fatal(err)
		}
		if err := eng.WaitIdle(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// commit import
	// rollback import - permanent BAD_CSV: header row missing
}

// Name is the Label: the journal and the errors of the pipeline name the
// middleware by it, as here where its Before panics.
func ExampleMiddlewareFuncs_Name() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	tenant := api.MiddlewareFuncs{
		Label: "tenant",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			panic("tenant directory not loaded") // a bug
		},
	}
	fmt.Println(tenant.Name())
	opts.Middleware = []api.Middleware{tenant}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "bill", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "bill", greeting{Name: "acme"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.LastCode)
	fmt.Println(job.LastError)
	// Output:
	// tenant
	// MIDDLEWARE_PANICKED
	// panic in Before of middleware "tenant" (Options.Middleware[0]): tenant directory not loaded
}

// recordLease is a lock on a customer record, held for one attempt. As a
// Releaser stored with SetValue it is given back when the attempt ends,
// unless a termination hook takes it.
type recordLease struct{ record string }

func (l *recordLease) Release() { fmt.Println("engine released the lease on", l.record) }

// leaseMiddleware is the middleware of the termination examples. Its
// Before takes a lease on the record the job syncs (the attempt-local
// value "lease") and opens a CRM session (the scope resource "session");
// its After, which writes the sync's outcome on the record, is what its
// termination hook onTermination stands in for when it cannot run.
func leaseMiddleware(onTermination func(ctx context.Context, t *api.Termination) error) api.MiddlewareFuncs {
	return api.MiddlewareFuncs{
		Label: "lease",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			d.SetValue("lease", &recordLease{record: "customer-42"})
			return d.Scope().Register("session", namedCloser("crm session"))
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			fmt.Println("sync outcome written on customer-42")
			return nil
		},
		OnTerminationFunc: onTermination,
	}
}

// brokenMetrics is a middleware whose After panics, a bug. The panic stops
// the unwind (DL-28): the After of every middleware outside it never runs,
// and their termination hooks run instead.
var brokenMetrics = api.MiddlewareFuncs{
	Label: "metrics",
	AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
		panic("histogram sync_seconds is not registered")
	},
}

// runSync runs one attempt of a "sync" job on queue "crm" with the
// handler middleware mw, outermost first, then closes the engine. With
// leaseMiddleware then brokenMetrics, the attempt's handler succeeds, the
// metrics After panics, and the lease middleware's hook runs instead of
// its After. It returns the job's id.
func runSync(mw ...api.Middleware) string {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "sync", func(ctx context.Context, d *api.Delivery, in greeting) error {
		return nil
	}, api.OnQueue("crm"), api.WithMiddleware(mw...)); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "sync", greeting{Name: "customer-42"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	return id
}

// OnTermination is the cleanup for when After could not run: here the
// inner metrics middleware's After panics, so the lease middleware's After
// never starts and its hook runs instead. Then the engine releases the
// attempt-local values and closes the scope.
func ExampleMiddlewareFuncs_OnTermination() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		fmt.Println("hook: mark customer-42 for review, exit", t.Exit())
		return nil
	}), brokenMetrics)
	// Output:
	// hook: mark customer-42 for review, exit not_started
	// engine released the lease on customer-42
	// closed crm session
}

// runStuck runs one attempt of a "sync" job whose handler ignores its
// context and hangs, with the handler middleware mw, a 2 s delivery
// timeout and a single attempt. The attempt is told to stop at its
// deadline, 1.5 s in, and abandoned at its cooperative deadline, 1.625 s
// in: the termination hooks run then, while the handler still hangs, and
// the engine withholds the attempt scope (DL-37). runStuck prints the
// job's status, lets the handler return, waits for the engine to close the
// scope, and closes the engine.
func runStuck(mw ...api.Middleware) {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	// Registered first, the watch resource is closed last of the scope.
	scopeClosed := make(chan struct{})
	watch := api.MiddlewareFuncs{Label: "watch", BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
		return d.Scope().Register("watch", closer(func() error { close(scopeClosed); return nil }))
	}}
	started, hang := make(chan struct{}), make(chan struct{})
	if err := api.Handle(eng, "sync", func(ctx context.Context, d *api.Delivery, in greeting) error {
		close(started)
		<-hang // a call that takes no context
		return nil
	}, api.OnQueue("crm"), api.DeliveryTimeout(2*time.Second), api.MaxAttempts(1),
		api.WithMiddleware(append([]api.Middleware{watch}, mw...)...)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "sync", greeting{Name: "customer-42"})
	if err != nil {
		log.Fatal(err)
	}
	<-started
	clk.Advance(1625 * time.Millisecond)
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println("job", job.Status, job.LastCode)
	close(hang)
	<-scopeClosed
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
}

// A hook undoes what its middleware's Before did, keyed by the job: here
// a lock taken for the job, which the After would have dropped.
func ExampleTermination_JobID() {
	var mu sync.Mutex
	locks := map[string]bool{} // a lock service's locks, by job id
	lock := api.MiddlewareFuncs{
		Label: "lock",
		BeforeFunc: func(ctx context.Context, d *api.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			locks[d.JobID()] = true
			return nil
		},
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			mu.Lock()
			defer mu.Unlock()
			delete(locks, d.JobID())
			return nil
		},
		OnTerminationFunc: func(ctx context.Context, t *api.Termination) error {
			mu.Lock()
			defer mu.Unlock()
			delete(locks, t.JobID())
			return nil
		},
	}
	id := runSync(lock, brokenMetrics)
	fmt.Println("job's lock held:", locks[id], "- locks held:", len(locks))
	// Output: job's lock held: false - locks held: 0
}

// The hook's log line names the attempt's handler.
func ExampleTermination_Handler() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		fmt.Println("cleanup after a", t.Handler(), "attempt")
		return nil
	}), brokenMetrics)
	// Output:
	// cleanup after a sync attempt
	// engine released the lease on customer-42
	// closed crm session
}

// The hook counts cleanups by queue, as a metrics exporter would label them.
func ExampleTermination_Queue() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		fmt.Printf("termination_cleanups_total{queue=%q} +1\n", t.Queue())
		return nil
	}), brokenMetrics)
	// Output:
	// termination_cleanups_total{queue="crm"} +1
	// engine released the lease on customer-42
	// closed crm session
}

// The hook escalates only when cleanups repeat across attempts.
func ExampleTermination_Attempt() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		if t.Attempt() > 1 {
			fmt.Println("page the on-call: cleanup on attempt", t.Attempt())
			return nil
		}
		fmt.Println("log: cleanup on attempt", t.Attempt())
		return nil
	}), brokenMetrics)
	// Output:
	// log: cleanup on attempt 1
	// engine released the lease on customer-42
	// closed crm session
}

// For a workflow step, the hook can flag the workflow for an operator;
// for a plain job WorkflowID is "".
func ExampleTermination_WorkflowID() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	flagged := make(chan string, 1)
	hook := func(ctx context.Context, t *api.Termination) error {
		if t.WorkflowID() != "" {
			flagged <- t.WorkflowID()
		}
		return nil
	}
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return nil, nil }
	wf := api.NewWorkflow("onboarding").WithMiddleware(leaseMiddleware(hook), brokenMetrics).Then("sync", step)
	if err := eng.Register(wf); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Dispatch(ctx, "onboarding", api.State{"customer": "customer-42"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	info, err := eng.Workflow(ctx, <-flagged)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("review workflow", info.Name, "at step", info.StepName, "- status", info.Status)
	// Output:
	// engine released the lease on customer-42
	// closed crm session
	// review workflow onboarding at step sync - status running
}

// Cause says why the hooks run, which tells the hook what it may assume.
func ExampleTermination_Cause() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		switch t.Cause() {
		case api.TerminationPanicked:
			fmt.Println("a middleware panicked: the sync's outcome is unknown, mark customer-42 for review")
		case api.ExecutionCancelled:
			fmt.Println("the attempt was abandoned: the handler may still be writing")
		}
		return nil
	}), brokenMetrics)
	// Output:
	// a middleware panicked: the sync's outcome is unknown, mark customer-42 for review
	// engine released the lease on customer-42
	// closed crm session
}

// Reason is the attempt's cancellation reason, when one ended it; here the
// delivery timeout, with the deadline's instant.
func ExampleTermination_Reason() {
	runStuck(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		if reason, at, ok := t.Reason(); ok {
			fmt.Println("attempt stopped:", reason, "at", at.Format("15:04:05.000"))
		}
		return nil
	}))
	// Output:
	// attempt stopped: delivery_timeout at 10:00:01.500
	// job buried DELIVERY_TIMEOUT
	// engine released the lease on customer-42
	// closed crm session
}

// Exit is how the hook's own middleware's After ended. Hooks run inner
// first: the metrics middleware's After panicked, and the lease
// middleware's After, outside it, never started.
func ExampleTermination_Exit() {
	metrics := brokenMetrics
	metrics.OnTerminationFunc = func(ctx context.Context, t *api.Termination) error {
		fmt.Println("metrics: After", t.Exit())
		return nil
	}
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		fmt.Println("lease: After", t.Exit())
		return nil
	}), metrics)
	// Output:
	// metrics: After panicked
	// lease: After not_started
	// engine released the lease on customer-42
	// closed crm session
}

// A hook whose handler is still running must not dispose of what the
// handler uses: the engine withholds the attempt scope until it returns.
func ExampleTermination_ExecutionReturned() {
	runStuck(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		if !t.ExecutionReturned() {
			fmt.Println("handler still running: leave the crm session open")
		}
		return nil
	}))
	// Output:
	// handler still running: leave the crm session open
	// job buried DELIVERY_TIMEOUT
	// engine released the lease on customer-42
	// closed crm session
}

// The hook's deadline is its share of the time left for cleanup; it bounds
// the calls the hook makes (its ctx carries the same deadline).
func ExampleTermination_Deadline() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		fmt.Println("return the lease within", t.Deadline().Remaining(), "- by", t.Deadline().At().Format("15:04:05.000"))
		return nil
	}), brokenMetrics)
	// Output:
	// return the lease within 29.75s - by 10:00:29.750
	// engine released the lease on customer-42
	// closed crm session
}

// The hook resolves the attempt's resources from its still-open scope,
// before the engine closes them.
func ExampleTermination_Lookup() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		if s, ok := t.Lookup("session"); ok {
			fmt.Printf("roll back the half-written sync on the %s\n", s)
		}
		return nil
	}), brokenMetrics)
	// Output:
	// roll back the half-written sync on the crm session
	// engine released the lease on customer-42
	// closed crm session
}

// The hook reads the attempt-local values; those it leaves are released by
// the engine after the hooks.
func ExampleTermination_Value() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		if v, ok := t.Value("lease"); ok {
			fmt.Println("mark", v.(*recordLease).record, "for review")
		}
		return nil
	}), brokenMetrics)
	// Output:
	// mark customer-42 for review
	// engine released the lease on customer-42
	// closed crm session
}

// A hook that gives a value back itself takes it, so that the engine does
// not release it a second time.
func ExampleTermination_TakeValue() {
	runSync(leaseMiddleware(func(ctx context.Context, t *api.Termination) error {
		if v, ok := t.TakeValue("lease"); ok {
			fmt.Println("hook returned the lease on", v.(*recordLease).record, "with a review note")
		}
		return nil
	}), brokenMetrics)
	// Output:
	// hook returned the lease on customer-42 with a review note
	// closed crm session
}

// The hook's cleanup cancellation is its own, fired at its deadline,
// whatever happened to the attempt. A hook that calls a service that does
// not answer gives up then; the settlement records the cleanup failure.
func ExampleTermination_Cancellation() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	unreachable := make(chan struct{}) // the lock service never answers
	hookDeadline, gaveUp := make(chan time.Time, 1), make(chan string, 1)
	hook := func(ctx context.Context, t *api.Termination) error {
		hookDeadline <- t.Deadline().At()
		select {
		case <-unreachable:
			return nil
		case <-t.Cancellation().Done():
			reason, at, _ := t.Cancellation().Reason()
			gaveUp <- fmt.Sprint("hook gave up on the lock service: ", reason, " at ", at.Format("15:04:05.000"))
			return errors.New("lease on customer-42 not returned: it expires on its own")
		}
	}
	if err := api.Handle(eng, "sync", func(ctx context.Context, d *api.Delivery, in greeting) error {
		return nil
	}, api.MaxAttempts(1), api.WithMiddleware(leaseMiddleware(hook), brokenMetrics)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "sync", greeting{Name: "customer-42"})
	if err != nil {
		log.Fatal(err)
	}
	clk.Set(<-hookDeadline)
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-gaveUp)
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, job.LastCode)
	fmt.Println(job.LastError)
	// Output:
	// engine released the lease on customer-42
	// closed crm session
	// hook gave up on the lock service: delivery_timeout at 10:00:29.750
	// buried MIDDLEWARE_PANICKED
	// histogram sync_seconds is not registered; attempt cleanup failed: DELIVERY_TERMINATION_CLEANUP_FAILED: termination hook of middleware "lease" did not return by its deadline 2026-01-05T10:00:29.75Z
}

// A NameError names what a call named and why it was refused; errors.Is
// matches its reason.
func ExampleNameError() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	_, err = eng.Enqueue(ctx, "send_invoice", greeting{Name: "ACME"}) // never registered
	var ne *api.NameError
	if errors.As(err, &ne) {
		fmt.Println(ne.Kind, ne.Name, errors.Is(err, api.ErrUnknownHandler))
	}
	err = eng.PauseQueue(ctx, "")
	fmt.Println(errors.Is(err, api.ErrInvalidName), err)
	// Output:
	// handler send_invoice true
	// true quire: queue "": must not be empty
}

// A WorkflowError names the workflow, the step and the option of an
// invalid definition. Register returns it, and it matches
// ErrInvalidOption.
func ExampleWorkflowError() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	step := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) { return nil, nil }

	err = eng.Register(api.NewWorkflow("payout").Then("charge", step, api.MaxAttempts(0)))
	var we *api.WorkflowError
	if errors.As(err, &we) {
		fmt.Printf("workflow %s, step %s, option %s: %s\n", we.Workflow, we.Step, we.Option, we.Reason)
	}
	err = eng.Register(api.NewWorkflow("import").Then("fetch", step).
		MustCompleteWithin(24 * time.Hour).OnDeadline("import_timeout"))
	fmt.Println(errors.Is(err, api.ErrInvalidOption), err)
	// Output:
	// workflow payout, step charge, option MaxAttempts: 0 must be 1..100
	// true quire: workflow "import" OnDeadline: deadline handler "import_timeout" is not registered
}

// A middleware reads how an attempt failed from its HandlerError: here it
// pages only for permanent failures, which no retry will fix.
func ExampleHandlerError() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.Middleware = []api.Middleware{api.MiddlewareFuncs{
		Label: "alerts",
		AfterFunc: func(ctx context.Context, d *api.Delivery, err error) error {
			var he *api.HandlerError
			if errors.As(err, &he) && he.Permanent {
				fmt.Printf("page: %s job buried with %s (%v)\n", d.Handler(), he.Code, he.Err)
			}
			return nil
		},
	}}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "payout", func(ctx context.Context, d *api.Delivery, in greeting) error {
		if in.Name == "DE00 0000" {
			return api.Permanent("BAD_IBAN", errors.New("checksum mismatch"))
		}
		return api.Retryable("BANK_BUSY", nil)
	}); err != nil {
		log.Fatal(err)
	}
	for _, iban := range []string{"GB33 BUKB", "DE00 0000"} {
		if _, err := eng.Enqueue(ctx, "payout", greeting{Name: iban}); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: page: payout job buried with BAD_IBAN (checksum mismatch)
}

// Job is what Status reports: enough for an operator's view of a job that
// is failing and will be retried.
func ExampleJob() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "webhook", func(ctx context.Context, d *api.Delivery, in greeting) error {
		return api.Retryable("HTTP_502", errors.New("bad gateway from hooks.example.com"))
	}, api.OnQueue("webhooks"), api.MaxAttempts(5),
		api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Minute})); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "webhook", greeting{Name: "order.paid"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, err := eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s on %s: %s, attempt %d of %d, next at %s\n", job.Handler, job.Queue, job.Status,
		job.Attempts, job.MaxAttempts, job.AvailableAt.UTC().Format(time.TimeOnly))
	fmt.Println(job.LastCode, "-", job.LastError)
	// Output:
	// webhook on webhooks: pending, attempt 1 of 5, next at 10:01:00
	// HTTP_502 - retryable HTTP_502: bad gateway from hooks.example.com
}

// WorkflowInfo is what Workflow reports: where a workflow is, what it
// waits for and its public state.
func ExampleWorkflowInfo() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	draft := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"draft": "post-17.md"}, nil
	}
	publish := func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		return api.State{"url": "/blog/17"}, nil
	}
	if err := eng.Register(api.NewWorkflow("blog_post").
		Then("draft", draft).
		WaitForSignal("approved").Named("review").
		Then("publish", publish)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Dispatch(ctx, "blog_post", api.State{"author": "ann"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	info, err := eng.Workflow(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s, step %d of %d (%s), waiting for %v\n", info.Name, info.Status, info.Step+1, info.Steps, info.StepName, info.WaitingFor)
	fmt.Println("state:", info.State)

	if err := eng.Signal(ctx, id, "approved", nil); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	info, err = eng.Workflow(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Status, "at", info.Step, "of", info.Steps, "- state:", info.State)
	// Output:
	// blog_post: waiting_for_signal, step 2 of 3 (review), waiting for [approved]
	// state: map[author:ann draft:post-17.md]
	// completed at 3 of 3 - state: map[author:ann draft:post-17.md url:/blog/17]
}

// A Deadline prints as its instant, so it can go straight into a log line.
func ExampleDeadline_String() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "report", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Printf("report for %s due by %v\n", in.Name, d.Deadline())
		return nil
	}, api.DeliveryTimeout(10*time.Second)); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "report", greeting{Name: "march"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: report for march due by 2026-01-05T10:00:09Z
}
