package qctl_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// WF-12: keys starting with "_" in a dispatch's state are stored but
// never shown. events and show print a workflow_started's public state,
// and say that private keys were left out; a state without any is shown
// whole, and an empty one as before.
func TestWF12_PrivateStateKeysAreNotShown(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	const secret, plain, empty, dup = "wf_01KE4Z6R0000000000000SEC", "wf_01KE4Z6R0000000000000PLN", "wf_01KE4Z6R0000000000000EMP",
		"wf_01KE4Z6R0000000000000DUP"
	f.append(nil,
		rec(secret, &record.WorkflowStarted{WorkflowID: secret, Name: "import", DefinitionHash: "sha256:01", Steps: 1, At: f.now(),
			State: value(t, map[string]any{"source": "s3://bucket/x", "_import_token": "k1-hunter2"})}),
		rec(plain, &record.WorkflowStarted{WorkflowID: plain, Name: "import", DefinitionHash: "sha256:01", Steps: 1, At: f.now(),
			State: value(t, map[string]any{"source": "s3://bucket/y"})}),
		rec(empty, &record.WorkflowStarted{WorkflowID: empty, Name: "import", DefinitionHash: "sha256:01", Steps: 1, At: f.now()}),
		// {"k": 1, "k": 2}: a repeated public key, which the public state
		// drops (the last one wins) though nothing private was there.
		rec(dup, &record.WorkflowStarted{WorkflowID: dup, Name: "import", DefinitionHash: "sha256:01", Steps: 1, At: f.now(),
			State: []byte{0x82, 0xa1, 'k', 0x01, 0xa1, 'k', 0x02}}))
	f.close()

	for _, args := range [][]string{
		{"-d", fixtureDir, "events"}, {"--json", "-d", fixtureDir, "events"},
		{"-d", fixtureDir, "show", secret}, {"--json", "-d", fixtureDir, "show", secret},
	} {
		code, stdout, stderr := run(t, fs, args...)
		if code != qctl.ExitOK {
			t.Fatalf("qctl %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		if strings.Contains(stdout, "hunter2") || strings.Contains(stdout, "_import_token") {
			t.Errorf("qctl %s shows a private key:\n%s", strings.Join(args, " "), stdout)
		}
		if !strings.Contains(stdout, "s3://bucket/x") {
			t.Errorf("qctl %s does not show the public state:\n%s", strings.Join(args, " "), stdout)
		}
	}
	_, stdout, _ := run(t, fs, "-d", fixtureDir, "events")
	if n := strings.Count(stdout, "(private keys not shown)"); n != 1 {
		t.Errorf("events says %d times that private keys were left out, want once (the state that had them):\n%s", n, stdout)
	}
	if !strings.Contains(stdout, "s3://bucket/y") {
		t.Errorf("events does not show a state without private keys:\n%s", stdout)
	}
	_, stdout, _ = run(t, fs, "-d", fixtureDir, "show", dup)
	if strings.Contains(stdout, "private keys not shown") || !strings.Contains(stdout, `"k":2`) {
		t.Errorf("show of a state with a repeated public key and no private one:\n%s", stdout)
	}
}
