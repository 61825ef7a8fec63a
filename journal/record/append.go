package record

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/quire-dev/quire/internal/mpwrite"
)

// bodyAppender is a [Body] that encodes itself by hand. [EncodeBody] takes
// this path for the kinds the engine appends on every job (enqueue, start,
// settlement), where msgpack's reflection encoder was a large share of the
// engine's CPU. The bytes are the reflection encoder's, exactly: the init
// function below and the properties in append_test.go hold every appender
// to that.
type bodyAppender interface {
	Body
	// bodyBytesMax bounds the length of what appendBody appends, so that
	// EncodeBody allocates once.
	bodyBytesMax() int
	// appendBody appends the body's encoding to b: a map of its fields
	// keyed by msgpack tag, in declaration order (an inline Outcome's fields
	// in its place), fixed-width numbers, an omitempty field left out when
	// it holds its zero value.
	appendBody(b []byte) []byte
}

var (
	_ bodyAppender = (*JobEnqueued)(nil)
	_ bodyAppender = (*AttemptStarted)(nil)
	_ bodyAppender = (*AttemptSucceeded)(nil)
	_ bodyAppender = (*AttemptRetryScheduled)(nil)
	_ bodyAppender = (*AttemptBuried)(nil)
	_ bodyAppender = (*AttemptReleased)(nil)
)

// The fixed parts of the bounds: a map header (3 bytes up to 65535
// entries), each key with its one-byte fixstr header, each number at its
// width, and 5 bytes (the widest header) for each string, byte slice and
// array. The lengths of strings, byte slices and slice elements come on
// top. The property tests check every encoding against its bound.
const (
	retryBytesMax = 3 + len("max_attempts"+"backoff"+"base_ns"+"max_ns"+"jitter"+"list_ns") + 6 +
		5 + 2 + 9 + 9 + 9 + 5
	jobEnqueuedBytesMax = 3 + len("job_id"+"handler"+"queue"+"priority"+"available_at"+"retry"+
		"delivery_timeout_ns"+"unique_key"+"payload"+"workflow_id"+"step"+"branch") + 12 +
		5*5 + 2 + 9 + retryBytesMax + 9 + 5 + 5 + 5
	attemptStartedBytesMax = 3 + len("job_id"+"attempt"+"s"+"h"+"p") + 5 +
		5 + 5 + 9 + 9 + 9
	// outcomeBytesMax is Outcome's share of a settlement, map header
	// included.
	outcomeBytesMax = 3 + len("job_id"+"token"+"code"+"class"+"error"+"stack"+"reason"+"reason_at"+
		"joined"+"cleanup"+"execution"+"middleware"+"normal_exits"+"termination_exits"+"scope") + 15 +
		9*5 + 9 + 9 + 1 + 3*5
)

func (e *JobEnqueued) bodyBytesMax() int {
	return jobEnqueuedBytesMax + len(e.JobID) + len(e.Handler) + len(e.Queue) + len(e.UniqueKey) +
		len(e.Payload) + len(e.WorkflowID) + 9*len(e.Retry.ListNanos)
}

func (e *JobEnqueued) appendBody(b []byte) []byte {
	n := 10
	if e.UniqueKey != "" {
		n++
	}
	if e.WorkflowID != "" {
		n++
	}
	b = mpwrite.AppendMapLen(b, n)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "job_id"), e.JobID)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "handler"), e.Handler)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "queue"), e.Queue)
	b = mpwrite.AppendUint8(mpwrite.AppendString(b, "priority"), e.Priority)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "available_at"), e.AvailableAt)
	b = e.Retry.AppendMsgpack(mpwrite.AppendString(b, "retry"))
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "delivery_timeout_ns"), e.DeliveryTimeoutNanos)
	if e.UniqueKey != "" {
		b = mpwrite.AppendString(mpwrite.AppendString(b, "unique_key"), e.UniqueKey)
	}
	b = mpwrite.AppendBin(mpwrite.AppendString(b, "payload"), e.Payload)
	if e.WorkflowID != "" {
		b = mpwrite.AppendString(mpwrite.AppendString(b, "workflow_id"), e.WorkflowID)
	}
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "step"), e.Step)
	return mpwrite.AppendInt32(mpwrite.AppendString(b, "branch"), e.Branch)
}

