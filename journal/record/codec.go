package record

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// EncodeBody returns the canonical msgpack encoding of b: struct fields in
// declaration order, map keys sorted.
func EncodeBody(b Body) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("%w: encode %s: %v", ErrInvalid, b.Kind(), err)
	}
	return buf.Bytes(), nil
}

// DecodeBody decodes the payload of a record of kind k into its concrete
// body. TODO(prescan): the structural pre-scan runs first.
func DecodeBody(k Kind, payload []byte) (Body, error) {
	b, ok := NewBody(k)
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, k)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return b, nil
}
