package qctl_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// damagedSeq is nightly_sync's attempt_retry_scheduled in the fixture: a
// record of a workflow's stream, after the fixture's snapshot (seq 19),
// while the attempt of its step job stepSync is open.
const damagedSeq = 34

// flipRecord makes record seq fail its checksum, as media damage does:
// one byte near the end of its value, before the crc.
func flipRecord(t *testing.T, db *pebble.DB, seq uint64) {
	t.Helper()
	v := get(t, db, record.LogKey(seq))
	v[len(v)-6] ^= 0x40
	set(t, db, record.LogKey(seq), v)
}

// damagedFixture returns the fixture with record seq damaged.
func damagedFixture(t *testing.T, seq uint64) vfs.FS {
	t.Helper()
	fs := fixture(t)
	editStore(t, fs, fixtureDir, func(db *pebble.DB) { flipRecord(t, db, seq) })
	return fs
}

// streamKey is the s/ index entry of record seq of stream id.
func streamKey(id string, seq uint64) []byte {
	k := binary.AppendUvarint([]byte("s/"), uint64(len(id)))
	return binary.BigEndian.AppendUint64(append(k, id...), seq)
}

// reseal rewrites record seq after f changed its envelope, with a valid
// checksum: the record passes its own checks.
func reseal(t *testing.T, db *pebble.DB, seq uint64, f func(e *record.Envelope)) {
	t.Helper()
	env, err := record.ParseEnvelope(seq, get(t, db, record.LogKey(seq)), record.RecordBytesMaxDefault)
	if err != nil {
		t.Fatal(err)
	}
	f(&env)
	v, _ := record.AppendEnvelope(nil, seq, env.PrevSum, env.At, record.Prepared{Kind: env.Kind, Stream: env.Stream, Payload: env.Payload})
	set(t, db, record.LogKey(seq), v)
}

var anyDigest = regexp.MustCompile(`[0-9a-f]{64}`)

// TestRL5_QuarantineGolden pins what the commands print on a journal
// with one damaged record in a workflow's stream: the stream set aside as
// the engine's Open sets it aside (RL-5, spec/reliability.md §4.4), its
// workflow and job as corrupt, everything else in full, and exit 1.
func TestRL5_QuarantineGolden(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"quarantine_inspect", []string{"inspect", fixtureDir}},
		{"quarantine_jobs", []string{"-d", fixtureDir, "jobs"}},
		{"quarantine_workflows", []string{"-d", fixtureDir, "workflows"}},
		{"quarantine_show_wf", []string{"-d", fixtureDir, "show", wfNightly}},
		{"quarantine_show_step", []string{"-d", fixtureDir, "show", stepSync}},
		{"quarantine_state", []string{"state", fixtureDir}},
		{"quarantine_events", []string{"-d", fixtureDir, "events", "--from", "32", "--to", "36"}},
	} {
		for _, asJSON := range []bool{false, true} {
			name, args := c.name, c.args
			if asJSON {
				name, args = name+".json", append([]string{"--json"}, args...)
			}
			code, stdout, stderr := run(t, fs, args...)
			if code != qctl.ExitFindings {
				t.Errorf("qctl %s: exit %d, want %d; stderr: %s", strings.Join(args, " "), code, qctl.ExitFindings, stderr)
			}
			got := fmt.Sprintf("$ qctl %s\n# exit %d\n%s# stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
			checkGolden(t, name, anyDigest.ReplaceAllString(got, "<digest>"))
		}
	}
}

