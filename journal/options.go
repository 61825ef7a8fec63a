package journal

import (
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/journal/record"
)

// Defaults and bounds of [Options] (RL-11).
const (
	GroupRecordsMaxDefault  = 1024
	GroupBytesMaxDefault    = 4 << 20
	UnitRecordsMaxDefault   = 1 << 16
	UnitBytesMaxDefault     = 256 << 20
	QueueDepthDefault       = 4096
	SnapshotBytesMaxDefault = 64 << 20

	// DiskSlowThresholdDefault is Pebble's own default.
	DiskSlowThresholdDefault = 5 * time.Second

	recordBytesMaxLow   = 1 << 10
	recordBytesMaxHigh  = 64 << 20
	groupRecordsMaxHigh = 1 << 16
	groupBytesMaxHigh   = 1 << 30
	queueDepthMaxHigh   = 1 << 20
	snapshotBytesHigh   = 1 << 30
)

// Options configures [Open]. The zero value is usable except for Clock,
// which is required. Every limit is validated once, by Open; an out-of-range
// value is an [*OptionError] naming the field.
type Options struct {
	// FS is the file system the store lives on. Nil means vfs.Default; tests
	// and sim pass a vfs.NewCrashableMem().
	FS vfs.FS

	// Clock stamps each record's At (Unix nanoseconds), clamped so that At
	// never goes backwards along the log (RL-9). Required: the journal never
	// reads the system clock itself.
	Clock clock.Clock

	// RecordBytesMax caps one encoded record envelope, in bytes. Zero means
	// record.RecordBytesMaxDefault (1 MiB). Range 1 KiB to 64 MiB, and at
	// most GroupBytesMax. Reads treat a longer value as corrupt, so never
	// lower it below records the journal already holds: a read of such a
	// record, if it is otherwise intact, fails with a [*CorruptError]
	// whose reason says so and names the RecordBytesMax that reads it.
	RecordBytesMax int

	// GroupRecordsMax caps the records one group commit gathers from
	// several appends. Zero means 1024. Range 1 to 65536. An append (or a
	// unit of [Journal.AppendUnits]) with more records commits alone, in a
	// group of its own, up to UnitRecordsMax.
	GroupRecordsMax int

	// GroupBytesMax caps the envelope and index bytes one group commit
	// gathers from several appends. Zero means 4 MiB. Range RecordBytesMax
	// to 1 GiB. A larger append (or unit) commits alone, up to UnitBytesMax.
	GroupBytesMax int

	// UnitRecordsMax and UnitBytesMax cap one atomic append (or unit of
	// [Journal.AppendUnits]), which must commit in one batch however large
	// (RL-4): larger is [record.ErrTooLarge]. Zero means 65536 records and
	// 256 MiB, or GroupBytesMax if that is larger. Ranges GroupRecordsMax to
	// 65536 and GroupBytesMax to 1 GiB.
	UnitRecordsMax int
	UnitBytesMax   int

	// QueueDepth is the number of appends (and snapshot or checkpoint
	// requests) that may wait for the writer; further callers block until
	// there is room or their ctx ends. Zero means 4096. Range 1 to 1<<20.
	QueueDepth int

	// SnapshotBytesMax caps one snapshot's state, in bytes. Zero means 64
	// MiB. Range 1 KiB to 1 GiB. Reads treat a longer value as corrupt.
	SnapshotBytesMax int

	// EngineID names the store; the first record's prevSum is its CRC32C,
	// which binds the log to its store. Used only when Open creates the
	// journal (an existing journal keeps the id it was created with). Empty
	// means a new ULID (Clock time, crypto/rand entropy). At most 127 bytes.
	EngineID string

	// DiskSlowThreshold is how long one file write or sync, or one
	// create, rename or remove, may be in flight before Pebble's
	// disk-health check reports the disk as slow, counted in
	// [Metrics].DiskSlow (a report only: nothing fails). Zero means 5s;
	// negative disables the check. The check looks every 2 s, so an
	// operation is reported once it has run past the threshold and a check
	// came by. Ignored when ReadOnly.
	DiskSlowThreshold time.Duration

	// ReadOnly opens an existing journal for inspection (qctl): Pebble in
	// read-only mode, no writer goroutine, no WAL rotation. Appends and
	// snapshot writes return [ErrReadOnly]. A missing directory is an
	// error wrapping fs.ErrNotExist.
	ReadOnly bool

	// Probe, if set, runs on the read-only look at an existing journal that
	// precedes a read-write open: it reads what the caller's start will
	// read (the engine replays from its snapshot), so that damage found
	// there refuses the open before the read-write open changes anything
	// (it flushes the WAL into a table and writes a new MANIFEST). Its
	// error is Open's. The journal it gets is read-only and closed after.
	Probe func(j *Journal) error

	// noCompactions, for tests, keeps the tables flushes make as they are.
	noCompactions bool
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.RecordBytesMax == 0 {
		o.RecordBytesMax = record.RecordBytesMaxDefault
	}
	if o.GroupRecordsMax == 0 {
		o.GroupRecordsMax = GroupRecordsMaxDefault
	}
	if o.GroupBytesMax == 0 {
		o.GroupBytesMax = GroupBytesMaxDefault
	}
	if o.UnitRecordsMax == 0 {
		o.UnitRecordsMax = max(UnitRecordsMaxDefault, o.GroupRecordsMax)
	}
	if o.UnitBytesMax == 0 {
		o.UnitBytesMax = max(UnitBytesMaxDefault, o.GroupBytesMax)
	}
	if o.QueueDepth == 0 {
		o.QueueDepth = QueueDepthDefault
	}
	if o.SnapshotBytesMax == 0 {
		o.SnapshotBytesMax = SnapshotBytesMaxDefault
	}
	if o.DiskSlowThreshold == 0 {
		o.DiskSlowThreshold = DiskSlowThresholdDefault
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Clock == nil:
		return &OptionError{Field: "Clock", Value: nil, Reason: "required (the journal never reads the system clock)"}
	case o.RecordBytesMax < recordBytesMaxLow || o.RecordBytesMax > recordBytesMaxHigh:
		return &OptionError{Field: "RecordBytesMax", Value: o.RecordBytesMax, Reason: "must be between 1 KiB and 64 MiB"}
	case o.GroupRecordsMax < 1 || o.GroupRecordsMax > groupRecordsMaxHigh:
		return &OptionError{Field: "GroupRecordsMax", Value: o.GroupRecordsMax, Reason: "must be between 1 and 65536"}
	case o.GroupBytesMax < o.RecordBytesMax || o.GroupBytesMax > groupBytesMaxHigh:
		return &OptionError{Field: "GroupBytesMax", Value: o.GroupBytesMax, Reason: "must be between RecordBytesMax and 1 GiB"}
	case o.UnitRecordsMax < o.GroupRecordsMax || o.UnitRecordsMax > groupRecordsMaxHigh:
		return &OptionError{Field: "UnitRecordsMax", Value: o.UnitRecordsMax, Reason: "must be between GroupRecordsMax and 65536"}
	case o.UnitBytesMax < o.GroupBytesMax || o.UnitBytesMax > groupBytesMaxHigh:
		return &OptionError{Field: "UnitBytesMax", Value: o.UnitBytesMax, Reason: "must be between GroupBytesMax and 1 GiB"}
	case o.QueueDepth < 1 || o.QueueDepth > queueDepthMaxHigh:
		return &OptionError{Field: "QueueDepth", Value: o.QueueDepth, Reason: "must be between 1 and 1048576"}
	case o.SnapshotBytesMax < recordBytesMaxLow || o.SnapshotBytesMax > snapshotBytesHigh:
		return &OptionError{Field: "SnapshotBytesMax", Value: o.SnapshotBytesMax, Reason: "must be between 1 KiB and 1 GiB"}
	case len(o.EngineID) > record.StreamIDBytesMax:
		return &OptionError{Field: "EngineID", Value: o.EngineID, Reason: "must be at most 127 bytes"}
	}
	return nil
}
