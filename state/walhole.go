package state

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/statekit/statekit/state/vfs"
)

// The WAL after a failed sync, on a file system that drops its pages. Some
// file systems (XFS, it was reported) do not keep a failed sync's writes readable, as
// ext4 does (walrepair.go): they drop them, and the WAL's bytes revert to
// what was last durable. The shared-memory index still counts the frames
// those writes held, so every connection reads the reverted bytes as if
// they were the frames, and rewriting the WAL (repairWAL) or checkpointing
// it would make the loss durable: a database file that integrity_check
// rejects, or commits lost in the middle of others.
//
// So before the repair rewrites a byte, under the write lock (no frame can
// be appended meanwhile), walHole reads the index header the connection
// shares and checks the WAL's checksum chain (sqlite.org/fileformat.html,
// "Checksum Algorithm") over every frame the index counts. A break there is
// a hole: the repair is refused with ErrIO, and the handle leaves the WAL as
// it is (holdWAL), never checkpointed. A break after the last frame the
// index counts is normal: a WAL started over keeps the frames of the one
// before past its end.
//
// What comes next: once every connection to the file, in every process,
// has closed, the index is rebuilt from the WAL by the next Open, and
// SQLite's recovery stops at the first frame whose checksum breaks the
// chain: the file opens at the last commit before the hole, as after a
// power loss. Every commit from the hole on was either answered with an
// error (its sync failed, or a sync that reported the failure came after
// it) or not yet durable (SyncNormal): no handle can append a commit behind
// the hole and sync it, since every descriptor open at the failure reports
// it at its next sync, which ends its handle, and a handle opened after the
// failure meets the hole here, at Open, before it writes.

// The WAL header's magic, which says the byte order of its checksums, and
// offsets in the WAL's header and its frames' headers (big-endian) and in
// the index header (native order: the checksum of the last frame it counts,
// at 24); the size of a region of the shared memory.
const (
	walMagicLE          = 0x377f0682 // checksums little-endian
	walMagicBE          = 0x377f0683 // checksums big-endian
	walPageSizeOffset   = 8
	walCksumOffset      = 24
	frameSaltOffset     = 8
	frameCksumOffset    = 16
	shmFrameCksumOffset = 24
	shmRegionBytes      = 32 << 10
)

// walHole returns an error wrapping ErrIO when the WAL does not hold the
// frames the shared-memory index counts as committed (see above), or nil.
// conn holds the write lock (db.locked), so the index holds still.
func (db *DB) walHole(conn *sql.Conn) error {
	hdr, ok := sharedIndexHeader(conn)
	if !ok {
		return nil
	}
	name := db.path + walSuffix
	brk, err := walBreak(db.cfg.fs, name, hdr)
	if err != nil || brk == 0 {
		return err
	}
	return holeError(name, brk, hdr)
}

// holeBehind is walHole for a statement on conn that SQLite reported as
// corruption, without the write lock: another process's failed sync, on a
// file system that drops its writes, leaves frames the shared index counts
// reading back as zeros or older bytes, and a read through them looks like
// a damaged file though the file is sound up to the hole (the next lone
// Open recovers it). The index header is read before and after the WAL,
// and one that changed meanwhile (a writer appended, or started the WAL
// over) is taken as no hole.
func (db *DB) holeBehind(conn *sql.Conn) error {
	h1, ok := sharedIndexHeader(conn)
	if !ok {
		return nil
	}
	name := db.path + walSuffix
	brk, err := walBreak(db.cfg.fs, name, stillCounted(h1))
	h2, ok := sharedIndexHeader(conn)
	if !ok || !bytes.Equal(h1, h2) || err != nil || brk == 0 {
		return nil
	}
	return holeError(name, brk, h1)
}

// stillCounted returns hdr as the index had it before forgetIndex marked
// it for rebuilding (indexforget.go): a reader whose transaction began
// before the mark read through the frames it still counts.
func stillCounted(hdr []byte) []byte {
	if hdr[shmIsInitOffset] != 0 {
		return hdr
	}
	h := slices.Clone(hdr)
	h[shmIsInitOffset] = 1
	return h
}

