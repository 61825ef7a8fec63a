package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

// Options configures an [Engine]. The zero value is usable: every field has
// a default, applied once by [Open], which then validates the result and
// refuses out-of-range values with an [*OptionError] naming the field.
type Options struct {
	// Dir is the journal directory. Empty means "quire-data" in the
	// working directory. It is created if missing, and removed again if
	// Open then refuses to open the journal in it. With the operating
	// system's filesystem (FS nil), a relative Dir is resolved against the
	// working directory once, at Open: the engine keeps working on the
	// same directory if the process changes directory later.
	Dir string
	// FS is the filesystem the journal lives on. Nil means the operating
	// system's; tests and sim pass an in-memory one.
	FS vfs.FS
	// Clock is the engine's only source of time. Nil means the wall clock,
	// with timers that sleep their last 2 ms in the kernel so that delayed
	// jobs and deadlines fire within tens of microseconds of their instant
	// rather than the Go runtime's up to 1 ms.
	//
	// With a manual clock (clock/clocktest), every bound the engine
	// keeps runs on it, its own included: a shutdown waits at most
	// SettlementTimeout of that clock for each of its own appends. A test
	// that moves the clock while a shutdown runs should move it only once
	// the phase it waits for has begun ([Engine.Snapshot] says which), or
	// the shutdown may end incomplete for lack of time it never had.
	Clock clock.Clock
	// Entropy feeds id generation (ULIDs). Nil means crypto/rand through a
	// monotonic ULID source; sim passes a seeded reader so runs reproduce.
	Entropy io.Reader
	// Rand is the seeded source of retry jitter (DL-5). Nil means a PCG
	// seeded from crypto/rand.
	Rand rand.Source

	// Workers bounds the attempts running at once. Zero means 16; valid
	// 1..4096. Attempts run on goroutines the engine keeps between
	// attempts, each with a 32 KiB stack (more if a handler goes deeper),
	// and the engine keeps each attempt's bookkeeping (576 bytes) for the
	// next: as many of both as ever ran at once, so at most about
	// Workers × 33 KiB, 130 MiB at 4096, until the engine closes.
	Workers int
	// Queues lists the queues served first, in this order; other queues
	// follow in name order (JB-2). Empty means name order for all. Each
	// name follows the name rule ([ErrInvalidName]) and appears once.
	Queues []string

	// DeliveryTimeout is the execution and cleanup budget of one attempt
	// (DL-2). Zero means 30 s; valid 100 ms..900 s. Jobs may override it.
	DeliveryTimeout time.Duration
	// SettlementTimeout caps one settlement append (DL-3). Zero means 5 s;
	// valid 1 ms..60 s.
	SettlementTimeout time.Duration
	// MaxAttempts is the default number of attempts of a job, the first
	// included (DL-4). Zero means 3; valid 1..100.
	MaxAttempts int
	// Backoff is the default retry delay policy (DL-4, DL-5). The zero
	// value means exponential from 1 s, doubling, capped at 60 s, no
	// jitter.
	Backoff deadlines.Backoff
	// ShutdownTimeout is the total budget of one shutdown (SD-1). Zero
	// means 30 s; valid 1 s..100 years.
	ShutdownTimeout time.Duration
	// DeadlineCheckInterval is the period of the workflow deadline check
	// (WD-6). Zero means 60 s; at least 10 ms.
	DeadlineCheckInterval time.Duration

	// Middleware wraps the pipeline of every attempt, outermost first,
	// before any queue, workflow ([Workflow.WithMiddleware]) or handler
	// middleware (DL-27). No entry may be nil, and at most MiddlewareMax
	// may be in effect for one attempt, counting all four.
	Middleware []Middleware
	// Guards run for every attempt after every Before and before the
	// handler, first of all guards (DL-27). No entry may be nil; at most
	// GuardsMax in effect for one attempt.
	Guards []Guard
	// QueueOptions sets, per queue name, delivery options that override
	// the engine-wide ones for the queue's jobs, and middleware and guards
	// that run after the global ones. Job and handler options override a
	// queue's: the order is step or job, then handler, then queue, then
	// engine. Nil means none.
	QueueOptions map[string]QueueOptions

	// PayloadBytesMax caps one job payload after encoding (RL-11), and a
	// workflow's public state: a step whose output (merged branches, a
	// wait's result) or whose merged state would be larger fails its
	// workflow, with the sizes in its error. Zero means 512 KiB, or
	// RecordBytesMax/2 if that is smaller; valid 1 KiB up to the smaller
	// of RecordBytesMax/2 and [PayloadBytesMaxLimit] (8 MiB). The 8 MiB
	// bound holds whatever RecordBytesMax is: a workflow's state and a
	// step's output, each up to PayloadBytesMax, are merged into one
	// value, which must stay within the journal's cap on one encoded
	// value ([record.ValueBytesMax], 16 MiB).
	//
	// It also caps the payloads decoded for a handler. A job enqueued
	// while it was higher, and whose payload is over the limit the engine
	// now runs with, is not decoded: its next attempt buries it with code
	// PAYLOAD_DECODE_FAILED, naming the size and the limit. Its payload
	// stays in the journal: with the limit raised back, [Engine.Retry]
	// runs it with that payload.
	PayloadBytesMax int
	// RecordBytesMax caps one journal record (RL-11; MaxRecordBytes in
	// spec/reliability.md's table of limits). Zero means 1 MiB;
	// valid 64 KiB..64 MiB. One group commit carries up to four times as
	// many bytes, and at least 4 MiB. Every record the engine writes must
	// fit, or the engine stops for good (RL-2); the 64 KiB floor
	// ([RecordBytesMin]) holds the largest settlement (a step output of
	// PayloadBytesMax, at most half a record, or a failure clipped to a
	// 1 KiB message and a 2 KiB stack, with the audit of up to
	// [MiddlewareMax] middleware) and the largest workflow_waiting
	// ([SignalNamesMax] names or [WaitWorkflowsMax] ids).
	//
	// It also caps every record read back, so never lower it below the
	// largest record the journal already holds (one written while it was
	// higher): replay would refuse that record, and Open fails with an
	// error matching journal.ErrCorrupt that names RecordBytesMax and the
	// record's size. Opening with RecordBytesMax raised back to at least
	// that size opens the journal again; nothing is lost. Open reads only
	// the records after the snapshot it starts from (RL-12), so it opens
	// when every such record fits, and the limit applies from then on,
	// PayloadBytesMax's default with it.
	RecordBytesMax int
	// SnapshotEvery is the number of records between state snapshots, which
	// bound the records replayed at open (RL-12). Zero means 10 000; valid
	// 100..10 000 000.
	SnapshotEvery int
	// SnapshotBytesMax caps one encoded state snapshot, in bytes. Zero
	// means 64 MiB; valid 1 KiB..1 GiB. A snapshot holds every active job
	// and workflow with its payload or state, and is built in memory. A
	// state larger than SnapshotBytesMax cannot be snapshotted: the write
	// fails, the failure is counted in [Engine.SnapshotStats] (with its
	// error, wrapping [record.ErrTooLarge]) and the engine runs on, but the
	// newest snapshot stays the previous one, so Open replays every record
	// after that one rather than at most SnapshotEvery (RL-12 no longer
	// holds until a snapshot succeeds again). After one is refused, the
	// engine does not encode the state again until an estimate of its
	// size, scaled by the refused one's, says it fits: until then each
	// due snapshot is counted as failed without being built. Raise it, or
	// drain active work, to snapshot again. A pending job takes about
	// 450 bytes plus its payload, so the default holds about 140 000 small
	// pending jobs. Lowering it below a snapshot already
	// written makes Open ignore that snapshot (counted in
	// [OpenStats].SnapshotsIgnored) and replay from an older one.
	SnapshotBytesMax int
	// DiskSlowThreshold is how long one journal file write, sync, create,
	// rename or remove may be in flight before it is counted as a slow
	// disk in [Engine.JournalMetrics].DiskSlow (a report only: nothing
	// fails). Zero means 5 s; negative turns the check off; otherwise
	// valid 1 ms..1 h. The check looks every 2 s, so an operation counts
	// once it has run past the threshold and a check came by.
	DiskSlowThreshold time.Duration
	// TimerWarmup is how long before a delayed job's instant (a retry's
	// too, or a workflow's delay) an idle engine makes a synced journal
	// write of no record, so that the start's synced append (DL-7), which
	// lies between the instant and the handler, meets a device that has
	// just synced: on the disks measured, a sync that follows another by
	// 1.5 ms took about two thirds of one that follows 10 ms of idle
	// (docs/performance.md). The write is made only when nothing was
	// committed within TimerWarmup and no append is on its way, so a busy
	// engine makes none, and an idle one at most one per instant. Only
	// with the wall clock (Clock nil). Zero means 1.5 ms
	// (journal.WarmLead); negative turns it off, for a disk where each
	// write is billed; otherwise valid 100 µs..100 ms.
	TimerWarmup time.Duration

	// OwnedResources are resources the application hands the engine to
	// own and dispose (SD-16, SD-19), in hand-over order. They are handed
	// over with the options rather than registered later, so that the
	// engine owns them from the moment Open accepts the options: a startup
	// that fails after that disposes them too (SD-35), and one whose
	// options are invalid owns and closes nothing. The engine closes each
	// once, in reverse order, in phase 5 of its shutdown, only after every
	// attempt and engine goroutine that may use them is proven done
	// (SD-18). List only what nothing else uses after the engine: a
	// logger, database or tracer the application keeps using is
	// caller-owned and must not be listed; the engine never touches what
	// it was not handed. Nil means none; at most [OwnedResourcesMax].
	OwnedResources []OwnedResource
	// Telemetry is telemetry the application hands the engine to own: it
	// is flushed, then closed, last in phase 5, once the owned resources
	// and every engine goroutine that may still emit are done (SD-16,
	// SD-18). Nil means none.
	Telemetry *OwnedTelemetry

	// unitRecordsMax and unitBytesMax, when set, lower the journal's caps
	// on one append (and on one group commit) to them, so that tests
	// reach the caps with a few dozen records. Zero means the default.
	unitRecordsMax, unitBytesMax int

	// deadlineTurn, when set (only by [SimDeadlineTurn]), runs first on
	// every on-deadline handler's goroutine.
	deadlineTurn func(ctx context.Context, key string)
}

