package state_test

import (
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/internal/verbtest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// TestVerbTable runs the verb table every backend shares (internal/verbtest)
// on a fresh file per case, opened with the default options: real time, the
// background sweeper and flusher on. The clock-driven verb tests beside it
// stay file-only.
func TestVerbTable(t *testing.T) {
	verbtest.Run(t, func(t *testing.T) *state.DB {
		db, err := state.Open(filepath.Join(t.TempDir(), "v.state"))
		require.NoError(t, err)
		return db
	}, verbtest.Options{
		SweepReportsRows: true,
		ScanSeesExpired:  true,
		FileStats:        true,
	})
}
