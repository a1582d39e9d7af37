package vfs

import "errors"

// ErrNoSpace is returned, wrapped, by File.WriteAt (and may be by Truncate)
// when the disk is full, the user's quota is spent or the file would pass
// the largest size it may have (RLIMIT_FSIZE). The VFS reports it to
// SQLite as SQLITE_FULL, so the statement fails with "database or disk is
// full" and the transaction rolls back. From Sync it means nothing more
// than any other failure (File.Sync).
var ErrNoSpace = errors.New("vfs: no space left on device")

// ErrRegister is returned, wrapped, by Register when SQLite refuses the VFS or
// memory for it cannot be had.
var ErrRegister = errors.New("vfs: cannot register")
