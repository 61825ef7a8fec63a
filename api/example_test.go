package api_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// exampleOptions returns the options the examples open engines with: an
// in-memory filesystem, a manual clock and seeded id and jitter sources,
// so that every run prints the same thing. A program leaves FS, Clock,
// Entropy and Rand nil (the disk, the wall clock, crypto/rand).
func exampleOptions() (api.Options, *clocktest.Clock) {
	clk := clocktest.New(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	return api.Options{
		Dir:     "quire-data",
		FS:      vfs.NewMem(),
		Clock:   clk,
		Entropy: ulid.Monotonic(rand.NewChaCha8([32]byte{7}), 0),
		Rand:    rand.NewPCG(1, 2),
	}, clk
}

type greeting struct {
	Name string `msgpack:"name"`
}

func ExampleOpen() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)

	// Register handlers before Start, so that recovered jobs find them.
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("hello,", in.Name)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Lifecycle())
	// Output:
	// hello, Ada
	// ready
}

func ExampleOpen_invalidOptions() {
	_, err := api.Open(context.Background(), api.Options{Workers: -1})
	var oe *api.OptionError
	fmt.Println(errors.Is(err, api.ErrInvalidOption), errors.As(err, &oe), oe.Field)
	// Output: true true Options.Workers
}

// A journal is opened by one engine at a time; a second Open of it is
// refused with ErrLocked until the first engine is closed.
func ExampleOpen_locked() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	_, err = api.Open(ctx, opts)
	fmt.Println(errors.Is(err, api.ErrLocked))
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
	again, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer again.Close(ctx)
	fmt.Println(again.Lifecycle())
	// Output:
	// true
	// ready
}

// Open refuses a directory that holds files but no journal, and leaves it
// as it found it: no LOCK file, nothing else.
func ExampleOpen_notJournal() {
	opts, _ := exampleOptions()
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		log.Fatal(err)
	}
	f, err := opts.FS.Create(opts.FS.PathJoin(opts.Dir, "notes.txt"), vfs.WriteCategoryUnspecified)
	if err != nil {
		log.Fatal(err)
	}
	_ = f.Close()
	_, err = api.Open(context.Background(), opts)
	fmt.Println(errors.Is(err, api.ErrNotJournal))
	fmt.Println(opts.FS.List(opts.Dir))
	// Output:
	// true
	// [notes.txt] <nil>
}

func ExampleOptions() {
	opts, _ := exampleOptions()
	opts.Workers = 8                            // attempts running at once
	opts.Queues = []string{"critical", "email"} // served first, in this order
	opts.DeliveryTimeout = 10 * time.Second     // budget of one attempt
	opts.MaxAttempts = 5                        // the first attempt included
	opts.Backoff = api.BackoffPolicy{Kind: api.BackoffExponential, Base: 2 * time.Second, Max: time.Minute}
	opts.ShutdownTimeout = 20 * time.Second
	opts.SnapshotEvery = 50_000 // records between state snapshots (RL-12)

	ctx := context.Background()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "send", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "send", greeting{Name: "Grace"})
	if err != nil {
		log.Fatal(err)
	}
	job, err := eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Queue, job.MaxAttempts)
	// Output: default 5
}

func ExampleHandle() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)

	type resize struct {
		Image string `msgpack:"image"`
		Width int    `msgpack:"width"`
	}
	// The payload decodes into the handler's type. Options given to Handle
	// are defaults for the handler's jobs; each Enqueue may override them.
	err = api.Handle(eng, "resize", func(ctx context.Context, d *api.Delivery, in resize) error {
		fmt.Printf("resize %s to %dpx (queue %s)\n", in.Image, in.Width, d.Queue())
		return nil
	}, api.OnQueue("images"), api.MaxAttempts(5))
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "resize", resize{Image: "cat.png", Width: 640}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}

	// A name registers once.
	err = api.Handle(eng, "resize", func(ctx context.Context, d *api.Delivery, in resize) error { return nil })
	fmt.Println(errors.Is(err, api.ErrDuplicate))
	// Output:
	// resize cat.png to 640px (queue images)
	// true
}

