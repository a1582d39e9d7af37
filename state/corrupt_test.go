package state_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Damaged and foreign files. SQLite's file format: a 100-byte header on
// page 1 (magic at 0, page size at 16, user_version at 60, application_id
// at 68), then pages; the WAL is a 32-byte header and frames of a 24-byte
// header and one page each, salted and checksummed in a chain.

// corruptFixture is a statekit file whose main file holds a first batch of
// writes and whose WAL holds a second, and the WAL of another statekit file.
type corruptFixture struct {
	main, wal, otherWAL []byte
}

// fixtureT0 is the wall time of the fixtures' clock.
var fixtureT0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func newCorruptFixture(tb testing.TB) corruptFixture {
	tb.Helper()
	var fx corruptFixture
	fx.main, fx.wal = fixtureFiles(tb, 1)
	_, fx.otherWAL = fixtureFiles(tb, 2)
	return fx
}

// fixtureFiles builds the files: keys key-<seed>-0..39 of bytes and a lease
// in the main file, then counters n0..n2 and keys key-<seed>-0..19 set to
// integers in the WAL.
func fixtureFiles(tb testing.TB, seed int) (main, wal []byte) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "fixture.state")
	open := func() *state.DB {
		db, err := state.Open(path, state.WithClock(faults.NewClock(fixtureT0)), state.WithoutBackground())
		require.NoError(tb, err)
		return db
	}
	ctx := context.Background()
	db := open()
	for i := 0; i < 40; i++ {
		require.NoError(tb, db.Set(ctx, fmt.Sprintf("key-%d-%d", seed, i), bytes.Repeat([]byte{byte(i)}, 100+i*37)))
	}
	_, err := db.Lease(ctx, "job", "alpha", time.Hour)
	require.NoError(tb, err)
	require.NoError(tb, db.Close()) // the last close checkpoints: batch one is in the main file
	db = open()
	for i := 0; i < 20; i++ {
		_, err := db.IncrBy(ctx, fmt.Sprintf("n%d", i%3), int64(i))
		require.NoError(tb, err)
		require.NoError(tb, db.Set(ctx, fmt.Sprintf("key-%d-%d", seed, i), i, state.TTL(time.Hour)))
	}
	main, err = os.ReadFile(path)
	require.NoError(tb, err)
	wal, err = os.ReadFile(path + "-wal")
	require.NoError(tb, err)
	require.NotEmpty(tb, wal)
	require.NoError(tb, db.Close())
	return main, wal
}

// corrupted is a damaged copy of the fixture.
type corrupted struct {
	main, wal []byte // wal nil: no -wal file
	steps     []string
}

// The damage a program can do, one mutation per 7 bytes: kind, offset
// (uint32, little endian), value, length.
const (
	cutMain    = iota // truncate the main file at offset
	flipHeader        // xor a byte of the 100-byte header with value
	flipMain          // xor any byte of the main file with value
	fillMain          // overwrite length bytes from offset with value
	flipWAL           // xor a byte of the WAL with value
	cutWAL            // truncate the WAL at offset
	otherWAL          // put another file's WAL beside this one
	dropWAL           // lose the WAL
	mutationKinds

	mutationBytes = 7
	maxMutations  = 4
)

// mutation encodes one mutation, for seeds.
func mutation(kind int, off uint32, val, n byte) []byte {
	b := []byte{byte(kind), 0, 0, 0, 0, val, n}
	binary.LittleEndian.PutUint32(b[1:], off)
	return b
}

