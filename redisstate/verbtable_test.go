package redisstate_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/internal/verbtest"
	_ "github.com/statekit/statekit/redisstate"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// TestVerbTable runs the verb table every backend shares (internal/verbtest)
// on a real redis-server (appendonly yes, appendfsync always, so leases are
// granted), each case under a key prefix of its own so cases are
// independent. Redis expires keys itself: Sweep reports 0 and Scan may never
// see an expired key; Stats has no file to describe.
func TestVerbTable(t *testing.T) {
	srv := redistest.Start(t)
	var n atomic.Int64
	verbtest.Run(t, func(t *testing.T) *state.DB {
		prefix := fmt.Sprintf("verbtable:%d:", n.Add(1))
		db, err := state.Open(srv.URL(prefix))
		require.NoError(t, err, "open %s", prefix)
		return db
	}, verbtest.Options{})
}

// TestVerbTableWithoutExpireTime runs the table on a server that has no
// PEXPIRETIME, as Redis 6.2 has none (the command is renamed away, so the
// server answers "unknown command"): every verb then reads a deadline as
// now + PTTL, and the edges must not move.
func TestVerbTableWithoutExpireTime(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--rename-command", "PEXPIRETIME", ""))
	out, err := srv.Command("PEXPIRETIME", "k")
	require.Error(t, err, "PEXPIRETIME is gone: %s", out)
	var n atomic.Int64
	verbtest.Run(t, func(t *testing.T) *state.DB {
		prefix := fmt.Sprintf("verbtable:%d:", n.Add(1))
		db, err := state.Open(srv.URL(prefix))
		require.NoError(t, err, "open %s", prefix)
		return db
	}, verbtest.Options{})
}

// TestVerbTableCluster runs the same table on a three-master Redis
// Cluster, through go-redis's cluster client. Each case's prefix is a hash
// tag ({verbtable7}:), which puts the case's whole store in one slot, so
// its transactions are allowed; the cases spread over the masters.
func TestVerbTableCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster takes seconds to start")
	}
	c := redistest.StartCluster(t, 3)
	var n atomic.Int64
	verbtest.Run(t, func(t *testing.T) *state.DB {
		prefix := fmt.Sprintf("{verbtable%d}:", n.Add(1))
		db, err := state.Open(c.URL(prefix))
		require.NoError(t, err, "open %s", prefix)
		return db
	}, verbtest.Options{})
}
