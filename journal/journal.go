package journal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	crdberrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/oklog/ulid/v2"

	"github.com/quire-dev/quire/clock"
	"github.com/quire-dev/quire/journal/record"
)

// Journal is quire's append-only log in one Pebble store. All methods are
// safe for concurrent use.
//
// Acknowledged means synced (RL-1): an append returns its seqs only after
// the batch holding it was committed with pebble.Sync, and every read
// serves acknowledged data only. Pebble makes a batch readable before its
// WAL sync completes, so: scans and Get are capped at [Journal.LastSeq],
// which advances only after the sync; and whoever commits holds visMu
// exclusively while it commits a batch that writes t/ or x/ keys (index
// entries, snapshots), which Index, Snapshots and Verify read under visMu
// shared. A reader therefore never sees an unsynced t/ or x/ value, at the
// cost of waiting out one commit when it races with one.
type Journal struct {
	dir      string
	opts     Options
	clock    clock.Clock
	db       *pebble.DB
	probe    bool         // a read-only look before a read-write open (openLocked)
	lock     *pebble.Lock // the directory's, held from Open until Close
	engineID string
	chainSum uint32 // prevSum of seq 1: CRC32C of the engine id

	// Fail-stop (RL-2): cause is written once, before dead is closed.
	dead     chan struct{}
	deadOnce sync.Once
	cause    error
	broken   atomic.Bool // a commit failed or Pebble called Fatalf

	// closeMu guards closed and the registered iterators. Appenders hold it
	// shared while they enqueue, readers while they call into Pebble; Close
	// takes it exclusively, so no call is in Pebble when the store closes.
	closeMu   sync.RWMutex
	closed    bool
	closedCh  chan struct{}
	itersMu   sync.Mutex
	iters     map[openIter]struct{}
	closeOnce sync.Once
	closeErr  error

	// The write path (see writer.go); all nil when read-only.
	slots      chan struct{} // one per pending append: the QueueDepth bound
	work       chan struct{} // wakes the writer goroutine: a group is pending
	idle       chan struct{} // the commit token: whoever takes it may commit
	quit       chan struct{} // closed by Close
	writerDone chan struct{}
	buildMu    sync.Mutex // guards w
	w          writerState
	// splits counts the AppendUnits calls split over several groups that
	// are in progress: Close waits for them before it stops the writer,
	// since such a call cannot stop once its first group joined.
	splits sync.WaitGroup

	visMu sync.RWMutex // see the type comment

	// Acknowledged position; ackCh, made by the first Wait that blocks, is
	// closed by the next commit.
	lastSeq atomic.Uint64
	lastAt  atomic.Int64
	ackMu   sync.Mutex
	ackCh   chan struct{}

	m metrics

	// health stops the disk-health checker wrapped around the FS (nil if
	// none); Close calls it after the store closed.
	health io.Closer
}

// openIter is an iterator registered with its journal so that Close can
// release its Pebble iterators. release runs with closeMu held exclusively;
// err becomes the iterator's error unless the iteration had already ended.
type openIter interface{ release(err error) }

type metrics struct {
	groups, records, bytes, fsyncs      atomic.Uint64
	diskSlow, backgroundErrs, loggedErr atomic.Uint64
	walsCreated                         atomic.Uint64
	warms                               atomic.Uint64
	taken                               atomic.Uint64 // appends that joined a group
}

// Metrics are cumulative counters since Open.
//
// WALsCreated counts the write-ahead log files Pebble started, new or
// recycled: those of Open, then one at each memtable rotation. A rotation
// runs inside the commit that found the memtable full, which then also
// closes and syncs the old log and syncs the directory, so that commit
// takes several times as long as others. Memtables start at 256 KB after
// each Open and double at each rotation up to 4 MB.
type Metrics struct {
	Groups           uint64 // group commits
	Records          uint64 // records appended
	Bytes            uint64 // batch bytes committed (records, index keys, snapshots)
	Fsyncs           uint64 // commits made with pebble.Sync (groups, snapshot writes and deletes, warms), a failed one included
	Warms            uint64 // synced writes of no record ([Journal.Warm])
	DiskSlow         uint64 // Pebble DiskSlow events
	BackgroundErrors uint64 // Pebble BackgroundError events
	LoggedErrors     uint64 // Pebble Logger.Errorf calls
	WALsCreated      uint64 // write-ahead log files started (see above)
	QueueLen         int    // appends pending now (joined a group, not answered yet)
}

