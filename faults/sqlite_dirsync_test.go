package faults_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/statekit/statekit/faults"
)

// A failed sync of the directory of a WAL SQLite just created reaches
// SQLite as SQLITE_IOERR_DIR_FSYNC, failing the commit, and the Go VFS
// syncs the directory again at the WAL's next sync: the next FULL commit
// acknowledged survives a power loss that drops every directory change not
// synced. Were the sync not tried again, the WAL's creation would never be
// durable and the power loss would take the WAL, and that commit, away.
func TestSQLiteFailedDirSyncIsReportedAndTriedAgain(t *testing.T) {
	m := faults.NewMemFS(1)
	p, err := openProcess(m.Process(1), 1000)
	require.NoError(t, err)
	require.NoError(t, p.exec(schema))
	require.NoError(t, p.commit(0, 1, true))
	p.stop() // the last close deletes the WAL
	require.Equal(t, []string{"test.db"}, m.Files())

	q := mustOpen(t, m.Process(2), 1000) // creates a new WAL
	m.FailAt(faults.OpSyncDir, 1)
	err = q.commit(1, 2, true)
	require.Error(t, err)
	assert.Equal(t, sqlite3.SQLITE_IOERR_DIR_FSYNC, sqliteCode(err), "%v", err)
	require.EqualValues(t, 1, m.Stats().InjectedDirSyncErrors)

	before := m.Stats().DirSyncs
	require.NoError(t, q.commit(2, 2, true), "acknowledged FULL")
	assert.Equal(t, before+1, m.Stats().DirSyncs, "the WAL's next sync syncs its directory again")

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	r := mustOpen(t, m.Process(3), 1000)
	assert.Equal(t, "ok", r.integrity(t))
	assert.Contains(t, [][]int{{0, 2}, {0, 1, 2}}, r.rows(t), "the acknowledged FULL commit survives")
}
