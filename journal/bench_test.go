package journal

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/quire-dev/quire/clock/clocktest"
	"github.com/quire-dev/quire/journal/record"
)

// BenchmarkAppend measures synced appends of one record with a ~200-byte
// payload on a real directory, by c concurrent appenders (c=1 is
// sequential), beside the same workload on raw Pebble: one Set of a
// 200-byte value per commit with pebble.Sync. Report the ratio of the
// pairs, e.g. BenchmarkAppend/quire/c=16 against BenchmarkAppend/pebble/c=16.
//
//	go test ./journal -run XXX -bench BenchmarkAppend -benchtime=2000x -count 3
func BenchmarkAppend(b *testing.B) {
	body := &record.Debug{Subject: "wf_bench", Code: "bench", Message: strings.Repeat("m", 170)}
	payload, err := record.EncodeBody(body)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 200)
	for _, c := range []int{1, 4, 16, 64, 256} {
		b.Run(fmt.Sprintf("quire/c=%d", c), func(b *testing.B) {
			j, err := Open(b.TempDir(), Options{FS: vfs.Default, Clock: clocktest.New(epoch)})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = j.Close() }()
			rec := record.Record{Stream: "wf_bench", Body: body}
			b.SetBytes(int64(len(payload)))
			runConcurrent(b, c, func(int64) error {
				_, err := j.Append(context.Background(), rec)
				return err
			})
			m := j.Metrics()
			b.ReportMetric(float64(m.Records)/float64(m.Groups), "recs/group")

		})
		b.Run(fmt.Sprintf("pebble/c=%d", c), func(b *testing.B) {
			db, err := pebble.Open(b.TempDir(), &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			b.SetBytes(int64(len(value)))
			runConcurrent(b, c, func(i int64) error {
				var key [record.LogKeyBytes]byte
				return db.Set(record.AppendLogKey(key[:0], uint64(i)), value, pebble.Sync)
			})
		})
	}
}

// runConcurrent runs b.N calls of f over c goroutines.
func runConcurrent(b *testing.B, c int, f func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
}
