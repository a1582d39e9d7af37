package vfs_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state/vfs"
)

// TestSharedIndexReadsTheWALIndexHeader: SharedIndex reads the wal-index
// header the connections share: the frames committed so far (mxFrame, a
// native-order u32 at byte 16) grow with each commit. It has nothing to
// give for a file no connection has open, nor while a connection holds the
// WAL's write lock (the header may be half written), nor for an FS that
// shares no LockManager.
func TestSharedIndexReadsTheWALIndexHeader(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "index.db")
	hdr := make([]byte, 48)
	assert.False(t, vfs.SharedIndex(vfs.OS(), path, hdr), "no connection yet")

	db := openVia(t, vfs.OS(), path)
	_, err := db.ExecContext(ctx, `PRAGMA wal_autocheckpoint=0`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE t(n INTEGER, pad BLOB)`)
	require.NoError(t, err)
	require.True(t, vfs.SharedIndex(vfs.OS(), path, hdr))
	before := binary.NativeEndian.Uint32(hdr[16:])
	assert.NotZero(t, before)
	require.NoError(t, commit(ctx, db, 1))
	require.True(t, vfs.SharedIndex(vfs.OS(), path, hdr))
	assert.Greater(t, binary.NativeEndian.Uint32(hdr[16:]), before, "a commit adds frames")
	assert.False(t, vfs.SharedIndex(vfs.OS(), path+"-other", hdr), "another file")

	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	assert.False(t, vfs.SharedIndex(vfs.OS(), path, hdr), "a writer holds the write lock")
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	assert.True(t, vfs.SharedIndex(vfs.OS(), path, hdr))

	assert.False(t, vfs.SharedIndex(plainFS{vfs.OS()}, path, hdr), "an FS without a LockManager")
}

// plainFS is an FS with none of the optional interfaces.
type plainFS struct{ vfs.FS }
