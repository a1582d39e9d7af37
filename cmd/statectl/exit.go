package main

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"syscall"

	"github.com/statekit/statekit/state"
)

// Exit statuses.
const (
	exitOK       = 0
	exitNo       = 1  // not found, not swapped, nothing deleted, check findings
	exitError    = 2  // bad usage, a file that cannot be used, a failed verb
	exitHeld     = 75 // run: the lease is held by another owner (EX_TEMPFAIL)
	exitLost     = 76 // run: the lease was lost while the command ran
	exitNoExec   = 126
	exitNotFound = 127
)

// exitErr ends statectl with a status and a message (none when msg is
// empty).
type exitErr struct {
	code  int
	msg   string
	cause error // the library's error it reports, if any
}

func (e *exitErr) Error() string { return e.msg }

// Unwrap returns the library's error the exit reports, or nil.
func (e *exitErr) Unwrap() error { return e.cause }

// exit returns an error that ends statectl with code and a message.
func exit(code int, format string, args ...any) error {
	return &exitErr{code: code, msg: fmt.Sprintf(format, args...)}
}

// usageError is an exit with status 2 about how the command was called.
func usageError(cmd, format string, args ...any) error {
	return exit(exitError, "%s: %s (see statectl %s --help)", cmd, fmt.Sprintf(format, args...), cmd)
}

// describe returns the exit status and the one-line message for err.
func describe(err error) (int, string) {
	var e *exitErr
	if errors.As(err, &e) {
		return e.code, e.msg
	}
	return exitError, oneLine(err.Error())
}

// fileError names path and the cause of err in one line, with status 2.
func fileError(path string, err error) error {
	return &exitErr{code: exitError, msg: fileMessage(path, err), cause: err}
}

// fileMessage names path and the cause of err.
func fileMessage(path string, err error) string {
	path = shown(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path + ": no such file"
	case errors.Is(err, state.ErrUnfinishedWrite):
		where := ""
		if errors.Is(err, syscall.EROFS) {
			where = "on its file system mounted writable, "
		}
		return fmt.Sprintf("%s: a write cut short must be rolled back first: %s-journal holds the pages to put "+
			"back, which a read command may not do; %sany write command does it, as does the application "+
			"opening the file", path, path, where)
	case errors.Is(err, fs.ErrPermission) && !errors.Is(err, state.ErrReadOnly):
		// (The library's ErrReadOnly says which files SQLite could not
		// create, and where: the file itself may be writable.)
		return path + ": permission denied"
	}
	msg := oneLine(unprefix(uncopied(err.Error())))
	if strings.Contains(msg, path) {
		return msg
	}
	return path + ": " + msg
}

// readOnlyOpenMessage explains why a read-only open of path failed with
// ErrReadOnly: SQLite must create path-wal and path-shm to read a WAL file
// that has none, and the directory does not let it.
func readOnlyOpenMessage(path string, err error) string {
	return fmt.Sprintf("%s: cannot read it without writing %s-wal and %s-shm beside it, "+
		"which SQLite needs for a WAL file and the directory does not allow (%s)",
		path, path, path, unprefix(err.Error()))
}

// sentinelPrefix is the "statekit: " that starts the library's sentinel
// errors, at the start of a message or after a wrapping context.
var sentinelPrefix = regexp.MustCompile(`(^|: )statekit: `)

// unprefix drops the library's "statekit: " prefixes: statectl names
// itself.
func unprefix(msg string) string { return sentinelPrefix.ReplaceAllString(msg, "$1") }

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}

// notFound is the exit for a key that is absent or expired.
func notFound(path, key string) error {
	return exit(exitNo, "%s: key %s not found", shown(path), quote(key))
}

// isNotFound reports whether err is the library's "not found".
func isNotFound(err error) bool { return errors.Is(err, state.ErrNotFound) }
