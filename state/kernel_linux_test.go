//go:build linux

package state_test

// Tests on the real kernel: a tmpfs that fills up, an ext4 loop device
// mounted read-only, forced read-only or shut down as by a power cut
// (kernel_powercut_linux_test.go) under an open handle, a process
// with few file descriptors, a lock holder stopped with SIGSTOP, a lease
// holder paused past its ttl, a 0400 file opened by another user. Those
// that mount file systems, attach loop devices or change user need root;
// where they cannot run they skip, saying why in one line. Every mount and
// loop device is undone when the test ends, failed or not.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/internal/journaltest"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["kernel-emfile"] = helperTooFewFiles
	helperRoles["kernel-holdlock"] = helperHoldLock
	helperRoles["kernel-lease"] = helperLeaseThenRenew
	helperRoles["kernel-nobody"] = helperReadOnlyFile
}

// needRoot skips a test that needs root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount, loop devices, another user): run as root, as .ci/run does")
	}
}

// needTools skips a test whose commands are not installed.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if tool(n) == "" {
			t.Skipf("needs %s, not installed here (.ci/run installs it)", n)
		}
	}
}

// tool finds a command on PATH or in the system directories a PATH
// without them leaves out; "" if none.
func tool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// run runs a command and returns its combined output and error.
func run(name string, args ...string) (string, error) {
	path := tool(name)
	if path == "" {
		path = name
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// unmountAtEnd unmounts dir when the test ends, lazily if it is busy.
func unmountAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		if out, err := run("umount", dir); err != nil {
			if out2, err := run("umount", "-l", dir); err != nil {
				t.Errorf("umount %s: %s; umount -l: %s", dir, out, out2)
			}
		}
	})
}

// mountTmpfs mounts a tmpfs of size (as mount's size= says it) and
// returns its directory.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	needRoot(t)
	needTools(t, "mount", "umount")
	dir := t.TempDir()
	if out, err := run("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir); err != nil {
		t.Skipf("cannot mount a tmpfs here: %s", out)
	}
	unmountAtEnd(t, dir)
	return dir
}

// mountLoopExt4 makes an ext4 file system of mb MiB in a file, attaches it
// to a loop device, mounts it with opts and returns its directory and the
// device's name (loop0).
func mountLoopExt4(t *testing.T, mb int, opts string) (dir, dev string) {
	t.Helper()
	return mountLoopExt4At(t, filepath.Join(t.TempDir(), "disk.img"), mb, opts)
}

// mountLoopExt4At is mountLoopExt4 with the file system's image at img.
func mountLoopExt4At(t *testing.T, img string, mb int, opts string) (dir, dev string) {
	t.Helper()
	needRoot(t)
	needTools(t, "mkfs.ext4", "losetup", "mount", "umount")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, int64(mb)<<20))
	if out, err := run("mkfs.ext4", "-q", "-F", img); err != nil {
		t.Skipf("mkfs.ext4 failed here: %s", out)
	}
	loop, err := run("losetup", "-f", "--show", img)
	if err != nil {
		t.Skipf("no loop device here: %s", loop)
	}
	t.Cleanup(func() {
		if out, err := run("losetup", "-d", loop); err != nil {
			t.Errorf("losetup -d %s: %s", loop, out)
		}
	})
	dir = t.TempDir()
	if out, err := run("mount", "-o", opts, loop, dir); err != nil {
		t.Skipf("cannot mount a loop device here: %s", out)
	}
	unmountAtEnd(t, dir)
	return dir, filepath.Base(loop)
}

// startHelper starts the test binary as a helper process in role on path
// and returns it, its stdin and a reader of its stdout. The helper is
// continued and killed when the test ends.
func startHelper(t *testing.T, role, path string, cred *syscall.Credential, exe string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	if exe == "" {
		var err error
		exe, err = os.Executable()
		require.NoError(t, err)
	}
	cmd := exec.Command(exe, "-test.run=^$", path)
	cmd.Env = append(os.Environ(), helperEnv+"="+role, "GORACE=atexit_sleep_ms=0")
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, stdin, bufio.NewReader(stdout)
}