// AppendMsgpack appends p exactly as msgpack's reflection encoder writes a
// RetryPolicy: a map keyed by its tags, list_ns omitted when empty. It
// encodes the retry field of job_enqueued, and replay's snapshot uses it
// for the policy each job carries.
func (p *RetryPolicy) AppendMsgpack(b []byte) []byte {
	n := 5
	if len(p.ListNanos) > 0 {
		n++
	}
	b = mpwrite.AppendMapLen(b, n)
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "max_attempts"), p.MaxAttempts)
	b = mpwrite.AppendUint8(mpwrite.AppendString(b, "backoff"), uint8(p.Backoff))
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "base_ns"), p.BaseNanos)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "max_ns"), p.MaxNanos)
	b = mpwrite.AppendFloat64(mpwrite.AppendString(b, "jitter"), p.JitterRatio)
	if len(p.ListNanos) > 0 {
		b = mpwrite.AppendArrayLen(mpwrite.AppendString(b, "list_ns"), len(p.ListNanos))
		for _, v := range p.ListNanos {
			b = mpwrite.AppendInt64(b, v)
		}
	}
	return b
}

func (e *AttemptStarted) bodyBytesMax() int { return attemptStartedBytesMax + len(e.JobID) }

func (e *AttemptStarted) appendBody(b []byte) []byte {
	b = mpwrite.AppendMapLen(b, 5)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "job_id"), e.JobID)
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "attempt"), e.Attempt)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "s"), e.StartAt)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "h"), e.HardAt)
	return mpwrite.AppendInt64(mpwrite.AppendString(b, "p"), e.NormalAt)
}

func (o *Outcome) bytesMax() int {
	n := outcomeBytesMax + len(o.JobID) + len(o.Code) + len(o.Class) + len(o.Error) + len(o.Stack) +
		len(o.Reason) + len(o.Cleanup) + len(o.Execution) + len(o.Scope)
	for _, l := range [...][]string{o.Middleware, o.NormalExits, o.TerminationExits} {
		for _, s := range l {
			n += 5 + len(s)
		}
	}
	return n
}

// fields returns how many entries o contributes to the map of the
// settlement that inlines it.
func (o *Outcome) fields() int {
	n := 3 // job_id, token, joined
	for _, s := range [...]string{o.Code, o.Class, o.Error, o.Stack, o.Reason, o.Cleanup, o.Execution, o.Scope} {
		if s != "" {
			n++
		}
	}
	for _, l := range [...][]string{o.Middleware, o.NormalExits, o.TerminationExits} {
		if len(l) > 0 {
			n++
		}
	}
	if o.ReasonAt != 0 {
		n++
	}
	return n
}

// appendOutcome appends o's fields as entries of the enclosing map, whose
// header the caller has written: the settlements embed Outcome inline.
func appendOutcome(b []byte, o *Outcome) []byte {
	b = mpwrite.AppendString(mpwrite.AppendString(b, "job_id"), o.JobID)
	b = mpwrite.AppendUint64(mpwrite.AppendString(b, "token"), o.Token)
	b = appendOptString(b, "code", o.Code)
	b = appendOptString(b, "class", o.Class)
	b = appendOptString(b, "error", o.Error)
	b = appendOptString(b, "stack", o.Stack)
	b = appendOptString(b, "reason", o.Reason)
	if o.ReasonAt != 0 {
		b = mpwrite.AppendInt64(mpwrite.AppendString(b, "reason_at"), o.ReasonAt)
	}
	b = mpwrite.AppendBool(mpwrite.AppendString(b, "joined"), o.Joined)
	b = appendOptString(b, "cleanup", o.Cleanup)
	b = appendOptString(b, "execution", o.Execution)
	b = appendOptStrings(b, "middleware", o.Middleware)
	b = appendOptStrings(b, "normal_exits", o.NormalExits)
	b = appendOptStrings(b, "termination_exits", o.TerminationExits)
	return appendOptString(b, "scope", o.Scope)
}

// appendOptString appends an omitempty string field.
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return mpwrite.AppendString(mpwrite.AppendString(b, key), s)
}

// appendOptStrings appends an omitempty []string field: left out when nil
// or empty.
func appendOptStrings(b []byte, key string, l []string) []byte {
	if len(l) == 0 {
		return b
	}
	b = mpwrite.AppendArrayLen(mpwrite.AppendString(b, key), len(l))
	for _, s := range l {
		b = mpwrite.AppendString(b, s)
	}
	return b
}

func (e *AttemptSucceeded) bodyBytesMax() int {
	return e.Outcome.bytesMax() + 1 + len("output") + 5 + len(e.Output)
}

