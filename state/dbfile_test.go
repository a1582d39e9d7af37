package state_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["exclusive-writer"] = helperExclusiveWriter
}

// helperExclusiveWriter is another program on the file: a SQLite
// connection in exclusive locking mode, which takes the database file's
// exclusive lock before it reads and then keeps the WAL's index in its own
// memory. It may write only when no other process holds a lock on the
// file. It prints "busy" when refused, "wrote" when it wrote.
func helperExclusiveWriter(path string) int {
	sqldb, err := sql.Open("sqlite", "file:"+path+"?_pragma=locking_mode(EXCLUSIVE)&_pragma=busy_timeout(100)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer sqldb.Close()
	_, err = sqldb.Exec(`INSERT INTO kv(key, value) VALUES ('foreign', 1)`)
	switch {
	case err == nil:
		fmt.Println("wrote")
	case strings.Contains(err.Error(), "SQLITE_BUSY"):
		fmt.Println("busy")
	default:
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	return 0
}

// TestSecondHandleKeepsTheLocks: a process with a handle open holds the
// file's locks, so another program that needs the file to itself is
// refused, whatever other handles the process opens and closes on the
// same file (through another path too). Each Open used to open and close a
// descriptor of the file, and each Close its checkpointer's: closing any
// descriptor drops every POSIX lock the process holds on the file, so the
// foreign writer got the file, wrote, and deleted the WAL under the
// first handle.
func TestSecondHandleKeepsTheLocks(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name  string
		other func(t *testing.T, path string)
	}{
		{"alone", func(*testing.T, string) {}},
		{"another handle opened and closed", func(t *testing.T, path string) {
			b, err := state.Open(path)
			require.NoError(t, err)
			require.NoError(t, b.Close())
		}},
		{"another handle open", func(t *testing.T, path string) {
			b, err := state.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
		}},
		{"another handle through a link, then a read-only one", func(t *testing.T, path string) {
			link := filepath.Join(t.TempDir(), "link.state")
			require.NoError(t, os.Symlink(path, link))
			b, err := state.Open(link)
			require.NoError(t, err)
			require.NoError(t, b.Close())
			ro, err := state.Open(path, state.WithReadOnly())
			require.NoError(t, err)
			require.NoError(t, ro.Close())
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.state")
			a, err := state.Open(path)
			require.NoError(t, err)
			defer a.Close()
			require.NoError(t, a.Set(ctx, "k", 1))
			c.other(t, path)
			out := runChildren(t, 1, "exclusive-writer", path)
			assert.Equal(t, "busy\n", out[0], "another program got the file while a handle had it open")
			require.NoError(t, a.Set(ctx, "after", 2))
			require.NoError(t, a.Close())

			check, err := state.Open(path, state.WithReadOnly())
			require.NoError(t, err)
			defer check.Close()
			findings, err := check.Check(ctx)
			require.NoError(t, err)
			assert.Empty(t, findings)
			_, err = check.Get(ctx, "after")
			assert.NoError(t, err)
		})
	}
}

// TestReadOnlyHandleKeepsTheLocks: the same with a read-only handle as the
// only holder: a writable handle of the same process opened and closed on
// the file must not drop the read-only handle's locks either.
func TestReadOnlyHandleKeepsTheLocks(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.state")
	w, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, w.Set(ctx, "k", 1))
	require.NoError(t, w.Close())

	ro, err := state.Open(path, state.WithReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Get(ctx, "k")
	require.NoError(t, err)
	b, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	out := runChildren(t, 1, "exclusive-writer", path)
	assert.Equal(t, "busy\n", out[0], "another program got the file while a read-only handle had it open")
	_, err = ro.Get(ctx, "k")
	assert.NoError(t, err)
}
