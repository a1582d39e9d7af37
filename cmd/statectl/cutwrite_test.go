package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/statekit/statekit/internal/journaltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsOfAWriteCutShortSayHowToRecover: a file no process has open,
// with the rollback journal of a write cut short beside it (read from a
// private copy). Every read command refuses it, naming the journal and
// saying how to put the pages back, rather than reading the half-done
// write the file alone holds, and leaves both files as they were. A write
// command rolls the write back; then every read command sees every row.
func TestReadsOfAWriteCutShortSayHowToRecover(t *testing.T) {
	const n = 50
	path := journaltest.CutWrite(t, t.TempDir(), n)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // statectl's copies go there, and nothing else
	key := journaltest.Key(n - 1)
	run := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
		code := a.main(args)
		return out.String(), errOut.String(), code
	}
	commands := func() [][]string {
		var all [][]string
		for _, c := range readCommands {
			args := append([]string{c[0], path}, c[1:]...)
			for i, a := range args {
				if a == "k" {
					args[i] = key
				}
			}
			all = append(all, args)
		}
		return all
	}
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	journal, err := os.ReadFile(path + "-journal")
	require.NoError(t, err)

	for _, args := range commands() {
		out, errOut, code := run(args...)
		assert.Equal(t, exitError, code, "%s: %s", args, errOut)
		assert.Empty(t, out, "%s", args)
		assert.Equal(t, "statectl: "+path+": a write cut short must be rolled back first: "+path+"-journal holds "+
			"the pages to put back, which a read command may not do; any write command does it, as does the "+
			"application opening the file\n", errOut, "%s", args)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, before, after, "%s changed the file", args)
		left, err := os.ReadFile(path + "-journal")
		require.NoError(t, err)
		assert.Equal(t, journal, left, "%s changed the journal", args)
	}

	_, errOut, code := run("set", path, "other", "1")
	require.Equal(t, 0, code, errOut)
	_, err = os.Stat(path + "-journal")
	assert.ErrorIs(t, err, os.ErrNotExist, "the write rolled the journal back")
	for _, args := range commands() {
		_, errOut, code := run(args...)
		assert.Equal(t, 0, code, "%s: %s", args, errOut)
	}
	out, errOut, code := run("dump", path)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, n+1, strings.Count(out, "\n"), "every row the cut write was deleting, and the new one:\n%s", out)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "every private copy is removed")
}
