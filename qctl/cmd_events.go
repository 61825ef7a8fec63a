package qctl

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

type eventsCmd struct {
	Kind   []string `placeholder:"K" help:"Only records of kind K (e.g. attempt_buried); repeat or comma-separate for several."`
	Stream string   `placeholder:"ID" help:"Only records of stream ID: a job, a workflow with its step jobs, or engine. A step job's id lists its own records of its workflow's stream."`
	From   uint64   `placeholder:"SEQ" help:"Start at seq SEQ."`
	To     uint64   `placeholder:"SEQ" help:"Stop after seq SEQ."`
	Since  string   `placeholder:"T" help:"Only records appended at or after T (RFC 3339 or Unix nanoseconds)."`
	Until  string   `placeholder:"T" help:"Only records appended before T."`
	Limit  int      `placeholder:"N" help:"Print at most N records (0: all)."`
	Follow bool     `short:"f" help:"Keep polling the directory and print records as they appear; Ctrl-C ends, or, with --until, the first record appended at or after T. The directory is opened only while polled, so an engine can start on it between polls, not during one (a locked directory is waited out)."`
}

func (c *eventsCmd) Help() string {
	return `Lists records in seq order, one per line: seq, append time, stream, kind and the
body's fields. Every known kind is shown; instants in bodies are absolute. A
job_enqueued's delivery_timeout reads engine for a job that takes the engine's
Options.DeliveryTimeout when an attempt starts (0 in JSON).

A record that fails its checks and that the journal's index attributes to one job's or
workflow's stream is read past, as the engine's Open reads past it: it is listed with its
seq, the stream the index names, kind unknown and the damage (in JSON "at" and "body" are
null, and "damaged" holds its seq, stream and reason), the records after it follow, and
events exits 1. Its kind and time cannot be read: --kind and --until never leave it out,
and --since only when the next sound record is before T. Damage that leaves the order in
doubt ends the listing with exit 5, as it refuses Open.

Kinds: ` + kindNames() + `

Examples:
  qctl -d data events --kind attempt_retry_scheduled,attempt_buried
  qctl -d data events --stream job_01KE3T5W2C8F0000000000000B
  qctl -d data events --from 1200 --to 1300 --json
  qctl -d data events --since 2026-01-05T10:00:00Z --follow`
}

