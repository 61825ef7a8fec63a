package scheduler

import (
	"bytes"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// A mailbox hands values over oldest first, leaves a note whenever it holds
// something not yet taken, and no note once it is empty.
func TestMailboxNotesAndOrder(t *testing.T) {
	b := newMailbox[int]()
	noted := func() bool {
		select {
		case <-b.note:
			return true
		default:
			return false
		}
	}
	if noted() {
		t.Fatal("an empty box has a note")
	}
	for i := range 5 {
		b.put(i)
	}
	if !noted() {
		t.Fatal("no note after puts")
	}
	got := b.take(nil, 3)
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("take(3) = %v, want [0 1 2]", got)
	}
	// Two values are left: the loop must come back for them.
	if !noted() {
		t.Fatal("no note for the values take left")
	}
	b.put(5)
	got = b.take(got[:0], 0)
	if !slices.Equal(got, []int{3, 4, 5}) {
		t.Fatalf("take(all) = %v, want [3 4 5]", got)
	}
	if noted() {
		t.Fatal("a note is left after the box was emptied")
	}
	b.put(6)
	if !noted() {
		t.Fatal("no note after a put into the emptied box")
	}
	b.put(7)
	if got = b.take(got[:0], 1); !slices.Equal(got, []int{6}) {
		t.Fatalf("take(1) = %v, want [6]", got)
	}
	// One value is left: a put would leave no note for it, so take does.
	if !noted() {
		t.Fatal("no note for the one value take left")
	}
}

// inExecute counts goroutines inside Runner.execute.
func inExecute() int {
	buf := make([]byte, 8<<20)
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("scheduler.(*Runner).execute("))
}

// An execution's goroutine is free as soon as its handler returns, even
// while the loop is busy and cannot take its result yet: it does not wait
// on its goroutine to hand the result over. (Waiting, a burst whose
// results came faster than the loop took them held one goroutine per
// result, each with a stack of its own.)
func TestExecutionDoesNotWaitForTheLoopToTakeItsResult(t *testing.T) {
	const n = 3 * resultsPerPass
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "j" + strconv.Itoa(i+1)
	}
	b := newResultsBundle(t, false, n, n, ids...)
	b.dispatch(t)
	b.waitFor(t, "all attempts launched", func() bool { return len(b.r.attempts) == n })

	release := b.holdLoop(t) // while every handler returns
	for _, id := range ids {
		close(b.block[id])
	}
	b.r.execWG.Wait() // every execution has returned from its handler
	// Each now posts its result; the loop takes none while it is held.
	posted := func() int {
		b.r.results.mu.Lock()
		defer b.r.results.mu.Unlock()
		return len(b.r.results.vals) - b.r.results.head
	}
	for i := 0; i < 100_000 && posted() < n; i++ {
		runtime.Gosched()
	}
	if posted() == n {
		// Their goroutines are on their way out of execute.
		for i := 0; i < 1_000_000 && inExecute() > 0; i++ {
			runtime.Gosched()
		}
	}
	stuck := inExecute()
	release()
	if stuck > 0 {
		t.Fatalf("%d of %d executions still wait on their goroutines for the busy loop to take their results", stuck, n)
	}
	b.waitFor(t, "drain", b.drained)
	if got := count(flatKinds(b.app.kinds()[b.setupAt:]), "attempt_succeeded"); got != n {
		t.Fatalf("%d attempts succeeded, want %d", got, n)
	}
}

// flatKinds joins the kinds of several appends.
func flatKinds(appends [][]string) []string {
	var all []string
	for _, k := range appends {
		all = append(all, k...)
	}
	return all
}

// A box the loop never quite empties keeps its order and does not grow:
// each round puts two values and takes two, one round behind.
func TestMailboxStaysSmallWhenNeverEmptied(t *testing.T) {
	b := newMailbox[int]()
	b.put(0)
	next, want := 1, 0
	var got []int
	for range 10_000 {
		b.put(next)
		b.put(next + 1)
		next += 2
		got = b.take(got[:0], 2)
		for _, v := range got {
			if v != want {
				t.Fatalf("took %d, want %d", v, want)
			}
			want++
		}
	}
	if c := cap(b.vals); c > 16 {
		t.Fatalf("the box holds %d values and has grown to a capacity of %d", len(b.vals)-b.head, c)
	}
}
