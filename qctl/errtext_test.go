package qctl_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
)

// TestErrorCodeShownOnce: a settlement whose message is a handler error's
// Error() ("permanent CODE: message") shows the code once in the tables;
// JSON keeps the recorded message.
func TestErrorCodeShownOnce(t *testing.T) {
	t.Parallel()
	const id = "job_01KE4Z6R000000000000CSVA"
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	f.append(nil, f.enqueue(id, id, "import_csv", "default", 0, 0, nil))
	tok := f.start(id, id, 1)
	f.append(nil, rec(id, &record.AttemptBuried{Outcome: record.Outcome{
		JobID: id, Token: tok, Code: "BAD_INPUT", Class: "permanent", Error: "permanent BAD_INPUT: broken.csv: line 3", Joined: true,
	}}))
	f.close()

	for _, args := range [][]string{{"-d", fixtureDir, "jobs"}, {"-d", fixtureDir, "show", id}} {
		_, stdout, _ := run(t, fs, args...)
		// (show's timeline prints the record's fields as recorded.)
		if strings.Contains(stdout, "BAD_INPUT: permanent") || !strings.Contains(stdout, "BAD_INPUT: broken.csv: line 3") {
			t.Errorf("qctl %s repeats or drops the code:\n%s", strings.Join(args, " "), stdout)
		}
	}
	if _, stdout, _ := run(t, fs, "--json", "-d", fixtureDir, "jobs"); !strings.Contains(stdout, `"last_code":"BAD_INPUT","last_error":"permanent BAD_INPUT: broken.csv: line 3"`) {
		t.Errorf("jobs --json changed the recorded error:\n%s", stdout)
	}
}
