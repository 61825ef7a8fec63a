package api_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// nilPayloads are the nil values Enqueue documents as refused: an untyped
// nil (a nil interface converts to it) and typed nils of every nillable
// kind.
var nilPayloads = []struct {
	name    string
	payload any
}{
	{"untyped nil", nil},
	{"nil interface", io.Reader(nil)},
	{"nil pointer", (*msg)(nil)},
	{"nil map", map[string]any(nil)},
	{"nil slice", []int(nil)},
	{"nil func", (func())(nil)},
	{"nil chan", (chan int)(nil)},
}

// JB-1: a payload "must not be nil": typed nils are refused the same typed
// way as an untyped nil, and nothing is appended; empty but non-nil maps
// and slices are payloads like any other.
func TestJB1_NilPayloadsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	j := api.JournalOf(b.eng)
	for _, c := range nilPayloads {
		before := j.LastSeq()
		id, err := b.eng.Enqueue(b.ctx, "ok", c.payload)
		if !errors.Is(err, api.ErrInvalidPayload) || id != "" {
			t.Fatalf("Enqueue with a %s: id %q, err %v, want an error matching ErrInvalidPayload", c.name, id, err)
		}
		if after := j.LastSeq(); after != before {
			t.Fatalf("Enqueue with a %s appended: seq %d -> %d", c.name, before, after)
		}
	}
	for _, p := range []any{map[string]any{}, []int{}, msg{}} {
		if _, err := b.eng.Enqueue(b.ctx, "ok", p); err != nil {
			t.Fatalf("Enqueue with %#v: %v", p, err)
		}
	}
}

// Follow-up jobs go through the same check: a handler's Delivery.Enqueue
// of a nil payload, typed or not, is refused at once.
func TestJB1_FollowUpNilPayloadRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	errs := make(chan error, len(nilPayloads))
	if err := api.Handle(b.eng, "ok", okHandler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := api.Handle(b.eng, "fan", func(ctx context.Context, d *api.Delivery, in msg) error {
		for _, c := range nilPayloads {
			errs <- d.Enqueue("ok", c.payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.enqueue("fan", msg{N: 1})
	b.idle()
	for _, c := range nilPayloads {
		if err := <-errs; !errors.Is(err, api.ErrInvalidPayload) {
			t.Fatalf("Delivery.Enqueue with a %s: %v, want an error matching ErrInvalidPayload", c.name, err)
		}
	}
}

// WF-13, WF-19: Dispatch documents a nil state as an empty one and Signal
// a nil payload as an empty one; both are accepted.
func TestWF13_NilStateIsEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := b.eng.Register(api.NewWorkflow("wait").WaitForSignal("go")); err != nil {
		t.Fatal(err)
	}
	id, err := b.eng.Dispatch(b.ctx, "wait", nil)
	if err != nil {
		t.Fatalf("Dispatch with a nil state: %v", err)
	}
	if err := b.eng.Signal(b.ctx, id, "go", nil); err != nil {
		t.Fatalf("Signal with a nil payload: %v", err)
	}
	b.start()
	b.idle()
	w, err := b.eng.Workflow(b.ctx, id)
	if err != nil || w.Status != api.WorkflowCompleted || len(w.State) != 0 {
		t.Fatalf("workflow: status %s, state %v, err %v; want completed with an empty state", w.Status, w.State, err)
	}
}

// RL-11: Options.PayloadBytesMax is the largest encoded payload Enqueue
// takes: one of exactly that many bytes is enqueued and runs, one byte
// more is refused with ErrInvalidPayload.
func TestJB1_RL11_PayloadOfExactlyPayloadBytesMaxIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) { o.PayloadBytesMax = api.PayloadBytesMin })
	if err := api.Handle(b.eng, "blob", func(context.Context, *api.Delivery, string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// A string of 256..65535 bytes encodes with a 3-byte header.
	fit := strings.Repeat("x", api.PayloadBytesMin-3)
	if enc, err := record.EncodeValue(fit); err != nil || len(enc) != api.PayloadBytesMin {
		t.Fatalf("encoded %d bytes (%v), want %d", len(enc), err, api.PayloadBytesMin)
	}
	id, err := b.eng.Enqueue(b.ctx, "blob", fit)
	if err != nil {
		t.Fatalf("payload of PayloadBytesMax bytes: %v", err)
	}
	if _, err := b.eng.Enqueue(b.ctx, "blob", fit+"x"); !errors.Is(err, api.ErrInvalidPayload) {
		t.Fatalf("payload of PayloadBytesMax+1 bytes: %v, want ErrInvalidPayload", err)
	}
	// and its handler decodes it.
	b.start()
	b.idle()
	b.wantStatus(id, api.JobCompleted)
}

// stateOfSize returns a state that encodes to exactly size bytes, one
// key whose string value grows a byte at a time.
func stateOfSize(t *testing.T, size int) api.State {
	t.Helper()
	for n := 0; n < size; n++ {
		st := api.State{"k": strings.Repeat("x", n)}
		enc, err := replay.EncodeState(st)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) == size {
			return st
		}
	}
	t.Fatalf("no state encodes to exactly %d bytes", size)
	return nil
}

// RL-11, WF-13: a workflow's initial state is held to PayloadBytesMax as
// a payload is: one that encodes to exactly that many bytes is dispatched,
// one byte more is refused with ErrInvalidPayload.
func TestWF13_RL11_StateOfExactlyPayloadBytesMaxIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) { o.PayloadBytesMax = api.PayloadBytesMin })
	wfRegister(t, b.eng, api.NewWorkflow("w").Then("s", wfReturn(nil)))
	fit := stateOfSize(t, api.PayloadBytesMin)
	if _, err := b.eng.Dispatch(b.ctx, "w", fit); err != nil {
		t.Fatalf("state of PayloadBytesMax bytes: %v", err)
	}
	if _, err := b.eng.Dispatch(b.ctx, "w", api.State{"k": fit["k"].(string) + "x"}); !errors.Is(err, api.ErrInvalidPayload) {
		t.Fatalf("state of PayloadBytesMax+1 bytes: %v, want ErrInvalidPayload", err)
	}
}