// QueueOptions are the options of one queue (see [Options.QueueOptions]).
// Zero fields inherit the engine-wide value.
type QueueOptions struct {
	// DeliveryTimeout overrides Options.DeliveryTimeout for the queue's
	// jobs (DL-2). Zero inherits; otherwise valid 100 ms..900 s.
	DeliveryTimeout time.Duration
	// MaxAttempts overrides Options.MaxAttempts (DL-4). Zero inherits;
	// otherwise valid 1..100.
	MaxAttempts int
	// Backoff overrides Options.Backoff (DL-4, DL-5). Nil inherits; zero
	// Base and Max take their defaults.
	Backoff *BackoffPolicy
	// Middleware and Guards apply to the queue's jobs, after the global
	// ones and before the handler's (DL-27).
	Middleware []Middleware
	Guards     []Guard
}

// Default values of [Options].
const (
	DirDefault             = "quire-data"
	WorkersDefault         = 16
	WorkersMax             = 4096
	PayloadBytesMaxDefault = 512 << 10
	PayloadBytesMin        = 1 << 10
	RecordBytesMaxDefault  = record.RecordBytesMaxDefault
	RecordBytesMin         = 64 << 10
	RecordBytesMaxLimit    = 64 << 20
	SnapshotEveryDefault   = 10_000
	SnapshotEveryMin       = 100
	SnapshotEveryMax       = 10_000_000
	DiskSlowThresholdMin   = time.Millisecond
	DiskSlowThresholdMax   = time.Hour
	TimerWarmupMin         = 100 * time.Microsecond
	TimerWarmupMax         = 100 * time.Millisecond

	// SnapshotBytesMaxDefault, SnapshotBytesMin and SnapshotBytesMaxLimit
	// are the journal's own default and range for [Options.SnapshotBytesMax].
	SnapshotBytesMaxDefault = journal.SnapshotBytesMaxDefault
	SnapshotBytesMin        = 1 << 10
	SnapshotBytesMaxLimit   = 1 << 30

	// PayloadBytesMaxLimit bounds [Options.PayloadBytesMax] whatever
	// RecordBytesMax is: half the journal's cap on one encoded value, so
	// that a workflow state and a step output of at most PayloadBytesMax
	// each merge into a value within [record.ValueBytesMax].
	PayloadBytesMaxLimit = record.ValueBytesMax / 2
)