// fatalPanic is the sentinel the logger panics with from Fatalf. Only the
// journal's own frames recover it (guard, around every commit, Flush,
// Checkpoint, Open and Close, whichever goroutine runs them); in Pebble's
// own goroutines nothing does, and the process exits, as with Pebble's
// default logger (spec/reliability.md §2.3).
type fatalPanic struct{ msg string }

var errFatal = errors.New("journal: pebble fatal error")

// failStopLogger is the Pebble logger. Fatalf must never return: if it
// did, Pebble's commit path would go on to report success for a failed
// commit.
type failStopLogger struct{ j *Journal }

func (failStopLogger) Infof(string, ...any) {}

func (l failStopLogger) Errorf(string, ...any) { l.j.m.loggedErr.Add(1) }

func (l failStopLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.j.broken.Store(true)
	l.j.failStop(errors.New("pebble fatal: " + msg))
	panic(fatalPanic{msg: msg})
}

// guard runs f, turning the logger's fatal panic into errFatal.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatalPanic); !ok {
				panic(r)
			}
			err = errFatal
		}
	}()
	return f()
}

func (j *Journal) onCorruption(info pebble.DataCorruptionInfo) {
	ce := &CorruptError{Reason: "pebble detected data corruption", File: info.Path, Err: info.Details}
	if seq, ok := record.ParseLogKey(info.Bounds.Start); ok {
		ce.Seq = seq
	}
	j.failStop(ce)
}

func (j *Journal) failStop(cause error) {
	j.deadOnce.Do(func() {
		j.cause = cause
		close(j.dead)
	})
}

func (j *Journal) isDead() bool {
	select {
	case <-j.dead:
		return true
	default:
		return false
	}
}

func (j *Journal) failStopError(op string) error {
	<-j.dead
	return fmt.Errorf("journal: %s: %w (cause: %w)", op, ErrFailStop, j.cause)
}

// FailStopped returns the cause of the fail-stop, or nil while the journal
// is healthy.
func (j *Journal) FailStopped() error {
	if !j.isDead() {
		return nil
	}
	return j.cause
}

// pebbleError wraps an error from Pebble: corruption becomes a
// *CorruptError (the one place that consults cockroachdb/errors marks).
func pebbleError(op string, err error) error {
	if crdberrors.Is(err, pebble.ErrCorruption) {
		ce := &CorruptError{Reason: op + ": pebble reports corruption", Err: err}
		if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
			ce.File = info.Path
			if seq, ok := record.ParseLogKey(info.Bounds.Start); ok {
				ce.Seq = seq
			}
		}
		return ce
	}
	return fmt.Errorf("journal: %s: %w", op, err)
}

// Open opens the journal in dir, creating it unless opts.ReadOnly.
//
// The store runs at pebble.FormatNewest and its WAL is rotated once before
// the first append, so that mid-WAL damage is refused instead of silently
// truncating acknowledged records (spec/reliability.md §2.1). Errors:
// [*OptionError]; [ErrNotJournal] for a directory with other files or a
// store without quire metadata; an error wrapping [record.ErrNewerVersion]
// for a newer layout; [*CorruptError] for damage Pebble or the tail record
// check detect; an error wrapping fs.ErrNotExist for a missing directory
// in read-only mode. A directory that holds only the files Pebble writes
// before its store exists, left by a first Open that died while creating
// the store, is a journal not yet created: Open creates it over them (a
// read-only Open refuses it with [ErrNotJournal]).
//
// A refused Open leaves the directory as it found it: it removes the LOCK
// file it created to take the directory's lock, and a directory it created
// (with the parents it created), so that a directory that holds no journal
// gets nothing and a failed first Open leaves no directory behind. The one
// exception is a store that fail-stopped while opening ([ErrFailStop]): it
// may still run in the background, so its lock stays held and its files
// stay, as after any fail-stop.
func Open(dir string, opts Options) (*Journal, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	created, err := prepareDir(o.FS, dir, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		// A reader writes nothing, not even a LOCK file, into a
		// directory that is no journal: it refuses one before taking the
		// lock, without needing write access to the directory.
		if _, _, _, err := peekStore(o.FS, dir, true); err != nil {
			return nil, err
		}
	}
	lockPath := o.FS.PathJoin(dir, lockFile)
	// Only a LOCK known to be absent counts as created by this Open.
	_, statErr := o.FS.Stat(lockPath)
	hadLock := !errors.Is(statErr, iofs.ErrNotExist)
	// The directory's lock is taken first and held until Close: what
	// Open reads of the directory before Pebble opens it (the WAL
	// checks) cannot race another process opening it.
	lock, err := pebble.LockDirectory(dir, o.FS)
	if err != nil {
		if isLockHeld(err) {
			// Another holder has the directory now, even one Open
			// created: it is theirs to keep.
			return nil, fmt.Errorf("%w: %s is open in another journal (an engine or qctl, in this process or another): %w", ErrLocked, dir, err)
		}
		removeCreated(o.FS, created)
		return nil, fmt.Errorf("journal: open %s: lock: %w", dir, err)
	}
	j, err := openLocked(dir, o, lock)
	if err != nil {
		// A store that fail-stopped while opening may still run in the
		// background: its lock stays held, as after any fail-stop.
		if j == nil || !j.broken.Load() {
			// Undone while the lock is held, so that no other Open can
			// take it in between and see a directory half undone.
			if len(created) > 0 {
				_ = o.FS.RemoveAll(dir)
				removeCreated(o.FS, created[1:])
			} else if !hadLock {
				_ = o.FS.Remove(lockPath)
			}
			_ = lock.Close()
		}
		return nil, err
	}
	j.lock = lock
	return j, nil
}

