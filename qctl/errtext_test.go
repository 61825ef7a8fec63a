package qctl_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
)

// TestErrorCodeShownOnce: a settlement whose message is a handler error's
// Error() ("permanent CODE: message", "retryable CODE: message", or
// "CODE: message") shows the code once in the tables; a message that
// merely starts with the code's letters keeps them. JSON keeps the
// recorded message.
func TestErrorCodeShownOnce(t *testing.T) {
	t.Parallel()
	const id = "job_01KE4Z6R000000000000CSVA"
	for _, c := range []struct {
		msg  string // as recorded, with code BAD_INPUT
		want string // the ERROR column
	}{
		{"permanent BAD_INPUT: broken.csv: line 3", "BAD_INPUT: broken.csv: line 3"},
		{"retryable BAD_INPUT: broken.csv: line 3", "BAD_INPUT: broken.csv: line 3"},
		{"BAD_INPUT: broken.csv: line 3", "BAD_INPUT: broken.csv: line 3"},
		{"permanent BAD_INPUT", "BAD_INPUT"},
		{"BAD_INPUTS: broken.csv", "BAD_INPUT: BAD_INPUTS: broken.csv"},
	} {
		fs := vfs.NewMem()
		f := newFx(t, fs, fixtureDir)
		f.append(nil, f.enqueue(id, id, "import_csv", "default", 0, 0, nil))
		tok := f.start(id, id, 1)
		f.append(nil, rec(id, &record.AttemptBuried{Outcome: record.Outcome{
			JobID: id, Token: tok, Code: "BAD_INPUT", Class: "permanent", Error: c.msg, Joined: true,
		}}))
		f.close()

		_, stdout, _ := run(t, fs, "-d", fixtureDir, "jobs")
		if _, row, _ := strings.Cut(stdout, "\n"+id); !strings.HasSuffix(strings.TrimRight(row, "\n"), "  "+c.want) {
			t.Errorf("error %q: jobs does not end its row with %q:\n%s", c.msg, c.want, stdout)
		}
		// (show's timeline prints the record's fields as recorded.)
		if _, stdout, _ := run(t, fs, "-d", fixtureDir, "show", id); strings.Contains(stdout, "BAD_INPUT: permanent") || !strings.Contains(stdout, c.want) {
			t.Errorf("error %q: show repeats or drops the code:\n%s", c.msg, stdout)
		}
		if _, stdout, _ := run(t, fs, "--json", "-d", fixtureDir, "jobs"); !strings.Contains(stdout, `"last_code":"BAD_INPUT","last_error":"`+c.msg+`"`) {
			t.Errorf("jobs --json changed the recorded error %q:\n%s", c.msg, stdout)
		}
	}
}
