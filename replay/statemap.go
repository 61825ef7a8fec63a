package replay

import (
	"fmt"
	"sort"
	"strings"

	"github.com/quire-dev/quire/journal/record"
)

// Workflow state is stored as the canonical msgpack encoding of a map with
// string keys (sorted). Keys starting with "_" are private: stored, never
// shown or passed on (WF-12).

// IsPublicKey reports whether a state key is public (WF-12).
func IsPublicKey(k string) bool { return !strings.HasPrefix(k, "_") }

// DecodeState decodes a state map, treating the bytes as hostile (RL-6).
// Empty input is the empty map.
func DecodeState(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return map[string]any{}, nil
	}
	m := map[string]any{}
	if err := record.DecodeValue(b, &m); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return m, nil
}

// EncodeState returns the canonical encoding of m (keys sorted).
func EncodeState(m map[string]any) ([]byte, error) {
	return record.EncodeValue(m)
}

// PublicState returns the encoding of the public keys of state (WF-12).
func PublicState(state []byte) ([]byte, error) {
	m, err := DecodeState(state)
	if err != nil {
		return nil, err
	}
	for k := range m {
		if !IsPublicKey(k) {
			delete(m, k)
		}
	}
	return EncodeState(m)
}

// MergeState returns state with the public keys of output written over it
// (WF-3); output keys starting with "_" are dropped.
func MergeState(state, output []byte) ([]byte, error) {
	if len(output) == 0 {
		return state, nil
	}
	base, err := DecodeState(state)
	if err != nil {
		return nil, err
	}
	out, err := DecodeState(output)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if IsPublicKey(k) {
			base[k] = out[k]
		}
	}
	return EncodeState(base)
}
