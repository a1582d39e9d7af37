package state_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTruncatedWALIsNoticed: another program truncates the -wal file while
// a handle has it open. Check says so, from a sound file; the handle ends
// with ErrCorrupt at its next mark write, before more writes are
// acknowledged into a WAL that is gone; Close says so and leaves the WAL as
// it is instead of checkpointing it; after a reopen the file is sound and
// holds everything that was in the database file. (Before, 200 more writes,
// Check and Close reported success, and the checkpoint at Close left every
// key unreadable.) The WAL is cut to nothing, and by one byte, half its
// last frame gone and its header kept: the second case fails when the
// check compares the WAL's size with its header's instead of with the end
// of the frames its index names (walcheck.go: size < walHeaderBytes for
// size < want; "should have 1 item(s), but has 0").
func TestTruncatedWALIsNoticed(t *testing.T) {
	for _, c := range []struct {
		name string
		cut  func(size int64) int64
	}{
		{"to nothing", func(int64) int64 { return 0 }},
		{"by one byte", func(size int64) int64 { return size - 1 }},
	} {
		t.Run(c.name, func(t *testing.T) { testTruncatedWALIsNoticed(t, c.cut) })
	}
}

func testTruncatedWALIsNoticed(t *testing.T, cut func(size int64) int64) {
	path := filepath.Join(t.TempDir(), "wal.state")
	clock := newClock()
	open := func() *state.DB {
		db, err := state.Open(path, state.WithClock(clock))
		require.NoError(t, err)
		return db
	}
	db := open()
	ctx := t.Context()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("old%d", i), i))
	}
	require.NoError(t, db.Close()) // checkpointed into the file
	db = open()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("new%d", i), i))
	}
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)

	st, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path+"-wal", cut(st.Size()))) // another program
	findings, err = db.Check(ctx)
	require.NoError(t, err)
	require.Len(t, findings, 1)
	assert.Contains(t, findings[0], "shorter than the")
	assert.Contains(t, findings[0], path+"-wal")

	clock.Advance(time.Second) // the mark is due
	err = db.Set(ctx, "more", 1)
	require.ErrorIs(t, err, state.ErrCorrupt)
	assert.True(t, strings.HasPrefix(err.Error(), path+`: set "more": `), err.Error())
	_, err = db.Incr(ctx, "n")
	assert.ErrorIs(t, err, state.ErrCorrupt, "the handle has ended")

	err = db.Close()
	require.ErrorIs(t, err, state.ErrCorrupt)
	assert.Contains(t, err.Error(), "not copied into the file")

	db = open()
	defer db.Close()
	findings, err = db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings, "the file is sound")
	for i := range 20 {
		v, err := db.Get(ctx, fmt.Sprintf("old%d", i))
		require.NoError(t, err, "old%d", i)
		assert.Equal(t, fmt.Sprint(i), v.String())
	}
}

// TestReplacedFilesAreNoticed: a -wal, -shm or database file replaced (by
// one holding the same bytes) or deleted by another program under an open
// handle is a finding of Check, and ends the handle with ErrCorrupt at its
// next mark write; Close says so too.
func TestReplacedFilesAreNoticed(t *testing.T) {
	for _, suffix := range []string{"-wal", "-shm", ""} {
		for _, deleted := range []bool{false, true} {
			t.Run(map[bool]string{false: "replaced", true: "deleted"}[deleted]+"/file"+suffix, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "r.state")
				clock := newClock()
				db, err := state.Open(path, state.WithClock(clock), state.WithoutBackground())
				require.NoError(t, err)
				defer db.Close()
				require.NoError(t, db.Set(t.Context(), "k", "v"))
				victim := path + suffix
				data, err := os.ReadFile(victim)
				require.NoError(t, err)
				require.NotEmpty(t, data)
				require.NoError(t, os.Rename(victim, victim+".old"))
				want := victim + " was deleted while the file was open"
				if !deleted {
					require.NoError(t, os.WriteFile(victim, data, 0o600)) // the same bytes, another file
					want = victim + " is no longer the file opened"
				}
				findings, err := db.Check(t.Context())
				require.NoError(t, err)
				require.NotEmpty(t, findings)
				assert.Contains(t, findings[0], want)

				clock.Advance(time.Second) // the mark is due: the next write looks
				err = db.Set(t.Context(), "more", 1)
				require.ErrorIs(t, err, state.ErrCorrupt, "a replaced or deleted file ends the handle")
				assert.Contains(t, err.Error(), want)
				_, err = db.Incr(t.Context(), "n")
				require.ErrorIs(t, err, state.ErrCorrupt, "the handle has ended")
				require.ErrorIs(t, db.Close(), state.ErrCorrupt)
			})
		}
	}
}

// TestOverwrittenWALIsNoticed: another program overwrites the -wal file's
// header in place (its length unchanged) while a handle has it open: Check
// says the header does not match the index, and the handle ends with
// ErrCorrupt at its next mark write.
func TestOverwrittenWALIsNoticed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal.state")
	clock := newClock()
	db, err := state.Open(path, state.WithClock(clock), state.WithoutBackground())
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	for i := range 20 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	wal, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	require.NoError(t, err)
	salts := make([]byte, 8)
	_, err = wal.ReadAt(salts, 16) // the WAL header's salts
	require.NoError(t, err)
	for i := range salts {
		salts[i] ^= 0xff
	}
	_, err = wal.WriteAt(salts, 16) // another program
	require.NoError(t, err)
	require.NoError(t, wal.Close())

	findings, err := db.Check(ctx)
	require.NoError(t, err)
	require.Len(t, findings, 1)
	assert.Contains(t, findings[0], "the header of "+path+"-wal does not match its index")

	clock.Advance(time.Second) // the mark is due
	err = db.Set(ctx, "more", 1)
	require.ErrorIs(t, err, state.ErrCorrupt)
	assert.True(t, strings.HasPrefix(err.Error(), path+`: set "more": `), err.Error())
}