// TestRL5_InspectListsQuarantinedStreams: inspect names the stream the
// damage sets aside, the damaged seq, the reason and the jobs and
// workflow it stops, in text and JSON; counts them as corrupt; reports
// the rest of the journal as on the sound journal; and exits 1, as a
// finding (spec/reliability.md §4.4: the stream "is listed in the open
// report, Status and qctl inspect"; RL-5).
func TestRL5_InspectListsQuarantinedStreams(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq)
	code, stdout, stderr := run(t, fs, "inspect", fixtureDir)
	if code != qctl.ExitFindings {
		t.Fatalf("inspect: exit %d, want %d\n%s%s", code, qctl.ExitFindings, stdout, stderr)
	}
	for _, want := range []string{
		"records        66 (", ", 1 damaged\n",
		"jobs           pending 3  processing 1  buried 1  completed 5  corrupt 1\n",
		"  completed 1  cancelled 0  corrupt 1\n",
		"quarantined    1 stream set aside",
		"QUARANTINED", wfNightly + "  34   workflow nightly_sync (running), job " + stepSync + " sync (processing)  checksum record seq 34",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect does not say %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, wfNightly+" from seq 34") || !strings.Contains(stderr, "qctl verify db lists every problem") {
		t.Errorf("inspect's stderr does not name the stream and point at verify: %q", stderr)
	}
	// The other streams read as on the sound journal.
	_, sound, _ := run(t, fixture(t), "inspect", fixtureDir)
	for _, key := range []string{"paused queues", "timers", "next deadline", "last run", "last shutdown"} {
		if a, b := kvLine(t, sound, key), kvLine(t, stdout, key); a != b {
			t.Errorf("inspect's %s line: %q on the damaged journal, %q on the sound one", key, b, a)
		}
	}

	code, stdout, _ = run(t, fs, "--json", "inspect", fixtureDir)
	var got struct {
		Records        int64            `json:"records"`
		RecordsDamaged int64            `json:"records_damaged"`
		Jobs           map[string]int64 `json:"jobs"`
		Workflows      map[string]int64 `json:"workflows"`
		Quarantined    []struct {
			Stream   string `json:"stream"`
			Seq      uint64 `json:"seq"`
			Reason   string `json:"reason"`
			Workflow *struct {
				ID, Name, Status string
			} `json:"workflow"`
			Jobs []struct {
				ID, Handler, Status string
			} `json:"jobs"`
		} `json:"quarantined"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != qctl.ExitFindings {
		t.Fatalf("inspect --json: exit %d, %v\n%s", code, err, stdout)
	}
	if got.Records != 66 || got.RecordsDamaged != 1 || got.Jobs["corrupt"] != 1 || got.Workflows["corrupt"] != 1 || len(got.Quarantined) != 1 {
		t.Fatalf("inspect --json: %+v", got)
	}
	q := got.Quarantined[0]
	if q.Stream != wfNightly || q.Seq != damagedSeq || !strings.HasPrefix(q.Reason, "checksum record seq 34") ||
		q.Workflow == nil || q.Workflow.ID != wfNightly || q.Workflow.Name != "nightly_sync" || q.Workflow.Status != "running" ||
		len(q.Jobs) != 1 || q.Jobs[0].ID != stepSync || q.Jobs[0].Handler != "sync" || q.Jobs[0].Status != "processing" {
		t.Fatalf("inspect --json quarantined: %+v (workflow %+v)", q, q.Workflow)
	}

	// A sound journal lists none, and exits 0.
	code, stdout, _ = run(t, fixture(t), "--json", "inspect", fixtureDir)
	if code != qctl.ExitOK || !strings.Contains(stdout, `"records_damaged":0,`) || !strings.Contains(stdout, `"quarantined":[],`) {
		t.Fatalf("inspect --json of the sound journal: exit %d\n%s", code, stdout)
	}
}

// kvLine returns the value of key in a command's key-value lines.
func kvLine(t *testing.T, out, key string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, key+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q line in:\n%s", key, out)
	return ""
}

// jsonByID maps the id of each JSON line of out to the line.
func jsonByID(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if o.ID != "" {
			m[o.ID] = line
		}
	}
	return m
}

// TestRL5_CorruptStatus: jobs, workflows and state read a journal whose
// damage the journal attributes to one stream. That stream's job and
// workflow show with status corrupt and the damage, as api.JobCorrupt and
// api.WorkflowCorrupt do, and --status corrupt selects them; every other
// job and workflow reads exactly as on the sound journal; show, timers and
// deadlines of the rest print what they print on the sound journal. Each
// exits 1 (RL-5, spec/reliability.md §4.4: other streams run).
func TestRL5_CorruptStatus(t *testing.T) {
	t.Parallel()
	sound, fs := fixture(t), damagedFixture(t, damagedSeq)
	const corrupt = `"corrupt":{"seq":34,"stream":"` + wfNightly + `","reason":"checksum record seq 34: `
	for _, c := range []struct {
		args    []string
		corrupt string // the id that reads as corrupt
	}{
		{[]string{"--json", "-d", fixtureDir, "jobs"}, stepSync},
		{[]string{"--json", "-d", fixtureDir, "workflows"}, wfNightly},
		{[]string{"--json", "state", fixtureDir}, stepSync},
		{[]string{"--json", "state", fixtureDir}, wfNightly},
	} {
		args := strings.Join(c.args, " ")
		code, stdout, stderr := run(t, fs, c.args...)
		if code != qctl.ExitFindings || !strings.Contains(stderr, wfNightly+" from seq 34") {
			t.Fatalf("qctl %s: exit %d, stderr %q", args, code, stderr)
		}
		got := jsonByID(t, stdout)
		_, soundOut, _ := run(t, sound, c.args...)
		want := jsonByID(t, soundOut)
		if line := got[c.corrupt]; !strings.Contains(line, `"status":"corrupt"`) || !strings.Contains(line, corrupt) {
			t.Errorf("qctl %s: %s reads %s", args, c.corrupt, line)
		}
		for id, line := range want {
			if id != stepSync && id != wfNightly && got[id] != line {
				t.Errorf("qctl %s: %s reads\n%s\non the damaged journal,\n%s\non the sound one", args, id, got[id], line)
			}
		}
		if len(got) != len(want) {
			t.Errorf("qctl %s: %d ids on the damaged journal, %d on the sound one", args, len(got), len(want))
		}
	}
	for _, args := range [][]string{
		{"--json", "-d", fixtureDir, "jobs", "--status", "corrupt"},
		{"--json", "-d", fixtureDir, "workflows", "--status", "corrupt"},
	} {
		code, stdout, _ := run(t, fs, args...)
		if lines := strings.Split(strings.TrimSpace(stdout), "\n"); code != qctl.ExitFindings || len(lines) != 1 || !strings.Contains(lines[0], corrupt) {
			t.Errorf("qctl %s: exit %d\n%s", strings.Join(args, " "), code, stdout)
		}
	}
	for _, args := range [][]string{
		{"-d", fixtureDir, "show", jobRunning},
		{"-d", fixtureDir, "show", wfApproval},
		{"-d", fixtureDir, "timers"},
		{"-d", fixtureDir, "deadlines"},
	} {
		code, stdout, stderr := run(t, fs, args...)
		_, want, _ := run(t, sound, args...)
		if code != qctl.ExitFindings || stdout != want || !strings.Contains(stderr, "1 stream set aside") {
			t.Errorf("qctl %s: exit %d, stderr %q\n%s\nwant as on the sound journal:\n%s", strings.Join(args, " "), code, stderr, stdout, want)
		}
	}

	// show of the stream set aside: corrupt, its records up to the
	// damaged one, then the damage.
	code, stdout, _ := run(t, fs, "-d", fixtureDir, "show", stepSync)
	for _, want := range []string{
		"status    corrupt\n",
		"stuck     corrupt: seq 34 of stream " + wfNightly + " is damaged (checksum record seq 34",
		"corrupt      -", // its open attempt never settles
		"\n33   ", "\n34   -                         -    damaged          checksum record seq 34",
	} {
		if code != qctl.ExitFindings || !strings.Contains(stdout, want) {
			t.Errorf("show %s: exit %d, does not say %q:\n%s", stepSync, code, want, stdout)
		}
	}
	if strings.Contains(stdout, "\n35 ") {
		t.Errorf("show %s lists records past the damage:\n%s", stepSync, stdout)
	}
	code, stdout, _ = run(t, fs, "--json", "-d", fixtureDir, "show", wfNightly)
	if first, _, _ := strings.Cut(stdout, "\n"); code != qctl.ExitFindings || !strings.Contains(first, `"status":"corrupt"`) || !strings.Contains(first, corrupt) ||
		!strings.Contains(stdout, `{"type":"damaged","seq":34,"stream":"`+wfNightly+`"`) {
		t.Errorf("show --json %s: exit %d\n%s", wfNightly, code, stdout)
	}

	// Before the damage nothing is set aside.
	code, _, stderr := run(t, fs, "state", fixtureDir, "--at", "33")
	if code != qctl.ExitOK || stderr != "" {
		t.Errorf("state --at 33: exit %d, stderr %q", code, stderr)
	}
}

// TestRL5_DamagedFirstRecord: a stream whose first record is damaged is
// set aside with nothing known of it (api.Status still answers corrupt
// for its id). inspect lists it, and show of its id says it is corrupt
// rather than that the journal holds no such job (RL-5,
// spec/reliability.md §4.4).
func TestRL5_DamagedFirstRecord(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, 65) // jobRunning's job_enqueued
	code, stdout, _ := run(t, fs, "inspect", fixtureDir)
	if code != qctl.ExitFindings || !strings.Contains(stdout, jobRunning+"  65   nothing: no job or workflow had started in it") {
		t.Fatalf("inspect: exit %d\n%s", code, stdout)
	}
	code, stdout, stderr := run(t, fs, "-d", fixtureDir, "show", jobRunning)
	for _, want := range []string{"stream   " + jobRunning + "\n", "records  0\n", "status   corrupt\n", "\n65   -   -   damaged"} {
		if code != qctl.ExitFindings || !strings.Contains(stdout, want) {
			t.Errorf("show: exit %d, does not say %q:\n%s%s", code, want, stdout, stderr)
		}
	}
	if strings.Contains(stderr, "holds no job or workflow") {
		t.Errorf("show: %s", stderr)
	}
}

