// Package scheduler decides what the engine does and does it.
//
// The [Machine] is pure: from the replayed state, the current instant and
// an input (an enqueue, a dispatch, a signal, an attempt's result, a timer
// coming due) it returns a [Decision]: the records to append and the
// actions to run once the append is acknowledged. It reads no clock, starts
// no goroutine and depends on no map order, so a journal and a sequence of
// instants give the same decisions in every run.
//
// The [Runner] owns everything else: one loop goroutine that feeds the
// Machine, a bounded pool of workers for attempts, one real timer for the
// earliest instant of a timer heap, and the appends to the journal through
// the small [Appender] interface the journal satisfies. Nothing is acted on
// before its records are acknowledged (RL-1): an attempt's handler runs
// only after its attempt_started is synced (DL-7), and exactly one
// settlement ends it, fenced by its token (RL-10). Callers reach the state
// through [Runner.Submit] and [Runner.Do], which run on the loop.
package scheduler
