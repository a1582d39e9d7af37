package state

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/statekit/statekit/state/vfs"
)

// The WAL after a failed sync (fsyncgate). When a sync of the WAL fails,
// Linux (and faults.MemFS) keeps the frames it was to write readable in the
// page cache but marks them clean: no later sync writes them, and only the
// file descriptors open at the time are told, once each. The WAL then has a
// hole the shared-memory index knows nothing of: every connection reads the
// frames, and a checkpoint copies them into the database file, syncing the
// WAL first "successfully". A power loss in the middle of that checkpoint
// leaves pages of the database file newer than anything the durable WAL can
// replay over the rest (seen: "row missing from index" after a reboot), and
// a FULL commit appended behind the hole is lost with it.
//
// So a connection that may checkpoint never relies on a WAL it has not
// seen made durable since its descriptor was opened. At Open, once every
// connection of the handle that checkpoints has the WAL open, repairWAL
// rewrites the WAL's bytes in place under the write lock and syncs them:
// a hole from before is filled, and a sync that fails after it is reported
// to those connections' descriptors, whose next checkpoint then stops at
// its first sync, before it writes the database file. A handle that failed
// rewrites the WAL again before its connections close (mendWAL, which
// copies nothing into the database file), and keeps a read-only
// connection open until they have, since the last connection to close
// checkpoints (and a connection that has seen its failure syncs
// "successfully" from then on).

// closeFailed readies a failed handle's connections to close. The last
// connection to close a file checkpoints it, and one that saw a sync fail
// is never told again: so it mends the WAL (best effort: the handle failed
// already), then opens a read-only connection that releaseHandle closes
// last. While it is open no other connection can take the exclusive lock
// that checkpoint needs; a read-only one copies nothing into the file, and
// it keeps the WAL when it closes (keepWAL), which it would otherwise
// delete when the WAL holds nothing the file lacks, though the file's
// pages may not be durable. The next writable Open repairs from the WAL.
// The guard holds that lock only if it could read the file; so the
// writable connections are told not to checkpoint as they close either
// (noCheckpointAtClose). Callers hold mu.
func (db *DB) closeFailed() {
	ctx := context.Background()
	if db.damage == nil { // a damaged WAL is not to be repaired, nor checkpointed
		_ = db.mendWAL(ctx, db.conn)
	}
	db.holdWAL(ctx)
	_ = noCheckpointAtClose(db.conn) // best effort, as the rest: the handle failed already
	_ = noCheckpointAtClose(db.bg.ckpt.conn)
}

// holdWAL opens a read-only connection on the file (db.guard), unless one
// is open, so that the handle's writable connections close without
// checkpointing a WAL the repair could not make durable (releaseHandle).
// Best effort: the handle, or its Open, failed already.
func (db *DB) holdWAL(ctx context.Context) {
	if db.guard != nil {
		return
	}
	ro, conn, err := openWALConn(ctx, db.dsn+"&mode=ro")
	if err != nil {
		return
	}
	_ = keepWAL(conn) // best effort, as the repair: the handle failed already
	_ = conn.Close()  // back to the pool, where it stays open
	db.guard = ro
}

// guardRead begins a read transaction on the guard's connection, when the
// handle has one, and returns what ends it. The last connection to close a
// file checkpoints it unless another holds a lock on it; an idle
// connection may hold none (SQLite lets go of its SHARED lock after each
// read unless it has the WAL open, and one that last read the file while
// it was empty, as openGuard's may while another process makes the file,
// has not), a read transaction always does. So the
// writable connections of a failed handle, or of a failed Open, closing
// while it lasts, leave the WAL and the file as they are for the next
// Open's repair; a read-only connection, closing last, cannot checkpoint.
func (db *DB) guardRead() (end func()) {
	if db.guard == nil {
		return func() {}
	}
	ctx := context.Background()
	conn, err := db.guard.Conn(ctx)
	if err != nil {
		return func() {}
	}
	var n int
	if _, err := conn.ExecContext(ctx, `BEGIN`); err == nil {
		_ = conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n)
	}
	return func() {
		_, _ = conn.ExecContext(ctx, `ROLLBACK`)
		_ = conn.Close()
	}
}

// openWALConn opens a one-connection pool on dsn and a connection from it
// that has read the file, so that it has the WAL open.
func openWALConn(ctx context.Context, dsn string) (*sql.DB, *sql.Conn, error) {
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, nil, err
	}
	sqldb.SetMaxOpenConns(1)
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return nil, nil, errors.Join(err, sqldb.Close())
	}
	var one int
	err = conn.QueryRowContext(ctx, `SELECT 1 FROM meta LIMIT 1`).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, errors.Join(err, conn.Close(), sqldb.Close())
	}
	return sqldb, conn, nil
}

