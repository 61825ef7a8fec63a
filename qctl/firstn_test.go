package qctl

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestTruncateCutsBetweenCharacters: a preview cut to n bytes stays valid
// UTF-8 and within n bytes before its "…": the cut used to split a
// two-byte "é", leaving a lone lead byte (payloads, states and errors in
// any script other than ASCII).
func TestTruncateCutsBetweenCharacters(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{strings.Repeat("é", 40), 60, strings.Repeat("é", 29) + "…"},
		{"a" + strings.Repeat("é", 40), 60, "a" + strings.Repeat("é", 29) + "…"},
		{strings.Repeat("日", 30), 10, strings.Repeat("日", 3) + "…"},
		{"short", 10, "short"},
		{"two\nlines", 60, "two lines"},
	} {
		got := truncate(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