// lockFile is the file in a journal directory that Pebble's directory lock
// creates if it is absent (pebble.LockDirectory).
const lockFile = "LOCK"

// removeCreated removes the directories prepareDir created, innermost
// first, as far as they are empty: best effort, for an Open that refuses
// after creating them. A directory another program put a file in since is
// left, and so are its parents.
func removeCreated(fs vfs.FS, created []string) {
	for _, d := range created {
		if fs.Remove(d) != nil {
			return
		}
	}
}

// isLockHeld reports whether err is a failure to take a directory lock
// that another holder has: EAGAIN or EACCES from fcntl, another process's
// lock, or Pebble's own message when this process holds it. The same
// errnos from opening the LOCK file (an *fs.PathError) are the file's
// permissions, not a holder: no one would ever release them.
func isLockHeld(err error) bool {
	if _, ok := errors.AsType[*iofs.PathError](err); ok {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// openLocked opens the journal in dir, whose lock the caller holds. A store
// that exists already is first opened read-only and checked to be a
// journal: a read-write open may change a store for good (Pebble deletes
// the tables its MANIFEST does not list, and ratchets formats), so another
// program's store, or a journal whose MANIFEST lost its tables, is refused
// before anything is written. On error the returned journal, if any, is
// the instance that failed, for its broken flag.
func openLocked(dir string, o Options, lock *pebble.Lock) (*Journal, error) {
	format, existing, err := checkStore(o.FS, dir, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	if existing && !o.ReadOnly {
		ro := o
		ro.ReadOnly, ro.DiskSlowThreshold = true, 0
		p, err := openStore(dir, ro, lock, format, true)
		if err != nil {
			return p, err
		}
		if o.Probe != nil && p.probeLoaded() {
			// The caller's own reads, refused here, change nothing.
			if err := o.Probe(p); err != nil {
				_ = p.Close()
				return nil, err
			}
		}
		if err := p.Close(); err != nil {
			return p, err
		}
	}
	return openStore(dir, o, lock, format, false)
}

// probeLoaded reports whether a probe found a journal (not an empty store
// that the read-write open will make one).
func (j *Journal) probeLoaded() bool { return j.engineID != "" }

// openStore opens the Pebble store in dir at format with the lock held
// and loads the journal from it. A probe is the read-only look before a
// read-write open: it also accepts an empty store, which the read-write
// open then makes a journal.
func openStore(dir string, o Options, lock *pebble.Lock, format pebble.FormatMajorVersion, probe bool) (*Journal, error) {
	j := &Journal{
		dir:      dir,
		probe:    probe,
		opts:     o,
		clock:    o.Clock,
		dead:     make(chan struct{}),
		closedCh: make(chan struct{}),
		iters:    make(map[openIter]struct{}),
	}
	listener := &pebble.EventListener{
		DataCorruption:  j.onCorruption,
		BackgroundError: func(error) { j.m.backgroundErrs.Add(1) },
		DiskSlow:        func(pebble.DiskSlowInfo) { j.m.diskSlow.Add(1) },
		WALCreated:      func(pebble.WALCreateInfo) { j.m.walsCreated.Add(1) },
	}
	fs := o.FS
	if o.DiskSlowThreshold > 0 && !o.ReadOnly {
		// Pebble installs this check only when Options.FS is nil; we
		// always pass an FS, so the journal wraps it itself.
		fs, j.health = vfs.WithDiskHealthChecks(fs, o.DiskSlowThreshold, nil,
			func(info vfs.DiskSlowInfo) { listener.DiskSlow(info) })
	}
	popts := &pebble.Options{
		FS:                 fs,
		FormatMajorVersion: format,
		Logger:             failStopLogger{j},
		EventListener:      listener,
		ReadOnly:           o.ReadOnly,
		Lock:               lock,

		DisableAutomaticCompactions: o.noCompactions,
	}
	err := guard(func() error {
		db, err := pebble.Open(dir, popts)
		if err != nil {
			return err
		}
		j.db = db
		return nil
	})
	if err == nil {
		// Guarded: creating a store commits its metadata, and a commit
		// that fails is fatal to Pebble, which panics (§2.3).
		err = guard(j.load)
	}
	if err == nil && !o.ReadOnly {
		// Only a store that load found to be a journal is changed: it is
		// ratcheted to the newest format, and its WAL rotated, since a
		// store's first WAL predates the ratchet and lacks the
		// synced-offset chunks (§2.1). Another program's store is left
		// at its format, which older Pebble versions could not read past.
		err = guard(func() error {
			if err := j.db.RatchetFormatMajorVersion(pebble.FormatNewest); err != nil {
				return err
			}
			return j.db.Flush()
		})
	}
	if err != nil {
		if errors.Is(err, errFatal) {
			return j, fmt.Errorf("journal: open %s: %w", dir, j.failStopError("open"))
		}
		// Release the store unless its pipeline broke. Corruption found by
		// Open's reads fail-stops the instance too, but this instance has
		// acknowledged nothing, and a store left open would retry failing
		// compactions in the background for the life of the process.
		if j.db != nil && !j.broken.Load() {
			_ = guard(j.db.Close)
		}
		if j.health != nil && !j.broken.Load() {
			_ = j.health.Close()
		}
		var ce *CorruptError
		if errors.As(err, &ce) || errors.Is(err, ErrNotJournal) || errors.Is(err, record.ErrNewerVersion) {
			return j, err
		}
		return j, o.attribute(dir, pebbleError("open "+dir, err))
	}
	if !o.ReadOnly {
		j.slots = make(chan struct{}, o.QueueDepth)
		j.work = make(chan struct{}, 1)
		j.idle = make(chan struct{}, 1)
		j.idle <- struct{}{}
		j.quit = make(chan struct{})
		j.writerDone = make(chan struct{})
		go j.run()
	}
	return j, nil
}

// prepareDir creates a missing journal directory (unless read-only, when
// a missing one is an error). It returns the directories it created, dir
// first, then each parent it created.
func prepareDir(fs vfs.FS, dir string, readOnly bool) ([]string, error) {
	_, err := fs.Stat(dir)
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, iofs.ErrNotExist):
		return nil, fmt.Errorf("journal: open %s: %w", dir, err)
	case readOnly:
		return nil, &iofs.PathError{Op: "journal: open read-only", Path: dir, Err: iofs.ErrNotExist}
	}
	return mkdirSynced(fs, dir)
}

// checkStore refuses a directory that holds files but no Pebble store. It
// returns the format to open the store at, the newest for a new store and
// an existing store's own (Open ratchets it once the store proved to be a
// journal), and whether a store exists.
func checkStore(fs vfs.FS, dir string, readOnly bool) (pebble.FormatMajorVersion, bool, error) {
	format, existing, ls, err := peekStore(fs, dir, readOnly)
	if err != nil || !existing {
		return format, existing, err
	}
	return format, true, checkWALs(fs, dir, ls)
}

// peekStore is checkStore without the WAL checks, which need the lock: a
// read-only Open runs it before taking the lock too, so that it never
// leaves a LOCK file in a directory it then refuses as no journal. It
// also returns the directory's listing.
func peekStore(fs vfs.FS, dir string, readOnly bool) (pebble.FormatMajorVersion, bool, []string, error) {
	ls, err := fs.List(dir)
	if err != nil {
		return 0, false, nil, fmt.Errorf("journal: open %s: %w", dir, err)
	}
	var other []string
	for _, name := range ls {
		if name != lockFile {
			other = append(other, name)
		}
	}
	if len(other) == 0 {
		if readOnly {
			return 0, false, nil, fmt.Errorf("%w: %s is empty", ErrNotJournal, dir)
		}
		return pebble.FormatNewest, false, ls, nil
	}
	desc, err := pebble.Peek(dir, fs)
	if err != nil {
		return 0, false, nil, pebbleError("open "+dir, err)
	}
	if !desc.Exists {
		if !unfinishedStore(other) {
			return 0, false, nil, fmt.Errorf("%w: %s holds files (e.g. %q) but no Pebble store", ErrNotJournal, dir, other[0])
		}
		// A first Open that died while Pebble created the store: nothing
		// in it was ever acknowledged, and Pebble creates the store
		// afresh over these files.
		if readOnly {
			return 0, false, nil, fmt.Errorf("%w: %s holds a Pebble store whose creation never finished", ErrNotJournal, dir)
		}
		return pebble.FormatNewest, false, ls, nil
	}
	return desc.FormatMajorVersion, true, ls, nil
}

// unfinishedStore reports whether names, the files of a directory without
// a Pebble manifest marker, are only what Pebble writes before that marker
// when it creates a store: its format marker, a first MANIFEST, an
// OPTIONS file and their temporaries. No WAL, table or blob file is among
// them, so no write was ever made to the store: a store whose marker was
// lost, and any other program's files, still fail this test.
func unfinishedStore(names []string) bool {
	for _, name := range names {
		var num string
		switch {
		case strings.HasPrefix(name, "marker.format-version."):
			continue
		case strings.HasPrefix(name, "MANIFEST-"):
			num = name[len("MANIFEST-"):]
		case strings.HasPrefix(name, "OPTIONS-"):
			num = name[len("OPTIONS-"):]
		case strings.HasPrefix(name, "temporary.") && strings.HasSuffix(name, ".dbtmp"):
			num = strings.TrimSuffix(name[len("temporary."):], ".dbtmp")
		default:
			return false
		}
		if num == "" || strings.Trim(num, "0123456789") != "" {
			return false
		}
	}
	return true
}

// mkdirSynced creates dir and syncs the parent of every directory it
// created, so that a crash cannot lose the journal's directory entry. It
// returns the directories it created, dir first; on error it removes them
// again, as far as it can.
func mkdirSynced(fs vfs.FS, dir string) ([]string, error) {
	var created []string
	for p := dir; ; {
		if _, err := fs.Stat(p); err == nil {
			break
		}
		created = append(created, p)
		parent := fs.PathDir(p)
		if parent == p {
			break
		}
		p = parent
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		removeCreated(fs, created)
		return nil, fmt.Errorf("journal: create %s: %w", dir, err)
	}
	for _, p := range created {
		d, err := fs.OpenDir(fs.PathDir(p))
		if err == nil {
			err = d.Sync()
			if cerr := d.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			removeCreated(fs, created)
			return nil, fmt.Errorf("journal: create %s: sync parent directory: %w", dir, err)
		}
	}
	return created, nil
}

// load reads or creates the metadata and finds the tail of the log.
func (j *Journal) load() error {
	format, ok, err := j.getMeta(metaFormat)
	if err != nil {
		return err
	}
	if !ok {
		if err := j.checkUnmarked(); err != nil {
			return err
		}
		switch {
		case j.probe:
			return nil
		case j.opts.ReadOnly:
			return fmt.Errorf("%w: %s is an empty Pebble store", ErrNotJournal, j.dir)
		}
		return j.create()
	}
	if len(format) != 8 {
		return &CorruptError{Reason: fmt.Sprintf("metadata %s is %d bytes, want 8", metaFormat, len(format))}
	}
	if v := binary.BigEndian.Uint64(format); v != FormatVersion {
		if v > FormatVersion {
			return fmt.Errorf("journal: open %s: %w: layout version %d, this code reads up to %d",
				j.dir, record.ErrNewerVersion, v, FormatVersion)
		}
		return &CorruptError{Reason: fmt.Sprintf("metadata %s holds unknown layout version %d", metaFormat, v)}
	}
	id, ok, err := j.getMeta(metaEngine)
	if err != nil {
		return err
	}
	if !ok || len(id) == 0 || len(id) > record.StreamIDBytesMax {
		return &CorruptError{Reason: fmt.Sprintf("metadata %s is missing or malformed", metaEngine)}
	}
	j.setEngineID(string(id))
	if err := j.loadTail(); err != nil {
		return err
	}
	if !j.probe {
		return nil
	}
	return j.checkLogEdges()
}

// checkLogEdges refuses a journal whose log has a hole where one of its
// sources begins: the record before the first log key of every table, and
// before the first record of every WAL, must exist, as must record 1. A
// table its MANIFEST no longer lists (a damaged last edit of a MANIFEST
// reads as a torn write) leaves such a hole: its records are in no other
// table, and the WAL that held them is gone. A start that reads from a
// snapshot above the hole would not see it, and the read-write open after
// this read-only look would delete the unlisted table for good. Each
// table's first log key is its smallest key, since "e/" sorts first of the
// prefixes (§4.1). A few point reads, whatever the journal's length
// (RL-12); holes elsewhere are for Verify to find.
func (j *Journal) checkLogEdges() error {
	last := j.lastSeq.Load()
	if last == 0 {
		return nil
	}
	need := map[uint64]string{1: ""} // seq -> the source that begins after it
	tables, err := j.db.SSTables()
	if err != nil {
		return pebbleError("open", err)
	}
	for _, level := range tables {
		for _, t := range level {
			if lo, ok := record.ParseLogKey(t.Smallest.UserKey); ok && lo > 1 && lo <= last {
				need[lo-1] = fmt.Sprintf("table %06d.sst", uint64(t.BackingSSTNum))
			}
		}
	}
	ls, err := j.opts.FS.List(j.dir)
	if err != nil {
		return fmt.Errorf("journal: open %s: %w", j.dir, err)
	}
	wals, err := walFirstLogSeqs(j.opts.FS, j.dir, ls)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(wals)) {
		st := wals[name]
		if st.acked > last {
			// A batch written after records up to st.acked were synced,
			// but the replay ends before them: damage in the WAL that
			// read as a torn tail (§2.1).
			return &CorruptError{Seq: last + 1, File: j.opts.FS.PathJoin(j.dir, name), Reason: fmt.Sprintf(
				"acknowledged records %d..%d are missing: a later batch in the WAL records them synced, but the log ends at %d (the WAL is damaged before that batch)",
				last+1, st.acked, last)}
		}
		if lo := st.first; lo > 1 && lo <= last {
			need[lo-1] = "WAL " + name
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(need)) {
		_, closer, err := j.db.Get(record.LogKey(seq))
		if errors.Is(err, pebble.ErrNotFound) {
			reason := fmt.Sprintf("record %d of %d is missing", seq, last)
			if src := need[seq]; src != "" {
				reason += fmt.Sprintf(", before the records of %s: the store no longer lists the table that held it (a damaged MANIFEST?)", src)
			}
			return &CorruptError{Seq: seq, Reason: reason}
		}
		if err != nil {
			return pebbleError("open", err)
		}
		_ = closer.Close()
	}
	return nil
}

func (j *Journal) setEngineID(id string) {
	j.engineID = id
	j.chainSum = record.Checksum([]byte(id))
	j.w.lastSum = j.chainSum
	j.w.lastAt = math.MinInt64
}

func (j *Journal) create() error {
	id := j.opts.EngineID
	if id == "" {
		u, err := ulid.New(ulid.Timestamp(j.clock.Now()), rand.Reader)
		if err != nil {
			return fmt.Errorf("journal: create %s: engine id: %w", j.dir, err)
		}
		id = u.String()
	}
	b := j.db.NewBatch()
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], FormatVersion)
	_ = b.Set([]byte(metaFormat), v[:], nil)
	_ = b.Set([]byte(metaEngine), []byte(id), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	_ = b.Close()
	j.setEngineID(id)
	return nil
}