// ErrInvalidOption is matched by every [*OptionError] with errors.Is, by
// every [*WorkflowError], and by a [*NameError] refusing a bad argument
// given with a name: a nil func given to [Handle] or [HandleDeadline], a
// nil resource given to [Scope.Register].
var ErrInvalidOption = errors.New("quire: invalid option")

// OptionError reports an option or argument that failed validation:
// Field names it (e.g. "Options.Workers", "MaxAttempts"), Value is what was
// given, Reason says what is allowed.
type OptionError struct {
	Field  string
	Value  any
	Reason string
	Err    error
}

// Error names the field and the value, then the allowed range or reason.
func (e *OptionError) Error() string {
	s := fmt.Sprintf("quire: %s = %s: %s", e.Field, valueText(e.Value), e.Reason)
	if e.Err != nil && e.Reason == "" {
		s = fmt.Sprintf("quire: %s: %s", e.Field, reasonText(e.Err))
	}
	return s
}

// valueTextMax bounds the bytes of a string value an error quotes.
const valueTextMax = 64

// valueText is v as an error shows it: a string quoted (an empty one
// reads "") and cut to valueTextMax bytes with its length, so that an
// oversized key does not fill the message; anything else as %v prints it.
func valueText(v any) string {
	str, ok := v.(string)
	if !ok {
		return fmt.Sprint(v)
	}
	if len(str) <= valueTextMax {
		return strconv.Quote(str)
	}
	n := valueTextMax
	for n > 0 && !utf8.RuneStart(str[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(str[:n]), len(str))
}

// reason is the error without the field's name, for a [WorkflowError]
// that names the option itself: "101 must be 1..100".
func (e *OptionError) reason() string {
	if e.Err != nil && e.Reason == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v %s", e.Value, e.Reason)
}

// Unwrap returns [ErrInvalidOption] and, if there is one, the underlying
// error, so that errors.Is matches either.
func (e *OptionError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidOption, e.Err}
	}
	return []error{ErrInvalidOption}
}

