package state_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// TestSQLiteBuildHasNoBlockingLocks: the SQLite statekit links has no
// blocking locks (SQLITE_ENABLE_SETLK_TIMEOUT), so the engine's busy handler
// is the only way a process waits for another's write lock. README's
// contention section says so and chose the busy schedule on that ground: a
// build that adds them fails here, and the choice is to be measured again.
func TestSQLiteBuildHasNoBlockingLocks(t *testing.T) {
	db, err := sql.Open("sqlite", ":memory:")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query("PRAGMA compile_options")
	require.NoError(t, err)
	defer rows.Close()
	var opts []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		opts = append(opts, o)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, opts, "THREADSAFE=1", "PRAGMA compile_options answered: %v", opts)
	require.NotContains(t, opts, "ENABLE_SETLK_TIMEOUT", "the SQLite build has blocking locks now")
}