// holeBeforeOpen is walHole before Open's connections read through the
// WAL, which they would read as the frames the index counts: a page of the
// hole read back as zeros tells "not an SQLite database", and other bytes
// worse. It reads the index another process (or handle) shares: through
// fsys (vfs.SharedIndex), or in the -shm file on the operating system's
// files, as damagedBeforeOpen does (only while no handle of this process
// has the file open). The index is read before and after the WAL: one a
// writer changed meanwhile makes it look again, and one that never holds
// still is taken as sound, as is a WAL that cannot be read (the repair
// looks again under the write lock).
func holeBeforeOpen(fsys vfs.FS, path string) error {
	header, name := besideIndex(fsys, path)
	if header == nil {
		return nil
	}
	for try := 0; try < 3; try++ {
		h1, ok := header()
		if !ok {
			return nil
		}
		brk, err := walBreak(fsys, name, h1)
		h2, ok := header()
		if !ok || !bytes.Equal(h1, h2) {
			continue
		}
		if err != nil || brk == 0 {
			return nil
		}
		return holeError(name, brk, h1)
	}
	return nil
}

// besideIndex returns how to read the index header another process (or
// handle) shares for the file at path, when both its copies agree: through
// fsys (vfs.SharedIndex), or in the -shm file on the operating system's
// files, only while no handle of this process has the file open (nil
// then); and the WAL's name.
func besideIndex(fsys vfs.FS, path string) (header func() ([]byte, bool), wal string) {
	if fsys != nil {
		return func() ([]byte, bool) {
			both := make([]byte, 2*shmHeaderBytes)
			if !vfs.SharedIndex(fsys, path, both) || !bytes.Equal(both[:shmHeaderBytes], both[shmHeaderBytes:]) {
				return nil, false
			}
			return both[:shmHeaderBytes], true
		}, path + walSuffix
	}
	base := realPath(path)
	if openHere(base) {
		return nil, ""
	}
	return func() ([]byte, bool) { return shmFileHeader(base + "-shm") }, base + walSuffix
}

// holeAtOpen is Open's error err, or, when err says the file is damaged or
// not a statekit file and the WAL lost frames its index counts (another
// handle's failed sync dropped them while this Open ran, after
// holeBeforeOpen looked), the hole's ErrIO: the file is sound up to the
// hole. It looks once Open's connections are closed (closing a descriptor
// of the -shm file would drop their locks). When it finds no hole but a WAL
// is beside the file, it cannot tell damage from frames this Open read
// through before the index was rebuilt (the failed handle marked it for
// rebuilding, indexforget.go, or closed and let go of it), and again says
// to open once more: that Open reads the index as rebuilt, or rebuilds it,
// and recovery stops at the break; a damaged file fails it too.
func holeAtOpen(fsys vfs.FS, path string, err error) (again bool, _ error) {
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotStatekit) {
		return false, err
	}
	if hole := holeBeforeOpen(fsys, path); hole != nil {
		return false, &causeError{msg: fmt.Sprintf("open %s: %v (SQLite read it as: %v)", path, hole, err), errs: []error{hole}}
	}
	return walExists(fsys, path), err
}

// walExists reports whether the file at path has a WAL beside it: without
// one there is no hole to meet.
func walExists(fsys vfs.FS, path string) bool {
	if fsys == nil {
		return hasWAL(path)
	}
	ok, err := fsys.Exists(path + walSuffix)
	return err == nil && ok
}

// holeError is the error for a WAL, at name, that lost frames from brk on
// of those its index header hdr counts.
func holeError(name string, brk uint32, hdr []byte) error {
	mx := binary.NativeEndian.Uint32(hdr[shmMaxFrameOffset:])
	return &causeError{
		msg: fmt.Sprintf("%v: wal: %s lost frames its index counts as committed, from frame %d of %d: "+
			"the file system dropped writes that a sync which failed was to make durable (or another program "+
			"overwrote them); the WAL is left as it is, neither repaired nor copied into the file; close every "+
			"handle on the file, in every process, and open it again: it then opens at the last commit before "+
			"frame %d, without the commits from there on",
			ErrIO, name, brk, mx, brk),
		errs: []error{ErrIO},
	}
}

// walBreak returns the first of the frames the index header hdr counts
// that the named WAL does not hold intact (1 is the first frame), or 0
// when it holds them all. A frame is intact when its salts are the WAL
// header's and its checksum continues the chain from the WAL header's; the
// WAL header is intact when its magic, page size, salts and checksum are
// what the index and the format say.
func walBreak(fsys vfs.FS, name string, hdr []byte) (uint32, error) {
	return walScan(fsys, name, hdr, nil)
}

