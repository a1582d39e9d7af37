package vfs

import (
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// shmSlots is the number of WAL shared-memory lock slots (SQLITE_SHM_NLOCK).
const shmSlots = sqlite3.SQLITE_SHM_NLOCK

// shmNode is the shared memory of one database: what the unix VFS keeps in
// the -shm file. Its regions come from libc's allocator, not the Go heap:
// SQLite reads and writes them from every connection through raw pointers,
// which the race detector's checkptr rejects on Go memory.
//
// Connections that die (Release, Reset) stop counting as live but may still
// hold pointers into the regions, so memory is freed only when the last
// mapping handle, dead or alive, unmaps. When no live handle is left the node
// is detached from its file: the next connection starts on fresh, zeroed
// memory, as the unix VFS resets a -shm file nobody has open.
type shmNode struct {
	node       *lockNode // nil once detached
	regions    []uintptr
	regionSize int32
	maps       int // handles, dead or alive, that have not unmapped
	live       int // live handles among them
	shared     [shmSlots]int
	excl       [shmSlots]*lockHandle
}

// attach maps the file's shared memory into h. Called with m.mu held.
func (h *lockHandle) attach() *shmNode {
	if h.shm != nil {
		return h.shm
	}
	n := h.node
	if n.shm == nil {
		n.shm = &shmNode{node: n}
	}
	s := n.shm
	s.maps++
	s.live++
	h.shm = s
	return s
}

// detachIfIdle cuts s from its file once no live handle uses it.
func (s *shmNode) detachIfIdle() {
	if s.live == 0 && s.node != nil {
		if s.node.shm == s {
			s.node.shm = nil
		}
		s.node = nil
	}
}

// dropLocks releases every shm lock h holds on s.
func (s *shmNode) dropLocks(h *lockHandle) {
	for i := range shmSlots {
		bit := uint8(1) << i
		if h.shmShared&bit != 0 {
			s.shared[i]--
		}
		if h.shmExcl&bit != 0 && s.excl[i] == h {
			s.excl[i] = nil
		}
	}
	h.shmShared, h.shmExcl = 0, 0
}

// shmMap returns the address of region i (of size bytes), allocating the
// regions up to it when extend is set. Without extend a missing region is
// reported as address 0, as SQLite expects.
func (h *lockHandle) shmMap(tls *libc.TLS, i, size int32, extend bool) (uintptr, int32) {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if h.dead {
		return 0, sqlite3.SQLITE_IOERR_SHMMAP
	}
	s := h.attach()
	if s.regionSize == 0 {
		s.regionSize = size
	}
	if size != s.regionSize || i < 0 {
		return 0, sqlite3.SQLITE_IOERR_SHMSIZE
	}
	for int(i) >= len(s.regions) {
		if !extend {
			return 0, sqlite3.SQLITE_OK
		}
		p := libc.Xcalloc(tls, 1, libc.Tsize_t(size))
		if p == 0 {
			return 0, sqlite3.SQLITE_IOERR_NOMEM
		}
		s.regions = append(s.regions, p)
	}
	return s.regions[i], sqlite3.SQLITE_OK
}

// shmLock takes or releases, shared or exclusive, the n slots from offset.
func (h *lockHandle) shmLock(offset, n, flags int32) int32 {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	unlock := flags&sqlite3.SQLITE_SHM_UNLOCK != 0
	if h.dead {
		if unlock {
			return sqlite3.SQLITE_OK
		}
		return sqlite3.SQLITE_IOERR_SHMLOCK
	}
	if offset < 0 || n < 1 || offset+n > shmSlots {
		return sqlite3.SQLITE_IOERR_SHMLOCK
	}
	s := h.attach()
	exclusive := flags&sqlite3.SQLITE_SHM_EXCLUSIVE != 0
	switch {
	case unlock:
		for i := offset; i < offset+n; i++ {
			bit := uint8(1) << i
			if h.shmShared&bit != 0 {
				s.shared[i]--
				h.shmShared &^= bit
			}
			if h.shmExcl&bit != 0 {
				s.excl[i] = nil
				h.shmExcl &^= bit
			}
		}
	case exclusive:
		for i := offset; i < offset+n; i++ {
			bit := uint8(1) << i
			if s.excl[i] != nil && s.excl[i] != h {
				return sqlite3.SQLITE_BUSY
			}
			readers := s.shared[i]
			if h.shmShared&bit != 0 {
				readers--
			}
			if readers > 0 {
				return sqlite3.SQLITE_BUSY
			}
		}
		for i := offset; i < offset+n; i++ {
			s.excl[i] = h
			h.shmExcl |= uint8(1) << i
		}
	default: // shared
		for i := offset; i < offset+n; i++ {
			if s.excl[i] != nil && s.excl[i] != h {
				return sqlite3.SQLITE_BUSY
			}
		}
		for i := offset; i < offset+n; i++ {
			bit := uint8(1) << i
			if h.shmShared&bit == 0 {
				s.shared[i]++
				h.shmShared |= bit
			}
		}
	}
	return sqlite3.SQLITE_OK
}

// shmBarrier orders memory accesses around it: taking and dropping the
// manager's mutex is a full barrier.
func (h *lockHandle) shmBarrier() {
	h.m.mu.Lock()
	//lint:ignore SA2001 an empty critical section is the barrier
	h.m.mu.Unlock()
}

// shmUnmap ends h's mapping of the shared memory.
func (h *lockHandle) shmUnmap(tls *libc.TLS) int32 {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	h.unmap(tls)
	return sqlite3.SQLITE_OK
}

// unmap drops h's locks and mapping, freeing the regions when h was the last
// to map them. Called with m.mu held.
func (h *lockHandle) unmap(tls *libc.TLS) {
	s := h.shm
	if s == nil {
		return
	}
	if !h.dead {
		s.dropLocks(h)
		s.live--
		s.detachIfIdle()
	}
	h.shm = nil
	s.maps--
	if s.maps == 0 {
		for _, p := range s.regions {
			libc.Xfree(tls, p)
		}
		s.regions = nil
	}
}

// walWriteSlot is the shm lock slot of the WAL's writer (WAL_WRITE_LOCK):
// SQLite writes the wal-index header only while it holds it.
const walWriteSlot = 0

// SharedIndex copies the start of the WAL's shared memory (the wal-index,
// which the unix VFS keeps in the -shm file: its header is the first 136
// bytes, sqlite.org/walformat.html) of the database named name into p, as
// the live connections of fsys's machine share it, and reports whether it
// could: false when fsys shares no LockManager (LockSharer), when no live
// connection has the shared memory mapped, when it is shorter than p, and
// when a connection holds the WAL's write lock, the only one under which
// SQLite changes the header (so that what p receives is never half
// written). name is resolved as SQLite resolves it (FullPather).
func SharedIndex(fsys FS, name string, p []byte) bool {
	ls, ok := fsys.(LockSharer)
	if !ok || ls.LockManager() == nil {
		return false
	}
	if fp, ok := fsys.(FullPather); ok {
		full, err := fp.FullPath(name)
		if err != nil {
			return false
		}
		name = full
	}
	m := ls.LockManager()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.nodes[name]
	if n == nil || n.shm == nil {
		return false
	}
	s := n.shm
	if s.live == 0 || len(s.regions) == 0 || int(s.regionSize) < len(p) || s.excl[walWriteSlot] != nil {
		return false
	}
	copy(p, cbytes(s.regions[0], int32(len(p))))
	return true
}
