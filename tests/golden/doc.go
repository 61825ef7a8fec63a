// Package golden is T11 of spec/reliability.md (RL-5, RL-7): journal
// images written by earlier versions of quire, committed under
// testdata/journals/, each with the state replay must derive from it.
//
// Each image is a directory testdata/journals/<version>-<scenario>/ holding
// db/ (the Pebble files of a journal closed by a graceful shutdown, LOCK
// left out) and expect.txt (the derived state: a digest of the final
// replayed state, a digest over the state after every record, and a
// readable dump of the records, the final state and the terminal index).
// TestT11_GoldenJournals replays every committed image, whatever version
// wrote it, and fails on any difference: a change of the record format, the
// key layout, the fold or the terminal index that old journals do not
// survive fails here until it comes with a migration. It also runs qctl's
// verify on each image and opens each with the current engine.
//
// The package has test files only; it must not be imported. It may import
// api, journal, journal/record, replay, qctl and clock.
//
// # Usage
//
// Images are written by TestT11_WriteGolden, which runs only when asked:
//
//	QUIRE_WRITE_GOLDEN=1 go test ./tests/golden -run TestT11_WriteGolden
//
// writes the images of the current version (api.Version) from seeded,
// fixed-clock scenarios, so that writing them again gives the same
// expect.txt; QUIRE_WRITE_GOLDEN=expect rewrites only the expect.txt of
// every committed image, after a reviewed change of the derived state.
// Never regenerate the image of a released version to make this test
// pass: that image is what users' journals look like.
package golden
