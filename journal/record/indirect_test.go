package record

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// Types of TestEncodeValueIndirectionCycles.
type (
	selfPtr  *selfPtr // a pointer type that points to itself
	loopPtrA *loopPtrB
	loopPtrB *loopPtrA

	anyHolder struct {
		Name string
		V    any
	}
	ptrHolder struct {
		Name string
		P    selfPtr
	}
	// omitHolder counts no level in the walk (its only field may be left
	// out), yet msgpack writes a map for it when V holds something.
	omitHolder struct {
		V any `msgpack:",omitempty"`
	}
	noinlineLoop struct {
		*noinlineLoop `msgpack:",noinline"`
		V             any
	}
	embedsSelf struct {
		*embedsSelf
		N int
	}
	embedsLoopA struct {
		embedsLoopB
		N int
	}
	embedsLoopB struct{ *embedsLoopA }
)

// selfAny returns an interface that holds a pointer to itself.
func selfAny() *any {
	var x any
	x = &x
	return &x
}

// TestEncodeValueIndirectionCycles: a value that contains itself through
// pointers and interfaces alone, at the top or anywhere inside, is refused
// with ErrInvalid naming the cycle. msgpack writes nothing for such a
// cycle, so before it was looked for, each of these recursed until the
// stack was gone and killed the test binary (RL-6's "no fatal error").
func TestEncodeValueIndirectionCycles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    func() any
		want string // in the error
	}{
		{"interface holding a pointer to itself", func() any { return *selfAny() }, "contains itself through pointers and interfaces"},
		{"pointer to that interface", func() any { return selfAny() }, "contains itself through pointers and interfaces"},
		{"two interfaces", func() any {
			var a, b any
			a, b = &b, &a
			return a
		}, "contains itself through pointers and interfaces"},
		{"type P *P", func() any {
			var p selfPtr
			p = &p
			return p
		}, "points to itself"},
		{"two pointer types", func() any {
			var a loopPtrA
			var b loopPtrB
			a, b = &b, &a
			return a
		}, "points to itself"},
		{"map[string]any value", func() any { return map[string]any{"ok": 1, "a": selfAny()} }, "contains itself"},
		{"struct field of type any", func() any { return anyHolder{Name: "n", V: selfAny()} }, "contains itself"},
		{"struct field of type P", func() any {
			var p selfPtr
			p = &p
			return &ptrHolder{Name: "n", P: p}
		}, "points to itself"},
		{"slice element", func() any { return []any{"x", 1, selfAny()} }, "contains itself"},
		{"typed slice element", func() any { return []*any{selfAny()} }, "contains itself"},
		{"map key", func() any { return map[any]int{selfAny(): 1} }, "contains itself"},
		{"array element", func() any { return [2]any{nil, selfAny()} }, "contains itself"},
		{"deep inside", func() any { return nested(DepthMax-1, selfAny()) }, "contains itself"},
		{"behind a long chain", func() any {
			p := selfAny()
			for range 2 * DepthMax {
				var next any = p
				p = &next
			}
			return p
		}, "more than " + strconv.Itoa(DepthMax) + " pointers"},
		// Cycles through a struct the walk counts no level for end too.
		{"struct with omitempty fields", func() any {
			h := &omitHolder{}
			h.V = h
			return h
		}, "deeper than " + strconv.Itoa(DepthMax)},
		{"embedded noinline pointer", func() any {
			n := &noinlineLoop{V: 1}
			n.noinlineLoop = n
			return n
		}, "deeper than " + strconv.Itoa(DepthMax)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := EncodeValue(tc.v())
			if !errors.Is(err, ErrInvalid) || b != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EncodeValue = %x, %v; want ErrInvalid, %q", b, err, tc.want)
			}
		})
	}
}

// TestEncodeValueRecursiveTypes: a value of a type msgpack recurses on
// without end while it builds its encoder, a pointer type that points to
// itself or a struct that embeds itself, is refused with ErrInvalid naming
// the type, even when it holds no cycle (a nil pointer).
func TestEncodeValueRecursiveTypes(t *testing.T) {
	t.Parallel()
	var p selfPtr
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"nil P", p, "type record.selfPtr points to itself"},
		{"nil P in an interface", []any{p}, "type record.selfPtr points to itself"},
		{"*P", &p, "type record.selfPtr points to itself"},
		{"nil P field", ptrHolder{Name: "n"}, "type record.selfPtr points to itself"},
		{"map of P", map[string]selfPtr{"a": nil}, "type record.selfPtr points to itself"},
		{"struct embedding itself", embedsSelf{N: 1}, "struct record.embedsSelf embeds itself"},
		{"struct embedding itself, behind a pointer", map[string]any{"a": &embedsSelf{N: 1}}, "struct record.embedsSelf embeds itself"},
		{"two structs embedding each other", embedsLoopA{N: 1}, "embeds itself"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := EncodeValue(tc.v)
			if !errors.Is(err, ErrInvalid) || b != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("EncodeValue = %x, %v; want ErrInvalid, %q", b, err, tc.want)
			}
		})
	}
	// msgpack builds no encoder for the element of an empty slice or map.
	for _, v := range []any{[]selfPtr{}, map[string]selfPtr{}, (*embedsSelf)(nil)} {
		if _, err := EncodeValue(v); err != nil {
			t.Fatalf("EncodeValue(%#v): %v", v, err)
		}
	}
}

