package scheduler

import (
	"time"

	"github.com/quire-dev/quire/journal/record"
	"github.com/quire-dev/quire/replay"
)

// StepKind is the kind of a workflow step (WF-2).
type StepKind uint8

// Step kinds.
const (
	StepThen StepKind = iota + 1
	StepParallel
	StepDelay
	StepSignal
	StepWorkflows
	StepSub
)

// Wait modes of WaitForSignal and WaitForWorkflows (WF-6, WF-7).
const (
	ModeAll    = "all"
	ModeAny    = "any"
	ModeQuorum = "quorum"
)

// StepDef is one validated step of a workflow definition.
type StepDef struct {
	Kind StepKind
	Name string
	// Handlers: one for Then, one per branch for Parallel.
	Handlers []string
	// Delay of a Delay step.
	Delay time.Duration
	// Signals, Mode and ResultKey of a WaitForSignal step.
	Signals []string
	// Mode, IDs or FromKey, Quorum and ResultKey of a WaitForWorkflows step.
	Mode      string
	IDs       []string
	FromKey   string
	Quorum    int
	ResultKey string
	// Sub is the child workflow's name of a SubWorkflow step.
	Sub string
	// Job options of the step's jobs, resolved (WF-22).
	Queue    string
	Priority uint8
	Retry    record.RetryPolicy
	Timeout  time.Duration
	// Inherit marks the options that came from the engine's defaults, not
	// from the step or its workflow: in a sub-workflow they are taken from
	// the parent instead (WF-8).
	Inherit Inheritable
}

// Inheritable lists the job options a sub-workflow inherits (WF-8).
type Inheritable struct {
	Queue, Priority, MaxAttempts bool
	// Backoff and Timeout mark a step's backoff and delivery timeout that
	// came from its queue's options or the engine's, not from the step: a
	// sub-workflow's step that runs on the queue it inherits takes that
	// queue's instead, as every job of the queue does (WF-22, DL-2, DL-4).
	// They are left out of the definition's encoding, and so of its hash,
	// which the step's own options already determine.
	Backoff bool `msgpack:"-"`
	Timeout bool `msgpack:"-"`
}

// JobDefaults are a workflow's own workflow-wide job options; nil fields
// were not set.
type JobDefaults struct {
	Queue       *string
	Priority    *uint8
	MaxAttempts *int32
}

// WorkflowDef is a registered, validated workflow definition.
type WorkflowDef struct {
	Name string
	// Hash is the definition hash new workflows record (WF-2).
	Hash string
	// LegacyHash is the hash an earlier build recorded for the same
	// definition under the same engine Options: it hashed the step jobs'
	// options as resolved from the engine's defaults. Workflows recording
	// it run on this definition too. Empty when there is none.
	LegacyHash string `msgpack:"-"`
	Steps      []StepDef
	// Deadline is MustCompleteWithin (WD-1), 0 for none.
	Deadline time.Duration
	// OnDeadline names the on-deadline handler (WD-2), "" for none.
	OnDeadline string
	// Defaults are the workflow-wide job options set on the definition.
	Defaults JobDefaults
}

// Runs reports whether a workflow that recorded hash runs on def: hash is
// def's, or the one an earlier build recorded for it.
func (def *WorkflowDef) Runs(hash string) bool {
	return hash == def.Hash || (def.LegacyHash != "" && hash == def.LegacyHash)
}

// WorkflowSummary is what the machine needs to know of a workflow that left
// its state (completed or cancelled), read from the terminal index.
type WorkflowSummary struct {
	Status string // "completed" or "cancelled"
	State  []byte // public state
	Error  string
	// Name, DefinitionHash and ParentID say which definition the workflow
	// ran and which workflow started it: a child that outlives its
	// parent still inherits the parent's job options through them (WF-8).
	Name           string
	DefinitionHash string
	ParentID       string
}

// SummaryOf returns what the machine reads of a finished workflow's
// terminal-index summary.
func SummaryOf(s replay.WorkflowSummary) WorkflowSummary {
	return WorkflowSummary{Status: s.Status.String(), State: s.State, Error: s.Error,
		Name: s.Name, DefinitionHash: s.DefinitionHash, ParentID: s.ParentID}
}