// corruptSeeds cover each kind of damage at the places that matter.
var corruptSeeds = [][]byte{
	{}, // undamaged
	mutation(cutMain, 0, 0, 0),
	mutation(cutMain, 50, 0, 0),
	mutation(cutMain, 100, 0, 0),
	mutation(cutMain, 4096, 0, 0),
	mutation(cutMain, 4096*5+17, 0, 0),
	append(mutation(cutMain, 4096*5, 0, 0), mutation(dropWAL, 0, 0, 0)...),
	mutation(flipHeader, 3, 0xff, 0),  // magic
	mutation(flipHeader, 16, 0x01, 0), // page size
	mutation(flipHeader, 18, 0x03, 0), // write version
	mutation(flipHeader, 21, 0x01, 0), // max payload fraction
	mutation(flipHeader, 28, 0x40, 0), // database size in pages
	mutation(flipHeader, 44, 0x07, 0), // schema format
	mutation(flipHeader, 56, 0x03, 0), // text encoding
	mutation(flipHeader, 63, 0x02, 0), // user_version
	mutation(flipHeader, 71, 0x01, 0), // application_id
	append(mutation(flipHeader, 71, 0x01, 0), mutation(dropWAL, 0, 0, 0)...),
	mutation(flipMain, 100+5, 0x10, 0),         // page 1's b-tree header: the schema table
	mutation(flipMain, 4096+1, 0xff, 0),        // page 2's header
	mutation(fillMain, 4096, 0xee, 255),        // page 2 overwritten
	mutation(fillMain, 4096*3+2000, 0x00, 255), // inside a page's cells
	mutation(flipWAL, 0, 0x01, 0),              // WAL magic
	mutation(flipWAL, 9, 0x10, 0),              // WAL page size
	mutation(flipWAL, 17, 0x01, 0),             // WAL salt
	mutation(flipWAL, 32+4, 0x01, 0),           // first frame's commit size
	mutation(flipWAL, 32+24+100, 0x01, 0),      // first frame's page
	mutation(flipWAL, 32+3*(24+4096)+10, 0x80, 0),
	mutation(cutWAL, 32+(24+4096)/2, 0, 0),
	mutation(cutWAL, 20, 0, 0),
	mutation(otherWAL, 0, 0, 0),
	append(mutation(otherWAL, 0, 0, 0), mutation(flipHeader, 71, 0x01, 0)...),
	mutation(dropWAL, 0, 0, 0),
}

// damage applies prog to a copy of the fixture.
func (fx corruptFixture) damage(prog []byte) corrupted {
	c := corrupted{main: bytes.Clone(fx.main), wal: bytes.Clone(fx.wal)}
	for i := 0; i+mutationBytes <= len(prog) && i/mutationBytes < maxMutations; i += mutationBytes {
		kind := int(prog[i]) % mutationKinds
		off := int(binary.LittleEndian.Uint32(prog[i+1:]))
		val, n := prog[i+5], int(prog[i+6])
		if val == 0 && kind != fillMain {
			val = 0x80
		}
		switch {
		case kind == cutMain:
			off %= len(c.main) + 1
			c.main = c.main[:off]
		case kind == flipHeader && len(c.main) > 0:
			off %= min(100, len(c.main))
			c.main[off] ^= val
		case kind == flipMain && len(c.main) > 0:
			off %= len(c.main)
			c.main[off] ^= val
		case kind == fillMain && len(c.main) > 0:
			off %= len(c.main)
			for j := off; j < min(off+n+1, len(c.main)); j++ {
				c.main[j] = val
			}
		case kind == flipWAL && len(c.wal) > 0:
			off %= len(c.wal)
			c.wal[off] ^= val
		case kind == cutWAL && c.wal != nil:
			off %= len(c.wal) + 1
			c.wal = c.wal[:off]
		case kind == otherWAL:
			c.wal = bytes.Clone(fx.otherWAL)
		case kind == dropWAL:
			c.wal = nil
		default:
			continue
		}
		c.steps = append(c.steps, fmt.Sprintf("%s@%d(%#x,%d)", []string{"cut-main", "flip-header", "flip-main",
			"fill-main", "flip-wal", "cut-wal", "other-wal", "drop-wal"}[kind], off, val, n))
	}
	return c
}

// describe names the damage, for failure messages.
func (c corrupted) describe() string {
	if len(c.steps) == 0 {
		return "an undamaged file"
	}
	return strings.Join(c.steps, " + ")
}

// write puts the damaged files in dir and returns the main file's path.
func (c corrupted) write(t testing.TB, dir string) string {
	path := filepath.Join(dir, "damaged.state")
	require.NoError(t, os.WriteFile(path, c.main, 0o600))
	if c.wal != nil {
		require.NoError(t, os.WriteFile(path+"-wal", c.wal, 0o600))
	}
	return path
}

