package replay

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/internal/mpwrite"
	"github.com/quire-dev/quire/journal/record"
)

// snapshotVersion is the version of the snapshot encoding. A snapshot of
// another version is a cache miss, never an error.
const snapshotVersion = 1

// ErrSnapshotOutdated marks a sound snapshot that this version does not
// use: one of another snapshot version, or one written before the state
// held something this version derives (a pending Delay's arming seq,
// [Workflow.DelaySeq]). Like a damaged snapshot it is a cache miss: the
// state is rebuilt from an older snapshot, or from seq 1, and the next
// snapshot written replaces it. Unlike one it is no sign of damage.
var ErrSnapshotOutdated = errors.New("replay: snapshot outdated")

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
	Unique uniqueList `msgpack:"unique"`

	Workflows          workflowList `msgpack:"workflows"`
	Expiries           expiryList   `msgpack:"expiries"`
	WorkflowsCompleted int64        `msgpack:"workflows_completed"`
	WorkflowsCancelled int64        `msgpack:"workflows_cancelled"`
}

type workflowList []Workflow

type expiryList []Expiry

type uniqueList []uniqueHold

type uniqueHold struct {
	Key string `msgpack:"key"`
	ID  string `msgpack:"id"`
}

type jobList []Job

type runList []Run

// snapshotOut is snapshot as Encode writes it: the same fields, tags and
// order, so the same bytes, with the jobs referenced rather than copied.
type snapshotOut struct {
	Version            int          `msgpack:"v"`
	LastSeq            uint64       `msgpack:"last_seq"`
	Completed          int64        `msgpack:"completed"`
	Paused             []string     `msgpack:"paused"`
	Jobs               jobPtrList   `msgpack:"jobs"`
	Runs               runList      `msgpack:"runs"`
	Unique             []uniqueHold `msgpack:"unique"`
	Workflows          workflowList `msgpack:"workflows"`
	Expiries           expiryList   `msgpack:"expiries"`
	WorkflowsCompleted int64        `msgpack:"workflows_completed"`
	WorkflowsCancelled int64        `msgpack:"workflows_cancelled"`
}

