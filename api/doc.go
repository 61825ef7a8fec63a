// Package api is the package applications import to embed quire, a
// durable workflow and job engine: [Open] returns an [Engine] over one
// journal directory, which runs registered handlers and workflows and
// appends every transition to the journal before acting on it.
//
// It is quire's composition root: it wires journal, replay, scheduler and
// shutdown together, and is the one package that reads the system clock
// (when Options.Clock is nil). It must not import sim, cmd, tests or
// examples. Rule ids in its docs (JB-1, DL-7, SD-35, ...) are those of
// quire's spec, which the README introduces.
//
// # Usage
//
// Open an engine with [Open] and an [Options] (zero fields take their
// defaults), then register job handlers by name with [Handle] and
// workflows built with [NewWorkflow] with [Engine.Register]. The journal
// stores names, so register the same names in every process that opens it.
// [Engine.Enqueue] adds a job and [Engine.Dispatch] starts a workflow; both
// return an id once the record is synced. [Engine.Status] reads a job,
// [Engine.Workflow] a workflow, completed ones included; [Engine.AwaitJob]
// and [Engine.AwaitWorkflow] block until one has ended its run.
//
//	eng, err := api.Open(ctx, api.Options{Dir: "data"})
//	if err != nil {
//		return err
//	}
//	err = api.Handle(eng, "send_email", func(ctx context.Context, d *api.Delivery, in Email) error {
//		return send(ctx, in.To) // a plain error is retried; api.Permanent buries the job
//	})
//	err = eng.Register(api.NewWorkflow("data_import").
//		Then("fetch", fetch).Then("load", load).
//		MustCompleteWithin(24 * time.Hour))
//	id, err := eng.Enqueue(ctx, "send_email", Email{To: "ann@example.com"}, api.MaxAttempts(5))
//	wid, err := eng.Dispatch(ctx, "data_import", api.State{"source": url})
//	job, err := eng.Status(ctx, id)
//
// No attempt starts until the engine is started. A worker process calls
// [Engine.Run], which blocks and shuts down gracefully on SIGINT, SIGTERM
// or the end of its ctx. An application that embeds the engine calls
// [Engine.Start], which returns at once, and later [Engine.Shutdown] (wait
// for the graceful result) or [Engine.Close] (the same, forced when its ctx
// ends). [Engine.RunOnce] works off what is eligible, then closes the
// engine.
// [Engine.ShutdownReport] returns the shutdown's immutable report, and
// [Engine.Lifecycle] and [Engine.Ready] suit health checks.
//
// # Errors and options
//
// Calls return typed errors to branch on with errors.Is and errors.As:
// the sentinels ([ErrUnknownHandler], [ErrInvalidName], [ErrInvalidOption],
// [ErrShuttingDown], [ErrLocked], [ErrNotJournal], ...) and [*NameError],
// [*OptionError] and [*StartupError]; a refused call appends nothing.
// Handlers choose how an attempt settles with [Retryable] and [Permanent].
// [Options] documents each engine setting with its unit, default and
// range. Job options ([JobOption]: [OnQueue], [WithPriority],
// [MaxAttempts], [Delay], ...) set one job's options; given to [Handle],
// all but Delay set defaults for the handler's jobs. [Engine] says how
// every call treats its ctx.
//
// Package [github.com/quire-dev/quire/sim] runs an engine under a fake
// clock with crashes and an oracle, for the tests of applications that
// embed quire.
package api
