package scheduler

import (
	"errors"
	"io"
	"testing"
)

type scopeCloser func() error

func (c scopeCloser) Close() error { return c() }

// DL-36: the owner seals the scope at its disposal point. From then on a
// registration and an attempt-local value are refused, even before the
// resources already held are closed, and those still close exactly once.
// An empty scope is closed by the seal itself.
func TestDL36_SealRefusesBeforeClose(t *testing.T) {
	var s Scope
	closes := 0
	if err := s.Register("conn", scopeCloser(func() error { closes++; return nil })); err != nil {
		t.Fatal(err)
	}
	if s.seal() {
		t.Fatal("a scope holding a resource reported empty")
	}
	if err := s.Register("late", io.NopCloser(nil)); !errors.Is(err, ErrScopeClosed) {
		t.Fatalf("Register after the seal: %v, want ErrScopeClosed", err)
	}
	if s.IfOpen(func() { t.Fatal("IfOpen ran after the seal") }) {
		t.Fatal("IfOpen reported open after the seal")
	}
	if _, ok := s.Lookup("conn"); !ok {
		t.Fatal("a sealed scope no longer resolves what it holds before closing it")
	}
	if err, panicked := s.close(); err != nil || panicked || closes != 1 {
		t.Fatalf("close: %v %v, %d closes", err, panicked, closes)
	}
	if err, _ := s.close(); err != nil || closes != 1 {
		t.Fatalf("second close: %v, %d closes", err, closes)
	}

	var empty Scope
	ran := false
	if !empty.IfOpen(func() { ran = true }) || !ran {
		t.Fatal("IfOpen refused an open scope")
	}
	if !empty.seal() {
		t.Fatal("an empty scope reported non-empty")
	}
	if err := empty.Register("late", io.NopCloser(nil)); !errors.Is(err, ErrScopeClosed) {
		t.Fatalf("Register on a sealed empty scope: %v, want ErrScopeClosed", err)
	}
	if _, ok := empty.Lookup("late"); ok {
		t.Fatal("a closed scope resolves")
	}
}