// optionErr turns a range error of deadlines into an [*OptionError] whose
// Field is prefix and the option as the caller writes it, with a Reason
// in the api's words (errors.As still finds the [*deadlines.RangeError]).
func optionErr(prefix string, err error) error {
	var re *deadlines.RangeError
	if errors.As(err, &re) {
		return &OptionError{Field: prefix + re.Field, Value: re.Value, Reason: rangeReason(re), Err: err}
	}
	return &OptionError{Field: strings.TrimSuffix(prefix, "."), Err: err}
}

// backoffErr is optionErr for an error of [BackoffPolicy.Validate], which
// names the policy's fields as DL-4 does (BackoffBase, MaxBackoff,
// BackoffList); prefix ends with the policy's own name and a dot, as in
// "Options.Backoff.", and the field is named as in the struct
// ("Options.Backoff.Base").
func backoffErr(prefix string, b BackoffPolicy, err error) error {
	var re *deadlines.RangeError
	if !errors.As(err, &re) {
		return optionErr(prefix, err)
	}
	oe := &OptionError{Field: prefix + re.Field, Value: re.Value, Reason: rangeReason(re), Err: err}
	switch {
	case re.Field == "Backoff":
		oe.Field, oe.Reason = prefix+"Kind", "must be BackoffExponential, BackoffFixed, BackoffLinear or BackoffList"
	case re.Field == "BackoffBase":
		oe.Field = prefix + "Base"
	case re.Field == "MaxBackoff":
		oe.Field, oe.Reason = prefix+"Max", fmt.Sprintf("must be Base (%v)..%v", re.Min, re.Max)
	case re.Field == "BackoffList":
		oe.Field, oe.Value, oe.Reason = prefix+"List", b.List, fmt.Sprintf("must hold %v..%v delays, holds %v", re.Min, re.Max, re.Value)
	case strings.HasPrefix(re.Field, "BackoffList["):
		oe.Field = prefix + "List" + strings.TrimPrefix(re.Field, "BackoffList")
	}
	return oe
}

// rangeReason says what re's range allows, without the deadlines
// package's prefix and field name, which the [*OptionError] states.
func rangeReason(re *deadlines.RangeError) string {
	switch {
	case re.Min == nil && re.Max == nil:
		return "is not a valid value"
	case re.Max == nil:
		return fmt.Sprintf("must be at least %v", re.Min)
	}
	return fmt.Sprintf("must be %v..%v", re.Min, re.Max)
}

