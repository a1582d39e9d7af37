package faults

import (
	"fmt"
	"io"

	"github.com/statekit/statekit/state/vfs"
)

// inode is one file's bytes: durable (on the platter) and data (what reads
// see), with the mutations since the last sync that tell them apart.
type inode struct {
	durable []byte
	data    []byte
	pending []mutation
	// errSeq counts failed syncs: like Linux's errseq_t (4.13+), a failed
	// write-back is reported once to every file open on the inode, at its
	// next Sync, not only to the one that saw it first.
	errSeq uint64
	// unwritten are the byte ranges, whole blocks, that a failed sync left
	// marked unwritten (SetKeepUnwritten): they read as zeros from the disk
	// whatever is written there later, until a write past the page cache
	// (WriteThrough) or a truncate below them.
	unwritten []span
	// failed are the pages a failed sync left in the page cache, clean,
	// that the kernel has not reclaimed yet (SetEvictFailedSyncs), sorted
	// by page: evict.go.
	failed []failedPage
}

// span is the bytes [off, end) of a file.
type span struct{ off, end int64 }

// unwrittenBlock is the size of the blocks SetKeepUnwritten marks.
const unwrittenBlock = 4096

// markUnwritten marks unwritten the blocks that the pending writes reach
// past the blocks the durable file had: blocks a failed write-back had to
// allocate. Blocks the file had keep their state (an overwrite that fails
// leaves the old bytes on the disk).
func (ino *inode) markUnwritten() {
	had := (int64(len(ino.durable)) + unwrittenBlock - 1) / unwrittenBlock * unwrittenBlock
	for _, mu := range ino.pending {
		if mu.truncate || len(mu.data) == 0 {
			continue
		}
		start := max(mu.off/unwrittenBlock*unwrittenBlock, had)
		end := (mu.off + int64(len(mu.data)) + unwrittenBlock - 1) / unwrittenBlock * unwrittenBlock
		if start < end {
			ino.unwritten = append(ino.unwritten, span{start, end})
		}
	}
}

// written marks the blocks [off, end) reaches as written.
func (ino *inode) written(off, end int64) {
	off = off / unwrittenBlock * unwrittenBlock
	end = (end + unwrittenBlock - 1) / unwrittenBlock * unwrittenBlock
	kept := ino.unwritten[:0]
	for _, s := range ino.unwritten {
		if s.off < off {
			kept = append(kept, span{s.off, min(s.end, off)})
		}
		if s.end > end {
			kept = append(kept, span{max(s.off, end), s.end})
		}
	}
	ino.unwritten = kept
}

// maskUnwritten returns buf with its unwritten bytes zeroed: what the disk
// holds there.
func (ino *inode) maskUnwritten(buf []byte) []byte {
	for _, s := range ino.unwritten {
		for i := s.off; i < s.end && i < int64(len(buf)); i++ {
			buf[i] = 0
		}
	}
	return buf
}

// mutation is a write (data at off) or, when truncate is set, a truncate to
// size, not yet synced.
type mutation struct {
	truncate bool
	off      int64
	data     []byte
	size     int64
}

// write applies a write to the page cache and remembers it.
func (ino *inode) write(p []byte, off int64) {
	ino.data = writeAt(ino.data, p, off)
	ino.rewritten(off, off+int64(len(p)))
	ino.pending = append(ino.pending, mutation{off: off, data: append([]byte(nil), p...)})
}

// truncate applies a truncate to the page cache and remembers it: whole
// blocks it cuts away are unwritten no more.
func (ino *inode) truncate(size int64) {
	ino.data = resize(ino.data, size)
	ino.pending = append(ino.pending, mutation{truncate: true, size: size})
	ino.cutFailed(size)
	limit := (size + unwrittenBlock - 1) / unwrittenBlock * unwrittenBlock
	kept := ino.unwritten[:0]
	for _, s := range ino.unwritten {
		if s.off < limit {
			kept = append(kept, span{s.off, min(s.end, limit)})
		}
	}
	ino.unwritten = kept
}

// sync makes every pending mutation durable, but for what lands on
// unwritten blocks.
func (ino *inode) sync() {
	for _, mu := range ino.pending {
		ino.durable = mu.applyTo(ino.durable)
	}
	ino.durable = ino.maskUnwritten(ino.durable)
	ino.pending = nil
}

// dropUnsynced makes reads see the durable bytes again, as a file system
// that drops a failed write-back's pages does: what was never durable
// reads as zeros, and the size stays as the writes left it.
func (ino *inode) dropUnsynced() {
	data := make([]byte, len(ino.data))
	copy(data, ino.durable)
	ino.data = data
}