// TestRL5_UnattributableDamageRefuses: the damage spec/reliability.md
// §4.4 has the engine's Open refuse, because the order itself is in
// doubt, makes every command that replays the log, and events, refuse the
// journal (exit 5, naming the seq), while verify reports it (exit 1): damage in
// the engine's stream, a missing record, a damaged record the s/ index
// does not name, a sound record it does not name, and a chain broken
// between two records that each pass their checks (RL-5).
func TestRL5_UnattributableDamageRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		seq  uint64
		edit func(t *testing.T, db *pebble.DB)
	}{
		{"engine stream", 40, func(t *testing.T, db *pebble.DB) { flipRecord(t, db, 40) }}, // debug
		{"missing record", damagedSeq, func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(record.LogKey(damagedSeq), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}},
		{"damaged record without s/ entry", damagedSeq, func(t *testing.T, db *pebble.DB) {
			flipRecord(t, db, damagedSeq)
			if err := db.Delete(streamKey(wfNightly, damagedSeq), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}},
		{"sound record without s/ entry", damagedSeq, func(t *testing.T, db *pebble.DB) {
			if err := db.Delete(streamKey(wfNightly, damagedSeq), pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}},
		{"chain break between sound records", damagedSeq, func(t *testing.T, db *pebble.DB) {
			reseal(t, db, damagedSeq, func(e *record.Envelope) { e.PrevSum ^= 1 })
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fs := fixture(t)
			editStore(t, fs, fixtureDir, func(db *pebble.DB) { c.edit(t, db) })
			says := fmt.Sprintf("db is corrupt: journal: corrupt at seq %d", c.seq)
			for _, args := range [][]string{
				{"inspect", fixtureDir}, {"--json", "inspect", fixtureDir}, {"state", fixtureDir},
				{"-d", fixtureDir, "jobs"}, {"-d", fixtureDir, "workflows"}, {"-d", fixtureDir, "timers"},
				{"-d", fixtureDir, "deadlines"}, {"-d", fixtureDir, "show", jobRunning},
				{"-d", fixtureDir, "events"}, {"--json", "-d", fixtureDir, "events"},
			} {
				wantExit(t, fs, qctl.ExitUnreadable, says, args...)
			}
			code, probs, ok := verifyJSON(t, fs)
			if code != qctl.ExitFindings || ok || len(probs) == 0 {
				t.Fatalf("verify: exit %d, ok %v, problems %+v", code, ok, probs)
			}
		})
	}
}

// TestRL5_VerifyNamesQuarantinedDamage: damage the other commands read
// past is still a problem verify names, with its seq and stream, and
// exits 1 on (RL-5: qctl verify exits non-zero on any of it). Its replay
// sets the stream aside as the engine's Open does (spec/reliability.md
// §4.4) and checks the other streams to the end: the replay and terminal
// index checks hold, and the snapshot before the damage is compared.
func TestRL5_VerifyNamesQuarantinedDamage(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq)
	code, probs, ok := verifyJSON(t, fs)
	if code != qctl.ExitFindings || ok {
		t.Fatalf("verify: exit %d, ok %v", code, ok)
	}
	wantProblem(t, probs, "records", damagedSeq, wfNightly)
	if len(probs) != 1 {
		t.Errorf("verify: problems %+v, want only the damaged record", probs)
	}
	_, stdout, _ := run(t, fs, "--json", "verify", fixtureDir)
	for _, want := range []string{`"replayed":66,`, `"index_checked":7,`, `"snapshots_compared":1,`,
		`"terminal_index":true,`, `"replay":true}`, `"quarantined":[{"seq":34,"stream":"` + wfNightly + `","reason":"checksum record seq 34: `} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verify --json does not say %s:\n%s", want, stdout)
		}
	}
	_, stdout, _ = run(t, fs, "verify", fixtureDir)
	for _, want := range []string{
		"records         FAIL (1)\n",
		"terminal index  ok (7 entries, 7 checked against replay)\n",
		"replay          ok (66 records; stream " + wfNightly + " from seq 34 set aside, as the engine's Open does)\n",
		"records  34   " + wfNightly + "  checksum record seq 34: ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("verify does not say %q:\n%s", want, stdout)
		}
	}
}

