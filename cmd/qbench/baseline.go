package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

const (
	baselineValueBytes  = 200
	baselineConcurrency = 64
	baselineSeqDefault  = 2000
	baselinePerGoDef    = 500
)

// baseline measures raw Pebble synced commits/s on the same file system,
// sequentially and from 64 goroutines, and keeps the figures for the
// ratios of the other workloads.
func (b *bench) baseline(ctx context.Context) error {
	seqN := baselineSeqDefault
	concN := baselineConcurrency * baselinePerGoDef
	if len(b.cfg.sizes) > 0 && b.cfg.workload == "baseline" {
		seqN = b.cfg.sizes[0]
		concN = b.cfg.sizes[0]
	}
	for _, mode := range []struct {
		name string
		gos  int
		n    int
	}{{"sequential", 1, seqN}, {"c64", baselineConcurrency, concN}} {
		var runs []*obj
		for range b.cfg.runs {
			secs, lat, err := b.pebbleCommits(mode.gos, mode.n)
			if err != nil {
				return err
			}
			runs = append(runs, newObj(
				"workload", "baseline", "variant", mode.name, "goroutines", mode.gos,
				"commits", mode.n, "value_bytes", baselineValueBytes,
				"seconds", round(secs, 4),
				"commits_per_sec", round(float64(mode.n)/secs, 1),
				"commit_p50_ms", ms(percentile(lat, 50)),
				"commit_p99_ms", ms(percentile(lat, 99)),
			))
		}
		o := medianObj(runs, "commits_per_sec")
		if mode.gos == 1 {
			b.baseSeq = o.num("commits_per_sec")
		} else {
			b.base = o.num("commits_per_sec")
		}
		b.emit(o)
	}
	return nil
}

// openPebble opens a fresh raw Pebble store in a temporary directory
// named for prefix; closeDB closes it and removes the directory.
func (b *bench) openPebble(prefix string) (db *pebble.DB, closeDB func(), err error) {
	dir, cleanup, err := b.tempDir(prefix)
	if err != nil {
		return nil, nil, err
	}
	if db, err = pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{}}); err != nil {
		cleanup()
		return nil, nil, err
	}
	return db, func() { db.Close(); cleanup() }, nil
}

// pebbleCommits opens a fresh store and times n synced Sets of 200-byte
// values from gos goroutines; it returns the total seconds and the sorted
// latencies of the Sets.
func (b *bench) pebbleCommits(gos, n int) (float64, []time.Duration, error) {
	db, closeDB, err := b.openPebble("pebble")
	if err != nil {
		return 0, nil, err
	}
	defer closeDB()
	val := make([]byte, baselineValueBytes)
	rand.Read(val)
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
		lat   = make([]time.Duration, n)
	)
	start := time.Now()
	for range gos {
		wg.Go(func() {
			key := make([]byte, 16)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				binary.BigEndian.PutUint64(key, uint64(i))
				copy(key[8:], "qbench-k")
				t := time.Now()
				err := db.Set(key, val, pebble.Sync)
				lat[i] = time.Since(t)
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = fmt.Errorf("pebble set: %w", err)
					}
					errMu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	slices.Sort(lat)
	return secs, lat, first
}

// quietLogger drops Pebble's informational messages, which would mix with
// qbench's output on stderr.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	fatal(fmt.Errorf("pebble: "+format, args...))
}
