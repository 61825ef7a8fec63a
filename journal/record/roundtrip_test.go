package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// genBody draws a random body of kind k. Empty slices are drawn as nil, the
// form they decode to.
func genBody(t *rapid.T, k Kind) Body {
	str := func(label string) string { return rapid.StringN(0, 12, 48).Draw(t, label) }
	bin := func(label string) []byte {
		b := rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, label)
		if len(b) == 0 {
			return nil
		}
		return b
	}
	strs := func(label string) []string {
		s := rapid.SliceOfN(rapid.StringN(0, 6, 24), 0, 4).Draw(t, label)
		if len(s) == 0 {
			return nil
		}
		return s
	}
	i64 := func(label string) int64 { return rapid.Int64().Draw(t, label) }
	i32 := func(label string) int32 { return rapid.Int32().Draw(t, label) }
	u64 := func(label string) uint64 { return rapid.Uint64().Draw(t, label) }
	flag := func(label string) bool { return rapid.Bool().Draw(t, label) }
	outcome := func() Outcome {
		return Outcome{
			JobID: str("job_id"), Token: u64("token"), Code: str("code"), Class: str("class"),
			Error: str("error"), Stack: str("stack"), Reason: str("reason"), ReasonAt: i64("reason_at"),
			Joined: flag("joined"), Cleanup: str("cleanup"),
			Execution: str("execution"), Middleware: strs("middleware"), NormalExits: strs("normal_exits"),
			TerminationExits: strs("termination_exits"), Scope: str("scope"),
		}
	}
	switch k {
	case KindRunStarted:
		return &RunStarted{RunID: str("run_id"), Version: str("version"), At: i64("at"), Recovered: i64("recovered")}
	case KindDebug:
		return &Debug{Subject: str("subject"), Code: str("code"), Message: str("message")}
	case KindJobEnqueued:
		list := rapid.SliceOfN(rapid.Int64(), 0, 5).Draw(t, "list_ns")
		if len(list) == 0 {
			list = nil
		}
		return &JobEnqueued{
			JobID: str("job_id"), Handler: str("handler"), Queue: str("queue"),
			Priority: rapid.Uint8().Draw(t, "priority"), AvailableAt: i64("available_at"),
			Retry: RetryPolicy{
				MaxAttempts: i32("max_attempts"), Backoff: Backoff(rapid.Uint8Range(0, 3).Draw(t, "backoff")),
				BaseNanos: i64("base"), MaxNanos: i64("max"),
				JitterRatio: rapid.Float64Range(-1e12, 1e12).Draw(t, "jitter"), ListNanos: list,
			},
			DeliveryTimeoutNanos: i64("delivery_timeout"), UniqueKey: str("unique_key"),
			Payload: bin("payload"), WorkflowID: str("workflow_id"), Step: i32("step"), Branch: i32("branch"),
		}
	case KindAttemptStarted:
		return &AttemptStarted{JobID: str("job_id"), Attempt: i32("attempt"), StartAt: i64("s"), HardAt: i64("h"), NormalAt: i64("p")}
	case KindAttemptSucceeded:
		return &AttemptSucceeded{Outcome: outcome(), Output: bin("output")}
	case KindAttemptRetryScheduled:
		return &AttemptRetryScheduled{Outcome: outcome(), DelayNanos: i64("delay"), AvailableAt: i64("available_at")}
	case KindAttemptBuried:
		return &AttemptBuried{Outcome: outcome(), Final: flag("final")}
	case KindAttemptReleased:
		return &AttemptReleased{Outcome: outcome(), AvailableAt: i64("available_at")}
	case KindJobBuried:
		return &JobBuried{JobID: str("job_id"), Code: str("code"), Error: str("error"), Final: flag("final")}
	case KindJobRequeued:
		return &JobRequeued{JobID: str("job_id"), AvailableAt: i64("available_at"), KeepKey: flag("keep_key")}
	case KindQueuePaused:
		return &QueuePaused{Queue: str("queue")}
	case KindQueueResumed:
		return &QueueResumed{Queue: str("queue")}
	case KindWorkflowStarted:
		return &WorkflowStarted{
			WorkflowID: str("workflow_id"), Name: str("name"), DefinitionHash: str("hash"), Steps: i32("steps"),
			State: bin("state"), At: i64("at"), DeadlineAt: i64("deadline_at"), IdempotencyKey: str("idem"), ParentID: str("parent"), ParentStep: i32("parent_step"), OnDeadline: str("on_deadline"),
			Inherited: flag("inherited"), InheritedQueue: str("inherited_queue"), InheritedPriority: rapid.Uint8().Draw(t, "inherited_priority"), InheritedMaxAttempts: i32("inherited_max_attempts"),
		}
	case KindStepCompleted:
		consumed := rapid.SliceOfN(rapid.Uint64(), 0, 4).Draw(t, "consumed")
		if len(consumed) == 0 {
			consumed = nil
		}
		return &StepCompleted{WorkflowID: str("workflow_id"), Step: i32("step"), Next: i32("next"), Output: bin("output"), Consumed: consumed}
	case KindStepDelayed:
		return &StepDelayed{WorkflowID: str("workflow_id"), Step: i32("step"), FireAt: i64("fire_at")}
	case KindWorkflowWaiting:
		return &WorkflowWaiting{
			WorkflowID: str("workflow_id"), Step: i32("step"), Status: str("status"), Signals: strs("signals"),
			Workflows: strs("workflows"), Mode: str("mode"), Quorum: i32("quorum"),
		}
	case KindSignalReceived:
		return &SignalReceived{WorkflowID: str("workflow_id"), Name: str("name"), Payload: bin("payload")}
	case KindWorkflowPaused:
		return &WorkflowPaused{WorkflowID: str("workflow_id")}
	case KindWorkflowResumed:
		return &WorkflowResumed{WorkflowID: str("workflow_id"), Cause: str("cause")}
	case KindWorkflowCompleted:
		return &WorkflowCompleted{WorkflowID: str("workflow_id"), ArchiveBuried: flag("archive_buried")}
	case KindWorkflowFailed:
		return &WorkflowFailed{WorkflowID: str("workflow_id"), Step: i32("step"), Error: str("error"), At: i64("at")}
	case KindWorkflowCancelled:
		return &WorkflowCancelled{WorkflowID: str("workflow_id"), ArchiveBuried: flag("archive_buried")}
	case KindWorkflowRetried:
		return &WorkflowRetried{WorkflowID: str("workflow_id"), DropOutputs: flag("drop_outputs")}
	case KindWorkflowDeadlineExceeded:
		return &WorkflowDeadlineExceeded{
			WorkflowID: str("workflow_id"), DeadlineAt: i64("deadline_at"), DetectedAt: i64("detected_at"),
			DetectedBy: str("by"), Handler: str("handler"),
		}
	case KindDeadlineHandlerStarted:
		return &DeadlineHandlerStarted{WorkflowID: str("workflow_id"), Handler: str("handler"), Expiry: u64("expiry")}
	case KindDeadlineHandlerFinished:
		return &DeadlineHandlerFinished{WorkflowID: str("workflow_id"), Expiry: u64("expiry"), Outcome: str("outcome")}
	case KindShutdownInitiated:
		return &ShutdownInitiated{Trigger: str("trigger"), StartAt: i64("start"), TotalNanos: i64("total"), GracefulAt: i64("g"), HardAt: i64("hr")}
	case KindShutdownForceRequested:
		return &ShutdownForceRequested{Trigger: str("trigger")}
	case KindShutdownPhaseStarted:
		return &ShutdownPhaseStarted{Phase: rapid.Int8().Draw(t, "phase"), Name: str("name")}
	case KindShutdownPhaseFinished:
		return &ShutdownPhaseFinished{Phase: rapid.Int8().Draw(t, "phase"), Name: str("name"), Graceful: str("graceful"), Forced: str("forced"), Completion: str("completion")}
	case KindShutdownReport:
		n := rapid.IntRange(0, 4).Draw(t, "actions")
		r := &ShutdownReport{
			Completion: str("completion"), Forced: flag("forced"), Trigger: str("trigger"),
			InitiatedAt: i64("initiated_at"), BudgetNanos: i64("budget"), ElapsedNanos: i64("elapsed"),
			CoordinatorAccounted: flag("ca"), CoordinatorComplete: flag("cc"), RuntimeJoined: flag("rj"),
			DrainReconciled: flag("dr"), CloseReconciled: flag("cr"),
			Dependencies: bin("dependencies"),
			Drained:      i64("drained"), ReleasedUnstarted: i64("released_unstarted"), Released: i64("released"),
			Unresolved: i64("unresolved"), Quarantined: i64("quarantined"), FailureCode: str("failure_code"),
		}
		for i := 0; i < n; i++ {
			r.ActionPhases = append(r.ActionPhases, rapid.Int8().Draw(t, "action_phase"))
			r.ActionComponents = append(r.ActionComponents, str("action_component"))
			r.ActionGraceful = append(r.ActionGraceful, str("action_graceful"))
			r.ActionForced = append(r.ActionForced, str("action_forced"))
		}
		return r
	}
	t.Fatalf("genBody: no generator for %s: add one", k)
	return nil
}

