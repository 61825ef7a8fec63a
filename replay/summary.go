package replay

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/journal/record"
)

// JobSummary is the final status of a job that left [State], stored in the
// journal's terminal index in the same append as the record that ended it,
// so that Status of an old job is one point read (DESIGN §4).
type JobSummary struct {
	ID         string    `msgpack:"id"`
	Handler    string    `msgpack:"handler"`
	Queue      string    `msgpack:"queue"`
	Priority   uint8     `msgpack:"priority"`
	Status     JobStatus `msgpack:"status"`
	Attempts   int32     `msgpack:"attempts"`
	Consumed   int32     `msgpack:"consumed"`
	FinishedAt int64     `msgpack:"finished_at"`
	LastCode   string    `msgpack:"last_code,omitempty"`
	LastError  string    `msgpack:"last_error,omitempty"`
	WorkflowID string    `msgpack:"workflow_id,omitempty"`
	Seq        uint64    `msgpack:"seq"` // seq of the record that ended the job
}

// Summarize returns the summary of j as it stands.
func Summarize(j *Job) JobSummary {
	return JobSummary{
		ID: j.ID, Handler: j.Handler, Queue: j.Queue, Priority: j.Priority, Status: j.Status,
		Attempts: j.Attempts, Consumed: j.Consumed,
		LastCode: j.LastCode, LastError: j.LastError, WorkflowID: j.WorkflowID,
	}
}

// EncodeSummary encodes s for the terminal index.
func EncodeSummary(s JobSummary) ([]byte, error) {
	return msgpack.Marshal(&s)
}

// DecodeSummary decodes a terminal-index value, treating it as hostile.
func DecodeSummary(b []byte) (JobSummary, error) {
	var s JobSummary
	if err := record.Prescan(b, false); err != nil {
		return s, fmt.Errorf("replay: summary: %w", err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("replay: summary: %w: %v", record.ErrCorrupt, err)
	}
	// An empty map or a nil decodes without error; a summary always names
	// its job and one of the four statuses.
	if s.ID == "" || s.Status < JobPending || s.Status > JobBuried {
		return JobSummary{}, fmt.Errorf("replay: summary: %w: job id %q status %d", record.ErrCorrupt, s.ID, s.Status)
	}
	return s, nil
}
