package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// TestOpenWithExpiredRowsAndAQuickSweeper: a file that holds expired rows,
// opened with a sweep interval of a nanosecond, has its sweeper delete
// them while Open is still setting up the checkpointer the sweep tells of
// its writes. Under -race (make test) this caught the checkpointer's
// fields written after the sweeper had started; the rows are swept either
// way.
func TestOpenWithExpiredRowsAndAQuickSweeper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "swept.state")
	ctx := context.Background()
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%d", i), i, state.TTL(time.Millisecond)))
	}
	require.NoError(t, db.Close())
	time.Sleep(5 * time.Millisecond) // every row expired, on the real clock
	for range 20 {
		db, err := state.Open(path, state.WithSweepInterval(time.Nanosecond))
		require.NoError(t, err)
		require.NoError(t, db.Close())
	}
}