func ExampleEngine_Enqueue() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "invoice", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}

	id, err := eng.Enqueue(ctx, "invoice", greeting{Name: "ACME"},
		api.OnQueue("billing"),
		api.WithPriority(api.High),
		api.Delay(time.Hour), // available one hour from now
		api.MaxAttempts(10),
		api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 30 * time.Second}),
		api.DeliveryTimeout(2*time.Minute),
		api.Unique(), // no second pending job for the same handler and payload
	)
	if err != nil {
		log.Fatal(err)
	}
	job, err := eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Queue, job.Priority, job.MaxAttempts, job.AvailableAt.UTC().Format(time.TimeOnly))

	// Unique: the same handler and payload return the pending job.
	again, err := eng.Enqueue(ctx, "invoice", greeting{Name: "ACME"}, api.Unique())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again == id)

	// Refused calls append nothing and say why.
	_, err = eng.Enqueue(ctx, "refund", greeting{Name: "ACME"})
	fmt.Println(errors.Is(err, api.ErrUnknownHandler))
	// Output:
	// pending billing high 10 11:00:00
	// true
	// true
}

func ExampleEngine_Status() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	job, err := eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Attempts)

	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Completed jobs are read from the journal's terminal index.
	job, err = eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Attempts)

	_, err = eng.Status(ctx, "job_unknown")
	fmt.Println(errors.Is(err, api.ErrNotFound))
	// Output:
	// pending 0
	// completed 1
	// true
}

