package api

import "github.com/quire-dev/quire/journal"

// JournalOf exposes an engine's journal to tests in package api_test.
func JournalOf(e *Engine) *journal.Journal { return e.j }
