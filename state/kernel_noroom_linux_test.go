//go:build linux

package state_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/statekit/statekit/state/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["kernel-fsize"] = helperFileSizeLimit
	helperRoles["kernel-fsize-vfs"] = helperFileSizeLimit
	helperRoles["kernel-fsize-open"] = helperOpenUnderSizeLimit
}

// Bounds of the helpers' retries of a write refused for want of room: a
// background checkpoint must come between them, so they pause.
const (
	roomRetries = 500
	roomPause   = 10 * time.Millisecond
)

// TestKernelFileSizeLimit: writes past the process's file size limit
// (RLIMIT_FSIZE, which a service manager may set: systemd's LimitFSIZE)
// are ErrDiskFull wrapping EFBIG and saying which limit, not an ErrIO that
// ends the handle (SQLite's native VFS reports EFBIG as a failed write,
// SQLITE_IOERR_WRITE): the refused write leaves nothing, reads go on, and
// writes go on without the limit raised, once the background checkpoint
// the refusal asked for has emptied the WAL, which the next write starts
// over from its beginning. The same through the Go VFS over real files
// (WithFS(vfs.OS())).
func TestKernelFileSizeLimit(t *testing.T) {
	for _, role := range []string{"kernel-fsize", "kernel-fsize-vfs"} {
		t.Run(role, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.state")
			cmd, _, out := startHelper(t, role, path, nil, "")
			var acked int
			_, err := fmt.Sscan(expectLine(t, out, "acked"), &acked)
			require.NoError(t, err)
			require.Positive(t, acked, "the limit refused the first write")
			refused := expectLine(t, out, "refused")
			assert.Equal(t, "diskfull=true io=false efbig=true", expectLine(t, out, "kinds"), refused)
			assert.True(t, strings.HasPrefix(refused, path+fmt.Sprintf(`: set "k%d": `, acked)), refused)
			assert.Contains(t, refused, "RLIMIT_FSIZE")
			assert.Equal(t, "ok", expectLine(t, out, "get k0"), "reads go on")
			assert.Equal(t, "not found", expectLine(t, out, "get refused"), "the refused write left something")
			var retries int
			_, err = fmt.Sscan(expectLine(t, out, "again after"), &retries)
			require.NoError(t, err)
			var more int
			_, err = fmt.Sscan(expectLine(t, out, "more"), &more)
			require.NoError(t, err)
			assert.Equal(t, 2*acked, more, "writes after the first that went on")
			assert.Equal(t, "<nil>", expectLine(t, out, "close"))
			require.NoError(t, cmd.Wait())
			t.Logf("%d writes, then: %s; the same write again went on after %d refusals, and %d more writes", acked,
				refused, retries, more)

			ctx := t.Context()
			db, err := state.Open(path)
			require.NoError(t, err)
			defer db.Close()
			for i := range acked + 1 + more {
				v, err := db.Get(ctx, fmt.Sprintf("k%d", i))
				require.NoError(t, err, "acknowledged k%d", i)
				assert.Equal(t, fsizeValue(i), v.String())
			}
			_, err = db.Get(ctx, fmt.Sprintf("k%d", acked+1+more))
			assert.ErrorIs(t, err, state.ErrNotFound)
			findings, err := db.Check(ctx)
			require.NoError(t, err)
			assert.Empty(t, findings)
		})
	}
}

// TestKernelOpenUnderFileSizeLimit: an Open that must write past the
// process's file size limit is ErrDiskFull wrapping EFBIG and saying which
// file and which limit, not ErrIO: the new file's first page (SQLite
// reports a failed write, SQLITE_IOERR_WRITE), or the -shm index SQLite
// grows beside it. With the limit gone, the file opens and checks clean.
func TestKernelOpenUnderFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	cmd, _, out := startHelper(t, "kernel-fsize-open", dir, nil, "")
	for _, tc := range []struct {
		name, says string
	}{
		{"first-page", "no room to write the file: the file reached the largest size it may have (the process's file size limit, RLIMIT_FSIZE"},
		{"index", "no room for the index beside the file: write " + filepath.Join(dir, "index", "app.state-shm")},
	} {
		opened := expectLine(t, out, "open "+tc.name)
		assert.Equal(t, "diskfull=true io=false efbig=true", expectLine(t, out, "kinds"), opened)
		assert.True(t, strings.HasPrefix(opened, "open "+filepath.Join(dir, tc.name, "app.state")+": "), opened)
		assert.Contains(t, opened, tc.says)
		assert.Contains(t, opened, "EFBIG")
		t.Logf("%s: %s", tc.name, opened)
	}
	require.NoError(t, cmd.Wait())
	for _, name := range []string{"first-page", "index"} {
		db, err := state.Open(filepath.Join(dir, name, "app.state"))
		require.NoError(t, err, "the limit gone")
		require.NoError(t, db.Set(t.Context(), "k", 1))
		findings, err := db.Check(t.Context())
		require.NoError(t, err)
		assert.Empty(t, findings)
		require.NoError(t, db.Close())
	}
}