func kindNames() string {
	ks := record.Kinds()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

// eventFilter selects records.
type eventFilter struct {
	kinds        map[record.Kind]bool
	since, until int64
	hasUntil     bool
	// job, when set, is a step job whose records --stream lists: only its
	// own records of stream, its workflow's, match.
	job, stream string
}

func (f *eventFilter) match(r record.Record) bool {
	if len(f.kinds) > 0 && !f.kinds[r.Kind()] {
		return false
	}
	if f.job != "" && jobIDOf(r.Body) != f.job {
		return false
	}
	if r.At < f.since {
		return false
	}
	return !f.hasUntil || r.At < f.until
}

func (c *eventsCmd) filter() (*eventFilter, error) {
	f := &eventFilter{kinds: map[record.Kind]bool{}, since: math.MinInt64}
	for _, k := range c.Kind {
		for _, name := range splitList(k) {
			kind, ok := record.ParseKind(name)
			if !ok {
				return nil, usageErr("--kind %q is not a record kind; kinds are: %s", name, kindNames())
			}
			f.kinds[kind] = true
		}
	}
	if c.Since != "" {
		t, err := parseTime(c.Since)
		if err != nil {
			return nil, usageErr("--since: %v", err)
		}
		f.since = t.UnixNano()
	}
	if c.Until != "" {
		t, err := parseTime(c.Until)
		if err != nil {
			return nil, usageErr("--until: %v", err)
		}
		f.until, f.hasUntil = t.UnixNano(), true
	}
	if c.Limit < 0 {
		return nil, usageErr("--limit must be >= 0")
	}
	if c.To != 0 && c.From > c.To {
		return nil, usageErr("--from %d is after --to %d", c.From, c.To)
	}
	if c.Since != "" && f.hasUntil && f.since > f.until {
		return nil, usageErr("--since %s is after --until %s", c.Since, c.Until)
	}
	return f, nil
}

// eventPrinter prints records in fixed-width columns, so that output
// streams without buffering the whole listing.
type eventPrinter struct {
	w       io.Writer
	json    bool
	seqW    int
	printed int
	header  bool
	damaged []*damage // the damaged records printed, over every pass
	// until is set once a pass reads a sound record appended at or after
	// --until: no later record can match, and --follow ends.
	until bool
}

// head prints the header of the human listing once, even when no record
// matches, as the other listings do.
func (p *eventPrinter) head() error {
	if p.json || p.header {
		return nil
	}
	p.header = true
	_, err := fmt.Fprintf(p.w, "%*s  %-24s  %-30s  %-26s  %s\n", p.seqW, "SEQ", "AT", "STREAM", "KIND", "DETAIL")
	return err
}

func (p *eventPrinter) print(r record.Record) error {
	if p.json {
		return emit(p.w, recordJSON(r))
	}
	if err := p.head(); err != nil {
		return err
	}
	line := kindLine(r, recordOpts{tf: fmtTime, stream: r.Stream})
	_, err := fmt.Fprintf(p.w, "%*d  %-24s  %-30s  %-26s  %s\n", p.seqW, r.Seq, fmtTime(r.At), r.Stream, r.Kind(), line)
	return err
}

// printDamaged prints the row of a record that failed its checks: its seq,
// the stream the s/ index names, kind unknown, and the damage. Its time
// and body cannot be read.
func (p *eventPrinter) printDamaged(d *damage) error {
	p.damaged = append(p.damaged, d)
	if p.json {
		return emit(p.w, object{
			{"type", "record"}, {"seq", d.Seq}, {"at", nil}, {"stream", d.Stream},
			{"kind", kindUnknown}, {"body", nil}, {"damaged", d.json()},
		})
	}
	if err := p.head(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(p.w, "%*d  %-24s  %-30s  %-26s  %s\n", p.seqW, d.Seq, "-", d.Stream, kindUnknown, "damaged: "+d.Reason)
	return err
}

// kindUnknown is the kind events shows for a damaged record.
const kindUnknown = "unknown"

// damagedFinding is the finding of a listing that showed damaged records,
// or nil.
func damagedFinding(dir string, ds []*damage) error {
	if len(ds) == 0 {
		return nil
	}
	parts := firstFew(len(ds), func(i int) string { return fmt.Sprintf("seq %d of %s", ds[i].Seq, ds[i].Stream) })
	streams := "that stream"
	if len(ds) > 1 {
		streams = "those streams"
	}
	return findingErr("%s has damaged records, listed with kind unknown (%s); the engine sets %s aside at open; qctl verify %s lists every problem",
		dir, strings.Join(parts, ", "), streams, dir)
}

func (c *eventsCmd) Run(x *runCtx) error {
	flt, err := c.filter()
	if err != nil {
		return err
	}
	if c.Follow && x.env.WaitFunc == nil {
		return usageErr("--follow is not available in this build")
	}
	if c.Follow && c.To != 0 {
		return usageErr("--follow and --to exclude each other")
	}
	p := &eventPrinter{w: x.env.Stdout, json: x.json}
	next := max(c.From, 1)
	to := c.To
	if to == 0 {
		to = math.MaxUint64
	}
	// Without --follow: one pass. With it: a pass per poll, the first one
	// included, and a directory an engine holds is waited out, on the
	// first open as on later ones.
	warned := false
	for polled := false; c.Limit == 0 || p.printed < c.Limit; polled = true {
		if polled {
			if err := x.env.WaitFunc(x.ctx); err != nil {
				// Interrupted: a normal end of --follow.
				return damagedFinding(x.dir, p.damaged)
			}
		}
		n, err := c.once(x, flt, p, next, to)
		if c.Follow && isLocked(err) {
			if !warned {
				fmt.Fprintf(x.env.Stderr, "qctl: %s; waiting for it to stop\n", err)
				warned = true
			}
			continue
		}
		if err == nil {
			err = p.head()
		}
		if err != nil {
			return err
		}
		if !c.Follow || p.until {
			return damagedFinding(x.dir, p.damaged)
		}
		warned = false
		next = n
	}
	return damagedFinding(x.dir, p.damaged)
}

// isLocked reports whether err is openJournal's refusal of a directory an
// engine or another qctl holds.
func isLocked(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.code == ExitLocked
}

// once opens the journal, prints the matching records from..to, closes
// it, and returns the seq to continue from.
func (c *eventsCmd) once(x *runCtx, flt *eventFilter, p *eventPrinter, from, to uint64) (uint64, error) {
	j, err := x.openJournal(x.dir)
	if err != nil {
		return from, err
	}
	defer j.Close()
	last := j.LastSeq()
	if p.seqW == 0 {
		p.seqW = max(len(strconv.FormatUint(last, 10)), 3)
	}
	if c.Stream == "" && flt.since != math.MinInt64 && from <= last {
		// At is monotone along the log (RL-9): find the first seq at or
		// after --since with point reads instead of a scan.
		s, err := seekTime(j, from, last, flt.since)
		if err != nil {
			return from, readError(j, err)
		}
		from = s
	}
	e := &eventPass{flt: flt, p: p, limit: c.Limit, from: from, to: to, next: from}
	if c.Stream != "" {
		stream, err := c.streamOf(x, j, flt)
		if err != nil {
			return from, err
		}
		if err := e.stream(j, stream); err != nil {
			return e.next, err
		}
		return max(e.next, last+1), nil
	}
	stop := errors.New("stop")
	err = x.scan(j, "events", from, to, func(it *journal.Iter) error {
		var more bool
		var err error
		if ce := it.Damaged(); ce != nil {
			more, err = e.damaged(corruptDamage(ce))
		} else {
			more, err = e.record(it.Record())
		}
		if err != nil {
			return err
		}
		if !more {
			return stop
		}
		return nil
	})
	switch {
	case err == stop:
		return e.next, nil
	case err != nil:
		return e.next, err
	}
	_, err = e.flush()
	return e.next, err
}

// streamOf returns the stream --stream lists: its id, or, for a step job,
// whose records are in its workflow's stream, that stream, with flt then
// keeping the job's own records only. It is resolved once, from the first
// pass that finds the job.
func (c *eventsCmd) streamOf(x *runCtx, j *journal.Journal, flt *eventFilter) (string, error) {
	if flt.job != "" {
		return flt.stream, nil
	}
	if !strings.HasPrefix(c.Stream, jobPrefix) {
		return c.Stream, nil
	}
	it := j.ScanStream(c.Stream, 0)
	own := it.Next()
	it.Close()
	if own {
		return c.Stream, nil
	}
	f, err := x.loadState(j, true)
	if err != nil {
		return "", err
	}
	loc, err := locate(j, f.st, c.Stream)
	if err != nil {
		return "", err
	}
	if loc.stream != c.Stream {
		flt.stream, flt.job = loc.stream, c.Stream
	}
	return loc.stream, nil
}

// jobPrefix starts every job id.
const jobPrefix = "job_"

// eventPass is one pass of events over from..to: it hands the records the
// filters select to the printer.
//
// A record that fails its checks and that the journal attributes to one
// stream is read past, as the engine's Open reads past it
// (spec/reliability.md §4.4), and listed whatever --kind says (its kind
// cannot be read; RL-5: damage is reported, never skipped). Its time
// cannot be read either, but At never goes back (RL-9): it lies between
// the times of the sound records around it. So it is held until the next
// sound record: if that one is before --since, so is the damaged one, and
// it is left out; otherwise it is printed. --until does not leave it out:
// the listing stops at the first sound record at or after --until, and
// the damaged records before that one may be earlier.
type eventPass struct {
	flt      *eventFilter
	p        *eventPrinter
	limit    int
	from, to uint64
	next     uint64    // the seq to continue from
	pending  []*damage // damaged records not printed yet, in seq order
}

// more reports whether the listing has room for another row.
func (e *eventPass) more() bool { return e.limit == 0 || e.p.printed < e.limit }

// record takes sound record r and reports whether to go on.
func (e *eventPass) record(r record.Record) (bool, error) {
	if r.Seq < e.from {
		return true, nil // read only to start the scan's chain check (scanLog)
	}
	// r bounds the time of the damaged records before it.
	if r.At < e.flt.since {
		e.pending = e.pending[:0]
	} else if more, err := e.flush(); err != nil || !more {
		return more, err
	}
	e.next = r.Seq + 1
	if e.flt.hasUntil && r.At >= e.flt.until {
		e.p.until = true
		return false, nil
	}
	if r.Seq > e.to {
		return false, nil
	}
	if !e.flt.match(r) {
		return true, nil
	}
	if err := e.p.print(r); err != nil {
		return false, err
	}
	e.p.printed++
	return e.more(), nil
}

// damaged takes the damage of a record the scan read past and reports
// whether to go on.
func (e *eventPass) damaged(d *damage) (bool, error) {
	if d.Seq < e.from {
		return true, nil // read only to start the scan's chain check (scanLog)
	}
	if d.Seq > e.to {
		_, err := e.flush()
		return false, err
	}
	e.next = d.Seq + 1
	e.pending = append(e.pending, d)
	return true, nil
}

// flush prints the damaged records held, as far as the limit allows, and
// reports whether the listing has room for more.
func (e *eventPass) flush() (bool, error) {
	for len(e.pending) > 0 {
		if !e.more() {
			return false, nil
		}
		d := e.pending[0]
		e.pending = e.pending[1:]
		if err := e.p.printDamaged(d); err != nil {
			return false, err
		}
		e.p.printed++
	}
	return e.more(), nil
}

// stream lists the records of stream from e.from on, through the s/
// index. A record of the stream that fails its own checks ends a stream
// scan; when the journal's quarantining scan of the log would read past
// it (see [streamDamage]), it is listed as damaged and the scan goes on
// after it.
func (e *eventPass) stream(j *journal.Journal, stream string) error {
	for from := e.from; ; {
		it := j.ScanStream(stream, from)
		more, err := true, error(nil)
		for more && err == nil && it.Next() {
			more, err = e.record(it.Record())
		}
		serr := it.Err()
		it.Close()
		switch {
		case err != nil || !more:
			return err
		case serr == nil:
			_, err = e.flush()
			return err
		}
		ce, ok := streamDamage(serr)
		if !ok {
			return readError(j, serr)
		}
		if more, err := e.damaged(corruptDamage(ce)); err != nil || !more {
			return err
		}
		from = ce.Seq + 1
	}
}

// streamDamage returns the damage that ended a stream scan when the
// journal's quarantining scan of the log reads past such damage
// (journal.ScanQuarantining): a record that fails its own checks (§4.2),
// attributed through its s/ index entry to a stream other than the
// engine's, and not refused whole for its size. Anything else leaves the
// order in doubt, and ends the listing as it ends Open (§4.4).
func streamDamage(err error) (*journal.CorruptError, bool) {
	var (
		ce *journal.CorruptError
		re *record.RecordError
	)
	if !errors.As(err, &ce) || !errors.As(err, &re) || re.Op == "size" ||
		ce.Seq == 0 || ce.File != "" || ce.Stream == "" || ce.Stream == record.EngineStream {
		return nil, false
	}
	return ce, true
}

// seekTime returns the first seq in lo..hi whose record may have been
// appended at or after at (hi+1 if none), by binary search over Get. A
// record that fails its checks may have been: its time cannot be read.
// The search then lands no later than it should (the records before lo
// are sound ones before at, or damaged ones before those), and the scan
// sorts the rest (see [eventPass]) or refuses the damage.
func seekTime(j *journal.Journal, lo, hi uint64, at int64) (uint64, error) {
	end := hi + 1
	for lo < end {
		mid := lo + (end-lo)/2
		r, err := j.Get(mid)
		var ce *journal.CorruptError
		switch {
		case errors.As(err, &ce) && ce.Seq == mid && ce.File == "":
			end = mid
		case err != nil:
			return 0, err
		case r.At >= at:
			end = mid
		default:
			lo = mid + 1
		}
	}
	return lo, nil
}
