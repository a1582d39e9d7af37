package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsSayWhyTheCopyCannotBeMade: a file no process has open is read
// from a private copy in $TMPDIR. When $TMPDIR is missing, or not a
// directory, the read commands fail naming $TMPDIR and the room the copy
// needs, never saying the file itself is missing (it is there), and leave
// nothing beside the file.
func TestReadsSayWhyTheCopyCannotBeMade(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.state")
	writeStateFile(t, path, 1)
	notDir := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	statectl := statectlCopy(t)

	for _, tmp := range []string{filepath.Join(dir, "missing"), notDir} {
		for _, args := range readCommands {
			_, errOut, code := runStatectl(t, statectl, tmp, -1, append([]string{args[0], path}, args[1:]...)...)
			assert.Equal(t, 2, code, "%s: %s", args, errOut)
			assert.NotContains(t, errOut, "no such file\n", "%s: the file is there", args)
			assert.Contains(t, errOut, "cannot make the private copy it is read from in "+tmp, "%s", args)
			assert.Contains(t, errOut, "set TMPDIR to a directory with room for", "%s", args)
			assertNothingBeside(t, path, args)
		}
	}
}

// TestRefusedInputCreatesNoFileWhateverTMPDIR: input the library refuses
// leaves no new file behind also when $TMPDIR is missing, or not a
// directory: the input is checked on a scratch file in memory, not in
// $TMPDIR, before the file is created. Each command fails with status 2
// naming the file and the refusal, and creates nothing in the directory.
func TestRefusedInputCreatesNoFileWhateverTMPDIR(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	statectl := statectlCopy(t)

	for _, tmp := range []string{filepath.Join(dir, "missing"), notDir} {
		for _, c := range []struct {
			args []string // after the command, FILE goes first
			want string
		}{
			{[]string{"set", "", "v"}, `set "": invalid key: key is empty`},
			{[]string{"set", "k", "v", "--ttl", "0s"}, `set "k": invalid ttl: 0s is not positive`},
			{[]string{"incr", "k", "--ttl", "0s"}, `incr "k": invalid ttl: 0s is not positive`},
			{[]string{"del", ""}, "invalid key"},
			{[]string{"cas", "", "--absent", "v"}, "invalid key"},
			{[]string{"expire", "", "--ttl", "1s"}, "invalid key"},
			{[]string{"run", "--lease", strings.Repeat("a", 1025), "--", "true"}, "invalid key: lease name is 1025 bytes"},
		} {
			work := t.TempDir()
			path := filepath.Join(work, "new.state")
			args := append([]string{c.args[0], path}, c.args[1:]...)
			_, errOut, code := runStatectl(t, statectl, tmp, -1, args...)
			assert.Equal(t, 2, code, "TMPDIR=%s %s: %s", tmp, c.args[0], errOut)
			assert.True(t, strings.HasPrefix(errOut, "statectl: "+path+": "), "%s: %s", c.args[0], errOut)
			assert.Contains(t, errOut, c.want, "%s", c.args[0])
			left, err := os.ReadDir(work)
			require.NoError(t, err)
			assert.Empty(t, left, "TMPDIR=%s %s left a file behind", tmp, c.args[0])
		}
	}
}

// TestReadsSayWhenTMPDIRIsFull: $TMPDIR is a 1 MiB tmpfs and the file is
// larger. The read commands fail naming $TMPDIR, the full disk and the
// room the copy needs, and remove what they copied. Needs root, to mount
// the tmpfs.
func TestReadsSayWhenTMPDIRIsFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	tmp := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tmp).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %s", out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", tmp).Run() })
	path := filepath.Join(t.TempDir(), "app.state")
	writeStateFile(t, path, 8)
	statectl := statectlCopy(t)

	for _, args := range readCommands {
		_, errOut, code := runStatectl(t, statectl, tmp, -1, append([]string{args[0], path}, args[1:]...)...)
		assert.Equal(t, 2, code, "%s: %s", args, errOut)
		assert.Contains(t, errOut, "cannot make the private copy it is read from in "+tmp, "%s", args)
		assert.Contains(t, errOut, "no space left on device", "%s", args)
		assert.Contains(t, errOut, "set TMPDIR to a directory with room for", "%s", args)
		assertNothingBeside(t, path, args)
		left, err := os.ReadDir(tmp)
		require.NoError(t, err)
		assert.Empty(t, left, "%s: the partial copy is removed", args)
	}
}

// writeStateFile writes a closed state file at path holding the key "k"
// and n values of 256 KiB.
func writeStateFile(t *testing.T, path string, n int) {
	t.Helper()
	ctx := context.Background()
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "k", "hello"))
	for i := range n {
		require.NoError(t, db.Set(ctx, "big:"+string(rune('a'+i)), make([]byte, 256<<10)))
	}
	require.NoError(t, db.Close())
}
