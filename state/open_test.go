package state_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenRefusesForeignFilesUntouched(t *testing.T) {
	dir := t.TempDir()
	otherDB := filepath.Join(dir, "other.db")
	raw, err := sql.Open("sqlite", otherDB)
	require.NoError(t, err)
	_, err = raw.Exec(`CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	appID := filepath.Join(dir, "appid.db")
	raw, err = sql.Open("sqlite", appID)
	require.NoError(t, err)
	_, err = raw.Exec(`PRAGMA application_id = 1234`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("these are not the bytes you are looking for\n"), 0o644))
	garbage := filepath.Join(dir, "garbage")
	require.NoError(t, os.WriteFile(garbage, make([]byte, 8192), 0o644))

	for _, path := range []string{otherDB, appID, text, garbage} {
		before, err := os.ReadFile(path)
		require.NoError(t, err)
		stat, err := os.Stat(path)
		require.NoError(t, err)
		for _, opts := range [][]state.Option{nil, {state.WithReadOnly()}} {
			db, err := state.Open(path, opts...)
			if db != nil {
				db.Close()
			}
			assert.ErrorIs(t, err, state.ErrNotStatekit, path)
			assert.Contains(t, err.Error(), path, "the error names the file")
		}
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s is byte-for-byte untouched", path)
		stat2, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, stat.ModTime(), stat2.ModTime())
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	raw, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = raw.Exec(`PRAGMA user_version = 99`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	for _, opts := range [][]state.Option{nil, {state.WithReadOnly()}} {
		_, err = state.Open(path, opts...)
		assert.ErrorIs(t, err, state.ErrSchemaTooNew)
		assert.Contains(t, err.Error(), "99")
		assert.Contains(t, err.Error(), path, "the error names the file")
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func TestNewFilesAreOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perm.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(t.Context(), "k", 1))
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		require.NoError(t, err, p)
		assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), p)
	}
	require.NoError(t, db.Close())
}

func TestOpenErrors(t *testing.T) {
	_, err := state.Open("")
	assert.ErrorIs(t, err, state.ErrInvalidArgument)

	missing := filepath.Join(t.TempDir(), "missing.state")
	_, err = state.Open(missing, state.WithReadOnly())
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, statErr := os.Stat(missing)
	assert.ErrorIs(t, statErr, fs.ErrNotExist, "a read-only open never creates the file")

	_, err = state.Open(filepath.Join(t.TempDir(), "no", "such", "dir", "x.state"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	f := newFixture(t, backends[0])
	require.NoError(t, f.db.Set(f.ctx, "k", "v"))
	ro := f.open(state.WithReadOnly())
	defer ro.Close()
	v, err := ro.Get(f.ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", v.String())
	assert.ErrorIs(t, ro.Set(f.ctx, "k", 1), state.ErrReadOnly)
	_, err = ro.Incr(f.ctx, "n")
	assert.ErrorIs(t, err, state.ErrReadOnly)
	_, err = ro.Lease(f.ctx, "job", "a", time.Second)
	assert.ErrorIs(t, err, state.ErrReadOnly)
	assert.ErrorIs(t, ro.IncrBuffered("n", 1), state.ErrReadOnly)
	_, err = ro.Sweep(f.ctx)
	assert.ErrorIs(t, err, state.ErrReadOnly)
	assert.ErrorIs(t, ro.Update(f.ctx, func(*state.Tx) error { return nil }), state.ErrReadOnly)

	// Every other write verb, on a lease the writer holds.
	l, err := f.db.Lease(f.ctx, "held", "a", time.Minute)
	require.NoError(t, err)
	errOf := func(_ any, err error) error { return err }
	for verb, err := range map[string]error{
		"del":     errOf(ro.Del(f.ctx, "k")),
		"cas":     errOf(ro.CAS(f.ctx, "k", "v", "w")),
		"expire":  errOf(ro.Expire(f.ctx, "k", time.Second)),
		"incrby":  errOf(ro.IncrBy(f.ctx, "n", 2)),
		"decr":    errOf(ro.Decr(f.ctx, "n")),
		"decrby":  errOf(ro.DecrBy(f.ctx, "n", 2)),
		"renew":   ro.Renew(f.ctx, l, time.Minute),
		"release": ro.Release(f.ctx, l),
	} {
		assert.ErrorIs(t, err, state.ErrReadOnly, verb)
	}
	v, err = f.db.Get(f.ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", v.String(), "the refused writes changed nothing")
	require.NoError(t, f.db.Renew(f.ctx, l, time.Minute), "the lease is still held with its token")
}

func TestEveryCallAfterCloseIsErrClosed(t *testing.T) {
	f := newFixture(t, backends[0])
	l, err := f.db.Lease(f.ctx, "job", "a", time.Second)
	require.NoError(t, err)
	require.NoError(t, f.db.Close())
	ctx := f.ctx
	db := f.db
	calls := map[string]func() error{
		"Get":          func() error { _, err := db.Get(ctx, "k"); return err },
		"Set":          func() error { return db.Set(ctx, "k", 1) },
		"Del":          func() error { _, err := db.Del(ctx, "k"); return err },
		"Incr":         func() error { _, err := db.Incr(ctx, "k"); return err },
		"DecrBy":       func() error { _, err := db.DecrBy(ctx, "k", 2); return err },
		"CAS":          func() error { _, err := db.CAS(ctx, "k", nil, 1); return err },
		"Expire":       func() error { _, err := db.Expire(ctx, "k", time.Second); return err },
		"TTL":          func() error { _, err := db.TTL(ctx, "k"); return err },
		"Lease":        func() error { _, err := db.Lease(ctx, "j", "a", time.Second); return err },
		"Renew":        func() error { return db.Renew(ctx, l, time.Second) },
		"Release":      func() error { return db.Release(ctx, l) },
		"Update":       func() error { return db.Update(ctx, func(*state.Tx) error { return nil }) },
		"IncrBuffered": func() error { return db.IncrBuffered("k", 1) },
		"Sweep":        func() error { _, err := db.Sweep(ctx); return err },
		"Close":        db.Close,
		"Decr":         func() error { _, err := db.Decr(ctx, "k"); return err },
		"IncrBy":       func() error { _, err := db.IncrBy(ctx, "k", 2); return err },
		"Flush":        func() error { return db.Flush(ctx) },
		"Scan":         func() error { return db.Scan(ctx, "", true, func(state.KeyInfo) error { return nil }) },
		"Leases":       func() error { return db.Leases(ctx, true, func(state.LeaseInfo) error { return nil }) },
		"Stats":        func() error { _, err := db.Stats(ctx); return err },
		"Check":        func() error { _, err := db.Check(ctx); return err },
	}
	for name, call := range calls {
		assert.ErrorIs(t, call(), state.ErrClosed, name)
	}
	f.db = f.open()
}

func TestCancelledContextWritesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		f := newFixture(t, b)
		ctx, cancel := context.WithCancel(f.ctx)
		cancel()
		assert.ErrorIs(t, f.db.Set(ctx, "k", 1), context.Canceled)
		_, err := f.db.Incr(ctx, "n")
		assert.ErrorIs(t, err, context.Canceled)
		_, err = f.db.Lease(ctx, "job", "a", time.Second)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, f.db.Update(ctx, func(tx *state.Tx) error { return tx.Set("k", 1) }), context.Canceled)

		ctx2, cancel2 := context.WithCancel(f.ctx)
		err = f.db.Update(ctx2, func(tx *state.Tx) error {
			if err := tx.Set("k", 1); err != nil {
				return err
			}
			cancel2()
			return nil
		})
		assert.ErrorIs(t, err, context.Canceled, "cancelled before commit: rolled back")
		assert.Equal(t, "<absent>", f.get("k"))
		assert.Equal(t, "<absent>", f.get("n"))
		l, err := f.db.Lease(f.ctx, "job", "b", time.Second)
		require.NoError(t, err)
		assert.Equal(t, int64(1), l.Token)
	})
}

func TestOpenNeverCreatesThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere.state")
	link := filepath.Join(dir, "link.state")
	require.NoError(t, os.Symlink(target, link))
	_, err := state.Open(link)
	assert.ErrorIs(t, err, state.ErrInvalidArgument)
	assert.Contains(t, err.Error(), link)
	_, statErr := os.Stat(target)
	assert.ErrorIs(t, statErr, fs.ErrNotExist, "nothing was created at the link's target")

	// A link to an existing statekit file opens as usual.
	db, err := state.Open(target)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	db, err = state.Open(link)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

// TestNilClockAndFSAreTheDefaults: WithClock(nil) and WithFS(nil) open as
// if the option were not given (the operating system's clock, the native
// VFS on the real file), as their doc comments say.
func TestNilClockAndFSAreTheDefaults(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nil.state")
	before := time.Now()
	db, err := state.Open(path, state.WithClock(nil), state.WithFS(nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Set(ctx, "k", 1))
	now := db.Now()
	assert.False(t, now.Before(before.Add(-time.Second)) || now.After(time.Now().Add(time.Second)),
		"db.Now() %v is the system's time (read %v before Open)", now, before)
	// The native VFS wrote the real file: a second, default handle reads it.
	other, err := state.Open(path)
	require.NoError(t, err)
	defer other.Close()
	v, err := other.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "1", v.String())
}