func (o Options) withDefaults() Options {
	if o.Dir == "" {
		o.Dir = DirDefault
	}
	if o.FS == nil && !filepath.IsAbs(o.Dir) {
		// The store reopens files by path (WALs, tables, OPTIONS) for
		// as long as it runs; a path relative to a working directory
		// that changed would name another directory.
		if abs, err := filepath.Abs(o.Dir); err == nil {
			o.Dir = abs
		}
	}
	if o.Workers == 0 {
		o.Workers = WorkersDefault
	}
	if o.DeliveryTimeout == 0 {
		o.DeliveryTimeout = deadlines.DeliveryTimeoutDefault
	}
	if o.SettlementTimeout == 0 {
		o.SettlementTimeout = deadlines.SettlementTimeoutDefault
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = deadlines.MaxAttemptsDefault
	}
	o.Backoff = o.Backoff.WithDefaults()
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = deadlines.ShutdownTimeoutDefault
	}
	if o.DeadlineCheckInterval == 0 {
		o.DeadlineCheckInterval = deadlines.DeadlineCheckIntervalDefault
	}
	if o.RecordBytesMax == 0 {
		o.RecordBytesMax = RecordBytesMaxDefault
	}
	if o.PayloadBytesMax == 0 {
		o.PayloadBytesMax = min(PayloadBytesMaxDefault, payloadBytesMaxFor(o.RecordBytesMax))
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = SnapshotEveryDefault
	}
	if o.SnapshotBytesMax == 0 {
		o.SnapshotBytesMax = SnapshotBytesMaxDefault
	}
	// Copies of the slices and maps the engine reads after Open (Queues
	// it reads once, at Open): Open validates the options once, and what
	// the caller writes to its own afterwards (a nil middleware, a delay
	// out of range) must neither reach the engine unvalidated nor race
	// with it.
	o.OwnedResources = slices.Clone(o.OwnedResources)
	o.Middleware = slices.Clone(o.Middleware)
	o.Guards = slices.Clone(o.Guards)
	o.Backoff.List = slices.Clone(o.Backoff.List)
	if o.QueueOptions != nil {
		qs := make(map[string]QueueOptions, len(o.QueueOptions))
		for name, q := range o.QueueOptions {
			if q.Backoff != nil {
				b := q.Backoff.WithDefaults()
				b.List = slices.Clone(b.List)
				q.Backoff = &b
			}
			q.Middleware = slices.Clone(q.Middleware)
			q.Guards = slices.Clone(q.Guards)
			qs[name] = q
		}
		o.QueueOptions = qs
	}
	return o
}

