package state_test

// Benchmarks of each verb beside the naive baseline: what a developer writes
// in an afternoon with database/sql prepared statements on the same SQLite
// driver, the same pragmas (WAL, synchronous=NORMAL, busy_timeout) and the
// same disk. cmd/statebench runs the same scenarios interleaved and prints
// ratios; these are for `go test -bench` and profiling:
//
//	go test -run '^$' -bench . -benchmem ./state/
//	go test -run '^$' -bench 'Incr$' -cpuprofile cpu.prof ./state/
//
// Benchmarks never assert on time.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state"
)

// The naive baseline's schema and statements: the same table as statekit,
// one prepared statement per verb, now from time.Now.
const (
	naiveDSN    = "file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)"
	naiveSchema = `CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value NOT NULL, expires_at INTEGER)`
	naiveIncr   = `INSERT INTO kv(key, value) VALUES (?1, 1)
ON CONFLICT(key) DO UPDATE SET value = value + 1 RETURNING value`
	naiveGet = `SELECT value FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)`
	naiveSet = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`
	naiveCAS = `UPDATE kv SET value = ?3 WHERE key = ?1 AND value = ?2`
)

// naive is the baseline: a database/sql pool and its prepared statements.
type naive struct {
	db                  *sql.DB
	incr, get, set, cas *sql.Stmt
}

func openNaive(b *testing.B) *naive {
	b.Helper()
	path := filepath.Join(b.TempDir(), "naive.db")
	db, err := sql.Open("sqlite", fmt.Sprintf(naiveDSN, path))
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(naiveSchema)
	require.NoError(b, err)
	n := &naive{db: db}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{{&n.incr, naiveIncr}, {&n.get, naiveGet}, {&n.set, naiveSet}, {&n.cas, naiveCAS}} {
		*p.dst, err = db.Prepare(p.sql)
		require.NoError(b, err)
	}
	return n
}

func openStatekit(b *testing.B) *state.DB {
	b.Helper()
	db, err := state.Open(filepath.Join(b.TempDir(), "bench.state"))
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func nowMillis() int64 { return time.Now().UnixMilli() }

func BenchmarkIncr(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := openStatekit(b)
		for b.Loop() {
			if _, err := db.Incr(ctx, "counter"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := openNaive(b)
		for b.Loop() {
			var v int64
			if err := n.incr.QueryRowContext(ctx, "counter").Scan(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// keys is how many distinct keys Get and Set walk over.
const keys = 1000

func keyName(i int) string { return "key:" + strconv.Itoa(i%keys) }

func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := openStatekit(b)
		for i := range keys {
			require.NoError(b, db.Set(ctx, keyName(i), "value"))
		}
		i := 0
		for b.Loop() {
			if _, err := db.Get(ctx, keyName(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := openNaive(b)
		for i := range keys {
			_, err := n.set.Exec(keyName(i), []byte("value"), nil)
			require.NoError(b, err)
		}
		i := 0
		for b.Loop() {
			var v any
			if err := n.get.QueryRowContext(ctx, keyName(i), nowMillis()).Scan(&v); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkSetTTL(b *testing.B) {
	ctx := context.Background()
	value := []byte("value")
	b.Run("statekit", func(b *testing.B) {
		db := openStatekit(b)
		i := 0
		for b.Loop() {
			if err := db.Set(ctx, keyName(i), value, state.TTL(time.Hour)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := openNaive(b)
		i := 0
		for b.Loop() {
			if _, err := n.set.ExecContext(ctx, keyName(i), value, nowMillis()+time.Hour.Milliseconds()); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkCAS(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := openStatekit(b)
		require.NoError(b, db.Set(ctx, "cas", 0))
		i := int64(0)
		for b.Loop() {
			ok, err := db.CAS(ctx, "cas", i, i+1)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := openNaive(b)
		_, err := n.set.Exec("cas", 0, nil)
		require.NoError(b, err)
		i := int64(0)
		for b.Loop() {
			res, err := n.cas.ExecContext(ctx, "cas", i, i+1)
			if err != nil {
				b.Fatal(err)
			}
			if k, _ := res.RowsAffected(); k != 1 {
				b.Fatal("cas did not swap")
			}
			i++
		}
	})
}

// BenchmarkLease compares a grant (synchronous=FULL) and release with the
// floor of any durable commit: appending a record to a file and fdatasync.
func BenchmarkLease(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := openStatekit(b)
		for b.Loop() {
			l, err := db.Lease(ctx, "lease", "owner", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := db.Release(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fdatasync", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		require.NoError(b, err)
		b.Cleanup(func() { _ = f.Close() })
		record := make([]byte, 64)
		for b.Loop() {
			if _, err := f.Write(record); err != nil {
				b.Fatal(err)
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkHotKey runs Incr on one key from 8 goroutines.
func BenchmarkHotKey(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := openStatekit(b)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := db.Incr(ctx, "hot"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("naive", func(b *testing.B) {
		n := openNaive(b)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				var v int64
				if err := n.incr.QueryRowContext(ctx, "hot").Scan(&v); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkIncrBuffered runs IncrBuffered on one key from 8 goroutines.
func BenchmarkIncrBuffered(b *testing.B) {
	ctx := context.Background()
	db := openStatekit(b)
	var total atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := db.IncrBuffered("hot", 1); err != nil {
				b.Error(err)
				return
			}
			total.Add(1)
		}
	})
	b.StopTimer()
	require.NoError(b, db.Flush(ctx))
	v, err := db.Get(ctx, "hot")
	require.NoError(b, err)
	n, _ := v.Int()
	require.Equal(b, total.Load(), n)
}
