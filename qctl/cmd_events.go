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
	Stream string   `placeholder:"ID" help:"Only records of stream ID (a job, a workflow with its step jobs, or engine)."`
	From   uint64   `placeholder:"SEQ" help:"Start at seq SEQ."`
	To     uint64   `placeholder:"SEQ" help:"Stop after seq SEQ."`
	Since  string   `placeholder:"T" help:"Only records appended at or after T (RFC 3339 or Unix nanoseconds)."`
	Until  string   `placeholder:"T" help:"Only records appended before T."`
	Limit  int      `placeholder:"N" help:"Print at most N records (0: all)."`
	Follow bool     `short:"f" help:"Keep polling the directory and print records as they appear; Ctrl-C ends. The directory is opened only while polled, so an engine can start on it between polls, not during one (a locked directory is waited out)."`
}

func (c *eventsCmd) Help() string {
	return `Lists records in seq order, one per line: seq, append time, stream, kind and the
body's fields. Every known kind is shown; instants in bodies are absolute.

Kinds: ` + kindNames() + `

Examples:
  qctl -d data/journal events --kind attempt_retry_scheduled,attempt_buried
  qctl -d data/journal events --stream job_01KE3T5W2C8F0000000000000B
  qctl -d data/journal events --from 1200 --to 1300 --json
  qctl -d data/journal events --since 2026-01-05T10:00:00Z --follow`
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
}

func (f *eventFilter) match(r record.Record) bool {
	if len(f.kinds) > 0 && !f.kinds[r.Kind()] {
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
				return nil // interrupted: a normal end of --follow
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
		if err != nil || !c.Follow {
			return err
		}
		warned = false
		next = n
	}
	return nil
}

// isLocked reports whether err is openJournal's refusal of a directory an
// engine or another qctl holds.
func isLocked(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.cause != nil && isLockError(ee.cause)
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
	next := from
	handle := func(r record.Record) (bool, error) {
		next = r.Seq + 1
		if r.Seq > to || (flt.hasUntil && r.At >= flt.until) {
			return false, nil
		}
		if !flt.match(r) {
			return true, nil
		}
		if err := p.print(r); err != nil {
			return false, err
		}
		p.printed++
		return c.Limit == 0 || p.printed < c.Limit, nil
	}
	if c.Stream != "" {
		it := j.ScanStream(c.Stream, from)
		defer it.Close()
		for it.Next() {
			more, err := handle(it.Record())
			if err != nil || !more {
				return next, err
			}
		}
		if err := it.Err(); err != nil {
			return next, readError(j, err)
		}
		return max(next, last+1), nil
	}
	stop := errors.New("stop")
	err = x.scan(j, "events", from, to, func(it *journal.Iter) error {
		more, err := handle(it.Record())
		if err != nil {
			return err
		}
		if !more {
			return stop
		}
		return nil
	})
	if err != nil && err != stop {
		return next, err
	}
	return next, nil
}

// seekTime returns the first seq in lo..hi whose record was appended at or
// after at (hi+1 if none), by binary search over Get.
func seekTime(j *journal.Journal, lo, hi uint64, at int64) (uint64, error) {
	end := hi + 1
	for lo < end {
		mid := lo + (end-lo)/2
		r, err := j.Get(mid)
		if err != nil {
			return 0, err
		}
		if r.At >= at {
			end = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