func (j *Journal) getMeta(key string) ([]byte, bool, error) {
	v, closer, err := j.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, pebbleError("read "+key, err)
	}
	out := bytes.Clone(v)
	_ = closer.Close()
	return out, true, nil
}

// checkUnmarked tells apart the stores without quire's metadata: nil for
// an empty one (a journal whose creation was cut short, or a store nobody
// wrote to), which may become a journal; ErrCorrupt for a journal that
// lost part of itself, as when a damaged MANIFEST no longer lists the
// table that holds the metadata; ErrNotJournal for another program's.
func (j *Journal) checkUnmarked() error {
	hasLog, err := j.hasKey(&pebble.IterOptions{LowerBound: []byte(prefixLog), UpperBound: prefixEnd(prefixLog)})
	if err != nil {
		return err
	}
	if hasLog {
		return &CorruptError{Reason: fmt.Sprintf("%s holds journal records but not the metadata %s: part of the store is missing (a damaged MANIFEST that no longer lists a table?)", j.dir, metaFormat)}
	}
	hasAny, err := j.hasKey(nil)
	if err != nil {
		return err
	}
	if hasAny {
		return fmt.Errorf("%w: %s is a Pebble store without quire metadata (%s)", ErrNotJournal, j.dir, metaFormat)
	}
	// An empty store has no tables: one in the directory that the store
	// does not list was lost from its MANIFEST.
	if orphan, err := j.unlistedTable(); err != nil || orphan != "" {
		if err != nil {
			return pebbleError("open", err)
		}
		return &CorruptError{File: orphan, Reason: fmt.Sprintf("%s holds a table the store does not list, and nothing else: its MANIFEST may be damaged", j.dir)}
	}
	return nil
}

