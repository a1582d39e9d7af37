package state_test

// Benchmarks of each verb beside the naive baseline: what a developer writes
// in an afternoon with database/sql prepared statements on the same SQLite
// driver, the same pragmas (WAL, synchronous=NORMAL, busy_timeout), the same
// kv table and the same disk. cmd/statebench runs the same scenarios
// interleaved and prints the ratios the targets are stated in; these are for
// go test -bench and profiling:
//
//	go test -run '^$' -bench . -benchmem ./state/
//	go test -run '^$' -bench 'Incr/statekit' -cpuprofile cpu.prof ./state/
//
// Benchmarks never assert on time. The tests at the end check that what the
// concurrent benchmarks measure is also exact.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state"
)

// The naive baseline: statekit's kv table and index, one prepared statement
// per verb, now from time.Now.
const (
	perfNaiveDSN    = "file:%s?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	perfNaiveSchema = `CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value NOT NULL, expires_at INTEGER);
CREATE INDEX IF NOT EXISTS kv_expires ON kv(expires_at) WHERE expires_at IS NOT NULL`
	perfNaiveIncr = `INSERT INTO kv(key, value) VALUES (?1, 1)
ON CONFLICT(key) DO UPDATE SET value = value + 1 RETURNING value`
	perfNaiveGet = `SELECT value FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)`
	perfNaiveSet = `INSERT INTO kv(key, value, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT(key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`
	perfNaiveCAS = `UPDATE kv SET value = ?3 WHERE key = ?1 AND value = ?2`
)

// perfNaive is the baseline: a database/sql pool and its statements.
type perfNaive struct {
	db                  *sql.DB
	incr, get, set, cas *sql.Stmt
}

func perfOpenNaive(b *testing.B) *perfNaive {
	b.Helper()
	db, err := sql.Open("sqlite", fmt.Sprintf(perfNaiveDSN, filepath.Join(b.TempDir(), "naive.db")))
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(perfNaiveSchema)
	require.NoError(b, err)
	n := &perfNaive{db: db}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{{&n.incr, perfNaiveIncr}, {&n.get, perfNaiveGet}, {&n.set, perfNaiveSet}, {&n.cas, perfNaiveCAS}} {
		*p.dst, err = db.Prepare(p.sql)
		require.NoError(b, err)
	}
	return n
}

func perfOpen(tb testing.TB, opts ...state.Option) *state.DB {
	tb.Helper()
	db, err := state.Open(filepath.Join(tb.TempDir(), "bench.state"), opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// perfKeys is how many distinct keys Get and Set walk over.
const perfKeys = 1000

func perfKey(i int) string { return "key:" + strconv.Itoa(i%perfKeys) }

func BenchmarkIncr(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := perfOpen(b)
		for b.Loop() {
			if _, err := db.Incr(ctx, "counter"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := perfOpenNaive(b)
		for b.Loop() {
			var v int64
			if err := n.incr.QueryRowContext(ctx, "counter").Scan(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	// naive-checkpointed reads the rows to their end: the statement then
	// steps to its end, where SQLite runs its automatic checkpoint, which
	// QueryRow never reaches (its WAL grows without bound).
	b.Run("naive-checkpointed", func(b *testing.B) {
		n := perfOpenNaive(b)
		for b.Loop() {
			if err := perfIncrToEnd(ctx, n.incr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// perfIncrToEnd runs the naive upsert and reads its rows to the end.
func perfIncrToEnd(ctx context.Context, st *sql.Stmt) error {
	rows, err := st.QueryContext(ctx, "counter")
	if err != nil {
		return err
	}
	defer rows.Close()
	var v int64
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return err
		}
	}
	return rows.Err()
}

func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := perfOpen(b)
		for i := range perfKeys {
			require.NoError(b, db.Set(ctx, perfKey(i), "value"))
		}
		i := 0
		for b.Loop() {
			if _, err := db.Get(ctx, perfKey(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := perfOpenNaive(b)
		for i := range perfKeys {
			_, err := n.set.Exec(perfKey(i), []byte("value"), nil)
			require.NoError(b, err)
		}
		i := 0
		for b.Loop() {
			var v []byte
			if err := n.get.QueryRowContext(ctx, perfKey(i), time.Now().UnixMilli()).Scan(&v); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkSetTTL(b *testing.B) {
	ctx := context.Background()
	value := []byte("a value of some thirty-two bytes")
	b.Run("statekit", func(b *testing.B) {
		db := perfOpen(b)
		i := 0
		for b.Loop() {
			if err := db.Set(ctx, perfKey(i), value, state.TTL(time.Hour)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("naive", func(b *testing.B) {
		n := perfOpenNaive(b)
		i := 0
		for b.Loop() {
			deadline := time.Now().Add(time.Hour).UnixMilli()
			if _, err := n.set.ExecContext(ctx, perfKey(i), value, deadline); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

func BenchmarkCAS(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := perfOpen(b)
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
		n := perfOpenNaive(b)
		_, err := n.set.Exec("cas", 0, nil)
		require.NoError(b, err)
		i := int64(0)
		for b.Loop() {
			res, err := n.cas.ExecContext(ctx, "cas", i, i+1)
			if err != nil {
				b.Fatal(err)
			}
			if k, _ := res.RowsAffected(); k != 1 {
				b.Fatal("naive CAS did not swap")
			}
			i++
		}
	})
}

// BenchmarkLease compares a grant (synchronous=FULL), on a new name each
// time, with the floor of any durable commit: appending a record to a file
// and syncing it (File.Sync, fsync, which works everywhere; cmd/statebench
// uses fdatasync on Linux, as SQLite does).
func BenchmarkLease(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := perfOpen(b)
		i := 0
		for b.Loop() {
			if _, err := db.Lease(ctx, "lease:"+strconv.Itoa(i), "owner", time.Minute); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("sync", func(b *testing.B) {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		require.NoError(b, err)
		b.Cleanup(func() { _ = f.Close() })
		record := make([]byte, 64)
		for b.Loop() {
			if _, err := f.Write(record); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// perfParallel runs op b.N times in all from g goroutines.
func perfParallel(b *testing.B, g int, op func() error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range g {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkHotKey runs Incr on one key from 8 goroutines: statekit's verbs
// that arrive together share a transaction; the naive pool's connections
// contend in SQLite's busy handler.
func BenchmarkHotKey(b *testing.B) {
	ctx := context.Background()
	b.Run("statekit", func(b *testing.B) {
		db := perfOpen(b)
		perfParallel(b, 8, func() error { _, err := db.Incr(ctx, "hot"); return err })
	})
	b.Run("naive", func(b *testing.B) {
		n := perfOpenNaive(b)
		perfParallel(b, 8, func() error {
			var v int64
			return n.incr.QueryRowContext(ctx, "hot").Scan(&v)
		})
	})
}

// BenchmarkIncrBuffered runs IncrBuffered on one key from 8 goroutines.
func BenchmarkIncrBuffered(b *testing.B) {
	ctx := context.Background()
	db := perfOpen(b)
	perfParallel(b, 8, func() error { return db.IncrBuffered("hot", 1) })
	b.StopTimer()
	require.NoError(b, db.Flush(ctx))
	v, err := db.Get(ctx, "hot")
	require.NoError(b, err)
	n, _ := v.Int()
	require.Equal(b, int64(b.N), n)
}

// TestHotKeyIsExact: goroutines incrementing one key at once, whose verbs
// share transactions, each get a distinct result, and the count is exact.
func TestHotKeyIsExact(t *testing.T) {
	ctx := context.Background()
	db := perfOpen(t)
	const goroutines, each = 8, 300
	seen := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				n, err := db.Incr(ctx, "hot")
				if !assert.NoError(t, err) {
					return
				}
				seen[g] = append(seen[g], n)
			}
		})
	}
	wg.Wait()
	got := map[int64]bool{}
	for _, s := range seen {
		for i, n := range s {
			if i > 0 {
				assert.Greater(t, n, s[i-1], "one goroutine's results go up")
			}
			assert.False(t, got[n], "result %d handed out twice", n)
			got[n] = true
		}
	}
	assert.Len(t, got, goroutines*each)
	v, err := db.Get(ctx, "hot")
	require.NoError(t, err)
	assert.Equal(t, state.IntValue(goroutines*each), v)
}

// TestStatementErrorsStayWithTheirVerb: a verb whose statement fails
// (ErrNotInteger, ErrOverflow) in a transaction it shares with others gets
// its error, changes nothing, and the others commit.
func TestStatementErrorsStayWithTheirVerb(t *testing.T) {
	ctx := context.Background()
	db := perfOpen(t)
	require.NoError(t, db.Set(ctx, "text", "words"))
	require.NoError(t, db.Set(ctx, "max", int64(1<<62)))
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				var err error
				switch (g + i) % 4 {
				case 0:
					_, err = db.Incr(ctx, "text")
					assert.ErrorIs(t, err, state.ErrNotInteger)
				case 1:
					_, err = db.IncrBy(ctx, "max", 1<<62)
					assert.ErrorIs(t, err, state.ErrOverflow)
				case 2:
					_, err = db.Incr(ctx, "good")
					assert.NoError(t, err)
				case 3:
					err = db.Set(ctx, "set:"+strconv.Itoa(g), i)
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	for key, want := range map[string]state.Value{
		"text": state.BytesValue([]byte("words")), "max": state.IntValue(1 << 62),
		"good": state.IntValue(goroutines * each / 4),
	} {
		v, err := db.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, v, key)
	}
}

// TestCancelledVerbsLoseNothing: verbs whose context ends while they wait
// or run, some in a transaction shared with others, lose no acknowledged
// increment and invent none. A verb that fails with its context's error did
// nothing (its statements, once started, run to their end: driverstmt.go),
// so the count is exactly the acknowledged increments.
func TestCancelledVerbsLoseNothing(t *testing.T) {
	db := perfOpen(t)
	const goroutines, each = 8, 200
	var succeeded, cancelled atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((g*each+i)%50)*time.Microsecond)
				_, err := db.Incr(ctx, "hot")
				cancel()
				switch {
				case err == nil:
					succeeded.Add(1)
				case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	var got int64
	v, err := db.Get(context.Background(), "hot")
	if !errors.Is(err, state.ErrNotFound) {
		require.NoError(t, err)
		got, _ = v.Int()
	}
	assert.Equal(t, succeeded.Load(), got, "acknowledged increments (and %d cancelled)", cancelled.Load())
}

// TestSweepTakesTurnsWithVerbs: a sweep running beside write verbs deletes
// every expired key once and no live one, and loses no write.
func TestSweepTakesTurnsWithVerbs(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	db := perfOpen(t, state.WithClock(clock), state.WithoutBackground())
	const expired, goroutines, each = 3000, 4, 200
	require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
		for i := range expired {
			if err := tx.Set("old:"+strconv.Itoa(i), i, state.TTL(time.Second)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Set(ctx, "live", "stays", state.TTL(time.Hour)))
	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	var swept int
	wg.Go(func() {
		n, err := db.Sweep(ctx)
		assert.NoError(t, err)
		swept = n
	})
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				_, err := db.Incr(ctx, "n:"+strconv.Itoa(g))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, expired, swept, "every expired key swept, once")
	n, err := db.Sweep(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	for g := range goroutines {
		v, err := db.Get(ctx, "n:"+strconv.Itoa(g))
		require.NoError(t, err)
		assert.Equal(t, state.IntValue(each), v)
	}
	v, err := db.Get(ctx, "live")
	require.NoError(t, err)
	assert.Equal(t, "stays", v.String())
}

// TestCloseWithVerbsQueued: Close while goroutines are queued for the
// handle hangs no one; each verb either ran or returns ErrClosed.
func TestCloseWithVerbsQueued(t *testing.T) {
	ctx := context.Background()
	db, err := state.Open(filepath.Join(t.TempDir(), "close.state"))
	require.NoError(t, err)
	const goroutines = 8
	var ran atomic.Int64
	var wg sync.WaitGroup
	busy := make(chan struct{})
	var once sync.Once
	for range goroutines {
		wg.Go(func() {
			for {
				_, err := db.Incr(ctx, "n")
				if errors.Is(err, state.ErrClosed) {
					return
				}
				if !assert.NoError(t, err) {
					return
				}
				if ran.Add(1) == 100 {
					once.Do(func() { close(busy) })
				}
			}
		})
	}
	<-busy
	require.NoError(t, db.Close())
	wg.Wait()
	db, err = state.Open(filepath.Join(filepath.Dir(db.Path()), "close.state"))
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, state.IntValue(ran.Load()), v, "every acknowledged increment is in the file")
}
