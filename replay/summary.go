package replay

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/quire-dev/quire/internal/mpwrite"
	"github.com/quire-dev/quire/journal/record"
)

// JobSummary is the final status of a job that left [State], stored in the
// journal's terminal index in the same append as the record that ended it,
// so that Status of an old job is one point read (DESIGN §4).
type JobSummary struct {
	ID       string    `msgpack:"id"`
	Handler  string    `msgpack:"handler"`
	Queue    string    `msgpack:"queue"`
	Priority uint8     `msgpack:"priority"`
	Status   JobStatus `msgpack:"status"`
	Attempts int32     `msgpack:"attempts"`
	Consumed int32     `msgpack:"consumed"`
	// MaxAttempts is the job's limit (its retry policy's). Entries written
	// before the limit was recorded lack the key and decode to 0.
	MaxAttempts int32  `msgpack:"max_attempts,omitempty"`
	FinishedAt  int64  `msgpack:"finished_at"`
	LastCode    string `msgpack:"last_code,omitempty"`
	LastError   string `msgpack:"last_error,omitempty"`
	WorkflowID  string `msgpack:"workflow_id,omitempty"`
	Seq         uint64 `msgpack:"seq"` // seq of the record that ended the job
}

// Summarize returns the summary of j as it stands.
func Summarize(j *Job) JobSummary {
	return JobSummary{
		ID: j.ID, Handler: j.Handler, Queue: j.Queue, Priority: j.Priority, Status: j.Status,
		Attempts: j.Attempts, Consumed: j.Consumed, MaxAttempts: j.Retry.MaxAttempts,
		LastCode: j.LastCode, LastError: j.LastError, WorkflowID: j.WorkflowID,
	}
}

// EncodeSummary encodes s for the terminal index, once per finished job:
// the bytes msgpack.Marshal(&s) gives (keys in field order, empty
// omitempty fields left out, fixed-width numbers), appended by hand.
func EncodeSummary(s JobSummary) ([]byte, error) {
	// The map's length, and the bytes it takes, so that one allocation
	// of the right size holds them: one is made per finished job.
	n := 9
	size := summaryFixedBytes + mpwrite.StringLen(s.ID) + mpwrite.StringLen(s.Handler) + mpwrite.StringLen(s.Queue)
	for _, kv := range [...][2]string{{"last_code", s.LastCode}, {"last_error", s.LastError}, {"workflow_id", s.WorkflowID}} {
		if kv[1] != "" {
			n++
			size += mpwrite.StringLen(kv[0]) + mpwrite.StringLen(kv[1])
		}
	}
	if s.MaxAttempts != 0 {
		n++
		size += mpwrite.StringLen("max_attempts") + 5
	}
	b := make([]byte, 0, size)
	b = mpwrite.AppendMapLen(b, n)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "id"), s.ID)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "handler"), s.Handler)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "queue"), s.Queue)
	b = mpwrite.AppendUint8(mpwrite.AppendString(b, "priority"), s.Priority)
	b = mpwrite.AppendUint8(mpwrite.AppendString(b, "status"), uint8(s.Status))
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "attempts"), s.Attempts)
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "consumed"), s.Consumed)
	if s.MaxAttempts != 0 {
		b = mpwrite.AppendInt32(mpwrite.AppendString(b, "max_attempts"), s.MaxAttempts)
	}
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "finished_at"), s.FinishedAt)
	if s.LastCode != "" {
		b = mpwrite.AppendString(mpwrite.AppendString(b, "last_code"), s.LastCode)
	}
	if s.LastError != "" {
		b = mpwrite.AppendString(mpwrite.AppendString(b, "last_error"), s.LastError)
	}
	if s.WorkflowID != "" {
		b = mpwrite.AppendString(mpwrite.AppendString(b, "workflow_id"), s.WorkflowID)
	}
	return mpwrite.AppendUint64(mpwrite.AppendString(b, "seq"), s.Seq), nil
}

