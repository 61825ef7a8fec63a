package record

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/quire-dev/quire/internal/mpwrite"
)

// reflectBytes is what msgpack's reflection encoder writes for v, set up
// as EncodeBody always set it up before the hand encoders existed.
func reflectBytes(t interface{ Fatalf(string, ...any) }, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("reflection encoder: %v", err)
	}
	return buf.Bytes()
}

// boundaryLens are the lengths at which a msgpack string or bin header
// changes width.
var boundaryLens = []int{0, 1, 31, 32, 255, 256, 65535, 65536}

// edgeStr draws an empty, short, random or boundary-length string.
func edgeStr(t *rapid.T, label string) string {
	switch rapid.IntRange(0, 3).Draw(t, label+"_form") {
	case 0:
		return ""
	case 1:
		return rapid.StringN(1, 12, -1).Draw(t, label)
	case 2:
		return rapid.String().Draw(t, label)
	}
	n := rapid.SampledFrom(boundaryLens).Draw(t, label+"_len")
	return strings.Repeat(string(rune(rapid.IntRange('a', 'z').Draw(t, label+"_char"))), n)
}

// edgeBin draws nil, an empty slice, random bytes or a boundary length.
func edgeBin(t *rapid.T, label string) []byte {
	switch rapid.IntRange(0, 3).Draw(t, label+"_form") {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return rapid.SliceOfN(rapid.Byte(), 1, 40).Draw(t, label)
	}
	return bytes.Repeat([]byte{0xc1}, rapid.SampledFrom(boundaryLens).Draw(t, label+"_len"))
}

// edgeStrs draws nil, an empty slice, or up to 17 strings (an array header
// widens at 16).
func edgeStrs(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 2).Draw(t, label+"_form") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	n := rapid.IntRange(1, 17).Draw(t, label+"_n")
	out := make([]string, n)
	for i := range out {
		out[i] = edgeStr(t, label)
	}
	return out
}

func edgeI64(t *rapid.T, label string) int64 {
	return rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{0, 1, -1, math.MinInt64, math.MaxInt64})).Draw(t, label)
}

func edgeI32(t *rapid.T, label string) int32 {
	return rapid.OneOf(rapid.Int32(), rapid.SampledFrom([]int32{0, 1, -1, math.MinInt32, math.MaxInt32})).Draw(t, label)
}

func edgeU64(t *rapid.T, label string) uint64 {
	return rapid.OneOf(rapid.Uint64(), rapid.SampledFrom([]uint64{0, 1, math.MaxUint64})).Draw(t, label)
}

func edgeF64(t *rapid.T, label string) float64 {
	return rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{
		0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), math.SmallestNonzeroFloat64, -math.MaxFloat64,
	})).Draw(t, label)
}

func edgeOutcome(t *rapid.T) Outcome {
	return Outcome{
		JobID: edgeStr(t, "job_id"), Token: edgeU64(t, "token"), Code: edgeStr(t, "code"),
		Class: edgeStr(t, "class"), Error: edgeStr(t, "error"), Stack: edgeStr(t, "stack"),
		Reason: edgeStr(t, "reason"), ReasonAt: edgeI64(t, "reason_at"), Joined: rapid.Bool().Draw(t, "joined"),
		Cleanup: edgeStr(t, "cleanup"), Execution: edgeStr(t, "execution"), Middleware: edgeStrs(t, "middleware"),
		NormalExits: edgeStrs(t, "normal_exits"), TerminationExits: edgeStrs(t, "termination_exits"),
		Scope: edgeStr(t, "scope"),
	}
}

// edgeBody draws a body of a hand-encoded kind at the edges of the msgpack
// format: every string, slice and number at or around a width boundary,
// nil against empty, omitempty fields present and absent.
func edgeBody(t *rapid.T, k Kind) bodyAppender {
	switch k {
	case KindJobEnqueued:
		var list []int64
		switch rapid.IntRange(0, 2).Draw(t, "list_form") {
		case 1:
			list = []int64{}
		case 2:
			list = rapid.SliceOfN(rapid.Int64(), 1, 17).Draw(t, "list_ns")
		}
		return &JobEnqueued{
			JobID: edgeStr(t, "job_id"), Handler: edgeStr(t, "handler"), Queue: edgeStr(t, "queue"),
			Priority: rapid.Uint8().Draw(t, "priority"), AvailableAt: edgeI64(t, "available_at"),
			Retry: RetryPolicy{
				MaxAttempts: edgeI32(t, "max_attempts"), Backoff: Backoff(rapid.Uint8().Draw(t, "backoff")),
				BaseNanos: edgeI64(t, "base"), MaxNanos: edgeI64(t, "max"), JitterRatio: edgeF64(t, "jitter"),
				ListNanos: list,
			},
			DeliveryTimeoutNanos: edgeI64(t, "delivery_timeout"), UniqueKey: edgeStr(t, "unique_key"),
			Payload: edgeBin(t, "payload"), WorkflowID: edgeStr(t, "workflow_id"),
			Step: edgeI32(t, "step"), Branch: edgeI32(t, "branch"),
		}
	case KindAttemptStarted:
		return &AttemptStarted{
			JobID: edgeStr(t, "job_id"), Attempt: edgeI32(t, "attempt"),
			StartAt: edgeI64(t, "s"), HardAt: edgeI64(t, "h"), NormalAt: edgeI64(t, "p"),
		}
	case KindAttemptSucceeded:
		return &AttemptSucceeded{Outcome: edgeOutcome(t), Output: edgeBin(t, "output")}
	case KindAttemptRetryScheduled:
		return &AttemptRetryScheduled{Outcome: edgeOutcome(t), DelayNanos: edgeI64(t, "delay"), AvailableAt: edgeI64(t, "available_at")}
	case KindAttemptBuried:
		return &AttemptBuried{Outcome: edgeOutcome(t)}
	case KindAttemptReleased:
		return &AttemptReleased{Outcome: edgeOutcome(t), AvailableAt: edgeI64(t, "available_at")}
	}
	t.Fatalf("edgeBody: %s is not hand-encoded", k)
	return nil
}

