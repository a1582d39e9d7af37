package state_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepDeletesOnlyExpired(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		require.NoError(t, f.db.Update(f.ctx, func(tx *state.Tx) error {
			for i := 0; i < 1000; i++ {
				if err := tx.Set(fmt.Sprintf("short%04d", i), i, state.TTL(time.Second)); err != nil {
					return err
				}
			}
			for i := 0; i < 10; i++ {
				if err := tx.Set(fmt.Sprintf("long%d", i), i, state.TTL(time.Hour)); err != nil {
					return err
				}
				if err := tx.Set(fmt.Sprintf("forever%d", i), i); err != nil {
					return err
				}
			}
			return nil
		}))
		_, err := f.db.Lease(f.ctx, "job", "a", time.Millisecond)
		require.NoError(t, err)

		n, err := f.db.Sweep(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "nothing expired yet")

		f.clock.Advance(999 * time.Millisecond)
		n, err = f.db.Sweep(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, n, "one ms before the deadline nothing is swept")

		f.clock.Advance(time.Millisecond)
		n, err = f.db.Sweep(f.ctx)
		require.NoError(t, err)
		assert.Equal(t, 1000, n, "every expired key, across several batches")
		assert.Equal(t, "int:3", f.get("long3"))
		assert.Equal(t, "int:3", f.get("forever3"))

		l, err := f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(2), l.Token, "leases are never swept")
	})
}

func TestWritesSweepALittle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// No goroutines (intervals 0), but inline sweeping on: the default.
		inline := newFixture(t, b)
		require.NoError(t, inline.db.Close())
		inline.db = inline.open(state.WithSweepInterval(0), state.WithFlushInterval(0))
		// WithoutBackground: the simulator's setting, no inline sweeps.
		quiet := newFixture(t, b)
		for _, f := range []*fixture{inline, quiet} {
			for i := 0; i < 100; i++ {
				require.NoError(t, f.db.Set(f.ctx, fmt.Sprintf("e%d", i), i, state.TTL(time.Millisecond)))
			}
			f.clock.Advance(time.Millisecond)
			for i := 0; i < 600; i++ {
				_, err := f.db.Incr(f.ctx, "counter")
				require.NoError(t, err)
			}
		}
		n, err := inline.db.Sweep(inline.ctx)
		require.NoError(t, err)
		// 700 writes (the 100 Sets counted): two inline sweeps, at the
		// 256th and the 512th, of 32 rows each.
		assert.Equal(t, 100-2*32, n, "writes swept 32 expired keys inline every 256 writes")
		n, err = quiet.db.Sweep(quiet.ctx)
		require.NoError(t, err)
		assert.Equal(t, 100, n, "WithoutBackground sweeps nothing by itself")
	})
}

// Once an inline sweep finds a backlog (it deleted all it could), writes
// beside the background sweeper sweep eight times as often, up to 16 rows each time, until one finds
// fewer: of 5,000 expired keys, 512 writes delete the 32 of the first
// inline sweep, within 256 writes, then 16 every 8th write, at least 544,
// where the plain cadence (32 every 256 writes) would delete 64 at most.
func TestWritesSweepFasterWhileBehind(t *testing.T) {
	// The background sweeper runs, but not in this test: its first pass
	// waits an hour of a clock that moves 1 ms.
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Close())
	f.db = f.open(state.WithSweepInterval(time.Hour), state.WithFlushInterval(0))
	ttl := state.TTL(time.Millisecond)
	for i := range 5000 {
		require.NoError(t, f.db.Set(f.ctx, fmt.Sprintf("e%d", i), i, ttl))
	}
	f.clock.Advance(time.Millisecond)
	st, err := f.db.Stats(f.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5000), st.ExpiredKeys)
	for range 512 {
		_, err := f.db.Incr(f.ctx, "counter")
		require.NoError(t, err)
	}
	st, err = f.db.Stats(f.ctx)
	require.NoError(t, err)
	swept := 5000 - st.ExpiredKeys
	assert.GreaterOrEqual(t, swept, int64(544), "expired keys the 512 writes swept")
	assert.LessOrEqual(t, swept, int64(32+64*16), "expired keys the 512 writes swept")
	// Exactly: the 5,000 Sets leave the write count at 136 of 256, so
	// the 120th Incr sweeps 32 rows, all it may (a backlog), and each
	// 8th of the 392 after it 16: 32 + 49*16.
	assert.Equal(t, int64(32+49*16), swept, "every 8th write sweeps 16 while behind")

	// Without the background sweeper, the plain cadence.
	g := newFixture(t, backends[0])
	require.NoError(t, g.db.Close())
	g.db = g.open(state.WithSweepInterval(0), state.WithFlushInterval(0))
	for i := range 5000 {
		require.NoError(t, g.db.Set(g.ctx, fmt.Sprintf("e%d", i), i, ttl))
	}
	g.clock.Advance(time.Millisecond)
	for range 512 {
		_, err := g.db.Incr(g.ctx, "counter")
		require.NoError(t, err)
	}
	st, err = g.db.Stats(g.ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(64), 5000-st.ExpiredKeys, "expired keys 512 writes swept without the background sweeper")
}

