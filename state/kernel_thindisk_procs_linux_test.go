package state_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state"
)

func init() {
	helperRoles["kernel-thin"] = helperThin
	helperRoles["kernel-thin-reader"] = helperThinReader
}

// helperThinReader is another program reading the file through SQLite:
// it begins a read transaction, reads, says "reading", and holds it (and
// so its snapshot of the WAL) until a line "done"; then it ends it, runs a
// checkpoint as the sqlite3 shell's PRAGMA wal_checkpoint does (PASSIVE:
// it copies the WAL into the file and never cuts it), says "done BUSY
// FRAMES COPIED" and ends.
func helperThinReader(path string) int {
	sqldb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		fmt.Println("err", err)
		return 3
	}
	defer sqldb.Close()
	ctx := context.Background()
	conn, err := sqldb.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, `BEGIN`)
	}
	var n int
	if err == nil {
		err = conn.QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n)
	}
	if err != nil {
		fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
		return 3
	}
	fmt.Println("reading", n)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "done" {
	}
	var busy, frames, copied int64
	_, err = conn.ExecContext(ctx, `COMMIT`)
	if err == nil {
		err = conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
	}
	if err != nil {
		fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
		return 3
	}
	_ = conn.Close()
	fmt.Println("done", busy, frames, copied)
	return 0
}

// helperThin is the second process of TestKernelFailedSyncOnAThinDiskProcesses:
// it opens the file with the default options, says "ready", and answers
// each line: "set KEY" sets KEY to a 32 KiB value ("ok"); "grant NAME
// OWNER" grants the lease NAME to OWNER for 50 ms, waiting out a holder,
// and releases it, unless it has expired ("ok TOKEN"); either says "err IO|OTHER MESSAGE" when it fails. "quit"
// closes the handle, says "closed" and ends it.
func helperThin(path string) int {
	ctx := context.Background()
	db := helperOpen(path)
	if db == nil {
		return 3
	}
	say := func(err error, ok ...any) {
		if err == nil {
			fmt.Println(append([]any{"ok"}, ok...)...)
			return
		}
		kind := "OTHER"
		if errors.Is(err, state.ErrIO) {
			kind = "IO"
		}
		fmt.Println("err", kind, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 1 && f[0] == "quit":
			_ = db.Close() // a failed handle's Close fails: it must return
			fmt.Println("closed")
			return 0
		case len(f) == 2 && f[0] == "set":
			say(db.Set(ctx, f[1], strings.Repeat("v", 32<<10)))
		case len(f) == 3 && f[0] == "grant":
			for {
				lease, err := db.Lease(ctx, f[1], f[2], 50*time.Millisecond)
				var held *state.LeaseHeldError
				if errors.As(err, &held) {
					time.Sleep(held.Left + time.Millisecond)
					continue
				}
				if err == nil {
					err = db.Release(ctx, lease)
					if errors.Is(err, state.ErrLeaseLost) && !db.Now().Before(lease.Expires) {
						err = nil // expired before its release on a loaded machine: its token is spent all the same
					}
				}
				if lease == nil {
					say(err)
				} else {
					say(err, lease.Token)
				}
				break
			}
		default:
			fmt.Println("err OTHER unknown command", in.Text())
		}
	}
	return 4
}

// thinProcess is the test's end of a helperThin process.
type thinProcess struct {
	t     *testing.T
	stdin io.WriteCloser
	out   *bufio.Reader
	alive bool // no call of it has failed yet
}

func startThinProcess(t *testing.T, path string) *thinProcess {
	_, stdin, out := startHelper(t, "kernel-thin", path, nil, "")
	expectLine(t, out, "ready")
	return &thinProcess{t: t, stdin: stdin, out: out, alive: true}
}

// call sends line and returns the answer after "ok", or an error holding
// the helper's "err" line, which must be an ErrIO ("IO"): the only error a
// thin disk that runs out may cause.
func (p *thinProcess) call(line string) (string, error) {
	_, err := fmt.Fprintln(p.stdin, line)
	require.NoError(p.t, err)
	got, err := p.out.ReadString('\n')
	require.NoError(p.t, err, "the helper ended at %q", line)
	got = strings.TrimSpace(got)
	if ok, found := strings.CutPrefix(got, "ok"); found {
		return strings.TrimSpace(ok), nil
	}
	require.True(p.t, strings.HasPrefix(got, "err IO "), "%q: the helper said %q, want ok or ErrIO", line, got)
	p.alive = false
	return "", errors.New(got)
}

