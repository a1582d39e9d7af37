package vfs

import (
	"errors"
	"io"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// sectorSize is what xSectorSize reports, and the unit faults.MemFS tears
// unsynced writes in.
const sectorSize = 512

// deviceCharacteristics is what xDeviceCharacteristics reports: power-safe
// overwrite, as the unix VFS reports on Linux. A write never disturbs bytes
// outside its range on a power loss: faults.MemFS keeps or drops whole pieces
// of a write, never the bytes around it.
const deviceCharacteristics = sqlite3.SQLITE_IOCAP_POWERSAFE_OVERWRITE

// cFile is the sqlite3_file SQLite allocates (szOsFile bytes) for each open
// file: the io_methods pointer, then the id of the Go handle behind it.
type cFile struct {
	base sqlite3.Tsqlite3_file
	id   uintptr
}

// handle is the Go side of one open file.
type handle struct {
	reg   *registration
	f     File
	name  string
	flags OpenFlag
	lk    *lockHandle
	y     Yielder // the FS's, if it is one

	persistWAL bool // SQLITE_FCNTL_PERSIST_WAL: keep the WAL when closing last

	// dirSync: sync the directory at the next sync (a WAL or journal
	// opened to create, when the FS is a DirSyncer), as the unix VFS does.
	dirSync DirSyncer
}

// point is a scheduling point of a simulation, when the FS is a Yielder.
func (h *handle) point() {
	if h.y != nil {
		h.y.Yield()
	}
}

var (
	// handles maps a cFile id to its *handle.
	handles sync.Map
	// ioMethods is the one sqlite3_io_methods table (C memory) every file of
	// every registration points at, built by initMethods.
	ioMethods     uintptr
	ioMethodsOnce sync.Once
)

// initMethods builds ioMethods: iVersion 2, so SQLite can run WAL through
// the xShm* methods.
func initMethods() {
	tls := libc.NewTLS()
	defer tls.Close()
	p := libc.Xcalloc(tls, 1, libc.Tsize_t(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})))
	if p == 0 {
		return
	}
	m := (*sqlite3.Tsqlite3_io_methods)(cptr(p))
	m.FiVersion = 2
	setFunc(&m.FxClose, xClose)
	setFunc(&m.FxRead, xRead)
	setFunc(&m.FxWrite, xWrite)
	setFunc(&m.FxTruncate, xTruncate)
	setFunc(&m.FxSync, xSync)
	setFunc(&m.FxFileSize, xFileSize)
	setFunc(&m.FxLock, xLock)
	setFunc(&m.FxUnlock, xUnlock)
	setFunc(&m.FxCheckReservedLock, xCheckReservedLock)
	setFunc(&m.FxFileControl, xFileControl)
	setFunc(&m.FxSectorSize, xSectorSize)
	setFunc(&m.FxDeviceCharacteristics, xDeviceCharacteristics)
	setFunc(&m.FxShmMap, xShmMap)
	setFunc(&m.FxShmLock, xShmLock)
	setFunc(&m.FxShmBarrier, xShmBarrier)
	setFunc(&m.FxShmUnmap, xShmUnmap)
	ioMethods = p
}

// fileOf returns the handle behind the sqlite3_file at pFile.
func fileOf(pFile uintptr) *handle {
	v, ok := handles.Load((*cFile)(cptr(pFile)).id)
	if !ok {
		panic("vfs: SQLite called a file the VFS does not know")
	}
	return v.(*handle)
}

// rcOf is the SQLite result code for err from an operation whose I/O error
// code is ioerr: SQLITE_FULL when err wraps ErrNoSpace (a sync never
// reaches here: xSync).
func rcOf(err error, ioerr int32) int32 {
	switch {
	case err == nil:
		return sqlite3.SQLITE_OK
	case errors.Is(err, ErrNoSpace):
		return sqlite3.SQLITE_FULL
	default:
		return ioerr
	}
}

// rc is rcOf for an operation of h, remembering a failure for LastError.
func (h *handle) rc(err error, ioerr int32) int32 {
	if err != nil {
		h.reg.noteErr(err)
	}
	return rcOf(err, ioerr)
}

func xClose(tls *libc.TLS, pFile uintptr) int32 {
	cf := (*cFile)(cptr(pFile))
	h := fileOf(pFile)
	handles.Delete(cf.id)
	cf.id = 0
	h.lk.close(tls)
	err := h.f.Close()
	if h.flags&OpenDeleteOnClose != 0 && h.name != "" {
		_ = h.reg.fs.Delete(h.name) // best effort, as in the unix VFS
	}
	rc := h.rc(err, sqlite3.SQLITE_IOERR_CLOSE)
	h.reg.fileClosed(tls)
	return rc
}

