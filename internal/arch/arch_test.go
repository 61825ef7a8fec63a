package arch

import (
	"os"
	"path/filepath"
	"testing"
)

// Third-party module paths named by the table. A path allows its
// subpackages too.
const (
	msgpack    = "github.com/vmihailenco/msgpack/v5"
	ulid       = "github.com/oklog/ulid/v2"
	pebble     = "github.com/cockroachdb/pebble/v2"
	pebbleVFS  = "github.com/cockroachdb/pebble/v2/vfs"
	crdbErrors = "github.com/cockroachdb/errors"
	kong       = "github.com/alecthomas/kong"
	rapid      = "pgregory.net/rapid"
)

// rules is DESIGN §2's import table as data: for each package, relative to
// the module root, what it may import. Keep the two in step: a change here
// without one there (or the reverse) is a review finding.
//
// Packages under internal/ that have no row are helpers (internal/invariant):
// any package may import them, and they may import only the standard
// library. A row turns an internal package into an ordinary one.
var rules = map[string]rule{
	"clock":           {stdlib: []string{"time"}},
	"clock/clocktest": {quire: []string{"clock"}},
	"deadlines":       {pure: true},
	"journal/record":  {third: []string{msgpack, ulid}, pure: true},
	// cockroachdb/errors is pebble's error package; journal may use it to
	// classify pebble's errors at its boundary, and no one else may.
	"journal": {
		quire:   []string{"journal/record", "clock"},
		third:   []string{pebble, crdbErrors, ulid},
		durable: true,
	},
	// msgpack encodes State snapshots.
	"replay": {quire: []string{"journal/record", "deadlines"}, third: []string{msgpack}, pure: true},
	// Only the Machine is pure; the Runner owns goroutines and timers.
	"scheduler": {
		quire:     []string{"replay", "journal/record", "deadlines", "clock"},
		pure:      true,
		pureFiles: "machine*.go",
	},
	"shutdown": {quire: []string{"deadlines", "clock"}},
	// The composition root: it wires journal and scheduler, takes a vfs.FS
	// and entropy in Options, and is the one caller of clock.System.
	"api": {
		quire:       []string{"*"},
		quireDeny:   []string{"sim", "cmd/...", "tests/...", "examples/..."},
		third:       []string{msgpack, ulid, pebble},
		systemClock: true,
	},
	// sim reads shutdown reports and errors as api returns them: api's
	// public signatures carry shutdown's types (ShutdownReport, *Error).
	"sim": {
		quire: []string{"api", "clock", "clock/clocktest", "journal", "journal/record", "replay", "deadlines", "shutdown"},
		third: []string{pebbleVFS},
	},
	// qctl reads through journal, record and replay; only the commands that
	// change a journal (retry, signal, cancel) may go through api.
	"cmd/qctl/...": {
		quire: []string{"journal", "journal/record", "replay", "deadlines", "api", "cmd/qctl/...", "internal/qctl", "qctl"},
		third: []string{kong},
	},
	// The importable command logic behind cmd/qctl: the read path only, never
	// api or scheduler. clock is for the fixed clock that read-only opens
	// need. Pebble itself is for its tests, which corrupt journals by hand;
	// the commands read through journal.
	"qctl": {
		quire: []string{"journal", "journal/record", "replay", "deadlines", "clock"},
		third: []string{kong, pebble},
	},
	"internal/qctl": {
		quire: []string{"journal", "journal/record", "replay", "deadlines", "api"},
		third: []string{kong},
	},
	// qbench drives the engine through api and measures raw Pebble synced
	// commits as the baseline; durable keeps that baseline honest.
	"cmd/qbench": {
		quire:   []string{"api", "journal", "journal/record", "clock", "deadlines"},
		third:   []string{pebble},
		durable: true,
	},
	"tests/property": {
		quire: []string{"sim", "api", "replay", "journal/record", "journal", "deadlines", "scheduler", "clock", "clock/clocktest"},
		third: []string{rapid},
	},
	// T11's golden journals (test files only): written through api,
	// replayed through journal and replay, verified through qctl.
	"tests/golden": {
		quire: []string{"api", "journal", "journal/record", "replay", "qctl", "clock", "clock/clocktest"},
	},
	"examples/...": {
		quire:     []string{"*"},
		quireDeny: []string{"internal/...", "cmd/...", "tests/...", "examples/..."},
	},
}

// testExtras is what any package's _test.go files may import besides its
// row (and any standard library package).
var testExtras = rule{
	quire: []string{"clock/clocktest"},
	third: []string{rapid, pebbleVFS},
}

func TestModuleFollowsDesign(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	vs, err := check(os.DirFS(root), rules, testExtras)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// TestTableKeepsLayering guards the table itself: the lower packages must
// never be allowed to import a package above them, in code or in tests.
func TestTableKeepsLayering(t *testing.T) {
	t.Parallel()
	lower := []string{"clock", "clock/clocktest", "deadlines", "journal/record", "journal", "replay", "scheduler", "shutdown"}
	upper := []string{"api", "sim", "cmd/qctl", "internal/qctl", "tests/property", "examples/hello"}
	for _, from := range lower {
		r, ok := ruleFor(rules, from)
		if !ok {
			t.Fatalf("%s has no row", from)
		}
		for _, to := range upper {
			for _, isTest := range []bool{false, true} {
				if ok, _ := allowedQuire(rules, r, testExtras, from, to, isTest); ok {
					t.Errorf("the table lets %s import %s (test file: %v)", from, to, isTest)
				}
			}
		}
	}
	for _, pure := range []string{"deadlines", "journal/record", "replay", "scheduler"} {
		if !rules[pure].pure {
			t.Errorf("%s is not marked pure", pure)
		}
	}
}

// moduleRoot returns the nearest directory at or above the working directory
// that holds a go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}
