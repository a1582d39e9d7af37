package state_test

import (
	"context"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTxVerbsRefuseAnEndedContext ends the context in the middle of an
// Update callback: from then on each verb of the transaction, as the DB's
// verbs do, returns the context's error and does nothing, so the callback
// learns it at its next verb rather than running on, holding the file's
// write lock, for work that cannot commit. Update returns the context's
// error and nothing is written. Before, every verb after the end answered
// as if the transaction could still commit.
func TestTxVerbsRefuseAnEndedContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		ctx, cancel := context.WithCancel(f.ctx)
		defer cancel()
		ran := 0
		err := f.db.Update(ctx, func(tx *state.Tx) error {
			require.NoError(t, tx.Set("before", 1))
			cancel()
			for i := range 100 {
				if err := tx.Set("after", i); err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					return nil // as a callback that ignores the error: Update still fails
				}
				ran++
			}
			return nil
		})
		assert.Equal(t, 0, ran, "no verb ran after the context ended")
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, "<absent>", f.get("before"), "rolled back")
		assert.Equal(t, "<absent>", f.get("after"))
	})
}