// applyTo returns buf with the mutation applied.
func (mu mutation) applyTo(buf []byte) []byte {
	if mu.truncate {
		return resize(buf, mu.size)
	}
	return writeAt(buf, mu.data, mu.off)
}

// writeAt copies p into buf at off, growing buf with zeros as needed.
func writeAt(buf, p []byte, off int64) []byte {
	if end := off + int64(len(p)); end > int64(len(buf)) {
		buf = resize(buf, end)
	}
	copy(buf[off:], p)
	return buf
}

// resize returns buf at size n: cut, or grown with zeros.
func resize(buf []byte, n int64) []byte {
	if n <= int64(len(buf)) {
		return buf[:n]
	}
	if n <= int64(cap(buf)) {
		old := len(buf)
		buf = buf[:n]
		clear(buf[old:])
		return buf
	}
	nb := make([]byte, n, max(n, 2*int64(cap(buf))))
	copy(nb, buf)
	return nb
}

// memFile is an open file of a MemFS, bound to the view that opened it.
type memFile struct {
	view     *ProcessFS
	id       uint64
	ino      *inode
	name     string
	readOnly bool
	closed   bool
	errSeen  uint64 // the inode's errSeq this file has reported
}

var (
	_ vfs.File   = (*memFile)(nil)
	_ vfs.Mortal = (*memFile)(nil)
)

// Dead reports whether f is closed or its process or machine died.
func (f *memFile) Dead() bool {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return f.usable("dead") != nil
}

// usable returns nil if f may be used. Called with m.mu held.
func (f *memFile) usable(op string) error {
	if f.closed {
		return fmt.Errorf("%s %q: %w", op, f.name, ErrClosed)
	}
	if err := f.view.alive(); err != nil {
		return fmt.Errorf("%s %q: %w", op, f.name, err)
	}
	return nil
}

// ReadAt reads what was written at off, durable or not. It returns io.EOF
// when the file ends before p is full, an error wrapping ErrInjected for an
// injected failure, and ErrPowerLost, ErrCrashed or ErrClosed for a dead
// file.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	m.evictTick()
	if off < 0 {
		return 0, fmt.Errorf("read %q at %d: negative offset", f.name, off)
	}
	m.stats.Reads++
	if err := m.injected(OpRead, f.view.pid); err != nil {
		return 0, fmt.Errorf("read %q: %w", f.name, err)
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes p at off into the page cache: durable only after Sync. It
// returns an error wrapping vfs.ErrNoSpace when the write budget is spent
// (what fits before a page boundary is written, and counted in the n it
// returns: SetWriteBudget), ErrInjected for an injected failure (nothing is
// written), ErrPowerLost when the power is cut during this call (the write
// is in flight: the loss mode decides its fate), and ErrPowerLost,
// ErrCrashed, ErrClosed or ErrReadOnly for a file that cannot write.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	m.evictTick()
	if f.readOnly {
		return 0, fmt.Errorf("write %q: %w", f.name, ErrReadOnly)
	}
	if off < 0 {
		return 0, fmt.Errorf("write %q at %d: negative offset", f.name, off)
	}
	m.stats.Writes++
	m.writesBy[f.view.pid]++
	if m.cutDue() {
		f.ino.write(p, off)
		return 0, fmt.Errorf("write %q: %w", f.name, m.cut())
	}
	if err := m.injected(OpWrite, f.view.pid); err != nil {
		return 0, fmt.Errorf("write %q: %w", f.name, err)
	}
	n, err := m.spend(off, int64(len(p)))
	if n > 0 {
		f.ino.write(p[:n], off)
		m.stats.BytesWritten += n
	}
	if err != nil {
		return int(n), fmt.Errorf("write %q: %w", f.name, err)
	}
	return len(p), nil
}

// WriteThrough writes p at off past the page cache, as O_DIRECT does: the
// blocks it reaches are marked written (SetKeepUnwritten), and the bytes
// are durable after the next Sync, as a write's. It fails as WriteAt does,
// but writes nothing when it fails.
func (f *memFile) WriteThrough(p []byte, off int64) error {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := f.usable("write"); err != nil {
		return err
	}
	m.evictTick()
	if f.readOnly {
		return fmt.Errorf("write %q: %w", f.name, ErrReadOnly)
	}
	if off < 0 {
		return fmt.Errorf("write %q at %d: negative offset", f.name, off)
	}
	m.stats.Writes++
	m.writesBy[f.view.pid]++
	if m.cutDue() {
		f.ino.write(p, off)
		return fmt.Errorf("write %q: %w", f.name, m.cut())
	}
	if err := m.injected(OpWrite, f.view.pid); err != nil {
		return fmt.Errorf("write %q: %w", f.name, err)
	}
	if m.plan.budget >= 0 && int64(len(p)) > m.plan.budget {
		m.stats.NoSpaceErrors++ // all or nothing, as a write past the cache is
		return fmt.Errorf("write %q past the cache: write budget spent: %w", f.name, vfs.ErrNoSpace)
	}
	_, _ = m.spend(off, int64(len(p)))
	f.ino.write(p, off)
	f.ino.written(off, off+int64(len(p)))
	m.stats.BytesWritten += int64(len(p))
	return nil
}

