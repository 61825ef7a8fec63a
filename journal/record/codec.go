package record

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// ValueBytesMax is the longest user value [DecodeValue] looks at. It is a
// backstop above any record size an engine can be configured with; the
// engine's own payload limit (512 KiB by default, RL-11) is checked before a
// value is ever written.
const ValueBytesMax = 16 << 20

// EncodeBody returns the canonical msgpack encoding of b: struct fields in
// declaration order, map keys sorted. The hot kinds encode themselves by
// hand (bodyAppender) into one buffer sized up front; the others go through
// msgpack's reflection encoder. Both give the same bytes.
func EncodeBody(b Body) ([]byte, error) {
	if a, ok := b.(bodyAppender); ok && !reflect.ValueOf(a).IsNil() {
		return a.appendBody(make([]byte, 0, a.bodyBytesMax())), nil
	}
	return encodeReflect(b)
}

// AppendBody appends the encoding of b, the bytes [EncodeBody] returns,
// to dst and returns the extended buffer. On an error dst is returned as
// it was.
func AppendBody(dst []byte, b Body) ([]byte, error) {
	if a, ok := b.(bodyAppender); ok && !reflect.ValueOf(a).IsNil() {
		return a.appendBody(slices.Grow(dst, a.bodyBytesMax())), nil
	}
	enc, err := encodeReflect(b)
	if err != nil {
		return dst, err
	}
	if cap(dst) == 0 {
		return enc, nil
	}
	return append(dst, enc...), nil
}

// encodeReflect is EncodeBody through msgpack's reflection encoder: the
// reference the hand encoders are held to.
func encodeReflect(b Body) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(&buf) // clears the options a previous user set
	enc.SetSortMapKeys(true)
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("%w: encode %s: %v", ErrInvalid, b.Kind(), err)
	}
	return buf.Bytes(), nil
}

// DecodeBody decodes the payload of a record of kind k into its concrete
// body. The payload is untrusted: it is pre-scanned ([Prescan], no ext
// allowed) before msgpack reads it, and a field this version does not know
// fails the decode. Errors wrap [ErrCorrupt].
func DecodeBody(k Kind, payload []byte) (Body, error) {
	b, ok := NewBody(k)
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, k)
	}
	if err := Prescan(payload, false); err != nil {
		return nil, fmt.Errorf("%s payload: %w", k, err)
	}
	// Unknown fields fail, so a record from a newer or forged writer is
	// refused rather than half read; format evolution goes through the
	// envelope version.
	if err := decode(payload, b, true); err != nil {
		return nil, fmt.Errorf("%w: %s payload: %v", ErrCorrupt, k, err)
	}
	return b, nil
}

// EncodeValue returns the canonical msgpack encoding of a user value (a
// workflow state, job payload, signal payload or step output): map keys
// sorted whatever the map's type (see sortMaps for the order), integers in
// their shortest form and timestamps in their 96-bit form, so equal values
// give equal bytes. A value that [DecodeValue]
// would refuse (nesting deeper than [DepthMax], an ext other than the
// timestamp, more than [ValueBytesMax] bytes) is refused here, before it
// can reach the journal. Depth and size are checked as the bytes are
// written, so a value that contains itself through a map, slice, array or
// struct is refused at depth DepthMax+1 rather than recursing until the
// process dies (see valueWriter); one that contains itself through
// pointers and interfaces only (var x any; x = &x), or holds a type
// msgpack recurses on without end (type P *P), is refused before it is
// encoded (see checkIndirections). Errors wrap [ErrInvalid] or
// [ErrTooLarge].
func EncodeValue(v any) ([]byte, error) {
	// A cycle of pointers and interfaces, or a type msgpack recurses on
	// while building its encoder, would overflow the stack without a
	// write the valueWriter could fail: refused first.
	limitErr := checkIndirections(v)
	p := getEncoder()
	defer p.put()
	var err error
	if limitErr == nil {
		err = p.enc.Encode(v)
		limitErr = p.w.err // checked first: a custom encoder may have dropped it
	}
	switch limitErr {
	case errValueTooDeep:
		return nil, fmt.Errorf("%w: %T nests deeper than %d levels (DepthMax) or contains itself", ErrInvalid, v, DepthMax)
	case errValueTooLarge:
		return nil, fmt.Errorf("%w: %T encodes to more than %d bytes (ValueBytesMax)", ErrTooLarge, v, ValueBytesMax)
	case errValueCycle:
		return nil, fmt.Errorf("%w: %T contains itself through pointers and interfaces only", ErrInvalid, v)
	case errValueChainTooLong:
		return nil, fmt.Errorf("%w: %T goes through more than %d pointers in a row (DepthMax) or contains itself", ErrInvalid, v, DepthMax)
	}
	if rt, ok := limitErr.(*recursiveTypeError); ok {
		return nil, fmt.Errorf("%w: %T cannot be encoded: %v", ErrInvalid, v, rt)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: encode %T: %v", ErrInvalid, v, err)
	}
	enc := p.w.buf
	if err := Prescan(enc, true); err != nil {
		return nil, fmt.Errorf("%w: %T would not decode: %v", ErrInvalid, v, err)
	}
	out, err := canonicalTimestamps(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: %T would not decode: %v", ErrInvalid, v, err)
	}
	if p.w.multiEntryMap && holdsUnsortedMap(v) {
		out = sortMaps(out) // same length and depth, so the limits still hold
	}
	if len(out) > ValueBytesMax {
		return nil, fmt.Errorf("%w: %T encodes to %d bytes, limit %d", ErrTooLarge, v, len(out), ValueBytesMax)
	}
	if &out[0] == &enc[0] { // not rewritten: still the pooled buffer
		out = bytes.Clone(out)
	}
	return out, nil
}

