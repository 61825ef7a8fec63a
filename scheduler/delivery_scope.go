package scheduler

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Errors of the attempt scope.
var (
	// ErrScopeClosed refuses a registration once the scope has closed.
	ErrScopeClosed = errors.New("scheduler: attempt scope is closed")
	// ErrScopeDuplicate refuses a second resource under one key.
	ErrScopeDuplicate = errors.New("scheduler: attempt scope already holds this key")
)

// ScopeResourcesMax bounds the resources one attempt scope holds.
const ScopeResourcesMax = 1024

// Scope holds the resources one attempt registered, keyed by name. The
// owner closes it exactly once, after the termination hooks and before
// the settlement, in reverse order of registration (DL-36), or withholds
// it while the execution goroutine has not returned (DL-37).
type Scope struct {
	mu     sync.Mutex
	keys   []string
	items  map[string]io.Closer
	closed bool
}

// Register adds r under key. It fails once the scope has closed, for an
// empty key, a nil r, a key already held or more than
// [ScopeResourcesMax] resources.
func (s *Scope) Register(key string, r io.Closer) error {
	if key == "" || r == nil {
		return fmt.Errorf("scheduler: attempt scope: key %q with resource %v: both are required", key, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w: register %q", ErrScopeClosed, key)
	case s.items[key] != nil:
		return fmt.Errorf("%w: %q", ErrScopeDuplicate, key)
	case len(s.keys) >= ScopeResourcesMax:
		return fmt.Errorf("scheduler: attempt scope holds %d resources, limit %d", len(s.keys), ScopeResourcesMax)
	}
	if s.items == nil {
		s.items = make(map[string]io.Closer)
	}
	s.items[key] = r
	s.keys = append(s.keys, key)
	return nil
}

// Lookup resolves the resource under key while the scope is open.
func (s *Scope) Lookup(key string) (io.Closer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	r, ok := s.items[key]
	return r, ok
}

// empty reports whether the scope holds nothing to close.
func (s *Scope) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys) == 0
}

// close closes every resource once, in reverse order of registration,
// and keeps going after a failure or a panic: it returns the joined
// errors and whether any Close panicked.
func (s *Scope) close() (err error, panicked bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	s.closed = true
	keys, items := s.keys, s.items
	s.keys, s.items = nil, nil
	s.mu.Unlock()
	var errs []error
	for i := len(keys) - 1; i >= 0; i-- {
		cerr, p := closeOne(items[keys[i]])
		if p {
			panicked = true
		}
		if cerr != nil {
			errs = append(errs, fmt.Errorf("close %q: %w", keys[i], cerr))
		}
	}
	return errors.Join(errs...), panicked
}

func closeOne(c io.Closer) (err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			err, panicked = fmt.Errorf("panic: %v", p), true
		}
	}()
	return c.Close(), false
}
