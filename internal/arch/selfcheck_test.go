package arch

import (
	"slices"
	"testing"
	"testing/fstest"
)

// TestCheckerReportsEachRule runs the checker, with the real table, on small
// in-memory modules that break one rule each (and on their allowed twins),
// so that a quiet TestModuleFollowsDesign means the module is clean rather
// than the checker blind. want lists "file:line [rule]".
func TestCheckerReportsEachRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "clock imports another quire package",
			files: map[string]string{"clock/c.go": `package clock

import "github.com/quire-dev/quire/journal/record"

var _ record.Kind`},
			want: []string{"clock/c.go:3 [imports]"},
		},
		{
			name: "clock imports stdlib beyond time; its tests may",
			files: map[string]string{
				"clock/c.go": `package clock

import (
	"fmt"
	"time"
)`,
				"clock/c_test.go": `package clock

import "fmt"`,
			},
			want: []string{"clock/c.go:4 [imports]"},
		},
		{
			name: "deadlines imports third-party and quire packages",
			files: map[string]string{"deadlines/d.go": `package deadlines

import (
	"github.com/vmihailenco/msgpack/v5"
	"github.com/quire-dev/quire/clock"
)`},
			want: []string{"deadlines/d.go:4 [imports]", "deadlines/d.go:5 [imports]"},
		},
		{
			name: "replay imports api, even from a test",
			files: map[string]string{
				"replay/r.go":      "package replay\n\nimport \"github.com/quire-dev/quire/api\"\n",
				"replay/r_test.go": "package replay_test\n\nimport \"github.com/quire-dev/quire/api\"\n",
			},
			want: []string{"replay/r.go:3 [imports]", "replay/r_test.go:3 [imports]"},
		},
		{
			name: "journal may import pebble subpackages and cockroachdb/errors; record may not",
			files: map[string]string{
				"journal/j.go": `package journal

import (
	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/journal/record"
)`,
				"journal/record/r.go": "package record\n\nimport \"github.com/cockroachdb/errors\"\n",
			},
			want: []string{"journal/record/r.go:3 [imports]"},
		},
		{
			name: "test files may import clocktest, rapid, pebble vfs and helpers, not more",
			files: map[string]string{
				"deadlines/d_test.go": `package deadlines

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/internal/invariant"
	"pgregory.net/rapid"
	"github.com/cockroachdb/pebble/v2"
	"github.com/quire-dev/quire/journal"
)`,
			},
			want: []string{"deadlines/d_test.go:8 [imports]", "deadlines/d_test.go:9 [imports]"},
		},
		{
			name: "api may import the module but not sim, cmd, tests or examples",
			files: map[string]string{"api/a.go": `package api

import (
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/scheduler"
	"github.com/quire-dev/quire/sim"
	"github.com/quire-dev/quire/cmd/qctl"
	"github.com/quire-dev/quire/examples/hello"
)`},
			want: []string{"api/a.go:6 [imports]", "api/a.go:7 [imports]", "api/a.go:8 [imports]"},
		},
		{
			name: "qctl reads through journal, record and replay, not pebble or scheduler",
			files: map[string]string{
				"cmd/qctl/main.go": `package main

import (
	"github.com/alecthomas/kong"
	"github.com/quire-dev/quire/cmd/qctl/cli"
	"github.com/cockroachdb/pebble/v2"
)`,
				"cmd/qctl/cli/cli.go": `package cli

import (
	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/replay"
	"github.com/quire-dev/quire/scheduler"
)`,
			},
			want: []string{"cmd/qctl/cli/cli.go:6 [imports]", "cmd/qctl/main.go:6 [imports]"},
		},
		{
			name: "helpers are importable by anyone and import only the standard library",
			files: map[string]string{
				"clock/c.go":              "package clock\n\nimport \"github.com/quire-dev/quire/internal/invariant\"\n",
				"internal/invariant/i.go": "package invariant\n\nimport \"os\"\n",
				"internal/bad/b.go":       "package bad\n\nimport \"github.com/quire-dev/quire/clock\"\n",
			},
			want: []string{"internal/bad/b.go:3 [imports]"},
		},
		{
			name:  "a package without a row",
			files: map[string]string{"metrics/m.go": "package metrics\n", "metrics/a.go": "package metrics\n"},
			want:  []string{"metrics/a.go [table]"},
		},
		{
			name: "testdata, hidden, underscore and nested-module directories are skipped",
			files: map[string]string{
				"deadlines/d.go":          "package deadlines\n",
				"deadlines/testdata/x.go": "package x\n\nimport \"github.com/quire-dev/quire/api\"\n",
				".git/x.go":               "package x\n",
				"_scratch/x.go":           "package x\n",
				"tools/go.mod":            "module example.com/tools\n",
				"tools/x.go":              "package x\n",
			},
		},
		{
			name: "pure package reads the wall clock, under any import name",
			files: map[string]string{
				"deadlines/d.go": `package deadlines

import (
	"time"
	clk "time"
)

func f() time.Duration {
	_ = time.Now()
	clk.Sleep(time.Second)
	_ = time.Since
	return time.Duration(0)
}`,
				"deadlines/d_test.go": "package deadlines\n\nimport \"time\"\n\nvar _ = time.Now()\n",
			},
			want: []string{"deadlines/d.go:9 [wall-clock]", "deadlines/d.go:10 [wall-clock]", "deadlines/d.go:11 [wall-clock]"},
		},
		{
			name: "pure package draws global randomness; seeded sources are fine",
			files: map[string]string{
				"replay/r.go": `package replay

import (
	"math/rand/v2"
	v1 "math/rand"
)

func jitter(rng *rand.Rand) int {
	_ = rand.New(rand.NewPCG(1, 2))
	_ = rng.IntN(5)
	_ = v1.Intn(3)
	return rand.IntN(5)
}

func shadow(rand *v1.Rand) int { return rand.Intn(3) }`,
			},
			want: []string{"replay/r.go:11 [global-rand]", "replay/r.go:12 [global-rand]"},
		},
		{
			name: "pure package takes entropy from globals",
			files: map[string]string{
				"journal/record/r.go": `package record

import (
	"crypto/rand"
	"github.com/oklog/ulid/v2"
)

var a, b = ulid.Make(), ulid.MustNew(1, rand.Reader)`,
			},
			want: []string{"journal/record/r.go:4 [entropy]", "journal/record/r.go:8 [entropy]"},
		},
		{
			name: "pure package starts a goroutine; its tests may",
			files: map[string]string{
				"deadlines/d.go":      "package deadlines\n\nfunc f() {\n\tgo f()\n}\n",
				"deadlines/d_test.go": "package deadlines\n\nfunc g() {\n\tgo g()\n}\n",
			},
			want: []string{"deadlines/d.go:4 [go-stmt]"},
		},
		{
			name: "scheduler bans apply to the Machine files only",
			files: map[string]string{
				"scheduler/machine.go":      "package scheduler\n\nimport \"time\"\n\nvar _ = time.Now()\n",
				"scheduler/machine_jobs.go": "package scheduler\n\nfunc f() {\n\tgo f()\n}\n",
				"scheduler/runner.go":       "package scheduler\n\nimport \"time\"\n\nvar _ = time.Now()\n\nfunc g() {\n\tgo g()\n}\n",
			},
			want: []string{"scheduler/machine.go:5 [wall-clock]", "scheduler/machine_jobs.go:4 [go-stmt]"},
		},
		{
			name: "journal weakens a commit below pebble.Sync",
			files: map[string]string{
				"journal/j.go": `package journal

import "github.com/cockroachdb/pebble/v2"

func f(db *pebble.DB, b *pebble.Batch) {
	_ = b.Commit(pebble.NoSync)
	_ = db.ApplyNoSyncWait(b, pebble.Sync)
	_ = &pebble.Options{DisableWAL: true}
}`,
				"journal/j_test.go": "package journal\n\nimport \"github.com/cockroachdb/pebble/v2\"\n\nvar _ = pebble.NoSync\n",
			},
			want: []string{"journal/j.go:6 [no-sync]", "journal/j.go:7 [no-sync]", "journal/j.go:8 [no-sync]"},
		},
		{
			name: "only api calls clock.System",
			files: map[string]string{
				"api/a.go":            "package api\n\nimport \"github.com/quire-dev/quire/clock\"\n\nvar _ = clock.System()\n",
				"shutdown/s.go":       "package shutdown\n\nimport \"github.com/quire-dev/quire/clock\"\n\nvar _ = clock.System()\n",
				"shutdown/s_test.go":  "package shutdown\n\nimport \"github.com/quire-dev/quire/clock\"\n\nvar _ = clock.System()\n",
				"clock/clock.go":      "package clock\n\nfunc System() {}\n",
				"clock/clock_test.go": "package clock_test\n\nimport \"github.com/quire-dev/quire/clock\"\n\nvar _ = clock.System\n",
			},
			want: []string{"shutdown/s.go:5 [system-clock]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fsys := fstest.MapFS{"go.mod": {Data: []byte("module github.com/quire-dev/quire\n\ngo 1.26\n")}}
			for name, src := range tt.files {
				fsys[name] = &fstest.MapFile{Data: []byte(src)}
			}
			vs, err := check(fsys, rules, testExtras)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.pos()+" ["+v.rule+"]")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q; all reports:", got, tt.want)
				for _, v := range vs {
					t.Log(v)
				}
			}
		})
	}
}

func TestCheckerFailsOnUnparsableFile(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"go.mod":         {Data: []byte("module github.com/quire-dev/quire\n")},
		"deadlines/d.go": {Data: []byte("package deadlines\n\nfunc {")},
	}
	if _, err := check(fsys, rules, testExtras); err == nil {
		t.Fatal("check of a file with a syntax error returned no error")
	}
}

func TestViolationMessageNamesPlaceAndRule(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"go.mod":         {Data: []byte("module github.com/quire-dev/quire\n")},
		"deadlines/d.go": {Data: []byte("package deadlines\n\nimport \"github.com/quire-dev/quire/clock\"\n")},
	}
	vs, err := check(fsys, rules, testExtras)
	if err != nil || len(vs) != 1 {
		t.Fatalf("check = %v, %v; want one violation", vs, err)
	}
	const want = "deadlines/d.go:3: [imports] deadlines imports clock; its row in DESIGN §2 allows no quire package"
	if got := vs[0].String(); got != want {
		t.Fatalf("message\n%s\nwant\n%s", got, want)
	}
}
