package api

import "github.com/quire-dev/quire/journal"

// SimJournal returns the journal an engine appends to, for the sim
// package's oracle and for tests that audit what the engine acknowledged.
// Callers must only read it (Scan, Get, LastSeq) and must not close it; it
// is valid until the engine is closed. It is not meant for production use.
func SimJournal(e *Engine) *journal.Journal { return e.j }
