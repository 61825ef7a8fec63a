package scheduler

import (
	"strings"
	"testing"
)

// DL-36: the settlement's text of cleanup failures is bounded like any
// failure message (FailureMessageBytesMax): the first failure's own text
// is what gets cut, every code stays, and a failure's own message comes
// first and is never cut to make room for them.
func TestDL36_CleanupMessageIsBounded(t *testing.T) {
	codes := []string{CodeTerminationCleanupFailed, CodeResourceReleasePanicked, CodeScopeCleanupFailed}
	long := strings.Repeat("é", FailureMessageBytesMax) // 2 bytes a rune: cuts land on rune boundaries
	for _, n := range []int{FailureMessageBytesMax, 200} {
		got := cleanupMessage(codes, long, n)
		wantHead := "attempt cleanup failed: " + CodeTerminationCleanupFailed + ": éé"
		wantTail := " (also " + CodeResourceReleasePanicked + ", " + CodeScopeCleanupFailed + ")"
		if len(got) > n || n-len(got) > 1 || !strings.HasPrefix(got, wantHead) || !strings.HasSuffix(got, wantTail) {
			t.Fatalf("n=%d: %d bytes %q", n, len(got), got)
		}
	}
	if got := cleanupMessage(codes, long, 10); len(got) > 10 {
		t.Fatalf("n=10: %d bytes %q", len(got), got)
	}
	// With room for the separator but not one byte of the text, the text
	// and its separator are left out together.
	head := "attempt cleanup failed: " + CodeTerminationCleanupFailed
	tail := " (also " + CodeResourceReleasePanicked + ", " + CodeScopeCleanupFailed + ")"
	if got := cleanupMessage(codes, long, len(head)+len(": ")+len(tail)); got != head+tail {
		t.Fatalf("no room for the text: %q, want %q", got, head+tail)
	}
	if got, want := withCleanup("boom", codes[2:], "close \"r\": gone"), `boom; attempt cleanup failed: DELIVERY_SCOPE_CLEANUP_FAILED: close "r": gone`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	own := strings.Repeat("m", 2*FailureMessageBytesMax)
	if got := withCleanup(own, codes, "x"); got != own[:FailureMessageBytesMax] {
		t.Fatalf("a full message of its own: %d bytes, ends %q", len(got), got[len(got)-20:])
	}
	got := withCleanup(own[:FailureMessageBytesMax-100], codes, long)
	if len(got) > FailureMessageBytesMax || !strings.HasPrefix(got, own[:FailureMessageBytesMax-100]+"; attempt cleanup failed: ") {
		t.Fatalf("%d bytes, ends %q", len(got), got[FailureMessageBytesMax-100:])
	}
}
