package faults

import "slices"

// Failed-sync pages reclaimed one at a time (SetEvictFailedSyncs). When a
// sync fails, Linux (ext4) leaves the pages it was to write in the page
// cache, marked clean: reads see them until the kernel reclaims them, page
// by page, at any later moment, after which a read sees what the disk has.
// MemFS keeps the pages of each failed sync in its inode's failed list and
// evicts them at seeded moments that its own calls drive: every call that
// reaches the disk through a live view or file (ReadAt, WriteAt,
// WriteThrough, Truncate, Sync and Size of a file; Open, Delete, Exists and
// SyncDir of a view) first evicts, with probability evictChance, one page
// drawn from all the failed pages of the machine. Closing the last
// descriptor of a file (a crash closes its process's) evicts what is left
// of its failed pages, and a power loss forgets them with the rest of the
// page cache.

// evictChance is the probability that a call evicts a failed page, when
// there is one: a failure's pages go over some tens of calls, so that a
// repair after the failure may read some of them back and miss others.
const evictChance = 1.0 / 16

// evictPage is the unit of eviction: a page of the page cache.
const evictPage = fsPage

// failedPage is a page of an inode that a failed sync left in the page
// cache: page index (bytes [page*evictPage, (page+1)*evictPage)), and the
// process and the name of the file whose Sync failed, for SetOnDroppedSync.
type failedPage struct {
	page int64
	pid  int
	name string
}

// markFailed adds to ino's failed pages those its pending writes touch,
// within the file's size, as the Sync of name by process pid failed:
// pages failed already keep their first failure. Called with m.mu held,
// before the pending writes are forgotten.
func (m *MemFS) markFailed(ino *inode, pid int, name string) {
	size := int64(len(ino.data))
	had := len(ino.failed)
	for _, mu := range ino.pending {
		if mu.truncate || len(mu.data) == 0 {
			continue
		}
		end := min(mu.off+int64(len(mu.data)), size)
		for pg := mu.off / evictPage; pg*evictPage < end; pg++ {
			i, found := slices.BinarySearchFunc(ino.failed, pg, func(f failedPage, pg int64) int { return cmpInt(f.page, pg) })
			if !found {
				ino.failed = slices.Insert(ino.failed, i, failedPage{pg, pid, name})
			}
		}
	}
	if had == 0 && len(ino.failed) > 0 {
		m.evicting = append(m.evicting, ino)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rewritten forgets the failed pages that a write of [off, end) touches:
// the write dirties them, and their content is ordinary unsynced data from
// now on.
func (ino *inode) rewritten(off, end int64) {
	if len(ino.failed) == 0 || end <= off {
		return
	}
	first, last := off/evictPage, (end-1)/evictPage
	ino.failed = slices.DeleteFunc(ino.failed, func(f failedPage) bool { return f.page >= first && f.page <= last })
}

// cutFailed forgets the failed pages a truncate to size cuts, whole or in
// part (the kernel zeroes and dirties the part of a page it keeps).
func (ino *inode) cutFailed(size int64) {
	if len(ino.failed) == 0 {
		return
	}
	first := size / evictPage
	ino.failed = slices.DeleteFunc(ino.failed, func(f failedPage) bool { return f.page >= first })
}

// evictTick is the moment a call gives the kernel to reclaim a failed
// page: with probability evictChance it evicts one, drawn from every
// failed page of the machine. It draws nothing while there is none. Called
// with m.mu held.
func (m *MemFS) evictTick() {
	if !m.plan.evictSync {
		return
	}
	m.pruneEvicting()
	if len(m.evicting) == 0 {
		return
	}
	if m.evictRNG.Float64() >= evictChance {
		return
	}
	n := 0
	for _, ino := range m.evicting {
		n += len(ino.failed)
	}
	k := m.evictRNG.IntN(n)
	for _, ino := range m.evicting {
		if k < len(ino.failed) {
			m.evict(ino, k)
			break
		}
		k -= len(ino.failed)
	}
	m.pruneEvicting()
}

// pruneEvicting drops from m.evicting the inodes with no failed page left.
func (m *MemFS) pruneEvicting() {
	m.evicting = slices.DeleteFunc(m.evicting, func(ino *inode) bool { return len(ino.failed) == 0 })
}

// evict evicts ino's kth failed page: reads of it see the durable bytes
// from now on, zeros where nothing durable is, and the file's size stays.
// It tells SetOnDroppedSync's function, unless no name leads to the inode
// any more and no descriptor has it open: no one can read it again.
func (m *MemFS) evict(ino *inode, k int) {
	f := ino.failed[k]
	ino.failed = slices.Delete(ino.failed, k, k+1)
	start := f.page * evictPage
	end := min(start+evictPage, int64(len(ino.data)))
	for i := start; i < end; i++ {
		if i < int64(len(ino.durable)) {
			ino.data[i] = ino.durable[i]
		} else {
			ino.data[i] = 0
		}
	}
	if !m.reachable(ino) {
		return
	}
	m.stats.EvictedPages++
	if m.onDrop != nil {
		m.onDrop(f.pid, f.name)
	}
}

// reachable reports whether a name leads to ino or a descriptor has it
// open.
func (m *MemFS) reachable(ino *inode) bool {
	for _, f := range m.open {
		if f.ino == ino {
			return true
		}
	}
	for _, other := range m.files {
		if other == ino {
			return true
		}
	}
	return false
}

// evictIfUnopened evicts every failed page of ino, in page order, when no
// descriptor has it open any more. Called with m.mu held, after a close.
func (m *MemFS) evictIfUnopened(ino *inode) {
	if len(ino.failed) == 0 {
		return
	}
	for _, f := range m.open {
		if f.ino == ino {
			return
		}
	}
	for len(ino.failed) > 0 {
		m.evict(ino, 0)
	}
	m.pruneEvicting()
}

// forgetFailed forgets every failed page, as a power loss empties the page
// cache. Called with m.mu held.
func (m *MemFS) forgetFailed() {
	for _, ino := range m.evicting {
		ino.failed = nil
	}
	m.evicting = nil
}

// EvictFailedPages evicts, now, every page that failed syncs left in the
// page cache, of every file, as the kernel may reclaim them at any moment:
// reads see what the disk holds from then on. Tests use it to put a loss
// exactly where they want it. Only with SetEvictFailedSyncs on does a
// failed sync leave pages to evict.
func (m *MemFS) EvictFailedPages() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ino := range m.evicting {
		for len(ino.failed) > 0 {
			m.evict(ino, 0)
		}
	}
	m.pruneEvicting()
}
