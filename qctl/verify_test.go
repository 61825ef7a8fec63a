package qctl_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
	"github.com/quire-dev/quire/replay"
)

type verifyProblem struct {
	Type   string `json:"type"`
	Check  string `json:"check"`
	Seq    uint64 `json:"seq"`
	Stream string `json:"stream"`
	Reason string `json:"reason"`
	OK     *bool  `json:"ok"`
}

// verifyJSON runs verify --json and returns its problems and verdict.
func verifyJSON(t *testing.T, fs vfs.FS) (int, []verifyProblem, bool) {
	t.Helper()
	code, stdout, stderr := run(t, fs, "--json", "verify", fixtureDir)
	var probs []verifyProblem
	ok := false
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var p verifyProblem
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("verify --json line %q: %v (stderr %s)", line, err, stderr)
		}
		switch p.Type {
		case "problem":
			probs = append(probs, p)
		case "verify":
			ok = *p.OK
		}
	}
	return code, probs, ok
}

// wantProblem fails unless probs name seq and stream in check.
func wantProblem(t *testing.T, probs []verifyProblem, check string, seq uint64, stream string) {
	t.Helper()
	for _, p := range probs {
		if p.Check == check && p.Seq == seq && p.Stream == stream {
			return
		}
	}
	t.Fatalf("no %s problem at seq %d stream %q; problems: %+v", check, seq, stream, probs)
}

func indexKey(id string) []byte {
	k := append([]byte("t/"), byte(len(id)))
	return append(k, id...)
}

