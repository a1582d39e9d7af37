package stress

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/statekit/statekit/linearizability"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingWriter writes the first half of its first write and fails, as
// a full disk does, then writes whatever it is given.
type failingWriter struct {
	f      *os.File
	failed bool
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if !w.failed {
		w.failed = true
		n, _ := w.f.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return w.f.Write(p)
}

func (w *failingWriter) Close() error { return w.f.Close() }

// TestJournalWritesNothingAfterAFailedWrite: a write cut short (a full
// disk) leaves a torn line, which readers ignore only as the last one; a
// journal wrote the next lines after it, and the check failed with "invalid
// character" instead of the worker's error.
func TestJournalWritesNothingAfterAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(filepath.Join(dir, "ops"), filepath.Join(dir, "notes"))
	require.NoError(t, err)
	j.ops = &failingWriter{f: j.ops.(*os.File)}
	j.notes = &failingWriter{f: j.notes.(*os.File)}
	first, second := incr(1, 1, false), incr(1, 2, false)
	assert.ErrorIs(t, j.op(first), syscall.ENOSPC)
	assert.ErrorIs(t, j.op(second), syscall.ENOSPC, "the journal stays failed")
	assert.ErrorIs(t, j.note(note{Kind: noteBuffered, Client: 1, Key: "e0/n0", Delta: 1}), syscall.ENOSPC)
	assert.ErrorIs(t, j.note(note{Kind: noteBuffered, Client: 1, Key: "e0/n0", Delta: 2}), syscall.ENOSPC)
	require.NoError(t, j.close())

	f, err := os.Open(filepath.Join(dir, "ops"))
	require.NoError(t, err)
	defer f.Close()
	ops, err := linearizability.Decode(f)
	require.NoError(t, err, "only the last line is torn")
	assert.Empty(t, ops)
	notes, err := readNotes(filepath.Join(dir, "notes"))
	require.NoError(t, err, "only the last line is torn")
	assert.Empty(t, notes)
}