// assertUntouched checks that the main file and the WAL are byte for byte
// as written, and reports whether they are.
func (c corrupted) assertUntouched(t *testing.T, path string) bool {
	ok := true
	main, err := os.ReadFile(path)
	if assert.NoError(t, err) {
		ok = assert.True(t, bytes.Equal(c.main, main), "a failed open changed the main file (%d -> %d bytes): %s", len(c.main), len(main), c.describe())
	}
	wal, err := os.ReadFile(path + "-wal")
	if c.wal == nil {
		if !errors.Is(err, fs.ErrNotExist) {
			ok = assert.Empty(t, wal, "a failed open wrote a WAL: %s", c.describe()) && ok
		}
		return ok
	}
	if assert.NoError(t, err, "a failed open removed the WAL: %s", c.describe()) {
		return assert.True(t, bytes.Equal(c.wal, wal), "a failed open changed the WAL (%d -> %d bytes): %s", len(c.wal), len(wal), c.describe()) && ok
	}
	return false
}

func TestDamagedHeadersAreRefusedUntouched(t *testing.T) {
	fx := newCorruptFixture(t)
	for _, tc := range []struct {
		name string
		prog []byte
		want error
	}{
		{"cut inside the header", mutation(cutMain, 50, 0, 0), state.ErrCorrupt},
		{"cut after the header", mutation(cutMain, 100, 0, 0), state.ErrCorrupt},
		{"cut after page 1", append(mutation(cutMain, 4096, 0, 0), mutation(dropWAL, 0, 0, 0)...), state.ErrCorrupt},
		{"cut in half", append(mutation(cutMain, 4096*8, 0, 0), mutation(dropWAL, 0, 0, 0)...), state.ErrCorrupt},
		{"magic, with a WAL", mutation(flipHeader, 3, 0xff, 0), state.ErrNotStatekit},
		{"page size, with a WAL", mutation(flipHeader, 16, 0x01, 0), state.ErrNotStatekit},
		{"application id", append(mutation(flipHeader, 71, 0x01, 0), mutation(dropWAL, 0, 0, 0)...), state.ErrNotStatekit},
		{"user version", append(mutation(flipHeader, 63, 0x02, 0), mutation(dropWAL, 0, 0, 0)...), state.ErrSchemaTooNew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fx.damage(tc.prog)
			path := c.write(t, t.TempDir())
			for _, opts := range [][]state.Option{nil, {state.WithReadOnly()}} {
				db, err := state.Open(path, opts...)
				if db != nil {
					db.Close()
				}
				require.ErrorIs(t, err, tc.want)
				assert.Contains(t, err.Error(), path, "the error names the file")
				c.assertUntouched(t, path)
			}
		})
	}
}

func TestDamagedPagesFailWithErrCorrupt(t *testing.T) {
	fx := newCorruptFixture(t)
	for _, page := range []uint32{1, 2, 3} { // the kv table, its index, the leases (page numbers from 0)
		t.Run(fmt.Sprint("page ", page), func(t *testing.T) {
			c := fx.damage(append(mutation(fillMain, page*4096, 0xee, 255), mutation(dropWAL, 0, 0, 0)...))
			path := c.write(t, t.TempDir())
			db, err := state.Open(path, state.WithoutBackground())
			if err != nil {
				require.ErrorIs(t, err, state.ErrCorrupt)
				require.Contains(t, err.Error(), path)
				return
			}
			defer db.Close()
			// Open reads the header and the schema only: the damage shows at
			// the first call that reads it, and Check reads everything.
			findings, err := db.Check(t.Context())
			if err == nil {
				require.NotEmpty(t, findings, "Check finds the damage")
			} else {
				require.ErrorIs(t, err, state.ErrCorrupt)
				require.Contains(t, err.Error(), path, "the error names the file")
			}
			failed := err != nil
			for i := 0; i < 40; i++ {
				_, err := db.Get(t.Context(), fmt.Sprintf("key-1-%d", i))
				if err != nil {
					require.ErrorIs(t, err, state.ErrCorrupt)
					require.Contains(t, err.Error(), path, "the error names the file")
					failed = true
				}
			}
			err = db.Leases(t.Context(), true, func(state.LeaseInfo) error { return nil })
			if err != nil || failed {
				require.ErrorIs(t, err, state.ErrCorrupt, "once failed, the handle stays failed and says why")
				require.ErrorIs(t, db.Set(t.Context(), "k", 1), state.ErrCorrupt)
			}
		})
	}
}

