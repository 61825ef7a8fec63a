package api

import "github.com/quire-dev/quire/journal"

// JournalOf exposes an engine's journal to tests in package api_test.
func JournalOf(e *Engine) *journal.Journal { return e.j }

// SetAfterAppendHook installs f as the after-append hook for the engines
// opened afterwards; nil removes it. Tests using it must not run in parallel.
func SetAfterAppendHook(f func(seqs []uint64)) { testHookAfterAppend = f }
