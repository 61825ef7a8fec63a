package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// TestSD38_AwaitedShutdownKeepsWhatAnAbandonedOneLoses: an embedder must
// wait for Shutdown's result before main returns (SD-38). The same
// attempt, in flight when the program ends, is drained and settled once,
// under a journaled report, when the shutdown is awaited; when the
// program returns without it, nothing settles the attempt, no report is
// left, and the next Open counts the attempt as consumed and delivers it
// again (DL-44).
func TestSD38_AwaitedShutdownKeepsWhatAnAbandonedOneLoses(t *testing.T) {
	for _, awaited := range []bool{true, false} {
		t.Run(fmt.Sprint("awaited=", awaited), func(t *testing.T) {
			pick := func(ifAwaited, otherwise int) int {
				if awaited {
					return ifAwaited
				}
				return otherwise
			}
			b := setup(t, nil)
			started, release := blocking(t, b.eng)
			id := b.enqueue("block", msg{})
			b.start()
			<-started
			if awaited {
				res := make(chan error, 1)
				go func() { res <- b.eng.Shutdown(b.ctx) }()
				awaitInitiated(b.eng)
				close(release)
				if err := <-res; err != nil {
					t.Fatalf("shutdown: %v", err)
				}
				if rep := b.eng.ShutdownReport(); rep == nil || rep.Drained != 1 {
					t.Fatalf("report %+v, want one drained attempt", rep)
				}
			} else {
				abandonLikeACrash(b)
				close(release)
			}
			b.open()
			recs := b.records()
			if n, want := countKind(recs, record.KindShutdownReport), pick(1, 0); n != want {
				t.Fatalf("%d shutdown reports in the journal, want %d", n, want)
			}
			if n, want := countKind(recs, record.KindAttemptSucceeded), pick(1, 0); n != want {
				t.Fatalf("%d settlements before the reopened engine ran, want %d", n, want)
			}
			again := make(chan int, 1)
			if err := api.Handle(b.eng, "block", func(ctx context.Context, d *api.Delivery, in msg) error {
				again <- d.Attempt()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			b.start()
			b.idle()
			select {
			case n := <-again:
				if awaited || n != 2 {
					t.Fatalf("awaited=%t: the reopened engine ran attempt %d", awaited, n)
				}
			default:
				if !awaited {
					t.Fatal("DL-44: the attempt the abandoned engine lost was not delivered again")
				}
			}
			if j := b.wantStatus(id, api.JobCompleted); j.Consumed != pick(1, 2) {
				t.Fatalf("consumed %d", j.Consumed)
			}
			b.checkReplay()
		})
	}
}
