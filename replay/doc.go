// Package replay derives the engine's state from its journal: [State] is
// what a prefix of the log says, and [Apply] / [Fold] add records to it.
//
// The fold is pure and total. It reads time only from the records'
// timestamps, never from a clock, so the same records give the same state
// in every process (RL-1); a record of an unknown kind or one that makes an
// impossible transition (a job settled twice, a workflow failed twice) is
// an [*ApplyError], never a panic. Terminal jobs and workflows leave
// memory: their summaries ([JobSummary], [WorkflowSummary]) go to the
// journal's terminal index and are point reads from there.
//
// [Encode] and [Decode] turn a State into a snapshot and back; [Digest]
// hashes one, so a snapshot is verified when it is written and an open
// replays only the records after the newest sound one (RL-12).
// [FoldQuarantining] is the recovery fold: a damaged record that the index
// attributes to one stream sets that stream aside and the rest folds on
// (spec/reliability.md §4.4).
//
// Workflow state is a msgpack map. [PublicState] drops its private keys,
// the ones starting with "_" (WF-12), and [MergeState] merges a step's
// output into it.
package replay
