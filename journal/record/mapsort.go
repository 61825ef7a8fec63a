package record

import (
	"bytes"
	"encoding"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Map order in [EncodeValue].
//
// msgpack v5.4.1 with SetSortMapKeys writes the entries of
// map[string]string, map[string]bool and map[string]any sorted by key, the
// fields of a struct in declaration order, and every other map
// (map[string]int, map[int]string, map[K]V of a user type) in Go's random
// iteration order. Its encoder has no option or hook that sorts those, so
// EncodeValue sorts them afterwards, on the bytes, when the value holds
// one of them with two entries or more:
//
//   - A value that holds no such map keeps the bytes msgpack writes:
//     structs in declaration order, string-keyed maps sorted. Every value
//     that encoded the same way on each call before keeps its bytes, so
//     the unique keys (JB-5) and definition hashes (WF-2) already in
//     journals stay valid.
//   - A value that holds one is rewritten with the entries of every map in
//     its encoding sorted: the random ones, the sorted ones (which do not
//     move), and struct fields too, because in the bytes a struct is a map
//     like any other. Its bytes were different from call to call before,
//     so no stored key can have relied on them.
//
// The order: string keys first, by their bytes (Go's string order, the
// order SetSortMapKeys uses, so sorted maps do not move), then every other
// key by its encoded bytes, compared bytewise; entries whose keys encode
// equally (map[any]V with int8(1) and int64(1), both written as 0x01) are
// ordered by their encoded values. Only the order of entries changes:
// every key and value keeps its bytes, so the encoding keeps its length
// and depth and decodes to the same value.
//
// Whether a value holds such a map is read from the value itself (see
// holdsUnsortedMap), so equal values always take the same branch. Values a
// type writes itself (a CustomEncoder, Marshaler, BinaryMarshaler or
// TextMarshaler, or a type registered with msgpack.Register) are the
// type's responsibility and are not looked into.

// SortedValue returns the canonical form of b, a value [EncodeValue]
// wrote: the same bytes with the entries of every map sorted in the order
// above, struct fields included. Equal values of different shapes (a
// struct and a map holding its fields, two structs declaring their fields
// in another order) have one canonical form: it is what a unique job's
// key hashes (JB-5). Bytes that fail the pre-scan are returned as they
// are.
func SortedValue(b []byte) []byte {
	if Prescan(b, true) != nil {
		return b
	}
	c, err := canonicalTimestamps(b)
	if err != nil {
		return b
	}
	return sortMaps(c)
}

// sortMaps returns a copy of b, one well-formed msgpack value (pre-scanned,
// timestamps canonical), with the entries of every map sorted.
func sortMaps(b []byte) []byte {
	s := mapSorter{}
	out, _ := s.item(make([]byte, 0, len(b)), b, 0)
	return out
}

// mapSorter holds the scratch space of one sortMaps call.
type mapSorter struct {
	tmp []byte
}

// entrySpan is one map entry in a mapSorter's output: the key at
// [start, mid), the value at [mid, end).
type entrySpan struct{ start, mid, end int }

// item appends the sorted form of the item at b[i:] to dst and returns dst
// and the offset after the item. The recursion is at most DepthMax deep:
// b passed Prescan.
func (s *mapSorter) item(dst, b []byte, i int) ([]byte, int) {
	hdr, body, items, isMap := header(b, i)
	if items == 0 {
		return append(dst, b[i:i+hdr+body]...), i + hdr + body
	}
	dst = append(dst, b[i:i+hdr]...)
	i += hdr
	if !isMap {
		for range items {
			dst, i = s.item(dst, b, i)
		}
		return dst, i
	}
	start := len(dst)
	entries := make([]entrySpan, items/2)
	for k := range entries {
		e := &entries[k]
		e.start = len(dst)
		dst, i = s.item(dst, b, i)
		e.mid = len(dst)
		dst, i = s.item(dst, b, i)
		e.end = len(dst)
	}
	cmp := func(x, y entrySpan) int {
		if c := compareKeys(dst[x.start:x.mid], dst[y.start:y.mid]); c != 0 {
			return c
		}
		return bytes.Compare(dst[x.mid:x.end], dst[y.mid:y.end])
	}
	if slices.IsSortedFunc(entries, cmp) {
		return dst, i
	}
	slices.SortFunc(entries, cmp)
	s.tmp = append(s.tmp[:0], dst[start:]...)
	out := dst[:start]
	for _, e := range entries {
		out = append(out, s.tmp[e.start-start:e.end-start]...)
	}
	return out, i
}

// compareKeys orders two encoded map keys: strings first, by their bytes;
// then the others by their encoding, bytewise.
func compareKeys(a, b []byte) int {
	as, aok := strBytes(a)
	bs, bok := strBytes(b)
	switch {
	case aok && bok:
		return bytes.Compare(as, bs)
	case aok:
		return -1
	case bok:
		return 1
	}
	return bytes.Compare(a, b)
}

// strBytes returns the bytes of the msgpack str that is exactly b.
func strBytes(b []byte) ([]byte, bool) {
	c := b[0]
	switch {
	case c >= 0xa0 && c <= 0xbf:
		return b[1:], true
	case c == 0xd9 || c == 0xda || c == 0xdb:
		return b[1+lenWidth(c):], true
	}
	return nil, false
}

// header reads the header of the well-formed item at b[i:]: its length,
// the length of the bytes that follow it (str, bin, ext and number data),
// the count of items a container holds (twice the entries of a map), and
// whether it is a map.
func header(b []byte, i int) (hdr, body int, items uint64, isMap bool) {
	c := b[i]
	hdr = 1
	switch {
	case c <= 0x7f || c >= 0xe0:
	case c <= 0x8f:
		items, isMap = 2*uint64(c&0x0f), true
	case c <= 0x9f:
		items = uint64(c & 0x0f)
	case c <= 0xbf:
		body = int(c & 0x1f)
	default:
		switch c {
		case 0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb:
			l, lw, _ := readLen(b, i+1, lenWidth(c))
			hdr, body = 1+lw, int(l)
		case 0xc7, 0xc8, 0xc9:
			l, lw, _ := readLen(b, i+1, lenWidth(c))
			hdr, body = 2+lw, int(l)
		case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
			hdr, body = 2, 1<<(c-0xd4)
		case 0xca, 0xce, 0xd2:
			body = 4
		case 0xcb, 0xcf, 0xd3:
			body = 8
		case 0xcc, 0xd0:
			body = 1
		case 0xcd, 0xd1:
			body = 2
		case 0xdc, 0xdd:
			l, lw, _ := readLen(b, i+1, lenWidth(c))
			hdr, items = 1+lw, l
		case 0xde, 0xdf:
			l, lw, _ := readLen(b, i+1, lenWidth(c))
			hdr, items, isMap = 1+lw, 2*l, true
		}
	}
	return hdr, body, items, isMap
}

// walkLevelsMax bounds holdsUnsortedMap's descent, pointers and interfaces
// included. msgpack has already encoded the value when it runs, so only a
// field msgpack skips can lead further; past the bound the answer is yes,
// which costs a sort and is still a function of the value.
const walkLevelsMax = 4 * DepthMax

// holdsUnsortedMap reports whether msgpack writes, somewhere in v, a map
// with two entries or more in Go's iteration order: a map other than
// map[string]string, map[string]bool and map[string]any.
func holdsUnsortedMap(v any) bool {
	switch v := v.(type) {
	case nil, string, bool, int, int64, float64, []byte:
		return false
	case map[string]any:
		return anyMapHoldsUnsorted(v, 0)
	}
	return valueHoldsUnsorted(reflect.ValueOf(v), 0)
}

func anyMapHoldsUnsorted(m map[string]any, level int) bool {
	for _, x := range m {
		if anyHoldsUnsorted(x, level+1) {
			return true
		}
	}
	return false
}

// anyHoldsUnsorted is holdsUnsortedMap for a value held by an interface,
// with the types DecodeValue gives a map[string]any answered without
// reflection.
func anyHoldsUnsorted(x any, level int) bool {
	switch x := x.(type) {
	case nil, string, bool, int8, int16, int32, int64, int, uint8, uint16, uint32, uint64, uint,
		float32, float64, []byte:
		return false
	case map[string]any:
		return anyMapHoldsUnsorted(x, level)
	case []any:
		for _, e := range x {
			if anyHoldsUnsorted(e, level+1) {
				return true
			}
		}
		return false
	}
	return valueHoldsUnsorted(reflect.ValueOf(x), level)
}

func valueHoldsUnsorted(v reflect.Value, level int) bool {
	if !v.IsValid() {
		return false
	}
	if level > walkLevelsMax {
		return true
	}
	ti := typeInfoOf(v.Type())
	if !ti.walk {
		return false
	}
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && valueHoldsUnsorted(v.Elem(), level+1)
	case reflect.Interface:
		if v.IsNil() {
			return false
		}
		if v.CanInterface() {
			return anyHoldsUnsorted(v.Interface(), level+1)
		}
		return valueHoldsUnsorted(v.Elem(), level+1)
	case reflect.Map:
		if !ti.sorted && v.Len() >= 2 {
			return true
		}
		it := v.MapRange()
		for it.Next() {
			if valueHoldsUnsorted(it.Key(), level+1) || valueHoldsUnsorted(it.Value(), level+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for k := range v.Len() {
			if valueHoldsUnsorted(v.Index(k), level+1) {
				return true
			}
		}
	case reflect.Struct:
		for _, f := range ti.fields {
			if valueHoldsUnsorted(v.Field(f), level+1) {
				return true
			}
		}
	}
	return false
}

// typeInfo is what holdsUnsortedMap needs to know of a type.
type typeInfo struct {
	// walk is set when a value of the type can hold a map msgpack writes
	// in iteration order: the value must be looked at.
	walk bool
	// sorted is set for the map types msgpack sorts.
	sorted bool
	// fields lists the indexes of a struct's fields that msgpack writes
	// and that need a walk.
	fields []int
}

var typeInfos sync.Map // reflect.Type → *typeInfo

// Types msgpack writes through their own methods, as _getEncoder checks.
var (
	customEncoderType   = reflect.TypeFor[msgpack.CustomEncoder]()
	marshalerType       = reflect.TypeFor[msgpack.Marshaler]()
	binaryMarshalerType = reflect.TypeFor[encoding.BinaryMarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	errorType           = reflect.TypeFor[error]()
	stringType          = reflect.TypeFor[string]()
	boolType            = reflect.TypeFor[bool]()
	anyType             = reflect.TypeFor[any]()
)

func typeInfoOf(t reflect.Type) *typeInfo {
	if ti, ok := typeInfos.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := buildTypeInfo(t, map[reflect.Type]bool{})
	typeInfos.Store(t, ti)
	return ti
}

// buildTypeInfo computes t's typeInfo. A type met again while it is being
// computed (a recursive type) is taken to need a walk: the walk is exact,
// only slower.
func buildTypeInfo(t reflect.Type, inProgress map[reflect.Type]bool) *typeInfo {
	if ti, ok := typeInfos.Load(t); ok {
		return ti.(*typeInfo)
	}
	if inProgress[t] {
		return &typeInfo{walk: true}
	}
	inProgress[t] = true
	defer delete(inProgress, t)
	ti := &typeInfo{}
	if writesItself(t) {
		return ti
	}
	sub := func(u reflect.Type) bool { return buildTypeInfo(u, inProgress).walk }
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		ti.walk = sub(t.Elem())
	case reflect.Interface:
		ti.walk = true
	case reflect.Map:
		if t.Key() == stringType {
			switch t.Elem() {
			case stringType, boolType:
				ti.sorted = true
				return ti
			case anyType:
				ti.sorted = true
			}
		}
		ti.walk = true
	case reflect.Struct:
		for k := range t.NumField() {
			f := t.Field(k)
			if !encodedField(f) || !sub(f.Type) {
				continue
			}
			ti.fields = append(ti.fields, k)
		}
		ti.walk = len(ti.fields) > 0
	}
	return ti
}

// writesItself reports whether msgpack writes t through a method of t or
// *t rather than by its kind.
func writesItself(t reflect.Type) bool {
	if t == errorType {
		return true
	}
	for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
		if u.Implements(customEncoderType) || u.Implements(marshalerType) ||
			u.Implements(binaryMarshalerType) || u.Implements(textMarshalerType) {
			return true
		}
	}
	return false
}

// encodedField reports whether msgpack writes the struct field f: not
// tagged msgpack:"-" (EncodeValue sets no other struct tag), and exported
// or embedded.
func encodedField(f reflect.StructField) bool {
	name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
	return name != "-" && (f.IsExported() || f.Anonymous)
}
