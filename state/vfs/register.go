package vfs

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxPathname is the longest name (in bytes, without its NUL) the VFS takes.
const maxPathname = 4096

// julianUnixEpochMillis is the Unix epoch as milliseconds since the Julian
// day epoch, the unit of xCurrentTimeInt64.
const julianUnixEpochMillis = 210866760000000

// registration is one FS registered with SQLite.
type registration struct {
	id    uintptr
	name  string
	fs    FS
	locks *LockManager
	cvfs  uintptr // the sqlite3_vfs, C memory
	cname uintptr // its zName, C memory
	anon  atomic.Uint64

	mu           sync.Mutex
	lastErr      error // the latest error the FS returned, for LastError
	open         int   // files open through the registration
	unregistered bool  // unregister ran; free the C memory at open == 0
	freed        bool
}

var (
	// registrations maps a sqlite3_vfs pAppData to its *registration.
	registrations sync.Map
	// lastID numbers registrations and open files; 0 is never used.
	lastID atomic.Uintptr
)

func nextID() uintptr { return lastID.Add(1) }

// Register makes fs available to SQLite as a VFS and returns the VFS's name,
// to be given as the vfs parameter of a DSN ("file:db?vfs=" + name), and the
// function that unregisters it. Each call registers a new VFS. Locks and
// shared memory go to the LockManager of fs when it implements LockSharer,
// else to a manager of this registration's own.
//
// Call unregister after closing every database opened through the VFS: it
// removes the VFS from SQLite's list at once and frees its memory when the
// last file open through it closes. Calling it again does nothing.
//
// Register returns an error wrapping ErrRegister when fs is nil, memory is
// short, or SQLite refuses the registration.
func Register(fsys FS) (name string, unregister func(), err error) {
	if fsys == nil {
		return "", nil, fmt.Errorf("register nil FS: %w", ErrRegister)
	}
	ioMethodsOnce.Do(initMethods)
	if ioMethods == 0 {
		return "", nil, fmt.Errorf("allocate io methods: %w", ErrRegister)
	}
	r := &registration{id: nextID(), fs: fsys}
	r.name = fmt.Sprintf("statekit-%d", r.id)
	if ls, ok := fsys.(LockSharer); ok && ls.LockManager() != nil {
		r.locks = ls.LockManager()
	} else {
		r.locks = NewLockManager()
	}

	tls := libc.NewTLS()
	defer tls.Close()
	if r.cname, err = libc.CString(r.name); err != nil {
		return "", nil, fmt.Errorf("vfs name: %w: %w", ErrRegister, err)
	}
	r.cvfs = libc.Xcalloc(tls, 1, libc.Tsize_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	if r.cvfs == 0 {
		libc.Xfree(tls, r.cname)
		return "", nil, fmt.Errorf("allocate vfs: %w", ErrRegister)
	}
	v := (*sqlite3.Tsqlite3_vfs)(cptr(r.cvfs))
	v.FiVersion = 2 // xCurrentTimeInt64
	v.FszOsFile = int32(unsafe.Sizeof(cFile{}))
	v.FmxPathname = maxPathname
	v.FzName = r.cname
	v.FpAppData = r.id
	setFunc(&v.FxOpen, xOpen)
	setFunc(&v.FxDelete, xDelete)
	setFunc(&v.FxAccess, xAccess)
	setFunc(&v.FxFullPathname, xFullPathname)
	setFunc(&v.FxDlOpen, xDlOpen)
	setFunc(&v.FxDlError, xDlError)
	setFunc(&v.FxDlSym, xDlSym)
	setFunc(&v.FxDlClose, xDlClose)
	setFunc(&v.FxRandomness, xRandomness)
	setFunc(&v.FxSleep, xSleep)
	setFunc(&v.FxCurrentTime, xCurrentTime)
	setFunc(&v.FxGetLastError, xGetLastError)
	setFunc(&v.FxCurrentTimeInt64, xCurrentTimeInt64)

	registrations.Store(r.id, r)
	if rc := sqlite3.Xsqlite3_vfs_register(tls, r.cvfs, 0); rc != sqlite3.SQLITE_OK {
		registrations.Delete(r.id)
		libc.Xfree(tls, r.cvfs)
		libc.Xfree(tls, r.cname)
		return "", nil, fmt.Errorf("sqlite3_vfs_register %s: rc %d: %w", r.name, rc, ErrRegister)
	}
	return r.name, sync.OnceFunc(r.unregister), nil
}

// noteErr remembers err as the latest error the FS returned.
func (r *registration) noteErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
}