// TestRL5_VerifyChecksPastQuarantinedDamage: the problems of other
// streams after a damaged record that replay sets aside are found as on a
// sound journal: a missing terminal-index entry and a transition replay
// refuses, each with its seq and stream, beside the damage itself (RL-5,
// spec/reliability.md §4.4: other streams run).
func TestRL5_VerifyChecksPastQuarantinedDamage(t *testing.T) {
	t.Parallel()
	fs := fixture(t)
	seq := settleBuriedAgain(t, fs)
	editStore(t, fs, fixtureDir, func(db *pebble.DB) {
		flipRecord(t, db, damagedSeq)
		if err := db.Delete(indexKey(wfHello), pebble.Sync); err != nil { // completed at seq 46
			t.Fatal(err)
		}
	})
	code, probs, ok := verifyJSON(t, fs)
	if code != qctl.ExitFindings || ok {
		t.Fatalf("verify: exit %d, ok %v", code, ok)
	}
	wantProblem(t, probs, "records", damagedSeq, wfNightly)
	wantProblem(t, probs, "terminal index", 46, wfHello)
	wantProblem(t, probs, "replay", seq, jobBuried)
	if len(probs) != 3 {
		t.Errorf("verify: problems %+v, want 3", probs)
	}
}

// eventRow is a line of events --json.
type eventRow struct {
	Type    string  `json:"type"`
	Seq     uint64  `json:"seq"`
	At      *string `json:"at"`
	Stream  string  `json:"stream"`
	Kind    string  `json:"kind"`
	Body    any     `json:"body"`
	Damaged *struct {
		Seq    uint64 `json:"seq"`
		Stream string `json:"stream"`
		Reason string `json:"reason"`
	} `json:"damaged"`
}

