package replay

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/quire-dev/quire/journal/record"
)

// A drained backlog gives its room back: the state's maps, which keep the
// room of the most they ever held, are rebuilt once they hold a quarter
// of their peak, so that the heap after a million jobs drained is not
// what it was with them pending.
func TestDrainedStateGivesItsMapsRoomBack(t *testing.T) {
	const n = 100_000
	b := setup(t)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	apply := func(stream string, body record.Body) {
		if err := Apply(b.s, b.rec(stream, body)); err != nil {
			t.Fatal(err)
		}
	}
	id := func(i int) string { return fmt.Sprintf("job_%07d", i) }
	base := heap()
	for i := range n {
		apply(id(i), &record.JobEnqueued{JobID: id(i), Handler: "h", Queue: "default", AvailableAt: at(0), Retry: policy, UniqueKey: id(i)})
	}
	full := heap() - base
	for i := range n - 10 {
		tok := b.s.LastSeq + 1
		apply(id(i), b.startBody(id(i)))
		apply(id(i), &record.AttemptSucceeded{Outcome: out(id(i), tok)})
	}
	left := heap() - min(heap(), base)
	t.Logf("heap: %d bytes with %d jobs pending, %d with 10", full, n, left)
	if len(b.s.Jobs) != 10 || left > full/20 {
		t.Fatalf("%d jobs left holding %d bytes, %d held %d: the maps kept their room", len(b.s.Jobs), left, n, full)
	}
}