// unlistedTable returns a table file in the directory that the store's
// current version does not list, or "".
func (j *Journal) unlistedTable() (string, error) {
	tables, err := j.db.SSTables()
	if err != nil {
		return "", err
	}
	listed := make(map[string]bool)
	for _, level := range tables {
		for _, t := range level {
			listed[fmt.Sprintf("%06d.sst", uint64(t.BackingSSTNum))] = true
		}
	}
	ls, err := j.opts.FS.List(j.dir)
	if err != nil {
		return "", err
	}
	slices.Sort(ls)
	for _, name := range ls {
		if strings.HasSuffix(name, ".sst") && !listed[name] {
			return name, nil
		}
	}
	return "", nil
}

// hasKey reports whether the store holds a key within opts' bounds.
func (j *Journal) hasKey(opts *pebble.IterOptions) (bool, error) {
	it, err := j.db.NewIter(opts)
	if err != nil {
		return false, pebbleError("open", err)
	}
	any := it.First()
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, pebbleError("open", err)
	}
	return any, nil
}

// loadTail reads the last record to continue the chain. A damaged tail
// refuses a read-write open (the next record could not chain to it); a
// read-only open goes on so that Verify can report it.
func (j *Journal) loadTail() error {
	it, err := j.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefixLog), UpperBound: prefixEnd(prefixLog)})
	if err != nil {
		return pebbleError("open", err)
	}
	defer func() { _ = it.Close() }()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return pebbleError("open", err)
		}
		return nil
	}
	seq, ok := record.ParseLogKey(it.Key())
	if !ok {
		return &CorruptError{Reason: fmt.Sprintf("malformed log key %x", it.Key())}
	}
	val, err := it.ValueAndErr()
	if err != nil {
		return pebbleError("open", err)
	}
	j.lastSeq.Store(seq)
	env, err := record.ParseEnvelope(seq, val, j.opts.RecordBytesMax)
	if err != nil {
		if j.opts.ReadOnly {
			return nil
		}
		return j.recordError(seq, "", err)
	}
	j.w.lastSeq, j.w.lastSum, j.w.lastAt = seq, env.Sum, env.At
	j.lastAt.Store(env.At)
	return nil
}

