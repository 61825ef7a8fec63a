package replay

import (
	"fmt"
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
// It works on the bytes ([record.MergeMaps]): replaying a state never
// decodes its values.
func PublicState(state []byte) ([]byte, error) {
	out, err := record.MergeMaps(state, isPublicKey, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return out, nil
}

// PublicStateHiding is [PublicState] that also reports whether state had
// a private key, which the result leaves out: a reader can then say that
// something was hidden, which comparing lengths cannot tell (a repeated
// public key is dropped too).
func PublicStateHiding(state []byte) (pub []byte, hidden bool, err error) {
	out, err := record.MergeMaps(state, func(k []byte) bool {
		if isPublicKey(k) {
			return true
		}
		hidden = true
		return false
	}, nil, nil)
	if err != nil {
		return nil, false, fmt.Errorf("state: %w", err)
	}
	return out, hidden, nil
}

// MergeState returns state with the public keys of output written over it
// (WF-3); output keys starting with "_" are dropped. It works on the
// bytes, as PublicState does.
func MergeState(state, output []byte) ([]byte, error) {
	if len(output) == 0 {
		return state, nil
	}
	out, err := record.MergeMaps(state, nil, output, isPublicKey)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return out, nil
}

// CheckState reports whether b is a state [DecodeState] accepts, without
// decoding its values.
func CheckState(b []byte) error {
	if _, err := record.MergeMaps(b, nil, nil, nil); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// isPublicKey is IsPublicKey on a key's bytes.
func isPublicKey(k []byte) bool { return len(k) == 0 || k[0] != '_' }
