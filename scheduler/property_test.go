package scheduler

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// machineModel drives a Machine with random inputs, crashes included, and
// checks after every step that live state equals its replay (RL-7), that
// every token settles at most once (RL-10) and that Dispatch is work
// conserving and ordered (JB-2, JB-8).
type machineModel struct {
	b       *testBundle
	now     time.Time
	open    []uint64        // tokens started and not settled in this run
	settled map[uint64]bool // tokens settled, over all runs
	revoked []uint64        // tokens a crash left open
	workers int
}

var (
	queues   = []string{"default", "mail", "bulk"}
	handlers = []string{"h", "h2", "late"}
)

func (mm *machineModel) restart(t *rapid.T, init []record.Record) {
	b := setup(t, init, workers(mm.workers), func(c *Config) { c.QueueOrder = []string{"mail"} })
	b.unregistered["late"] = true
	b.pick = func(n int) int { return rapid.IntRange(0, n-1).Draw(t, "pick") }
	if mm.b != nil {
		b.ids = mm.b.ids
	}
	mm.b = b
	mm.b.recover(mm.now)
}

func (mm *machineModel) check(t *rapid.T) {
	mm.b.replayed()
	if mm.b.m.Inflight() != len(mm.open) {
		t.Fatalf("inflight %d, open tokens %d", mm.b.m.Inflight(), len(mm.open))
	}
}

// checkDispatch verifies the outcome of a Dispatch at now against the
// state: whatever is still eligible must not outrank a started job of its
// queue, and with a free worker nothing eligible may remain.
func (mm *machineModel) checkDispatch(t *rapid.T, starts []*Start) {
	st := mm.b.m.State()
	for _, id := range st.JobIDs() {
		j := st.Jobs[id]
		if j.Status != replay.JobPending || j.AvailableAt > mm.now.UnixNano() || st.PausedQueues[j.Queue] || mm.b.unregistered[j.Handler] {
			continue
		}
		if mm.b.m.Inflight() < mm.workers {
			t.Fatalf("job %s eligible and not started with %d of %d workers busy", id, mm.b.m.Inflight(), mm.workers)
		}
		for _, s := range starts {
			if s.Job.Queue == j.Queue && (j.Priority > s.Job.Priority || (j.Priority == s.Job.Priority && j.EnqueueSeq < s.Job.EnqueueSeq)) {
				t.Fatalf("started %s (p%d seq %d) before %s (p%d seq %d)", s.Job.ID, s.Job.Priority, s.Job.EnqueueSeq, id, j.Priority, j.EnqueueSeq)
			}
		}
	}
}

