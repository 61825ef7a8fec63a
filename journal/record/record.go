package record

// Record is one journal entry as the engine sees it. Seq and At are
// assigned by the journal when the record is appended; a record submitted
// for appending leaves them zero.
type Record struct {
	Seq    uint64 // position in the global log, from 1, gap-free
	At     int64  // Unix nanoseconds, monotone along the log (RL-9)
	Stream string // the workflow, job or engine stream the record belongs to
	Body   Body
}

// Kind returns the kind of r's body, or 0 without one.
func (r Record) Kind() Kind {
	if r.Body == nil {
		return 0
	}
	return r.Body.Kind()
}

// Body is the typed payload of one kind. Every implementation is a pointer
// to a non-recursive struct of scalars, strings, byte slices and slices of
// scalars (spec/reliability.md §3.4), defined in this package.
type Body interface {
	Kind() Kind
	isBody()
}

// EngineStream is the reserved stream of the engine's own records (runs,
// shutdowns, queue pauses, diagnostics). Workflow and job ids never take
// this value: they carry a "wf_" or "job_" prefix.
const EngineStream = "engine"
