package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	sqlite3 "modernc.org/sqlite/lib"

	"modernc.org/libc"
)

// A write refused for want of room must leave nothing, even after a crash.
// SQLite writes a frame's 24-byte header and its page apart, so a full
// disk can refuse the page after it took the header. The bytes at the
// page's place in the WAL are then whatever was written there before, and
// when they are the very page this commit meant to write (an earlier
// attempt at the same place wrote it: a group commit that failed at a
// later frame, then one of its verbs alone), the refused commit's last
// frame is whole and valid on disk. SQLite does not see it (the WAL index
// ends before it), but a process that recovers the WAL after a crash or a
// power loss does, and brings back a write that was answered ErrDiskFull
// (found by statesim -seed 7300502). So after a refused write the engine
// cuts the WAL back to its last committed frame, holding the write lock,
// and syncs it; if it cannot, the write's outcome is unknown: ErrIO.

// dropRefusedFrames cuts the WAL file back to the end of its last committed
// frame, holding the write lock on the handle's connection, and syncs it.
// It does nothing inside a transaction (its end comes back here). Callers
// hold mu, right after a write refused with ErrDiskFull.
func (db *DB) dropRefusedFrames() error {
	if db.conn == nil || db.cfg.readOnly || !db.autocommit() {
		return nil
	}
	ctx := context.Background()
	before, err := db.dataVersion(ctx)
	if err != nil {
		return err
	}
	hdr, ok := indexHeader(db.conn)
	if !ok {
		return fmt.Errorf("the WAL index cannot be read")
	}
	if _, err := db.st.begin.ExecContext(ctx); err != nil {
		return err
	}
	defer func() { _, _ = db.st.rollback.ExecContext(ctx) }()
	if now, err := db.dataVersion(ctx); err != nil || now != before {
		// Another process committed since: its frames overwrote the
		// refused ones from their start, and the checksums chain no
		// further.
		return err
	}
	pageSize := int64(binary.NativeEndian.Uint16(hdr[shmPageSizeOffset:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	end := walHeaderBytes + int64(binary.NativeEndian.Uint32(hdr[shmMaxFrameOffset:]))*(walFrameHeaderBytes+pageSize)
	f, err := openForRewrite(db.cfg.fs, db.path+walSuffix)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && f == nil) {
		return nil // no WAL, no frame to cut
	}
	if err != nil {
		return err
	}
	w, ok := f.(interface{ Truncate(int64) error })
	if !ok {
		return errorsJoinClose(fmt.Errorf("the WAL cannot be cut"), f)
	}
	if err := w.Truncate(end); err != nil {
		return errorsJoinClose(err, f)
	}
	if err := f.Sync(); err != nil {
		return errorsJoinClose(err, f)
	}
	return f.Close()
}

// errorsJoinClose closes f and returns err with the close's error, if any.
func errorsJoinClose(err error, f interface{ Close() error }) error {
	if cerr := f.Close(); cerr != nil {
		return fmt.Errorf("%w; close: %v", err, cerr)
	}
	return err
}

// refusedWrite is note's answer for a write refused with ErrDiskFull:
// err itself once dropRefusedFrames cut the WAL back, else ErrIO, since
// the refused commit may come back after a crash.
func (db *DB) refusedWrite(err error) error {
	derr := db.dropRefusedFrames()
	if derr == nil {
		return err
	}
	return &causeError{
		msg: fmt.Sprintf("%v: %v, and its frames could not be cut from the WAL (%v): the write may come back "+
			"after a crash; reopen the file", ErrIO, err, derr),
		errs: []error{ErrIO, derr}, // not ErrDiskFull: the handle has ended
	}
}

// dataVersion returns PRAGMA data_version on the handle's connection: it
// changes when another connection commits.
func (db *DB) dataVersion(ctx context.Context) (int64, error) {
	var v int64
	err := db.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	return v, err
}

// autocommit reports whether the handle's connection has no transaction
// open (sqlite3_get_autocommit).
func (db *DB) autocommit() bool {
	auto := true
	_ = db.conn.Raw(func(dc any) error {
		if h := sqliteHandle(dc); h != 0 {
			tls := libc.NewTLS()
			defer tls.Close()
			auto = sqlite3.Xsqlite3_get_autocommit(tls, h) != 0
		}
		return nil
	})
	return auto
}
