package deadlines

import (
	"testing"
	"time"
)

// t0 is the origin of the spec's timelines: "t = 0", "S = 0".
var t0 = time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC)

// dur parses a Go duration such as "29.53125s" exactly (ParseDuration uses
// integer arithmetic for the fraction).
func dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ts returns the instant t0 + s, e.g. ts("-10s") or ts("81.25ms").
func ts(s string) time.Time { return t0.Add(dur(s)) }

// wantTime fails the test at once if got is not the instant want.
func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = t0%+v, want t0%+v", what, got.Sub(t0), want.Sub(t0))
	}
}

// wantDur fails the test at once if got != want.
func wantDur(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}
