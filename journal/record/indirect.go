package record

import (
	"encoding"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Pointer and interface cycles in [EncodeValue].
//
// msgpack writes nothing for a pointer or an interface: it encodes what
// they hold, one Go call deeper. A value that holds itself through pointers
// and interfaces alone (var x any; x = &x) makes it recurse without
// writing a byte, so the valueWriter never sees a level and the
// goroutine's stack runs out: a fatal error, not a panic. Two kinds of
// type make msgpack recurse the same way while it builds its encoder for
// them, whatever the value, even nil: a pointer type that points to itself
// through pointers only (type P *P), and a struct that embeds itself
// (type S struct{ *S }: msgpack inlines the fields of an embedded struct,
// and looks for them without end). checkIndirections refuses such values
// before msgpack sees them.
//
// Only a type that can reach an interface or one of those types needs
// looking at; for every other type (a struct of plain fields, a
// map[string]int) the check is one cached lookup. A value of the others
// is walked: each chain of pointers and interfaces is followed with the
// pointers it went through, and a chain that comes back to one, or goes
// through more than DepthMax pointers in a row, is refused. Pointers
// shared by distinct chains (the same *T twice in a value) are no cycle
// and encode as before.
//
// The walk keeps the writer's limits, so that it ends on any value,
// cycles through maps, slices, arrays and structs included, and on a
// value that shares subtrees its cost is bounded by what encoding it would
// write: it refuses a non-empty container DepthMax levels deep, and it
// stops at ValueBytesMax bytes of a lower bound of the encoding. Both
// counts are taken low (a struct may count no level, an omitted field no
// byte), so that what the walk refuses the valueWriter would refuse too.
// Types that encode themselves (a CustomEncoder, Marshaler,
// BinaryMarshaler or TextMarshaler, and error) are not walked into.

var (
	errValueCycle        = errors.New("value contains itself through pointers and interfaces")
	errValueChainTooLong = errors.New("value goes through too many pointers in a row")
)

// recursiveTypeError is a type msgpack cannot build an encoder for: it
// would recurse without end.
type recursiveTypeError struct {
	typ    reflect.Type
	embeds bool // a struct that embeds itself; else a pointer type
}

func (e *recursiveTypeError) Error() string {
	if e.embeds {
		return "struct " + e.typ.String() + " embeds itself"
	}
	return "type " + e.typ.String() + " points to itself through pointers only"
}

// indirectInfo is what checkIndirections needs to know of a type.
type indirectInfo struct {
	// walk is set when a value of the type needs the walk: it can reach an
	// interface that does not encode itself, or a type that is broken.
	walk bool
	// broken is set when msgpack cannot encode a value of the type at all
	// (see recursiveTypeError).
	broken *recursiveTypeError
	// container is set for a struct msgpack always writes as a non-empty
	// map or array: it has an encoded field that is neither embedded nor
	// omitempty.
	container bool
	// fields lists a struct's encoded fields whose values need the walk.
	fields []indirectField
}

type indirectField struct {
	index int
	info  *indirectInfo
	// inline is set for an embedded struct, or pointer to one, whose
	// fields msgpack may write into the parent's map: no level of its own.
	inline bool
	// omittable is set when msgpack leaves the field out if it is empty.
	omittable bool
}

var indirectInfos sync.Map // reflect.Type → *indirectInfo

func indirectInfoOf(t reflect.Type) *indirectInfo {
	if ti, ok := indirectInfos.Load(t); ok {
		return ti.(*indirectInfo)
	}
	ti := &indirectInfo{broken: brokenType(t)}
	ti.walk = ti.broken != nil || reachesIndirection(t, map[reflect.Type]bool{})
	if ti.walk && ti.broken == nil && t.Kind() == reflect.Struct {
		// The recursion is on fields held by value, as deep as the type.
		structOmit := false
		for k := range t.NumField() {
			f := t.Field(k)
			_, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
			omit := structOmit || hasTagOption(opts, "omitempty")
			if f.Name == "_msgpack" && hasTagOption(opts, "omitempty") {
				structOmit = true // msgpack applies it to the fields after
			}
			if !encodedField(f) {
				continue
			}
			inline := f.Anonymous && !hasTagOption(opts, "noinline") && derefKind(f.Type) == reflect.Struct
			if !f.Anonymous && !omit {
				ti.container = true
			}
			if fi := indirectInfoOf(f.Type); fi.walk {
				ti.fields = append(ti.fields, indirectField{index: k, info: fi, inline: inline, omittable: omit})
			}
		}
	}
	stored, _ := indirectInfos.LoadOrStore(t, ti)
	return stored.(*indirectInfo)
}

// reachesIndirection reports whether a value of type t can hold an
// interface msgpack encodes by its dynamic value, or a broken type,
// following what msgpack encodes: the elements of pointers, slices,
// arrays and maps (keys too) and the encoded fields of structs. seen holds
// the types already looked at from the same root: meeting one again adds
// no new type.
func reachesIndirection(t reflect.Type, seen map[reflect.Type]bool) bool {
	if ti, ok := indirectInfos.Load(t); ok {
		return ti.(*indirectInfo).walk
	}
	if seen[t] {
		return false
	}
	seen[t] = true
	if writesItself(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer:
		return pointerLoop(t) != nil || reachesIndirection(t.Elem(), seen)
	case reflect.Slice, reflect.Array:
		return reachesIndirection(t.Elem(), seen)
	case reflect.Map:
		return reachesIndirection(t.Key(), seen) || reachesIndirection(t.Elem(), seen)
	case reflect.Struct:
		if brokenStruct(t, []reflect.Type{t}) != nil {
			return true
		}
		for k := range t.NumField() {
			if f := t.Field(k); encodedField(f) && reachesIndirection(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// brokenType returns why msgpack cannot build an encoder for t, or nil.
func brokenType(t reflect.Type) *recursiveTypeError {
	if writesItself(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if loop := pointerLoop(t); loop != nil {
			return &recursiveTypeError{typ: loop}
		}
	case reflect.Struct:
		return brokenStruct(t, []reflect.Type{t})
	}
	return nil
}

// brokenStruct returns why msgpack cannot list the fields of the struct
// type t, or nil. It lists them, with those of the structs t embeds
// (inlined: in, the structs being listed), the first time it encodes a t,
// and builds an encoder and a decoder for each: a field of a pointer type
// that points to itself, or a struct that embeds itself, makes it recurse
// without end.
func brokenStruct(t reflect.Type, in []reflect.Type) *recursiveTypeError {
	for k := range t.NumField() {
		f := t.Field(k)
		if !encodedField(f) {
			continue
		}
		if loop := pointerLoop(f.Type); loop != nil {
			return &recursiveTypeError{typ: loop}
		}
		_, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if !f.Anonymous || hasTagOption(opts, "noinline") {
			continue
		}
		u := f.Type
		if !hasTagOption(opts, "inline") { // inlined only if it is a plain struct
			for u.Kind() == reflect.Pointer {
				u = u.Elem()
			}
			if writesItself(u) || readsItself(u) {
				continue
			}
		}
		if u.Kind() != reflect.Struct {
			continue
		}
		if slices.Contains(in, u) {
			return &recursiveTypeError{typ: u, embeds: true}
		}
		if err := brokenStruct(u, append(in, u)); err != nil {
			return err
		}
	}
	return nil
}

// pointerLoop follows the elements of t while they are pointer types and
// returns the first one met twice (type P *P; or type P *Q; type Q *P),
// or nil.
func pointerLoop(t reflect.Type) reflect.Type {
	var met []reflect.Type
	for u := t; u.Kind() == reflect.Pointer; u = u.Elem() {
		if slices.Contains(met, u) {
			return u
		}
		met = append(met, u)
	}
	return nil
}

// readsItself reports whether msgpack decodes t through a method of t or
// *t: it does not inline such a type when it is embedded.
func readsItself(t reflect.Type) bool {
	for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
		if u.Implements(customDecoderType) || u.Implements(unmarshalerType) ||
			u.Implements(binaryUnmarshalerType) || u.Implements(textUnmarshalerType) {
			return true
		}
	}
	return false
}

var (
	customDecoderType     = reflect.TypeFor[msgpack.CustomDecoder]()
	unmarshalerType       = reflect.TypeFor[msgpack.Unmarshaler]()
	binaryUnmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	textUnmarshalerType   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// derefKind is the kind of t with its pointers removed.
func derefKind(t reflect.Type) reflect.Kind {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind()
}

// hasTagOption reports whether the options of a msgpack struct tag (what
// follows the name) hold opt.
func hasTagOption(opts, opt string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if name, _, _ := strings.Cut(o, ":"); name == opt {
			return true
		}
	}
	return false
}

// checkIndirections returns errValueCycle or errValueChainTooLong for a
// value msgpack would recurse into without writing, errValueTooDeep or
// errValueTooLarge for one the walk found past the writer's limits, nil
// otherwise. The common shapes of a payload are answered without
// reflection.
func checkIndirections(v any) error {
	switch v := v.(type) {
	case nil, string, bool, int, int64, float64, []byte:
		return nil
	case map[string]any:
		var w indirectWalker
		return w.anyMap(v, 0)
	}
	rv := reflect.ValueOf(v)
	ti := indirectInfoOf(rv.Type())
	if !ti.walk {
		return nil
	}
	var w indirectWalker
	return w.slot(rv, ti, 0, 0)
}

// indirectWalker holds the state of one checkIndirections walk.
type indirectWalker struct {
	// bytes is a lower bound of the bytes msgpack writes for what the walk
	// has been through.
	bytes int
	// chain holds the pointers the current chain went through, as
	// (address, pointer type): the same pair twice is a cycle.
	chain  [DepthMax]chainLink
	nChain int
}

type chainLink struct {
	addr uintptr
	typ  reflect.Type
}

// add counts n bytes of the encoding.
func (w *indirectWalker) add(n int) error {
	w.bytes += n
	if w.bytes > ValueBytesMax {
		return errValueTooLarge
	}
	return nil
}

// anyValue walks a value held by an interface, with the types a
// map[string]any usually holds answered without reflection. A nil adds
// nothing: a nil pointer or interface ends its chain.
func (w *indirectWalker) anyValue(x any, depth, loose int) error {
	switch x := x.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return nil
	case string:
		return w.add(len(x))
	case []byte:
		return w.add(len(x))
	case map[string]any:
		return w.anyMap(x, depth)
	case []any:
		return w.anySlice(x, depth)
	}
	rv := reflect.ValueOf(x)
	ti := indirectInfoOf(rv.Type())
	if !ti.walk {
		return nil
	}
	return w.slot(rv, ti, depth, loose)
}

// anyMap walks a map[string]any found at depth open containers.
func (w *indirectWalker) anyMap(m map[string]any, depth int) error {
	if len(m) == 0 {
		return nil
	}
	if depth == DepthMax {
		return errValueTooDeep
	}
	for k, x := range m {
		if err := w.add(2 + len(k)); err != nil {
			return err
		}
		if err := w.anyValue(x, depth+1, 0); err != nil {
			return err
		}
	}
	return nil
}

func (w *indirectWalker) anySlice(s []any, depth int) error {
	if len(s) == 0 {
		return nil
	}
	if depth == DepthMax {
		return errValueTooDeep
	}
	for _, x := range s {
		if err := w.add(1); err != nil {
			return err
		}
		if err := w.anyValue(x, depth+1, 0); err != nil {
			return err
		}
	}
	return nil
}

// slot walks v, of a type that needs the walk (ti is its info), as the
// start of a new chain of pointers and interfaces. depth counts the
// containers open around v; loose counts the structs since the last of
// them that counted no level.
func (w *indirectWalker) slot(v reflect.Value, ti *indirectInfo, depth, loose int) error {
	w.nChain = 0
	return w.value(v, ti, depth, loose, false)
}

// item walks v, an item of a map, slice, array or struct, as slot does,
// an interface through anyValue, which answers the common dynamic types
// without reflection.
func (w *indirectWalker) item(v reflect.Value, ti *indirectInfo, depth, loose int) error {
	if v.Kind() == reflect.Interface && v.CanInterface() {
		return w.anyValue(v.Interface(), depth, loose)
	}
	return w.slot(v, ti, depth, loose)
}

// value walks v, ti its info, in the current chain. inlined is set when v
// is reached through an embedded field msgpack may inline.
func (w *indirectWalker) value(v reflect.Value, ti *indirectInfo, depth, loose int, inlined bool) error {
	for {
		if ti.broken != nil { // even nil: msgpack builds the encoder first
			return ti.broken
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return nil
			}
			elem := v.Elem()
			if k := elem.Kind(); k == reflect.Pointer || k == reflect.Interface {
				link := chainLink{v.Pointer(), v.Type()}
				if slices.Contains(w.chain[:w.nChain], link) {
					return errValueCycle
				}
				if w.nChain == len(w.chain) {
					return errValueChainTooLong
				}
				w.chain[w.nChain] = link
				w.nChain++
			}
			v = elem
		case reflect.Interface:
			if v.IsNil() {
				return nil
			}
			v = v.Elem()
		default:
			return w.container(v, ti, depth, loose, inlined)
		}
		if ti = indirectInfoOf(v.Type()); !ti.walk {
			return nil
		}
	}
}

// container walks v, a map, slice, array or struct (other kinds do not
// need the walk), with its items each the start of a new chain.
func (w *indirectWalker) container(v reflect.Value, ti *indirectInfo, depth, loose int, inlined bool) error {
	switch v.Kind() {
	case reflect.Map:
		if v.Len() == 0 {
			return nil
		}
		if depth == DepthMax {
			return errValueTooDeep
		}
		if v.Type() == mapStringAnyType && v.CanInterface() {
			return w.anyMap(v.Interface().(map[string]any), depth)
		}
		kt, vt := indirectInfoOf(v.Type().Key()), indirectInfoOf(v.Type().Elem())
		var it reflect.MapIter
		it.Reset(v)
		for it.Next() {
			if err := w.add(2); err != nil {
				return err
			}
			if kt.walk {
				if err := w.item(it.Key(), kt, depth+1, 0); err != nil {
					return err
				}
			}
			if vt.walk {
				if err := w.item(it.Value(), vt, depth+1, 0); err != nil {
					return err
				}
			}
		}
	case reflect.Slice, reflect.Array:
		n := v.Len()
		if n == 0 {
			return nil
		}
		if depth == DepthMax {
			return errValueTooDeep
		}
		et := indirectInfoOf(v.Type().Elem())
		for k := range n {
			if err := w.add(1); err != nil {
				return err
			}
			if err := w.item(v.Index(k), et, depth+1, 0); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if ti.container && !inlined {
			if depth == DepthMax {
				return errValueTooDeep
			}
			depth, loose = depth+1, 0
		} else if loose++; loose > looseLevelsMax {
			return errValueTooDeep
		}
		for _, f := range ti.fields {
			fv := v.Field(f.index)
			if f.omittable && isEmptyOrNil(fv) {
				continue // msgpack leaves it out; it holds nothing to walk
			}
			if err := w.add(1); err != nil {
				return err
			}
			var err error
			if f.inline {
				w.nChain = 0
				err = w.value(fv, f.info, depth, loose, true)
			} else {
				err = w.item(fv, f.info, depth, loose)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

var mapStringAnyType = reflect.TypeFor[map[string]any]()

// looseLevelsMax bounds the structs in a row that count no level (see
// container). It only has to end the walk: such a path that goes on
// without end holds structs msgpack writes as maps, and would pass
// DepthMax.
const looseLevelsMax = 4 * DepthMax

// isEmptyOrNil reports whether v is a nil pointer, interface, map or
// slice, or an empty map or slice: what holds nothing for the walk.
func isEmptyOrNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return false
}