// overCapReason is the reason [Journal.recordError] gives a record that
// failed the size check only because it is longer than RecordBytesMax: a
// record whose envelope passes every check at the largest cap any journal
// can be written with was written while RecordBytesMax was higher, which
// Options.RecordBytesMax forbids, and reads again once it is raised back.
// ok is false for anything else (a record too short, longer than any cap,
// or failing another check), which stays plain corruption. It reads the
// record again, so it is for error paths only; the caller holds closeMu
// shared.
func (j *Journal) overCapReason(seq uint64) (reason string, ok bool) {
	val, closer, err := j.db.Get(record.LogKey(seq))
	if err != nil {
		return "", false
	}
	defer func() { _ = closer.Close() }()
	n := len(val)
	if n <= j.opts.RecordBytesMax || n > recordBytesMaxHigh {
		return "", false
	}
	if _, err := record.ParseEnvelope(seq, val, recordBytesMaxHigh); err != nil {
		return "", false
	}
	return fmt.Sprintf("size: a record of %d bytes, intact but over RecordBytesMax (%d): it was written with "+
		"a higher RecordBytesMax, which must never be lowered below a record the journal holds; "+
		"open with RecordBytesMax of at least %d to read it", n, j.opts.RecordBytesMax, n), true
}

// EngineID returns the id the journal was created with.
func (j *Journal) EngineID() string { return j.engineID }

