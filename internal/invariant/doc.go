// Package invariant holds quire's assertions: checks of conditions that only
// a bug in quire can break (STYLE rule 7). Operating conditions, such as bad
// input, a full queue or a corrupt journal, are errors, never assertions.
//
// [Check] is cheap and always on. Checks that cost real time sit behind
// [Enabled], a constant that is true only under the invariants build tag,
// which the simulation and property jobs always pass
// (go test -tags invariants ./sim/... ./tests/property/...). Because it is a
// constant, the compiler drops the guarded code from ordinary builds.
//
// It imports only the standard library and may be imported by any package.
//
// # Usage
//
//	invariant.Check(seq == last+1, "journal: appended seq is not consecutive")
//	if invariant.Enabled {
//		invariant.Check(replay.Equal(live, fold(records)), "scheduler: live state differs from replay")
//	}
package invariant
