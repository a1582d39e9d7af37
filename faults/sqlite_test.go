package faults_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

// process is one simulated process's database handle over a MemFS view.
type process struct {
	db   *sql.DB
	conn *sql.Conn
	ctx  context.Context // cancellable, so modernc's busy handler waits in Go
	stop func()
}

// openProcess registers view and opens "test.db" through it in WAL mode with
// one connection. It returns an error when SQLite cannot open the file.
func openProcess(view vfs.FS, checkpointPages int) (*process, error) {
	name, unregister, err := vfs.Register(view)
	if err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("file:test.db?vfs=%s&_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)"+
		"&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(%d)", name, checkpointPages)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		unregister()
		return nil, err
	}
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := db.Conn(ctx)
	if err != nil {
		cancel()
		_ = db.Close()
		unregister()
		return nil, err
	}
	return &process{db: db, conn: conn, ctx: ctx, stop: func() {
		cancel()
		_ = conn.Close()
		_ = db.Close()
		unregister()
	}}, nil
}

// mustOpen is openProcess failing the test on error.
func mustOpen(t testing.TB, view vfs.FS, checkpointPages int) *process {
	t.Helper()
	p, err := openProcess(view, checkpointPages)
	require.NoError(t, err)
	t.Cleanup(p.stop)
	return p
}

func (p *process) exec(q string, args ...any) error {
	_, err := p.conn.ExecContext(p.ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%.30s: %w", q, err)
	}
	return nil
}

const schema = `CREATE TABLE IF NOT EXISTS t(seq INTEGER PRIMARY KEY, n INTEGER, pid INTEGER, pad BLOB)`

// commit runs one write transaction: row n, numbered seq in commit order.
func (p *process) commit(n, pid int, full bool) error {
	if full {
		if err := p.exec(`PRAGMA synchronous=FULL`); err != nil {
			return err
		}
		defer func() { _ = p.exec(`PRAGMA synchronous=NORMAL`) }()
	}
	if err := p.exec(`BEGIN IMMEDIATE`); err != nil {
		return err
	}
	err := p.exec(`INSERT INTO t(seq, n, pid, pad) VALUES((SELECT coalesce(max(seq), 0) + 1 FROM t), ?, ?, zeroblob(700))`, n, pid)
	if err != nil {
		_ = p.exec(`ROLLBACK`)
		return err
	}
	return p.exec(`COMMIT`)
}

// integrity runs PRAGMA integrity_check.
func (p *process) integrity(t testing.TB) string {
	t.Helper()
	var res string
	require.NoError(t, p.conn.QueryRowContext(p.ctx, `PRAGMA integrity_check`).Scan(&res))
	return res
}

// rows returns the surviving rows' n, in seq order, and checks seq is 1..len.
func (p *process) rows(t testing.TB) []int {
	t.Helper()
	rs, err := p.conn.QueryContext(p.ctx, `SELECT seq, n FROM t ORDER BY seq`)
	require.NoError(t, err)
	defer rs.Close()
	var ns []int
	for rs.Next() {
		var seq, n int
		require.NoError(t, rs.Scan(&seq, &n))
		require.Equal(t, len(ns)+1, seq, "seq has no gaps")
		ns = append(ns, n)
	}
	require.NoError(t, rs.Err())
	return ns
}

// sqliteCode returns the SQLite result code inside err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func TestSQLiteRunsWALOverMemFS(t *testing.T) {
	m := faults.NewMemFS(1)
	p := mustOpen(t, m.Process(1), 1000)
	var mode string
	require.NoError(t, p.conn.QueryRowContext(p.ctx, `PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "wal", mode)
	require.NoError(t, p.exec(schema))
	for i := range 10 {
		require.NoError(t, p.commit(i, 1, false))
	}
	assert.Equal(t, []string{"test.db", "test.db-wal"}, m.Files())
	p.stop()
	assert.Equal(t, []string{"test.db"}, m.Files(), "the last close checkpoints and deletes the WAL")

	q := mustOpen(t, m.Process(1), 1000)
	assert.Equal(t, "ok", q.integrity(t))
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, q.rows(t))

	// anonymous temporary files: a temp table and VACUUM's copy
	require.NoError(t, q.exec(`PRAGMA temp_store=FILE`))
	require.NoError(t, q.exec(`CREATE TEMP TABLE scratch AS SELECT * FROM t`))
	require.NoError(t, q.exec(`VACUUM`))
	assert.Equal(t, "ok", q.integrity(t))
	assert.Equal(t, []string{"test.db", "test.db-wal"}, m.Files(), "temporary files have no names")
}

func TestSQLiteRunsARollbackJournalOverMemFS(t *testing.T) {
	m := faults.NewMemFS(1)
	name, unregister, err := vfs.Register(m.Process(1))
	require.NoError(t, err)
	defer unregister()
	db, err := sql.Open("sqlite", "file:test.db?vfs="+name+"&_pragma=journal_mode(DELETE)")
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t(n INTEGER); INSERT INTO t VALUES (1), (2)`)
	require.NoError(t, err)
	var sum int
	require.NoError(t, db.QueryRow(`SELECT sum(n) FROM t`).Scan(&sum))
	assert.Equal(t, 3, sum)
	assert.Equal(t, []string{"test.db"}, m.Files(), "the journal is deleted after each commit")
}