// walScan is walBreak, and calls visit with each intact frame it reads (1
// is the first; the frame's header and page, in a buffer it reuses).
func walScan(fsys vfs.FS, name string, hdr []byte, visit func(i uint32, frame []byte)) (uint32, error) {
	mx := binary.NativeEndian.Uint32(hdr[shmMaxFrameOffset:])
	if hdr[shmIsInitOffset] == 0 || mx == 0 {
		return 0, nil
	}
	size := int(binary.NativeEndian.Uint16(hdr[shmPageSizeOffset:]))
	if size == 1 {
		size = 65536
	}
	f, err := openForRewrite(fsys, name)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && f == nil) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var wh [walHeaderBytes]byte
	if ok, err := readFull(f, wh[:], 0); !ok {
		return 1, err
	}
	magic := binary.BigEndian.Uint32(wh[:])
	if magic != walMagicLE && magic != walMagicBE {
		return 1, nil
	}
	order := binary.ByteOrder(binary.LittleEndian)
	if magic == walMagicBE {
		order = binary.BigEndian
	}
	s0, s1 := walChecksum(order, wh[:walCksumOffset], 0, 0)
	pageSize := int(binary.BigEndian.Uint32(wh[walPageSizeOffset:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	switch {
	case pageSize != size,
		!bytes.Equal(wh[walSaltOffset:walSaltOffset+saltBytes], hdr[shmSaltOffset:shmSaltOffset+saltBytes]),
		s0 != binary.BigEndian.Uint32(wh[walCksumOffset:]) || s1 != binary.BigEndian.Uint32(wh[walCksumOffset+4:]):
		return 1, nil
	}
	frame := make([]byte, walFrameHeaderBytes+size)
	for i := uint32(1); i <= mx; i++ {
		off := int64(walHeaderBytes) + int64(i-1)*int64(len(frame))
		if ok, err := readFull(f, frame, off); !ok {
			return i, err
		}
		s0, s1 = walChecksum(order, frame[:8], s0, s1)
		s0, s1 = walChecksum(order, frame[walFrameHeaderBytes:], s0, s1)
		switch {
		case binary.BigEndian.Uint32(frame) == 0,
			!bytes.Equal(frame[frameSaltOffset:frameSaltOffset+saltBytes], wh[walSaltOffset:walSaltOffset+saltBytes]),
			s0 != binary.BigEndian.Uint32(frame[frameCksumOffset:]) || s1 != binary.BigEndian.Uint32(frame[frameCksumOffset+4:]):
			return i, nil
		}
		if visit != nil {
			visit(i, frame)
		}
	}
	if s0 != binary.NativeEndian.Uint32(hdr[shmFrameCksumOffset:]) || s1 != binary.NativeEndian.Uint32(hdr[shmFrameCksumOffset+4:]) {
		return mx, nil // a chain, but not the one the index recorded
	}
	return 0, nil
}

// readFull reads len(p) bytes at off: false with a nil error when the file
// ends first, false with the error when the read fails.
func readFull(f io.ReaderAt, p []byte, off int64) (bool, error) {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return true, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return false, nil
	}
	return false, err
}

// walChecksum continues the WAL's checksum (s0, s1) over b, whose length is
// a multiple of 8, reading its 32-bit words in order.
func walChecksum(order binary.ByteOrder, b []byte, s0, s1 uint32) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}

// sharedIndexHeader returns the WAL index header as conn's connection
// shares it with every other (the first of its two copies, at the start of
// the shared memory's first region), when both copies agree; false when it
// cannot be had (no shared memory mapped, a driver without the SQLite
// handle). It maps nothing new: it asks the connection's own database file
// (SQLITE_FCNTL_FILE_POINTER) for the region it has mapped, through the
// VFS's xShmMap, so it opens no descriptor of the -shm file (closing one
// would drop the process's locks on it) and reads what the Go VFS keeps in
// memory as well. Callers hold conn, in a transaction: its shared memory is
// mapped.
func sharedIndexHeader(conn *sql.Conn) ([]byte, bool) {
	var hdr []byte
	_ = conn.Raw(func(dc any) error {
		v, ok := newShmView(dc)
		if !ok {
			return nil
		}
		defer v.close()
		if region := v.region(); region != 0 {
			hdr, _ = indexHeaderAt(region)
		}
		return nil
	})
	return hdr, hdr != nil
}
