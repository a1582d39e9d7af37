package faults

import "errors"

// ErrPowerLost is returned, wrapped, by every call on a MemFS view or file
// made while the power is off, or through a view or file that was opened
// before the last power loss: those belong to processes that died with the
// machine, and stay refused after Reboot.
var ErrPowerLost = errors.New("faults: power lost")

// ErrCrashed is returned, wrapped, by every call on a MemFS view or file of a
// process that crashed (MemFS.Crash) after the view was made.
var ErrCrashed = errors.New("faults: process crashed")

// ErrInjected is returned, wrapped, by a MemFS read, write, sync, truncate
// or directory sync chosen to fail by MemFS.FailAt or MemFS.SetFailRate.
var ErrInjected = errors.New("faults: injected I/O error")

// ErrClosed is returned, wrapped, by calls on a MemFS file after its Close.
var ErrClosed = errors.New("faults: file closed")

// ErrReadOnly is returned, wrapped, by writes and truncates through a MemFS
// file opened without vfs.OpenReadWrite.
var ErrReadOnly = errors.New("faults: file opened read-only")