// TestEncodeBodyHandMatchesReflection: for each hand-encoded kind, EncodeBody
// writes exactly the reflection encoder's bytes, within bodyBytesMax (so in
// one allocation). The on-disk format does not depend on which path ran.
func TestEncodeBodyHandMatchesReflection(t *testing.T) {
	t.Parallel()
	hand := 0
	for _, k := range Kinds() {
		b, _ := NewBody(k)
		if _, ok := b.(bodyAppender); !ok {
			continue
		}
		hand++
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			rapid.Check(t, func(t *rapid.T) {
				body := edgeBody(t, k)
				got, err := EncodeBody(body)
				if err != nil {
					t.Fatalf("EncodeBody: %v", err)
				}
				if want := reflectBytes(t, body); !bytes.Equal(got, want) {
					t.Fatalf("hand encoding differs from reflection:\n got %x\nwant %x", got, want)
				}
				if len(got) > body.bodyBytesMax() {
					t.Fatalf("encoding is %d bytes, bodyBytesMax %d", len(got), body.bodyBytesMax())
				}
			})
		})
	}
	if hand < 3 {
		t.Fatalf("%d hand-encoded kinds, want at least job_enqueued, attempt_started, attempt_succeeded", hand)
	}
}

// TestEncodeBodyNilBody: a nil body pointer still encodes as msgpack nil,
// as the reflection encoder writes it.
func TestEncodeBodyNilBody(t *testing.T) {
	t.Parallel()
	for _, b := range []Body{(*JobEnqueued)(nil), (*AttemptSucceeded)(nil)} {
		got, err := EncodeBody(b)
		if err != nil || !bytes.Equal(got, []byte{0xc0}) {
			t.Fatalf("EncodeBody(%T nil) = %x, %v; want c0", b, got, err)
		}
	}
}

// startedPlus is AttemptStarted with a field its appender does not know,
// as a body looks after a field is added to bodies.go but not to the
// appender.
type startedPlus struct {
	AttemptStarted `msgpack:",inline"`
	Extra          string `msgpack:"extra,omitempty"`
}

// startedOmit is AttemptStarted with its attempt field retagged omitempty,
// encoded by AttemptStarted's appender.
type startedOmit struct {
	JobID    string `msgpack:"job_id"`
	Attempt  int32  `msgpack:"attempt,omitempty"`
	StartAt  int64  `msgpack:"s"`
	HardAt   int64  `msgpack:"h"`
	NormalAt int64  `msgpack:"p"`
}

func (*startedOmit) Kind() Kind { return KindAttemptStarted }
func (*startedOmit) isBody()    {}
func (e *startedOmit) started() *AttemptStarted {
	return &AttemptStarted{JobID: e.JobID, Attempt: e.Attempt, StartAt: e.StartAt, HardAt: e.HardAt, NormalAt: e.NormalAt}
}
func (e *startedOmit) bodyBytesMax() int          { return e.started().bodyBytesMax() }
func (e *startedOmit) appendBody(b []byte) []byte { return e.started().appendBody(b) }

// TestCheckAppendersCatchesDrift: the init-time check refuses an appender
// that no longer matches its type, on the filled value even where the zero
// value agrees.
func TestCheckAppendersCatchesDrift(t *testing.T) {
	t.Parallel()
	if err := checkAppenders(new(AttemptStarted), new(AttemptSucceeded)); err != nil {
		t.Fatalf("checkAppenders on the real bodies: %v", err)
	}
	if err := checkAppender(new(startedPlus)); err != nil {
		t.Fatalf("zero value with an empty omitempty extra should agree: %v", err)
	}
	if err := checkAppenders(new(startedPlus)); err == nil || !strings.Contains(err.Error(), "startedPlus") {
		t.Fatalf("checkAppenders(startedPlus) = %v, want an error naming the type", err)
	}
	if err := checkAppenders(new(startedOmit)); err == nil || !strings.Contains(err.Error(), "startedOmit") {
		t.Fatalf("checkAppenders(startedOmit) = %v, want an error naming the type", err)
	}
}