// expectLine reads the helper's next line, which must start with prefix.
func expectLine(t *testing.T, r *bufio.Reader, prefix string) string {
	t.Helper()
	line, err := r.ReadString('\n')
	require.NoError(t, err, "the helper ended before %q", prefix)
	line = strings.TrimSpace(line)
	require.True(t, strings.HasPrefix(line, prefix), "helper said %q, want %q...", line, prefix)
	return strings.TrimSpace(strings.TrimPrefix(line, prefix))
}

// TestKernelTmpfsFillsUp: on a 2 MB tmpfs that fills up, writes fail with
// ErrDiskFull naming the file, the verb and the key; the handle lives;
// Close returns one error on one line, or none if emptying the WAL made
// room for what it had to write; once space is back nothing acknowledged
// is missing.
func TestKernelTmpfsFillsUp(t *testing.T) {
	dir := mountTmpfs(t, "2m")
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	db, err := state.Open(path)
	require.NoError(t, err)
	acked := map[string]int{}
	for i := range 20 {
		k := fmt.Sprintf("k%d", i)
		require.NoError(t, db.Set(ctx, k, i))
		acked[k] = i
	}
	filler, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	chunk := make([]byte, 64<<10)
	for {
		if _, err := filler.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, filler.Close())

	big := strings.Repeat("x", 200<<10)
	var fullErr error
	for i := 0; i < 50 && fullErr == nil; i++ {
		k := fmt.Sprintf("big%d", i)
		if fullErr = db.Set(ctx, k, big); fullErr == nil {
			acked[k] = -1
		}
	}
	require.ErrorIs(t, fullErr, state.ErrDiskFull)
	assert.True(t, strings.HasPrefix(fullErr.Error(), path+`: set "big`), fullErr.Error())
	v, err := db.Get(ctx, "k3")
	require.NoError(t, err, "reads go on")
	assert.Equal(t, "3", v.String())

	require.NoError(t, db.IncrBuffered("buffered", 5))
	closeErr := db.Close()
	if closeErr != nil {
		assert.ErrorIs(t, closeErr, state.ErrDiskFull)
		assert.NotContains(t, closeErr.Error(), "\n", "one error, one line")
		assert.NotContains(t, closeErr.Error(), "rollback")
		assert.True(t, strings.HasPrefix(closeErr.Error(), path+": close: "), closeErr.Error())
		assert.Contains(t, closeErr.Error(), `"buffered" +5`)
	}
	t.Logf("close on the full disk: %v", closeErr)

	require.NoError(t, os.Remove(filepath.Join(dir, "filler")))
	db, err = state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for k, want := range acked {
		v, err := db.Get(ctx, k)
		require.NoError(t, err, "acknowledged %s", k)
		if want >= 0 {
			assert.Equal(t, strconv.Itoa(want), v.String())
		}
	}
	if closeErr == nil {
		v, err := db.Get(ctx, "buffered")
		require.NoError(t, err, "Close reported no error: its flush was written")
		assert.Equal(t, "5", v.String())
	}
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// TestKernelOpenOnAFullDisk: a process that opens a file first on a full
// disk (a service restarting after the disk filled) gets ErrDiskFull
// wrapping ENOSPC and naming the -shm index SQLite could not grow, not a
// bare "disk I/O error (4874)"; once space is back, Open works and every
// write is there.
func TestKernelOpenOnAFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "k", 1))
	require.NoError(t, db.Close())
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	chunk := make([]byte, 4<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, f.Close())

	_, err = state.Open(path)
	require.ErrorIs(t, err, state.ErrDiskFull)
	assert.NotErrorIs(t, err, state.ErrIO)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.Contains(t, err.Error(), path+"-shm")
	t.Logf("Open on the full disk: %v", err)

	require.NoError(t, os.Remove(filler))
	db, err = state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "1", v.String())
}

