package qctl_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quire-dev/quire/journal/record"
)

// TestEventsRetryPolicyShowsItsJitter: a retry policy with jitter reads
// "±ratio" after its backoff; JSON carries the ratio.
func TestEventsRetryPolicyShowsItsJitter(t *testing.T) {
	t.Parallel()
	const id = "job_01KE4Z6R000000000000JITR"
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, f.enqueue(id, id, "send_email", "default", 0, 0, func(b *record.JobEnqueued) { b.Retry.JitterRatio = 0.25 }))
	f.close()
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "events", "--stream", id)
	if want := " retry=3×exponential(1s..1m0s)±0.25 "; !strings.Contains(stdout, want) {
		t.Errorf("events does not say %q:\n%s%s", want, stdout, stderr)
	}
	_, stdout, stderr = run(t, fs, "--json", "-d", fixtureDir, "events", "--stream", id)
	if want := `"jitter":0.25`; !strings.Contains(stdout, want) {
		t.Errorf("events --json does not say %q:\n%s%s", want, stdout, stderr)
	}
}

// TestEventsUserValuePreviewIsCut: people see a user value's JSON cut to
// 60 bytes before its "…"; JSON carries it whole.
func TestEventsUserValuePreviewIsCut(t *testing.T) {
	t.Parallel()
	const id = "job_01KE4Z6R000000000000LONG"
	payload := map[string]any{"body": strings.Repeat("lorem ipsum ", 20)}
	whole, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil, f.enqueue(id, id, "send_email", "default", 0, 0, func(b *record.JobEnqueued) { b.Payload = value(t, payload) }))
	f.close()
	_, stdout, stderr := run(t, fs, "-d", fixtureDir, "events", "--stream", id)
	if want := " payload=" + string(whole[:59]) + "…\n"; !strings.Contains(stdout, want) {
		t.Errorf("events does not say %q:\n%s%s", want, stdout, stderr)
	}
	_, stdout, stderr = run(t, fs, "--json", "-d", fixtureDir, "events", "--stream", id)
	if want := `"payload":` + string(whole); !strings.Contains(stdout, want) {
		t.Errorf("events --json does not carry the payload whole:\n%s%s", stdout, stderr)
	}
}

// TestEventsUserValueThatIsNotShowable: a payload that is msgpack but not
// representable in JSON (a NaN) is shown by its size; one that is not
// msgpack at all says so, and JSON marks it undecodable.
func TestEventsUserValueThatIsNotShowable(t *testing.T) {
	t.Parallel()
	const nan, junk = "job_01KE4Z6R000000000000NANP", "job_01KE4Z6R000000000000JUNK"
	fs := fixture(t)
	f := newFx(t, fs, fixtureDir)
	f.at(time.Hour + 3*time.Second)
	f.append(nil,
		f.enqueue(nan, nan, "send_email", "default", 0, 0, func(b *record.JobEnqueued) { b.Payload = value(t, math.NaN()) }),
		f.enqueue(junk, junk, "send_email", "default", 0, 0, func(b *record.JobEnqueued) { b.Payload = []byte{0xc1, 0xc1} }))
	f.close()
	for id, want := range map[string][2]string{
		nan:  {" payload=<9 bytes>\n", `"payload":{"bytes":9}`},
		junk: {" payload=<2 bytes, not msgpack>\n", `"payload":{"bytes":2,"undecodable":true}`},
	} {
		_, stdout, stderr := run(t, fs, "-d", fixtureDir, "events", "--stream", id)
		if !strings.Contains(stdout, want[0]) {
			t.Errorf("events --stream %s does not say %q:\n%s%s", id, want[0], stdout, stderr)
		}
		_, stdout, stderr = run(t, fs, "--json", "-d", fixtureDir, "events", "--stream", id)
		if !strings.Contains(stdout, want[1]) {
			t.Errorf("events --json --stream %s does not say %q:\n%s%s", id, want[1], stdout, stderr)
		}
	}
}
