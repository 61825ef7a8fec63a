package qctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// Times: people read instants as RFC 3339 UTC with milliseconds, durations
// rounded to the millisecond; JSON carries instants as RFC 3339 strings
// with nanoseconds and durations as integer nanoseconds in keys ending in
// _ns.

const humanTime = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format(humanTime)
}

func fmtTimeT(t time.Time) string { return t.UTC().Format(humanTime) }

func jsonTime(ns int64) any {
	if ns == 0 {
		return nil
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

func fmtDur(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return d.Round(time.Millisecond).String()
}

// fmtRel returns t relative to base: "+1.5s", "-2s", "+0s".
func fmtRel(t, base int64) string {
	d := time.Duration(t - base)
	if d < 0 {
		return fmtDur(d)
	}
	return "+" + fmtDur(d)
}

// until says when t comes relative to now: "in 5s", "now", "5s ago".
func until(t int64, now time.Time) string {
	d := time.Duration(t - now.UnixNano())
	switch {
	case d > 0:
		return "in " + fmtDur(d)
	case d == 0:
		return "now"
	}
	return fmtDur(-d) + " ago"
}

// remaining says how long is left before a deadline: "5s", or
// "overdue 5s". A deadline is reached at its instant (WD-5: expired when
// deadline_at <= now), so at t itself it is "overdue 0s".
func remaining(t int64, now time.Time) string {
	d := time.Duration(t - now.UnixNano())
	if d <= 0 {
		return "overdue " + fmtDur(-d)
	}
	return fmtDur(d)
}

func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// quoteIfNeeded quotes s when it would not read as one token.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"=\\") || !strconv.CanBackquote(s) {
		return strconv.Quote(s)
	}
	return s
}

// truncate shortens s to at most n bytes before its "…", cutting between
// characters: a cut inside a multi-byte character left invalid UTF-8.
func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	cut := n - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// object is a JSON object that keeps its keys in insertion order, so that
// output is stable and reads in a sensible order.
type object []member

type member struct {
	Key   string
	Value any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalJSON(m.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// emit writes o as one line of JSON.
func emit(w io.Writer, o object) error {
	b, err := marshalJSON(o)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// table writes aligned columns. Cells never contain tabs.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			t.tw.Write([]byte{'\t'})
		}
		t.tw.Write([]byte(strings.ReplaceAll(orDash(c), "\t", " ")))
	}
	t.tw.Write([]byte{'\n'})
}

func (t *table) flush() error { return t.tw.Flush() }

// kv writes "key  value" lines aligned on the value.
func kv(w io.Writer, pairs ...string) error {
	t := newTable(w)
	for i := 0; i+1 < len(pairs); i += 2 {
		t.tw.Write([]byte(pairs[i] + "\t" + pairs[i+1] + "\n"))
	}
	return t.flush()
}

// Record bodies are rendered generically: every field of the body struct
// in declaration order (inline structs flattened), keyed by its msgpack tag
// (the wire name, never renamed). Int64 fields named ...At are instants and
// ...Nanos durations; []byte fields are user values (msgpack), shown
// decoded. Zero fields tagged omitempty are left out.

// userValueFields names the []byte body fields that hold user values
// (msgpack the api encodes); other byte slices are lists of numbers.
var userValueFields = map[string]bool{"Payload": true, "State": true, "Output": true}

var (
	backoffType = reflect.TypeOf(record.Backoff(0))
	retryType   = reflect.TypeOf(record.RetryPolicy{})
)

var backoffNames = map[record.Backoff]string{
	record.BackoffExponential: "exponential",
	record.BackoffFixed:       "fixed",
	record.BackoffLinear:      "linear",
	record.BackoffList:        "list",
}

func backoffName(b record.Backoff) string {
	if s, ok := backoffNames[b]; ok {
		return s
	}
	return "backoff(" + strconv.Itoa(int(b)) + ")"
}

// field is one rendered body field.
type field struct {
	key  string // the msgpack tag
	text string // for people, with instants through the caller's formatter
	json any    // for machines
	kind fieldKind
}

type fieldKind uint8

