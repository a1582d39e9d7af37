package state

import (
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// shmView is a connection's own view of the WAL's shared-memory index: the
// region its database file has mapped, and that file's shared-memory locks,
// reached through the VFS's methods (xShmMap, xShmLock) of the database
// file SQLite hands out (SQLITE_FCNTL_FILE_POINTER). It opens no
// descriptor of the -shm file (closing one would drop the process's locks
// on it), and it works alike on SQLite's unix VFS, where the region is the
// -shm file mapped, and on state/vfs, which keeps it in memory.
type shmView struct {
	tls     *libc.TLS
	file    uintptr // the connection's sqlite3_file of the database
	shmMap  uintptr // its xShmMap
	shmLock uintptr // its xShmLock
	pp      uintptr // a pointer's room in C memory, for the calls' answers
}

// newShmView returns dc's view, or false when dc is no SQLite connection
// of this driver, or its VFS has no shared memory (io methods before
// version 2). Callers close it, and use it only inside conn.Raw.
func newShmView(dc any) (*shmView, bool) {
	h := sqliteHandle(dc)
	if h == 0 {
		return nil, false
	}
	v := &shmView{tls: libc.NewTLS()}
	size := int(unsafe.Sizeof(uintptr(0)))
	v.pp = v.tls.Alloc(size)
	zDb, err := libc.CString("main")
	if err != nil {
		v.close()
		return nil, false
	}
	defer libc.Xfree(v.tls, zDb)
	*(*uintptr)(cptr(v.pp)) = 0
	if sqlite3.Xsqlite3_file_control(v.tls, h, zDb, sqlite3.SQLITE_FCNTL_FILE_POINTER, v.pp) != sqlite3.SQLITE_OK {
		v.close()
		return nil, false
	}
	v.file = *(*uintptr)(cptr(v.pp))
	if v.file == 0 {
		v.close()
		return nil, false
	}
	methods := (*sqlite3.Tsqlite3_file)(cptr(v.file)).FpMethods
	if methods == 0 || (*sqlite3.Tsqlite3_io_methods)(cptr(methods)).FiVersion < 2 {
		v.close()
		return nil, false
	}
	m := (*sqlite3.Tsqlite3_io_methods)(cptr(methods))
	v.shmMap, v.shmLock = m.FxShmMap, m.FxShmLock
	if v.shmMap == 0 || v.shmLock == 0 {
		v.close()
		return nil, false
	}
	return v, true
}

// close frees what newShmView allocated.
func (v *shmView) close() {
	v.tls.Free(int(unsafe.Sizeof(uintptr(0))))
	v.tls.Close()
}

// region returns the address of the first region of the shared memory, as
// the connection has it mapped, or 0 when it has none mapped (it maps
// nothing new).
func (v *shmView) region() uintptr {
	*(*uintptr)(cptr(v.pp)) = 0
	call := *(*func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{v.shmMap}))
	if call(v.tls, v.file, 0, shmRegionBytes, 0, v.pp) != sqlite3.SQLITE_OK {
		return 0
	}
	return *(*uintptr)(cptr(v.pp))
}

// lock calls xShmLock on n slots from slot with flags (SQLITE_SHM_*), and
// returns its result: SQLITE_BUSY when another connection holds a slot.
func (v *shmView) lock(slot, n, flags int32) int32 {
	call := *(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&struct{ uintptr }{v.shmLock}))
	return call(v.tls, v.file, slot, n, flags)
}

// indexHeaderAt returns the index header in region (the first of its two copies)
// when both copies agree, else false (a writer is changing it).
func indexHeaderAt(region uintptr) ([]byte, bool) {
	both := make([]byte, 2*shmHeaderBytes)
	for i := range both { // byte by byte, as indexHeader reads C memory
		both[i] = *(*byte)(unsafe.Add(cptr(region), i))
	}
	if string(both[:shmHeaderBytes]) != string(both[shmHeaderBytes:]) {
		return nil, false
	}
	return both[:shmHeaderBytes], true
}