// Dir returns the directory passed to Open.
func (j *Journal) Dir() string { return j.dir }

// LastSeq returns the highest acknowledged seq (0 for an empty journal).
// Every record up to it is synced; records 1..LastSeq form the log.
func (j *Journal) LastSeq() uint64 { return j.lastSeq.Load() }

// LastAt returns the At (Unix nanoseconds) of the record at LastSeq, or 0
// for an empty journal.
func (j *Journal) LastAt() int64 { return j.lastAt.Load() }

// Metrics returns the counters so far.
func (j *Journal) Metrics() Metrics {
	return Metrics{
		Groups:           j.m.groups.Load(),
		Records:          j.m.records.Load(),
		Bytes:            j.m.bytes.Load(),
		Fsyncs:           j.m.fsyncs.Load(),
		DiskSlow:         j.m.diskSlow.Load(),
		BackgroundErrors: j.m.backgroundErrs.Load(),
		LoggedErrors:     j.m.loggedErr.Load(),
		WALsCreated:      j.m.walsCreated.Load(),
		Warms:            j.m.warms.Load(),
		QueueLen:         len(j.slots),
	}
}

// publish advances the acknowledged position and wakes [Journal.Wait].
func (j *Journal) publish(seq uint64, at int64) {
	j.ackMu.Lock()
	j.lastAt.Store(at)
	j.lastSeq.Store(seq)
	if j.ackCh != nil {
		close(j.ackCh)
		j.ackCh = nil
	}
	j.ackMu.Unlock()
}

