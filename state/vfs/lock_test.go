package vfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// fakeFile stands for an open file: the manager only needs its identity.
type fakeFile struct {
	File
	id int
}

// handles opens n handles on one name.
func openN(m *LockManager, name string, n int) []*lockHandle {
	hs := make([]*lockHandle, n)
	for i := range hs {
		hs[i] = m.open(name, &fakeFile{id: i})
	}
	return hs
}

const (
	ok   = sqlite3.SQLITE_OK
	busy = sqlite3.SQLITE_BUSY
)

func TestFileLocksFollowSQLiteRules(t *testing.T) {
	m := NewLockManager()
	hs := openN(m, "db", 3)
	a, b, c := hs[0], hs[1], hs[2]

	require.EqualValues(t, ok, a.lock(lockShared))
	require.EqualValues(t, ok, b.lock(lockShared), "readers share")
	require.EqualValues(t, ok, a.lock(lockReserved))
	assert.EqualValues(t, busy, b.lock(lockReserved), "one writer at a time")
	held, rc := c.checkReserved()
	require.EqualValues(t, ok, rc)
	assert.True(t, held)

	assert.EqualValues(t, busy, a.lock(lockExclusive), "b still reads")
	assert.EqualValues(t, busy, c.lock(lockShared), "a's PENDING keeps new readers out")
	require.EqualValues(t, ok, b.unlock(lockNone))
	require.EqualValues(t, ok, a.lock(lockExclusive), "the last reader left")
	assert.EqualValues(t, busy, b.lock(lockShared))

	require.EqualValues(t, ok, a.unlock(lockShared))
	held, _ = c.checkReserved()
	assert.False(t, held)
	require.EqualValues(t, ok, b.lock(lockShared))
	require.EqualValues(t, ok, b.lock(lockReserved))
}

func TestReleaseDropsADeadHandlesLocks(t *testing.T) {
	m := NewLockManager()
	hs := openN(m, "db", 2)
	a, b := hs[0], hs[1]
	require.EqualValues(t, ok, a.lock(lockShared))
	require.EqualValues(t, ok, a.lock(lockExclusive))
	require.EqualValues(t, busy, b.lock(lockShared))

	m.Release(a.f)
	require.EqualValues(t, ok, b.lock(lockShared))
	require.EqualValues(t, ok, b.lock(lockExclusive), "the dead handle's SHARED went too")
	assert.EqualValues(t, sqlite3.SQLITE_IOERR_LOCK, a.lock(lockShared), "a dead handle locks nothing")
	assert.EqualValues(t, ok, a.unlock(lockNone), "but may unlock")
	m.Release(a.f) // twice, and unknown files, are harmless
	m.Release(&fakeFile{id: 99})
}

func TestShmLocks(t *testing.T) {
	m := NewLockManager()
	hs := openN(m, "db", 2)
	a, b := hs[0], hs[1]
	const lockSh, lockEx = sqlite3.SQLITE_SHM_LOCK | sqlite3.SQLITE_SHM_SHARED, sqlite3.SQLITE_SHM_LOCK | sqlite3.SQLITE_SHM_EXCLUSIVE
	const unlockSh, unlockEx = sqlite3.SQLITE_SHM_UNLOCK | sqlite3.SQLITE_SHM_SHARED, sqlite3.SQLITE_SHM_UNLOCK | sqlite3.SQLITE_SHM_EXCLUSIVE

	require.EqualValues(t, ok, a.shmLock(3, 1, lockSh))
	require.EqualValues(t, ok, b.shmLock(3, 1, lockSh), "shared slots share")
	assert.EqualValues(t, busy, b.shmLock(3, 1, lockEx), "a reads slot 3")
	assert.EqualValues(t, busy, b.shmLock(0, 8, lockEx))
	require.EqualValues(t, ok, b.shmLock(0, 3, lockEx), "slots 0..2 are free")
	assert.EqualValues(t, busy, a.shmLock(2, 1, lockSh))
	require.EqualValues(t, ok, a.shmLock(3, 1, unlockSh))
	require.EqualValues(t, ok, b.shmLock(3, 1, unlockSh))
	require.EqualValues(t, ok, a.shmLock(3, 1, lockEx))

	m.Release(b.f)
	require.EqualValues(t, ok, a.shmLock(0, 3, lockEx), "a dead handle's shm locks go")
	assert.EqualValues(t, sqlite3.SQLITE_IOERR_SHMLOCK, b.shmLock(5, 1, lockSh))
	assert.EqualValues(t, ok, b.shmLock(0, 3, unlockEx))
	assert.EqualValues(t, sqlite3.SQLITE_IOERR_SHMLOCK, a.shmLock(7, 2, lockSh), "slots end at 8")
}