// TestEncodeValueSharedPointers: a pointer used twice in one value, and a
// long chain of pointers within the limit, are no cycle: they encode to
// the bytes of the value they point to, and the bytes decode back.
func TestEncodeValueSharedPointers(t *testing.T) {
	t.Parallel()
	var leaf any = "shared"
	var long any = "end"
	for range DepthMax - 1 {
		next := long
		long = &next
	}
	shared := &anyHolder{Name: "s", V: &leaf}
	tests := []struct {
		name     string
		v, plain any
	}{
		{"map", map[string]any{"a": &leaf, "b": &leaf}, map[string]any{"a": "shared", "b": "shared"}},
		{"slice", []any{&leaf, &leaf, &leaf}, []any{"shared", "shared", "shared"}},
		{"struct", anyHolder{Name: "n", V: []any{&leaf, &leaf}}, map[string]any{"Name": "n", "V": []any{"shared", "shared"}}},
		{"struct pointer", []*anyHolder{shared, shared}, []any{
			map[string]any{"Name": "s", "V": "shared"}, map[string]any{"Name": "s", "V": "shared"},
		}},
		{"long chain", []any{long}, []any{"end"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := EncodeValue(tc.v)
			if err != nil {
				t.Fatalf("EncodeValue: %v", err)
			}
			want, err := EncodeValue(tc.plain)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("EncodeValue = %x, want %x", got, want)
			}
			var back any
			if err := DecodeValue(got, &back); err != nil {
				t.Fatalf("DecodeValue: %v", err)
			}
			if again, err := EncodeValue(back); err != nil || !bytes.Equal(again, got) {
				t.Fatalf("decoded value re-encodes to %x, %v; want %x", again, err, got)
			}
		})
	}
}

// TestEncodeValuePointersChangeNothing: a value with pointers and
// interfaces put in at random, some of them shared, encodes to the bytes
// of the same value without them.
func TestEncodeValuePointersChangeNothing(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		plain, ptr := drawPointered(t, 4)
		want, err := EncodeValue(plain)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodeValue(ptr)
		if err != nil {
			t.Fatalf("with pointers: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("with pointers %x, without %x", got, want)
		}
	})
}

// drawPointered draws a value and the same value with pointers added: an
// item may be put behind a *any or a **any, and may appear twice in its
// container, the same pointer both times.
func drawPointered(t *rapid.T, depth int) (plain, ptr any) {
	kinds := 5
	if depth == 0 {
		kinds = 1
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		v := genValue(t, 0, "leaf")
		return v, v
	case 1:
		pl, pt := drawPointered(t, depth-1)
		p := &pt
		if rapid.Bool().Draw(t, "double") {
			return pl, &p
		}
		return pl, p
	case 2:
		var pl, pt []any
		for range rapid.IntRange(0, 3).Draw(t, "len") {
			a, b := drawPointered(t, depth-1)
			pl, pt = append(pl, a), append(pt, b)
			if rapid.Bool().Draw(t, "dup") {
				pl, pt = append(pl, a), append(pt, b)
			}
		}
		return pl, pt
	case 3:
		pl, pt := map[string]any{}, map[string]any{}
		for range rapid.IntRange(0, 3).Draw(t, "len") {
			k := rapid.StringN(0, 4, 16).Draw(t, "key")
			a, b := drawPointered(t, depth-1)
			pl[k], pt[k] = a, b
			if rapid.Bool().Draw(t, "dup") {
				pl[k+"'"], pt[k+"'"] = a, b
			}
		}
		return pl, pt
	}
	a, b := drawPointered(t, depth-1)
	return anyHolder{Name: "n", V: a}, &anyHolder{Name: "n", V: b}
}

// BenchmarkCheckIndirections measures the walk EncodeValue adds, on the
// values of BenchmarkEncodeValue: one cached lookup for a struct of plain
// fields, a walk without reflection for a map[string]any.
//
//	go test ./journal/record -run '^$' -bench CheckIndirections -benchmem -count 5
func BenchmarkCheckIndirections(b *testing.B) {
	for _, tc := range benchValues() {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := checkIndirections(tc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
