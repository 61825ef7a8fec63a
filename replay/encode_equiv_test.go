package replay

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/journal/record"
)

// jobEncodedType is a struct of Job's fields in jobFieldNames's order:
// what msgpack's reflection encoder writes for it is what a snapshot holds
// for a job.
var jobEncodedType = func() reflect.Type {
	jt := reflect.TypeFor[Job]()
	fields := make([]reflect.StructField, len(jobFieldNames))
	for i, name := range jobFieldNames {
		f, ok := jt.FieldByName(name)
		if !ok {
			panic("replay: jobFieldNames names no field " + name)
		}
		fields[i] = reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag}
	}
	return reflect.StructOf(fields)
}()

// encodedJobs returns a slice of jobEncodedType holding l's jobs, nil for
// nil.
func encodedJobs(l []*Job) reflect.Value {
	out := reflect.Zero(reflect.SliceOf(jobEncodedType))
	if l != nil {
		out = reflect.MakeSlice(out.Type(), len(l), len(l))
	}
	for i, j := range l {
		src, dst := reflect.ValueOf(j).Elem(), out.Index(i)
		for k := range dst.NumField() {
			dst.Field(k).Set(src.FieldByName(jobEncodedType.Field(k).Name))
		}
	}
	return out
}

func TestRL7_JobListEncodingMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lens := []int{0, 1, 31, 32, 255, 256, 65535, 65536}
	s := func() string { return strings.Repeat("x", lens[r.IntN(len(lens))]) }
	for iter := 0; iter < 150; iter++ {
		var l []Job
		n := r.IntN(20)
		if iter%50 == 0 {
			n = 70000
		}
		for i := 0; i < n; i++ {
			if iter%50 == 0 { // 70000 small jobs: the widths of a long list's header
				l = append(l, Job{ID: "a", Status: JobPending})
				continue
			}
			var p []byte
			switch r.IntN(3) {
			case 1:
				p = []byte{}
			case 2:
				p = []byte(s())
			}
			var ln []int64
			switch r.IntN(3) {
			case 1:
				ln = []int64{}
			case 2:
				ln = []int64{r.Int64(), -1, math.MinInt64}
			}
			l = append(l, Job{ID: s(), Stream: s(), Handler: s(), Queue: s(), Priority: uint8(r.Uint32()),
				EnqueueSeq: r.Uint64(), AvailableAt: r.Int64() - r.Int64(),
				Retry:                record.RetryPolicy{MaxAttempts: int32(r.Uint32()), Backoff: record.Backoff(r.Uint32()), BaseNanos: -r.Int64(), MaxNanos: r.Int64(), JitterRatio: r.Float64(), ListNanos: ln},
				DeliveryTimeoutNanos: r.Int64(), UniqueKey: s(), Payload: p, WorkflowID: s(), Step: int32(r.Uint32()), Branch: -int32(r.Uint32() >> 1),
				Status: JobStatus(r.Uint32()), Attempts: int32(r.Uint32()), Consumed: int32(r.Uint32()), Token: r.Uint64(),
				StartAt: r.Int64(), HardAt: -r.Int64(), NormalAt: r.Int64(), LastCode: s(), LastError: s(), Lost: r.IntN(2) == 0})
		}
		if iter%7 == 0 && n == 0 {
			l = nil
		}
		for _, sorted := range []bool{false, true} {
			var a, b bytes.Buffer
			ea := msgpack.NewEncoder(&a)
			ea.SetSortMapKeys(sorted)
			var pl jobPtrList
			for i := range l {
				pl = append(pl, &l[i])
			}
			if l == nil {
				pl = nil
			}
			if err := ea.Encode(struct{ J any }{encodedJobs(pl).Interface()}); err != nil {
				t.Fatal(err)
			}
			eb := msgpack.NewEncoder(&b)
			eb.SetSortMapKeys(sorted)
			if err := eb.Encode(struct{ J jobPtrList }{pl}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("iter %d: encodings differ (%d vs %d bytes)", iter, a.Len(), b.Len())
			}
			var back struct{ J jobList }
			if err := msgpack.Unmarshal(b.Bytes(), &back); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func bigState() *State {
	s := New()
	for i := 0; i < 10000; i++ {
		id := "job_01JH" + strings.Repeat("X", 18) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		s.Jobs[id] = &Job{ID: id, Stream: id, Handler: "noop", Queue: "default", EnqueueSeq: uint64(i), Payload: []byte{0x81, 0xa1, 0x69, 0xd2, 0, 0, 0, 1}, Status: JobPending,
			Retry: record.RetryPolicy{MaxAttempts: 25, Backoff: 1, BaseNanos: 1e9, MaxNanos: 1e12, JitterRatio: 0.2}}
	}
	s.LastSeq = 10000
	return s
}

func BenchmarkEncode(b *testing.B) {
	s := bigState()
	for b.Loop() {
		Encode(s)
	}
}

func BenchmarkEncodeReflect(b *testing.B) {
	s := bigState()
	var l []Job
	for _, id := range s.JobIDs() {
		l = append(l, *s.Jobs[id])
	}
	for b.Loop() {
		msgpack.Marshal(l)
	}
}

func BenchmarkDecode(b *testing.B) {
	s := bigState()
	enc, _ := Encode(s)
	for b.Loop() {
		Decode(enc)
	}
}

// encodeReflect encodes s as Encode does, by msgpack's reflection
// encoder, with snapshot's jobs as jobEncodedType.
func encodeReflect(s *State) []byte {
	snap := snapshot{
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
	var jobs []*Job
	for _, id := range s.JobIDs() {
		jobs = append(jobs, s.Jobs[id])
	}
	for k, id := range s.Unique {
		snap.Unique = append(snap.Unique, uniqueHold{Key: k, ID: id})
	}
	sort.Slice(snap.Unique, func(a, b int) bool { return snap.Unique[a].Key < snap.Unique[b].Key })

	// snapshot's fields, its jobs as jobEncodedType.
	st := reflect.TypeFor[snapshot]()
	fields := make([]reflect.StructField, st.NumField())
	for i := range fields {
		f := st.Field(i)
		fields[i] = reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag}
	}
	jobsField, _ := st.FieldByName("Jobs")
	fields[jobsField.Index[0]].Type = reflect.SliceOf(jobEncodedType)
	out := reflect.New(reflect.StructOf(fields)).Elem()
	src := reflect.ValueOf(snap)
	for i := range fields {
		if i == jobsField.Index[0] {
			out.Field(i).Set(encodedJobs(jobs))
		} else {
			out.Field(i).Set(src.Field(i))
		}
	}

	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(out.Addr().Interface()); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func TestRL7_EncodeSameAsOld(t *testing.T) {
	for _, s := range []*State{New(), bigState()} {
		b, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, encodeReflect(s)) {
			t.Fatal("differ")
		}
	}
}

// decodeJobsReflect decodes a job list with msgpack's reflection decoder,
// the reference decodeJob is checked against.
func decodeJobsReflect(b []byte) ([]Job, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	return decodeList[Job](dec, SnapshotJobsMax, jobMinBytes, "jobs")
}

// decodeJobsHand decodes a job list as Decode does.
func decodeJobsHand(b []byte) ([]Job, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields(true)
	var l jobList
	if err := l.DecodeMsgpack(dec); err != nil {
		return nil, err
	}
	return l, nil
}

// TestRL7_DecodeMatchesReflection checks the snapshot's hand-written job
// decoder against msgpack's reflection decoder: on every encoding Encode
// writes they agree, and on mutated bytes the hand decoder never accepts
// what reflection refuses nor reads a different value. It may refuse
// shapes Encode never writes (a struct as an array) that reflection takes.
func TestRL7_DecodeMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lens := []int{0, 1, 5, 31, 32, 300}
	s := func() string { return strings.Repeat("y", lens[r.IntN(len(lens))]) }
	var seeds [][]byte
	for iter := 0; iter < 300; iter++ {
		var pl jobPtrList
		for i := r.IntN(4); i > 0; i-- {
			var ln []int64
			if r.IntN(2) == 0 {
				ln = []int64{1, -2}
			}
			var p []byte
			if r.IntN(2) == 0 {
				p = []byte(s())
			}
			pl = append(pl, &Job{ID: s(), Stream: s(), Handler: "h", Queue: s(), Priority: uint8(r.Uint32()), EnqueueSeq: r.Uint64(),
				AvailableAt: -r.Int64(), Retry: record.RetryPolicy{MaxAttempts: 3, JitterRatio: 0.5, ListNanos: ln}, Payload: p,
				Step: -int32(r.Uint32() >> 1), Status: JobStatus(r.Uint32()), Token: r.Uint64(), LastError: s(), Lost: r.IntN(2) == 0})
		}
		var buf bytes.Buffer
		if err := msgpack.NewEncoder(&buf).Encode(pl); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	encoded := len(seeds) // seeds written by the encoder the snapshot uses
	// Hand-made shapes: nil element, array-form struct, repeated and
	// unknown keys, compact ints, strings as bin.
	var hb bytes.Buffer
	e := msgpack.NewEncoder(&hb)
	e.EncodeArrayLen(5)
	e.EncodeNil()
	e.EncodeArrayLen(0)
	e.EncodeMapLen(3)
	e.EncodeString("ID")
	e.EncodeBytes([]byte("bin-id"))
	e.EncodeString("ID")
	e.EncodeString("again")
	e.EncodeString("Priority")
	e.EncodeInt(300)
	e.EncodeMapLen(2)
	e.EncodeString("Step")
	e.EncodeUint(1 << 40)
	e.EncodeString("Lost")
	e.EncodeBool(true)
	e.EncodeMapLen(0)
	seeds = append(seeds, hb.Bytes())
	seeds = append(seeds, []byte{0x91, 0x81, 0xa4, 'N', 'o', 'p', 'e', 0x01})
	var ab bytes.Buffer
	ea := msgpack.NewEncoder(&ab)
	ea.UseArrayEncodedStructs(true)
	ea.Encode([]Job{{ID: "x", Retry: record.RetryPolicy{MaxAttempts: 2}, Payload: []byte{1}}, {}})
	seeds = append(seeds, ab.Bytes())
	if _, err := decodeJobsHand(ab.Bytes()); err == nil {
		t.Fatal("a job encoded as an array was accepted")
	}
	checked, agreedErr, stricter := 0, 0, 0
	for si, seed := range seeds {
		for m := 0; m < 60; m++ {
			b := append([]byte(nil), seed...)
			if m > 0 {
				for k := 1 + r.IntN(3); k > 0; k-- {
					switch r.IntN(3) {
					case 0:
						b[r.IntN(len(b))] = byte(r.Uint32())
					case 1:
						b = b[:r.IntN(len(b))]
					case 2:
						b[r.IntN(len(b))] ^= 1 << r.IntN(8)
					}
					if len(b) == 0 {
						break
					}
				}
			}
			if len(b) == 0 {
				continue
			}
			if record.Prescan(b, false) != nil {
				continue
			}
			a, errA := decodeJobsReflect(b)
			c, errC := decodeJobsHand(b)
			switch {
			case errC == nil && errA != nil:
				t.Fatalf("hand decoder accepted %x, reflection refused: %v", b, errA)
			case errC != nil && errA == nil:
				if m == 0 && si < encoded {
					t.Fatalf("hand decoder refused an encoding Encode writes: %v", errC)
				}
				stricter++
				continue
			case errA != nil:
				agreedErr++
				continue
			}
			if !reflect.DeepEqual(a, c) {
				t.Fatalf("value disagreement on %x:\nreflection %+v\nhand %+v", b, a, c)
			}
			checked++
		}
	}
	t.Logf("%d equal decodes, %d agreed errors, %d refused by the hand decoder only", checked, agreedErr, stricter)
	if checked < 300 {
		t.Fatalf("only %d inputs decoded equal: the check is not exercising the decoder", checked)
	}
}

// RL-7: EncodeSummary writes what msgpack.Marshal does, into a buffer
// made to its size.
func TestRL7_SummaryMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lens := []int{0, 1, 31, 32, 255, 256, 70000}
	s := func() string { return strings.Repeat("z", lens[r.IntN(len(lens))]) }
	for i := 0; i < 3000; i++ {
		v := JobSummary{ID: s(), Handler: s(), Queue: s(), Priority: uint8(r.Uint32()), Status: JobStatus(r.Uint32()),
			Attempts: int32(r.Uint32()), Consumed: -int32(r.Uint32() >> 1), MaxAttempts: int32(r.Uint32()) * int32(r.IntN(2)), FinishedAt: r.Int64() - r.Int64(),
			LastCode: s(), LastError: s(), WorkflowID: s(), Seq: r.Uint64()}
		want, err := msgpack.Marshal(&v)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := EncodeSummary(v)
		if !bytes.Equal(want, got) {
			t.Fatalf("summary %d differs", i)
		}
		// One allocation of the size written: an entry per finished job.
		if cap(got) != len(got) {
			t.Fatalf("summary %d: %d bytes written into %d allocated", i, len(got), cap(got))
		}
	}
}