// AwaitJob blocks until a job is completed or buried, and returns its
// status. Here the first attempt fails and the retry, due a backoff
// later on the example's manual clock, succeeds.
func ExampleEngine_AwaitJob() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	var calls atomic.Int32
	if err := api.Handle(eng, "charge", func(ctx context.Context, d *api.Delivery, in greeting) error {
		if calls.Add(1) == 1 {
			return api.Retryable("GATEWAY_BUSY", errors.New("gateway busy"))
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "charge", greeting{Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	clk.Advance(time.Minute) // past the retry's backoff
	job, err := eng.AwaitJob(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.Attempts, job.LastCode)
	// Output:
	// completed 2 GATEWAY_BUSY
}

func ExampleEngine_Start() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("hello,", in.Name)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	// Enqueued before Start: the job waits in the journal.
	if _, err := eng.Enqueue(ctx, "greet", greeting{Name: "Edsger"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("started")
	if err := eng.Start(ctx); err != nil { // returns at once
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// started
	// hello, Edsger
}

// Run blocks until its context is cancelled or the process gets SIGINT or
// SIGTERM, then closes the engine gracefully. Here a handler cancels it.
func ExampleEngine_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "stop", func(_ context.Context, d *api.Delivery, in struct{}) error {
		cancel()
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "stop", struct{}{}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Lifecycle())
	// Output: stopped
}

func ExampleEngine_RunOnce() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	var ran atomic.Int32
	if err := api.Handle(eng, "report", func(ctx context.Context, d *api.Delivery, in greeting) error {
		ran.Add(1)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"daily", "weekly"} {
		if _, err := eng.Enqueue(ctx, "report", greeting{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	later, err := eng.Enqueue(ctx, "report", greeting{Name: "monthly"}, api.Delay(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	// Process what is eligible now, then close (a cron-style worker).
	if err := eng.RunOnce(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ran", ran.Load(), eng.Lifecycle())

	// The delayed job stays pending in the journal for a later run.
	eng, err = api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	job, err := eng.Status(ctx, later)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status)
	// Output:
	// ran 2 stopped
	// pending
}

func ExampleEngine_Close() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	// Close waits for running attempts until its context ends; attempts
	// abandoned then are redelivered at the next Open.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := eng.Close(cctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Lifecycle())
	fmt.Println(eng.Close(ctx) == nil) // later calls return the first result
	_, err = eng.Enqueue(ctx, "greet", greeting{})
	fmt.Println(errors.Is(err, api.ErrClosed))
	// Output:
	// stopped
	// true
	// true
}

func ExampleEngine_Checkpoint() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	// The copy is written on the engine's filesystem (here in memory; on
	// disk, a path that does not exist yet, such as a new directory under
	// os.MkdirTemp). It holds every record acknowledged so far.
	if err := eng.Checkpoint("backup"); err != nil {
		log.Fatal(err)
	}
	j, err := journal.Open("backup", journal.Options{FS: opts.FS, Clock: opts.Clock, ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	fmt.Println("records in the copy:", j.LastSeq()) // run_started, job_enqueued
	// Output: records in the copy: 2
}

func ExampleEngine_JournalMetrics() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.DiskSlowThreshold = 500 * time.Millisecond // report writes slower than this
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	before := eng.JournalMetrics()
	if _, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	m := eng.JournalMetrics()
	// A monitoring loop would export these; DiskSlow counts writes or
	// syncs that ran past DiskSlowThreshold.
	fmt.Println("records:", m.Records-before.Records, "slow disk reports:", m.DiskSlow)
	// Output: records: 1 slow disk reports: 0
}

func ExampleEngine_Bury() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "charge", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "charge", greeting{Name: "duplicate order"}, api.Delay(time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	// Only a pending job can be buried.
	if err := eng.Bury(ctx, id); err != nil {
		log.Fatal(err)
	}
	job, err := eng.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Status, job.LastCode)
	fmt.Println(errors.Is(eng.Bury(ctx, id), api.ErrState))
	// Output:
	// buried BURIED_BY_OPERATOR
	// true
}

func ExampleEngine_Retry() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	var smtpUp atomic.Bool
	if err := api.Handle(eng, "mail", func(ctx context.Context, d *api.Delivery, in greeting) error {
		if !smtpUp.Load() {
			return errors.New("smtp down")
		}
		return nil
	}, api.MaxAttempts(1)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "mail", greeting{Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, job.LastError)

	smtpUp.Store(true)
	// Retry makes the buried job pending again with a fresh attempt budget.
	if err := eng.Retry(ctx, id); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ = eng.Status(ctx, id)
	fmt.Println(job.Status, job.Attempts)
	// Output:
	// buried smtp down
	// completed 2
}

func ExampleEngine_RetryBuried() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	var fixed atomic.Bool
	if err := api.Handle(eng, "sync", func(ctx context.Context, d *api.Delivery, in greeting) error {
		if !fixed.Load() {
			return api.Permanent("BAD_CONFIG", errors.New("missing API key"))
		}
		return nil
	}, api.OnQueue("crm")); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"alice", "bob", "carol"} {
		if _, err := eng.Enqueue(ctx, "sync", greeting{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}

	fixed.Store(true) // the configuration was repaired
	n, err := eng.RetryBuried(ctx, "crm")
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("requeued", n)
	// Output: requeued 3
}

func ExampleEngine_PauseQueue() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "mail", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("mail to", in.Name)
		return nil
	}, api.OnQueue("email")); err != nil {
		log.Fatal(err)
	}
	// Paused queues accept jobs but start none; the pause survives restarts.
	if err := eng.PauseQueue(ctx, "email"); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "mail", greeting{Name: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status)

	if err := eng.ResumeQueue(ctx, "email"); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// pending
	// mail to Ada
}

func ExampleEngine_ResumeQueue() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "mail", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("mail to", in.Name)
		return nil
	}, api.OnQueue("email")); err != nil {
		log.Fatal(err)
	}
	if err := eng.PauseQueue(ctx, "email"); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "mail", greeting{Name: "Grace"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// After a restart the queue is still paused until resumed.
	eng, err = api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "mail", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("mail to", in.Name)
		return nil
	}, api.OnQueue("email")); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("resuming")
	if err := eng.ResumeQueue(ctx, "email"); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// resuming
	// mail to Grace
}

