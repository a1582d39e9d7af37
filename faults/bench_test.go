package faults_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

// BenchmarkCommit measures upsert commits per second on MemFS (the
// simulator's speed rests on it) beside native SQLite (unix VFS) on a file in
// the test's temp directory, and the OS passthrough FS, with
// synchronous=NORMAL and FULL.
//
//	go test -run - -bench Commit ./faults/
func BenchmarkCommit(b *testing.B) {
	for _, sync := range []string{"NORMAL", "FULL"} {
		b.Run("memfs/"+sync, func(b *testing.B) {
			name, unregister, err := vfs.Register(faults.NewMemFS(1).Process(1))
			require.NoError(b, err)
			defer unregister()
			benchCommits(b, "file:bench.db?vfs="+name, sync)
		})
		b.Run("native/"+sync, func(b *testing.B) {
			benchCommits(b, "file:"+filepath.Join(b.TempDir(), "bench.db"), sync)
		})
		b.Run("os-passthrough/"+sync, func(b *testing.B) {
			name, unregister, err := vfs.Register(vfs.OS())
			require.NoError(b, err)
			defer unregister()
			benchCommits(b, "file:"+filepath.Join(b.TempDir(), "bench.db")+"?vfs="+name, sync)
		})
	}
}

// benchCommits runs b.N autocommit upserts through dsn in WAL mode.
func benchCommits(b *testing.B, dsn, sync string) {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("sqlite", dsn+sep+"_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")")
	require.NoError(b, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	_, err = db.ExecContext(ctx, `CREATE TABLE kv(k TEXT PRIMARY KEY, v INTEGER)`)
	require.NoError(b, err)
	stmt, err := db.PrepareContext(ctx, `INSERT INTO kv(k, v) VALUES(?, 1) ON CONFLICT(k) DO UPDATE SET v = v + 1`)
	require.NoError(b, err)
	defer stmt.Close()

	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := stmt.ExecContext(ctx, fmt.Sprintf("key-%d", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