func TestDamagedWALLeavesAConsistentPrefix(t *testing.T) {
	fx := newCorruptFixture(t)
	for _, tc := range []struct {
		name string
		prog []byte
	}{
		{"WAL header", mutation(flipWAL, 9, 0x10, 0)},
		{"first frame", mutation(flipWAL, 32+24+100, 0x01, 0)},
		{"third frame", mutation(flipWAL, 32+2*(24+4096)+500, 0x01, 0)},
		{"WAL cut in a frame", mutation(cutWAL, 32+3*(24+4096)+100, 0, 0)},
		{"WAL cut in its header", mutation(cutWAL, 20, 0, 0)},
		{"WAL lost", mutation(dropWAL, 0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fx.damage(tc.prog)
			path := c.write(t, t.TempDir())
			db, err := state.Open(path, state.WithoutBackground())
			require.NoError(t, err, "SQLite takes the WAL up to its first bad frame: a torn write looks the same")
			defer db.Close()
			findings, err := db.Check(t.Context())
			require.NoError(t, err)
			require.Empty(t, findings)
			// The first batch is whole; of the second, a prefix.
			for i := 20; i < 40; i++ {
				v, err := db.Get(t.Context(), fmt.Sprintf("key-1-%d", i))
				require.NoError(t, err)
				require.Len(t, v.Bytes(), 100+i*37)
			}
			prefixEnded := false
			for i := 0; i < 20; i++ {
				v, err := db.Get(t.Context(), fmt.Sprintf("key-1-%d", i))
				require.NoError(t, err)
				n, isInt := v.Int()
				if !isInt {
					prefixEnded = true
					continue
				}
				require.False(t, prefixEnded, "key-1-%d was rewritten after a write that was lost", i)
				require.Equal(t, int64(i), n)
			}
		})
	}
}

func TestForeignWALIsFoundByCheck(t *testing.T) {
	fx := newCorruptFixture(t)
	c := fx.damage(mutation(otherWAL, 0, 0, 0))
	path := c.write(t, t.TempDir())
	db, err := state.Open(path, state.WithoutBackground())
	if err != nil {
		require.ErrorIs(t, err, state.ErrCorrupt)
		c.assertUntouched(t, path)
		return
	}
	defer db.Close()
	// SQLite cannot tell a WAL from another file (nothing in it names its
	// database): it applies it. Open checks only the header; Check finds
	// the damage.
	findings, err := db.Check(t.Context())
	if err == nil {
		require.NotEmpty(t, findings, "a foreign WAL's pages do not fit this file's b-trees")
	} else {
		require.ErrorIs(t, err, state.ErrCorrupt)
	}
}

func TestTinyFilesAreRefusedUntouched(t *testing.T) {
	fx := newCorruptFixture(t)
	// One byte matters: SQLite's unix VFS reports a 1-byte file as empty.
	for _, n := range []int{1, 2, 15, 16, 99} {
		c := corrupted{main: fx.main[:n]}
		path := c.write(t, t.TempDir())
		_, err := state.Open(path)
		require.Error(t, err, "%d bytes", n)
		require.True(t, errors.Is(err, state.ErrCorrupt) || errors.Is(err, state.ErrNotStatekit), "%d bytes: %v", n, err)
		require.Contains(t, err.Error(), path)
		c.assertUntouched(t, path)
	}
	// A 1-byte file is not a statekit file (README's ErrNotStatekit), read
	// only too, whatever its byte.
	for _, b := range []byte{fx.main[0], 0} {
		c := corrupted{main: []byte{b}}
		path := c.write(t, t.TempDir())
		for _, opts := range [][]state.Option{nil, {state.WithReadOnly()}} {
			_, err := state.Open(path, opts...)
			require.ErrorIs(t, err, state.ErrNotStatekit, "1 byte %#x", b)
			require.Contains(t, err.Error(), path)
		}
		c.assertUntouched(t, path)
	}
	// An empty file is a new one: Open creates the schema in it. A
	// read-only handle cannot, so it refuses it and leaves it empty.
	c := corrupted{main: []byte{}}
	path := c.write(t, t.TempDir())
	_, err := state.Open(path, state.WithReadOnly())
	require.ErrorIs(t, err, state.ErrNotStatekit)
	require.Contains(t, err.Error(), path)
	c.assertUntouched(t, path)
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}
