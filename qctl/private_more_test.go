package qctl_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/qctl"
)

// WF-12: "_" keys of a dispatch's state are stored but never shown. The
// dispatch's state is journaled in workflow_started only: a step job's
// job_enqueued carries no payload (its handler reads the public state),
// a SubWorkflow child starts from the parent's public state, and step
// outputs and signal payloads have their "_" keys dropped before they are
// journaled (WF-3, WF-6). No command shows a private key of the state:
// not the workflow's own show or events, not its step job's show, not
// the listings, the state fold or verify, in text or in JSON.
func TestWF12_NoCommandShowsAPrivateStateKey(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	const wf, step = "wf_01KE4Z6R0000000000000SEC", "job_01KE4Z6R00000000000STSEC"
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: f.now()}))
	f.append(nil,
		rec(wf, &record.WorkflowStarted{WorkflowID: wf, Name: "import", DefinitionHash: "sha256:01", Steps: 1, At: f.now(),
			State: value(t, map[string]any{"source": "s3://bucket/x", "_import_token": "k1-hunter2"})}),
		f.enqueue(wf, step, "import/fetch", "default", 0, 0, func(b *record.JobEnqueued) { b.WorkflowID, b.Payload = wf, nil }))
	f.close()

	for _, args := range [][]string{
		{"show", step}, {"events", "--stream", wf}, {"events", "--kind", "workflow_started"}, {"events", "--from", "2", "--to", "2"},
		{"workflows"}, {"jobs"}, {"timers"}, {"deadlines"}, {"shutdowns"},
	} {
		for _, json := range []bool{false, true} {
			a := append([]string{"-d", fixtureDir}, args...)
			if json {
				a = append([]string{"--json"}, a...)
			}
			code, stdout, stderr := run(t, fs, a...)
			if code != qctl.ExitOK {
				t.Fatalf("qctl %s: exit %d: %s", strings.Join(a, " "), code, stderr)
			}
			if strings.Contains(stdout+stderr, "hunter2") || strings.Contains(stdout+stderr, "_import_token") {
				t.Errorf("qctl %s shows a private key:\n%s%s", strings.Join(a, " "), stdout, stderr)
			}
			if strings.HasPrefix(args[0], "events") && !strings.Contains(stdout, "s3://bucket/x") {
				t.Errorf("qctl %s does not show the public state:\n%s", strings.Join(a, " "), stdout)
			}
		}
	}
	for _, args := range [][]string{{"inspect", fixtureDir}, {"state", fixtureDir}, {"verify", fixtureDir}} {
		for _, a := range [][]string{args, append([]string{"--json"}, args...)} {
			code, stdout, stderr := run(t, fs, a...)
			if code != qctl.ExitOK {
				t.Fatalf("qctl %s: exit %d: %s", strings.Join(a, " "), code, stderr)
			}
			if strings.Contains(stdout+stderr, "hunter2") || strings.Contains(stdout+stderr, "_import_token") {
				t.Errorf("qctl %s shows a private key:\n%s%s", strings.Join(a, " "), stdout, stderr)
			}
		}
	}
	// --json: the body's state is the public state itself.
	_, stdout, _ := run(t, fs, "--json", "-d", fixtureDir, "events", "--kind", "workflow_started")
	if !strings.Contains(stdout, `"state":{"source":"s3://bucket/x"}`) {
		t.Errorf("events --json: the state is not the public state:\n%s", stdout)
	}
}

// WF-12 hides the "_" keys of a workflow's state, nothing else. A job's
// payload is not a workflow state: its handler receives it whole (Handle
// decodes all of it into its type), so a "_" key in it is data the job
// runs on, and qctl shows it, as it shows a job's output. A signal's
// payload and a step's output in the journal have no "_" keys (the api
// drops them before it journals them, WF-3, WF-6, WF-12); one that does
// was written so, and qctl shows the journal as it is, without saying
// that anything was left out. Only the state says "private keys not
// shown".
func TestWF12_OnlyTheStateHidesUnderscoreKeys(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	f := newFx(t, fs, fixtureDir)
	const wf, job = "wf_01KE4Z6R0000000000000SIG", "job_01KE4Z6R0000000000000PAY"
	f.append(nil, rec(engine, &record.RunStarted{RunID: "run_01KE4Z6R00000000000000R1", Version: "0.1.0", At: f.now()}))
	f.append(nil, f.enqueue(job, job, "send_email", "default", 0, 0, func(b *record.JobEnqueued) {
		b.Payload = value(t, map[string]any{"to": "ann@example.com", "_trace": "payload-7"})
	}))
	tok := f.start(job, job, 1)
	f.append(nil, rec(job, &record.AttemptSucceeded{Outcome: record.Outcome{JobID: job, Token: tok, Joined: true},
		Output: value(t, map[string]any{"_receipt": "output-8", "sent": true})}))
	f.append(nil,
		rec(wf, &record.WorkflowStarted{WorkflowID: wf, Name: "approval", DefinitionHash: "sha256:02", Steps: 1, At: f.now(),
			State: value(t, map[string]any{"doc": "contract-7", "_secret": "state-9"})}),
		rec(wf, &record.WorkflowWaiting{WorkflowID: wf, Step: 0, Status: "waiting_for_signal", Signals: []string{"approve"}}))
	f.append(nil, rec(wf, &record.SignalReceived{WorkflowID: wf, Name: "later", Payload: value(t, map[string]any{"by": "bob", "_note": "signal-6"})}))
	f.close()

	code, stdout, stderr := run(t, fs, "-d", fixtureDir, "events")
	if code != qctl.ExitOK {
		t.Fatalf("events: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`payload={"_trace":"payload-7","to":"ann@example.com"}`,
		`output={"_receipt":"output-8","sent":true}`,
		`state={"doc":"contract-7"} (private keys not shown)`,
		`payload={"_note":"signal-6","by":"bob"}`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("events does not say %s:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "state-9") || strings.Contains(stdout, "_secret") {
		t.Errorf("events shows the state's private key:\n%s", stdout)
	}
	if n := strings.Count(stdout, "(private keys not shown)"); n != 1 {
		t.Errorf("events says %d times that private keys were left out, want once (the state):\n%s", n, stdout)
	}

	_, stdout, _ = run(t, fs, "--json", "-d", fixtureDir, "events")
	for _, want := range []string{
		`"payload":{"_trace":"payload-7","to":"ann@example.com"}`,
		`"output":{"_receipt":"output-8","sent":true}`,
		`"state":{"doc":"contract-7"}`,
		`"payload":{"_note":"signal-6","by":"bob"}`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("events --json does not say %s:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "state-9") || strings.Contains(stdout, "_secret") {
		t.Errorf("events --json shows the state's private key:\n%s", stdout)
	}
	// show: the job's timeline and the workflow's, each as events.
	_, stdout, _ = run(t, fs, "-d", fixtureDir, "show", job)
	if !strings.Contains(stdout, `payload={"_trace":"payload-7","to":"ann@example.com"}`) {
		t.Errorf("show %s does not show the payload whole:\n%s", job, stdout)
	}
	_, stdout, _ = run(t, fs, "-d", fixtureDir, "show", wf)
	if !strings.Contains(stdout, `payload={"_note":"signal-6","by":"bob"}`) || strings.Contains(stdout, "state-9") {
		t.Errorf("show %s: want the signal's payload whole and the state's private key hidden:\n%s", wf, stdout)
	}
}