func (o Options) validate() error {
	if o.Workers < 1 || o.Workers > WorkersMax {
		return &OptionError{Field: "Options.Workers", Value: o.Workers, Reason: fmt.Sprintf("must be 1..%d", WorkersMax)}
	}
	for _, check := range []error{
		deadlines.ValidateDeliveryTimeout(o.DeliveryTimeout),
		deadlines.ValidateSettlementTimeout(o.SettlementTimeout),
		deadlines.ValidateMaxAttempts(o.MaxAttempts),
		deadlines.ValidateShutdownTimeout(o.ShutdownTimeout),
		deadlines.ValidateDeadlineCheckInterval(o.DeadlineCheckInterval),
	} {
		if check != nil {
			return optionErr("Options.", check)
		}
	}
	if err := o.Backoff.Validate(); err != nil {
		return backoffErr("Options.Backoff.", o.Backoff, err)
	}
	if o.RecordBytesMax < RecordBytesMin || o.RecordBytesMax > RecordBytesMaxLimit {
		return &OptionError{Field: "Options.RecordBytesMax", Value: o.RecordBytesMax, Reason: fmt.Sprintf("must be %d..%d bytes", RecordBytesMin, RecordBytesMaxLimit)}
	}
	if most := payloadBytesMaxFor(o.RecordBytesMax); o.PayloadBytesMax < PayloadBytesMin || o.PayloadBytesMax > most {
		reason := fmt.Sprintf("must be %d..RecordBytesMax/2 (%d) bytes", PayloadBytesMin, most)
		if most == PayloadBytesMaxLimit {
			reason = fmt.Sprintf("must be %d..%d bytes: a workflow state and a step output of up to PayloadBytesMax each are merged into one value, which the journal caps at %d bytes (record.ValueBytesMax)",
				PayloadBytesMin, most, record.ValueBytesMax)
		}
		return &OptionError{Field: "Options.PayloadBytesMax", Value: o.PayloadBytesMax, Reason: reason}
	}
	if o.SnapshotEvery < SnapshotEveryMin || o.SnapshotEvery > SnapshotEveryMax {
		return &OptionError{Field: "Options.SnapshotEvery", Value: o.SnapshotEvery, Reason: fmt.Sprintf("must be %d..%d records", SnapshotEveryMin, SnapshotEveryMax)}
	}
	if o.SnapshotBytesMax < SnapshotBytesMin || o.SnapshotBytesMax > SnapshotBytesMaxLimit {
		return &OptionError{Field: "Options.SnapshotBytesMax", Value: o.SnapshotBytesMax, Reason: fmt.Sprintf("must be %d..%d bytes", SnapshotBytesMin, SnapshotBytesMaxLimit)}
	}
	if o.DiskSlowThreshold > 0 && (o.DiskSlowThreshold < DiskSlowThresholdMin || o.DiskSlowThreshold > DiskSlowThresholdMax) {
		return &OptionError{Field: "Options.DiskSlowThreshold", Value: o.DiskSlowThreshold, Reason: fmt.Sprintf("must be %v..%v, 0 for the default or negative for off", DiskSlowThresholdMin, DiskSlowThresholdMax)}
	}
	if o.TimerWarmup > 0 && (o.TimerWarmup < TimerWarmupMin || o.TimerWarmup > TimerWarmupMax) {
		return &OptionError{Field: "Options.TimerWarmup", Value: o.TimerWarmup, Reason: fmt.Sprintf("must be %v..%v, 0 for the default or negative for off", TimerWarmupMin, TimerWarmupMax)}
	}
	seen := make(map[string]int, len(o.Queues))
	for i, q := range o.Queues {
		if err := validateName(q); err != nil {
			return &OptionError{Field: fmt.Sprintf("Options.Queues[%d]", i), Value: q, Reason: err.Error(), Err: err}
		}
		if j, dup := seen[q]; dup {
			return &OptionError{Field: fmt.Sprintf("Options.Queues[%d]", i), Value: q,
				Reason: fmt.Sprintf("duplicates Options.Queues[%d]: list each queue once", j)}
		}
		seen[q] = i
	}
	if err := o.validateOwned(); err != nil {
		return err
	}
	if err := checkPlanParts("Options.", o.Middleware, o.Guards); err != nil {
		return err
	}
	if err := checkPlanSize("Options.", len(o.Middleware), len(o.Guards)); err != nil {
		return err
	}
	return o.validateQueues()
}

// validateQueues checks every queue's options, in name order, naming the
// field as Options.QueueOptions[name].Field.
func (o Options) validateQueues() error {
	names := make([]string, 0, len(o.QueueOptions))
	for name := range o.QueueOptions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := o.QueueOptions[name]
		prefix := fmt.Sprintf("Options.QueueOptions[%q].", name)
		if err := validateName(name); err != nil {
			return &OptionError{Field: "Options.QueueOptions", Value: name, Reason: "queue name " + err.Error(), Err: err}
		}
		var checks []error
		if q.DeliveryTimeout != 0 {
			checks = append(checks, deadlines.ValidateDeliveryTimeout(q.DeliveryTimeout))
		}
		if q.MaxAttempts != 0 {
			checks = append(checks, deadlines.ValidateMaxAttempts(q.MaxAttempts))
		}
		for _, err := range checks {
			if err != nil {
				return optionErr(prefix, err)
			}
		}
		if q.Backoff != nil {
			if err := q.Backoff.Validate(); err != nil {
				return backoffErr(prefix+"Backoff.", *q.Backoff, err)
			}
		}
		if err := checkPlanParts(prefix, q.Middleware, q.Guards); err != nil {
			return err
		}
		if err := checkPlanSize(prefix, len(o.Middleware)+len(q.Middleware), len(o.Guards)+len(q.Guards)); err != nil {
			return err
		}
	}
	return nil
}