// WaitIdle is for tests and simulations that drive the engine with a
// manual clock: move the clock, wait until the engine is quiescent, assert.
func ExampleEngine_WaitIdle() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "remind", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("reminder for", in.Name, "at", clk.Now().Format(time.TimeOnly))
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "remind", greeting{Name: "Ada"}, api.Delay(15*time.Minute)); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		clk.Advance(10 * time.Minute)
		if err := eng.WaitIdle(ctx); err != nil {
			log.Fatal(err)
		}
		fmt.Println("idle at", clk.Now().Format(time.TimeOnly))
	}
	// Output:
	// idle at 10:10:00
	// reminder for Ada at 10:20:00
	// idle at 10:20:00
	// idle at 10:30:00
}

// StateDigest lets a test check RL-7: the live state equals a fresh replay
// of the journal. Here the journal is read from a checkpoint.
func ExampleEngine_StateDigest() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	live, seq, err := eng.StateDigest(ctx)
	if err != nil {
		log.Fatal(err)
	}

	if err := eng.Checkpoint("copy"); err != nil {
		log.Fatal(err)
	}
	j, err := journal.Open("copy", journal.Options{FS: opts.FS, Clock: opts.Clock, ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	st := replay.New()
	it := j.Scan(1, math.MaxUint64)
	for it.Next() {
		if err := replay.Apply(st, it.Record()); err != nil {
			log.Fatal(err)
		}
	}
	if err := it.Err(); err != nil {
		log.Fatal(err)
	}
	it.Close()
	fmt.Printf("seq %d, live state equals replay: %v\n", seq, replay.Digest(st) == live)
	// Output: seq 4, live state equals replay: true
}

func ExampleEngine_Stats() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.SnapshotEvery = api.SnapshotEveryMin
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "noop", func(ctx context.Context, d *api.Delivery, in int) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 50; i++ { // 150 records: enqueued, started, succeeded
		if _, err := eng.Enqueue(ctx, "noop", i); err != nil {
			log.Fatal(err)
		}
		if err := eng.WaitIdle(ctx); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}

	// Open starts from the newest snapshot and replays only the records
	// after it (RL-12).
	eng, err = api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	st := eng.Stats()
	fmt.Println("last seq", st.LastSeq)
	fmt.Println("snapshot at", st.SnapshotSeq, "then", st.RecordsReplayed, "records")
	fmt.Println("open attempts recovered", st.Recovered)
	// Output:
	// last seq 165
	// snapshot at 100 then 65 records
	// open attempts recovered 0
}

func ExampleEngine_Lifecycle() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Lifecycle())
	if err := eng.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(eng.Lifecycle())
	// Output:
	// ready
	// stopped
}

func ExampleDelivery() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	opts.Backoff = api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second}
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	// A job may run more than once (after a failure, or a crash): handlers
	// use the job id and attempt number to stay idempotent.
	if err := api.Handle(eng, "flaky", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Printf("%s: attempt %d of a %s job on queue %s\n", in.Name, d.Attempt(), d.Handler(), d.Queue())
		if d.Attempt() == 1 {
			return errors.New("timeout talking to the bank")
		}
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "flaky", greeting{Name: "payout"}); err != nil {
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
	// payout: attempt 1 of a flaky job on queue default
	// payout: attempt 2 of a flaky job on queue default
}

func ExampleDelivery_Deadline() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	// With a 20 s timeout the handler should return within 19 s: the last
	// second is the engine's reserve for settling (DL-9).
	if err := api.Handle(eng, "export", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("deadline", d.Deadline().At().UTC().Format(time.TimeOnly), "remaining", d.Deadline().Remaining())
		return nil
	}, api.DeliveryTimeout(20*time.Second)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "export", greeting{}); err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: deadline 10:00:19 remaining 19s
}