// TestGenBodyCoversEveryField: every field of every body is drawn non-zero
// at least once, so a field added to bodies.go without a generator fails
// here instead of escaping the round-trip properties.
func TestGenBodyCoversEveryField(t *testing.T) {
	t.Parallel()
	for _, k := range Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			seen := map[string]bool{}
			rapid.Check(t, func(t *rapid.T) {
				leafFields(reflect.ValueOf(genBody(t, k)).Elem(), "", func(name string, f reflect.Value) {
					if !f.IsZero() {
						seen[name] = true
					}
				})
			})
			b, _ := NewBody(k)
			leafFields(reflect.ValueOf(b).Elem(), "", func(name string, _ reflect.Value) {
				if !seen[name] {
					t.Errorf("genBody never sets %s: add it to the generator", name)
				}
			})
		})
	}
}

// leafFields calls fn for each non-struct field of the struct v, naming it
// by its path.
func leafFields(v reflect.Value, prefix string, fn func(name string, f reflect.Value)) {
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), prefix+v.Type().Field(i).Name
		if f.Kind() == reflect.Struct {
			leafFields(f, name+".", fn)
			continue
		}
		fn(name, f)
	}
}

// genRecord draws a record of kind k with a valid stream id.
func genRecord(t *rapid.T, k Kind) Record {
	return Record{Stream: rapid.StringN(1, 40, StreamIDBytesMax).Draw(t, "stream"), Body: genBody(t, k)}
}

