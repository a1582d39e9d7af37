package state_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCloseOnAFullDisk: Close on a disk with no room closes anyway and
// returns one error, on one line, that names the file and the buffered
// increments it could not write, with no word from a ROLLBACK that had
// nothing to roll back; every acknowledged write is there after.
func TestCloseOnAFullDisk(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	require.NoError(t, db.Set(fm.ctx, "k", "v"))
	_, err := db.Incr(fm.ctx, "n")
	require.NoError(t, err)
	require.NoError(t, db.IncrBuffered("hits", 3))
	require.NoError(t, db.IncrBuffered("misses", -1))

	fm.m.SetWriteBudget(0)
	fm.clock.Advance(time.Second) // the handle's mark is due too
	err = db.Close()
	require.Error(t, err)
	assert.ErrorIs(t, err, state.ErrDiskFull)
	msg := err.Error()
	t.Log(msg)
	assert.NotContains(t, msg, "\n", "one line")
	assert.True(t, strings.HasPrefix(msg, fltPath+": close: "), msg)
	assert.Contains(t, msg, `"hits" +3, "misses" -1`, "names what was not written")
	assert.NotContains(t, msg, "rollback", msg)
	assert.NotContains(t, msg, "kept for the next flush", "nothing is kept after Close")
	assert.ErrorIs(t, db.Close(), state.ErrClosed)

	fm.m.SetWriteBudget(-1)
	db2 := fm.open(2)
	assert.Equal(t, "v", fm.get(db2, "k"))
	assert.Equal(t, "1", fm.get(db2, "n"))
	assert.Equal(t, "<absent>", fm.get(db2, "hits"))
	fm.check(db2)
}

// TestCloseWithANonIntegerKeyNamesIt: a buffered delta whose key holds
// bytes is named in Close's error; the other deltas are written.
func TestCloseWithANonIntegerKeyNamesIt(t *testing.T) {
	fm := newFltMachine(t)
	db := fm.open(1)
	require.NoError(t, db.Set(fm.ctx, "text", "x"))
	require.NoError(t, db.IncrBuffered("text", 1))
	require.NoError(t, db.IncrBuffered("n", 2))
	err := db.Close()
	var fe *state.FlushError
	require.True(t, errors.As(err, &fe), "%v", err)
	assert.ErrorIs(t, err, state.ErrNotInteger)
	assert.True(t, strings.HasPrefix(err.Error(), fltPath+": close: "), err.Error())
	db2 := fm.open(2)
	assert.Equal(t, "2", fm.get(db2, "n"))
}
