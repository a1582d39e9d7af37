package state_test

import (
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStats(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "plain", "v"))
	require.NoError(t, f.db.Set(f.ctx, "ttl", "v", state.TTL(time.Minute)))
	require.NoError(t, f.db.Set(f.ctx, "old", "v", state.TTL(time.Second)))
	_, err := f.db.Lease(f.ctx, "held", "a", time.Minute)
	require.NoError(t, err)
	_, err = f.db.Lease(f.ctx, "lapsed", "a", time.Second)
	require.NoError(t, err)
	f.clock.Advance(2 * time.Second)

	s, err := f.db.Stats(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, state.SchemaVersion, s.SchemaVersion)
	assert.Equal(t, int64(2), s.Keys)
	assert.Equal(t, int64(1), s.KeysWithDeadline)
	assert.Equal(t, int64(1), s.ExpiredKeys)
	assert.Equal(t, int64(1), s.Leases)
	assert.Equal(t, int64(2), s.LeaseNames)
	assert.Positive(t, s.Pages)
	assert.Positive(t, s.PageSize)
	assert.Equal(t, f.db.Now(), s.Now)
	assert.False(t, s.HighWater.Before(s.Now), "the mark is at or after every time used")
	assert.Zero(t, s.ClockBehind, "a sane clock")

	// A new process whose wall clock stepped an hour back.
	require.NoError(t, f.db.Close())
	f.clock = f.clock.Restart()
	f.clock.StepWall(-time.Hour)
	db := f.open(state.WithReadOnly())
	defer db.Close()
	s2, err := db.Stats(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, s.Now, s2.HighWater, "a clean close leaves the exact latest time used as the mark")
	f.clock.Advance(time.Hour)
	s3, err := db.Stats(f.ctx)
	require.NoError(t, err)
	assert.Equal(t, s2.HighWater, s3.HighWater, "a read-only handle never advances the mark")
	assert.Equal(t, s2.HighWater.Sub(s2.Wall)-state.HighWaterLead, s2.ClockBehind)
	assert.Greater(t, s2.ClockBehind, 59*time.Minute)
	assert.Equal(t, s2.HighWater, s2.Now, "the engine counts from the mark")
}