// walSuffix ends the name of a file's WAL.
const walSuffix = "-wal"

// walChunk is how much of the WAL repairWAL reads and writes at a time.
const walChunk = 1 << 20

// repairWAL rewrites the WAL file's bytes in place and syncs them, holding
// the write lock on conn so that no writer changes the WAL meanwhile, then
// repairs the database file's pages the WAL names (repairPages). A missing
// or empty WAL needs nothing. It returns ErrBusy when another process holds
// the write lock past the busy timeout, ErrDiskFull when the disk is full,
// and ErrIO when a read, write or sync fails, or when the WAL lost frames
// its index counts (walHole: then nothing is written). Where a file has
// blocks marked unwritten it writes past the page cache (writeThrough).
func (db *DB) repairWAL(ctx context.Context, conn *sql.Conn) error {
	err := db.rewriteWAL(ctx, conn, true)
	if err == nil {
		err = db.repairPages(ctx, conn)
	}
	return repairError(err)
}

// mendWAL is a failed handle's repair before its connections close: it
// rewrites the WAL in place and syncs it, through the page cache, and
// copies nothing into the database file. The disk that failed the handle
// is likely failing still, and the next Open repairs. Two things were seen
// to go wrong when it did more. With a checkpoint after the rewrite (as
// repairWAL's repairPages runs one), on a disk that keeps a failed range
// unwritten (ext4; the simulator's -keepunwritten), the rewrite's sync
// succeeded once the disk was well again without making the WAL durable,
// the checkpoint copied it into the file, and a power loss left pages of
// the file newer than the WAL it could replay: 17 of 200 seeds. And with
// the rewrite past the page cache on the still-full thin xfs disk, an
// Open and Close on that disk then left pages of the file that a power cut
// took back though its sync had succeeded, in every run
// (TestKernelFailedSyncOnAThinDisk); why is not known.
func (db *DB) mendWAL(ctx context.Context, conn *sql.Conn) error {
	return repairError(db.rewriteWAL(ctx, conn, false))
}

// rewriteWAL rewrites the WAL in place and syncs it under the write lock
// (bypass: past the page cache where blocks are unwritten), unless it has
// lost frames its index counts.
func (db *DB) rewriteWAL(ctx context.Context, conn *sql.Conn, bypass bool) error {
	return db.locked(ctx, conn, func() error {
		if err := db.walHole(conn); err != nil {
			return err
		}
		return db.forgetIfSyncFailed(conn, rewriteFile(db.cfg.fs, db.path+walSuffix, bypass))
	})
}

// repairError classifies an error of the repair's own reads and writes.
func repairError(err error) error {
	switch {
	case err == nil || errors.Is(err, ErrBusy) || errors.Is(err, ErrIO) || errors.Is(err, ErrDiskFull) ||
		errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, vfs.ErrNoSpace):
		return fmt.Errorf("%w: repairing the WAL: %w", ErrDiskFull, err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "open" {
		// The operating system would not open the WAL (too many open
		// files, a read-only file system): nothing was read or written.
		if writeRefused(pe) {
			return readOnlyError("cannot write "+pe.Path+" to repair the WAL", pe)
		}
		return &causeError{msg: fmt.Sprintf("%v: repairing the WAL: %s", ErrCannotOpen, osCauseText(pe)), errs: []error{ErrCannotOpen, err}}
	}
	return fmt.Errorf("%w: repairing the WAL: %w", ErrIO, err)
}

// locked runs fn holding the write lock on conn (BEGIN IMMEDIATE, then
// ROLLBACK: fn writes no row).
func (db *DB) locked(ctx context.Context, conn *sql.Conn, fn func() error) (err error) {
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return classify(ctx, err)
	}
	defer func() {
		_, rerr := conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		if err == nil {
			err = classify(ctx, rerr)
		}
	}()
	return fn()
}