// TestKernelOpenWithNoFreeInodes: on a file system out of inodes, an Open
// that must create the -wal or -shm file is ErrDiskFull wrapping ENOSPC
// and naming that file (and ErrCannotOpen), where it said the -shm file did
// not exist (ENOENT): SQLite, failing to create it, tries to open it for
// reading only and logs that call's error, losing the create's.
func TestKernelOpenWithNoFreeInodes(t *testing.T) {
	dir := mountTmpfs(t, "4m,nr_inodes=4") // the directory, the file, its -wal and -shm
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(ctx, "k", 1))
	require.NoError(t, db.Close()) // removes the -wal and -shm
	fillers := []string{filepath.Join(dir, "f1"), filepath.Join(dir, "f2")}
	for _, f := range fillers {
		require.NoError(t, os.WriteFile(f, nil, 0o600))
	}
	for i, missing := range []string{path + "-wal", path + "-shm"} {
		_, err = state.Open(path)
		require.ErrorIs(t, err, state.ErrDiskFull, "no free inode for %s", missing)
		assert.ErrorIs(t, err, state.ErrCannotOpen)
		assert.ErrorIs(t, err, syscall.ENOSPC)
		assert.Contains(t, err.Error(), "cannot create "+missing+": ")
		assert.Contains(t, err.Error(), "no free inodes")
		t.Logf("Open without an inode for %s: %v", filepath.Base(missing), err)
		require.NoError(t, os.Remove(fillers[i]))
	}
	db, err = state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	v, err := db.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "1", v.String())
}

// TestKernelReadOnlyMount: a sound file on a file system mounted read-only
// is ErrReadOnly wrapping EROFS, with the hint, never ErrCorrupt; opened
// WithReadOnly it reads.
func TestKernelReadOnlyMount(t *testing.T) {
	dir, _ := mountLoopExt4(t, 16, "rw")
	path := filepath.Join(dir, "app.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(t.Context(), "k", "v"))
	require.NoError(t, db.Close())
	if out, err := run("mount", "-o", "remount,ro", dir); err != nil {
		t.Fatalf("remount read-only: %s", out)
	}

	_, err = state.Open(path)
	require.Error(t, err)
	assert.ErrorIs(t, err, state.ErrReadOnly)
	assert.ErrorIs(t, err, syscall.EROFS)
	assert.NotErrorIs(t, err, state.ErrCorrupt)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "WithReadOnly")
	t.Logf("open for writing: %v", err)

	ro, err := state.Open(path, state.WithReadOnly())
	require.NoError(t, err, "WithReadOnly reads a file on a read-only mount")
	defer ro.Close()
	v, err := ro.Get(t.Context(), "k")
	require.NoError(t, err)
	assert.Equal(t, "v", v.String())
}

// TestKernelReadOnlyMountWithAWriteCutShort: on a file system mounted
// read-only, a file whose last write was cut short outside its WAL (a hot
// -journal beside it) is ErrUnfinishedWrite opened WithReadOnly, saying to
// mount it writable, never the half-done write: read as immutable, as a
// sound file there is, SQLite ignores the journal and reads it. Mounted
// writable again, an Open rolls the write back and finds every row.
func TestKernelReadOnlyMountWithAWriteCutShort(t *testing.T) {
	dir, _ := mountLoopExt4(t, 16, "rw")
	const n = 200
	path := journaltest.CutWrite(t, dir, n)
	if out, err := run("mount", "-o", "remount,ro", dir); err != nil {
		t.Fatalf("remount read-only: %s", out)
	}
	ro, err := state.Open(path, state.WithReadOnly())
	if ro != nil {
		ro.Close()
	}
	require.ErrorIs(t, err, state.ErrUnfinishedWrite)
	assert.Contains(t, err.Error(), path+"-journal")
	assert.Contains(t, err.Error(), "on the file system mounted writable")
	assert.ErrorIs(t, err, syscall.EROFS)
	assert.NotErrorIs(t, err, state.ErrReadOnly)
	t.Logf("read-only open: %v", err)

	if out, err := run("mount", "-o", "remount,rw", dir); err != nil {
		t.Fatalf("remount writable: %s", out)
	}
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i := range n {
		_, err := db.Get(t.Context(), journaltest.Key(i))
		require.NoError(t, err, journaltest.Key(i))
	}
	findings, err := db.Check(t.Context())
	require.NoError(t, err)
	assert.Empty(t, findings)
}

