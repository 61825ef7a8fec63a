package api

import (
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// idSource makes the engine's ids, ULIDs of the clock's millisecond and
// [Options.Entropy]. Ids are made on the engine's loop, where an id that
// cannot be made would panic and a repeated one breaks an invariant the
// machine checks (a job enqueued twice): either ends the process, for an
// input given in Options. So a clock outside the years ULIDs hold (before
// 1970, a zero time.Time) has its millisecond clamped to that range, and
// a source that fails (a short reader that ran dry) or gives the last id
// again (a constant reader) is not trusted for the rest of the run: a
// failed read gives zero entropy, and from then on an id that would not
// sort after the previous one of its millisecond is the previous one plus
// one. Until a source misbehaves its ids are exactly its own, so a sound
// source's (the default, sim's seeded ones) are what they always were.
// Uniqueness across runs still rests on the clock or the source: a
// constant source under a clock that stands still repeats the ids of the
// previous run.
type idSource struct {
	mu      sync.Mutex
	entropy io.Reader
	last    ulid.ULID
	issued  bool
	// degraded is set once the source failed or repeated itself.
	degraded bool
}

func (s *idSource) next(prefix string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := uint64(0)
	if m := now.UnixMilli(); m > 0 {
		ms = min(uint64(m), ulid.MaxTime())
	}
	id, err := ulid.New(ms, s.entropy)
	if err != nil {
		id = ulid.ULID{}
		_ = id.SetTime(ms) // in range: clamped above
	}
	if err != nil || s.issued && id == s.last {
		s.degraded = true
	}
	if s.degraded && s.issued && id.Time() == s.last.Time() && id.Compare(s.last) <= 0 {
		id = successor(s.last)
	}
	s.last, s.issued = id, true
	return prefix + id.String()
}

// successor returns the id after id in sort order: id + 1 as a 128-bit
// big-endian number.
func successor(id ulid.ULID) ulid.ULID {
	for i := len(id) - 1; i >= 0; i-- {
		id[i]++
		if id[i] != 0 {
			break
		}
	}
	return id
}
