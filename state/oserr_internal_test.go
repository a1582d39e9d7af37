package state

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseOSLog(t *testing.T) {
	e, ok := parseOSLog("os_unix.c:47513: (24) open(/dir/a (1).state-wal) - ")
	assert.True(t, ok)
	assert.Equal(t, osLogEntry{op: "open", path: "/dir/a (1).state-wal", errno: syscall.Errno(24)}, e)
	e, ok = parseOSLog("os_unix.c:41002: (5) fsync(/x/app.state) - input/output error")
	assert.True(t, ok)
	assert.Equal(t, osLogEntry{op: "fsync", path: "/x/app.state", errno: syscall.Errno(5)}, e)
	for _, msg := range []string{
		"statement aborts at 29: unable to open database file",
		"cannot open file at line 47513 of [555e07ef33]",
		"os_unix.c:1: (0) open(/x) - ",
		"os_unix.c:1: (x) open(/x) - ",
	} {
		_, ok := parseOSLog(msg)
		assert.False(t, ok, msg)
	}
}

func TestOSCauseLooksOnlyAfterTheMark(t *testing.T) {
	watchSQLiteLog()
	mark := osLogMark()
	sqliteLoggedText("os_unix.c:1: (24) open(/nowhere/x.state-wal) - ")
	err := osCause("/nowhere/x.state", mark)
	assert.ErrorIs(t, err, syscall.EMFILE)
	var pe *fs.PathError
	assert.True(t, errors.As(err, &pe))
	assert.Equal(t, "/nowhere/x.state-wal", pe.Path)
	assert.NoError(t, osCause("/nowhere/x.state", osLogMark()), "nothing logged since")
	assert.NoError(t, osCause("/nowhere/y.state", mark), "another file")
}
