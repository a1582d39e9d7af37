package state

import "github.com/statekit/statekit/state/vfs"

// The engine's own file calls in a simulation. SQLite's reads, writes,
// syncs and truncates through a vfs.FS are scheduling points when the FS
// is a vfs.Yielder (state/vfs), so a simulator runs other goroutines and
// processes between them. The engine also calls files of the same FS
// itself: it syncs the WAL after a grant and the database file after a
// checkpoint pass on descriptors of its own, and the repair after a failed
// sync and the check for writes the failure took back read and write the
// WAL and the file. yielding makes those calls scheduling points too, so
// that the simulator interleaves them with everything else as it does
// SQLite's; without it another process could not run between two of them.

// yieldFile is a file whose reads, writes, truncates and syncs yield
// first.
type yieldFile struct {
	vfs.File
	y vfs.Yielder
}

func (f yieldFile) ReadAt(p []byte, off int64) (int, error) {
	f.y.Yield()
	return f.File.ReadAt(p, off)
}

func (f yieldFile) WriteAt(p []byte, off int64) (int, error) {
	f.y.Yield()
	return f.File.WriteAt(p, off)
}

func (f yieldFile) Truncate(size int64) error {
	f.y.Yield()
	return f.File.Truncate(size)
}

func (f yieldFile) Sync() error {
	f.y.Yield()
	return f.File.Sync()
}

// yieldPastCache is a yieldFile of a file that writes past the page cache
// too (vfs.PastCache).
type yieldPastCache struct {
	yieldFile
	pc vfs.PastCache
}

func (f yieldPastCache) WriteThrough(p []byte, off int64) error {
	f.y.Yield()
	return f.pc.WriteThrough(p, off)
}

func (f yieldPastCache) Unwritten() bool { return f.pc.Unwritten() }

// yielding returns f, a file of fsys, with its calls made scheduling points
// when fsys is a vfs.Yielder; otherwise f itself.
func yielding(fsys vfs.FS, f vfs.File) vfs.File {
	y, ok := fsys.(vfs.Yielder)
	if !ok || f == nil {
		return f
	}
	if pc, ok := f.(vfs.PastCache); ok {
		return yieldPastCache{yieldFile{f, y}, pc}
	}
	return yieldFile{f, y}
}
