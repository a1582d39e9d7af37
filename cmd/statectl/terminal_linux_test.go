package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestIsTerminalOnlyForATerminal: columns are aligned under a header only
// on a terminal. /dev/null is a character device but no terminal; a pipe
// and a regular file are neither; the far side of a pseudo-terminal is one.
func TestIsTerminalOnlyForATerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	assert.False(t, isTerminal(null), "/dev/null taken for a terminal")

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.False(t, isTerminal(w), "a pipe taken for a terminal")

	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, isTerminal(f), "a regular file taken for a terminal")

	pty := openPTY(t)
	assert.True(t, isTerminal(pty), "a pseudo-terminal not taken for a terminal")
}

// openPTY opens a new pseudo-terminal and returns its far side (the one a
// program's stdout would be).
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ptmx.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return pts
}
