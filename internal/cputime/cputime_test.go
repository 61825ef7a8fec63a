package cputime

import "testing"

// Process never goes backwards, and work moves it.
func TestProcessGrowsWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work, want > 0", before)
	}
	x := uint64(1)
	for Process() == before {
		for range 1 << 16 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if after := Process(); after < before {
		t.Fatalf("CPU time went backwards: %v then %v (x=%d)", before, after, x)
	}
}
