// Package vfs is statekit's filesystem seam: the FS and File interfaces the
// engine writes its SQLite file through, and a SQLite VFS, written in Go, that
// serves any FS to modernc.org/sqlite.
//
// Register makes an FS available to SQLite under a fresh VFS name; a database
// opened with the DSN "file:<path>?vfs=<name>" then does all its I/O through
// the FS: the database file, its -wal and any journal. Locks (NONE..EXCLUSIVE
// per file) and the WAL shared memory (the 8 shm lock slots and the shm
// regions) are not files: they live in a LockManager, shared by every
// connection of one machine. An FS that stands for one process of a simulated
// machine shares its machine's manager by implementing LockSharer.
//
// Optional interfaces let an FS supply what SQLite otherwise takes from the
// host: Entropy (xRandomness), TimeSource (xCurrentTime), Sleeper (xSleep),
// FullPather (xFullPathname) and LockSharer. A simulated FS implements all of
// them, so that nothing in a simulated run reads the real clock or sleeps.
//
// The glue depends on the generated types of modernc.org/sqlite/lib
// (Tsqlite3_vfs, Tsqlite3_io_methods, Tsqlite3_file): it was written for
// modernc.org/sqlite v1.62.0, which go.mod pins.
package vfs

import "time"

// FS is a filesystem SQLite can run on: the files of one process's view of a
// machine. Names are the strings SQLite passes (the database path as the
// FullPather made it, with "-wal" or "-journal" appended); the FS gives them
// their meaning. Every method may be called from several goroutines at once.
type FS interface {
	// Open opens the named file with the given flags. An empty name asks for
	// an anonymous temporary file that no other Open can see and that
	// vanishes once closed. Open returns an error wrapping fs.ErrNotExist
	// when the file is missing and flags lack OpenCreate, and one wrapping
	// fs.ErrExist when OpenCreate|OpenExclusive find it present.
	Open(name string, flags OpenFlag) (File, error)
	// Delete removes the named file. It returns an error wrapping
	// fs.ErrNotExist when there is no such file.
	Delete(name string) error
	// Exists reports whether the named file exists.
	Exists(name string) (bool, error)
}

// File is an open file of an FS. SQLite calls a File from one goroutine at a
// time, but different Files of one FS concurrently.
type File interface {
	// ReadAt reads len(p) bytes at off. Like io.ReaderAt, it returns
	// n < len(p) with io.EOF when the file ends first.
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off, growing the file as needed. It returns an error
	// wrapping ErrNoSpace when the disk is full.
	WriteAt(p []byte, off int64) (int, error)
	// Truncate sets the file's size.
	Truncate(size int64) error
	// Sync makes everything written so far durable: it survives a power loss.
	// SQLite is told of any failure as an I/O error, never as a full disk,
	// even for an error wrapping ErrNoSpace: a sync that fails may have
	// lost writes it had accepted.
	Sync() error
	// Size returns the file's size in bytes.
	Size() (int64, error)
	// Close releases the file. Calls after Close fail.
	Close() error
}

// PastCache is what a File may offer besides, for the repair after a
// failed sync (state/walrepair.go): a write past the page cache, and
// whether any of its blocks is marked unwritten. On ext4 a range whose
// write-back failed keeps its blocks marked unwritten through later writes
// and syncs, and only a write past the cache (O_DIRECT) marks them written;
// faults.MemFS models that (SetKeepUnwritten). The engine's native files
// do it themselves; a File without it is written through the cache.
type PastCache interface {
	// WriteThrough writes p at off past the page cache: all of it, or
	// nothing and an error.
	WriteThrough(p []byte, off int64) error
	// Unwritten reports whether any block of the file is marked unwritten.
	Unwritten() bool
}

// OpenFlag tells FS.Open how to open a file and which kind of file SQLite
// wants. Its values are SQLite's own SQLITE_OPEN_* bits.
type OpenFlag uint32

