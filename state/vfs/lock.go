package vfs

import (
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite's file lock levels (SQLITE_LOCK_*).
const (
	lockNone      = sqlite3.SQLITE_LOCK_NONE
	lockShared    = sqlite3.SQLITE_LOCK_SHARED
	lockReserved  = sqlite3.SQLITE_LOCK_RESERVED
	lockPending   = sqlite3.SQLITE_LOCK_PENDING
	lockExclusive = sqlite3.SQLITE_LOCK_EXCLUSIVE
)

// LockManager holds the locks of one machine: per file, SQLite's lock levels
// NONE..EXCLUSIVE, and per database its WAL shared memory (8 lock slots and
// the regions holding the wal-index). Every connection opened through a VFS
// whose FS shares a manager (see LockSharer) sees the others' locks, as
// processes on one machine see each other's. Locks are held per open file
// handle, so two connections of one process exclude each other too.
//
// A LockManager is safe for concurrent use. The zero value is not usable:
// call NewLockManager.
type LockManager struct {
	mu     sync.Mutex
	nodes  map[string]*lockNode
	byFile map[File]*lockHandle
}

// lockNode is the lock state of one file name.
type lockNode struct {
	name      string
	handles   int // live handles open on the name
	shared    int // live handles holding SHARED or more
	reserved  *lockHandle
	pending   *lockHandle
	exclusive *lockHandle
	shm       *shmNode // the shared memory of the name, nil until mapped
}

// lockHandle is one open file's share of the manager.
type lockHandle struct {
	m     *LockManager
	node  *lockNode
	f     File
	level int32
	dead  bool // released by Release or Reset: refuse to lock again

	shm       *shmNode // mapped shared memory, nil when none
	shmShared uint8    // slots this handle holds SHARED
	shmExcl   uint8    // slots this handle holds EXCLUSIVE
}

// NewLockManager returns a manager holding no locks.
func NewLockManager() *LockManager {
	return &LockManager{nodes: map[string]*lockNode{}, byFile: map[File]*lockHandle{}}
}

// Release ends every lock and shared-memory lock held through f, as the death
// of the process holding f does. Further lock requests through f fail; f's
// shared memory stays mapped (its connection may still read it) until the
// connection unmaps it. Release does nothing for a file the manager does not
// know. A simulated FS calls it when a process crashes.
func (m *LockManager) Release(f File) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.byFile[f]; h != nil {
		m.kill(h)
	}
}

// Reset forgets every lock and every shared-memory region, as a power loss
// does: every handle known so far fails its further lock requests, and
// handles opened afterwards start on a clean machine. Memory still mapped by
// old connections is freed once they unmap it.
func (m *LockManager) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range m.byFile {
		h.dead = true
	}
	for _, n := range m.nodes {
		if n.shm != nil {
			n.shm.node = nil
			n.shm.live = 0
		}
	}
	m.nodes = map[string]*lockNode{}
	m.byFile = map[File]*lockHandle{}
}

// open registers a newly opened file under key.
func (m *LockManager) open(key string, f File) *lockHandle {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nodes[key]
	if n == nil {
		n = &lockNode{name: key}
		m.nodes[key] = n
	}
	n.handles++
	h := &lockHandle{m: m, node: n, f: f}
	m.byFile[f] = h
	return h
}

// kill drops h's locks and marks it dead. Called with m.mu held.
func (m *LockManager) kill(h *lockHandle) {
	if h.dead {
		return
	}
	n := h.node
	h.dropFileLocks(lockNone)
	if s := h.shm; s != nil {
		s.dropLocks(h)
		s.live--
		s.detachIfIdle()
	}
	h.dead = true
	n.handles--
	delete(m.byFile, h.f)
	if n.handles == 0 && m.nodes[n.name] == n {
		delete(m.nodes, n.name)
	}
}

// close ends h when its file closes: its locks go, and so does its mapping of
// the shared memory, if SQLite did not unmap it first.
func (h *lockHandle) close(tls *libc.TLS) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.m.kill(h)
	h.unmap(tls)
}

// lock raises h's lock to level, or returns SQLITE_BUSY when another handle's
// lock is in the way.
func (h *lockHandle) lock(level int32) int32 {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.dead {
		return sqlite3.SQLITE_IOERR_LOCK
	}
	if h.level >= level {
		return sqlite3.SQLITE_OK
	}
	n := h.node
	other := func(o *lockHandle) bool { return o != nil && o != h }
	if other(n.pending) || other(n.exclusive) {
		return sqlite3.SQLITE_BUSY
	}
	if h.level == lockNone {
		if level != lockShared {
			return sqlite3.SQLITE_IOERR_LOCK // SQLite takes SHARED first, always
		}
		n.shared++
		h.level = lockShared
		return sqlite3.SQLITE_OK
	}
	if other(n.reserved) {
		return sqlite3.SQLITE_BUSY
	}
	if level == lockReserved {
		n.reserved = h
		h.level = lockReserved
		return sqlite3.SQLITE_OK
	}
	// PENDING or EXCLUSIVE: hold PENDING first, so no new reader comes in,
	// and keep it while readers drain (SQLite retries).
	n.pending = h
	if h.level < lockPending {
		h.level = lockPending
	}
	if level == lockPending {
		return sqlite3.SQLITE_OK
	}
	if n.shared > 1 {
		return sqlite3.SQLITE_BUSY
	}
	n.exclusive = h
	h.level = lockExclusive
	return sqlite3.SQLITE_OK
}

// unlock lowers h's lock to level (SHARED or NONE).
func (h *lockHandle) unlock(level int32) int32 {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.dead {
		return sqlite3.SQLITE_OK // nothing is held any more
	}
	h.dropFileLocks(level)
	return sqlite3.SQLITE_OK
}

// dropFileLocks lowers h's file lock to level. Called with m.mu held.
func (h *lockHandle) dropFileLocks(level int32) {
	n := h.node
	if h.level > lockShared && level <= lockShared {
		if n.reserved == h {
			n.reserved = nil
		}
		if n.pending == h {
			n.pending = nil
		}
		if n.exclusive == h {
			n.exclusive = nil
		}
		h.level = lockShared
	}
	if h.level == lockShared && level == lockNone {
		n.shared--
		h.level = lockNone
	}
}

// checkReserved reports whether any handle holds RESERVED or more on the file.
func (h *lockHandle) checkReserved() (bool, int32) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.dead {
		return false, sqlite3.SQLITE_IOERR_CHECKRESERVEDLOCK
	}
	n := h.node
	return n.reserved != nil || n.pending != nil || n.exclusive != nil, sqlite3.SQLITE_OK
}
