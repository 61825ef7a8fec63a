// Package allocs measures what a call allocates, for the tests that pin
// RL-6: one decode of hostile bytes allocates at most 32 × its input
// length + 1 MiB. The counters are the whole process's, so a test that
// uses them must not run in parallel with others.
package allocs

import (
	"runtime"
	"runtime/metrics"
)

// Bound is RL-6's allocation bound for one decode of n input bytes.
func Bound(n int) uint64 { return 32*uint64(n) + 1<<20 }

// Bytes returns the bytes allocated by the process while f runs, as the
// runtime.MemStats.TotalAlloc delta that RL-6's tests name.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// BytesFast is Bytes for fuzz bodies: the same cumulative heap counter,
// read through runtime/metrics without stopping the world, which keeps an
// execution (and the fuzzer's minimization) fast.
func BytesFast(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}