// The OpenFlag bits. Exactly one of OpenReadOnly and OpenReadWrite is set; at
// most one of the kind bits (OpenMainDB..OpenWAL) is.
const (
	OpenReadOnly      OpenFlag = 0x00000001 // no writes through this handle
	OpenReadWrite     OpenFlag = 0x00000002 // reads and writes
	OpenCreate        OpenFlag = 0x00000004 // create the file if it is missing
	OpenDeleteOnClose OpenFlag = 0x00000008 // the file goes away when closed
	OpenExclusive     OpenFlag = 0x00000010 // with OpenCreate: fail if it exists
	OpenMainDB        OpenFlag = 0x00000100 // the database file
	OpenTempDB        OpenFlag = 0x00000200 // a temporary database
	OpenTransientDB   OpenFlag = 0x00000400 // a transient database
	OpenMainJournal   OpenFlag = 0x00000800 // a rollback journal
	OpenTempJournal   OpenFlag = 0x00001000 // a temporary journal
	OpenSubjournal    OpenFlag = 0x00002000 // a statement journal
	OpenSuperJournal  OpenFlag = 0x00004000 // a super-journal
	OpenWAL           OpenFlag = 0x00080000 // a write-ahead log

	openKnown = OpenReadOnly | OpenReadWrite | OpenCreate | OpenDeleteOnClose | OpenExclusive |
		OpenMainDB | OpenTempDB | OpenTransientDB | OpenMainJournal | OpenTempJournal |
		OpenSubjournal | OpenSuperJournal | OpenWAL
)

// Entropy is implemented by an FS that supplies SQLite's randomness
// (xRandomness). Without it the VFS reads crypto/rand. SQLite draws from the
// default VFS to seed its process-wide generator, so this only serves callers
// that ask this VFS directly.
type Entropy interface {
	// Entropy fills p with random bytes.
	Entropy(p []byte)
}

// TimeSource is implemented by an FS that supplies SQLite's current time
// (xCurrentTime, xCurrentTimeInt64). Without it the VFS reads the host clock.
type TimeSource interface {
	// CurrentTime returns the time SQLite should take as now.
	CurrentTime() time.Time
}

// Sleeper is implemented by an FS that decides what SQLite's xSleep does. A
// simulated FS must not sleep real time. Without it the VFS calls time.Sleep.
type Sleeper interface {
	// Sleep pauses for d, or pretends to.
	Sleep(d time.Duration)
}

// Yielder is implemented by an FS whose calls are scheduling points of a
// simulation: the VFS calls Yield before each read, write, sync and
// truncate, and each file and shared-memory lock call, so that a simulator
// can run another goroutine, or another process's statement, first. Yield
// is never called with a lock of the VFS held.
type Yielder interface {
	// Yield lets the simulator run something else first.
	Yield()
}

// FullPather is implemented by an FS whose names need canonicalising
// (xFullPathname): two spellings of one file must come out equal, since the
// lock manager keys locks by name. Without it names are used as given.
type FullPather interface {
	// FullPath returns the canonical name of name, or an error when it has
	// none.
	FullPath(name string) (string, error)
}

// Mortal is implemented by a File that can die while open, as the files of a
// crashed simulated process or of a machine that lost power do; the FS then
// releases the file's locks through LockManager.Release. A file can die
// between the FS opening it and the VFS registering it with the lock
// manager, where that Release misses it: the VFS asks Dead once it has
// registered the file and releases it itself.
type Mortal interface {
	// Dead reports whether the file is dead.
	Dead() bool
}

// LockSharer is implemented by an FS that shares its locks and shared memory
// with other FS values: the processes of one machine. Without it, Register
// gives the FS a LockManager of its own, which serves the connections of that
// registration only.
type LockSharer interface {
	// LockManager returns the manager of the machine the FS belongs to.
	LockManager() *LockManager
}

// DirSyncer is implemented by an FS whose file creations and deletions are
// durable only once their directory is synced, as on Linux (fsync(2): a
// file's own fsync does not make its directory entry durable).
type DirSyncer interface {
	// SyncDir makes durable every creation and deletion so far in the
	// directory that holds the named file.
	SyncDir(name string) error
}
