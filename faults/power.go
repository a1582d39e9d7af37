package faults

import (
	"fmt"
	"slices"
)

// LossMode is what a power loss does to the writes not yet synced.
type LossMode int

// The loss modes.
const (
	// LossDrop loses every unsynced write and truncate.
	LossDrop LossMode = iota
	// LossKeep keeps every unsynced write and truncate, as if the disk had
	// flushed its cache just in time.
	LossKeep
	// LossTear decides each unsynced write independently: kept, dropped, or
	// torn, that is cut at 512-byte sector boundaries with each piece kept or
	// dropped on its own. An unsynced truncate is kept or dropped.
	LossTear
)

// tearSector is the unit LossTear tears writes in: the VFS's sector size.
const tearSector = 512

// String returns "drop", "keep" or "tear".
func (mode LossMode) String() string {
	switch mode {
	case LossDrop:
		return "drop"
	case LossKeep:
		return "keep"
	case LossTear:
		return "tear"
	}
	return fmt.Sprintf("LossMode(%d)", int(mode))
}

// PowerLoss cuts the power now. Every file's unsynced writes, and every
// creation and deletion of a file whose directory was not synced since,
// meet mode's fate, every process dies (their views and files fail with ErrPowerLost from
// now on, even after Reboot), every lock and all shared memory are forgotten,
// and every call fails until Reboot. A pending PowerLossAt is disarmed. A
// PowerLoss while the power is off does nothing.
func (m *MemFS) PowerLoss(mode LossMode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.powerLoss(mode)
}

// Reboot turns the power back on: views taken from Process from now on work.
func (m *MemFS) Reboot() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.off = false
}

// Crash kills process pid: its views and open files fail with ErrCrashed,
// and its file locks and shared-memory locks are released. What it wrote
// stays, synced or not: the machine's page cache still has it, but for the
// failed syncs' pages of a file it had the last descriptors of, with
// SetEvictFailedSyncs (its descriptors close). A restarted
// process takes a new view from Process(pid).
func (m *MemFS) Crash(pid int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.incarnation[pid]++
	m.stats.Crashes++
	ids := make([]uint64, 0, len(m.open))
	for id, f := range m.open {
		if f.view.pid == pid {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	inos := make([]*inode, 0, len(ids))
	for _, id := range ids {
		inos = append(inos, m.open[id].ino)
		m.locks.Release(m.open[id])
		delete(m.open, id)
	}
	for _, ino := range inos { // its descriptors closed: SetEvictFailedSyncs
		m.evictIfUnopened(ino)
	}
}

// powerLoss is PowerLoss with m.mu held.
func (m *MemFS) powerLoss(mode LossMode) {
	if m.off {
		return
	}
	if len(m.dirPending) > 0 {
		m.stats.DirLosses++
	}
	if len(m.dirFailed) > 0 {
		m.stats.FailedDirSyncLosses++
	}
	m.forgetFailed() // the page cache is gone: settle reads the disk
	files := m.settleDirs(mode)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m.settle(files[name], mode)
	}
	m.off = true
	m.epoch++
	m.open = map[uint64]*memFile{}
	m.locks.Reset()
	m.plan.cutIn = 0
	m.stats.PowerLosses++
}

// settle writes what survives of ino's pending mutations to its durable
// bytes, which become all it holds.
func (m *MemFS) settle(ino *inode, mode LossMode) {
	for _, mu := range ino.pending {
		switch mode {
		case LossKeep:
			ino.durable = mu.applyTo(ino.durable)
		case LossTear:
			ino.durable = m.tear(ino.durable, mu)
		}
	}
	ino.pending = nil
	ino.durable = ino.maskUnwritten(ino.durable)
	ino.data = append([]byte(nil), ino.durable...)
}

// tear applies mu to buf in part: kept, dropped, or torn per sector, drawn
// from the tear stream.
func (m *MemFS) tear(buf []byte, mu mutation) []byte {
	const keep, drop = 0, 1
	fate := m.tearRNG.IntN(3)
	switch {
	case fate == keep:
		return mu.applyTo(buf)
	case fate == drop:
		return buf
	case mu.truncate:
		if m.tearRNG.IntN(2) == 0 {
			return mu.applyTo(buf)
		}
		return buf
	}
	end := mu.off + int64(len(mu.data))
	for start := mu.off; start < end; {
		next := min((start/tearSector+1)*tearSector, end)
		if m.tearRNG.IntN(2) == 0 {
			buf = writeAt(buf, mu.data[start-mu.off:next-mu.off], start)
		}
		start = next
	}
	return buf
}
