package api_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quire-dev/quire/api"
	"github.com/quire-dev/quire/journal/record"
)

// JB-1, DL-4: one Backoff option value, kept in a variable and given to
// Handle and to concurrent Enqueue calls, is only read by them. The option
// used to complete its policy's defaults into the variable it captured on
// every use, a data race between the calls (reported by go test -race) on
// the policy every job of the handler then read.
func TestJB1_DL4_BackoffOptionSharedByConcurrentCalls(t *testing.T) {
	b := setup(t, nil)
	retry := api.Backoff(api.BackoffPolicy{Kind: api.BackoffFixed, Base: 2 * time.Second})
	if err := api.Handle(b.eng, "fail", func(context.Context, *api.Delivery, msg) error {
		return errors.New("down")
	}, retry); err != nil {
		t.Fatal(err)
	}
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := b.eng.Enqueue(b.ctx, "fail", msg{N: i}, retry, api.MaxAttempts(2))
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	b.start()
	b.idle()
	retries := 0
	for _, r := range b.records() {
		if rs, ok := r.Body.(*record.AttemptRetryScheduled); ok {
			retries++
			if rs.DelayNanos != int64(2*time.Second) {
				t.Errorf("job %s: retry delay %v, want the option's fixed 2s", rs.JobID, time.Duration(rs.DelayNanos))
			}
		}
	}
	if retries != n {
		t.Fatalf("%d retries scheduled, want %d", retries, n)
	}
	for _, id := range ids {
		if j := b.wantStatus(id, api.JobPending); !j.AvailableAt.Equal(t0.Add(2 * time.Second)) {
			t.Fatalf("job %s available at %v, want %v", id, j.AvailableAt, t0.Add(2*time.Second))
		}
	}
	b.checkReplay()
}
