package record

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/quire-dev/quire/internal/allocs"
)

type cycleNode struct {
	Name string
	Next *cycleNode
}

type cycleA struct{ B *cycleB }
type cycleB struct{ A []*cycleA }

type cycleMap map[string]cycleMap

// TestEncodeValueCycles: a value that contains itself is refused with
// ErrInvalid naming the depth limit, not a fatal stack overflow (RL-6's
// "no fatal error" on the write side; the caller keeps running, RL-4).
// Before the depth was checked during encoding, each of these killed the
// test binary.
func TestEncodeValueCycles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    func() any
	}{
		{"struct pointer", func() any {
			n := &cycleNode{Name: "a"}
			n.Next = n
			return n
		}},
		{"struct pointer, two hops", func() any {
			a := &cycleNode{Name: "a"}
			a.Next = &cycleNode{Name: "b", Next: a}
			return *a
		}},
		{"map[string]any", func() any {
			m := map[string]any{"x": 1}
			m["m"] = m
			return m
		}},
		{"typed map", func() any {
			m := cycleMap{}
			m["m"] = m
			return m
		}},
		{"slice via interface", func() any {
			s := make([]any, 2)
			s[0], s[1] = "x", s
			return s
		}},
		{"slice of its own elements", func() any {
			s := make([]any, 1000)
			for i := range s {
				s[i] = s
			}
			return s
		}},
		{"map holding a slice holding the map", func() any {
			m := map[string]any{}
			m["s"] = []any{m}
			return m
		}},
		{"two types", func() any {
			a := &cycleA{B: &cycleB{}}
			a.B.A = []*cycleA{a}
			return a
		}},
		{"inside a deep value", func() any {
			m := map[string]any{}
			m["m"] = m
			var v any = m
			for range DepthMax - 1 {
				v = []any{v}
			}
			return v
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := EncodeValue(tc.v())
			if !errors.Is(err, ErrInvalid) || b != nil || !strings.Contains(err.Error(), strconv.Itoa(DepthMax)) {
				t.Fatalf("EncodeValue = %x, %v; want ErrInvalid naming the limit %d", b, err, DepthMax)
			}
		})
	}
}

// nested wraps leaf in depth non-empty containers, alternating arrays,
// maps and structs, so that each counts as one level.
func nested(depth int, leaf any) any {
	v := leaf
	for i := range depth {
		switch i % 3 {
		case 0:
			v = []any{v}
		case 1:
			v = map[string]any{"k": v}
		default:
			v = struct{ K any }{v}
		}
	}
	return v
}

// TestEncodeValueDepthBoundary: a value exactly DepthMax containers deep
// encodes, decodes and re-encodes to the same bytes; one level more is
// refused with the same error as a cycle (RL-6: what is written can be
// read).
func TestEncodeValueDepthBoundary(t *testing.T) {
	t.Parallel()
	b, err := EncodeValue(nested(DepthMax, "leaf"))
	if err != nil {
		t.Fatalf("depth %d: %v", DepthMax, err)
	}
	var back any
	if err := DecodeValue(b, &back); err != nil {
		t.Fatalf("depth %d does not decode: %v", DepthMax, err)
	}
	if again, err := EncodeValue(back); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("depth %d re-encodes to %x, %v; want %x", DepthMax, again, err, b)
	}
	leaf := back
	for range DepthMax {
		switch x := leaf.(type) {
		case []any:
			leaf = x[0]
		case map[string]any:
			if leaf = x["k"]; leaf == nil {
				leaf = x["K"]
			}
		default:
			t.Fatalf("decoded level is %T", leaf)
		}
	}
	if leaf != "leaf" {
		t.Fatalf("leaf = %v", leaf)
	}

	// Empty containers add no level, as in Prescan.
	if _, err := EncodeValue(nested(DepthMax, []any{})); err != nil {
		t.Fatalf("depth %d with an empty leaf container: %v", DepthMax, err)
	}
	b, err = EncodeValue(nested(DepthMax+1, "leaf"))
	if !errors.Is(err, ErrInvalid) || b != nil || !strings.Contains(err.Error(), "deeper than 32") {
		t.Fatalf("depth %d: %x, %v; want ErrInvalid, deeper than 32", DepthMax+1, b, err)
	}
}

// TestEncodeValueSharedSubtree: a value that shares one subtree many
// times (no cycle, 256 MiB of encoding) stops at ValueBytesMax while it
// is written instead of being built whole and measured afterwards (RL-11).
// Not parallel: it measures the process's allocations.
func TestEncodeValueSharedSubtree(t *testing.T) {
	var v any = strings.Repeat("x", 1000) // 1 KiB encoded
	for range 18 {
		v = []any{v, v}
	}
	var err error
	n := allocs.Bytes(func() { _, err = EncodeValue(v) })
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("EncodeValue: %v, want ErrTooLarge", err)
	}
	if n > 128<<20 {
		t.Fatalf("EncodeValue allocated %d MiB before refusing, want the 16 MiB cap and its growth", n>>20)
	}
}

// TestEncodeValueOwnsItsBytes: the bytes returned are the caller's; the
// pooled buffer they were written into is not handed out again.
func TestEncodeValueOwnsItsBytes(t *testing.T) {
	t.Parallel()
	first, err := EncodeValue(map[string]any{"a": "first"})
	if err != nil {
		t.Fatal(err)
	}
	keep := bytes.Clone(first)
	for range 100 {
		if _, err := EncodeValue(map[string]any{"a": "second value, longer"}); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(first, keep) {
		t.Fatalf("an earlier result changed: %x, was %x", first, keep)
	}
}

// TestValueWriterAgreesWithPrescan: over msgpack's encodings of values near
// the depth limit, written in arbitrary pieces, the writer fails exactly
// when Prescan refuses the whole encoding, and otherwise ends with every
// container closed.
func TestValueWriterAgreesWithPrescan(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		depth := rapid.IntRange(0, DepthMax+2).Draw(t, "depth")
		v := nested(depth, genValue(t, 2, "leaf"))
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want := Prescan(b, true)
		var w valueWriter
		for rest := b; len(rest) > 0 && w.err == nil; {
			n := rapid.IntRange(1, len(rest)).Draw(t, "piece")
			if n == 1 {
				_ = w.WriteByte(rest[0])
			} else {
				_, _ = w.Write(rest[:n])
			}
			rest = rest[n:]
		}
		switch {
		case want != nil && !strings.Contains(want.Error(), "deeper than 32"):
			t.Fatalf("Prescan refuses msgpack's own encoding: %v", want)
		case want != nil && w.err != errValueTooDeep:
			t.Fatalf("Prescan: %v; writer: %v", want, w.err)
		case want == nil && (w.err != nil || w.depth != 0 || w.next != len(b)):
			t.Fatalf("writer: err %v, depth %d, next %d of %d; want a closed value", w.err, w.depth, w.next, len(b))
		}
	})
}

// TestEncodeValueCustomEncoderDropsError: a custom encoder that swallows
// the writer's error still gets the value refused.
func TestEncodeValueCustomEncoderDropsError(t *testing.T) {
	t.Parallel()
	b, err := EncodeValue([]any{swallower{nested(DepthMax, 1)}})
	if !errors.Is(err, ErrInvalid) || b != nil {
		t.Fatalf("EncodeValue = %x, %v; want ErrInvalid", b, err)
	}
	if _, err := EncodeValue(swallower{nested(DepthMax-1, 1)}); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
}

// swallower encodes its value and ignores any error.
type swallower struct{ v any }

func (s swallower) EncodeMsgpack(e *msgpack.Encoder) error {
	_ = e.Encode(s.v)
	return nil
}
