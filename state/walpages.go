package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"github.com/statekit/statekit/state/vfs"
)

// The pages a repair writes come from the WAL, not from the database file.
// After a failed sync of the database file its pages stay readable in the
// page cache only until the kernel reclaims them, page by page, at any
// later moment (Linux marks them clean: nothing writes them again). A
// repair that read a reclaimed page back from the file would read what the
// disk holds, older than what the checkpoint copied there, and make that
// durable: the commits the page held, FULL grants among them, would be gone
// once the WAL started over. The WAL still holds, intact, the frame each of
// those pages was copied from (the WAL starts over only after a checkpoint
// that synced the file), and the checkpoint copied the last frame of each
// page up to the backfill mark. So rewriteBackfilled takes each page from
// there (of the pages with no frame past the mark, which the next
// checkpoint writes again), checks the WAL's checksum chain on the way, and checks each page's
// bytes again when it reads them to write (a reclaimed page of the WAL
// reads back changed).

// frameRef is where a page's frame lies in the WAL (the offset of its
// page's bytes) and a checksum of those bytes as the chain check read them.
type frameRef struct {
	off int64
	sum uint32
}

// rewriteBackfilled rewrites in place, and syncs, every page of the
// database file that the WAL's frames up to the backfill mark of the index
// at region name, and none past it, with its last frame up to the mark. It reports false,
// having written nothing, when the index header is being changed or the
// WAL does not hold every frame up to the mark intact. The caller holds the
// write lock, and the checkpointer's lock unless a checkpoint copied the
// whole WAL under that write lock (none has anything left to write then).
func (db *DB) rewriteBackfilled(region uintptr) (bool, error) {
	hdr, ok := indexHeaderAt(region)
	if !ok {
		return false, nil
	}
	backfill := binary.NativeEndian.Uint32(backfillAt(region))
	wal := db.path + walSuffix
	frames, dbPages, brk, err := backfilledFrames(db.cfg.fs, wal, hdr, backfill)
	if err != nil || (brk != 0 && brk <= backfill) {
		return false, err
	}
	if len(frames) > 0 {
		if err := rewritePagesFromWAL(db.openPages, db.cfg.fs, wal, frames, pageBytes(hdr), dbPages); err != nil {
			return false, err
		}
	}
	return true, nil
}

// pageBytes is the page size the index header hdr records.
func pageBytes(hdr []byte) int {
	size := int(binary.NativeEndian.Uint16(hdr[shmPageSizeOffset:]))
	if size == 1 {
		return 65536 // how the format writes 65536
	}
	return size
}

// backfilledFrames returns, for each page that the frames up to backfill
// of the named WAL name and none past it, its last such frame (a
// checkpoint stopped short by a reader's snapshot copies no page whose
// last frame lies past where it stops, and the next checkpoint writes it
// from that frame); the database's size in pages
// after the last commit among them (0 when none commits); and where the
// WAL's checksum chain breaks (walScan, under the index header hdr).
func backfilledFrames(fsys vfs.FS, wal string, hdr []byte, backfill uint32) (map[uint32]frameRef, uint32, uint32, error) {
	frames := map[uint32]frameRef{}
	past := map[uint32]bool{}
	var dbPages uint32
	size := int64(pageBytes(hdr))
	brk, err := walScan(fsys, wal, hdr, func(i uint32, frame []byte) {
		pg := binary.BigEndian.Uint32(frame)
		if i > backfill {
			past[pg] = true
			return
		}
		off := walHeaderBytes + int64(i-1)*(walFrameHeaderBytes+size) + walFrameHeaderBytes
		frames[pg] = frameRef{off, crc32.ChecksumIEEE(frame[walFrameHeaderBytes:])}
		if commit := binary.BigEndian.Uint32(frame[4:]); commit != 0 {
			dbPages = commit
		}
	})
	for pg := range past {
		delete(frames, pg)
	}
	return frames, dbPages, brk, err
}

// rewritePagesFromWAL writes in place, and syncs, each page of frames (of
// size bytes) into the database file, which open opens, taking its bytes
// from the named WAL; pages past dbPages (when not 0) are left out, as a
// checkpoint leaves them. A page whose bytes no longer match what the
// chain check read is an ErrIO naming the WAL: nothing is synced then.
func rewritePagesFromWAL(open func() (rewritable, error), fsys vfs.FS, wal string, frames map[uint32]frameRef, size int, dbPages uint32) error {
	src, err := openForRewrite(fsys, wal)
	if err == nil && src == nil {
		err = fmt.Errorf("%s: missing", wal)
	}
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := open()
	if err != nil {
		return err
	}
	held := pastCache{on: needsWriteThrough(f)}
	buf := make([]byte, size)
	for _, pg := range slices.Sorted(maps.Keys(frames)) {
		if pg == 0 || (dbPages != 0 && pg > dbPages) {
			continue
		}
		ref := frames[pg]
		ok, rerr := readFull(src, buf, ref.off)
		if !ok || crc32.ChecksumIEEE(buf) != ref.sum {
			return errors.Join(frameChanged(wal, pg, rerr), f.Close())
		}
		if err := held.write(f, buf, int64(pg-1)*int64(size), false); err != nil {
			return errors.Join(err, f.Close())
		}
	}
	if err := held.sync(f); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// frameChanged is the error for a frame of the WAL, of page pg, that read
// back other bytes (or none, or failed: err) than the checksum chain held.
func frameChanged(wal string, pg uint32, err error) error {
	return &causeError{
		msg: fmt.Sprintf("%v: wal: %s: the last frame of page %d read back other bytes than a moment before "+
			"(the file system dropped writes a failed sync was to make durable)", ErrIO, wal, pg),
		errs: []error{ErrIO, err},
	}
}
