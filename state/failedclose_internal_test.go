package state

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/require"
)

// TestFailedOpenClosesWithoutCheckpoint: an Open whose WAL repair failed
// closes its connections in releaseHandle, here with no read-only guard
// left from openGuard (which steps aside when the WAL needs a writer's
// recovery). The last writable connection to close would checkpoint the
// unrepaired WAL into the database file; the guard holdWAL opens keeps
// the file's bytes as they were and the WAL in place, for the next Open's
// repair. On the simulator's file system and on the native one (where
// SQLite counts the locks of one process's connections itself), with and
// without the background checkpointer's connection. It fails when the
// guard closes before the writable connections.
func TestFailedOpenClosesWithoutCheckpoint(t *testing.T) {
	for _, fsName := range []string{"memfs", "native"} {
		for _, background := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/background=%v", fsName, background), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "failed.state")
				read := func(name string) []byte { b, err := os.ReadFile(name); require.NoError(t, err); return b }
				opts := []Option{WithSweepInterval(0), WithFlushInterval(0)}
				if !background {
					opts = []Option{WithoutBackground()}
				}
				if fsName == "memfs" {
					m := faults.NewMemFS(1)
					path = "/sim/failed.state"
					opts = append(opts, WithFS(m.Process(1)), WithClock(faults.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
					read = func(name string) []byte { return memRead(t, m.Process(2), name) }
				}
				db, err := Open(path, opts...)
				require.NoError(t, err)
				ctx := context.Background()
				for i := range 20 {
					require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), i))
				}
				file, wal := read(path), read(path+walSuffix)
				require.NotEmpty(t, wal, "the commits are in the WAL, not yet in the file")

				db.bg.stop(db)
				// As Open's failed repair: no guard from openGuard, then holdWAL.
				db.lock()
				db.closeGuard()
				db.holdWAL(ctx)
				require.NotNil(t, db.guard)
				require.NoError(t, db.releaseHandle())
				db.unlock()

				require.Equal(t, file, read(path), "nothing was checkpointed into the file")
				require.Equal(t, wal, read(path+walSuffix), "the WAL is kept as it was")
			})
		}
	}
}

// memRead returns the bytes of the file name on fsys.
func memRead(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name, vfs.OpenReadOnly)
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		require.NoError(t, err)
	}
	return b
}

// TestGuardThatReadAnEmptyFileStopsTheCheckpoint: a read-only connection
// that last read the file while it was empty (openGuard's, while another
// process was still making the file) is idle in SQLite's rollback mode,
// holding no lock at all: the WAL format it has not seen yet. The handle's
// writable connections, closing, would then find no other lock and the
// last would checkpoint the WAL into the file. releaseHandle reads on it
// first (guardRead), which puts it in WAL mode holding its lock, so the
// file's bytes and the WAL stay as they were. On the native VFS.
func TestGuardThatReadAnEmptyFileStopsTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.state")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	guard, err := sql.Open("sqlite", "file:"+escapePath(path)+"?mode=ro")
	require.NoError(t, err)
	var n int
	require.NoError(t, guard.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n))
	require.Zero(t, n, "the file was empty when the guard read it")

	db, err := Open(path, WithSweepInterval(0), WithFlushInterval(0))
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%02d", i), i))
	}
	db.bg.stop(db)
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	wal, err := os.ReadFile(path + walSuffix)
	require.NoError(t, err)
	require.NotEmpty(t, wal, "the commits are in the WAL, not yet in the file")

	db.lock()
	db.guard = guard // as a failed Open's, from openGuard
	require.NoError(t, db.releaseHandle())
	db.unlock()

	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, file, got, "nothing was checkpointed into the file")
	got, err = os.ReadFile(path + walSuffix)
	require.NoError(t, err)
	require.Equal(t, wal, got, "the WAL is kept as it was")
}
