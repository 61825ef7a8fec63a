// Package arch holds a test, and nothing else, that keeps quire's layout as
// DESIGN §2 draws it.
//
// The test parses every Go file of the module with go/parser (no build, no
// subprocess) and checks two things:
//
//   - Imports: each package imports only what its row of the table in
//     arch_test.go allows, a copy of DESIGN §2 as data. A package missing
//     from the table fails the test until it is given a row. Test files may
//     also import clocktest, rapid, pebble's vfs and the internal helpers.
//   - Bans: the pure packages (deadlines, journal/record, replay, and the
//     Machine files scheduler/machine*.go) must not read the wall clock,
//     draw from a global random source or start goroutines (DESIGN §1.3,
//     STYLE rules 1 and 3); journal must not weaken commits below
//     pebble.Sync (spec/reliability.md §2.2); only api calls clock.System.
//
// A failure names file:line, the rule and the way out. The checker is tested
// on in-memory sources that break each rule.
//
// It imports only the standard library.
//
// # Usage
//
//	go test ./internal/arch
//
// When DESIGN §2 gains a package or an import, edit the table:
//
//	"shutdown": {quire: []string{"deadlines", "clock"}},
package arch