// TestKernelForcedReadOnly: ext4 forced read-only under an open handle (an
// error with errors=remount-ro): the next write fails with ErrReadOnly
// wrapping EROFS (and ErrIO: the handle ends), naming the file, the verb and
// the key; every acknowledged write reads back WithReadOnly.
func TestKernelForcedReadOnly(t *testing.T) {
	dir, dev := mountLoopExt4(t, 16, "errors=remount-ro")
	trigger := filepath.Join("/sys/fs/ext4", dev, "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("this kernel cannot force ext4 read-only (no %s)", trigger)
	}
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	db, err := state.Open(path, state.WithoutBackground())
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, db.Set(ctx, fmt.Sprintf("k%d", i), i))
	}
	require.NoError(t, os.WriteFile(trigger, []byte("1"), 0))

	var werr error
	for i := 0; i < 100 && werr == nil; i++ { // a write may land in pages cached already
		_, werr = db.Incr(ctx, "n")
	}
	require.Error(t, werr)
	assert.ErrorIs(t, werr, state.ErrReadOnly)
	assert.ErrorIs(t, werr, syscall.EROFS)
	assert.ErrorIs(t, werr, state.ErrIO, "the handle ends")
	assert.True(t, strings.HasPrefix(werr.Error(), path+`: incr "n": `), werr.Error())
	assert.Contains(t, werr.Error(), "WithReadOnly")
	t.Logf("write after the file system went read-only: %v", werr)
	_ = db.Close()

	ro, err := state.Open(path, state.WithReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	for i := range 10 {
		v, err := ro.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(i), v.String())
	}
}

// TestKernelTooFewFileDescriptors: a process whose file descriptors run
// out at each point of Open gets ErrCannotOpen wrapping EMFILE (or
// ErrCannotOpen for what SQLite itself could not open), naming the file,
// at every point: the helper lowers RLIMIT_NOFILE to what it has open plus
// 0, 1, 2, ... and opens.
func TestKernelTooFewFileDescriptors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(t.Context(), "k", "v"))
	require.NoError(t, db.Close())
	_, _, out := startHelper(t, "kernel-emfile", path, nil, "")
	fromSQLite, opened := 0, 0
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "ok"):
			opened++
		case strings.HasPrefix(line, "emfile "):
			msg := strings.TrimPrefix(line, "emfile ")
			assert.Contains(t, msg, path, "the error names the file")
			assert.Contains(t, msg, "too many open files")
			if strings.Contains(msg, "(14)") { // SQLite's SQLITE_CANTOPEN, its errno kept
				fromSQLite++
			}
		default:
			t.Errorf("an error that is not EMFILE: %s", line)
		}
	}
	assert.Positive(t, fromSQLite, "some opens ran out inside SQLite")
	assert.Positive(t, opened, "with enough descriptors Open works")
}

