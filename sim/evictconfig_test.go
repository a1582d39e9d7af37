package sim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/sim"
)

// TestEvictFailedSyncsFlag: -evictfailedsyncs is in the replay line and
// parses back, and it excludes -dropfailedsyncs.
func TestEvictFailedSyncsFlag(t *testing.T) {
	cfg := sim.DefaultConfig(12)
	cfg.EvictFailedSyncs = true
	line := cfg.ReplayLine()
	assert.Contains(t, line, " -evictfailedsyncs")
	got, err := sim.ParseReplay(line)
	require.NoError(t, err)
	assert.True(t, got.EvictFailedSyncs)
	assert.False(t, got.DropFailedSyncs)

	_, err = sim.ParseReplay(line + " -dropfailedsyncs")
	assert.ErrorContains(t, err, "want one at most")
}

// TestEvictFailedSyncsRunIsDeterministic: a run with failed syncs whose
// pages the disk evicts one at a time gives the same trace twice, and
// evicts some.
func TestEvictFailedSyncsRunIsDeterministic(t *testing.T) {
	cfg := sim.DefaultConfig(10040001)
	cfg.EvictFailedSyncs = true
	cfg.Rates.SyncError = 0.03
	cfg.Ops = 200
	a, err := sim.Run(cfg)
	require.NoError(t, err)
	b, err := sim.Run(cfg)
	require.NoError(t, err)
	assert.Equal(t, a.Trace, b.Trace)
	assert.Positive(t, a.Stats.Disk.EvictedPages)
}