// helperOpenUnderSizeLimit opens a new file under dir with RLIMIT_FSIZE
// below its first page, then another below the -shm index's first 32 KiB,
// and says how each went.
func helperOpenUnderSizeLimit(dir string) int {
	for _, tc := range []struct {
		name  string
		limit uint64
	}{{"first-page", 1 << 10}, {"index", 4<<10 + 100}} {
		path := filepath.Join(dir, tc.name, "app.state")
		if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		orig := lim
		lim.Cur = tc.limit
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		db, err := state.Open(path)
		_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &orig)
		if err == nil {
			fmt.Println("open", tc.name, "ok")
			_ = db.Close()
			continue
		}
		fmt.Println("open", tc.name, strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Printf("kinds diskfull=%v io=%v efbig=%v\n", errors.Is(err, state.ErrDiskFull),
			errors.Is(err, state.ErrIO), errors.Is(err, syscall.EFBIG))
	}
	return 0
}

// fsizeLimit is the file size limit helperFileSizeLimit sets after Open.
const fsizeLimit = 256 << 10

// fsizeValue is the value helperFileSizeLimit sets key k%d to: 1,000 bytes.
func fsizeValue(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("v", 996) }

// helperFileSizeLimit opens path (WithFS(vfs.OS()) in role
// kernel-fsize-vfs), lowers RLIMIT_FSIZE to fsizeLimit and sets keys until
// one is refused, then reads, sets the refused key again until it goes on,
// sets twice as many keys as went before it, and closes, saying on stdout
// what each gave.
func helperFileSizeLimit(path string) int {
	ctx := context.Background()
	var opts []state.Option
	if os.Getenv(helperEnv) == "kernel-fsize-vfs" {
		opts = append(opts, state.WithFS(vfs.OS()))
	}
	db, err := state.Open(path, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	// The limit is the process's; Go ignores the SIGXFSZ that comes with
	// a write past it.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	lim.Cur = fsizeLimit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	acked := 0
	var refused error
	for ; acked < 10_000; acked++ {
		if refused = db.Set(ctx, fmt.Sprintf("k%d", acked), fsizeValue(acked)); refused != nil {
			break
		}
	}
	fmt.Println("acked", acked)
	if refused == nil {
		fmt.Fprintln(os.Stderr, "no write was refused")
		return 4
	}
	fmt.Println("refused", strings.ReplaceAll(refused.Error(), "\n", " "))
	fmt.Printf("kinds diskfull=%v io=%v efbig=%v\n", errors.Is(refused, state.ErrDiskFull),
		errors.Is(refused, state.ErrIO), errors.Is(refused, syscall.EFBIG))
	if _, err := db.Get(ctx, "k0"); err != nil {
		fmt.Println("get k0", err)
	} else {
		fmt.Println("get k0 ok")
	}
	if _, err := db.Get(ctx, fmt.Sprintf("k%d", acked)); errors.Is(err, state.ErrNotFound) {
		fmt.Println("get refused not found")
	} else {
		fmt.Println("get refused", err)
	}
	retries, err := setUntilRoom(ctx, db, acked)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	fmt.Println("again after", retries)
	more := 0
	for ; more < 2*acked; more++ {
		if _, err := setUntilRoom(ctx, db, acked+1+more); err != nil {
			fmt.Fprintln(os.Stderr, err)
			break
		}
	}
	fmt.Println("more", more)
	fmt.Println("close", db.Close())
	return 0
}

// setUntilRoom sets key k%d (i) to fsizeValue(i) (untilRoom).
func setUntilRoom(ctx context.Context, db *state.DB, i int) (int, error) {
	return untilRoom(func() error { return db.Set(ctx, fmt.Sprintf("k%d", i), fsizeValue(i)) })
}

// untilRoom calls write again after each ErrDiskFull, pausing between, at
// most roomRetries times, and returns how many times it was refused.
func untilRoom(write func() error) (int, error) {
	for n := 0; ; n++ {
		err := write()
		switch {
		case err == nil:
			return n, nil
		case !errors.Is(err, state.ErrDiskFull) || n == roomRetries:
			return n, err
		}
		time.Sleep(roomPause)
	}
}

// TestKernelFullDiskCountersGoOn: on a disk another program filled,
// writes that need no new room in the file (counters bumped, keys
// overwritten) go on: the first that finds no room at the WAL's end is
// ErrDiskFull and leaves nothing, the checkpoint it asks for (the
// background one, or with WithoutBackground one on the handle's own
// connection right away) empties the WAL into the file, and the next
// writes start the WAL over in the room it already has. Every acknowledged
// increment is there after.
func TestKernelFullDiskCountersGoOn(t *testing.T) {
	t.Run("default", func(t *testing.T) { fullDiskCountersGoOn(t) })
	t.Run("without-background", func(t *testing.T) { fullDiskCountersGoOn(t, state.WithoutBackground()) })
}

func fullDiskCountersGoOn(t *testing.T, opts ...state.Option) {
	dir := mountTmpfs(t, "2m")
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	db, err := state.Open(path, opts...)
	require.NoError(t, err)
	const keys, incrs = 20, 3000
	counts := make([]int64, keys)
	for i := range keys {
		_, err := db.Incr(ctx, fmt.Sprintf("c%d", i))
		require.NoError(t, err)
		counts[i]++
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer os.Remove(filler.Name())
	chunk := make([]byte, 4<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, filler.Close())

	refusals := 0
	for n := range incrs {
		i := n % keys
		var got int64
		r, err := untilRoom(func() (err error) {
			got, err = db.Incr(ctx, fmt.Sprintf("c%d", i))
			return err
		})
		require.NoError(t, err, "increment %d, after %d refusals", n, r)
		counts[i]++
		require.Equal(t, counts[i], got, "a refused increment left something")
		refusals += r
	}
	assert.Positive(t, refusals, "the disk never refused a write")
	t.Logf("%d increments on a full disk, %d refused and tried again", incrs, refusals)
	require.NoError(t, db.Close())

	require.NoError(t, os.Remove(filler.Name()))
	db, err = state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i, want := range counts {
		v, err := db.Get(ctx, fmt.Sprintf("c%d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(want), v.String(), "c%d", i)
	}
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// TestKernelCloseOnAFullDiskEmptiesTheWALAndWrites: Close's flush of a
// buffered increment on a disk another program filled, with the WAL
// holding committed frames, finds no room at the WAL's end; Close then
// empties the WAL into the file, which gives the WAL's room back, and
// writes the increment there once more, returning nil. After a reopen the
// increment is there.
func TestKernelCloseOnAFullDiskEmptiesTheWALAndWrites(t *testing.T) {
	dir := mountTmpfs(t, "2m")
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	const keys = 20
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	for i := range keys {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("c%d", i), 0))
	}
	require.NoError(t, db.Close()) // the rows in the file, the WAL emptied
	db, err = state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	for n := range 150 { // about 600 KiB of frames, pages the file has
		_, err := db.Incr(ctx, fmt.Sprintf("c%d", n%keys))
		require.NoError(t, err)
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer os.Remove(filler.Name())
	chunk := make([]byte, 4<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, filler.Close())

	require.NoError(t, db.IncrBuffered("b", 5))
	require.NoError(t, db.Close(), "the WAL's room, given back, takes the increment")

	require.NoError(t, os.Remove(filler.Name()))
	db, err = state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "5", v.String())
	v, err = db.Get(ctx, "c0")
	require.NoError(t, err)
	assert.Equal(t, "8", v.String(), "every increment before the disk filled")
}
