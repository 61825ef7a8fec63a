package api

import (
	"context"
	"sort"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/scheduler"
)

// SimJournal returns the journal an engine appends to, for the sim
// package's oracle and for tests that audit what the engine acknowledged.
// Callers must only read it (Scan, Get, LastSeq) and must not close it; it
// is valid until the engine is closed. It is not meant for production use.
func SimJournal(e *Engine) *journal.Journal { return e.j }

// SimLive returns the ids of the jobs and workflows the engine holds in
// memory, each sorted, read on the engine's loop after everything decided
// before the call is acknowledged. The sim oracle checks that they are
// exactly the unfinished ones the journal shows (finished work lives only
// in the journal's terminal index). It is not meant for production use.
func SimLive(ctx context.Context, e *Engine) (jobs, workflows []string, err error) {
	if err := checkContext(ctx); err != nil {
		return nil, nil, err
	}
	err = e.submit(ctx, func(m *scheduler.Machine, now time.Time) (scheduler.Decision, error) {
		st := m.State()
		jobs = make([]string, 0, len(st.Jobs))
		for id := range st.Jobs {
			jobs = append(jobs, id)
		}
		workflows = make([]string, 0, len(st.Workflows))
		for id := range st.Workflows {
			workflows = append(workflows, id)
		}
		return scheduler.Decision{}, nil
	})
	sort.Strings(jobs)
	sort.Strings(workflows)
	return jobs, workflows, err
}

// SimDeadlineTurn makes every on-deadline handler of an engine opened with
// o call turn first, on the handler's own goroutine, with a key naming the
// run: "deadline/<workflow id>/<expiry seq>". The handler runs when turn
// returns, whatever ctx says by then. The sim package parks the handler
// there until the world wakes it at a quiescent point, so that it never
// runs beside an attempt and its records come in the same order on every
// run of a seed (RL-8). It is not meant for production use.
func SimDeadlineTurn(o *Options, turn func(ctx context.Context, key string)) {
	o.deadlineTurn = turn
}
