//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutputThatCannotBeWrittenFails: every command whose answer could not
// be written to stdout (/dev/full) exits 2 saying why, though the verb
// itself succeeded.
func TestOutputThatCannotBeWrittenFails(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer full.Close()
	statectl := statectlCopy(t)
	path := filepath.Join(t.TempDir(), "app.state")
	_, errOut, code := runStatectl(t, statectl, t.TempDir(), -1, "set", path, "k", "v", "--ttl", "1h")
	require.Equal(t, 0, code, errOut)

	for _, args := range [][]string{
		{"get", path, "k"}, {"ttl", path, "k"}, {"ttl", path, "k", "--ms"}, {"incr", path, "n"}, {"decr", path, "n"},
		{"del", path, "nope"}, {"dump", path}, {"dump", path, "--json"}, {"leases", path, "--all", "--json"},
		{"info", path}, {"check", path}, {"check", path, "--json"}, {"sweep", path}, {"sweep", path, "--json"},
		{"help"}, {"get", "--help"},
	} {
		if args[0] == "leases" {
			// A lease to print.
			_, errOut, code := runStatectl(t, statectl, t.TempDir(), -1, "run", path, "--lease", "job", "--", "true")
			require.Equal(t, 0, code, errOut)
		}
		cmd := exec.Command(statectl, args...)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		var errBuf bytes.Buffer
		cmd.Stdout, cmd.Stderr = full, &errBuf
		code := exitCode(t, cmd.Run())
		assert.Equal(t, 2, code, "%s: %s", args, errBuf.String())
		assert.Contains(t, errBuf.String(), "no space left on device", "%s", args)
	}
}