// eventRows parses the output of events --json.
func eventRows(t *testing.T, out string) []eventRow {
	t.Helper()
	var rows []eventRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r eventRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestRL5_EventsReadsPastDamage: events lists a journal with a damaged
// record that the journal attributes to one stream as the engine's Open
// reads it (spec/reliability.md §4.4): a row for the damaged record, with
// its seq, the stream the s/ index names, kind unknown and the damage, in
// text and JSON, and every other record exactly as on the sound journal;
// then it exits 1 and points at verify (RL-5: reported, never skipped).
func TestRL5_EventsReadsPastDamage(t *testing.T) {
	t.Parallel()
	sound, fs := fixture(t), damagedFixture(t, damagedSeq)
	for _, asJSON := range []bool{false, true} {
		args := []string{"-d", fixtureDir, "events"}
		if asJSON {
			args = append([]string{"--json"}, args...)
		}
		code, stdout, stderr := run(t, fs, args...)
		if code != qctl.ExitFindings || !strings.Contains(stderr, "seq 34 of "+wfNightly) || !strings.Contains(stderr, "qctl verify db lists every problem") {
			t.Fatalf("qctl %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		_, want, _ := run(t, sound, args...)
		got, wantLines := strings.Split(stdout, "\n"), strings.Split(want, "\n")
		if len(got) != len(wantLines) {
			t.Fatalf("qctl %s: %d lines on the damaged journal, %d on the sound one:\n%s", strings.Join(args, " "), len(got), len(wantLines), stdout)
		}
		for i := range got {
			damaged := strings.HasPrefix(got[i], " 34  ") || strings.HasPrefix(got[i], `{"type":"record","seq":34,`)
			if !damaged && got[i] != wantLines[i] {
				t.Errorf("qctl %s: line %d reads\n%s\non the damaged journal,\n%s\non the sound one", strings.Join(args, " "), i+1, got[i], wantLines[i])
			}
			if damaged && !asJSON {
				if f := strings.Fields(got[i]); len(f) < 6 || f[1] != "-" || f[2] != wfNightly || f[3] != "unknown" || f[4] != "damaged:" || !strings.HasPrefix(strings.Join(f[5:], " "), "checksum record seq 34: ") {
					t.Errorf("events: the row of the damaged record reads %q", got[i])
				}
			}
		}
		if !asJSON {
			continue
		}
		var row *eventRow
		for _, r := range eventRows(t, stdout) {
			if r.Seq == damagedSeq {
				row = &r
			}
		}
		if row == nil || row.Type != "record" || row.At != nil || row.Stream != wfNightly || row.Kind != "unknown" || row.Body != nil ||
			row.Damaged == nil || row.Damaged.Seq != damagedSeq || row.Damaged.Stream != wfNightly || !strings.HasPrefix(row.Damaged.Reason, "checksum record seq 34: ") {
			t.Errorf("events --json: the damaged record reads %+v", row)
		}
	}
}

// TestRL5_EventsFiltersDamage: the filters keep the damaged record
// whenever it may match (RL-5: damage is reported, never skipped): its
// kind cannot be read, so --kind keeps it; its time cannot be read, but
// At never goes back, so --since leaves it out only when the next sound
// record is before T, and --until never does. --stream reads past it in
// the stream's own scan; a range that starts after it does not show it,
// though the scan's chain check starts there (spec/reliability.md §4.4).
func TestRL5_EventsFiltersDamage(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq) // 33 at 10:01:31, 34 damaged, 35 at 10:02:30
	seqs := func(lo, hi uint64) []uint64 {
		var out []uint64
		for s := lo; s <= hi; s++ {
			out = append(out, s)
		}
		return out
	}
	for _, c := range []struct {
		args []string
		want []uint64
	}{
		{[]string{"--kind", "job_buried"}, []uint64{34, 37}},
		{[]string{"--stream", wfNightly}, seqs(31, 39)},
		{[]string{"--stream", wfNightly, "--from", "35"}, seqs(35, 39)},
		{[]string{"--stream", jobRunning}, []uint64{65, 66}},
		{[]string{"--from", "35", "--to", "36"}, []uint64{35, 36}},
		{[]string{"--from", "30", "--to", "33"}, seqs(30, 33)},
		{[]string{"--from", "33", "--limit", "2"}, []uint64{33, 34}},
		{[]string{"--since", "2026-01-05T10:01:35Z", "--limit", "2"}, []uint64{34, 35}},
		{[]string{"--since", "2026-01-05T10:02:30Z", "--limit", "2"}, []uint64{34, 35}},
		{[]string{"--since", "2026-01-05T10:02:31Z", "--limit", "2"}, []uint64{39, 40}},
		{[]string{"--stream", wfNightly, "--since", "2026-01-05T10:02:31Z"}, []uint64{39}},
		{[]string{"--from", "30", "--until", "2026-01-05T10:01:35Z"}, seqs(30, 34)},
		{[]string{"--from", "30", "--until", "2026-01-05T10:01:31Z"}, seqs(30, 32)},
	} {
		args := append([]string{"--json", "-d", fixtureDir, "events"}, c.args...)
		code, stdout, stderr := run(t, fs, args...)
		var got []uint64
		damaged := false
		for _, r := range eventRows(t, stdout) {
			got = append(got, r.Seq)
			damaged = damaged || r.Damaged != nil
		}
		want := qctl.ExitOK
		if slices.Contains(c.want, damagedSeq) {
			want = qctl.ExitFindings
		}
		if code != want || !slices.Equal(got, c.want) || damaged != (want == qctl.ExitFindings) {
			t.Errorf("qctl %s: exit %d, seqs %v; want exit %d, seqs %v; stderr %q", strings.Join(args, " "), code, got, want, c.want, stderr)
		}
	}

	// Two damaged records in a row: the second, past --to, ends the
	// listing, and the first is still listed.
	fs = damagedFixture(t, damagedSeq)
	editStore(t, fs, fixtureDir, func(db *pebble.DB) { flipRecord(t, db, damagedSeq+1) })
	for _, args := range [][]string{
		{"--json", "-d", fixtureDir, "events", "--stream", wfNightly, "--to", "34"},
		{"--json", "-d", fixtureDir, "events", "--to", "34"},
	} {
		code, stdout, _ := run(t, fs, args...)
		rows := eventRows(t, stdout)
		if len(rows) == 0 || code != qctl.ExitFindings || rows[len(rows)-1].Seq != damagedSeq || rows[len(rows)-1].Damaged == nil {
			t.Errorf("qctl %s: exit %d\n%s", strings.Join(args, " "), code, stdout)
		}
	}

	// The engine's stream cannot be set aside: its damage ends a listing
	// of that stream as it ends one of the log.
	fs = damagedFixture(t, 40)
	wantExit(t, fs, qctl.ExitUnreadable, "db is corrupt: journal: corrupt at seq 40", "-d", fixtureDir, "events", "--stream", engine)
}

// TestRL5_EventsFollowDamage: --follow lists a damaged record once, goes
// on with the records appended later, also when the record before a poll's
// first is damaged (the scan's chain check starts there), and exits 1 when
// interrupted (RL-5, spec/reliability.md §4.4).
func TestRL5_EventsFollowDamage(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, damagedSeq)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polls := 0
	var out, errb bytes.Buffer
	env := qctl.Env{Stdout: &out, Stderr: &errb, FS: fs, Now: fixtureNow, WaitFunc: func(ctx context.Context) error {
		polls++
		switch polls {
		case 1:
			appendDebug(t, fs, "FIRST")
			// Seq 66 was listed sound; damaged now, it is the record
			// before the next poll's first.
			editStore(t, fs, fixtureDir, func(db *pebble.DB) { flipRecord(t, db, 66) })
		default:
			cancel()
			return ctx.Err()
		}
		return nil
	}}
	code := qctl.Main(ctx, []string{"-d", fixtureDir, "events", "--follow", "--kind", "debug"}, env)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != qctl.ExitFindings || len(lines) != 4 || !strings.HasPrefix(lines[1], " 34  ") || !strings.Contains(lines[1], " unknown ") ||
		!strings.Contains(lines[2], "DEADLINE_HANDLER_FAILED") || !strings.HasPrefix(lines[3], " 67 ") || !strings.Contains(lines[3], "FIRST") {
		t.Fatalf("follow: exit %d, stderr %q, printed:\n%s", code, errb.String(), out.String())
	}
	if !strings.Contains(errb.String(), "seq 34 of "+wfNightly) {
		t.Errorf("follow: stderr %q", errb.String())
	}
}

// TestRL5_ShowDamageBeforeSnapshot: show starts from the newest snapshot
// (seq 19 in the fixture), but a record damaged before it, in a stream
// the journal attributes it to (jobBuried's attempt_buried, seq 15), sets
// that stream aside in every command that folds the whole log. show must
// say the same: the job corrupt as of its last good record, exit 1; not
// refuse the journal as unreadable (exit 5), which is only for damage
// that leaves the order in doubt (RL-5, spec/reliability.md §4.4).
func TestRL5_ShowDamageBeforeSnapshot(t *testing.T) {
	t.Parallel()
	fs := damagedFixture(t, 15)
	code, stdout, stderr := run(t, fs, "--json", "-d", fixtureDir, "jobs", "--status", "corrupt")
	if code != qctl.ExitFindings || !strings.Contains(stdout, `"id":"`+jobBuried+`","status":"corrupt"`) {
		t.Fatalf("jobs --status corrupt: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, fs, "-d", fixtureDir, "show", jobBuried)
	for _, want := range []string{"status    corrupt\n", "\n15   -   "} {
		if code != qctl.ExitFindings || !strings.Contains(stdout, want) {
			t.Errorf("show %s: exit %d, does not say %q:\n%s%s", jobBuried, code, want, stdout, stderr)
		}
	}
	code, stdout, stderr = run(t, fs, "--json", "-d", fixtureDir, "show", jobBuried)
	if code != qctl.ExitFindings || !strings.Contains(stdout, `"type":"show_job","id":"`+jobBuried+`","status":"corrupt"`) {
		t.Errorf("show --json %s: exit %d\n%s%s", jobBuried, code, stdout, stderr)
	}
}