// summaryFixedBytes is what EncodeSummary always writes besides the
// id, handler and queue: the map's header (at most 13 keys, one byte),
// the nine keys written for every summary (fixstrs, a byte of header
// each) and the six fixed-width numbers among their values.
const summaryFixedBytes = 1 +
	9 + len("id"+"handler"+"queue"+"priority"+"status"+"attempts"+"consumed"+"finished_at"+"seq") +
	2 + 2 + 5 + 5 + 9 + 9 // priority, status: uint8; attempts, consumed: int32; finished_at, seq: 64 bits

// DecodeSummary decodes a terminal-index value, treating it as hostile.
func DecodeSummary(b []byte) (JobSummary, error) {
	var s JobSummary
	if err := decodeIndexValue(b, &s); err != nil {
		return s, err
	}
	// An empty map or a nil decodes without error; a summary always names
	// its job and one of the four statuses.
	if s.ID == "" || s.Status < JobPending || s.Status > JobBuried {
		return JobSummary{}, fmt.Errorf("replay: summary: %w: job id %q status %d", record.ErrCorrupt, s.ID, s.Status)
	}
	return s, nil
}

// decodeIndexValue decodes a terminal-index value into v, treating the bytes
// as hostile (RL-6).
func decodeIndexValue(b []byte, v any) error {
	if err := record.Prescan(b, false); err != nil {
		return fmt.Errorf("replay: index value: %w", err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("replay: index value: %w: %v", record.ErrCorrupt, err)
	}
	return nil
}

// IndexKind is what a terminal-index value describes. Job, workflow and
// idempotency entries share one key space (t/<id>), so a point read under
// an id of another kind finds an entry of that other kind.
type IndexKind uint8

// Terminal-index value kinds.
const (
	IndexJob         IndexKind = iota + 1 // a [JobSummary]
	IndexWorkflow                         // a [WorkflowSummary]
	IndexIdempotency                      // an [Idempotent]
)

func (k IndexKind) String() string {
	switch k {
	case IndexJob:
		return "job"
	case IndexWorkflow:
		return "workflow"
	case IndexIdempotency:
		return "idempotency key"
	}
	return "unknown"
}

// KindOfIndexValue tells which kind of terminal-index value b is from the
// keys of its map alone, treating b as hostile (RL-6): every encoder writes
// its kind's marker key, and no other kind has it. A job summary has
// "handler", a workflow summary "definition_hash", an idempotency entry
// "workflow_id" and no "id" (a job summary may have "workflow_id" too).
// So a lookup by id can tell an entry of another kind (no such job, no such
// workflow) from a damaged entry of its own kind, which its strict decoder
// still refuses with [record.ErrCorrupt]. Bytes that are not a map with
// string keys, or that carry the markers of no kind or of two, are corrupt.
func KindOfIndexValue(b []byte) (IndexKind, error) {
	if err := record.Prescan(b, false); err != nil {
		return 0, fmt.Errorf("replay: index value: %w", err)
	}
	corrupt := func(why string) (IndexKind, error) {
		return 0, fmt.Errorf("replay: index value: %w: %s", record.ErrCorrupt, why)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := dec.DecodeMapLen()
	if err != nil || n < 0 {
		return corrupt("not a map")
	}
	var id, handler, defHash, workflowID bool
	for range n {
		if c, err := dec.PeekCode(); err != nil || !msgpcode.IsString(c) {
			return corrupt("a key is not a string")
		}
		k, err := dec.DecodeString()
		if err != nil {
			return corrupt("a key does not decode")
		}
		switch k {
		case "id":
			id = true
		case "handler":
			handler = true
		case "definition_hash":
			defHash = true
		case "workflow_id":
			workflowID = true
		}
		if err := dec.Skip(); err != nil {
			return corrupt("a value does not decode")
		}
	}
	idem := workflowID && !id
	switch {
	case handler && !defHash && !idem:
		return IndexJob, nil
	case defHash && !handler && !idem:
		return IndexWorkflow, nil
	case idem && !handler && !defHash:
		return IndexIdempotency, nil
	}
	return corrupt(fmt.Sprintf("keys of no single kind (id %v, handler %v, definition_hash %v, workflow_id %v)", id, handler, defHash, workflowID))
}

// WorkflowSummary is the final status of a workflow that left [State]
// (completed or cancelled), stored in the terminal index in the same
// append as the record that ended it (WF-21: terminal workflows stay
// queryable).
type WorkflowSummary struct {
	ID             string         `msgpack:"id"`
	Name           string         `msgpack:"name"`
	DefinitionHash string         `msgpack:"definition_hash"`
	Status         WorkflowStatus `msgpack:"status"`
	Step           int32          `msgpack:"step"`
	Steps          int32          `msgpack:"steps"`
	State          []byte         `msgpack:"state"` // public state
	StartedAt      int64          `msgpack:"started_at"`
	FinishedAt     int64          `msgpack:"finished_at"`
	DeadlineAt     int64          `msgpack:"deadline_at"`
	Error          string         `msgpack:"error,omitempty"`
	FailedAt       int64          `msgpack:"failed_at,omitempty"`
	IdempotencyKey string         `msgpack:"idempotency_key,omitempty"`
	ParentID       string         `msgpack:"parent_id,omitempty"`
	ParentStep     int32          `msgpack:"parent_step"`
	Seq            uint64         `msgpack:"seq"`
}

// SummarizeWorkflow returns the summary of w as it stands, with its public
// state.
func SummarizeWorkflow(w *Workflow) WorkflowSummary {
	pub, err := PublicState(w.State)
	if err != nil {
		pub = nil
	}
	return WorkflowSummary{
		ID: w.ID, Name: w.Name, DefinitionHash: w.DefinitionHash, Status: w.Status, Step: w.Step,
		Steps: w.Steps, State: pub, StartedAt: w.StartedAt, DeadlineAt: w.DeadlineAt, Error: w.Error,
		FailedAt: w.FailedAt, IdempotencyKey: w.IdempotencyKey, ParentID: w.ParentID, ParentStep: w.ParentStep,
	}
}

// EncodeWorkflowSummary encodes s for the terminal index.
func EncodeWorkflowSummary(s WorkflowSummary) ([]byte, error) { return msgpack.Marshal(&s) }

// DecodeWorkflowSummary decodes a terminal-index value of a workflow.
func DecodeWorkflowSummary(b []byte) (WorkflowSummary, error) {
	var s WorkflowSummary
	if err := decodeIndexValue(b, &s); err != nil {
		return s, err
	}
	if s.ID == "" || s.Status.String() == "unknown" {
		return WorkflowSummary{}, fmt.Errorf("replay: workflow summary: %w: id %q status %d", record.ErrCorrupt, s.ID, s.Status)
	}
	return s, nil
}

// IdempotencyPrefix prefixes the terminal-index ids of idempotency keys: the
// entry of key k is "idem:" + k, written with the workflow_started that
// used it, so a key stays reserved after its workflow left State (WF-14).
const IdempotencyPrefix = "idem:"

// Idempotent is the terminal-index value of an idempotency key.
type Idempotent struct {
	WorkflowID string `msgpack:"workflow_id"`
	Name       string `msgpack:"name"`
}

// EncodeIdempotent encodes v for the terminal index.
func EncodeIdempotent(v Idempotent) ([]byte, error) { return msgpack.Marshal(&v) }

// DecodeIdempotent decodes an idempotency-key index value.
func DecodeIdempotent(b []byte) (Idempotent, error) {
	var v Idempotent
	if err := decodeIndexValue(b, &v); err != nil {
		return v, err
	}
	if v.WorkflowID == "" {
		return Idempotent{}, fmt.Errorf("replay: idempotency entry: %w: no workflow id", record.ErrCorrupt)
	}
	return v, nil
}