// TestVerifyCorrupt: hand-corrupted journals make verify exit 1 and name
// the seq and stream of every problem, in human and JSON output; the
// other commands refuse a journal whose order is in doubt with exit 5 and
// point at verify (RL-5, spec/reliability.md §4.4; quarantine_test.go has
// the damage they read past).
func TestVerifyCorrupt(t *testing.T) {
	t.Parallel()
	// Seq 10 and 11 are the retry settlements of two jobs (fixture).
	cases := []struct {
		name  string
		edit  func(t *testing.T, db *pebble.DB)
		check func(t *testing.T, probs []verifyProblem)
		json  []string // what the verify line of --json says
	}{
		{"flipped byte", func(t *testing.T, db *pebble.DB) {
			v := get(t, db, record.LogKey(10))
			v[len(v)/2] ^= 0x40
			set(t, db, record.LogKey(10), v)
		}, func(t *testing.T, probs []verifyProblem) {
			wantProblem(t, probs, "records", 10, jobRetry)
		}, []string{
			// Replay sets the damaged record's stream aside, as Open does,
			// and replays the rest to the end (spec/reliability.md §4.4):
			// its check holds, and JSON lists the stream.
			`"records":false,`, `"replayed":66,`, `"replay":true}`, `"quarantined":[{"seq":10,"stream":"` + jobRetry + `",`,
		}},
		{"dropped record", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(record.LogKey(10), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, probs []verifyProblem) {
			wantProblem(t, probs, "seq continuity", 10, jobRetry)
		}, []string{
			// Replay stops at the gap: its check did not finish, so it is
			// null, not true, and the last line says where it stopped.
			`"seq_continuity":false,`, `"replayed":9,`, `"index_checked":1,`, `"replay":null}`,
			`"replay_stopped":"seq 10 cannot be read; replay stopped there"`,
		}},
		{"swapped records", func(t *testing.T, db *pebble.DB) {
			a, b := get(t, db, record.LogKey(10)), get(t, db, record.LogKey(11))
			set(t, db, record.LogKey(10), b)
			set(t, db, record.LogKey(11), a)
		}, func(t *testing.T, probs []verifyProblem) {
			wantProblem(t, probs, "records", 10, jobRetry)
			wantProblem(t, probs, "records", 11, jobBuried)
		}, nil},
		{"missing terminal-index entry", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(indexKey(jobOK), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, probs []verifyProblem) {
			wantProblem(t, probs, "terminal index", 9, jobOK) // its attempt_succeeded
		}, nil},
		{"wrong terminal-index entry", func(t *testing.T, db *pebble.DB) {
			v, err := replay.EncodeSummary(replay.JobSummary{ID: jobOK, Handler: "send_email", Queue: "default", Status: replay.JobBuried, Attempts: 1, Consumed: 1, Seq: 9})
			if err != nil {
				t.Fatal(err)
			}
			set(t, db, indexKey(jobOK), v)
		}, func(t *testing.T, probs []verifyProblem) {
			wantProblem(t, probs, "terminal index", 9, jobOK)
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := fixture(t)
			editStore(t, fs, fixtureDir, func(db *pebble.DB) { c.edit(t, db) })
			code, probs, ok := verifyJSON(t, fs)
			if code != qctl.ExitFindings || ok || len(probs) == 0 {
				t.Fatalf("verify: exit %d, ok %v, problems %+v; want exit 1 with problems", code, ok, probs)
			}
			c.check(t, probs)
			_, stdout, _ := run(t, fs, "--json", "verify", fixtureDir)
			for _, want := range c.json {
				if !strings.Contains(stdout, want) {
					t.Errorf("verify --json does not say %s:\n%s", want, stdout)
				}
			}
			for _, p := range probs {
				if p.Seq == 0 || p.Stream == "" {
					t.Errorf("problem without seq or stream: %+v", p)
				}
			}
			code, stdout, _ = run(t, fs, "verify", fixtureDir)
			if code != qctl.ExitFindings || !strings.Contains(stdout, "FAIL:") {
				t.Fatalf("verify (human): exit %d\n%s", code, stdout)
			}
			checkGolden(t, "verify_"+strings.ReplaceAll(c.name, " ", "_"), stdout)
		})
	}

	t.Run("inspect refuses", func(t *testing.T) {
		t.Parallel()
		fs := fixture(t)
		editStore(t, fs, fixtureDir, func(db *pebble.DB) {
			if err := db.Delete(record.LogKey(10), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		})
		wantExit(t, fs, qctl.ExitUnreadable, `at seq 10 stream "`+jobRetry+`": record missing`, "inspect", fixtureDir)
		wantExit(t, fs, qctl.ExitUnreadable, "qctl verify db lists every problem", "-d", fixtureDir, "jobs")
	})
}

// TestVerifyReplay: records whose bytes are intact but which replay
// refuses (an impossible transition), and a snapshot that differs from
// the replay of the log, are findings that name seq and stream.
func TestVerifyReplay(t *testing.T) {
	t.Parallel()
	t.Run("impossible transition", func(t *testing.T) {
		t.Parallel()
		fs := fixture(t)
		seq := settleBuriedAgain(t, fs)
		code, probs, _ := verifyJSON(t, fs)
		if code != qctl.ExitFindings {
			t.Fatalf("verify: exit %d, want 1", code)
		}
		wantProblem(t, probs, "replay", seq, jobBuried)
		wantExit(t, fs, qctl.ExitFindings, "replay refuses seq 67", "inspect", fixtureDir)
	})
	t.Run("snapshot differs", func(t *testing.T) {
		t.Parallel()
		fs := fixture(t)
		j, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0.Add(2 * time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		st := replay.New()
		st.LastSeq = 30
		b, err := replay.Encode(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.WriteSnapshot(context.Background(), 30, b); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		code, probs, _ := verifyJSON(t, fs)
		if code != qctl.ExitFindings {
			t.Fatalf("verify: exit %d, want 1", code)
		}
		wantProblem(t, probs, "snapshots", 30, wfApproval)
	})
}

// flushToTable moves the fixture's records from the WAL into a table and
// returns the table's name.
func flushToTable(t *testing.T, fs vfs.FS) string {
	t.Helper()
	editStore(t, fs, fixtureDir, func(db *pebble.DB) {
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	})
	names, err := fs.List(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			tables = append(tables, n)
		}
	}
	if len(tables) != 1 {
		t.Fatalf("want one table after the flush, have %v", names)
	}
	return tables[0]
}

// flipByte inverts the byte at off of file name in the fixture.
func flipByte(t *testing.T, fs vfs.FS, name string, off int) {
	t.Helper()
	path := fs.PathJoin(fixtureDir, name)
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0xff
	w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyDamagedBlock: a flipped byte in a table's first data block
// (the e/ records) is damage Pebble's block checksum finds at read time.
// verify reports it as a failed check (exit 1) that names the file, with
// the checks it cut short incomplete in text and null in JSON, and says
// the same on every run, whichever of its two passes meets the block
// first. Other commands refuse the journal with exit 5.
func TestVerifyDamagedBlock(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	flushToTable(t, fs)
	if code, stdout, _ := run(t, fs, "verify", fixtureDir); code != qctl.ExitOK {
		t.Fatalf("verify of the flushed fixture: exit %d\n%s", code, stdout)
	}
	// A journal that met damage stays locked until the process exits
	// (journal.ErrFailStop): each run gets a fresh copy. Its table's
	// number may differ from copy to copy; output names it <table>.
	damaged := func(args ...string) (int, string, string) {
		fs := fixture(t)
		table := flushToTable(t, fs)
		flipByte(t, fs, table, 100)
		code, stdout, stderr := run(t, fs, args...)
		return code, strings.ReplaceAll(stdout, table, "<table>"), strings.ReplaceAll(stderr, table, "<table>")
	}

	code, stdout, stderr := damaged("verify", fixtureDir)
	if code != qctl.ExitFindings || stderr != "" {
		t.Fatalf("verify: exit %d, stderr %q; want exit 1 and nothing on stderr\n%s", code, stderr, stdout)
	}
	for _, want := range []string{
		"records         FAIL (1)",
		"replay          incomplete (stopped by the damaged file)",
		"file <table> is damaged: block 0/",
		"checksum mismatch",
		"verify stopped there",
		"FAIL: 1 problem",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verify does not say %q:\n%s", want, stdout)
		}
	}
	for _, bad := range []string{"corruption detail carrier", "outcome unknown", "qctl verify"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("verify says %q:\n%s", bad, stdout)
		}
	}
	for i := 0; i < 8; i++ {
		if _, again, errs := damaged("verify", fixtureDir); again != stdout {
			t.Fatalf("verify run %d differs:\n%s%s\nfirst run:\n%s", i+2, again, errs, stdout)
		}
	}

	_, jsonOut, _ := damaged("--json", "verify", fixtureDir)
	lines := strings.Split(strings.TrimSpace(jsonOut), "\n")
	var prob struct {
		Type, Check, File, Reason string
	}
	var summary struct {
		OK     bool                       `json:"ok"`
		Checks map[string]json.RawMessage `json:"checks"`
	}
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &prob) != nil || json.Unmarshal([]byte(lines[1]), &summary) != nil {
		t.Fatalf("verify --json:\n%s", jsonOut)
	}
	if prob.Type != "problem" || prob.Check != "records" || prob.File != "<table>" || summary.OK || len(summary.Checks) != 8 {
		t.Fatalf("verify --json problem %+v, ok %v, checks %s", prob, summary.OK, summary.Checks)
	}
	for check, v := range summary.Checks {
		want := "null"
		if check == "records" {
			want = "false"
		}
		if string(v) != want {
			t.Errorf("verify --json: check %s is %s, want %s", check, v, want)
		}
	}

	if code, _, stderr := damaged("-d", fixtureDir, "jobs"); code != qctl.ExitUnreadable || !strings.Contains(stderr, "file <table> is damaged: block 0/") || strings.Contains(stderr, "carrier") {
		t.Fatalf("jobs: exit %d, stderr %q", code, stderr)
	}
}

