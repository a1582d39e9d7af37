package ratelimit

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadWindowsCountsByTheTransactionsTime: whatever windows the guess
// names (the right ones, the one before, one ahead holding what no limiter
// wrote, one long gone), the counts a decision uses are those of the windows
// the transaction's time falls in, and a guessed window it does not use is
// no error.
func TestReadWindowsCountsByTheTransactionsTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	db, err := state.Open(filepath.Join(t.TempDir(), "rl.state"), state.WithClock(faults.NewClock(t0)))
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	w := int64(time.Minute)
	idx := t0.UnixNano() / w
	for i, v := range map[int64]any{idx: 5, idx - 1: 3, idx + 1: "not a count", idx - 5: 9} {
		require.NoError(t, db.Set(ctx, windowKey("p:", "k", i), v))
	}
	for _, guess := range [][]int64{{idx}, {idx - 1, idx}, {idx - 1}, {idx + 1}, {idx - 5, idx + 1}, nil} {
		require.NoError(t, db.Update(ctx, func(tx *state.Tx) error {
			now, count, err := readWindows(ctx, tx, "p:", "k", guess...)
			require.NoError(t, err, "guess %v", guess)
			require.Equal(t, t0.UnixNano(), now)
			for i, want := range map[int64]int64{idx: 5, idx - 1: 3, idx - 2: 0} {
				got, err := count(i)
				require.NoError(t, err, "guess %v, window %d", guess, i-idx)
				assert.Equal(t, want, got, "guess %v, window %d", guess, i-idx)
			}
			_, err = count(idx + 1)
			assert.ErrorIs(t, err, ErrBadState, "guess %v: a window used is checked", guess)
			return nil
		}), fmt.Sprint(guess))
	}
}
