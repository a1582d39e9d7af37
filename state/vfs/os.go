package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// osLocks is the lock manager of every OS FS in this process: the process's
// connections to one file through OS() exclude each other.
var osLocks = NewLockManager()

// osFS is the FS of the host's real files.
type osFS struct{}

// OS returns an FS of the host's real files: names are paths, made absolute
// by FullPath; files are created with mode 0600; Sync is fsync; SyncDir
// fsyncs the directory, which SQLite's VFS does at the first sync of a WAL
// or journal it created, as the unix VFS does. It lets the engine's Go-VFS
// path run on a real disk.
//
// Its locks and WAL shared memory live in one LockManager per process, so
// connections of one process exclude each other, but OS does NOT lock across
// OS processes: two processes opening one database through it corrupt it. Use
// SQLite's native VFS (no WithFS) for that.
func OS() FS { return osFS{} }

var (
	_ FS         = osFS{}
	_ FullPather = osFS{}
	_ LockSharer = osFS{}
	_ DirSyncer  = osFS{}
	_ File       = (*osFile)(nil)
)

// LockManager returns the process-wide manager of OS files.
func (osFS) LockManager() *LockManager { return osLocks }

// FullPath returns the absolute, cleaned form of name. It returns the error
// of filepath.Abs when the working directory is unknown.
func (osFS) FullPath(name string) (string, error) {
	p, err := filepath.Abs(name)
	if err != nil {
		return "", fmt.Errorf("full path %q: %w", name, err)
	}
	return p, nil
}

// Open opens or creates the file at path name (mode 0600). An empty name
// makes a temporary file in os.TempDir that is removed when closed. Errors
// wrap fs.ErrNotExist or fs.ErrExist as FS.Open documents, or the OS error.
func (osFS) Open(name string, flags OpenFlag) (File, error) {
	mode := os.O_RDONLY
	if flags&OpenReadWrite != 0 {
		mode = os.O_RDWR
	}
	if flags&OpenCreate != 0 {
		mode |= os.O_CREATE
		if flags&OpenExclusive != 0 {
			mode |= os.O_EXCL
		}
	}
	if name == "" {
		f, err := os.CreateTemp("", "statekit-tmp-*")
		if err != nil {
			return nil, fmt.Errorf("open temporary file: %w", err)
		}
		return &osFile{f: f, removeOnClose: true}, nil
	}
	f, err := os.OpenFile(name, mode, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return &osFile{f: f}, nil
}

// Delete removes the file at path name. The error wraps fs.ErrNotExist when
// there is none.
func (osFS) Delete(name string) error {
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// Exists reports whether a file is at path name. It returns an error only
// when the OS cannot tell.
func (osFS) Exists(name string) (bool, error) {
	_, err := os.Stat(name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("exists: %w", err)
	}
}

// SyncDir fsyncs the directory that holds the file at path name, so that
// the file's creation or deletion survives a power loss. As SQLite's unix
// VFS does, it returns nil when the directory cannot be opened (one the
// process may not read), and when the file system cannot sync a directory
// (EINVAL); any other failure of the fsync is returned.
func (osFS) SyncDir(name string) error {
	dir, err := os.Open(filepath.Dir(name))
	if err != nil {
		return nil
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// osFile is an open host file.
type osFile struct {
	f             *os.File
	removeOnClose bool
}

// ReadAt reads at off, returning io.EOF when the file ends first.
func (o *osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

// WriteAt writes at off; a full disk, a spent quota or a file at its size
// limit gives an error wrapping ErrNoSpace.
func (o *osFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := o.f.WriteAt(p, off)
	return n, osErr(err)
}

// Truncate sets the size; a full disk, a spent quota or a size past the
// file size limit gives an error wrapping ErrNoSpace.
func (o *osFile) Truncate(size int64) error { return osErr(o.f.Truncate(size)) }

// Sync calls fsync. Its error never wraps ErrNoSpace: ENOSPC or EDQUOT from
// fsync report writes already lost (File.Sync).
func (o *osFile) Sync() error { return o.f.Sync() }

// Size returns the file's size from fstat.
func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Close closes the file, removing it if it was temporary.
func (o *osFile) Close() error {
	err := o.f.Close()
	if o.removeOnClose {
		if rerr := os.Remove(o.f.Name()); err == nil {
			err = rerr
		}
	}
	return err
}

// osErr marks the errors of a write or truncate that found no room with
// ErrNoSpace: the disk is full (ENOSPC), the user's quota is spent
// (EDQUOT), or the file would pass the largest size it may have (EFBIG:
// the process's RLIMIT_FSIZE or the file system's largest file). Each
// way the kernel refused the write, or wrote only what fit, and lost
// nothing it had taken.
func osErr(err error) error {
	if err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