// RL-11, WF-3: a step output of exactly PayloadBytesMax bytes completes
// its workflow; one byte more fails it with OUTPUT_INVALID.
func TestWF3_RL11_StepOutputOfExactlyPayloadBytesMaxIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *api.Options) { o.PayloadBytesMax = api.PayloadBytesMin })
	fit := stateOfSize(t, api.PayloadBytesMin)
	wfRegister(t, b.eng, api.NewWorkflow("fit").Then("s", wfReturn(fit)))
	wfRegister(t, b.eng, api.NewWorkflow("over").Then("s", wfReturn(api.State{"k": fit["k"].(string) + "x"})))
	b.start()
	ok := wfDispatch(b, "fit", nil)
	over := wfDispatch(b, "over", nil)
	b.idle()
	if info := wfWant(b, ok, api.WorkflowCompleted); info.State["k"] != fit["k"] {
		t.Fatalf("completed with state of %d keys, want the step's output", len(info.State))
	}
	if info := wfWant(b, over, api.WorkflowFailed); !strings.Contains(info.Error, "limit 1024") {
		t.Fatalf("over the limit: error %q", info.Error)
	}
}

// RL-11: a job enqueued under a larger PayloadBytesMax than the engine
// now runs with is not decoded: its attempt is buried with
// PAYLOAD_DECODE_FAILED, naming its size and the limit.
func TestRL11_PayloadOverALoweredLimitIsNotDecoded(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var ran atomic.Bool
	register := func(e *api.Engine) {
		if err := api.Handle(e, "blob", func(context.Context, *api.Delivery, string) error { ran.Store(true); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	register(b.eng)
	id := b.enqueue("blob", strings.Repeat("x", 2*api.PayloadBytesMin))
	b.opts.PayloadBytesMax = api.PayloadBytesMin
	b.reopen(register)
	b.start()
	b.idle()
	j := b.wantStatus(id, api.JobBuried)
	if ran.Load() || j.LastCode != api.CodePayloadDecodeFailed || !strings.Contains(j.LastError, "limit 1024") {
		t.Fatalf("ran %v, code %q error %q: want PAYLOAD_DECODE_FAILED naming the limit", ran.Load(), j.LastCode, j.LastError)
	}
}

// WF-13, WF-19, WF-3: a state, signal payload or step output holding a
// value the codec cannot encode is refused with the key that holds it, so
// that a caller with many keys knows which one to fix; the valid keys
// around it are not named.
func TestWF13_WF19_WF3_UnencodableValueNamesItsKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	bad := api.State{"amount": 100, "notify": make(chan int), "order": "1001"}
	wfRegister(t, b.eng, api.NewWorkflow("wait").WaitForSignal("go"))
	wfRegister(t, b.eng, api.NewWorkflow("out").Then("a", wfReturn(bad)))
	b.start()
	names := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), `key "notify"`) &&
			!strings.Contains(err.Error(), `"amount"`) && !strings.Contains(err.Error(), `"order"`)
	}

	if _, err := b.eng.Dispatch(b.ctx, "wait", bad); !errors.Is(err, api.ErrInvalidPayload) || !names(err) {
		t.Fatalf("WF-13: Dispatch of a state with a channel: %v, want ErrInvalidPayload naming key \"notify\"", err)
	}
	wait := wfDispatch(b, "wait", api.State{})
	b.idle()
	if err := b.eng.Signal(b.ctx, wait, "go", bad); !errors.Is(err, api.ErrInvalidPayload) || !names(err) {
		t.Fatalf("WF-19: Signal with a channel in its payload: %v, want ErrInvalidPayload naming key \"notify\"", err)
	}
	out := wfDispatch(b, "out", api.State{})
	b.idle()
	if info := wfWant(b, out, api.WorkflowFailed); !strings.Contains(info.Error, api.CodeOutputInvalid) || !names(errors.New(info.Error)) {
		t.Fatalf("WF-3: a step output with a channel failed its workflow with %q, want %s naming key \"notify\"", info.Error, api.CodeOutputInvalid)
	}
	b.checkReplay()
}
