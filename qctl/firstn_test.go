package qctl

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// firstN keeps exactly the n smallest keys, in order, whatever order they
// come in: what --limit prints is the first n rows of the full listing.
func TestFirstNKeepsTheSmallestKeys(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfDistinct(rapid.Uint64Range(0, 1000), func(k uint64) uint64 { return k }).Draw(t, "keys")
		n := rapid.IntRange(0, len(keys)+2).Draw(t, "n")
		f := newFirstN(n, func(k uint64) uint64 { return k })
		for _, k := range keys {
			f.add(k)
		}
		want := slices.Sorted(slices.Values(keys))
		if n > 0 && len(want) > n {
			want = want[:n]
		}
		if got := f.sorted(); !slices.Equal(got, want) {
			t.Fatalf("kept %v, want %v", got, want)
		}
		if n > 0 && len(f.items) > n {
			t.Fatalf("held %d values for n = %d", len(f.items), n)
		}
	})
}
