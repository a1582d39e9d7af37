//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsOfAFileWrittenWhileCopiedSeeTheWrite: a read command copies a
// file no process has open, and a writer comes before it has read the file
// again (afterCopy). The copy is thrown away, not read: a writer that stays
// is read beside its -wal, one that came and went from a new copy, and a
// file that changes at every copy fails, saying so, after copyTries. Each
// time the read sees what the writer committed, and no copy is left in
// $TMPDIR. The writers are other processes, as they would be.
func TestReadsOfAFileWrittenWhileCopiedSeeTheWrite(t *testing.T) {
	statectl := statectlCopy(t)
	base, tmp := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", tmp) // statectl's copies go there, and nothing else
	scratch := func() string {
		dir, err := os.MkdirTemp(base, "")
		require.NoError(t, err)
		return dir
	}
	read := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
		code := a.main(args)
		return out.String(), errOut.String(), code
	}
	newFile := func() string {
		path := filepath.Join(scratch(), "app.state")
		writeStateFile(t, path, 0)
		return path
	}
	setAfterCopy := func(fn func(path string)) {
		afterCopy = fn
		t.Cleanup(func() { afterCopy = nil })
	}
	write := func(args ...string) {
		_, errOut, code := runStatectl(t, statectl, scratch(), -1, args...)
		require.Equal(t, 0, code, "%s: %s", args, errOut)
	}

	t.Run("a writer that stays", func(t *testing.T) {
		path := newFile()
		dir := scratch()
		started, stop := filepath.Join(dir, "started"), filepath.Join(dir, "stop")
		var writer *exec.Cmd
		exited := make(chan error, 1)
		setAfterCopy(func(string) {
			if writer != nil {
				return
			}
			writer = statectlCommand(statectl, scratch(), "run", path, "--lease", "busy", "--ttl", "1m", "--",
				"sh", "-c", `touch "$1"; n=0; until [ -e "$2" ] || [ $n -ge 6000 ]; do sleep 0.01; n=$((n+1)); done`,
				"sh", started, stop)
			require.NoError(t, writer.Start())
			go func() { exited <- writer.Wait() }()
			for i := 0; ; i++ {
				if _, err := os.Stat(started); err == nil {
					return // the lease is taken, and the writer holds the file open
				}
				select {
				case err := <-exited:
					t.Fatalf("the writer ended (%v) before it took its lease", err)
				default:
				}
				require.Less(t, i, 2000, "the writer did not take its lease within 20s")
				time.Sleep(10 * time.Millisecond)
			}
		})
		out, errOut, code := read("leases", path)
		require.NoError(t, os.WriteFile(stop, nil, 0o600))
		require.NotNil(t, writer, "the hook ran")
		require.NoError(t, <-exited)
		assert.Equal(t, 0, code, errOut)
		assert.Regexp(t, `(?m)^busy\t`, out, "the lease the writer took after the copy")
		assertNoCopyLeft(t, tmp, []string{"leases"})
	})

	t.Run("a writer that came and went", func(t *testing.T) {
		path := newFile()
		calls := 0
		setAfterCopy(func(string) {
			calls++
			if calls == 1 {
				write("set", path, "k", "new")
			}
		})
		out, errOut, code := read("get", path, "k")
		assert.Equal(t, 0, code, errOut)
		assert.Equal(t, "new\n", out, "the value the writer set after the copy")
		assert.Equal(t, 2, calls, "a second copy, which stood still")
		assertNoCopyLeft(t, tmp, []string{"get"})
	})

	t.Run("a file that changes at every copy", func(t *testing.T) {
		path := newFile()
		calls := 0
		setAfterCopy(func(string) {
			calls++
			write("incr", path, "n")
		})
		out, errOut, code := read("get", path, "k")
		assert.Equal(t, 2, code, out)
		assert.Equal(t, copyTries, calls)
		assert.Equal(t, "statectl: "+path+": it changed while statectl copied it to read without creating files beside it; try again\n", errOut)
		assert.Empty(t, out)
		assertNoCopyLeft(t, tmp, []string{"get"})
	})
}