func TestSQLiteProcessesWriteConcurrently(t *testing.T) {
	const procs, commits = 4, 40
	m := faults.NewMemFS(1)
	// Real goroutines contend, so SQLite's WAL read retries must really wait
	// for each other (without it: SQLITE_PROTOCOL under -race).
	m.SetSleep(time.Sleep)
	setup := mustOpen(t, m.Process(0), 20)
	require.NoError(t, setup.exec(schema))

	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for pid := 1; pid <= procs; pid++ {
		p := mustOpen(t, m.Process(pid), 20)
		wg.Go(func() {
			for i := range commits {
				if err := p.commit(pid*1000+i, pid, i%5 == 0); err != nil {
					errs <- fmt.Errorf("process %d commit %d code %d: %w", pid, i, sqliteCode(err), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, "ok", setup.integrity(t))
	got := setup.rows(t)
	assert.Len(t, got, procs*commits, "every process sees every commit")
	perProc := map[int]int{}
	for _, n := range got {
		pid, i := n/1000, n%1000
		assert.Equal(t, perProc[pid], i, "process %d's commits in its order", pid)
		perProc[pid]++
	}
}

func TestSQLiteCrashReleasesLocks(t *testing.T) {
	m := faults.NewMemFS(1)
	p1 := mustOpen(t, m.Process(1), 1000)
	require.NoError(t, p1.exec(schema))
	require.NoError(t, p1.commit(1, 1, false))
	require.NoError(t, p1.exec(`BEGIN IMMEDIATE`))
	require.NoError(t, p1.exec(`INSERT INTO t(seq, n) VALUES(100, 100)`))

	m.Crash(1) // while holding the write lock mid-transaction
	p2 := mustOpen(t, m.Process(2), 1000)
	require.NoError(t, p2.exec(`PRAGMA busy_timeout=0`))
	require.NoError(t, p2.commit(2, 2, false), "the dead process's write lock is gone")
	assert.Equal(t, []int{1, 2}, p2.rows(t), "its uncommitted row never shows")

	assert.Error(t, p1.exec(`COMMIT`), "the dead process cannot commit")
	p1.stop()
	assert.Equal(t, "ok", p2.integrity(t))
	assert.Equal(t, []int{1, 2}, p2.rows(t))
}

func TestSQLiteDiskFull(t *testing.T) {
	m := faults.NewMemFS(1)
	p := mustOpen(t, m.Process(1), 1000)
	require.NoError(t, p.exec(schema))
	require.NoError(t, p.commit(1, 1, false))

	m.SetWriteBudget(2000)
	err := p.exec(`INSERT INTO t(seq, n, pad) VALUES(2, 2, zeroblob(100000))`)
	require.Error(t, err)
	assert.Equal(t, sqlite3.SQLITE_FULL, sqliteCode(err)&0xff, "ErrNoSpace reaches SQLite as SQLITE_FULL: %v", err)

	m.SetWriteBudget(-1)
	require.NoError(t, p.commit(3, 1, false), "the same handle works once space is back")
	assert.Equal(t, "ok", p.integrity(t))
	assert.Equal(t, []int{1, 3}, p.rows(t), "the failed statement left nothing")
}

func TestSQLiteInjectedErrorsSurfaceAndRecover(t *testing.T) {
	for _, op := range []faults.Op{faults.OpWrite, faults.OpSync, faults.OpRead} {
		t.Run(op.String(), func(t *testing.T) {
			m := faults.NewMemFS(1)
			p := mustOpen(t, m.Process(1), 1000)
			require.NoError(t, p.exec(schema))
			require.NoError(t, p.commit(1, 1, true))
			m.FailAt(op, 1)
			var err error
			if op == faults.OpRead {
				// a fresh connection must read the file
				q, oerr := openProcess(m.Process(2), 1000)
				if oerr == nil {
					_, err = q.conn.ExecContext(q.ctx, `SELECT count(*) FROM t`)
					q.stop()
				} else {
					err = oerr
				}
			} else {
				err = p.commit(2, 1, true)
			}
			require.Error(t, err)
			assert.Equal(t, sqlite3.SQLITE_IOERR, sqliteCode(err)&0xff, "%v", err)
			assert.EqualValues(t, 1, m.Stats().InjectedErrors)
			p.stop()

			q := mustOpen(t, m.Process(3), 1000)
			assert.Equal(t, "ok", q.integrity(t))
			rows := q.rows(t)
			assert.Contains(t, [][]int{{1}, {1, 2}}, rows)
		})
	}
}

// walBytes runs a fixed workload on a fresh MemFS and returns its WAL file.
func walBytes(t *testing.T, seed uint64) []byte {
	m := faults.NewMemFS(seed)
	p := mustOpen(t, m.Process(1), 1000)
	require.NoError(t, p.exec(schema))
	for i := range 5 {
		require.NoError(t, p.commit(i, 1, false))
	}
	f, err := m.Process(2).Open("test.db-wal", vfs.OpenReadOnly)
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	_, err = f.ReadAt(b, 0)
	require.NoError(t, err)
	p.stop()
	return b
}

func TestSeededRunsWriteIdenticalBytes(t *testing.T) {
	defer vfs.SeedSQLiteRandomness(0)
	vfs.SeedSQLiteRandomness(42)
	a := walBytes(t, 1)
	vfs.SeedSQLiteRandomness(42)
	b := walBytes(t, 1)
	require.NotEmpty(t, a)
	assert.Equal(t, a, b, "one seed, one byte stream: WAL salts included")

	vfs.SeedSQLiteRandomness(43)
	assert.NotEqual(t, a, walBytes(t, 1), "the salts come from the seed")
}