// Unwritten reports whether any block of the file is marked unwritten
// (SetKeepUnwritten).
func (f *memFile) Unwritten() bool {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(f.ino.unwritten) > 0
}

// Truncate sets the file's size in the page cache: durable only after Sync.
// Errors are as for WriteAt, without the budget.
func (f *memFile) Truncate(size int64) error {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := f.usable("truncate"); err != nil {
		return err
	}
	m.evictTick()
	if f.readOnly {
		return fmt.Errorf("truncate %q: %w", f.name, ErrReadOnly)
	}
	if size < 0 {
		return fmt.Errorf("truncate %q to %d: negative size", f.name, size)
	}
	m.stats.Truncates++
	m.writesBy[f.view.pid]++
	if m.cutDue() {
		f.ino.truncate(size)
		return fmt.Errorf("truncate %q: %w", f.name, m.cut())
	}
	if err := m.injected(OpTruncate, f.view.pid); err != nil {
		return fmt.Errorf("truncate %q: %w", f.name, err)
	}
	f.ino.truncate(size)
	return nil
}

// Sync makes the file's writes and truncates so far durable. It returns an
// error wrapping ErrPowerLost when the power is cut during this call (nothing
// more becomes durable) and ErrInjected for an injected failure. A failed
// sync behaves as Linux's fsync does (fsyncgate): the writes it was to make
// durable stay readable but are never made durable, and the next Sync does
// not report them to the file that saw the failure; every other file open
// on it then reports the failure once, at its next Sync (Linux 4.13+). With
// SetDropFailedSyncs(true) the failed sync's writes are dropped from the
// page cache too: reads see the durable bytes again. With
// SetEvictFailedSyncs(true) they stay readable until the kernel reclaims
// them, a page at a time, at seeded later moments. With
// SetSyncNoop(true) Sync does nothing and succeeds.
func (f *memFile) Sync() error {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := f.usable("sync"); err != nil {
		return err
	}
	m.evictTick()
	m.stats.Syncs++
	if m.cutDue() {
		return fmt.Errorf("sync %q: %w", f.name, m.cut())
	}
	if err := m.injected(OpSync, f.view.pid); err != nil {
		dropped := len(f.ino.pending) > 0
		if m.plan.keepUnwritten {
			f.ino.markUnwritten()
		}
		if m.plan.evictSync && !m.plan.dropSync {
			m.markFailed(f.ino, f.view.pid, f.name)
		}
		f.ino.pending = nil // lost for good: in the cache, never on disk
		if m.plan.dropSync {
			f.ino.dropUnsynced()
			if m.onDrop != nil && dropped {
				m.onDrop(f.view.pid, f.name)
			}
		}
		f.ino.errSeq++
		f.errSeen = f.ino.errSeq
		return fmt.Errorf("sync %q: %w", f.name, err)
	}
	if f.errSeen < f.ino.errSeq {
		f.errSeen = f.ino.errSeq
		return fmt.Errorf("sync %q: a write-back failed earlier through another file: %w", f.name, ErrInjected)
	}
	if m.plan.syncNoop {
		return nil
	}
	f.ino.sync()
	return nil
}

// Size returns the file's size as reads see it. It returns ErrPowerLost,
// ErrCrashed or ErrClosed for a dead file.
func (f *memFile) Size() (int64, error) {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := f.usable("size"); err != nil {
		return 0, err
	}
	m.evictTick()
	return int64(len(f.ino.data)), nil
}

// Close releases the file. Closing a file of a dead process releases it too
// and returns ErrPowerLost or ErrCrashed; closing twice returns ErrClosed.
func (f *memFile) Close() error {
	m := f.view.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.closed {
		return fmt.Errorf("close %q: %w", f.name, ErrClosed)
	}
	err := f.usable("close")
	f.closed = true
	delete(m.open, f.id)
	m.evictIfUnopened(f.ino)
	return err
}
