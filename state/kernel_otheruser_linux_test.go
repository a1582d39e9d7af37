package state_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["kernel-other-open"] = helperOtherUserOpens
	helperRoles["kernel-owner-writes"] = helperOwnerWrites
}

// TestKernelAnotherUsersOpenCreatesNothingBeside: a state file belongs to
// its application's user (nobody), mode 0644, in a directory everyone may
// write. Another user, who may read it but not write it, calls Open to
// write: ErrReadOnly wrapping EACCES, and no -wal or -shm file is created
// beside it. SQLite would open the file for reading and create them,
// owned by that user with the file's mode, and the application could then
// no longer open its own file to write. The application writes after.
func TestKernelAnotherUsersOpenCreatesNothingBeside(t *testing.T) {
	needRoot(t)
	const appUID, otherUID = 65534, 65533
	base, err := os.MkdirTemp("", "statekit-kernel-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	require.NoError(t, os.Chmod(data, 0o1777))
	path := filepath.Join(data, "app.state")
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(t.Context(), "k", "v"))
	require.NoError(t, db.Close())
	require.NoError(t, os.Chown(path, appUID, appUID))
	require.NoError(t, os.Chmod(path, 0o644))
	besides := func() []string {
		var found []string
		for _, suffix := range []string{"-wal", "-shm"} {
			if _, err := os.Lstat(path + suffix); err == nil {
				found = append(found, suffix)
			}
		}
		return found
	}
	require.Empty(t, besides(), "a clean Close leaves nothing beside the file")

	self, err := os.Executable()
	require.NoError(t, err)
	exe := filepath.Join(base, "state.test")
	copyFile(t, self, exe, 0o755)
	_, _, out := startHelper(t, "kernel-other-open", path, &syscall.Credential{Uid: otherUID, Gid: otherUID}, exe)
	open := expectLine(t, out, "open")
	assert.Contains(t, open, "readonly=true eacces=true", open)
	assert.Contains(t, open, path)
	assert.Empty(t, besides(), "the refused Open created files beside the state file")

	_, _, out = startHelper(t, "kernel-owner-writes", path, &syscall.Credential{Uid: appUID, Gid: appUID}, exe)
	assert.Equal(t, "<nil>", expectLine(t, out, "wrote"), "the application writes its own file")
}

// helperOtherUserOpens is the child of
// TestKernelAnotherUsersOpenCreatesNothingBeside that may not write.
func helperOtherUserOpens(path string) int {
	db, err := state.Open(path, state.WithoutBackground())
	if err == nil {
		db.Close()
	}
	fmt.Printf("open readonly=%v eacces=%v %v\n", errors.Is(err, state.ErrReadOnly), errors.Is(err, syscall.EACCES), err)
	return 0
}

// helperOwnerWrites is the child of
// TestKernelAnotherUsersOpenCreatesNothingBeside that owns the file.
func helperOwnerWrites(path string) int {
	db, err := state.Open(path, state.WithoutBackground())
	if err == nil {
		err = errors.Join(db.Set(context.Background(), "k", "again"), db.Close())
	}
	fmt.Println("wrote", err)
	return 0
}
