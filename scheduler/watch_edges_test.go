package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/deadlines"
	"github.com/quire-dev/quire/journal/record"
)

// A lone watcher registered with the read of its stream, in one step of
// the loop, is woken once the stream's next record is acknowledged, and
// not before (Watch, as AwaitJob uses it).
func TestWatchAloneIsWokenByItsStreamsAcknowledgedRecord(t *testing.T) {
	b := newRunnerBundle(t, func(ctx context.Context, a *Attempt) Result { return Result{} })
	ctx := context.Background()
	w := make(chan struct{})
	var id string
	if err := b.r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		for jid := range m.State().Jobs {
			id = jid
		}
		b.r.Watch(m.State().Jobs[id].Stream, w)
		return Decision{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.r.Note(ctx, &record.Debug{Subject: "engine", Code: "X", Message: "another stream"}); err != nil {
		t.Fatal(err)
	}
	if closed(w) || b.r.Watchers() != 1 {
		t.Fatalf("woken %v, %d watchers by a record of another stream", closed(w), b.r.Watchers())
	}
	if err := b.r.Submit(ctx, func(m *Machine, now time.Time) (Decision, error) {
		return m.Bury(now, id, "TEST_BURIED", "buried by the test")
	}); err != nil {
		t.Fatal(err)
	}
	if !closed(w) || b.r.Watchers() != 0 {
		t.Fatalf("woken %v, %d watchers after the job's record was acknowledged", closed(w), b.r.Watchers())
	}
}

// DL-15: a reason recorded by a path that recorded none is the runtime
// cancellation, remembered as defaulted.
func TestDL15_MissingReasonIsDefaulted(t *testing.T) {
	s := newSignal(nil)
	if !s.record(deadlines.ReasonNone, t0) {
		t.Fatal("the first record did not record")
	}
	if r, at, ok := s.Reason(); !ok || r != deadlines.ReasonRuntimeCancellation || !at.Equal(t0) || !s.defaultedReason() {
		t.Fatalf("reason %v at %v (%v), defaulted %v; want runtime cancellation, defaulted", r, at, ok, s.defaultedReason())
	}
	named := newSignal(nil)
	named.record(deadlines.ReasonForcedShutdown, t0)
	if named.defaultedReason() {
		t.Fatal("a named reason counts as defaulted")
	}
}

// DL-33: the cause of a termination hook's cleanup context says it is the
// hook's, and, for its own deadline, says so in its message.
func TestDL33_HookCauseNamesTheHook(t *testing.T) {
	var cause error
	s := newSignal(func(err error) { cause = err })
	s.hook = true
	s.record(deadlines.ReasonDeliveryTimeout, t0)
	var cr *CancelReason
	if !errors.As(cause, &cr) || !cr.Hook {
		t.Fatalf("cause %v, want a hook's CancelReason", cause)
	}
	if msg := cr.Error(); !strings.Contains(msg, "termination hook cancelled: its own deadline passed") {
		t.Fatalf("message %q", msg)
	}
	other := (&CancelReason{Reason: deadlines.ReasonForcedShutdown, At: t0, Hook: true}).Error()
	if !strings.Contains(other, "termination hook cancelled: ") || strings.Contains(other, "its own deadline") {
		t.Fatalf("message %q", other)
	}
}

// TakeValue hands the value over: the owner no longer holds or releases it.
func TestTakeValueRemovesTheValue(t *testing.T) {
	a := &Attempt{}
	a.SetValue("k", 1)
	if v, ok := a.TakeValue("k"); !ok || v != 1 {
		t.Fatalf("TakeValue = %v, %v", v, ok)
	}
	if _, ok := a.Value("k"); ok || a.hasValues() {
		t.Fatal("the value is still held after TakeValue")
	}
	a.SetValue("one", 1)
	if !a.hasValues() {
		t.Fatal("hasValues false with one value held")
	}
}