// TestMpwriteMatchesMsgpack ties internal/mpwrite, which may not import
// msgpack, to msgpack v5's Encoder at every header boundary and at random.
func TestMpwriteMatchesMsgpack(t *testing.T) {
	t.Parallel()
	ref := func(t *rapid.T, f func(*msgpack.Encoder) error) []byte {
		var buf bytes.Buffer
		if err := f(msgpack.NewEncoder(&buf)); err != nil {
			t.Fatalf("msgpack: %v", err)
		}
		return buf.Bytes()
	}
	lens := append([]int{15, 16, 17, 65537}, boundaryLens...)
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.OneOf(rapid.SampledFrom(lens), rapid.IntRange(0, 1<<17)).Draw(t, "n")
		s := strings.Repeat("q", n)
		i64, i32, u64, f := edgeI64(t, "i64"), edgeI32(t, "i32"), edgeU64(t, "u64"), edgeF64(t, "f64")
		u8, v := rapid.Uint8().Draw(t, "u8"), rapid.Bool().Draw(t, "bool")
		var p []byte
		if rapid.Bool().Draw(t, "non_nil") {
			p = []byte(s)
		}
		cases := []struct {
			name      string
			got, want []byte
		}{
			{"map len", mpwrite.AppendMapLen(nil, n), ref(t, func(e *msgpack.Encoder) error { return e.EncodeMapLen(n) })},
			{"array len", mpwrite.AppendArrayLen(nil, n), ref(t, func(e *msgpack.Encoder) error { return e.EncodeArrayLen(n) })},
			{"string", mpwrite.AppendString(nil, s), ref(t, func(e *msgpack.Encoder) error { return e.EncodeString(s) })},
			{"bin", mpwrite.AppendBin(nil, p), ref(t, func(e *msgpack.Encoder) error { return e.EncodeBytes(p) })},
			{"nil", mpwrite.AppendNil(nil), ref(t, func(e *msgpack.Encoder) error { return e.EncodeNil() })},
			{"bool", mpwrite.AppendBool(nil, v), ref(t, func(e *msgpack.Encoder) error { return e.EncodeBool(v) })},
			{"uint8", mpwrite.AppendUint8(nil, u8), ref(t, func(e *msgpack.Encoder) error { return e.Encode(u8) })},
			{"int32", mpwrite.AppendInt32(nil, i32), ref(t, func(e *msgpack.Encoder) error { return e.Encode(i32) })},
			{"int64", mpwrite.AppendInt64(nil, i64), ref(t, func(e *msgpack.Encoder) error { return e.Encode(i64) })},
			{"uint64", mpwrite.AppendUint64(nil, u64), ref(t, func(e *msgpack.Encoder) error { return e.Encode(u64) })},
			{"float64", mpwrite.AppendFloat64(nil, f), ref(t, func(e *msgpack.Encoder) error { return e.Encode(f) })},
		}
		for _, c := range cases {
			if !bytes.Equal(c.got, c.want) {
				t.Fatalf("%s: mpwrite %x, msgpack %x", c.name, c.got[:min(len(c.got), 16)], c.want[:min(len(c.want), 16)])
			}
		}
	})
}

// benchBodies are typical records of the enqueue path, with the sizes the
// engine writes: ULID-based ids, a short handler and queue, a small
// payload, a settled attempt with an output.
func benchBodies() []bodyAppender {
	const t0 = 1_700_000_000_000_000_000
	return []bodyAppender{
		&JobEnqueued{
			JobID: "job_01J9Z4ABCDEFGHJKMNPQRSTVWX", Handler: "send_email", Queue: "default", Priority: 1,
			AvailableAt: t0, Retry: RetryPolicy{MaxAttempts: 5, BaseNanos: 1e9, MaxNanos: 3e11, JitterRatio: 0.2},
			DeliveryTimeoutNanos: 3e10, Payload: bytes.Repeat([]byte{0xa1}, 64),
		},
		&AttemptStarted{JobID: "job_01J9Z4ABCDEFGHJKMNPQRSTVWX", Attempt: 1, StartAt: t0, HardAt: t0 + 3e10, NormalAt: t0 + 2.5e10},
		&AttemptSucceeded{
			Outcome: Outcome{JobID: "job_01J9Z4ABCDEFGHJKMNPQRSTVWX", Token: 12345, Joined: true},
			Output:  []byte{0x81, 0xa2, 'o', 'k', 0xc3},
		},
	}
}

// BenchmarkEncodeBody compares the hand encoders with the reflection
// encoder they replace, on the three kinds of the enqueue path:
//
//	go test ./journal/record -run '^$' -bench EncodeBody -count 5
func BenchmarkEncodeBody(b *testing.B) {
	for _, body := range benchBodies() {
		b.Run(body.Kind().String()+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EncodeBody(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(body.Kind().String()+"/reflect", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encodeReflect(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