// The database file after a failed sync. A checkpoint that cannot copy
// the whole WAL (a reader holds an older snapshot) writes pages of the
// database file and records them as copied without syncing it; the sync
// comes with a later checkpoint that copies the rest. If a sync of the
// database file fails meanwhile, those pages stay readable but never reach
// the disk, and a connection whose descriptor was opened after the failure
// is not told: its checkpoint syncs "successfully", the WAL starts over on
// top of the frames those pages came from, and a power loss then loses
// commits, FULL ones included. Every page such a checkpoint can have
// written is named by a frame still in the WAL (the WAL starts over only
// after a checkpoint that synced), so repairWAL rewrites those pages of the
// database file in place, and syncs it, before any checkpoint of the handle.
// It must not race another process's checkpoint, which could write a newer
// page between its read and its write: so, holding the write lock (no new
// frame can come), it first runs a checkpoint that copies the whole WAL;
// once one has, no checkpoint has anything left to write. When a reader's
// older snapshot stops it short, the repair holds the checkpointer's lock
// instead and rewrites the pages of the frames up to the backfill mark
// (walrepairbehind.go).

// walHeaderBytes and walFrameHeaderBytes are the sizes of the WAL's header
// and of each frame's header (sqlite.org/fileformat.html, "WAL File
// Format"): the page size is at byte 8 of the WAL header, the page number
// at byte 0 of a frame header, both big-endian.
const (
	walHeaderBytes      = 32
	walFrameHeaderBytes = 24
)

// repairPages rewrites the database file's pages that the WAL names, once
// a checkpoint has copied the whole WAL, all under the write lock on conn.
// A reader with an older snapshot stops the checkpoint short; then it
// rewrites the pages of the frames up to the backfill mark under the
// checkpointer's lock (repairBehindSnapshot). When that lock is taken (a
// checkpoint of another process runs) it lets go of the write lock and
// tries again a little later, until the busy timeout passes; then it leaves
// the pages as they are.
func (db *DB) repairPages(ctx context.Context, conn *sql.Conn) error {
	ckpt := db.bg.ckpt.conn
	if ckpt == nil || db.failed != nil {
		sqldb, c, err := openWALConn(ctx, db.dsn)
		if err != nil {
			return classify(ctx, err)
		}
		defer sqldb.Close()
		defer c.Close()
		ckpt = c
	}
	for tries := int(db.cfg.busyTimeout/backfillPause) + 1; ; tries-- {
		done := false
		err := db.locked(ctx, conn, func() error {
			var busy, frames, copied int64
			err := ckpt.QueryRowContext(ctx, checkpointSQL).Scan(&busy, &frames, &copied)
			if err = db.explain(ckpt, classify(ctx, roomRefusedOn(ckpt, err))); err != nil {
				return db.forgetIfSyncFailed(conn, err)
			}
			if busy != 0 || frames != copied {
				// A reader's older snapshot stopped it short, or another
				// checkpoint runs (walrepairbehind.go).
				done, err = db.repairBehindSnapshot(conn)
				return db.forgetIfSyncFailed(conn, err)
			}
			done = true
			// The whole WAL is in the file, and the write lock keeps it as
			// it is: read which pages it names only now, once, not at
			// every try a reader's snapshot stopped short.
			return db.forgetIfSyncFailed(conn, db.rewriteCopied(conn))
		})
		if err != nil || done || tries <= 1 {
			return err
		}
		db.cfg.sleep(backfillPause)
	}
}

// rewriteCopied rewrites the pages of the database file that the WAL
// names, with their last frames (rewriteBackfilled), once a checkpoint
// under the write lock on conn copied the whole WAL. A WAL that lost one
// of those frames is a hole (holeError): the pages are left as they are.
func (db *DB) rewriteCopied(conn *sql.Conn) error {
	var hdr []byte
	var done, mapped bool
	err := conn.Raw(func(dc any) error {
		v, region := indexRegion(dc)
		if v == nil {
			return nil
		}
		mapped = true
		defer v.close()
		hdr, _ = indexHeaderAt(region)
		var err error
		done, err = db.rewriteBackfilled(region)
		return err
	})
	if err != nil || done {
		return err
	}
	if !mapped {
		// No index at hand (a driver without SQLite's handle): the pages
		// as the file has them, as best it can.
		pages, size, err := walPages(db.cfg.fs, db.path+walSuffix)
		if err != nil || len(pages) == 0 {
			return err
		}
		return rewritePages(db.openPages, pages, size)
	}
	if hdr != nil {
		if brk, err := walBreak(db.cfg.fs, db.path+walSuffix, hdr); err != nil || brk != 0 {
			return errors.Join(err, holeError(db.path+walSuffix, max(brk, 1), hdr))
		}
	}
	return errors.New("the WAL index header changed under the write lock")
}

// backfillPause is how long repairPages waits between two tries.
const backfillPause = 5 * time.Millisecond