// setAndGrant is thinLoad.setAndGrant in the helper process: the set counts
// as acknowledged and durable once the grant after it was acknowledged.
func (p *thinProcess) setAndGrant(l *thinLoad, key, lease string) error {
	if _, err := p.call("set " + key); err != nil {
		return err
	}
	acked := l.tokens[lease]
	l.owners++
	ans, err := p.call(fmt.Sprintf("grant %s child%d", lease, l.owners))
	if err != nil {
		return err
	}
	var token int64
	_, err = fmt.Sscan(ans, &token)
	require.NoError(p.t, err, "grant %s: %q", lease, ans)
	require.Greater(p.t, token, acked, "%s: token %d was acknowledged and granted again", lease, acked)
	l.tokens[lease] = token
	l.written[key] = strings.Repeat("v", 32<<10)
	return nil
}

func (p *thinProcess) quit() {
	_, err := fmt.Fprintln(p.stdin, "quit")
	require.NoError(p.t, err)
	expectLine(p.t, p.out, "closed")
}

// TestKernelFailedSyncOnAThinDiskProcesses: TestKernelFailedSyncOnAThinDisk
// with two processes on the file, on ext4 and on xfs. Both set and grant
// until the thin disk has failed a call of each, and each failure is
// ErrIO. An Open while the disk is still full opens sound or fails with
// ErrIO. Once room is back, the test process opens the file again while
// the other process still holds its failed handle: the file is sound with
// everything either process had acknowledged, and grants go on; the other
// process's failed handle then closes (its own repair of the WAL runs
// while the test process sets and grants), a new process grants beside the reopened
// handle, and after a power cut nothing acknowledged is lost and no token
// is granted twice.
func TestKernelFailedSyncOnAThinDiskProcesses(t *testing.T) {
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			dir, dev, store := mountThin(t, fsType)
			if err := shutdownCheck(t, dir); err != nil {
				t.Skipf("this kernel cannot shut %s down: %v", fsType, err)
			}
			path := filepath.Join(dir, "app.state")
			load := newThinLoad(t)
			db, err := openOnThin(t, path)
			require.NoError(t, err)
			child := startThinProcess(t, path)
			for i := range 8 {
				require.NoError(t, load.setAndGrant(db, fmt.Sprintf("before%d", i), fmt.Sprintf("L%d", i%3)))
				require.NoError(t, child.setAndGrant(load, fmt.Sprintf("child-before%d", i), fmt.Sprintf("L%d", i%3)))
			}
			filler := fillStore(t, store)
			var failed error
			for i := 0; i < 4000 && (failed == nil || child.alive); i++ {
				if failed == nil {
					if failed = load.setAndGrant(db, fmt.Sprintf("after%d", i), fmt.Sprintf("L%d", i%3)); failed != nil {
						t.Logf("%s: the test process's first failure: %v", fsType, failed)
						require.ErrorIs(t, failed, state.ErrIO)
					}
				}
				if child.alive {
					if err := child.setAndGrant(load, fmt.Sprintf("child-after%d", i), fmt.Sprintf("L%d", i%3)); err != nil {
						t.Logf("%s: the other process's first failure: %v", fsType, err)
					}
				}
			}
			require.Error(t, failed, "the thin disk never failed the test process")
			require.False(t, child.alive, "the thin disk never failed the other process")
			_, err = db.Get(t.Context(), "before0")
			require.ErrorIs(t, err, state.ErrIO, "the handle has ended")
			_ = db.Close()
			// An Open on the still-full disk, beside the other process's
			// failed handle, opens (then checks sound) or fails with ErrIO;
			// either way it loses nothing.
			early, err := openOnThin(t, path)
			if err == nil {
				requireSound(t, early, load.written, "opened on the full disk")
				_ = early.Close()
			} else {
				require.ErrorIs(t, err, state.ErrIO, "an Open on the full disk")
			}
			t.Logf("%s: an Open on the full disk: %v", fsType, err)

			require.NoError(t, os.Remove(filler), "room back")
			db, err = openOnThin(t, path)
			require.NoError(t, err, "the file opens once room is back, beside the other process's failed handle")
			requireSound(t, db, load.written, "reopened beside the failed handle")
			require.NoError(t, load.setAndGrant(db, "reopened", "L0"))
			// The failed handle closes (and repairs the WAL) while this
			// process writes.
			quit, wrote := make(chan struct{}), make(chan error, 1)
			go func() {
				var err error
				for i := 0; err == nil; i++ {
					select {
					case <-quit:
						if i > 0 {
							wrote <- nil
							return
						}
					default:
					}
					err = load.setAndGrant(db, fmt.Sprintf("beside-the-close%d", i), fmt.Sprintf("L%d", i%3))
				}
				wrote <- err
			}()
			child.quit()
			close(quit)
			require.NoError(t, <-wrote, "a write beside the other process's Close")
			require.NoError(t, load.setAndGrant(db, "after-the-other-closed", "L1"))
			requireSound(t, db, load.written, "after the other process's failed handle closed")
			child = startThinProcess(t, path)
			for i := range 4 {
				require.NoError(t, child.setAndGrant(load, fmt.Sprintf("child-reopened%d", i), fmt.Sprintf("L%d", i%3)))
				require.NoError(t, load.setAndGrant(db, fmt.Sprintf("reopened%d", i), fmt.Sprintf("L%d", (i+1)%3)))
			}
			load.grantEach(db, "after the failure")

			require.NoError(t, shutdownExt4(dir), "power cut")
			child.quit()
			_ = db.Close()
			require.NoError(t, remountLoop(dir, dev))
			db, err = openOnThin(t, path)
			require.NoError(t, err, "the file opens after the power cut")
			requireSound(t, db, load.written, "after the power cut")
			load.grantEach(db, "after the power cut")
			require.NoError(t, db.Close())
		})
	}
}

