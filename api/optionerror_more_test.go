package api_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/quire-dev/quire/api"
)

// An OptionError shows a string value whole up to 64 bytes and cuts a
// longer one at 64 bytes, or before the rune that straddles byte 64, so
// that the cut never splits a rune; the length it was follows. Seen
// through Open: a duplicate queue names the duplicate as the value, and a
// queue name that is not UTF-8 is the value of its refusal.
func TestOptionErrorValueCutAt64BytesOnARuneBoundary(t *testing.T) {
	t.Parallel()
	a := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		name, queue, want string
	}{
		{"64 bytes, whole", a(64), `"` + a(64) + `"`},
		{"63 bytes, whole", a(63), `"` + a(63) + `"`},
		{"65 bytes, cut", a(65), `"` + a(64) + `"… (65 bytes)`},
		{"64 bytes ending in a 2-byte rune, whole", a(62) + "é", `"` + a(62) + `é"`},
		{"64 bytes ending in a 4-byte rune, whole", a(60) + "😀", `"` + a(60) + `😀"`},
		{"2-byte rune on bytes 63..64", a(63) + "é", `"` + a(63) + `"… (65 bytes)`},
		{"3-byte rune on bytes 62..64", a(62) + "€" + "b", `"` + a(62) + `"… (66 bytes)`},
		{"3-byte rune on bytes 63..65", a(63) + "€", `"` + a(63) + `"… (66 bytes)`},
		{"4-byte rune on bytes 61..64", a(61) + "😀", `"` + a(61) + `"… (65 bytes)`},
		{"2-byte rune ending at byte 63", a(62) + "é" + "b", `"` + a(62) + `é"… (65 bytes)`},
		{"a rune starting at byte 64", a(64) + "é", `"` + a(64) + `"… (66 bytes)`},
		{"only 2-byte runes", strings.Repeat("é", 40), `"` + strings.Repeat("é", 32) + `"… (80 bytes)`},
	} {
		opts := memOptions()
		opts.Queues = []string{c.queue, c.queue}
		eng, err := api.Open(t.Context(), opts)
		if eng != nil {
			eng.Close(t.Context())
		}
		oe := wantOptionError(t, c.name, err, "Options.Queues[1]")
		if oe.Value != c.queue {
			t.Fatalf("%s: Value %q, want the duplicate", c.name, oe.Value)
		}
		got := err.Error()
		if want := "quire: Options.Queues[1] = " + c.want + ": "; !strings.HasPrefix(got, want) {
			t.Errorf("%s:\n got %q\nwant it to start %q", c.name, got, want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: %q is not valid UTF-8", c.name, got)
		}
	}
	// No rune starts in the first 65 bytes: the cut keeps nothing of the
	// value rather than split a byte sequence (or run before its start).
	bad := strings.Repeat("\x80", 65)
	opts := memOptions()
	opts.Queues = []string{bad}
	eng, err := api.Open(t.Context(), opts)
	if eng != nil {
		eng.Close(t.Context())
	}
	wantOptionError(t, "not UTF-8", err, "Options.Queues[0]")
	if got, want := err.Error(), `quire: Options.Queues[0] = ""… (65 bytes): `; !strings.HasPrefix(got, want) {
		t.Errorf("not UTF-8:\n got %q\nwant it to start %q", got, want)
	}
}