// rewritePages rewrites in place, and syncs, the given pages of size bytes
// of the database file, which open opens.
func rewritePages(open func() (rewritable, error), pages []uint32, size int) error {
	f, err := open()
	if err != nil {
		return err
	}
	held := pastCache{on: needsWriteThrough(f)}
	buf := make([]byte, size)
	for _, pg := range pages {
		off := int64(pg-1) * int64(size)
		n, rerr := f.ReadAt(buf, off)
		if n > 0 {
			if err := held.write(f, buf[:n], off, errors.Is(rerr, io.EOF)); err != nil {
				return errors.Join(err, f.Close())
			}
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return errors.Join(rerr, f.Close())
		}
	}
	if err := held.sync(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// walPages returns the page numbers the frames of the named WAL name,
// sorted without repeats, and its page size.
func walPages(fsys vfs.FS, name string) ([]uint32, int, error) {
	f, err := openForRewrite(fsys, name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && f == nil) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var hdr [walHeaderBytes]byte
	if n, err := f.ReadAt(hdr[:], 0); n < len(hdr) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, 0, nil // no header: no frame
		}
		return nil, 0, err
	}
	size := int(binary.BigEndian.Uint32(hdr[8:12]))
	if size == 1 {
		size = 65536 // how the format writes 65536
	}
	if size < 512 || size > 65536 || size&(size-1) != 0 {
		return nil, 0, nil // not a WAL header SQLite would read
	}
	seen := map[uint32]bool{}
	var fh [4]byte
	for off := int64(walHeaderBytes); ; off += int64(walFrameHeaderBytes + size) {
		n, err := f.ReadAt(fh[:], off)
		if n < len(fh) {
			if err == nil || errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, err
		}
		if pg := binary.BigEndian.Uint32(fh[:]); pg > 0 {
			seen[pg] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), size, nil
}

// rewriteFile reads the named file and writes every byte back where it
// was, then syncs it, through fsys, or the operating system's files when
// fsys is nil. A missing file is left missing.
func rewriteFile(fsys vfs.FS, name string, bypass bool) error {
	f, err := openForRewrite(fsys, name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && f == nil) {
		return nil
	}
	if err != nil {
		return err
	}
	held := pastCache{on: bypass && needsWriteThrough(f)}
	buf := make([]byte, walChunk)
	for off := int64(0); ; {
		n, rerr := f.ReadAt(buf, off)
		if n > 0 {
			if err := held.write(f, buf[:n], off, errors.Is(rerr, io.EOF)); err != nil {
				return errors.Join(err, f.Close())
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) || (rerr == nil && n == 0) {
			break
		}
		if rerr != nil {
			return errors.Join(rerr, f.Close())
		}
	}
	if err := held.sync(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// pastCache is a repair's writes past the page cache (when on) since its
// last sync, kept in memory until a sync has made them durable: a write
// past the cache drops the range's cached pages, which may have been the
// only copy of bytes a failed sync never wrote (a WAL's frames), and when
// a write or the sync after it fails on a disk that is still failing
// writes (on ext4 a write past the cache has been seen to return, and the
// sync after it to fail), they are written back through the cache, so
// that they stay readable for the next Open's repair. At most walChunk
// bytes are held: the repair syncs each time it has written as much.
type pastCache struct {
	on    bool
	parts []heldPart
	bytes int
}

// heldPart is bytes written at off.
type heldPart struct {
	off int64
	p   []byte
}

// write writes p, read from f at off, back where it was (writeBack), past
// the cache when on, holding a copy until a sync.
func (c *pastCache) write(f rewritable, p []byte, off int64, last bool) error {
	if !c.on {
		return writeBack(f, p, off, last, false)
	}
	c.parts = append(c.parts, heldPart{off, bytes.Clone(p)})
	c.bytes += len(p)
	if err := writeBack(f, p, off, last, true); err != nil {
		return c.restore(f, err)
	}
	if c.bytes >= walChunk {
		return c.sync(f)
	}
	return nil
}

// sync syncs f, restoring what it holds, when on, if the sync fails.
func (c *pastCache) sync(f rewritable) error {
	if err := f.Sync(); err != nil {
		if !c.on {
			return &syncFailure{err}
		}
		return c.restore(f, &syncFailure{err})
	}
	c.parts, c.bytes = c.parts[:0], 0
	return nil
}

// restore writes every part it holds back through the page cache, and
// returns err with whatever that met. It syncs them too, whatever comes of
// it: on a disk that still fails writes that sync fails, and the kernel
// tells this descriptor, so the pages are left readable but clean; without
// it the kernel wrote them back later with no descriptor open, and the
// next Open's descriptors, opened while nobody had been told, were told
// instead (Linux reports a write-back error nobody has seen to a file
// opened after it): that Open's repair failed with room back.
func (c *pastCache) restore(f rewritable, err error) error {
	for _, part := range c.parts {
		if _, werr := f.WriteAt(part.p, part.off); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	_ = f.Sync() // see above: the failure is err's
	c.parts, c.bytes = c.parts[:0], 0
	return err
}

// directAlign is the alignment a write past the page cache (O_DIRECT)
// needs of its offset, length and buffer: a multiple of every logical
// block size in use (512 and 4096 bytes).
const directAlign = 4096

// osFile returns the operating system's file behind f, or nil when f is
// a vfs.FS's.
func osFile(f rewritable) *os.File {
	switch v := f.(type) {
	case *os.File:
		return v
	case sharedFile:
		return v.File
	}
	return nil
}

// needsWriteThrough reports whether the repair must write f past the page
// cache: f has blocks marked unwritten, as a range whose write-back failed
// on ext4 keeps them (writeThrough; through a vfs.FS, vfs.PastCache).
// Where none is, a write through the cache and a sync make the bytes
// durable, at less cost.
func needsWriteThrough(f rewritable) bool {
	if pc, ok := f.(vfs.PastCache); ok {
		return pc.Unwritten()
	}
	osf := osFile(f)
	return osf != nil && unwritten(osf)
}

// writeBack writes p, read from f at off, back where it was. With direct
// it writes past the page cache where it can (writeThrough: a range whose
// write-back failed on ext4 is written for good only so), the aligned part
// of p at least, and when p ends the file (last: the read that got p met
// its end) its last partial block too, padded with zeros and the file cut
// back to its size after; the rest goes through the page cache.
func writeBack(f rewritable, p []byte, off int64, last, direct bool) error {
	if pc, ok := f.(vfs.PastCache); ok && direct {
		return pc.WriteThrough(p, off)
	}
	if osf := osFile(f); direct && osf != nil && off%directAlign == 0 {
		whole := len(p) - len(p)%directAlign
		done := 0
		if whole > 0 {
			ok, err := writeThrough(osf, p[:whole], off)
			if err != nil {
				return err
			}
			if ok {
				done = whole
			}
		}
		if rest := p[done:]; done == whole && len(rest) > 0 && last {
			padded := make([]byte, directAlign)
			copy(padded, rest)
			ok, err := writeThrough(osf, padded, off+int64(done))
			if err != nil {
				return err
			}
			if ok {
				return osf.Truncate(off + int64(len(p)))
			}
		}
		p, off = p[done:], off+int64(done)
	}
	if len(p) == 0 {
		return nil
	}
	_, err := f.WriteAt(p, off)
	return err
}

// openPages opens the database file for rewritePages: through the handle's
// FS, or on the native VFS the process's descriptor of it open to write
// (dbfile.go), which a descriptor of the repair's own would not do: closing
// it would drop every POSIX lock the process holds on the file, SQLite's
// included.
func (db *DB) openPages() (rewritable, error) {
	if db.cfg.fs != nil {
		return openForRewrite(db.cfg.fs, db.path)
	}
	if db.file == nil {
		return nil, fmt.Errorf("%s: the process holds no descriptor of it", db.path)
	}
	f, err := db.file.writable(db.path)
	if err != nil {
		return nil, err
	}
	return sharedFile{f}, nil
}

// sharedFile is the process's descriptor of the database file, open to
// write: synced with fdatasync, as SQLite syncs it, and left open by Close.
type sharedFile struct{ *os.File }

func (s sharedFile) Sync() error  { return datasync(s.File) }
func (s sharedFile) Close() error { return nil }

// rewritable is what rewriteFile needs of a file.
type rewritable interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

// openForRewrite opens the named file to read and write, without creating
// it.
func openForRewrite(fsys vfs.FS, name string) (rewritable, error) {
	if fsys == nil {
		// SQLite names the WAL after the file's real path.
		real, err := filepath.EvalSymlinks(strings.TrimSuffix(name, walSuffix))
		if err != nil {
			return nil, err
		}
		return os.OpenFile(real+walSuffix, os.O_RDWR, 0)
	}
	if ok, err := fsys.Exists(name); err != nil || !ok {
		return nil, err
	}
	f, err := fsys.Open(name, vfs.OpenReadWrite|vfs.OpenWAL)
	if err != nil {
		return nil, err
	}
	return yielding(fsys, f), nil
}