func xRead(tls *libc.TLS, pFile uintptr, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	buf := cbytes(zBuf, iAmt)
	h := fileOf(pFile)
	h.point()
	n, err := h.f.ReadAt(buf, iOfst)
	if n == len(buf) {
		return sqlite3.SQLITE_OK
	}
	if err == nil || errors.Is(err, io.EOF) {
		clear(buf[n:]) // SQLite requires short reads zero-filled
		return sqlite3.SQLITE_IOERR_SHORT_READ
	}
	return h.rc(err, sqlite3.SQLITE_IOERR_READ)
}

func xWrite(tls *libc.TLS, pFile uintptr, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	buf := cbytes(zBuf, iAmt)
	h := fileOf(pFile)
	h.point()
	n, err := h.f.WriteAt(buf, iOfst)
	if err == nil && n != len(buf) {
		return sqlite3.SQLITE_IOERR_WRITE
	}
	return h.rc(err, sqlite3.SQLITE_IOERR_WRITE)
}

func xTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	h := fileOf(pFile)
	h.point()
	return h.rc(h.f.Truncate(size), sqlite3.SQLITE_IOERR_TRUNCATE)
}

// xSync reports a failed sync as SQLITE_IOERR_FSYNC whatever its cause,
// never as SQLITE_FULL: ENOSPC or EDQUOT from a sync report writes the
// kernel had taken and then could not store (a file system that allocates
// at write-back: NFS, thin provisioning), lost as after EIO. As
// SQLITE_FULL, SQLite and the engine would carry on as if only the
// transaction that synced had failed.
//
// The first sync of a WAL or journal that SQLite opened to create also syncs
// its directory, when the FS is a DirSyncer, so that the file is found after
// a power loss, as SQLite's unix VFS does (UNIXFILE_DIRSYNC). Unlike the
// unix VFS, a failure of that sync is reported, as SQLITE_IOERR_DIR_FSYNC,
// and it is tried again at the next sync.
func xSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	h := fileOf(pFile)
	h.point()
	if err := h.f.Sync(); err != nil {
		h.reg.noteErr(err)
		return sqlite3.SQLITE_IOERR_FSYNC
	}
	if h.dirSync != nil {
		if err := h.dirSync.SyncDir(h.name); err != nil {
			h.reg.noteErr(err)
			return sqlite3.SQLITE_IOERR_DIR_FSYNC
		}
		h.dirSync = nil
	}
	return sqlite3.SQLITE_OK
}

func xFileSize(tls *libc.TLS, pFile uintptr, pSize uintptr) int32 {
	h := fileOf(pFile)
	size, err := h.f.Size()
	if err != nil {
		return h.rc(err, sqlite3.SQLITE_IOERR_FSTAT)
	}
	*(*int64)(cptr(pSize)) = size
	return sqlite3.SQLITE_OK
}

func xLock(tls *libc.TLS, pFile uintptr, level int32) int32 {
	h := fileOf(pFile)
	h.point()
	return h.lk.lock(level)
}

func xUnlock(tls *libc.TLS, pFile uintptr, level int32) int32 {
	h := fileOf(pFile)
	h.point()
	return h.lk.unlock(level)
}

func xCheckReservedLock(tls *libc.TLS, pFile uintptr, pResOut uintptr) int32 {
	held, rc := fileOf(pFile).lk.checkReserved()
	*(*int32)(cptr(pResOut)) = libc.Bool32(held)
	return rc
}

// xFileControl knows one file control, SQLITE_FCNTL_PERSIST_WAL, as the
// unix VFS does: a connection that closes last keeps the WAL file instead
// of deleting it (an argument of -1 asks, 0 and 1 set). SQLite treats
// SQLITE_NOTFOUND, the answer to every other, as "this VFS does not do
// that".
func xFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	if op != sqlite3.SQLITE_FCNTL_PERSIST_WAL {
		return sqlite3.SQLITE_NOTFOUND
	}
	h := fileOf(pFile)
	arg := (*int32)(cptr(pArg))
	if *arg < 0 {
		*arg = libc.Bool32(h.persistWAL)
	} else {
		h.persistWAL = *arg != 0
	}
	return sqlite3.SQLITE_OK
}

func xSectorSize(tls *libc.TLS, pFile uintptr) int32 { return sectorSize }

func xDeviceCharacteristics(tls *libc.TLS, pFile uintptr) int32 { return deviceCharacteristics }

func xShmMap(tls *libc.TLS, pFile uintptr, iPg int32, pgsz int32, bExtend int32, pp uintptr) int32 {
	p, rc := fileOf(pFile).lk.shmMap(tls, iPg, pgsz, bExtend != 0)
	*(*uintptr)(cptr(pp)) = p
	return rc
}

func xShmLock(tls *libc.TLS, pFile uintptr, offset int32, n int32, flags int32) int32 {
	h := fileOf(pFile)
	h.point()
	return h.lk.shmLock(offset, n, flags)
}

func xShmBarrier(tls *libc.TLS, pFile uintptr) {
	fileOf(pFile).lk.shmBarrier()
}

func xShmUnmap(tls *libc.TLS, pFile uintptr, deleteFlag int32) int32 {
	return fileOf(pFile).lk.shmUnmap(tls)
}
