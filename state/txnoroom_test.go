package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpdateOutOfRoomMidTransactionWritesNothing: the WAL runs out of
// room in the middle of a large Update, and SQLite rolls the whole
// transaction back. A callback that carries on after the verb's
// ErrDiskFull (it counts failures and goes on) must not write its later
// verbs one by one outside the transaction: every verb after the rollback
// refuses, Update returns ErrDiskFull, and nothing of the Update is in
// the file (it is all or nothing).
func TestUpdateOutOfRoomMidTransactionWritesNothing(t *testing.T) {
	fsys := &walSizeLimitFS{ProcessFS: faults.NewMemFS(1).Process(1)}
	db, err := state.Open("room.state", state.WithFS(fsys), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	pad := strings.Repeat("x", 200) // pages past the cache's 2 MB
	key := func(i int) string { return fmt.Sprintf("%s%06d", pad, i) }
	const n = 12000
	fsys.limit.Store(1 << 20)
	var failed, afterFailure int
	err = db.Update(ctx, func(tx *state.Tx) error {
		for i := range n {
			if _, err := tx.Incr(key(i)); err != nil {
				failed++
			} else if failed > 0 {
				afterFailure++
			}
		}
		return nil
	})
	fsys.limit.Store(0)
	require.Positive(t, failed, "the WAL ran out of room inside the Update")
	assert.Zero(t, afterFailure, "a verb succeeded after SQLite rolled the transaction back")
	assert.ErrorIs(t, err, state.ErrDiskFull)
	written := 0
	for i := range n {
		if _, err := db.Get(ctx, key(i)); err == nil {
			written++
		} else if !errors.Is(err, state.ErrNotFound) {
			require.NoError(t, err)
		}
	}
	assert.Zero(t, written, "keys of the failed Update are in the file")
	_, err = db.Incr(ctx, "after")
	assert.NoError(t, err, "the handle writes again once there is room")
}