func TestRL7_MachineLiveEqualsReplay(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		mm := &machineModel{now: t0, settled: map[uint64]bool{}, workers: rapid.IntRange(1, 4).Draw(t, "workers")}
		mm.restart(t, nil)
		pickID := func() string {
			ids := append(mm.b.m.State().JobIDs(), "job_none")
			return rapid.SampledFrom(ids).Draw(t, "id")
		}
		t.Repeat(map[string]func(*rapid.T){
			"": func(t *rapid.T) { mm.check(t) },
			"enqueue": func(t *rapid.T) {
				r := req(rapid.SampledFrom(handlers).Draw(t, "handler"))
				r.Queue = rapid.SampledFrom(queues).Draw(t, "queue")
				r.Priority = rapid.Uint8Range(0, 3).Draw(t, "priority")
				r.Delay = time.Duration(rapid.IntRange(0, 3).Draw(t, "delay")) * time.Second
				r.Unique = rapid.Bool().Draw(t, "unique")
				r.Payload = []byte{rapid.ByteRange(0, 2).Draw(t, "payload")}
				r.Retry.MaxAttempts = rapid.Int32Range(1, 3).Draw(t, "max_attempts")
				if rapid.Bool().Draw(t, "jitter") {
					r.Retry.JitterRatio = 0.5
				}
				before := mm.b.m.State().Unique[UniqueKey(r.Handler, r.Payload)]
				d, id := mm.b.m.Enqueue(mm.now, r)
				mm.b.take(d)
				if r.Unique && before != "" && (id != before || !d.Empty()) {
					t.Fatalf("unique enqueue while %s holds the key gave %s and %v", before, id, kinds(d))
				}
			},
			"advance": func(t *rapid.T) {
				mm.now = mm.now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(t, "ms")) * time.Millisecond)
			},
			"timer": func(t *rapid.T) {
				if next, ok := mm.b.m.NextTimer(); ok && next.After(mm.now) {
					mm.now = next
				}
			},
			"dispatch": func(t *rapid.T) {
				starts := mm.b.dispatch(mm.now)
				for _, s := range starts {
					mm.open = append(mm.open, s.Token)
				}
				mm.checkDispatch(t, starts)
			},
			"settle": func(t *rapid.T) {
				if len(mm.open) == 0 {
					t.Skip("nothing open")
				}
				i := rapid.IntRange(0, len(mm.open)-1).Draw(t, "which")
				tok := mm.open[i]
				res := Result{Token: tok, Joined: true}
				switch rapid.IntRange(0, 3).Draw(t, "outcome") {
				case 0:
					for range rapid.IntRange(0, 2).Draw(t, "follow_ups") {
						res.FollowUps = append(res.FollowUps, req("h2"))
					}
				case 1:
					res.Failure = fail(Retryable)
				case 2:
					res.Failure = fail(Permanent)
				default:
					res.Failure = fail(Retryable)
					res.Failure.Release = true
				}
				id := mm.b.m.State().Tokens[tok]
				consumed := mm.b.job(id).Consumed
				d := mm.b.settle(mm.now, res)
				if d.Records[0].Kind() == record.KindAttemptReleased {
					if j := mm.b.job(id); j.Consumed != consumed-1 {
						t.Fatalf("release left consumed %d after %d", j.Consumed, consumed)
					}
				}
				mm.open = slices.Delete(mm.open, i, i+1)
				mm.settled[tok] = true
			},
			"settle_stale": func(t *rapid.T) {
				var stale []uint64
				for tok := range mm.settled {
					stale = append(stale, tok)
				}
				stale = append(stale, mm.revoked...)
				stale = append(stale, 0, mm.b.m.NextSeq())
				slices.Sort(stale)
				tok := rapid.SampledFrom(stale).Draw(t, "token")
				d, err := mm.b.m.Settle(mm.now, Result{Token: tok})
				refused(t, d, err, ErrStaleToken)
			},
			"bury": func(t *rapid.T) {
				id := pickID()
				var status replay.JobStatus
				if j, ok := mm.b.m.State().Jobs[id]; ok {
					status = j.Status
				}
				d, err := mm.b.m.Bury(mm.now, id, "", "buried by operator")
				switch {
				case status == 0:
					refused(t, d, err, ErrNotFound)
				case status != replay.JobPending:
					refused(t, d, err, ErrState)
				case err != nil:
					t.Fatalf("Bury of a pending job: %v", err)
				default:
					mm.b.take(d)
				}
			},
			"requeue": func(t *rapid.T) {
				id := pickID()
				var status replay.JobStatus
				if j, ok := mm.b.m.State().Jobs[id]; ok {
					status = j.Status
				}
				d, err := mm.b.m.Requeue(mm.now, id)
				switch {
				case status == 0:
					refused(t, d, err, ErrNotFound)
				case status != replay.JobBuried:
					refused(t, d, err, ErrState)
				case err != nil:
					t.Fatalf("Requeue of a buried job: %v", err)
				default:
					mm.b.take(d)
				}
			},
			"requeue_buried": func(t *rapid.T) {
				d, n := mm.b.m.RequeueBuried(mm.now, rapid.SampledFrom(queues).Draw(t, "queue"))
				mm.b.take(d)
				if n != len(d.Records) {
					t.Fatalf("RequeueBuried reported %d for %d records", n, len(d.Records))
				}
			},
			"pause": func(t *rapid.T) {
				q := rapid.SampledFrom(queues).Draw(t, "queue")
				was := mm.b.m.State().PausedQueues[q]
				d := mm.b.take(mm.b.m.PauseQueue(q))
				if was != d.Empty() {
					t.Fatalf("pause of %s (paused %v) decided %v", q, was, kinds(d))
				}
			},
			"resume": func(t *rapid.T) {
				q := rapid.SampledFrom(queues).Draw(t, "queue")
				was := mm.b.m.State().PausedQueues[q]
				d := mm.b.take(mm.b.m.ResumeQueue(q))
				if was == d.Empty() {
					t.Fatalf("resume of %s (paused %v) decided %v", q, was, kinds(d))
				}
			},
			"register": func(t *rapid.T) {
				delete(mm.b.unregistered, "late")
				mm.b.m.Unpark("late")
			},
			"crash": func(t *rapid.T) {
				// Every decided record was appended; open attempts are lost.
				mm.revoked = append(mm.revoked, mm.open...)
				mm.open = nil
				all := append(slices.Clone(mm.b.init), mm.b.recs...)
				mm.restart(t, all)
				for _, j := range mm.b.m.State().Jobs {
					if j.Status == replay.JobProcessing {
						t.Fatalf("job %s still processing after recovery", j.ID)
					}
					if j.Lost && j.Status == replay.JobPending && j.Consumed >= j.Retry.MaxAttempts {
						t.Fatalf("job %s lost with attempts exhausted and not buried", j.ID)
					}
				}
			},
		})
	})
}

// TestDL5_SeededJitterStaysAmongCandidates: whatever a seeded PickFunc
// returns, the recorded delay is one of the DL-5 candidates and
// available_at is the settlement instant plus that delay.
func TestDL5_SeededJitterStaysAmongCandidates(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		b := setup(t, nil)
		b.pick = func(n int) int { return rapid.IntRange(0, n-1).Draw(t, "pick") }
		b.recover(t0)
		r := req("h")
		r.Retry = record.RetryPolicy{MaxAttempts: 8, BaseNanos: int64(time.Second), MaxNanos: int64(5 * time.Second), JitterRatio: 0.2}
		id := b.enqueue(t0, r)
		now := t0
		for n := 1; n < 8; n++ {
			st := only(t, b.dispatch(now), id)
			d := b.settle(now, Result{Token: st.Token, Failure: fail(Retryable)})
			rs := d.Records[0].Body.(*record.AttemptRetryScheduled)
			cands := Policy(r.Retry).Candidates(n)
			if !slices.Contains(cands, time.Duration(rs.DelayNanos)) || rs.AvailableAt != now.UnixNano()+rs.DelayNanos {
				t.Fatalf("n=%d: delay %v not among %v", n, time.Duration(rs.DelayNanos), cands)
			}
			now = time.Unix(0, rs.AvailableAt).UTC()
		}
		b.replayed()
	})
}