// Wait blocks until LastSeq() > after and returns it, so that a follower
// can Scan from after+1. It is woken by each commit, never by polling.
// It returns early with ctx's error, [ErrClosed] or [ErrFailStop]; on a
// read-only journal it returns [ErrReadOnly] instead of blocking.
func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) {
	for {
		j.ackMu.Lock()
		last := j.lastSeq.Load()
		if j.ackCh == nil {
			j.ackCh = make(chan struct{})
		}
		ch := j.ackCh
		j.ackMu.Unlock()
		if last > after {
			return last, nil
		}
		if j.opts.ReadOnly {
			return last, fmt.Errorf("journal: wait for seq > %d: %w", after, ErrReadOnly)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return last, fmt.Errorf("journal: wait for seq > %d: %w", after, ctx.Err())
		case <-j.dead:
			return last, j.failStopError(fmt.Sprintf("wait for seq > %d", after))
		case <-j.closedCh:
			return last, fmt.Errorf("journal: wait for seq > %d: %w", after, ErrClosed)
		}
	}
}

// Close stops intake, lets every append that joined a group complete or
// fail (an [Journal.AppendUnits] call split over several groups appends
// all of them once its first one joined), releases open iterators and
// closes the store. It is
// idempotent: later calls return the first result. After a fail-stop it
// does not touch the store and returns an error wrapping [ErrFailStop].
func (j *Journal) Close() error {
	j.closeOnce.Do(func() { j.closeErr = j.close() })
	return j.closeErr
}

func (j *Journal) close() error {
	j.closeMu.Lock() // waits for joins and writes in progress
	j.closed = true
	close(j.closedCh)
	j.closeMu.Unlock()
	if j.writerDone != nil {
		j.splits.Wait() // split appends in progress finish their later groups
		close(j.quit)
		<-j.writerDone // every append that joined a group is answered
		<-j.idle       // and no appender commits its own group any more
	}
	j.closeMu.Lock()
	defer j.closeMu.Unlock()
	if j.isDead() {
		return j.failStopError("close")
	}
	j.itersMu.Lock()
	for it := range j.iters {
		it.release(fmt.Errorf("journal: iterate: %w", ErrClosed))
	}
	clear(j.iters)
	j.itersMu.Unlock()
	err := guard(j.db.Close)
	if errors.Is(err, errFatal) {
		return j.failStopError("close")
	}
	if j.health != nil {
		_ = j.health.Close()
	}
	if j.lock != nil {
		if lerr := j.lock.Close(); err == nil && lerr != nil {
			err = lerr
		}
	}
	if err != nil {
		return pebbleError("close", err)
	}
	return nil
}

// readBegin checks that a read may call into Pebble. The caller holds
// closeMu shared.
func (j *Journal) readBegin(op string) error {
	if j.closed {
		return fmt.Errorf("journal: %s: %w", op, ErrClosed)
	}
	if j.isDead() {
		return j.failStopError(op)
	}
	return nil
}

func (j *Journal) register(it openIter) {
	j.itersMu.Lock()
	j.iters[it] = struct{}{}
	j.itersMu.Unlock()
}

func (j *Journal) unregister(it openIter) {
	j.itersMu.Lock()
	delete(j.iters, it)
	j.itersMu.Unlock()
}