func TestShmRegionsAreSharedAndOutliveDeadHandles(t *testing.T) {
	tls := libc.NewTLS()
	defer tls.Close()
	m := NewLockManager()
	hs := openN(m, "db", 2)
	a, b := hs[0], hs[1]

	p, rc := a.shmMap(tls, 0, 32768, false)
	require.EqualValues(t, ok, rc)
	assert.Zero(t, p, "without extend a missing region is 0")
	pa, rc := a.shmMap(tls, 1, 32768, true)
	require.EqualValues(t, ok, rc)
	require.NotZero(t, pa)
	pb, rc := b.shmMap(tls, 1, 32768, false)
	require.EqualValues(t, ok, rc)
	assert.Equal(t, pa, pb, "every connection maps the same memory")
	cbytes(pa, 32768)[100] = 42
	assert.EqualValues(t, 42, cbytes(pb, 32768)[100])
	_, rc = a.shmMap(tls, 2, 4096, true)
	assert.EqualValues(t, sqlite3.SQLITE_IOERR_SHMSIZE, rc)

	node := a.shm
	m.Release(a.f)
	m.Release(b.f)
	assert.Nil(t, m.nodes["db"], "no live handle: the memory is cut from the file")
	assert.Len(t, node.regions, 2, "but stays while dead connections map it")
	_, rc = a.shmMap(tls, 0, 32768, true)
	assert.EqualValues(t, sqlite3.SQLITE_IOERR_SHMMAP, rc)

	c := m.open("db", &fakeFile{id: 3})
	pc, rc := c.shmMap(tls, 1, 32768, true)
	require.EqualValues(t, ok, rc)
	assert.NotSame(t, node, c.shm, "a new connection starts on fresh memory")
	assert.Zero(t, cbytes(pc, 32768)[100])

	a.close(tls)
	assert.Len(t, node.regions, 2)
	b.close(tls)
	assert.Empty(t, node.regions, "freed once the last mapping goes")
	c.close(tls)
	assert.Empty(t, m.nodes)
	assert.Empty(t, m.byFile)
}

func TestResetForgetsEverything(t *testing.T) {
	tls := libc.NewTLS()
	defer tls.Close()
	m := NewLockManager()
	old := m.open("db", &fakeFile{id: 1})
	require.EqualValues(t, ok, old.lock(lockShared))
	require.EqualValues(t, ok, old.lock(lockExclusive))
	_, rc := old.shmMap(tls, 0, 32768, true)
	require.EqualValues(t, ok, rc)

	m.Reset()
	fresh := m.open("db", &fakeFile{id: 2})
	require.EqualValues(t, ok, fresh.lock(lockShared))
	require.EqualValues(t, ok, fresh.lock(lockExclusive), "the old EXCLUSIVE died with the power")
	assert.EqualValues(t, sqlite3.SQLITE_IOERR_LOCK, old.lock(lockReserved))
	_, rc = fresh.shmMap(tls, 0, 32768, true)
	require.EqualValues(t, ok, rc)
	assert.NotSame(t, old.shm, fresh.shm)

	old.close(tls) // an old connection closing touches nothing new
	require.EqualValues(t, ok, fresh.unlock(lockNone))
	fresh.close(tls)
	assert.Empty(t, m.nodes)
}
