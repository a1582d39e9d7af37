package faults

import (
	"fmt"

	"github.com/statekit/statekit/state/vfs"
)

// Op names a kind of file call that faults can be injected into.
type Op int

// The ops.
const (
	OpRead Op = iota
	OpWrite
	OpSync
	OpTruncate
	// OpSyncDir is a directory sync (ProcessFS.SyncDir): a failed one makes
	// nothing durable, and a later one that succeeds makes durable what it
	// left, as Linux writes a dirty directory again at its next fsync.
	OpSyncDir
	opCount
)

// String returns "read", "write", "sync", "truncate" or "syncdir".
func (op Op) String() string {
	switch op {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	case OpSyncDir:
		return "syncdir"
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// plan is the faults armed on a MemFS.
type plan struct {
	cutIn         int64 // mutating calls until the power cut, the cut at 1; 0: none
	cutMode       LossMode
	failIn        [opCount]int64 // calls of op until one fails, it at 1; 0: none
	failRate      [opCount]float64
	budget        int64 // bytes writes may still add; < 0: unlimited
	syncNoop      bool
	dropSync      bool         // a failed sync drops its pages: SetDropFailedSyncs
	evictSync     bool         // a failed sync's pages are evicted one at a time later: SetEvictFailedSyncs
	keepUnwritten bool         // a failed sync leaves the blocks it allocated unwritten: SetKeepUnwritten
	spared        map[int]bool // processes whose calls injected errors pass over: Spare
}

// PowerLossAt arms a power cut during the nth mutating call (a write, sync
// or truncate of a file, a file's creation by Open or its deletion, or a
// directory sync: Stats.Mutations; 1 is the next) from now, with loss mode
// mode: the write, truncate, creation or deletion in flight is applied to the
// page cache and then meets mode's fate with the rest; a sync in flight, of a
// file or a directory, makes nothing durable. The call returns an error
// wrapping ErrPowerLost, as does everything after it until Reboot.
// Stats.Mutations counted over a dry run tells how many calls a workload
// makes. n <= 0 disarms.
func (m *MemFS) PowerLossAt(n int64, mode LossMode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.cutIn = max(n, 0)
	m.plan.cutMode = mode
}

// FailAt makes the nth call of op from now (1 is the next) fail with an error
// wrapping ErrInjected; see the File methods for what a failed call leaves.
// n <= 0 disarms.
func (m *MemFS) FailAt(op Op, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.failIn[op] = max(n, 0)
}

// Spare makes injected errors (FailAt, SetFailRate) pass over process
// pid's calls, or (on false) reach them again: they neither fail nor count
// toward the nth call FailAt armed. Power cuts and the write budget still
// reach them. A simulator spares a program whose failed sync no other
// process could learn of (Linux reports a failed write-back only to the
// descriptors open at the time), when the runs it checks do not ask that
// of any process.
func (m *MemFS) Spare(pid int, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plan.spared == nil {
		m.plan.spared = map[int]bool{}
	}
	m.plan.spared[pid] = on
}

// SetFailRate makes each call of op fail with probability p, drawn from the
// seeded fault stream, with an error wrapping ErrInjected. p <= 0 stops it.
func (m *MemFS) SetFailRate(op Op, p float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.failRate[op] = max(p, 0)
}

// SetWriteBudget lets writes write n more bytes in all, overwrites of
// bytes the file has included: stricter than ext4 or xfs, which refuse
// only a write that needs new blocks, as a copy-on-write file system
// (btrfs) may be. A write that would pass the budget fails with an error wrapping vfs.ErrNoSpace, the disk
// being full, after writing what fits before the last 4096-byte page
// boundary of the file the budget reaches (a short write, as Linux's
// write(2) makes one), which may be nothing. n < 0 makes the budget
// unlimited again (space is back).
func (m *MemFS) SetWriteBudget(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.budget = n
}

// SetSyncNoop, for negative controls in tests only, makes Sync succeed
// without making anything durable: a disk that lies. Tests that must fail
// under it prove they can see lost durability.
func (m *MemFS) SetSyncNoop(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.syncNoop = on
}

// SetDropFailedSyncs chooses what a failed Sync does to the writes it was
// to make durable. Off (the default), they stay readable until a power
// loss, as Linux's ext4 keeps them in the page cache (marked clean, never
// written) until it reclaims those pages; SetEvictFailedSyncs models that
// reclaim. On, they are dropped at once, as XFS was reported to drop the
// pages of a failed write-back: reads of the file see its durable bytes
// again, and zeros where nothing durable was; its size stays as the writes
// left it. Either way none of them reaches the disk, and the failure is
// reported as Sync says. On, it wins over SetEvictFailedSyncs: with both
// on, a failed sync drops its writes at once (nothing is left to evict).
func (m *MemFS) SetDropFailedSyncs(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.dropSync = on
}

// SetEvictFailedSyncs, on, has the kernel reclaim a failed Sync's pages
// one at a time, at later moments, as Linux may reclaim the clean pages
// ext4 leaves in the page cache after a failed write-back. Right after the
// failure every page the failed sync was to write (4096 bytes each, those
// its writes touched, within the file's size) reads as written; from then
// on each call that reaches the disk through a live view or file (ReadAt,
// WriteAt, WriteThrough, Truncate, Sync, Size, Open, Delete, Exists,
// SyncDir) first evicts, with probability 1/16 drawn from a seeded stream
// of its own, one failed page drawn from all those of the machine; closing
// the last descriptor of a file (Close, or Crash of the process that held
// it) evicts all that remain of it; a power loss forgets them with the
// rest of the page cache (PowerLoss decides from the durable bytes, as
// always). An evicted page reads as the durable bytes, zeros where nothing
// durable was; the file's size is unchanged. A write that touches a failed
// page before its eviction makes it an ordinary dirty page (its bytes are
// unsynced writes from then on, and it is never evicted); a truncate that
// cuts into one does too, or forgets it.
//
// Not modelled: reclaim under memory pressure of dirty or ordinary clean
// pages (they stay until a power loss), eviction at moments no MemFS call
// marks (a simulator sees a page go only at its next disk call), eviction
// of part of a page, and the kernel's keeping a page after the last close
// (Linux may keep it until pressure; MemFS takes the worst case, that the
// pages go when no descriptor could still be told of the failure). A page
// rewritten in part is made dirty whole, as the kernel does, but only the
// bytes written are made durable by a later sync, as for any write of
// MemFS. SetDropFailedSyncs(true) wins over this: with both on, a failed
// sync drops its writes at once. Off (the default), failed pages stay
// readable until a power loss; turning it off keeps the pages already
// failed pending, and they are evicted only at a last close.
//
// Each page evicted while a name leads to its file or a descriptor has it
// open is reported to SetOnDroppedSync's function (and counted in
// Stats.EvictedPages).
func (m *MemFS) SetEvictFailedSyncs(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.evictSync = on
}

// SetKeepUnwritten makes a failed Sync leave the blocks it had to
// allocate (those its writes reached past the blocks the durable file had)
// marked unwritten, as ext4 does on Linux 6.18 (measured: state's
// TestKernelFailedSyncOnAThinDisk): later writes there, and syncs that
// succeed, leave them so, and after a power loss they read as zeros, until
// a write past the page cache (WriteThrough) or a truncate below them.
// Unwritten reports whether a file has any.
func (m *MemFS) SetKeepUnwritten(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plan.keepUnwritten = on
}

// SetOnDroppedSync has fn called, with the pid of the process whose Sync
// failed and the file's name (as that process opened it), each time
// writes that were not durable are taken out of the page cache while the
// power stays on: each failed sync that drops its writes
// (SetDropFailedSyncs), and each page of a failed sync evicted
// (SetEvictFailedSyncs), which may come at any later call of any process,
// or at a close or a crash. To whoever reads the file afterwards, the
// writes since its last good sync are lost, in whole or (an eviction) in
// part, as a power loss would lose them, though nothing else happened to
// the machine: a WAL page gone leaves SQLite a prefix of the WAL at most.
// fn is not called at a power loss. fn runs inside the MemFS call,
// holding the MemFS's lock: it must not call the MemFS.
func (m *MemFS) SetOnDroppedSync(fn func(pid int, name string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onDrop = fn
}

// cutDue counts a mutating call and reports whether the armed cut falls on
// it. Called with m.mu held.
func (m *MemFS) cutDue() bool {
	if m.plan.cutIn == 0 {
		return false
	}
	m.plan.cutIn--
	return m.plan.cutIn == 0
}

// cut cuts the power for PowerLossAt and returns the error to report.
func (m *MemFS) cut() error {
	m.powerLoss(m.plan.cutMode)
	return fmt.Errorf("power cut (%s): %w", m.plan.cutMode, ErrPowerLost)
}

// injected returns an ErrInjected error if this call of op, by process
// pid, is to fail. Called with m.mu held.
func (m *MemFS) injected(op Op, pid int) error {
	if m.plan.spared[pid] {
		return nil
	}
	fail := false
	if n := m.plan.failIn[op]; n > 0 {
		m.plan.failIn[op] = n - 1
		fail = n == 1
	}
	if p := m.plan.failRate[op]; p > 0 && m.faultRNG.Float64() < p {
		fail = true
	}
	if !fail {
		return nil
	}
	m.stats.InjectedErrors++
	switch op {
	case OpSync:
		m.stats.InjectedSyncErrors++
	case OpSyncDir:
		m.stats.InjectedDirSyncErrors++
	}
	return fmt.Errorf("%s: %w", op, ErrInjected)
}

// fsPage is where a write that fills the disk stops: the kernel copies a
// write into the page cache a page at a time, taking room for each, and a
// write that finds none for its next page returns what it copied.
const fsPage = 4096

// spend takes from the write budget the room for n bytes written at off,
// and returns how many of them fit: all of them, or, with an error wrapping
// vfs.ErrNoSpace, those before the last page boundary the budget reaches.
// Called with m.mu held.
func (m *MemFS) spend(off, n int64) (int64, error) {
	if m.plan.budget < 0 {
		return n, nil
	}
	if n <= m.plan.budget {
		m.plan.budget -= n
		return n, nil
	}
	fit := max((off+m.plan.budget)/fsPage*fsPage-off, 0)
	m.plan.budget -= fit
	m.stats.NoSpaceErrors++
	return fit, fmt.Errorf("write budget spent: %w", vfs.ErrNoSpace)
}