func (e *AttemptSucceeded) appendBody(b []byte) []byte {
	n := e.fields()
	if len(e.Output) > 0 {
		n++
	}
	b = appendOutcome(mpwrite.AppendMapLen(b, n), &e.Outcome)
	if len(e.Output) > 0 {
		b = mpwrite.AppendBin(mpwrite.AppendString(b, "output"), e.Output)
	}
	return b
}

func (e *AttemptRetryScheduled) bodyBytesMax() int {
	return e.Outcome.bytesMax() + 1 + len("delay_ns") + 9 + 1 + len("available_at") + 9
}

func (e *AttemptRetryScheduled) appendBody(b []byte) []byte {
	b = appendOutcome(mpwrite.AppendMapLen(b, e.fields()+2), &e.Outcome)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "delay_ns"), e.DelayNanos)
	return mpwrite.AppendInt64(mpwrite.AppendString(b, "available_at"), e.AvailableAt)
}

func (e *AttemptBuried) bodyBytesMax() int { return e.Outcome.bytesMax() + 1 + len("final") + 1 }

func (e *AttemptBuried) appendBody(b []byte) []byte {
	n := e.fields()
	if e.Final {
		n++
	}
	b = appendOutcome(mpwrite.AppendMapLen(b, n), &e.Outcome)
	if e.Final {
		b = mpwrite.AppendBool(mpwrite.AppendString(b, "final"), true)
	}
	return b
}

func (e *AttemptReleased) bodyBytesMax() int {
	return e.Outcome.bytesMax() + 1 + len("available_at") + 9
}

func (e *AttemptReleased) appendBody(b []byte) []byte {
	b = appendOutcome(mpwrite.AppendMapLen(b, e.fields()+1), &e.Outcome)
	return mpwrite.AppendInt64(mpwrite.AppendString(b, "available_at"), e.AvailableAt)
}

// init holds every appender to the reflection encoder on two values of its
// type: the zero value (each omitempty field left out) and a value with
// every field, nested and inline ones included, set to a distinct non-zero
// value. A field added to a hand-encoded body, renamed, retagged, retyped
// or reordered without the same change to its appender panics here, at the
// start of every program and test that imports this package, before any
// record can be written with the wrong bytes.
func init() {
	if err := checkAppenders(
		new(JobEnqueued), new(AttemptStarted), new(AttemptSucceeded),
		new(AttemptRetryScheduled), new(AttemptBuried), new(AttemptReleased),
	); err != nil {
		panic(err)
	}
}

// checkAppenders checks each body's appender on the zero value of its type
// and on a value with every field filled (fillFields).
func checkAppenders(zeros ...bodyAppender) error {
	for _, zero := range zeros {
		full := reflect.New(reflect.TypeOf(zero).Elem())
		next := 0
		fillFields(full.Elem(), &next)
		for _, b := range []bodyAppender{zero, full.Interface().(bodyAppender)} {
			if err := checkAppender(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkAppender returns an error unless b's appender writes what the
// reflection encoder writes, within its bound.
func checkAppender(b bodyAppender) error {
	want, err := encodeReflect(b)
	if err != nil {
		return err
	}
	got := b.appendBody(nil)
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		return fmt.Errorf("record: %T.appendBody differs from the reflection encoder at byte %d (%d and %d bytes):\n%x\n%x\nupdate the appender with the type",
			b, at, len(got), len(want), got, want)
	}
	if len(got) > b.bodyBytesMax() {
		return fmt.Errorf("record: %T.appendBody writes %d bytes, more than bodyBytesMax's %d", b, len(got), b.bodyBytesMax())
	}
	return nil
}

// fillFields sets every field of the struct v, recursively, to a non-zero
// value that no other field gets, numbering them through next. A field of
// a kind a body must not hold panics (spec/reliability.md §3.4).
func fillFields(v reflect.Value, next *int) {
	for i := 0; i < v.NumField(); i++ {
		fillValue(v.Field(i), next)
	}
}

func fillValue(f reflect.Value, next *int) {
	*next++
	n := *next
	switch f.Kind() {
	case reflect.Struct:
		fillFields(f, next)
	case reflect.String:
		f.SetString(fmt.Sprintf("v%d", n))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(int64(n))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(uint64(n))
	case reflect.Float64:
		f.SetFloat(float64(n) + 0.5)
	case reflect.Slice:
		s := reflect.MakeSlice(f.Type(), 2, 2)
		fillValue(s.Index(0), next)
		fillValue(s.Index(1), next)
		f.Set(s)
	default:
		panic(fmt.Sprintf("record: a body field of kind %s has no appender support", f.Kind()))
	}
}
