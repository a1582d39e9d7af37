//go:build linux

package state_test

// Bad days injected at the kernel's door: strace makes the kernel fail a
// helper process's system calls on one file with a chosen errno, without
// making them, where this machine's kernel and file systems cannot be made
// to (no disk quotas, no network file system).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/require"
)

func init() {
	helperRoles["kernel-open"] = helperOpenAndSay
	helperRoles["kernel-open-ro"] = helperOpenAndSay
	helperRoles["kernel-grow-index"] = helperGrowIndex
}

// needStrace returns strace's path, or skips the test saying why it cannot
// run.
func needStrace(t *testing.T) string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: it injects the errors into the helper's system calls")
	}
	if out, err := exec.Command(strace, "-qq", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace refused?): %v: %s", err, out)
	}
	return strace
}

// startInjected starts a helper process in role on path under strace, which
// fails the helper's calls of sysc on file with errno, without making them:
// those numbered as when says ("101..130", "1+"; strace counts each thread's
// calls apart). It returns the command, the helper's stdout and the file
// strace writes the failed calls to.
func startInjected(t *testing.T, strace, role, path, file, sysc, errno, when string) (*exec.Cmd, *bufio.Reader, string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	trace := filepath.Join(t.TempDir(), "strace.out")
	cmd := exec.Command(strace, "-f", "--seccomp-bpf", "-qq", "-o", trace, "-P", file, "-e", "trace="+sysc,
		"-e", fmt.Sprintf("inject=%s:error=%s:when=%s", sysc, errno, when),
		exe, "-test.run=^$", path)
	cmd.Env = append(os.Environ(), helperEnv+"="+role, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(stdout), trace
}

// injected counts the calls strace failed on purpose, from its output.
func injected(t *testing.T, trace string) int {
	t.Helper()
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	return strings.Count(string(b), "(INJECTED)")
}

// helperOpenAndSay opens path (WithReadOnly in role kernel-open-ro), and
// says on stdout how that went: "open ok", or "open" with the error, then
// "kinds" with the sentinels it wraps and "errno" with its errno's name.
func helperOpenAndSay(path string) int {
	var opts []state.Option
	if os.Getenv(helperEnv) == "kernel-open-ro" {
		opts = append(opts, state.WithReadOnly())
	}
	db, err := state.Open(path, opts...)
	if err == nil {
		fmt.Println("open ok")
		_ = db.Close()
		return 0
	}
	fmt.Println("open", strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Printf("kinds cannotopen=%v busy=%v io=%v\n", errors.Is(err, state.ErrCannotOpen),
		errors.Is(err, state.ErrBusy), errors.Is(err, state.ErrIO))
	var errno syscall.Errno
	if errors.As(err, &errno) {
		fmt.Println("errno", int(errno))
	} else {
		fmt.Println("errno none")
	}
	return 0
}

// TestKernelFileSystemWithoutLocks: a file on a file system that refuses
// POSIX locks (ENOLCK, as NFS without its lock service answers) fails Open
// at once with ErrCannotOpen wrapping ENOLCK and saying what to do, writable
// or read-only, whichever of the file's locks the file system refuses.
// SQLite reports ENOLCK on the database file as SQLITE_BUSY: before, Open
// waited out its busy timeout and said the file was busy.
func TestKernelFileSystemWithoutLocks(t *testing.T) {
	strace := needStrace(t)
	for _, tc := range []struct {
		name, role, suffix string
	}{
		{"the file", "kernel-open", ""},
		{"the file, read-only", "kernel-open-ro", ""},
		{"its -shm", "kernel-open", "-shm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "l.state")
			if tc.role == "kernel-open-ro" {
				db, err := state.Open(path)
				require.NoError(t, err)
				require.NoError(t, db.Close())
			}
			cmd, out, trace := startInjected(t, strace, tc.role, path, path+tc.suffix, "fcntl", "ENOLCK", "1+")
			opened := expectLine(t, out, "open")
			require.Equal(t, "cannotopen=true busy=false io=false", expectLine(t, out, "kinds"), "Open: %s", opened)
			require.Equal(t, fmt.Sprint(int(syscall.ENOLCK)), expectLine(t, out, "errno"), "Open: %s", opened)
			require.Contains(t, opened, "refuses file locks")
			require.Contains(t, opened, "local disk")
			require.NoError(t, cmd.Wait())
			require.Positive(t, injected(t, trace), "no lock call was refused")
			t.Logf("Open: %s", opened)
		})
	}
}

// TestKernelFileSystemWithoutSharedMaps: a file system that will not map
// the -shm file into memory shared (a FUSE or network file system: ENODEV)
// fails Open with ErrCannotOpen wrapping the errno and saying what to do,
// where it was an ErrIO "disk I/O error (5386)".
func TestKernelFileSystemWithoutSharedMaps(t *testing.T) {
	strace := needStrace(t)
	path := filepath.Join(t.TempDir(), "m.state")
	cmd, out, trace := startInjected(t, strace, "kernel-open", path, path+"-shm", "mmap", "ENODEV", "1+")
	opened := expectLine(t, out, "open")
	require.Equal(t, "cannotopen=true busy=false io=false", expectLine(t, out, "kinds"), "Open: %s", opened)
	require.Equal(t, fmt.Sprint(int(syscall.ENODEV)), expectLine(t, out, "errno"), "Open: %s", opened)
	require.Contains(t, opened, "refuses to map "+path+"-shm")
	require.NoError(t, cmd.Wait())
	require.Positive(t, injected(t, trace), "no map was refused")
	t.Logf("Open: %s", opened)
}

// TestKernelIOErrorOutcomeIsUnknown: a write that fails with ErrIO may
// have taken effect. SQLite writes a commit's frames to the WAL and then
// adds them to the -shm index; when the index cannot grow (ENOSPC from
// the -shm's write, strace-injected once the first region is made), the
// verb returns ErrIO and the handle ends, but the WAL holds the whole
// commit, and the next Open, which rebuilds the index from the WAL, has it.
// Every write acknowledged before it is there too, and the file checks
// clean. The helper runs on the default options: its WAL outgrows the
// index's first region (4,096 frames) while the first background
// checkpoint, which starts at 4,000 pages written, copies it.
func TestKernelIOErrorOutcomeIsUnknown(t *testing.T) {
	strace := needStrace(t)
	path := filepath.Join(t.TempDir(), "u.state")
	// The index's first region is 8 pages of 4 KiB, one write each.
	cmd, out, _ := startInjected(t, strace, "kernel-grow-index", path, path+"-shm", "pwrite64", "ENOSPC", "9+")
	var failed int
	_, err := fmt.Sscan(expectLine(t, out, "failed"), &failed)
	require.NoError(t, err)
	refused := expectLine(t, out, "error")
	require.Equal(t, "io=true diskfull=false enospc=true", expectLine(t, out, "kinds"), "the failed write: %s", refused)
	require.NoError(t, cmd.Wait())
	t.Logf("set k%d: %s", failed, refused)

	ctx := t.Context()
	db, err := state.Open(path)
	require.NoError(t, err)
	defer db.Close()
	for i := range failed {
		_, err := db.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err, "acknowledged k%d", i)
	}
	_, err = db.Get(ctx, fmt.Sprintf("k%d", failed))
	require.NoError(t, err, "the write that failed with ErrIO is not in the file: its outcome was known after all")
	findings, err := db.Check(ctx)
	require.NoError(t, err)
	require.Empty(t, findings)
}

// helperGrowIndex sets keys of 3 KB values until one fails (at most
// 20,000), and says which and how.
func helperGrowIndex(path string) int {
	// strace counts each thread's calls apart: this goroutine's commits
	// grow the index, on this thread alone.
	runtime.LockOSThread()
	db, err := state.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	ctx := context.Background()
	value := strings.Repeat("x", 3000)
	for i := range 20_000 {
		if err := db.Set(ctx, fmt.Sprintf("k%d", i), value); err != nil {
			fmt.Println("failed", i)
			fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
			fmt.Printf("kinds io=%v diskfull=%v enospc=%v\n", errors.Is(err, state.ErrIO),
				errors.Is(err, state.ErrDiskFull), errors.Is(err, syscall.ENOSPC))
			_ = db.Close()
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "no write failed")
	return 4
}
