package state_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// leakOps is how many verbs TestMemoryStaysFlat runs after its warm-up;
// make it 1000000 for the full measurement (a minute or two).
var leakOps = flag.Int("statekit.leakops", 10000, "verbs TestMemoryStaysFlat runs after warming up")

// workout runs n verbs of every kind on db over a bounded key space, so
// the file stops growing and whatever still grows is a leak.
func workout(t testing.TB, db *state.DB, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		key := "k" + strconv.Itoa(i%500)
		var err error
		switch i % 10 {
		case 0, 1:
			err = db.Set(ctx, key, i, state.TTL(time.Duration(1+i%50)*time.Millisecond))
		case 2:
			err = db.Set(ctx, key, []byte(key+"-value"))
		case 3:
			_, err = db.Get(ctx, key)
		case 4:
			_, err = db.Incr(ctx, "n"+strconv.Itoa(i%7))
		case 5:
			_, err = db.CAS(ctx, key, nil, "x")
		case 6:
			_, err = db.TTL(ctx, key)
		case 7:
			var l *state.Lease
			if l, err = db.Lease(ctx, "job", "worker", time.Minute); err == nil {
				err = db.Release(ctx, l)
			}
		case 8:
			err = db.IncrBuffered("buffered", 1)
		case 9:
			err = db.Update(ctx, func(tx *state.Tx) error {
				_, err := tx.Incr("tx")
				return err
			})
		}
		if err != nil && !errors.Is(err, state.ErrNotFound) && !errors.Is(err, state.ErrNotInteger) &&
			!errors.Is(err, state.ErrReadOnly) {
			require.NoError(t, err, "verb %d", i)
		}
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/dev/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	forEachBackend(t, func(t *testing.T, b backend) {
		path := filepath.Join(t.TempDir(), "leak.state")
		opts := append(b.opts(t), state.WithSweepInterval(time.Millisecond), state.WithFlushInterval(time.Millisecond))
		db, err := state.Open(path, opts...)
		require.NoError(t, err)
		workout(t, db, 1500) // enough writes for a background checkpoint
		require.NoError(t, db.Close())
		ro, err := state.Open(path, append(b.opts(t), state.WithReadOnly())...)
		require.NoError(t, err)
		workout(t, ro, 100)
		require.NoError(t, ro.Close())
	})
}

func TestCloseReleasesFileDescriptors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fd.state")
	warm, err := state.Open(path)
	require.NoError(t, err)
	workout(t, warm, 200)
	require.NoError(t, warm.Close())
	foreign := filepath.Join(dir, "foreign.txt")
	require.NoError(t, os.WriteFile(foreign, []byte("not a database, just words\n"), 0o600))

	before := openFDs(t)
	for i := 0; i < 3; i++ {
		db, err := state.Open(path)
		require.NoError(t, err)
		workout(t, db, 1500) // past a background checkpoint, which opens its own connection
		require.NoError(t, db.Close())
		ro, err := state.Open(path, state.WithReadOnly())
		require.NoError(t, err)
		require.NoError(t, ro.Close())
		_, err = state.Open(foreign)
		require.ErrorIs(t, err, state.ErrNotStatekit)
	}
	assert.Equal(t, before, openFDs(t), "every file a handle opened, a failed open included, is closed")
}

// memory is what TestMemoryStaysFlat measures: the Go heap after a
// collection, and the resident set, which also holds SQLite's own memory
// (modernc's libc allocates outside the Go heap).
type memory struct{ heap, rss uint64 }

func measure(t *testing.T) memory {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{heap: ms.HeapAlloc, rss: residentBytes(t)}
}

// residentBytes reads the resident set size from /proc, or 0 where there
// is none (the heap bound still applies).
func residentBytes(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	require.GreaterOrEqual(t, len(fields), 2)
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	require.NoError(t, err)
	return pages * uint64(os.Getpagesize())
}

func (m memory) String() string {
	return fmt.Sprintf("heap %.1f MiB, resident %.1f MiB", float64(m.heap)/(1<<20), float64(m.rss)/(1<<20))
}

// Bounds on growth between the warm-up and the end. Generous, so that
// allocator noise passes: over the default 10,000 verbs they catch a leak
// of about 420 bytes a verb on the heap; over a million
// (-statekit.leakops=1000000), one of a few bytes.
const (
	heapGrowthMax = 4 << 20
	rssGrowthMax  = 24 << 20
)

func TestMemoryStaysFlat(t *testing.T) {
	db, err := state.Open(filepath.Join(t.TempDir(), "mem.state"))
	require.NoError(t, err)
	defer db.Close()
	warmOps := max(*leakOps/10, 5000)
	workout(t, db, warmOps)
	warm := measure(t)
	start := time.Now()
	workout(t, db, *leakOps)
	end := measure(t)
	t.Logf("after %d verbs: %s; after %d more (%v): %s", warmOps, warm, *leakOps, time.Since(start).Round(time.Millisecond), end)
	assert.Less(t, int64(end.heap)-int64(warm.heap), int64(heapGrowthMax), "Go heap grew")
	if warm.rss > 0 {
		assert.Less(t, int64(end.rss)-int64(warm.rss), int64(rssGrowthMax), "resident memory grew")
	}
}