// helperTooFewFiles is the child of TestKernelTooFewFileDescriptors.
func helperTooFewFiles(path string) int {
	// Go starts its poller (an epoll descriptor and an eventfd) on the
	// first file it can poll, and ends the process if it cannot; start it
	// now so that it never meets the lowered limit.
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	_, _ = r.Close(), w.Close()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	orig := lim
	for k := 0; k < 16; k++ {
		cur, err := limitLeaving(k)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		lim.Cur = cur
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		db, err := state.Open(path)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig)
		switch {
		case err == nil:
			fmt.Println("ok")
			_ = db.Close()
		case errors.Is(err, syscall.EMFILE) && errors.Is(err, state.ErrCannotOpen):
			fmt.Println("emfile", strings.ReplaceAll(err.Error(), "\n", " "))
		default:
			fmt.Println("other", strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	return 0
}

// limitLeaving returns the RLIMIT_NOFILE under which the process can open
// exactly free more descriptors. The limit bounds descriptor numbers, not
// their count, and a process may hold numbers with holes below them (a
// parent's inherited descriptor 251, say), so it counts free numbers.
func limitLeaving(free int) (uint64, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	open := map[int]bool{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			return 0, err
		}
		if _, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			open[n] = true // the listing's own descriptor is closed by now
		}
	}
	for n := 0; ; n++ {
		if open[n] {
			continue
		}
		if free == 0 {
			return uint64(n), nil
		}
		free--
	}
}

// TestKernelStoppedLockHolder: a process that holds the file's write lock
// is stopped with SIGSTOP. A verb of another process fails with ErrBusy,
// naming the file, the verb and the key, within its busy timeout plus a
// margin of seconds, with the background sweeper, flusher and checkpointer
// running beside it (the default options). The ratio to the timeout is
// logged; README reports a measured run.
func TestKernelStoppedLockHolder(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, state.DefaultBusyTimeout} {
		t.Run(timeout.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "app.state")
			var opts []state.Option
			if timeout != state.DefaultBusyTimeout {
				opts = append(opts, state.WithBusyTimeout(timeout))
			}
			db, err := state.Open(path, opts...) // before the helper takes the lock
			require.NoError(t, err)
			ctx := t.Context()
			require.NoError(t, db.Set(ctx, "k", "v"))
			cmd, _, out := startHelper(t, "kernel-holdlock", path, nil, "")
			expectLine(t, out, "locked")
			require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))

			verbs := []struct {
				name, prefix string
				call         func() error
			}{
				{"set", `set "k": `, func() error { return db.Set(ctx, "k", "w") }},
				{"incr", `incr "n": `, func() error { _, err := db.Incr(ctx, "n"); return err }},
				{"lease", `lease "job": `, func() error { _, err := db.Lease(ctx, "job", "me", time.Minute); return err }},
			}
			for _, v := range verbs {
				began := time.Now()
				err := v.call()
				took := time.Since(began)
				require.ErrorIs(t, err, state.ErrBusy, v.name)
				assert.True(t, strings.HasPrefix(err.Error(), path+": "+v.prefix), err.Error())
				t.Logf("%s held off by a stopped writer: ErrBusy after %v, %.2fx the busy timeout %v",
					v.name, took.Round(time.Millisecond), float64(took)/float64(timeout), timeout)
				assert.Less(t, took, timeout+3*time.Second, "%s: within its busy timeout and a margin of seconds", v.name)
				assert.GreaterOrEqual(t, took, timeout, "%s: after all of its busy timeout", v.name)
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
			require.NoError(t, cmd.Process.Kill())
			_ = cmd.Wait()
			require.NoError(t, db.Set(ctx, "k", "after"), "the lock is free once the holder is gone")
			require.NoError(t, db.Close())
		})
	}
}

