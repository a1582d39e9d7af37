package redisstate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseUnderAWriteInFlightIsOutcomeUnknown closes the store while a
// write it sent waits on the server for its answer (held there by CLIENT
// PAUSE WRITE, seen postponed in CLIENT LIST): Close cuts the connection, so the
// write may or may not have been applied, and its verb must say so
// (ErrOutcomeUnknown), not ErrClosed alone, which a caller reads as "called
// after Close, never sent". It was ErrClosed alone, for an Incr and for an
// Update's EXEC, though the server could have run either.
func TestCloseUnderAWriteInFlightIsOutcomeUnknown(t *testing.T) {
	srv := redistest.Start(t)
	admin := rawClient(t, srv)
	ctx := ctxT(t)
	for _, c := range []struct {
		name string
		call func(db *state.DB) error
	}{
		{"incr", func(db *state.DB) error { _, err := db.Incr(ctx, "n"); return err }},
		{"update", func(db *state.DB) error {
			return db.Update(ctx, func(tx *state.Tx) error { return tx.Set("n", 1) })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openURL(t, srv.URL("t:"+c.name+":"))
			// Every script loaded and a connection in the pool: the call
			// below sends its command at once.
			_, err := db.Incr(ctx, "warm")
			require.NoError(t, err)
			require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "600000", "WRITE").Err())
			t.Cleanup(func() { _ = admin.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
			done := make(chan error, 1)
			go func() { done <- c.call(db) }()
			eventually(t, c.name+" held by the pause", func() bool {
				list, err := admin.ClientList(ctx).Result()
				require.NoError(t, err)
				return postponed(list)
			})
			require.NoError(t, db.Close())
			err = <-done
			require.ErrorIs(t, err, state.ErrOutcomeUnknown, "a write sent before Close")
			assert.ErrorIs(t, err, state.ErrClosed, "and the store is closed")
			assert.Contains(t, err.Error(), "closed while the command was in flight")
		})
	}
}

// postponed reports whether CLIENT LIST's reply shows a client whose
// command the server holds (flag b: blocked, as CLIENT PAUSE holds one).
func postponed(list string) bool {
	for _, line := range strings.Split(list, "\n") {
		for _, field := range strings.Fields(line) {
			if flags, ok := strings.CutPrefix(field, "flags="); ok && strings.Contains(flags, "b") {
				return true
			}
		}
	}
	return false
}