// TestKernelRepairBesideAReaderOnAThinDisk: on ext4 a range whose
// write-back failed stays unwritten (CORRECTNESS.md), the WAL's tail after
// a thin disk's failed sync too. An Open's repair normally ends with the
// WAL emptied and cut to nothing; here another program holds a read
// transaction through that Open, so the WAL keeps its size; the reader
// then checkpoints as the sqlite3 shell would, and the next commit starts
// the WAL over in place: its frames reach the range whose write-back
// failed. Every set and grant
// acknowledged after the reopen, enough to overwrite the whole WAL, must
// survive a power cut: the repair writes the WAL past the page cache where
// its blocks are unwritten, which marks them written. On xfs, which has no
// such state, the same run checks the repair beside a reader.
func TestKernelRepairBesideAReaderOnAThinDisk(t *testing.T) {
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			dir, dev, store := mountThin(t, fsType)
			if err := shutdownCheck(t, dir); err != nil {
				t.Skipf("this kernel cannot shut %s down: %v", fsType, err)
			}
			path := filepath.Join(dir, "app.state")
			load := newThinLoad(t)
			db, err := openOnThin(t, path)
			require.NoError(t, err)
			filler := load.untilFailure(db, store, fsType, 0)
			_ = db.Close()
			wal, err := os.Stat(path + "-wal")
			require.NoError(t, err, "the failed handle left its WAL")
			require.NoError(t, os.Remove(filler), "room back")

			_, stdin, out := startHelper(t, "kernel-thin-reader", path, nil, "")
			expectLine(t, out, "reading")
			db, err = openOnThin(t, path)
			require.NoError(t, err, "the file opens beside the reader once room is back")
			kept, err := os.Stat(path + "-wal")
			require.NoError(t, err)
			require.GreaterOrEqual(t, kept.Size(), wal.Size(), "the reader kept the WAL from being cut through the Open")
			_, err = fmt.Fprintln(stdin, "done")
			require.NoError(t, err)
			var busy, frames, copied int64
			_, err = fmt.Sscan(expectLine(t, out, "done"), &busy, &frames, &copied)
			require.NoError(t, err)
			require.Equal(t, []int64{0, frames}, []int64{busy, copied}, "the reader's checkpoint copied the whole WAL: the next commit starts it over in place")

			// Each set and grant writes two 32 KiB values' worth of frames
			// and more: as many as the WAL's size in bytes over 32 KiB
			// overwrite all of it.
			n := int(wal.Size()/(32<<10)) + 1
			for i := range n {
				require.NoError(t, load.setAndGrant(db, fmt.Sprintf("beside-the-reader%d", i), fmt.Sprintf("L%d", i%3)))
			}
			over, err := os.Stat(path + "-wal")
			require.NoError(t, err)
			t.Logf("%s: the WAL: %d bytes at the failure, %d after %d sets and grants", fsType, wal.Size(), over.Size(), n)

			require.NoError(t, shutdownExt4(dir), "power cut")
			_ = db.Close()
			require.NoError(t, remountLoop(dir, dev))
			db, err = openOnThin(t, path)
			require.NoError(t, err, "the file opens after the power cut")
			requireSound(t, db, load.written, "after the power cut")
			load.grantEach(db, "after the power cut")
			require.NoError(t, db.Close())
		})
	}
}
