package scheduler

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Errors of the attempt scope.
var (
	// ErrScopeClosed refuses a registration once the attempt reached its
	// scope's disposal point (DL-36), whether or not the scope held
	// anything.
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
//
// The scope is sealed when the owner reaches its disposal point
// ([Scope.seal]): from then on it refuses registrations, and the api
// refuses attempt-local values through [Scope.IfOpen], so that nothing a
// goroutine left behind adds later escapes the one close and the one
// release of DL-36. A scope that was empty then is closed by the seal
// itself: it holds nothing to close, and attempts that never touch their
// scope pay only for setting the flags.
type Scope struct {
	mu    sync.Mutex
	keys  []string
	items map[string]io.Closer
	// sealed is set at the disposal point, closed once the resources are
	// taken for closing (or at the seal, for an empty scope).
	sealed bool
	closed bool
}

// Register adds r under key. It fails once the scope is sealed or closed
// (wrapping [ErrScopeClosed]), for an empty key, a nil r, a key already
// held or more than [ScopeResourcesMax] resources.
func (s *Scope) Register(key string, r io.Closer) error {
	if key == "" || r == nil {
		return fmt.Errorf("scheduler: attempt scope: key %q with resource %v: both are required", key, r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.sealed || s.closed:
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

// IfOpen runs f and reports true if the scope is not yet sealed or
// closed, holding the seal off until f returns; otherwise it reports false
// without running f. The api stores attempt-local values through it, so
// that a value is either stored before the seal, and released by the
// owner (DL-36 step 3), or refused. f must not call back into the scope.
func (s *Scope) IfOpen(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sealed || s.closed {
		return false
	}
	f()
	return true
}

// seal marks the attempt's scope disposal point and reports whether the
// scope holds nothing to close; an empty scope is closed by it (DL-36
// step 4 has nothing to do). The owner seals when it reaches the scope
// step with the execution returned, and when the loop abandons every
// attempt ([Runner.abandonAll]): in both cases nothing added later would
// ever be closed or released.
func (s *Scope) seal() (empty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed = true
	if len(s.keys) == 0 {
		s.closed = true
	}
	return len(s.keys) == 0
}

// empty is [Scope.seal] under the name the owner's call sites use: each of
// them is a disposal point, so asking is sealing.
func (s *Scope) empty() bool { return s.seal() }

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