// NameBytesMax bounds handler, queue and workflow names.
const NameBytesMax = 100

// validateName checks the name rule: 1..NameBytesMax bytes of valid UTF-8
// without control characters. Names are stored in the journal and shown
// by qctl, in tables and in JSON: a NUL, a newline or a byte that is not
// UTF-8 would print as something other than the name.
func validateName(s string) error {
	if s == "" {
		return nameRuleError("must not be empty")
	}
	if len(s) > NameBytesMax {
		return nameRuleError(fmt.Sprintf("is %d bytes, limit %d", len(s), NameBytesMax))
	}
	if !utf8.ValidString(s) {
		return nameRuleError("is not valid UTF-8")
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return nameRuleError(fmt.Sprintf("holds the control character %U at byte %d", r, i))
	}
	return nil
}

// nameRuleError is a name or id that breaks its rule. It matches
// [ErrInvalidName], and reads as the rule alone, since the error that
// carries it names the name ([NameError], [OptionError]).
type nameRuleError string

func (e nameRuleError) Error() string        { return string(e) }
func (e nameRuleError) Is(target error) bool { return target == ErrInvalidName }

// unregistrableNameError is a handler or workflow name that breaks its
// rule, given to a call that needs one registered: nothing can be
// registered under it, so besides [ErrInvalidName] it matches unknown, the
// error such a call returns for every other unregistered name
// ([ErrUnknownHandler], [ErrNotFound]).
type unregistrableNameError struct {
	nameRuleError
	unknown error
}

func (e unregistrableNameError) Is(target error) bool {
	return target == ErrInvalidName || target == e.unknown
}

// unregistrableName refuses a name nothing of kind can be registered
// under (empty or too long), given to a call that needs one registered,
// before anything else is looked at, with the same [*NameError] as the
// registration gives it; it is nil for a name that keeps the rule.
func unregistrableName(kind, name string, unknown error) error {
	if err := validateName(name); err != nil {
		return &NameError{Kind: kind, Name: name, Err: unregistrableNameError{nameRuleError(err.Error()), unknown}}
	}
	return nil
}

// handlerNameError refuses a handler name no handler can have, given to a
// call that enqueues for it (unregistrableName).
func handlerNameError(handler string) error {
	return unregistrableName("handler", handler, ErrUnknownHandler)
}

// argRuleError is an argument that breaks its rule, such as a nil func,
// given with a name. It matches [ErrInvalidOption], as every bad argument
// does, and reads as the rule alone, since the [NameError] that carries
// it names the name.
type argRuleError string

func (e argRuleError) Error() string        { return string(e) }
func (e argRuleError) Is(target error) bool { return target == ErrInvalidOption }

// validateID checks an id a caller names, such as a workflow id, against
// the journal's rule for stream and index ids (record.ValidateStream): 1
// to record.StreamIDBytesMax bytes.
func validateID(s string) error {
	if s == "" {
		return nameRuleError("must not be empty")
	}
	if len(s) > record.StreamIDBytesMax {
		return nameRuleError(fmt.Sprintf("is %d bytes, limit %d", len(s), record.StreamIDBytesMax))
	}
	return nil
}

// payloadBytesMaxFor is the largest PayloadBytesMax a record cap allows:
// half a record, so that a settlement with an output of PayloadBytesMax
// fits one, and never more than [PayloadBytesMaxLimit], so that a state
// and an output merge into a value the codec accepts.
func payloadBytesMaxFor(recordBytesMax int) int {
	return min(recordBytesMax/2, PayloadBytesMaxLimit)
}

// groupBytesMax is the journal's cap on the bytes of one group commit:
// room for four records of recordBytesMax, since a settlement with its
// follow-ups and its workflow's records is one atomic append that must
// fit in one group, and never below the journal's default (RL-11).
func groupBytesMax(recordBytesMax int) int {
	return max(journal.GroupBytesMaxDefault, 4*recordBytesMax)
}

// unitBytesMax is the journal's cap on one atomic append, which commits
// alone when it is larger than a group: room for the largest a workflow
// definition can make (SubWorkflowChainMax states of up to half a record,
// at most half of it), and never below the journal's default.
func unitBytesMax(recordBytesMax int) int {
	return max(journal.UnitBytesMaxDefault, 16*recordBytesMax)
}