// helperHoldLock is the child of TestKernelStoppedLockHolder: it takes the
// write lock in an Update and keeps it.
func helperHoldLock(path string) int {
	db, err := state.Open(path, state.WithBusyTimeout(30*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	err = db.Update(context.Background(), func(tx *state.Tx) error {
		if err := tx.Set("held", 1); err != nil {
			return err
		}
		fmt.Println("locked")
		select {} // until killed
	})
	fmt.Fprintln(os.Stderr, "update:", err)
	return 4
}

// TestKernelPausedLeaseHolder: a lease holder stopped with SIGSTOP past its
// ttl loses the lease to another process (a higher token); continued, its
// Renew fails with ErrLeaseLost naming the file, the lease and its token.
func TestKernelPausedLeaseHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	cmd, in, out := startHelper(t, "kernel-lease", path, nil, "")
	token := expectLine(t, out, "leased")
	assert.Equal(t, "1", token)
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(1500 * time.Millisecond) // past the holder's 1 s ttl
	l, err := db.Lease(t.Context(), "job", "other", time.Minute)
	require.NoError(t, err, "the stopped holder's lease ran out")
	assert.Equal(t, int64(2), l.Token)
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	_, err = fmt.Fprintln(in, "renew")
	require.NoError(t, err)
	msg := expectLine(t, out, "lost")
	assert.True(t, strings.HasPrefix(msg, path+`: renew "job" token 1: `), msg)
}

// helperLeaseThenRenew is the child of TestKernelPausedLeaseHolder.
func helperLeaseThenRenew(path string) int {
	ctx := context.Background()
	db, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer db.Close()
	l, err := db.Lease(ctx, "job", "helper", time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lease:", err)
		return 4
	}
	fmt.Println("leased", l.Token)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 5
	}
	err = db.Renew(ctx, l, time.Second)
	if errors.Is(err, state.ErrLeaseLost) {
		fmt.Println("lost", err)
		return 0
	}
	fmt.Println("renewed?", err)
	return 6
}

// TestKernelNonRootReadOnlyFile: a sound file of mode 0400, opened by a
// user who may read it but not write it (nobody, owning it), is
// ErrReadOnly wrapping EACCES (fs.ErrPermission), with the hint, never
// ErrCorrupt; WithReadOnly reads it.
func TestKernelNonRootReadOnlyFile(t *testing.T) {
	needRoot(t)
	base, err := os.MkdirTemp("", "statekit-kernel-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o777))
	require.NoError(t, os.Chmod(data, 0o777)) // the reader creates the -wal and -shm
	path := filepath.Join(data, "app.state")
	db, err := state.Open(path)
	require.NoError(t, err)
	require.NoError(t, db.Set(t.Context(), "k", "v"))
	require.NoError(t, db.Close())
	require.NoError(t, os.Chown(path, 65534, 65534))
	require.NoError(t, os.Chmod(path, 0o400))

	// The test binary, where nobody may run it.
	self, err := os.Executable()
	require.NoError(t, err)
	exe := filepath.Join(base, "state.test")
	copyFile(t, self, exe, 0o755)
	_, _, out := startHelper(t, "kernel-nobody", path, &syscall.Credential{Uid: 65534, Gid: 65534}, exe)
	open := expectLine(t, out, "open")
	assert.Contains(t, open, "readonly=true eacces=true permission=true corrupt=false hint=true", open)
	assert.Contains(t, open, path)
	assert.Equal(t, "v", expectLine(t, out, "read"))
}

// helperReadOnlyFile is the child of TestKernelNonRootReadOnlyFile.
func helperReadOnlyFile(path string) int {
	_, err := state.Open(path)
	fmt.Printf("open readonly=%v eacces=%v permission=%v corrupt=%v hint=%v %v\n",
		errors.Is(err, state.ErrReadOnly), errors.Is(err, syscall.EACCES), errors.Is(err, fs.ErrPermission),
		errors.Is(err, state.ErrCorrupt), err != nil && strings.Contains(err.Error(), "WithReadOnly"), err)
	ro, err := state.Open(path, state.WithReadOnly())
	if err != nil {
		fmt.Println("read error", err)
		return 0
	}
	defer ro.Close()
	v, err := ro.Get(context.Background(), "k")
	if err != nil {
		fmt.Println("read error", err)
		return 0
	}
	fmt.Println("read", v.String())
	return 0
}

// copyFile copies src to a new file dst of mode perm.
func copyFile(t *testing.T, src, dst string, perm fs.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}