// TestWritesSweepAtThePlainCadenceAgainOnceAnAssistedSweepFindsFewer:
// writes beside the background sweeper that sweep faster while behind
// (every 8th write, 16 rows) go back to the plain cadence (32 rows every
// 256 writes) once an inline sweep finds fewer than it asked for: of 200
// expired keys, the 256th write sweeps 32 (a backlog), each 8th write
// after it 16 until the 88th finds the last 8; then 10 keys set and
// expired are left alone by the next 255 writes, and the 256th sweeps
// them. It failed (the 16th write after the backlog swept the 10) with
// afterWrite never turning the faster cadence off once on.
func TestWritesSweepAtThePlainCadenceAgainOnceAnAssistedSweepFindsFewer(t *testing.T) {
	// The background sweeper runs, but not in this test: its first pass
	// waits an hour.
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Close())
	f.db = f.open(state.WithSweepInterval(time.Hour), state.WithFlushInterval(0))
	ttl := state.TTL(time.Millisecond)
	expired := func() int64 {
		t.Helper()
		st, err := f.db.Stats(f.ctx)
		require.NoError(t, err)
		return st.ExpiredKeys
	}
	incr := func(n int) {
		t.Helper()
		for range n {
			_, err := f.db.Incr(f.ctx, "counter")
			require.NoError(t, err)
		}
	}
	for i := range 200 {
		require.NoError(t, f.db.Set(f.ctx, fmt.Sprintf("e%d", i), i, ttl))
	}
	f.clock.Advance(time.Millisecond)
	incr(55)
	require.Equal(t, int64(200), expired(), "255 writes: no inline sweep yet")
	incr(1)
	require.Equal(t, int64(200-32), expired(), "the 256th write swept 32, all it could: a backlog")
	incr(80)
	require.Equal(t, int64(8), expired(), "ten 8th writes swept 16 each")
	incr(8)
	require.Equal(t, int64(0), expired(), "the next 8th write found 8, fewer than 16")

	// Back to the plain cadence: 10 Sets, then 245 writes, sweep nothing.
	for i := range 10 {
		require.NoError(t, f.db.Set(f.ctx, fmt.Sprintf("f%d", i), i, ttl))
	}
	f.clock.Advance(time.Millisecond)
	incr(245)
	assert.Equal(t, int64(10), expired(), "255 writes after an inline sweep that found fewer than 16 sweep nothing")
	incr(1)
	assert.Equal(t, int64(0), expired(), "the 256th sweeps")
}

// TestBackgroundWorkRuns: the background sweeper and flusher run on their
// own. Each is waited for up to a minute, a cap for a loaded machine, not
// a speed target: one that never runs never gets there.
func TestBackgroundWorkRuns(t *testing.T) {
	clock := newClock()
	path := filepath.Join(t.TempDir(), "bg.state")
	db, err := state.Open(path, state.WithClock(clock),
		state.WithSweepInterval(time.Millisecond), state.WithFlushInterval(time.Millisecond))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(t.Context(), "k", 1, state.TTL(time.Millisecond)))
	clock.Advance(time.Millisecond)
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer raw.Close()
	require.Eventually(t, func() bool {
		var rows int
		require.NoError(t, raw.QueryRow(`SELECT count(*) FROM kv`).Scan(&rows))
		return rows == 0
	}, time.Minute, 5*time.Millisecond, "the background sweeper deleted the expired row")

	require.NoError(t, db.IncrBuffered("n", 3))
	require.Eventually(t, func() bool {
		v, err := db.Get(t.Context(), "n")
		return err == nil && v.String() == "3"
	}, time.Minute, 5*time.Millisecond, "the background flusher wrote the buffered increment")
}
