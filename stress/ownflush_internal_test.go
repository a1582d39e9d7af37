package stress

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOwnFlushErrorDropsEveryBackgroundFlushError: what Flush returns
// holds the errors of earlier background flushes (marked
// state.ErrBackgroundFlush, each wrapping its own cause) beside the call's
// own. The call's own is kept; a background flush's cause is not the call's
// own, even when it is the only error: a lost answer of a background flush
// during an outage, taken for the caller's Flush at a later time, was
// reported as a lost answer while the server was up.
func TestOwnFlushErrorDropsEveryBackgroundFlushError(t *testing.T) {
	ctx := context.Background()
	db, err := state.Open(filepath.Join(t.TempDir(), "f"), state.WithFlushInterval(1))
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Set(ctx, "bytes", "x"))
	require.NoError(t, db.IncrBuffered("bytes", 1))
	require.NoError(t, db.IncrBuffered("n", 1))
	for i := 0; ; i++ {
		require.Less(t, i, 10_000_000, "the background flush never ran")
		if v, err := db.Get(ctx, "n"); err == nil && v.String() == "1" {
			break // the background flush wrote n and dropped bytes's delta
		}
	}
	lost := db.Flush(ctx)
	require.ErrorIs(t, lost, state.ErrBackgroundFlush, "%v", lost)
	assert.NoError(t, ownFlushError(lost), "a background flush's dropped delta alone")

	unknown := fmt.Errorf("%w: the connection failed: %w", state.ErrOutcomeUnknown, errors.New("EOF"))
	background := fmt.Errorf("%w of {n:+1} may or may not have been written: %w", state.ErrBackgroundFlush, unknown)
	own := fmt.Errorf("%w: refused", state.ErrUnavailable)
	assert.NoError(t, ownFlushError(background), "a background flush's lost answer alone")
	assert.NoError(t, ownFlushError(fmt.Errorf("f: flush: %w", background)), "named")
	assert.Equal(t, own, ownFlushError(own))
	got := ownFlushError(fmt.Errorf("f: flush: %w", errors.Join(background, own)))
	assert.ErrorIs(t, got, state.ErrUnavailable, "the call's own")
	assert.NotErrorIs(t, got, state.ErrOutcomeUnknown, "the background flush's is dropped: %v", got)
	assert.NotErrorIs(t, got, state.ErrBackgroundFlush)
}
