package record

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"
)

// Types of TestEncodeValueSortsEveryMapType: maps msgpack writes in
// iteration order, at every place a payload can hold one.
type (
	mapKey struct {
		B string
		A int
	}
	mapLeaf struct {
		Z   int
		Set map[uint8]bool
	}
	mapNode struct {
		Name  string
		Ints  map[string]int
		ByID  map[int]string
		Keyed map[mapKey]int
		Leafs map[string]mapLeaf
		Kids  map[string]*mapNode
		List  []map[int64]string
		Named namedMap
		Any   map[string]any
		Dyn   any
		Skip  map[string]int `msgpack:"-"`
	}
	namedMap map[string]uint16
)

// mapSpec describes a mapNode by the entries of its maps, in the order
// they are inserted. build makes the node; a permuted spec makes an equal
// node whose maps were filled in another order.
type mapSpec struct {
	Name  string
	Ints  []string
	ByID  []int
	Keyed []mapKey
	Leafs []string
	Kids  []*mapSpec
	List  [][]int64
	Named []string
	Any   []string
	Dyn   []int
}

func drawMapSpec(t *rapid.T, depth int) *mapSpec {
	keys := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-zA-Z0-9_]{0,40}`), 0, 6, rapid.ID[string])
	ints := rapid.SliceOfNDistinct(rapid.IntRange(-1<<40, 1<<40), 0, 6, rapid.ID[int])
	s := &mapSpec{
		Name: rapid.String().Draw(t, "name"),
		Ints: keys.Draw(t, "ints"),
		ByID: ints.Draw(t, "byID"),
		Keyed: rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) mapKey {
			return mapKey{B: rapid.StringMatching(`[ab]{0,2}`).Draw(t, "b"), A: rapid.IntRange(-2, 300).Draw(t, "a")}
		}), 0, 5, rapid.ID[mapKey]).Draw(t, "keyed"),
		Leafs: keys.Draw(t, "leafs"),
		Named: keys.Draw(t, "named"),
		Any:   keys.Draw(t, "any"),
		Dyn:   ints.Draw(t, "dyn"),
	}
	for range rapid.IntRange(0, 3).Draw(t, "lists") {
		s.List = append(s.List, rapid.SliceOfNDistinct(rapid.Int64(), 0, 4, rapid.ID[int64]).Draw(t, "list"))
	}
	if depth > 0 {
		for range rapid.IntRange(0, 3).Draw(t, "kids") {
			s.Kids = append(s.Kids, drawMapSpec(t, depth-1))
		}
	}
	return s
}

// build returns the node s describes, inserting each map's entries in
// order, or in reverse order when rev is set. Maps without entries are nil.
func (s *mapSpec) build(rev bool) *mapNode {
	n := &mapNode{Name: s.Name, Skip: map[string]int{"x": 1, "y": 2, "z": 3}}
	fill := func(k int, put func(i int)) {
		for i := range k {
			if rev {
				i = k - 1 - i
			}
			put(i)
		}
	}
	if len(s.Ints) > 0 {
		n.Ints = map[string]int{}
		fill(len(s.Ints), func(i int) { n.Ints[s.Ints[i]] = i * 1000 })
	}
	if len(s.ByID) > 0 {
		n.ByID = map[int]string{}
		fill(len(s.ByID), func(i int) { n.ByID[s.ByID[i]] = fmt.Sprint("v", i) })
	}
	if len(s.Keyed) > 0 {
		n.Keyed = map[mapKey]int{}
		fill(len(s.Keyed), func(i int) { n.Keyed[s.Keyed[i]] = -i })
	}
	if len(s.Leafs) > 0 {
		n.Leafs = map[string]mapLeaf{}
		fill(len(s.Leafs), func(i int) {
			l := mapLeaf{Z: i}
			if i > 0 {
				l.Set = map[uint8]bool{}
				fill(i+1, func(j int) { l.Set[uint8(j*37)] = j%2 == 0 })
			}
			n.Leafs[s.Leafs[i]] = l
		})
	}
	if len(s.Kids) > 0 {
		n.Kids = map[string]*mapNode{}
		fill(len(s.Kids), func(i int) { n.Kids[fmt.Sprint("kid", i)] = s.Kids[i].build(rev) })
	}
	for _, l := range s.List {
		var m map[int64]string
		if len(l) > 0 {
			m = map[int64]string{}
			fill(len(l), func(i int) { m[l[i]] = strings.Repeat("s", i) })
		}
		n.List = append(n.List, m)
	}
	if len(s.Named) > 0 {
		n.Named = namedMap{}
		fill(len(s.Named), func(i int) { n.Named[s.Named[i]] = uint16(i * 300) })
	}
	if len(s.Any) > 0 {
		n.Any = map[string]any{}
		fill(len(s.Any), func(i int) { n.Any[s.Any[i]] = fmt.Sprint("a", i) })
	}
	if len(s.Dyn) > 0 {
		dyn := map[string]int{}
		fill(len(s.Dyn), func(i int) { dyn[fmt.Sprint(s.Dyn[i])] = i })
		n.Dyn = dyn
	}
	return n
}

// TestEncodeValueSortsEveryMapType: a value holding maps of any type, at
// any depth, encodes to the same bytes on every call and whatever order
// its maps were filled in, and the bytes decode back to the value.
func TestEncodeValueSortsEveryMapType(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := drawMapSpec(t, 2)
		v, w := s.build(false), s.build(true)
		first, err := EncodeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			x := v
			if i%2 == 1 {
				x = w
			}
			again, err := EncodeValue(x)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, first) {
				t.Fatalf("encoding %d differs:\n%x\n%x", i, first, again)
			}
		}
		var back mapNode
		if err := DecodeValue(first, &back); err != nil {
			t.Fatal(err)
		}
		// The decoded value is a value of its own: Dyn decodes as a
		// map[string]any, which msgpack writes sorted, so it may take the
		// other branch and keep its struct fields in declaration order
		// (values of one Go type always take the same branch; a struct
		// decoded into a map never had its bytes). What holds is that its
		// encoding is canonical in turn: decoded and encoded again, it
		// gives the same bytes.
		second, err := EncodeValue(&back)
		if err != nil {
			t.Fatal(err)
		}
		var back2 mapNode
		if err := DecodeValue(second, &back2); err != nil {
			t.Fatal(err)
		}
		if third, _ := EncodeValue(&back2); !bytes.Equal(third, second) {
			t.Fatalf("decoded value's encoding is not a fixed point:\n%x\n%x", second, third)
		}
		want := s.build(false)
		stripMapNode(want)
		stripMapNode(&back)
		if !reflect.DeepEqual(&back, want) {
			t.Fatalf("decoded value differs:\n got %#v\nwant %#v", back, *want)
		}
	})
}

// stripMapNode clears, at every level of n, the field msgpack skips and
// the one that decodes to another type.
func stripMapNode(n *mapNode) {
	n.Skip, n.Dyn = nil, nil
	for _, k := range n.Kids {
		stripMapNode(k)
	}
}

// encodeValueUnsorted is EncodeValue as it was before it sorted maps:
// msgpack with SetSortMapKeys and compact ints, then canonical timestamps.
func encodeValueUnsorted(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return canonicalTimestamps(buf.Bytes())
}

// TestEncodeValueKeepsCanonicalBytes: a value msgpack already wrote the
// same way on every call (no map it writes in iteration order with two
// entries or more) keeps the bytes it had, so unique keys and definition
// hashes already in journals stay valid. Structs keep their fields in
// declaration order, even unsorted.
func TestEncodeValueKeepsCanonicalBytes(t *testing.T) {
	t.Parallel()
	type job struct {
		To     string `msgpack:"to"`
		Amount int
		At     time.Time
		Tags   map[string]string
		Flags  map[string]bool
		One    map[int]string // one entry: one order only
		Hidden map[string]int `msgpack:"-"`
		Meta   map[string]any
	}
	check := func(t interface{ Fatalf(string, ...any) }, v any) {
		got, err := EncodeValue(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		want, err := encodeValueUnsorted(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%T changed its bytes:\n got %x\nwant %x", v, got, want)
		}
	}
	for _, tc := range benchValues() {
		if tc.name != "mapInt" { // random order before: nothing to keep
			check(t, tc.v)
		}
	}
	check(t, job{
		To: "a@x", Amount: 7, At: time.Unix(1_700_000_000, 1),
		Tags:   map[string]string{"z": "1", "a": "2", "m": "3"},
		Flags:  map[string]bool{"on": true, "off": false},
		One:    map[int]string{7: "seven"},
		Hidden: map[string]int{"a": 1, "b": 2, "c": 3},
		Meta:   map[string]any{"k": []any{1, "x", map[string]any{"b": 1, "a": 2}}, "j": nil},
	})
	check(t, []job{{To: "b"}, {Amount: -1}})
	rapid.Check(t, func(t *rapid.T) {
		check(t, drawStateValue(t, 3))
	})
}

// drawStateValue draws a value of the shapes DecodeValue gives a
// map[string]any: what workflow state is made of.
func drawStateValue(t *rapid.T, depth int) any {
	kinds := 4
	if depth > 0 {
		kinds = 6
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
	case 0:
		return rapid.String().Draw(t, "s")
	case 1:
		return rapid.Int64().Draw(t, "i")
	case 2:
		return rapid.Bool().Draw(t, "b")
	case 3:
		return nil
	case 4:
		var l []any
		for range rapid.IntRange(0, 4).Draw(t, "len") {
			l = append(l, drawStateValue(t, depth-1))
		}
		return l
	}
	m := map[string]any{}
	for _, k := range rapid.SliceOfN(rapid.String(), 0, 8).Draw(t, "keys") {
		m[k] = drawStateValue(t, depth-1)
	}
	return m
}

// TestEncodeValueMapOrder pins the order sortMaps gives entries: string
// keys first, by their bytes; then the others by their encoding; equal
// encoded keys by their values. Struct fields are sorted with the rest once
// the value holds a map to sort.
func TestEncodeValueMapOrder(t *testing.T) {
	t.Parallel()
	mixed := map[any]int{"b": 1, "aa": 2, strings.Repeat("c", 40): 3, 300: 4, -1: 5, 5: 6, int8(9): 7, int64(9): 8}
	got, err := EncodeValue(mixed)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = append(want, 0x88)
	want = append(want, 0xa2, 'a', 'a', 0x02)
	want = append(want, 0xa1, 'b', 0x01)
	want = append(want, 0xd9, 40)
	want = append(want, strings.Repeat("c", 40)...)
	want = append(want, 0x03)
	want = append(want, 0x05, 0x06)       // 5
	want = append(want, 0x09, 0x07)       // int8(9): value 7 before 8
	want = append(want, 0x09, 0x08)       // int64(9)
	want = append(want, 0xcd, 0x01, 0x2c) // 300
	want = append(want, 0x04)
	want = append(want, 0xff, 0x05) // -1
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
	// Keys that encode equally are ordered by their values on every call,
	// whatever order Go's map iteration gives them that time: equal values
	// give equal bytes (spec/reliability.md §3.7), so unique keys (JB-5)
	// built from them match.
	tied := map[any]int{int64(9): 7, int8(9): 8}
	for i := range 64 {
		got, err := EncodeValue(tied)
		if err != nil {
			t.Fatal(err)
		}
		if want := []byte{0x82, 0x09, 0x07, 0x09, 0x08}; !bytes.Equal(got, want) {
			t.Fatalf("call %d: got %x, want %x", i, got, want)
		}
	}

	type payload struct {
		Zeta  int
		Alpha map[string]int
	}
	got, err = EncodeValue(payload{Zeta: 1, Alpha: map[string]int{"y": 1, "x": 2}})
	if err != nil {
		t.Fatal(err)
	}
	want = []byte{0x82, 0xa5, 'A', 'l', 'p', 'h', 'a', 0x82, 0xa1, 'x', 0x02, 0xa1, 'y', 0x01, 0xa4, 'Z', 'e', 't', 'a', 0x01}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

// TestEncodeValueSortedKeepsLimits: sorting happens after the depth and
// size checks and keeps the length, so a value holding maps to sort is
// refused by the same limits as any other.
func TestEncodeValueSortedKeepsLimits(t *testing.T) {
	t.Parallel()
	var deep any = map[int]int{1: 1, 2: 2}
	for range DepthMax {
		deep = []any{deep}
	}
	if _, err := EncodeValue(deep); err == nil {
		t.Fatal("value deeper than DepthMax accepted")
	}
	big := map[int]string{1: strings.Repeat("x", ValueBytesMax/2), 2: strings.Repeat("y", ValueBytesMax/2)}
	if _, err := EncodeValue(big); err == nil {
		t.Fatal("value over ValueBytesMax accepted")
	}
	v := map[int]string{3: "c", 1: "a", 2: "b"}
	sorted, err := EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := encodeValueUnsorted(v)
	want := []byte{0x83, 0x01, 0xa1, 'a', 0x02, 0xa1, 'b', 0x03, 0xa1, 'c'}
	if !bytes.Equal(sorted, want) || len(plain) != len(want) {
		t.Fatalf("sorted %x, plain %x, want %x", sorted, plain, want)
	}
}
