package replay

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"sort"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/journal/record"
)

// snapshotVersion is the version of the snapshot encoding. A snapshot of
// another version is a cache miss, never an error.
const snapshotVersion = 1

// SnapshotJobsMax bounds the jobs one snapshot may hold when decoded.
const SnapshotJobsMax = 1 << 24

type snapshot struct {
	Version   int      `msgpack:"v"`
	LastSeq   uint64   `msgpack:"last_seq"`
	Completed int64    `msgpack:"completed"`
	Paused    []string `msgpack:"paused"`
	Jobs      jobList  `msgpack:"jobs"`
	Runs      runList  `msgpack:"runs"`
	// Unique lists the holder of each unique key, sorted by key. It cannot
	// be derived from Jobs: a job requeued while another job held its key
	// is active with the key but does not hold it (JB-5).
	Unique []uniqueHold `msgpack:"unique"`

	Workflows          workflowList `msgpack:"workflows"`
	Expiries           expiryList   `msgpack:"expiries"`
	WorkflowsCompleted int64        `msgpack:"workflows_completed"`
	WorkflowsCancelled int64        `msgpack:"workflows_cancelled"`
}

type workflowList []Workflow

type expiryList []Expiry

type uniqueHold struct {
	Key string `msgpack:"key"`
	ID  string `msgpack:"id"`
}

type jobList []Job

type runList []Run

// Encode returns the canonical encoding of s: the same state always gives
// the same bytes (sorted ids, no map order), so it doubles as the input of
// [Digest].
func Encode(s *State) ([]byte, error) {
	snap := snapshot{
		Version: snapshotVersion, LastSeq: s.LastSeq,
		Completed: s.Completed, Runs: s.Runs, Expiries: s.Expiries,
		WorkflowsCompleted: s.WorkflowsCompleted, WorkflowsCancelled: s.WorkflowsCancelled,
	}
	for _, id := range s.WorkflowIDs() {
		snap.Workflows = append(snap.Workflows, *s.Workflows[id])
	}
	for q := range s.PausedQueues {
		snap.Paused = append(snap.Paused, q)
	}
	sort.Strings(snap.Paused)
	for _, id := range s.JobIDs() {
		snap.Jobs = append(snap.Jobs, *s.Jobs[id])
	}
	for k, id := range s.Unique {
		snap.Unique = append(snap.Unique, uniqueHold{Key: k, ID: id})
	}
	sort.Slice(snap.Unique, func(a, b int) bool { return snap.Unique[a].Key < snap.Unique[b].Key })
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(&snap); err != nil {
		return nil, fmt.Errorf("replay: encode snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// Digest returns the SHA-256 of the canonical encoding of s. Two states
// are equal for RL-7 when their digests are.
func Digest(s *State) [32]byte {
	b, err := Encode(s)
	if err != nil {
		// Encoding a State cannot fail: it holds only scalars, strings and
		// byte slices. Hash the error so a broken state never looks equal.
		return sha256.Sum256([]byte(err.Error()))
	}
	return sha256.Sum256(b)
}

// Decode rebuilds a State from an encoding made by [Encode]. The bytes are
// treated as hostile (RL-6): structural pre-scan, concrete types, unknown
// fields refused, lists appended as they are read.
func Decode(b []byte) (*State, error) {
	if err := record.Prescan(b, false); err != nil {
		return nil, fmt.Errorf("replay: snapshot: %w", err)
	}
	var snap snapshot
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(&snap); err != nil {
		return nil, fmt.Errorf("replay: snapshot: %w: %v", record.ErrCorrupt, err)
	}
	if snap.Version != snapshotVersion {
		return nil, fmt.Errorf("replay: snapshot version %d, want %d", snap.Version, snapshotVersion)
	}
	s := New()
	s.LastSeq, s.Completed = snap.LastSeq, snap.Completed
	for _, q := range snap.Paused {
		s.PausedQueues[q] = true
	}
	for i := range snap.Jobs {
		j := snap.Jobs[i]
		if _, dup := s.Jobs[j.ID]; dup || j.ID == "" {
			return nil, fmt.Errorf("replay: snapshot: %w: bad or duplicate job id %q", record.ErrCorrupt, j.ID)
		}
		s.Jobs[j.ID] = &j
		if j.Token != 0 {
			s.Tokens[j.Token] = j.ID
		}
	}
	for _, u := range snap.Unique {
		j, ok := s.Jobs[u.ID]
		if _, dup := s.Unique[u.Key]; dup || !ok || j.UniqueKey != u.Key || u.Key == "" ||
			(j.Status != JobPending && j.Status != JobProcessing) {
			return nil, fmt.Errorf("replay: snapshot: %w: bad unique key %q of job %q", record.ErrCorrupt, u.Key, u.ID)
		}
		s.Unique[u.Key] = u.ID
	}
	s.Runs = snap.Runs
	for i := range snap.Workflows {
		w := snap.Workflows[i]
		if _, dup := s.Workflows[w.ID]; dup || w.ID == "" {
			return nil, fmt.Errorf("replay: snapshot: %w: bad or duplicate workflow id %q", record.ErrCorrupt, w.ID)
		}
		s.Workflows[w.ID] = &w
		if w.IdempotencyKey != "" {
			s.Idempotency[w.IdempotencyKey] = w.ID
		}
	}
	s.Expiries = snap.Expiries
	s.WorkflowsCompleted, s.WorkflowsCancelled = snap.WorkflowsCompleted, snap.WorkflowsCancelled
	return s, nil
}

// decodeList reads a msgpack array of T, appending each element as it is
// decoded rather than pre-sizing the slice from the declared length, so a
// hostile length costs nothing (RL-6).
func decodeList[T any](dec *msgpack.Decoder, limit int, what string) ([]T, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: %d %s, limit %d", record.ErrCorrupt, n, what, limit)
	}
	var out []T
	for i := 0; i < n; i++ {
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (l *jobList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Job](dec, SnapshotJobsMax, "jobs")
	return err
}

func (l *runList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Run](dec, RunsKeptMax, "runs")
	return err
}

func (l *workflowList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Workflow](dec, SnapshotJobsMax, "workflows")
	return err
}

func (l *expiryList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Expiry](dec, SnapshotJobsMax, "expiries")
	return err
}