// LastError returns the latest error the FS registered as name returned to
// SQLite, and forgets it; nil if there was none since the last call. SQLite
// reports only a result code (SQLITE_IOERR_FSYNC, ...): this is how the
// engine wraps the cause, such as an injected fault or a dead disk.
func LastError(name string) error {
	var err error
	registrations.Range(func(_, v any) bool {
		r := v.(*registration)
		if r.name != name {
			return true
		}
		r.mu.Lock()
		err, r.lastErr = r.lastErr, nil
		r.mu.Unlock()
		return false
	})
	return err
}

// unregister takes the VFS off SQLite's list and frees it once no file is
// open through it.
func (r *registration) unregister() {
	tls := libc.NewTLS()
	defer tls.Close()
	sqlite3.Xsqlite3_vfs_unregister(tls, r.cvfs)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unregistered = true
	r.freeIfIdle(tls)
}

// fileOpened and fileClosed count the files open through r.
func (r *registration) fileOpened() {
	r.mu.Lock()
	r.open++
	r.mu.Unlock()
}

func (r *registration) fileClosed(tls *libc.TLS) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open--
	r.freeIfIdle(tls)
}

// freeIfIdle frees r's C memory once it is unregistered and unused. Called
// with r.mu held.
func (r *registration) freeIfIdle(tls *libc.TLS) {
	if !r.unregistered || r.open > 0 || r.freed {
		return
	}
	r.freed = true
	registrations.Delete(r.id)
	libc.Xfree(tls, r.cvfs)
	libc.Xfree(tls, r.cname)
}

// regOf returns the registration of the sqlite3_vfs at pVfs.
func regOf(pVfs uintptr) *registration {
	v, ok := registrations.Load((*sqlite3.Tsqlite3_vfs)(cptr(pVfs)).FpAppData)
	if !ok {
		panic("vfs: SQLite called a VFS that is not registered")
	}
	return v.(*registration)
}

func xOpen(tls *libc.TLS, pVfs uintptr, zName uintptr, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	cf := (*cFile)(cptr(pFile))
	cf.base.FpMethods = 0 // on failure SQLite must not call xClose
	cf.id = 0
	r := regOf(pVfs)
	name := cstring(zName)
	of := OpenFlag(uint32(flags)) & openKnown
	f, err := r.fs.Open(name, of)
	if err != nil {
		return sqlite3.SQLITE_CANTOPEN
	}
	key := name
	if name == "" {
		// anonymous files share no locks with anything
		key = fmt.Sprintf("\x00anonymous-%d", r.anon.Add(1))
	}
	h := &handle{reg: r, f: f, name: name, flags: of}
	h.y, _ = r.fs.(Yielder)
	if ds, ok := r.fs.(DirSyncer); ok && name != "" && of&OpenCreate != 0 && of&(OpenWAL|OpenMainJournal|OpenSuperJournal) != 0 {
		h.dirSync = ds
	}
	h.lk = r.locks.open(key, f)
	if mf, ok := f.(Mortal); ok && mf.Dead() {
		r.locks.Release(f) // it died while opening: it must hold no lock
	}
	id := nextID()
	handles.Store(id, h)
	r.fileOpened()
	if pOutFlags != 0 {
		*(*int32)(cptr(pOutFlags)) = flags
	}
	cf.id = id
	cf.base.FpMethods = ioMethods
	return sqlite3.SQLITE_OK
}

