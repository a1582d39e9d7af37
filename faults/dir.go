package faults

import (
	"fmt"
	"path"
	"slices"
)

// The directory entries of a MemFS. As on Linux (fsync(2)), creating or
// deleting a file changes its directory in the page cache only: the change
// is durable once the directory is synced (SyncDir), and a file's own Sync
// does not make its entry durable. A power loss keeps, per name, a prefix
// of the changes made to it since its directory was last synced: all of
// them (LossKeep), none (LossDrop: a file created since is gone, a file
// deleted since is back with its durable bytes), or a seeded number of them
// (LossTear), each name on its own.

// dirChange is the state a name took in a change to its directory: the
// inode created under it, or nil when it was deleted.
type dirChange struct{ ino *inode }

// setEntry points name at ino (nil deletes it) and remembers the change
// until name's directory is synced. Called with m.mu held.
func (m *MemFS) setEntry(name string, ino *inode) {
	if _, ok := m.dirPending[name]; !ok {
		m.dirDurable[name] = dirChange{m.files[name]}
	}
	m.dirPending[name] = append(m.dirPending[name], dirChange{ino})
	if ino == nil {
		delete(m.files, name)
	} else {
		m.files[name] = ino
	}
}

// SyncDir makes durable every creation and deletion so far in the directory
// that holds name (its path.Dir), as fsync of a directory does on Linux. It
// is the view's vfs.DirSyncer: SQLite's VFS calls it at the first sync of a
// WAL or journal it opened to create. It returns an error wrapping
// ErrPowerLost when the power is cut during this call (nothing more becomes
// durable), ErrInjected for an injected failure (OpSyncDir), and
// ErrPowerLost or ErrCrashed when the view is dead.
//
// A failed directory sync behaves as Linux's fsync of a directory that
// returns EIO: nothing it was to make durable becomes so, and a power loss
// may still take a file created since the last sync away, or bring a
// deleted one back. Unlike a file's failed sync (fsyncgate), it loses
// nothing for good: the directory stays dirty, and the next SyncDir of it
// that succeeds, through any view, makes its changes durable.
func (p *ProcessFS) SyncDir(name string) error {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := p.alive(); err != nil {
		return fmt.Errorf("sync directory of %q: %w", name, err)
	}
	m.evictTick()
	m.stats.DirSyncs++
	if m.cutDue() {
		return fmt.Errorf("sync directory of %q: %w", name, m.cut())
	}
	dir := path.Dir(name)
	if err := m.injected(OpSyncDir, p.pid); err != nil {
		for n := range m.dirPending {
			if path.Dir(n) == dir {
				m.dirFailed[n] = true
			}
		}
		return fmt.Errorf("sync directory of %q: %w", name, err)
	}
	for n := range m.dirPending {
		if path.Dir(n) == dir {
			delete(m.dirPending, n)
			delete(m.dirDurable, n)
			delete(m.dirFailed, n)
		}
	}
	return nil
}

// settleDirs gives each name changed since its directory's last sync the
// state a power loss with mode leaves it in, and returns the files the disk
// then holds. Called with m.mu held.
func (m *MemFS) settleDirs(mode LossMode) map[string]*inode {
	names := make([]string, 0, len(m.dirPending))
	for name := range m.dirPending {
		names = append(names, name)
	}
	slices.Sort(names)
	files := m.files
	for _, name := range names {
		changes := m.dirPending[name]
		kept := 0 // LossDrop
		switch mode {
		case LossKeep:
			kept = len(changes)
		case LossTear:
			kept = m.tearRNG.IntN(len(changes) + 1)
		}
		ino := m.dirDurable[name].ino
		if kept > 0 {
			ino = changes[kept-1].ino
		}
		if ino == nil {
			delete(files, name)
		} else {
			files[name] = ino
		}
	}
	clear(m.dirPending)
	clear(m.dirDurable)
	clear(m.dirFailed)
	return files
}
