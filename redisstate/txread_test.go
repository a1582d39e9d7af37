package redisstate_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdateReadsAfterTheServerLostItsScripts: a transaction's read sends
// WATCH and the read script together; a server without the script
// (SCRIPT FLUSH, as after a restart) gets it again, and the WATCH still
// holds: a write by another client between the read and EXEC runs the
// callback again.
func TestUpdateReadsAfterTheServerLostItsScripts(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "k", 1))
	redisCmd(t, srv, "SCRIPT", "FLUSH")
	var runs atomic.Int64
	err := db.Update(ctx, func(tx *state.Tx) error {
		if runs.Add(1) == 1 {
			redisCmd(t, srv, "SCRIPT", "FLUSH")
		}
		v, err := tx.Get("k")
		if err != nil {
			return err
		}
		if runs.Load() == 1 {
			// Another client writes the key the transaction read.
			redisCmd(t, srv, "SET", "t:k:k", "i:5")
		}
		n, _ := v.Int()
		return tx.Set("copy", n)
	})
	require.NoError(t, err)
	assert.Equal(t, int64(2), runs.Load(), "the watched key changed under the first attempt")
	v, err := db.Get(ctx, "copy")
	require.NoError(t, err)
	assert.Equal(t, "5", v.String())
}

// TestUpdateDelReadsItsKeysTogether: Del inside Update reads all its keys
// in one round trip, with the same answers: the live ones counted, an
// expired one not, a key the transaction wrote from its overlay; a server
// without the read script gets it again.
func TestUpdateDelReadsItsKeysTogether(t *testing.T) {
	db, srv := openDB(t)
	ctx := ctxT(t)
	require.NoError(t, db.Set(ctx, "a", 1))
	require.NoError(t, db.Set(ctx, "b", 2, state.TTL(time.Hour)))
	require.NoError(t, db.Set(ctx, "gone", 3, state.TTL(time.Millisecond)))
	eventually(t, "gone expires", func() bool {
		_, err := db.Get(ctx, "gone")
		return errors.Is(err, state.ErrNotFound)
	})
	redisCmd(t, srv, "SCRIPT", "FLUSH")
	err := db.Update(ctx, func(tx *state.Tx) error {
		require.NoError(t, tx.Set("mine", 4))
		n, err := tx.Del("a", "b", "gone", "never", "mine", "a")
		require.NoError(t, err)
		assert.Equal(t, 3, n, "a, b and mine were live")
		_, err = tx.Get("b")
		assert.ErrorIs(t, err, state.ErrNotFound)
		return nil
	})
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "mine"} {
		_, err := db.Get(ctx, k)
		assert.ErrorIs(t, err, state.ErrNotFound, k)
	}
}