const (
	fieldPlain fieldKind = iota
	fieldInstant
	fieldDuration
	fieldValue // a user value
	fieldStack
)

// bodyFields renders b's fields; tf formats instants for people.
func bodyFields(b record.Body, tf func(int64) string) []field {
	v := reflect.ValueOf(b)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	var out []field
	walkFields(v, tf, &out)
	return out
}

func walkFields(v reflect.Value, tf func(int64) string, out *[]field) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("msgpack"), ",")
		fv := v.Field(i)
		if sf.Anonymous && strings.Contains(opts, "inline") && fv.Kind() == reflect.Struct {
			walkFields(fv, tf, out)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		*out = append(*out, renderField(name, sf, fv, tf))
	}
}

func renderField(name string, sf reflect.StructField, fv reflect.Value, tf func(int64) string) field {
	f := field{key: name}
	switch {
	case sf.Type == retryType:
		p := fv.Interface().(record.RetryPolicy)
		f.text = retryText(p)
		f.json = retryJSON(p)
	case sf.Type == backoffType:
		b := record.Backoff(fv.Uint())
		f.text, f.json = backoffName(b), backoffName(b)
	case fv.Kind() == reflect.Int64 && strings.HasSuffix(sf.Name, "At"):
		f.kind = fieldInstant
		ns := fv.Int()
		if ns == 0 {
			f.text, f.json = "none", nil
		} else {
			f.text, f.json = tf(ns), jsonTime(ns)
		}
	case sf.Name == "DeliveryTimeoutNanos" && fv.Int() == 0:
		// A job that sets no DeliveryTimeout of its own, its handler's or
		// its queue's takes the engine's Options.DeliveryTimeout when an
		// attempt starts (DL-2): 0 is "the engine's", not a zero budget.
		f.kind = fieldDuration
		f.text, f.json = "engine", int64(0)
	case fv.Kind() == reflect.Int64 && strings.HasSuffix(sf.Name, "Nanos"):
		f.kind = fieldDuration
		f.text, f.json = fmtDur(time.Duration(fv.Int())), fv.Int()
	case fv.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Int64 && strings.HasSuffix(sf.Name, "Nanos"):
		f.kind = fieldDuration
		ds := make([]string, fv.Len())
		ns := make([]int64, fv.Len())
		for i := range ds {
			ns[i] = fv.Index(i).Int()
			ds[i] = fmtDur(time.Duration(ns[i]))
		}
		f.text, f.json = "["+strings.Join(ds, " ")+"]", ns
	case fv.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Uint8 && userValueFields[sf.Name]:
		f.kind = fieldValue
		b, private := fv.Bytes(), false
		if sf.Name == "State" && len(b) > 0 {
			// Keys starting with "_" are stored, never shown (WF-12):
			// a dispatch's private keys often carry credentials.
			if pub, hidden, err := replay.PublicStateHiding(b); err == nil {
				b, private = pub, hidden
			}
		}
		f.text, f.json = userValue(b)
		if private {
			f.text += " (private keys not shown)"
		}
	case sf.Name == "Stack":
		f.kind = fieldStack
		f.text, f.json = fmt.Sprintf("<%d lines>", strings.Count(fv.String(), "\n")+1), fv.String()
	case fv.Kind() == reflect.String:
		f.text, f.json = quoteIfNeeded(fv.String()), fv.String()
	case fv.Kind() == reflect.Slice:
		parts := make([]string, fv.Len())
		items := make([]any, fv.Len())
		for i := range parts {
			items[i] = fv.Index(i).Interface()
			if s, ok := items[i].(string); ok {
				parts[i] = quoteIfNeeded(s)
			} else {
				parts[i] = fmt.Sprint(items[i])
			}
		}
		f.text, f.json = "["+strings.Join(parts, " ")+"]", items
	default:
		f.text, f.json = fmt.Sprint(fv.Interface()), fv.Interface()
	}
	return f
}