// TestRoundTripEveryKind: for every kind, Prepare, AppendEnvelope,
// ParseEnvelope and Decode give back the record, the crc chains, and
// re-encoding the decoded body gives the same bytes (canonical encoding).
func TestRoundTripEveryKind(t *testing.T) {
	t.Parallel()
	for _, k := range Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			t.Parallel()
			rapid.Check(t, func(t *rapid.T) {
				in := genRecord(t, k)
				seq := rapid.Uint64Min(1).Draw(t, "seq")
				prevSum := rapid.Uint32().Draw(t, "prev_sum")
				at := rapid.Int64().Draw(t, "at")
				prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "dst")

				p, err := Prepare(in, RecordBytesMaxDefault)
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				buf, sum := AppendEnvelope(append([]byte(nil), prefix...), seq, prevSum, at, p)
				if !bytes.Equal(buf[:len(prefix)], prefix) {
					t.Fatalf("AppendEnvelope changed dst's existing bytes")
				}
				val := buf[len(prefix):]
				if len(val) != p.Size() {
					t.Fatalf("envelope is %d bytes, Size says %d", len(val), p.Size())
				}
				if want := Checksum(append(LogKey(seq), val[:len(val)-4]...)); sum != want || binary.BigEndian.Uint32(val[len(val)-4:]) != want {
					t.Fatalf("crc %08x, stored %08x, want %08x", sum, binary.BigEndian.Uint32(val[len(val)-4:]), want)
				}

				env, err := ParseEnvelope(seq, val, RecordBytesMaxDefault)
				if err != nil {
					t.Fatalf("ParseEnvelope: %v", err)
				}
				if env.Kind != k || env.Seq != seq || env.PrevSum != prevSum || env.At != at || env.Stream != in.Stream || env.Sum != sum {
					t.Fatalf("envelope header %+v, want kind %s seq %d prevSum %08x at %d stream %q sum %08x",
						env, k, seq, prevSum, at, in.Stream, sum)
				}
				out, err := env.Decode()
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				want := Record{Seq: seq, At: at, Stream: in.Stream, Body: normalize(in.Body)}
				out.Body = normalize(out.Body)
				if !reflect.DeepEqual(out, want) {
					t.Fatalf("decoded\n%#v\nwant\n%#v", out.Body, want.Body)
				}
				again, err := EncodeBody(out.Body)
				if err != nil || !bytes.Equal(again, p.Payload) {
					t.Fatalf("re-encoding differs (%v):\n%x\n%x", err, again, p.Payload)
				}

				// The next record chains to this one.
				p2 := mustPrepare(t, genRecord(t, KindDebug))
				next, _ := AppendEnvelope(nil, seq+1, sum, at, p2)
				env2, err := ParseEnvelope(seq+1, next, RecordBytesMaxDefault)
				if err != nil || env2.PrevSum != env.Sum {
					t.Fatalf("chain: prevSum %08x, previous crc %08x (%v)", env2.PrevSum, env.Sum, err)
				}
			})
		})
	}
}

