// Package journaltest makes, for tests, the file a crash leaves in the
// middle of a write outside the WAL: a statekit file with a hot rollback
// journal beside it.
package journaltest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

// Key is the name of the i-th key CutWrite's file holds.
func Key(i int) string { return fmt.Sprintf("k%d", i) }

// CutWrite leaves at dir/cut.state what a crash in the middle of a write
// outside the WAL leaves: a statekit file holding keys Key(0)..Key(n-1),
// switched to a rollback journal by another program, which then began to
// delete every row and had written some of its changes into the file when
// it died. The pages to put back are in cut.state-journal, and no
// connection holds a lock on either file. It returns the file's path.
func CutWrite(t testing.TB, dir string, n int) string {
	t.Helper()
	ctx := context.Background()
	live := filepath.Join(dir, "live.state")
	db, err := state.Open(live)
	require.NoError(t, err)
	big := make([]byte, 900)
	for i := range n {
		require.NoError(t, db.Set(ctx, Key(i), big))
	}
	require.NoError(t, db.Close())

	raw, err := sql.Open("sqlite", live)
	require.NoError(t, err)
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, q := range []string{
		"PRAGMA journal_mode=DELETE",
		"PRAGMA cache_size=2", // a small cache spills changed pages into the file before the commit
		"BEGIN IMMEDIATE",
		"DELETE FROM kv",
	} {
		_, err := conn.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	// The crash: the file and its journal as they are in the middle of
	// the transaction, copied where no connection holds a lock on them.
	cut := filepath.Join(dir, "cut.state")
	for _, suffix := range []string{"", "-journal"} {
		b, err := os.ReadFile(live + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(cut+suffix, b, 0o600))
	}
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	return cut
}
