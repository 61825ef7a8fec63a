package sim

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestRerunCommandQuoted runs the printed rerun command through a POSIX
// shell, with cd and go replaced by functions that print their
// arguments: a subtest name with a single quote (t.Run("customer's
// order") is "customer's_order") and a package directory with a space
// and a quote must reach cd and go test as one word each, and the -run
// pattern must select the test. Unquoted, the quote in the name ended
// the pattern's quoting and the command was a shell syntax error.
func TestRerunCommandQuoted(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh:", err)
	}
	dir := t.TempDir() + "/pkg dir's"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	const name = "TestOrders/customer's_order/seed=0x2a"
	cmd := rerunCommand(0x2a, name)
	script := `cd() { printf 'cd=%s\n' "$1"; }
go() { for a in "$@"; do printf 'arg=%s\n' "$a"; done; printf 'seed=%s\n' "$QUIRE_SEED"; }
` + cmd
	out, err := exec.Command(sh, "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"cd=" + dir, "arg=test", "arg=-run", "", "arg=.", "seed=0x2a"}
	if len(lines) != len(want) {
		t.Fatalf("%s: the shell saw\n%s\nwant %d lines", cmd, out, len(want))
	}
	for i, l := range lines {
		if i == 3 {
			continue // the pattern, checked below
		}
		if l != want[i] {
			t.Fatalf("%s: line %d is %q, want %q; the shell saw\n%s", cmd, i, l, want[i], out)
		}
	}
	pattern, ok := strings.CutPrefix(lines[3], "arg=")
	if !ok {
		t.Fatalf("%s: no pattern argument; the shell saw\n%s", cmd, out)
	}
	// go test matches each level of the name against its level of the
	// pattern.
	levels, pats := strings.Split(name, "/"), strings.Split(pattern, "/")
	if len(levels) != len(pats) {
		t.Fatalf("pattern %q has %d levels, the name %q %d", pattern, len(pats), name, len(levels))
	}
	for i := range levels {
		if !regexp.MustCompile(pats[i]).MatchString(levels[i]) {
			t.Fatalf("pattern level %q does not match %q", pats[i], levels[i])
		}
	}
}

// TestShellWord pins that a usual path is printed as is (what the
// failure report has always printed) and anything else quoted.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/quire-sim-TestX_seed_0x1-0x1/current": "/tmp/quire-sim-TestX_seed_0x1-0x1/current",
		"/tmp/a b":  `'/tmp/a b'`,
		"/tmp/it's": `'/tmp/it'\''s'`,
		"":          "''",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
