package redisstate_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestARefusedWriteIsUnavailableAndAppliesNothing: a server that refuses
// writes (memory full under noeviction, fewer replicas than
// min-replicas-to-write, a failed RDB save under
// stop-writes-on-bgsave-error) answers every write verb with an error
// wrapping ErrUnavailable and naming the refusal, and applies nothing: once
// the refusal is lifted the data is as it was, no lease was granted, and a
// buffered increment whose flush was refused is flushed once.
func TestARefusedWriteIsUnavailableAndAppliesNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		word   string                                    // the refusal's error word
		refuse func(t *testing.T, srv *redistest.Server) // makes srv refuse writes
		lift   []string                                  // the command that lifts it
		allows []string                                  // verbs Redis lets through: they free memory or add none
	}{
		{"min-replicas-to-write", "NOREPLICAS", func(t *testing.T, srv *redistest.Server) {
			redisCmd(t, srv, "CONFIG", "SET", "min-replicas-to-write", "1")
		}, []string{"CONFIG", "SET", "min-replicas-to-write", "0"}, nil},
		{"maxmemory under noeviction", "OOM", func(t *testing.T, srv *redistest.Server) {
			redisCmd(t, srv, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			redisCmd(t, srv, "CONFIG", "SET", "maxmemory", "1")
		}, []string{"CONFIG", "SET", "maxmemory", "0"}, []string{"Del", "Expire"}},
		{"a failed RDB save", "MISCONF", func(t *testing.T, srv *redistest.Server) {
			// A directory where the snapshot goes (dbfilename's default):
			// the save's rename fails.
			require.NoError(t, os.Mkdir(filepath.Join(srv.Dir(), "dump.rdb"), 0o755))
			redisCmd(t, srv, "CONFIG", "SET", "save", "3600 1")
			redisCmd(t, srv, "BGSAVE")
			eventually(t, "the snapshot failed", func() bool {
				info, err := redistest.CommandText(srv.Addr(), srv.Password(), "INFO", "persistence")
				return err == nil && strings.Contains(info, "rdb_last_bgsave_status:err")
			})
		}, []string{"CONFIG", "SET", "save", ""}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, srv := openDB(t)
			ctx := ctxT(t)
			require.NoError(t, db.Set(ctx, "k", 10))
			c.refuse(t, srv)

			require.NoError(t, db.IncrBuffered("k", 1))
			for _, w := range writeVerbs(db) {
				if slices.Contains(c.allows, w.name) {
					continue
				}
				err := w.call(ctx)
				if assert.ErrorIs(t, err, state.ErrUnavailable, "%s", w.name) {
					assert.Contains(t, err.Error(), c.word, "%s names the refusal", w.name)
				}
			}

			redisCmd(t, srv, c.lift...)
			v, err := db.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, "10", v.String(), "no refused write was applied")
			ttl, err := db.TTL(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, state.NoExpiry, ttl, "the refused Expire set no deadline")
			l, err := db.Lease(ctx, "job", "b", time.Minute)
			require.NoError(t, err, "the refused grant holds nothing")
			assert.EqualValues(t, 1, l.Token, "the refused grant took no token")
			require.NoError(t, db.Flush(ctx), "the refused flush kept its delta")
			v, err = db.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, "11", v.String(), "the delta flushed once")
		})
	}
}

// TestAReplicaRefusesWritesAsUnavailable: a store opened on a read-only
// replica reads what the master wrote, and each write verb gets
// ErrUnavailable naming READONLY, applying nothing.
func TestAReplicaRefusesWritesAsUnavailable(t *testing.T) {
	master, msrv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, master.Set(ctx, "k", 10))
	host, port, _ := strings.Cut(msrv.Addr(), ":")
	replica := openURL(t, redistest.Start(t, redistest.WithArgs("--replicaof", host, port)).URL("t:"))
	eventually(t, "the replica has the master's key", func() bool {
		v, err := replica.Get(ctx, "k")
		return err == nil && v.String() == "10"
	})

	require.NoError(t, replica.IncrBuffered("k", 1))
	for _, w := range writeVerbs(replica) {
		err := w.call(ctx)
		if assert.ErrorIs(t, err, state.ErrUnavailable, "%s", w.name) {
			assert.Contains(t, err.Error(), "READONLY", "%s names the refusal", w.name)
		}
	}
	v, err := master.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "10", v.String(), "no refused write was applied")
	l, err := master.Lease(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	assert.EqualValues(t, 1, l.Token, "the refused grant took no token")
}

// writeVerb is a write verb on the key "k" (holding 10, with a delta of
// 1 buffered) or the lease "job".
type writeVerb struct {
	name string
	call func(ctx context.Context) error
}

// writeVerbs lists db's write verbs, Del last: where it is let through,
// the others still find "k".
func writeVerbs(db *state.DB) []writeVerb {
	return []writeVerb{
		{"Set", func(ctx context.Context) error { return db.Set(ctx, "k", 11) }},
		{"Incr", func(ctx context.Context) error { _, err := db.Incr(ctx, "k"); return err }},
		{"CAS", func(ctx context.Context) error { _, err := db.CAS(ctx, "k", 10, 12); return err }},
		{"Expire", func(ctx context.Context) error { _, err := db.Expire(ctx, "k", time.Minute); return err }},
		{"Lease", func(ctx context.Context) error { _, err := db.Lease(ctx, "job", "a", time.Minute); return err }},
		{"Flush", db.Flush},
		{"Update", func(ctx context.Context) error {
			return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("k", 13) })
		}},
		{"Del", func(ctx context.Context) error { _, err := db.Del(ctx, "k"); return err }},
	}
}