// DecodeValue decodes a user value read from the journal into v, a pointer
// (for example *map[string]any or a handler's own struct type). The bytes
// are untrusted: they are refused beyond [ValueBytesMax] and pre-scanned
// ([Prescan], timestamp ext allowed) before msgpack reads them, and
// timestamps are brought to their 96-bit form (see canonicalTimestamps).
// This keeps the decode within [DepthMax] levels of recursion and its
// allocation proportional to len(b). Errors from the bytes wrap
// [ErrCorrupt]; bytes that pass the checks but do not fit v are a
// [*ValueTypeError], which matches ErrCorrupt too.
//
// The proportion depends on v. Decoding into structs of scalars, strings
// and byte slices stays within RL-6's 32 × len(b) + 1 MiB; decoding into
// any or map[string]any can reach about 120 × len(b) on inputs made of
// one-entry maps, because a Go map costs about 350 bytes whatever its size.
// Replay therefore never decodes a state: it merges and filters states on
// the bytes ([MergeMaps]).
func DecodeValue(b []byte, v any) error {
	if len(b) > ValueBytesMax {
		return fmt.Errorf("%w: value is %d bytes, limit %d", ErrCorrupt, len(b), ValueBytesMax)
	}
	if err := Prescan(b, true); err != nil {
		return err
	}
	b, err := canonicalTimestamps(b)
	if err != nil {
		return err
	}
	// Unlike a record, a user value may carry fields the handler's type no
	// longer has: user types evolve with their workflows, not with the
	// envelope version.
	if err := decode(b, v, false); err != nil {
		return &ValueTypeError{Type: fmt.Sprintf("%T", v), Err: err}
	}
	return nil
}

// decode runs msgpack on pre-scanned bytes. The allocation-limit,
// preallocation and loose-interface options of the decoder stay off
// (spec/reliability.md §3.5): the decoder comes from this package's own
// pool, which no other code configures, and Reset clears every option
// anyway.
func decode(b []byte, v any, disallowUnknown bool) error {
	d := decoders.Get().(*pooledDecoder)
	defer d.put()
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	d.dec.DisallowUnknownFields(disallowUnknown)
	return d.dec.Decode(v)
}

// pooledDecoder is a decoder with the reader it reads from, pooled
// together: msgpack's own pool would need a new reader for every decode.
type pooledDecoder struct {
	dec *msgpack.Decoder
	rd  bytes.Reader
}

var decoders = sync.Pool{New: func() any { return &pooledDecoder{dec: msgpack.NewDecoder(nil)} }}

// put returns d to the pool without the bytes it read.
func (d *pooledDecoder) put() {
	d.rd.Reset(nil)
	d.dec.ResetReader(nil)
	decoders.Put(d)
}
