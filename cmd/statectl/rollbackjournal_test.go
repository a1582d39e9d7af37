package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/journaltest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runHere runs statectl's main in this process and returns its stdout,
// stderr and exit status.
func runHere(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut}
	code := a.main(args)
	return out.String(), errOut.String(), code
}

// TestReadsOfAWriteCutShortSayHowToRecover: a file no process has open,
// with the rollback journal of a write cut short beside it. Every read
// command refuses it, naming the journal and saying how to put the pages
// back, rather than reading the half-done write the file alone holds, and
// leaves both files as they were, with nothing created beside them. A
// write command rolls the write back; then every read command sees every
// row.
func TestReadsOfAWriteCutShortSayHowToRecover(t *testing.T) {
	const n = 50
	path := journaltest.CutWrite(t, t.TempDir(), n)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // statectl's copies go there, and nothing else
	key := journaltest.Key(n - 1)
	run := runHere
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
		assertNothingBeside(t, path, args)
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

// TestSnapshotTakesTheJournal: the private copy of a file no process has
// open takes the rollback journal beside it with the -wal, so a copy made
// of a file whose write was cut short reads as the file would: refused,
// not the half-done write (read from the file alone, it is a corrupt file).
func TestSnapshotTakesTheJournal(t *testing.T) {
	path := journaltest.CutWrite(t, t.TempDir(), 50)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	db, err := openSnapshot(path)
	if db != nil {
		removeSnapshot(db)
		db.Close()
	}
	require.ErrorIs(t, err, state.ErrUnfinishedWrite)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the copy is removed")
}

// TestReadsBesideAWriterInRollbackMode: another program switched the file
// to a rollback journal and holds a write open, its journal beside the
// file. Before its journal is synced (its header still zeroed) every read
// command reads the last commit; once the write has spilled pages into the
// file (the journal synced, its header written, the file locked) a read
// waits for the writer's commit and reads it, never the half-done write.
// Nothing is created beside the file.
func TestReadsBesideAWriterInRollbackMode(t *testing.T) {
	for _, spill := range []bool{false, true} {
		t.Run(map[bool]string{false: "before its journal is synced", true: "with pages spilled"}[spill], func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "app.state")
			writeStateFile(t, path, 0)
			t.Setenv("TMPDIR", t.TempDir())
			raw, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			defer raw.Close()
			conn, err := raw.Conn(ctx)
			require.NoError(t, err)
			defer conn.Close()
			write := []string{"PRAGMA journal_mode=DELETE", "BEGIN IMMEDIATE", "UPDATE kv SET value = 'next' WHERE key = 'k'"}
			if spill {
				write = append(write[:2], "PRAGMA cache_size=2", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 200) INSERT INTO kv(key, value) SELECT 'n' || i, zeroblob(900) FROM n", write[2])
			}
			for _, q := range write {
				_, err := conn.ExecContext(ctx, q)
				require.NoError(t, err, q)
			}
			require.Equal(t, spill, hasJournal(path))

			if !spill {
				for _, args := range readCommands {
					args := append([]string{args[0], path}, args[1:]...)
					_, errOut, code := runHere(args...)
					assert.Equal(t, 0, code, "%s: %s", args, errOut)
					assertNothingBeside(t, path, args)
				}
				out, errOut, code := runHere("get", path, "k")
				require.Equal(t, 0, code, errOut)
				assert.Equal(t, "hello\n", out, "the write is not committed yet")
			}

			committed := make(chan error, 1)
			go func() {
				time.Sleep(100 * time.Millisecond)
				_, err := conn.ExecContext(ctx, "COMMIT")
				committed <- err
			}()
			out, errOut, code := runHere("get", path, "k")
			require.NoError(t, <-committed)
			require.Equal(t, 0, code, errOut)
			if spill {
				assert.Equal(t, "next\n", out, "the read waited for the commit")
			}
			assertNothingBeside(t, path, []string{"get"})
			out, errOut, code = runHere("get", path, "k")
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "next\n", out)
		})
	}
}