// damageFirstSnapshot flips a byte of the fixture's first snapshot, so
// that it fails its own checksum, and returns its seq.
func damageFirstSnapshot(t *testing.T, fs vfs.FS) uint64 {
	t.Helper()
	var seq uint64
	editStore(t, fs, fixtureDir, func(db *pebble.DB) {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("x/"), UpperBound: []byte("x0")})
		if err != nil {
			t.Fatal(err)
		}
		if !it.First() {
			t.Fatal("the fixture holds no snapshot")
		}
		key := append([]byte(nil), it.Key()...)
		seq = binary.BigEndian.Uint64(key[2:])
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		v := get(t, db, key)
		v[len(v)/2] ^= 0x01
		set(t, db, key, v)
	})
	return seq
}

// snapshotAtEnd writes a snapshot of the fixture's state at its last seq,
// as the engine writes them, after mod (if not nil) changed it.
func snapshotAtEnd(t *testing.T, fs vfs.FS, mod func(st *replay.State)) {
	t.Helper()
	j, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0.Add(2 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, j, mod)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeSnapshot writes a snapshot of j's state at its last seq, folded
// from seq 1 as the engine folds it, after mod (if not nil) changed it.
func writeSnapshot(t testing.TB, j *journal.Journal, mod func(st *replay.State)) {
	t.Helper()
	st := replay.New()
	it := j.Scan(1, math.MaxUint64)
	for it.Next() {
		if err := replay.Apply(st, it.Record()); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(st)
	}
	b, err := replay.Encode(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.WriteSnapshot(context.Background(), st.LastSeq, b); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyDamagedSnapshot: a snapshot whose own checksum fails is a
// problem of the snapshots check, not of the records, and is counted
// among the stored snapshots (RL-5; spec/reliability.md §4.3: a bad
// snapshot is reported, and only ignored by Open).
func TestVerifyDamagedSnapshot(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	seq := damageFirstSnapshot(t, fs)

	code, stdout, _ := run(t, fs, "--json", "verify", fixtureDir)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var prob verifyProblem
	var summary struct {
		OK        bool            `json:"ok"`
		Snapshots int             `json:"snapshots"`
		Checks    map[string]bool `json:"checks"`
	}
	if code != qctl.ExitFindings || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &prob) != nil || json.Unmarshal([]byte(lines[1]), &summary) != nil {
		t.Fatalf("verify --json: exit %d\n%s", code, stdout)
	}
	if prob.Check != "snapshots" || prob.Seq != seq || !strings.HasPrefix(prob.Reason, "snapshot: envelope: ") {
		t.Errorf("verify --json problem %+v, want a snapshots problem at seq %d", prob, seq)
	}
	if summary.OK || summary.Snapshots != 1 || summary.Checks["snapshots"] || !summary.Checks["records"] {
		t.Errorf("verify --json summary %+v, want snapshots false, records true, 1 snapshot stored", summary)
	}

	code, stdout, _ = run(t, fs, "verify", fixtureDir)
	for _, want := range []string{"records         ok\n", "snapshots       FAIL (1)\n", fmt.Sprintf("snapshots  %d", seq), "FAIL: 1 problem"} {
		if code != qctl.ExitFindings || !strings.Contains(stdout, want) {
			t.Errorf("verify: exit %d, does not say %q:\n%s", code, want, stdout)
		}
	}
	if strings.Contains(stdout, "journal: corrupt at seq") {
		t.Errorf("verify repeats the error's prefix in the problem:\n%s", stdout)
	}
}

// settleBuriedAgain appends to the fixture's journal a second settlement
// of its buried job, with its old token: a transition replay refuses. It
// returns the record's seq.
func settleBuriedAgain(t *testing.T, fs vfs.FS) uint64 {
	t.Helper()
	j, err := journal.Open(fixtureDir, journal.Options{FS: fs, Clock: clocktest.New(t0.Add(2 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := j.Append(context.Background(), rec(jobBuried, &record.AttemptSucceeded{Outcome: record.Outcome{JobID: jobBuried, Token: 13}}))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return seqs[0]
}

// TestVerifyOutdatedSnapshotIsNoProblem: a snapshot of the fixture's last
// seq holding data_import's pending Delay without the seq of the
// step_delayed that armed it, as versions before that seq was kept wrote
// it, is passed over as the engine's Open passes it over
// (replay.ErrSnapshotOutdated): verify finds no problem and counts it
// outdated. The same snapshot with the seq is compared with the replay.
func TestVerifyOutdatedSnapshotIsNoProblem(t *testing.T) {
	t.Parallel()
	for _, outdated := range []bool{false, true} {
		fs := fixture(t)
		snapshotAtEnd(t, fs, func(st *replay.State) {
			w := st.Workflows[wfImport]
			if w == nil || w.DelayFireAt == 0 || w.DelaySeq == 0 {
				t.Fatalf("the fixture's %s has no pending Delay: %+v", wfImport, w)
			}
			if outdated {
				w.DelaySeq = 0
			}
		})
		code, stdout, _ := run(t, fs, "--json", "verify", fixtureDir)
		var summary struct {
			OK       bool `json:"ok"`
			Stored   int  `json:"snapshots"`
			Compared int  `json:"snapshots_compared"`
			Outdated int  `json:"snapshots_outdated"`
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != qctl.ExitOK || len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &summary) != nil {
			t.Fatalf("outdated %v: verify --json: exit %d\n%s", outdated, code, stdout)
		}
		want := 0
		if outdated {
			want = 1
		}
		if !summary.OK || summary.Stored != 2 || summary.Outdated != want || summary.Compared != 2-want {
			t.Fatalf("outdated %v: verify --json summary %+v, want 2 stored, %d outdated", outdated, summary, want)
		}
		if outdated {
			code, stdout, _ = run(t, fs, "verify", fixtureDir)
			if want := "snapshots       ok (2 stored, 1 compared with replay, 1 outdated, not used)\n"; code != qctl.ExitOK || !strings.Contains(stdout, want) {
				t.Fatalf("verify: exit %d, does not say %q:\n%s", code, want, stdout)
			}
		}
	}
}

// editSummary rewrites the terminal-index entry of job id after f
// changed it.
func editSummary(t *testing.T, db *pebble.DB, id string, f func(s *replay.JobSummary)) {
	t.Helper()
	editIndexEntry(t, db, id, replay.DecodeSummary, replay.EncodeSummary, f)
}

// editWorkflowSummary rewrites the terminal-index entry of workflow id
// after f changed it.
func editWorkflowSummary(t *testing.T, db *pebble.DB, id string, f func(s *replay.WorkflowSummary)) {
	t.Helper()
	editIndexEntry(t, db, id, replay.DecodeWorkflowSummary, replay.EncodeWorkflowSummary, f)
}

// editIndexEntry decodes the terminal-index entry of id, lets f change
// it and writes it back encoded.
func editIndexEntry[S any](t *testing.T, db *pebble.DB, id string, decode func([]byte) (S, error), encode func(S) ([]byte, error), f func(*S)) {
	t.Helper()
	s, err := decode(get(t, db, indexKey(id)))
	if err != nil {
		t.Fatal(err)
	}
	f(&s)
	v, err := encode(s)
	if err != nil {
		t.Fatal(err)
	}
	set(t, db, indexKey(id), v)
}

// TestRL5_VerifyFilesEachProblem: each kind of damage is the one problem
// verify finds, filed under its own check with the seq and stream it
// names, and the reason says what disagrees (RL-5: qctl verify checks the
// chain, seq continuity, time order, the stream index and the terminal
// index; WF-14: an idempotency key a dispatch used is reserved).
func TestRL5_VerifyFilesEachProblem(t *testing.T) {
	t.Parallel()
	idemKey := indexKey(replay.IdempotencyPrefix + "hello-2026-01-05")
	// Seq 10 is an attempt_retry_scheduled of jobRetry; seq 41 starts
	// wfHello with an idempotency key; seq 44 completes its step job
	// stepHello and seq 46 the workflow (fixture). Resealing seq 10 gives
	// it another crc: seq 11's prevSum no longer matches, a second
	// problem, of the chain.
	chain11 := func(t *testing.T, probs []verifyProblem) { wantProblem(t, probs, "chain", 11, jobBuried) }
	cases := []struct {
		name   string
		edit   func(t *testing.T, db *pebble.DB)
		check  string
		seq    uint64
		stream string
		reason string
		also   func(t *testing.T, probs []verifyProblem) // the other problem, if there is one
	}{
		{"chain", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 10, func(e *record.Envelope) { e.PrevSum ^= 1 })
		}, "chain", 10, jobRetry, "chain: prevSum", chain11},
		{"time order", func(t *testing.T, db *pebble.DB) {
			reseal(t, db, 10, func(e *record.Envelope) { e.At = t0.UnixNano() })
		}, "time order", 10, jobRetry, "before the previous record", chain11},
		{"stream index entry dropped", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(streamKey(jobRetry, 10), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, "stream index", 10, jobRetry, "no s/ index entry", nil},
		{"malformed index key", func(t *testing.T, db *pebble.DB) {
			set(t, db, []byte("t/\x7fx"), []byte("x"))
		}, "terminal index", 0, "", "malformed index key", nil},
		{"job consumed attempts", func(t *testing.T, db *pebble.DB) {
			editSummary(t, db, jobRetry, func(s *replay.JobSummary) { s.Consumed = 1 })
		}, "terminal index", 14, jobRetry, "says 2 attempts (1 consumed), replay 2 (2)", nil},
		{"job workflow", func(t *testing.T, db *pebble.DB) {
			editSummary(t, db, stepHello, func(s *replay.JobSummary) { s.WorkflowID = wfReport })
		}, "terminal index", 44, wfHello, `workflow "` + wfReport + `"`, nil},
		{"workflow status", func(t *testing.T, db *pebble.DB) {
			editWorkflowSummary(t, db, wfHello, func(s *replay.WorkflowSummary) { s.Status = replay.WorkflowCancelled })
		}, "terminal index", 46, wfHello, "terminal-index status cancelled, replay says completed", nil},
		{"workflow deadline", func(t *testing.T, db *pebble.DB) {
			editWorkflowSummary(t, db, wfHello, func(s *replay.WorkflowSummary) { s.DeadlineAt = t0.UnixNano() })
		}, "terminal index", 46, wfHello, "deadline_at", nil},
		{"idempotency key not reserved", func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(idemKey, pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, "terminal index", 41, wfHello, "not reserved in the terminal index", nil},
		{"idempotency key reserved for another", func(t *testing.T, db *pebble.DB) {
			v, err := replay.EncodeIdempotent(replay.Idempotent{WorkflowID: wfReport, Name: "hello"})
			if err != nil {
				t.Fatal(err)
			}
			set(t, db, idemKey, v)
		}, "terminal index", 41, wfHello, "reserved for workflow " + wfReport + ", used by " + wfHello, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := fixture(t)
			editStore(t, fs, fixtureDir, func(db *pebble.DB) { c.edit(t, db) })
			code, probs, ok := verifyJSON(t, fs)
			want := 1
			if c.also != nil {
				want = 2
				c.also(t, probs)
			}
			if code != qctl.ExitFindings || ok || len(probs) != want {
				t.Fatalf("verify: exit %d, ok %v, problems %+v; want exit 1 and %d problems", code, ok, probs, want)
			}
			wantProblem(t, probs, c.check, c.seq, c.stream)
			if !strings.Contains(probs[0].Reason, c.reason) {
				t.Errorf("problem %q does not say %q", probs[0].Reason, c.reason)
			}
		})
	}
}