// Encode returns the canonical encoding of s: the same state always gives
// the same bytes (sorted ids, no map order), so it doubles as the input of
// [Digest].
func Encode(s *State) ([]byte, error) {
	snap := snapshotOut{
		Version: snapshotVersion, LastSeq: s.LastSeq,
		Completed: s.Completed, Runs: s.Runs, Expiries: s.Expiries(),
		WorkflowsCompleted: s.WorkflowsCompleted, WorkflowsCancelled: s.WorkflowsCancelled,
	}
	for _, id := range s.WorkflowIDs() {
		snap.Workflows = append(snap.Workflows, *s.Workflows[id])
	}
	for q := range s.PausedQueues {
		snap.Paused = append(snap.Paused, q)
	}
	sort.Strings(snap.Paused)
	size := max(SizeHint(s), 4096)
	if len(s.Jobs) > 0 {
		snap.Jobs = make(jobPtrList, 0, len(s.Jobs))
		for _, j := range s.Jobs {
			snap.Jobs = append(snap.Jobs, j)
		}
		// Job ids are the map's keys, so unique: the order is total.
		slices.SortFunc(snap.Jobs, func(a, b *Job) int { return strings.Compare(a.ID, b.ID) })
	}
	for k, id := range s.Unique {
		snap.Unique = append(snap.Unique, uniqueHold{Key: k, ID: id})
	}
	sort.Slice(snap.Unique, func(a, b int) bool { return snap.Unique[a].Key < snap.Unique[b].Key })
	var buf bytes.Buffer
	buf.Grow(size)
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(&snap); err != nil {
		return nil, fmt.Errorf("replay: encode snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// SizeHint estimates the size of s's encoding ([Encode]) without
// encoding it: its fixed part, and each job's and workflow's fixed part
// and variable fields. It runs in time linear in the active work and
// allocates nothing, so that a caller can tell, before encoding, whether
// a snapshot of s would fit under a bound. It is an estimate: compare the
// encoding's true size with it to scale it.
func SizeHint(s *State) int {
	size := 256 // the header, counters and runs
	for _, j := range s.Jobs {
		size += jobSizeHint(j)
	}
	for _, w := range s.Workflows {
		size += 512 + len(w.ID) + len(w.Name) + len(w.State) + len(w.Error) + len(w.InheritedQueue)
	}
	return size
}

// jobSizeHint estimates the size of j's encoding, so that Encode allocates
// its buffer once: the fixed part (keys, headers, numbers) is under 448
// bytes.
func jobSizeHint(j *Job) int {
	return 448 + len(j.ID) + len(j.Stream) + len(j.Handler) + len(j.Queue) + len(j.UniqueKey) +
		len(j.Payload) + len(j.WorkflowID) + len(j.LastCode) + len(j.LastError) + 9*len(j.Retry.ListNanos)
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
		return nil, fmt.Errorf("%w: version %d, want %d", ErrSnapshotOutdated, snap.Version, snapshotVersion)
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
		if (j.Status == JobProcessing) != (j.Token != 0) {
			return nil, fmt.Errorf("replay: snapshot: %w: job %q is %s with token %d", record.ErrCorrupt, j.ID, j.Status, j.Token)
		}
		if other, dup := s.Tokens[j.Token]; dup {
			return nil, fmt.Errorf("replay: snapshot: %w: token %d held by jobs %q and %q", record.ErrCorrupt, j.Token, other, j.ID)
		}
		s.addJob(&j)
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
	// Every other live job with a key waits in line for it (JB-5), and a
	// key in line has a holder.
	for _, id := range s.JobIDs() {
		j := s.Jobs[id]
		if j.UniqueKey == "" || (j.Status != JobPending && j.Status != JobProcessing) || s.Unique[j.UniqueKey] == j.ID {
			continue
		}
		if _, held := s.Unique[j.UniqueKey]; !held {
			return nil, fmt.Errorf("replay: snapshot: %w: job %q is %s with unique key %q, which no job holds",
				record.ErrCorrupt, j.ID, j.Status, j.UniqueKey)
		}
		s.uniqueWaiting[j.UniqueKey] = append(s.uniqueWaiting[j.UniqueKey], j.ID) // ids in sorted order
	}
	s.Runs = snap.Runs
	for i := range snap.Workflows {
		w := snap.Workflows[i]
		if _, dup := s.Workflows[w.ID]; dup || w.ID == "" {
			return nil, fmt.Errorf("replay: snapshot: %w: bad or duplicate workflow id %q", record.ErrCorrupt, w.ID)
		}
		if (w.DelayFireAt == 0) != (w.DelaySeq == 0) {
			if w.DelaySeq == 0 {
				// Written before DelaySeq existed: the seq that orders
				// this delay among others due with it (RL-9) is not here.
				return nil, fmt.Errorf("%w: workflow %q has a pending Delay without the seq that armed it", ErrSnapshotOutdated, w.ID)
			}
			return nil, fmt.Errorf("replay: snapshot: %w: workflow %q has a Delay seq without a Delay", record.ErrCorrupt, w.ID)
		}
		s.addWorkflow(&w)
		if w.IdempotencyKey != "" {
			s.Idempotency[w.IdempotencyKey] = w.ID
		}
	}
	for i := range snap.Expiries {
		e := snap.Expiries[i]
		if i > 0 && e.Seq <= snap.Expiries[i-1].Seq {
			// Encode writes them in seq order: anything else is damage.
			return nil, fmt.Errorf("replay: snapshot: %w: expiries out of seq order at %d", record.ErrCorrupt, e.Seq)
		}
		s.expiries[e.Seq] = &e
	}
	s.WorkflowsCompleted, s.WorkflowsCancelled = snap.WorkflowsCompleted, snap.WorkflowsCancelled
	return s, nil
}

// decodeList reads a msgpack array of T, whose every encoding Encode
// writes takes at least minBytes, appending each element as it is decoded
// rather than pre-sizing the slice from the declared length (RL-6).
func decodeList[T any](dec *msgpack.Decoder, limit, minBytes int, what string) ([]T, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	if err := checkListLen(dec, n, limit, minBytes, what); err != nil {
		return nil, err
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

// checkListLen refuses a list of n elements, each encoded by Encode in at
// least minBytes, that declares more than limit of them or more than the
// bytes left in the input could hold (RL-6). The pre-scan lets a list
// declare one element per byte left, and an element as short as an empty
// map (one byte) decodes into a whole zero struct (a Job or a Workflow is
// some 300 bytes): unchecked, a list cost hundreds of times its input.
// Bounded so, a list costs at most its input times the element's size
// over minBytes.
func checkListLen(dec *msgpack.Decoder, n, limit, minBytes int, what string) error {
	if n > limit {
		return fmt.Errorf("%w: %d %s, limit %d", record.ErrCorrupt, n, what, limit)
	}
	if r, ok := dec.Buffered().(interface{ Len() int }); !ok || n > r.Len()/minBytes {
		left := -1
		if ok {
			left = r.Len()
		}
		return fmt.Errorf("%w: %d %s in the %d bytes left, each takes at least %d", record.ErrCorrupt, n, what, left, minBytes)
	}
	return nil
}

// encodedMinBytes is the length of T's zero value encoded by msgpack's
// reflection encoder, as Encode encodes it: the shortest encoding of a T
// Encode writes, since every field it writes encodes shortest at zero
// (and omitempty fields are left out only then).
func encodedMinBytes[T any]() int {
	var v T
	b, err := msgpack.Marshal(&v)
	if err != nil {
		panic("replay: encode a zero " + reflect.TypeFor[T]().String() + ": " + err.Error())
	}
	return len(b)
}

// The shortest encodings of the structs a snapshot lists, set by init
// once the decoders of Workflow's lists are registered.
var workflowMinBytes, expiryMinBytes, runMinBytes, uniqueMinBytes, signalMinBytes, branchMinBytes int

func (l *jobList) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		*l = nil
		return err
	}
	// A job's encoding is at least jobMinBytes (its keys alone).
	if err := checkListLen(dec, n, SnapshotJobsMax, jobMinBytes, "jobs"); err != nil {
		return err
	}
	out := make(jobList, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, Job{})
		if err := decodeJob(dec, &out[len(out)-1]); err != nil {
			return err
		}
	}
	*l = out
	return nil
}

func (l *runList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Run](dec, RunsKeptMax, runMinBytes, "runs")
	return err
}

func (l *workflowList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Workflow](dec, SnapshotJobsMax, workflowMinBytes, "workflows")
	return err
}