// xDelete deletes a file and, when SQLite asks (syncDir) and the FS is a
// DirSyncer, syncs its directory so the deletion is durable, as the unix VFS
// does.
func xDelete(tls *libc.TLS, pVfs uintptr, zName uintptr, syncDir int32) int32 {
	r := regOf(pVfs)
	name := cstring(zName)
	err := r.fs.Delete(name)
	if errors.Is(err, fs.ErrNotExist) {
		return sqlite3.SQLITE_IOERR_DELETE_NOENT
	}
	if err != nil {
		return rcOf(err, sqlite3.SQLITE_IOERR_DELETE)
	}
	if ds, ok := r.fs.(DirSyncer); ok && syncDir&1 != 0 {
		if err := ds.SyncDir(name); err != nil {
			r.noteErr(err)
			return sqlite3.SQLITE_IOERR_DIR_FSYNC
		}
	}
	return sqlite3.SQLITE_OK
}

func xAccess(tls *libc.TLS, pVfs uintptr, zName uintptr, flags int32, pResOut uintptr) int32 {
	ok, err := regOf(pVfs).fs.Exists(cstring(zName))
	if err != nil {
		return sqlite3.SQLITE_IOERR_ACCESS
	}
	*(*int32)(cptr(pResOut)) = libc.Bool32(ok)
	return sqlite3.SQLITE_OK
}

func xFullPathname(tls *libc.TLS, pVfs uintptr, zName uintptr, nOut int32, zOut uintptr) int32 {
	name := cstring(zName)
	if fp, ok := regOf(pVfs).fs.(FullPather); ok {
		var err error
		if name, err = fp.FullPath(name); err != nil {
			return sqlite3.SQLITE_CANTOPEN
		}
	}
	out := cbytes(zOut, nOut)
	if len(name) >= len(out) {
		return sqlite3.SQLITE_CANTOPEN
	}
	copy(out, name)
	out[len(name)] = 0
	return sqlite3.SQLITE_OK
}

// The VFS loads no extensions.

func xDlOpen(tls *libc.TLS, pVfs uintptr, zFilename uintptr) uintptr { return 0 }

func xDlError(tls *libc.TLS, pVfs uintptr, nByte int32, zErrMsg uintptr) {
	out := cbytes(zErrMsg, nByte)
	if len(out) == 0 {
		return
	}
	n := copy(out[:len(out)-1], "loadable extensions are not supported")
	out[n] = 0
}

func xDlSym(tls *libc.TLS, pVfs uintptr, pHandle uintptr, zSymbol uintptr) uintptr { return 0 }

func xDlClose(tls *libc.TLS, pVfs uintptr, pHandle uintptr) {}

func xRandomness(tls *libc.TLS, pVfs uintptr, nByte int32, zOut uintptr) int32 {
	out := cbytes(zOut, nByte)
	if e, ok := regOf(pVfs).fs.(Entropy); ok {
		e.Entropy(out)
	} else {
		_, _ = crand.Read(out) // never fails (crypto/rand panics instead)
	}
	return nByte
}

func xSleep(tls *libc.TLS, pVfs uintptr, microseconds int32) int32 {
	d := time.Duration(microseconds) * time.Microsecond
	if s, ok := regOf(pVfs).fs.(Sleeper); ok {
		s.Sleep(d)
	} else {
		time.Sleep(d)
	}
	return microseconds
}

// now is the current time of the registration's FS.
func now(pVfs uintptr) time.Time {
	if ts, ok := regOf(pVfs).fs.(TimeSource); ok {
		return ts.CurrentTime()
	}
	return time.Now()
}

func xCurrentTime(tls *libc.TLS, pVfs uintptr, pTimeOut uintptr) int32 {
	ms := now(pVfs).UnixMilli() + julianUnixEpochMillis
	*(*float64)(cptr(pTimeOut)) = float64(ms) / 86400000.0
	return sqlite3.SQLITE_OK
}

func xCurrentTimeInt64(tls *libc.TLS, pVfs uintptr, pTimeOut uintptr) int32 {
	*(*int64)(cptr(pTimeOut)) = now(pVfs).UnixMilli() + julianUnixEpochMillis
	return sqlite3.SQLITE_OK
}

func xGetLastError(tls *libc.TLS, pVfs uintptr, nByte int32, zOut uintptr) int32 { return 0 }
