package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/statekit/statekit/internal/journaltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsOfAWriteCutShortOnAReadOnlyMount: the file of a write cut short
// on a file system mounted read-only, where no command can put its pages
// back. Every read command says so and says to mount it writable, never
// reading the half-done write (read as an immutable file, as a sound file on
// a read-only mount is, SQLite ignores the journal). Needs root, to mount a
// tmpfs and remount it read-only.
func TestReadsOfAWriteCutShortOnAReadOnlyMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	data := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %s", out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", data).Run() })
	path := journaltest.CutWrite(t, data, 50)
	out, err := exec.Command("mount", "-o", "remount,ro", data).CombinedOutput()
	require.NoError(t, err, "remount read-only: %s", out)
	t.Setenv("TMPDIR", t.TempDir())

	for _, c := range readCommands {
		args := append([]string{c[0], path}, c[1:]...)
		out, errOut, code := runHere(args...)
		assert.Equal(t, exitError, code, "%s: %s", args, errOut)
		assert.Empty(t, out, "%s", args)
		assert.Equal(t, "statectl: "+path+": a write cut short must be rolled back first: "+path+"-journal holds "+
			"the pages to put back, which a read command may not do; on its file system mounted writable, any "+
			"write command does it, as does the application opening the file\n", errOut, "%s", args)
	}
}