func (l *expiryList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[Expiry](dec, SnapshotJobsMax, expiryMinBytes, "expiries")
	return err
}

func (l *uniqueList) DecodeMsgpack(dec *msgpack.Decoder) (err error) {
	*l, err = decodeList[uniqueHold](dec, SnapshotJobsMax, uniqueMinBytes, "unique keys")
	return err
}

func init() {
	// A workflow's lists of structs decode through decodeList too:
	// msgpack's reflection decoder sizes a slice by its declared length
	// before it reads an element. Registered for the slice types, since
	// Workflow's fields keep their plain types, and before anything
	// encodes or decodes a Workflow: msgpack caches a struct's field
	// decoders the first time it meets the struct.
	msgpack.Register([]Signal(nil), nil, func(dec *msgpack.Decoder, v reflect.Value) error {
		l, err := decodeList[Signal](dec, SnapshotJobsMax, signalMinBytes, "signals")
		if err == nil {
			v.Set(reflect.ValueOf(l))
		}
		return err
	})
	msgpack.Register([]BranchOutput(nil), nil, func(dec *msgpack.Decoder, v reflect.Value) error {
		l, err := decodeList[BranchOutput](dec, SnapshotJobsMax, branchMinBytes, "branch outputs")
		if err == nil {
			v.Set(reflect.ValueOf(l))
		}
		return err
	})
	workflowMinBytes = encodedMinBytes[Workflow]()
	expiryMinBytes = encodedMinBytes[Expiry]()
	runMinBytes = encodedMinBytes[Run]()
	uniqueMinBytes = encodedMinBytes[uniqueHold]()
	signalMinBytes = encodedMinBytes[Signal]()
	branchMinBytes = encodedMinBytes[BranchOutput]()
}

// jobFieldNames are Job's fields in the order a snapshot encodes them:
// the order they had before Job was packed (see Job), which msgpack's
// reflection encoder followed. Snapshots and state digests keep it.
var jobFieldNames = [jobFields]string{
	"ID", "Stream", "Handler", "Queue", "Priority", "EnqueueSeq", "AvailableAt", "Retry",
	"DeliveryTimeoutNanos", "UniqueKey", "Payload", "WorkflowID", "Step", "Branch", "Status",
	"Attempts", "Consumed", "Token", "StartAt", "HardAt", "NormalAt", "LastCode", "LastError", "Lost",
}