func retryText(p record.RetryPolicy) string {
	s := fmt.Sprintf("%d×%s", p.MaxAttempts, backoffName(p.Backoff))
	if p.Backoff == record.BackoffList {
		ds := make([]string, len(p.ListNanos))
		for i, n := range p.ListNanos {
			ds[i] = fmtDur(time.Duration(n))
		}
		s += "(" + strings.Join(ds, ",") + ")"
	} else {
		s += "(" + fmtDur(time.Duration(p.BaseNanos)) + ".." + fmtDur(time.Duration(p.MaxNanos)) + ")"
	}
	if p.JitterRatio != 0 {
		s += fmt.Sprintf("±%g", p.JitterRatio)
	}
	return s
}

func retryJSON(p record.RetryPolicy) object {
	o := object{
		{"max_attempts", p.MaxAttempts}, {"backoff", backoffName(p.Backoff)},
		{"base_ns", p.BaseNanos}, {"max_ns", p.MaxNanos}, {"jitter", p.JitterRatio},
	}
	if len(p.ListNanos) > 0 {
		o = append(o, member{"list_ns", p.ListNanos})
	}
	return o
}

// userValue renders a msgpack user value (payload, state, output) for
// display: a JSON preview for people and the JSON for machines, written
// from the bytes (userJSON). Bytes that do not decode are shown by size
// only.
func userValue(b []byte) (string, any) {
	if len(b) == 0 {
		return "-", nil
	}
	j, err := userJSON(b)
	switch {
	case errors.Is(err, errNotMsgpack):
		return fmt.Sprintf("<%d bytes, not msgpack>", len(b)), object{{"bytes", len(b)}, {"undecodable", true}}
	case err != nil:
		return fmt.Sprintf("<%d bytes>", len(b)), object{{"bytes", len(b)}}
	}
	return truncate(string(j), 60), json.RawMessage(j)
}

// recordOpts says how a record line reads.
type recordOpts struct {
	tf     func(int64) string // instants in bodies
	stream string             // omit job_id/workflow_id equal to it
}

// kindLine renders the body of r on one line for people: the per-kind
// renderer if there is one, else every field.
func kindLine(r record.Record, o recordOpts) string {
	fs := bodyFields(r.Body, o.tf)
	if fn := kindExtra[r.Kind()]; fn != nil {
		fs = append(fs, fn(r)...)
	}
	skip := kindSkip[r.Kind()]
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		if f.kind == fieldStack || (skip != nil && skip(r, f.key)) {
			continue
		}
		if (f.key == "job_id" || f.key == "workflow_id") && f.text == o.stream {
			continue
		}
		if f.key == "priority" && r.Kind() == record.KindJobEnqueued {
			// By name, as jobs and show print it; JSON keeps the number.
			f.text = priorityText(r.Body.(*record.JobEnqueued).Priority)
		}
		parts = append(parts, strings.TrimSuffix(f.key, "_ns")+"="+f.text)
	}
	return strings.Join(parts, " ")
}

// kindSkip leaves out of some kinds' human lines the fields that say
// nothing there: the step and branch of a job outside any workflow, the
// parent step of a workflow without a parent.
var kindSkip = map[record.Kind]func(r record.Record, key string) bool{
	record.KindJobEnqueued: func(r record.Record, key string) bool {
		return (key == "step" || key == "branch") && r.Body.(*record.JobEnqueued).WorkflowID == ""
	},
	record.KindWorkflowStarted: func(r record.Record, key string) bool {
		return key == "parent_step" && r.Body.(*record.WorkflowStarted).ParentID == ""
	},
}

// kindExtra adds derived fields to some kinds' human lines.
var kindExtra = map[record.Kind]func(r record.Record) []field{
	record.KindAttemptStarted: func(r record.Record) []field {
		b := r.Body.(*record.AttemptStarted)
		return []field{{key: "budget", text: fmtDur(time.Duration(b.HardAt - b.StartAt))}}
	},
}

// recordJSON renders r for machines.
func recordJSON(r record.Record) object {
	fs := bodyFields(r.Body, fmtTime)
	body := make(object, 0, len(fs))
	for _, f := range fs {
		body = append(body, member{f.key, f.json})
	}
	return object{
		{"type", "record"}, {"seq", r.Seq}, {"at", jsonTime(r.At)}, {"stream", r.Stream},
		{"kind", r.Kind().String()}, {"body", body},
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