// TestEnvelopeAnyByteFlipIsCorrupt: changing any single byte of an envelope
// fails its crc, whatever the byte (CRC32C catches every burst of up to 32
// bits).
func TestEnvelopeAnyByteFlipIsCorrupt(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom(Kinds()).Draw(t, "kind")
		seq := rapid.Uint64Min(1).Draw(t, "seq")
		val, _ := AppendEnvelope(nil, seq, rapid.Uint32().Draw(t, "prev_sum"), rapid.Int64().Draw(t, "at"), mustPrepare(t, genRecord(t, k)))
		i := rapid.IntRange(0, len(val)-1).Draw(t, "index")
		val[i] ^= rapid.Uint8Range(1, 255).Draw(t, "mask")
		_, err := ParseEnvelope(seq, val, RecordBytesMaxDefault)
		var re *RecordError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &re) || re.Op != "checksum" || re.Seq != seq {
			t.Fatalf("flip at %d: %v, want a checksum ErrCorrupt for seq %d", i, err, seq)
		}
	})
}

// TestEnvelopeForgedByteFlip: a byte changed by a writer that also fixes
// the crc either parses (the byte was data), or fails with ErrCorrupt, or
// with ErrNewerVersion when the version byte went up. Nothing panics.
func TestEnvelopeForgedByteFlip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom(Kinds()).Draw(t, "kind")
		val, _ := AppendEnvelope(nil, 1, 7, 1, mustPrepare(t, genRecord(t, k)))
		i := rapid.IntRange(0, len(val)-5).Draw(t, "index")
		val[i] ^= rapid.Uint8Range(1, 255).Draw(t, "mask")
		env, err := ParseEnvelope(1, reseal(1, val), RecordBytesMaxDefault)
		switch {
		case i == 2 && val[2] > Version:
			if !errors.Is(err, ErrNewerVersion) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("version %d: %v, want ErrNewerVersion only", val[2], err)
			}
		case i == 2 && val[2] >= versionMin:
			// another version this code reads: the body decides
			if err != nil {
				t.Fatalf("version %d: %v, want it read", val[2], err)
			}
		case i <= 2 || (i >= 5 && i < 13):
			// magic, version 0, header seq: always refused
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: %v, want ErrCorrupt", i, err)
			}
		case err != nil:
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: %v, want ErrCorrupt", i, err)
			}
		default:
			if _, err := env.Decode(); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: decode: %v, want nil or ErrCorrupt", i, err)
			}
		}
	})
}