func ExampleDelivery_Cancellation() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	started := make(chan struct{})
	if err := api.Handle(eng, "crawl", func(ctx context.Context, d *api.Delivery, in greeting) error {
		close(started)
		<-d.Cancellation().Done() // the same signal as ctx.Done()
		reason, at, _ := d.Cancellation().Reason()
		fmt.Println("cancelled:", reason, "at", at.UTC().Format(time.TimeOnly))
		return ctx.Err()
	}, api.DeliveryTimeout(2*time.Second), api.MaxAttempts(1)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "crawl", greeting{Name: "example.com"})
	if err != nil {
		log.Fatal(err)
	}
	<-started
	clk.Advance(1500 * time.Millisecond) // the handler's deadline
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status)
	// Output:
	// cancelled: delivery_timeout at 10:00:01
	// buried
}

func ExampleDelivery_Enqueue() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "receipt", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("receipt for", in.Name)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	// The follow-up is appended with the successful settlement, atomically:
	// it exists if and only if this attempt succeeds.
	if err := api.Handle(eng, "charge", func(ctx context.Context, d *api.Delivery, in greeting) error {
		fmt.Println("charge", in.Name, "attempt", d.Attempt())
		if err := d.Enqueue("receipt", in); err != nil {
			return err
		}
		if d.Attempt() == 1 {
			return errors.New("card network busy") // the follow-up is dropped
		}
		return nil
	}, api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: time.Second})); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := eng.Enqueue(ctx, "charge", greeting{Name: "Ada"}); err != nil {
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
	// charge Ada attempt 1
	// charge Ada attempt 2
	// receipt for Ada
}

func ExampleRetryable() {
	ctx := context.Background()
	opts, clk := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "fetch", func(ctx context.Context, d *api.Delivery, in greeting) error {
		// Retried under the job's policy, with a code for operators.
		return api.Retryable("UPSTREAM_503", errors.New("service unavailable"))
	}, api.MaxAttempts(2), api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 5 * time.Second})); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "fetch", greeting{})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, job.LastCode, job.AvailableAt.Sub(clk.Now()))
	clk.Advance(5 * time.Second)
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ = eng.Status(ctx, id)
	fmt.Println(job.Status, job.Attempts, job.LastCode)
	// Output:
	// pending UPSTREAM_503 5s
	// buried 2 UPSTREAM_503
}

func ExamplePermanent() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)
	if err := api.Handle(eng, "import", func(ctx context.Context, d *api.Delivery, in greeting) error {
		// No retry can fix bad input: bury the job at once.
		return api.Permanent("BAD_CSV", fmt.Errorf("%s: header row missing", in.Name))
	}, api.MaxAttempts(5)); err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	id, err := eng.Enqueue(ctx, "import", greeting{Name: "users.csv"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.WaitIdle(ctx); err != nil {
		log.Fatal(err)
	}
	job, _ := eng.Status(ctx, id)
	fmt.Println(job.Status, job.Attempts, job.LastCode)
	// Output: buried 1 BAD_CSV
}

func ExampleEngine_SnapshotStats() {
	ctx := context.Background()
	opts, _ := exampleOptions()
	opts.SnapshotEvery = api.SnapshotEveryMin
	opts.SnapshotBytesMax = api.SnapshotBytesMin // 1 KiB: far too small for this state
	eng, err := api.Open(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := api.Handle(eng, "greet", func(ctx context.Context, d *api.Delivery, in greeting) error { return nil }); err != nil {
		log.Fatal(err)
	}
	if err := eng.PauseQueue(ctx, "default"); err != nil { // the jobs stay in the state
		log.Fatal(err)
	}
	for i := 0; i < 120; i++ {
		if _, err := eng.Enqueue(ctx, "greet", greeting{Name: "Ada"}); err != nil {
			log.Fatal(err)
		}
	}
	if err := eng.Close(ctx); err != nil { // Close waits for a snapshot in progress
		log.Fatal(err)
	}
	st := eng.SnapshotStats()
	// A monitoring loop would alert on Failed: until a snapshot succeeds,
	// restart replays every record since the previous one.
	fmt.Println("written:", st.Written, "failed:", st.Failed, "at seq", st.LastFailedSeq)
	fmt.Println("too large:", errors.Is(st.LastError, record.ErrTooLarge))
	// Output:
	// written: 0 failed: 1 at seq 100
	// too large: true
}