func init() {
	// appendJob and EncodeSummary write every field of their
	// types by hand: appendJob in jobFieldNames's order,
	// EncodeSummary in field order.
	t := reflect.TypeFor[Job]()
	if t.NumField() != jobFields {
		panic("replay: Job has fields appendJob does not write")
	}
	for _, name := range jobFieldNames {
		if f, ok := t.FieldByName(name); !ok || f.Tag != "" {
			panic("replay: Job field " + name + " is not what appendJob writes")
		}
	}
	if len(appendJob(nil, &Job{})) <= jobMinBytes {
		panic("replay: jobMinBytes is not below the shortest job encoding")
	}
	// record.RetryPolicy's AppendMsgpack is checked by record itself.
	js := reflect.TypeFor[JobSummary]()
	tags := []string{"id", "handler", "queue", "priority", "status", "attempts", "consumed", "max_attempts,omitempty", "finished_at",
		"last_code,omitempty", "last_error,omitempty", "workflow_id,omitempty", "seq"}
	if js.NumField() != len(tags) {
		panic("replay: JobSummary has fields EncodeSummary does not write")
	}
	for i, tag := range tags {
		if f := js.Field(i); f.Tag.Get("msgpack") != tag {
			panic("replay: JobSummary field " + f.Name + " is not what EncodeSummary writes")
		}
	}
}

// jobPtrList is the jobs of a snapshot being encoded.
type jobPtrList []*Job

// EncodeMsgpack writes l as msgpack's reflection encoder writes a slice of
// a struct with Job's fields in jobFieldNames's order (a map per job keyed
// by field name, fixed-width numbers, as msgpack.Encoder without options),
// appending each job's bytes by hand: the snapshot is encoded on the
// runner's loop, and again by every Digest.
func (l jobPtrList) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(len(l)); err != nil {
		return err
	}
	w := enc.Writer()
	var b []byte
	for i := range l {
		b = appendJob(b[:0], l[i])
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// jobFields is the number of fields of Job, each written by appendJob.
const jobFields = 24

// jobMinBytes is less than the length of any job appendJob writes: the
// key names alone take more.
const jobMinBytes = 128

// appendJob appends the encoding of j: a map of its jobFields fields, keyed
// by field name in jobFieldNames's order.
func appendJob(b []byte, j *Job) []byte {
	b = mpwrite.AppendMapLen(b, jobFields)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "ID"), j.ID)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "Stream"), j.Stream)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "Handler"), j.Handler)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "Queue"), j.Queue)
	b = mpwrite.AppendUint8(mpwrite.AppendString(b, "Priority"), j.Priority)
	b = mpwrite.AppendUint64(mpwrite.AppendString(b, "EnqueueSeq"), j.EnqueueSeq)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "AvailableAt"), j.AvailableAt)
	b = j.Retry.AppendMsgpack(mpwrite.AppendString(b, "Retry"))
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "DeliveryTimeoutNanos"), j.DeliveryTimeoutNanos)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "UniqueKey"), j.UniqueKey)
	b = mpwrite.AppendBin(mpwrite.AppendString(b, "Payload"), j.Payload)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "WorkflowID"), j.WorkflowID)
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "Step"), j.Step)
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "Branch"), j.Branch)
	b = mpwrite.AppendUint8(mpwrite.AppendString(b, "Status"), uint8(j.Status))
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "Attempts"), j.Attempts)
	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "Consumed"), j.Consumed)
	b = mpwrite.AppendUint64(mpwrite.AppendString(b, "Token"), j.Token)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "StartAt"), j.StartAt)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "HardAt"), j.HardAt)
	b = mpwrite.AppendInt64(mpwrite.AppendString(b, "NormalAt"), j.NormalAt)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "LastCode"), j.LastCode)
	b = mpwrite.AppendString(mpwrite.AppendString(b, "LastError"), j.LastError)
	return mpwrite.AppendBool(mpwrite.AppendString(b, "Lost"), j.Lost)
}
