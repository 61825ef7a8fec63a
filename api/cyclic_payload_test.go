package api_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
)

// selfRef is a struct that can point at itself.
type selfRef struct {
	Name string
	Next *selfRef
}

// cyclicPayloads are values that contain themselves. Encoding one used to
// recurse until the goroutine's stack was gone: a fatal error that killed
// the process, engine and all.
func cyclicPayloads() []struct {
	name    string
	payload any
} {
	n := &selfRef{Name: "n"}
	n.Next = n
	m := map[string]any{"x": 1}
	m["self"] = m
	s := make([]any, 2)
	s[0], s[1] = "x", s
	return []struct {
		name    string
		payload any
	}{{"struct pointer", n}, {"map", m}, {"slice via interface", s}}
}

// selfMap returns a map that holds itself.
func selfMap() map[string]any {
	m := map[string]any{}
	m["self"] = m
	return m
}

// deepMaps returns a map nested depth levels deep, with no cycle.
func deepMaps(depth int) any {
	var v any = 1
	for range depth {
		v = map[string]any{"a": v}
	}
	return v
}

// pointerCyclePayloads are values that contain themselves through pointers
// and interfaces only. msgpack recursed on one without writing a byte, so
// no depth limit stopped it before the stack ran out.
func pointerCyclePayloads() []struct {
	name    string
	payload any
} {
	var x any
	x = &x
	return []struct {
		name    string
		payload any
	}{
		{"interface holding a pointer to itself", x},
		{"pointer cycle inside a map", map[string]any{"a": &x}},
		{"pointer cycle inside a slice", []any{"ok", x}},
	}
}

// isPointerCycleRefusal reports whether err is the refusal of a value
// that contains itself through pointers and interfaces only.
func isPointerCycleRefusal(err error) bool {
	return errors.Is(err, api.ErrInvalidPayload) && strings.Contains(err.Error(), "contains itself")
}

// isDepthRefusal reports whether err is the refusal of a value nested
// past the journal's depth limit, in the form Enqueue, Dispatch and
// Signal return it.
func isDepthRefusal(err error) bool {
	return errors.Is(err, api.ErrInvalidPayload) && strings.Contains(err.Error(), "deeper than 32")
}

// JB-1, RL-4: Enqueue of a payload that contains itself returns the typed
// error a payload nested too deep gets (ErrInvalidPayload, naming the depth
// limit), or, for one that contains itself through pointers and interfaces
// only, ErrInvalidPayload naming the cycle; it appends nothing, and leaves
// the engine serving: a following enqueue completes.
func TestJB1_CyclicPayloadRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	b.start()
	j := api.JournalOf(b.eng)
	if _, err := b.eng.Enqueue(b.ctx, "ok", deepMaps(40)); !isDepthRefusal(err) {
		t.Fatalf("Enqueue of a payload 40 deep: %v, want ErrInvalidPayload naming the depth limit", err)
	}
	refused := func(name string, payload any, ok func(error) bool, want string) {
		t.Helper()
		before := j.LastSeq()
		id, err := b.eng.Enqueue(b.ctx, "ok", payload)
		if !ok(err) || id != "" {
			t.Fatalf("Enqueue of a cyclic %s: id %q, err %v; want ErrInvalidPayload naming %s", name, id, err, want)
		}
		if after := j.LastSeq(); after != before {
			t.Fatalf("Enqueue of a cyclic %s appended: seq %d -> %d", name, before, after)
		}
	}
	for _, c := range cyclicPayloads() {
		refused(c.name, c.payload, isDepthRefusal, "the depth limit")
	}
	// Through pointers and interfaces only, which msgpack recursed on
	// without writing a byte until the process died.
	for _, c := range pointerCyclePayloads() {
		refused(c.name, c.payload, isPointerCycleRefusal, "the cycle")
	}
	id := b.enqueue("ok", msg{N: 1})
	b.idle()
	b.wantStatus(id, api.JobCompleted)
	b.checkReplay()
}

// WF-13, WF-19, WF-3, JB-1: the other doors a user value comes in by
// refuse a value that contains itself the same way: Dispatch's state and
// Signal's payload with ErrInvalidPayload and nothing appended, a
// handler's Delivery.Enqueue with ErrInvalidPayload, and a step returning
// one fails its workflow (STEP_OUTPUT_INVALID). The engine goes on: the
// waiting workflow completes when signalled properly.
func TestCyclicValueRefusedAtEveryDoor(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("loops").Then("a", wfReturn(api.State{"out": selfMap()})))
	followUp := make(chan error, 1)
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "fan", func(ctx context.Context, d *api.Delivery, in msg) error {
		followUp <- d.Enqueue("ok", selfMap())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	j := api.JournalOf(b.eng)

	before := j.LastSeq()
	if id, err := b.eng.Dispatch(b.ctx, "wait", api.State{"self": selfMap()}); !isDepthRefusal(err) || id != "" {
		t.Fatalf("Dispatch of a cyclic state: id %q, err %v; want ErrInvalidPayload naming the depth limit", id, err)
	}
	if after := j.LastSeq(); after != before {
		t.Fatalf("Dispatch of a cyclic state appended: seq %d -> %d", before, after)
	}

	wait := wfDispatch(b, "wait", api.State{})
	b.idle()
	before = j.LastSeq()
	if err := b.eng.Signal(b.ctx, wait, "go", api.State{"self": selfMap()}); !isDepthRefusal(err) {
		t.Fatalf("Signal with a cyclic payload: %v, want ErrInvalidPayload naming the depth limit", err)
	}
	if after := j.LastSeq(); after != before {
		t.Fatalf("Signal with a cyclic payload appended: seq %d -> %d", before, after)
	}

	b.enqueue("fan", msg{N: 1})
	b.idle()
	if err := <-followUp; !isDepthRefusal(err) {
		t.Fatalf("Delivery.Enqueue of a cyclic payload: %v, want ErrInvalidPayload naming the depth limit", err)
	}

	loops := wfDispatch(b, "loops", api.State{})
	b.idle()
	if info := wfWant(b, loops, api.WorkflowFailed); !strings.Contains(info.Error, "deeper than 32") {
		t.Fatalf("step returning a cyclic state failed its workflow with %q, want the depth limit named", info.Error)
	}

	if err := b.eng.Signal(b.ctx, wait, "go", api.State{"by": "ann"}); err != nil {
		t.Fatalf("Signal after the refusals: %v", err)
	}
	b.idle()
	wfWant(b, wait, api.WorkflowCompleted)
	b.checkReplay()
}
