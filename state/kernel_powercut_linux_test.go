//go:build linux

package state_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ext4 shut down as a power cut leaves it: EXT4_IOC_SHUTDOWN
// (_IOR('X', 125, __u32)) with EXT4_GOING_FLAGS_NOLOGFLUSH. From that
// moment every read, write and sync on the file system fails with EIO, and
// nothing more reaches the disk, not even the journal: mounted again, the
// file system holds what was synced before the cut, and of the rest what
// writeback happened to write.
const (
	ext4IocShutdown  = 0x8004587D
	ext4NoLogFlush   = 2
	powerCutRounds   = 8
	powerCutMaxGrant = 40
)

// shutdownExt4 cuts the power of the ext4 file system mounted at dir.
func shutdownExt4(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	flag := uint32(ext4NoLogFlush)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, d.Fd(), ext4IocShutdown, uintptr(unsafe.Pointer(&flag))); e != 0 {
		return e
	}
	return nil
}

// TestKernelPowerCut: the durability promises on the real kernel, SQLite's
// native VFS and the default options, with several goroutines: ext4 on a
// loop device loses power under an open handle (shutdownExt4) after a
// random number of grants, round after round on one file. Every verb after
// the cut fails with ErrIO; Close returns and leaves no descriptor open
// (the file system unmounts); mounted again, the file checks clean, every
// acknowledged lease grant is there (a name's last token is at least the
// highest acknowledged, so the next grant's is higher; grants inside
// Update too, which the engine syncs itself), and the counter
// holds a prefix of its increments: every one acknowledged before a grant
// that was acknowledged was called (a grant's sync makes every commit
// before it durable), every acknowledged one with WithSync(SyncFull),
// which alternate rounds use, and no more than were called. A file
// written just before each cut without a sync is gone after it, so the cut
// is real (runs lose acknowledged NORMAL increments too; the log says how
// many); with grants committed NORMAL the test fails.
//
// No verb is in flight at the cut (gate): on this kernel a write that
// races the shutdown can take back the append a sync acknowledged just
// before it, on a plain file too (pwrite and fdatasync, no SQLite: 2 of 12
// cuts), and plain SQLite then loses its last FULL commit the same way,
// so the shutdown is a power cut only between calls. A round writes far
// fewer pages than the background checkpoint waits for, so its writes do
// not race the cut either. TestKernelPowerCutInFlight stops the disk
// instead, with verbs and checkpoints in flight. A seed, logged, picks where the rounds cut;
// STATEKIT_POWERCUT_SEED sets it (the goroutines' interleaving is the
// machine's).
func TestKernelPowerCut(t *testing.T) {
	dir, dev := mountLoopExt4(t, 64, "defaults")
	if err := shutdownCheck(t, dir); err != nil {
		t.Skipf("this kernel cannot shut ext4 down: %v", err)
	}
	rng := powerCutRand(t)
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	var n int64 // the counter as the last round found it
	lost := 0
	for round := range powerCutRounds {
		var opts []state.Option
		full := round%2 == 1
		if full {
			opts = append(opts, state.WithSync(state.SyncFull))
		}
		db, err := state.Open(path, opts...)
		require.NoError(t, err, "round %d", round)
		r := powerCutRound(t, ctx, db, round, n, 1+rng.IntN(powerCutMaxGrant), path)
		require.NoError(t, remountLoop(dir, dev), "round %d: every descriptor on the file system closed", round)
		unsyncedGone(t, r.unsynced, round)

		tokens, got := openAfterCut(t, ctx, path, round)
		for name, acked := range r.granted {
			assert.GreaterOrEqual(t, tokens[name], acked, "round %d: %s was granted token %d and acknowledged", round, name, acked)
		}
		floor := r.durable.Load()
		if full {
			floor = r.acked.Load()
		}
		assert.GreaterOrEqual(t, got, floor, "round %d: a durable increment was lost (full=%v)", round, full)
		assert.LessOrEqual(t, got, n+r.called.Load(), "round %d: more increments than were called", round)
		lost += int(max(r.acked.Load()-got, 0))
		t.Logf("round %d (full=%v): cut after %d grants; counter %d, %d acknowledged, durable floor %d",
			round, full, r.grants.Load(), got, r.acked.Load(), floor)
		n = got
	}
	t.Logf("%d acknowledged NORMAL increments lost in all", lost)
}

// powerCutRound runs powerCutLoad on db, whose counter holds n, until
// cutAfter grants were acknowledged, cuts the power of the file system of
// db's file at path, and waits for every goroutine to stop at its first
// error, which must be ErrIO. An Open beside db then, and one after db's
// Close, must fail naming the errno of the dead disk. It closes db.
func powerCutRound(t *testing.T, ctx context.Context, db *state.DB, round int, n int64, cutAfter int, path string) *powerCutResult {
	dir := filepath.Dir(path)
	r := newPowerCutResult(n)
	var cut atomic.Bool
	// Every verb runs under gate's read lock, and the cut under its write
	// lock: no verb is in flight at the cut (see TestKernelPowerCut).
	var gate sync.RWMutex
	errs := make(chan error, 3*powerCutWorkers)
	stop := func(err error) {
		if !cut.Load() {
			errs <- fmt.Errorf("before the cut: %w", err)
			return
		}
		if !errors.Is(err, state.ErrIO) {
			errs <- fmt.Errorf("after the cut, not ErrIO: %w", err)
		}
	}
	var never atomic.Bool // the workers end at the cut's ErrIO
	wait := powerCutLoad(ctx, db, round, bothGrants, r, gate.RLocker(), &never, stop)
	waitUntil(t, round, "grants", int64(cutAfter), r.grants.Load, func() bool { return len(errs) > 0 })
	r.unsynced = writeUnsynced(t, dir, round)
	gate.Lock()
	cut.Store(true)
	require.NoError(t, shutdownExt4(dir))
	gate.Unlock()
	wait()
	close(errs)
	for err := range errs {
		t.Errorf("round %d: %v", round, err)
	}
	beside, err := state.Open(path)
	if err == nil {
		_ = beside.Close()
	}
	assert.ErrorIs(t, err, state.ErrIO, "round %d: Open beside the handle after the cut", round)
	assert.ErrorIs(t, err, syscall.EIO, "round %d: Open beside the handle after the cut", round)
	_ = db.Close() // fails: the disk is gone; it must return and close every descriptor
	alone, err := state.Open(path)
	if err == nil {
		_ = alone.Close()
	}
	assert.ErrorIs(t, err, syscall.EIO, "round %d: Open after the handle's Close", round)
	return r
}

// shutdownCheck reports whether ext4 at dir can be shut down, by shutting
// down a scratch file system of its own: the ioctl needs a kernel of 4.10
// or later.
func shutdownCheck(t *testing.T, dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// An ioctl the file system does not know fails with ENOTTY; asking
	// with a flag it does not take fails with EINVAL, without shutting
	// anything down.
	flag := uint32(0xff)
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, d.Fd(), ext4IocShutdown, uintptr(unsafe.Pointer(&flag)))
	if e == syscall.EINVAL {
		return nil
	}
	if e == 0 {
		t.Fatal("ext4 took an unknown shutdown flag")
	}
	return e
}

// remountLoop unmounts dir and mounts the loop device dev there again, as
// a reboot would: the file system replays its journal.
func remountLoop(dir, dev string) error {
	if out, err := run("umount", dir); err != nil {
		return fmt.Errorf("umount: %s: %w", out, err)
	}
	if out, err := run("mount", "/dev/"+dev, dir); err != nil {
		return fmt.Errorf("mount: %s: %w", out, err)
	}
	return nil
}

func init() {
	helperRoles["kernel-powercut"] = helperPowerCut
}

// helperPowerCut is a process of TestKernelPowerCutProcesses: it opens the
// file with the default options, says "ready", and for each line "batch
// NAME" grants the lease NAME to a new owner, releases it and increments
// "n" three times, then says "ok TOKEN N" (the grant's token and the last
// increment's value) or "err IO|OTHER MESSAGE" at its first error, after
// which it only answers "err". "quit" closes the handle and ends it.
func helperPowerCut(path string) int {
	ctx := context.Background()
	db := helperOpen(path)
	if db == nil {
		return 3
	}
	in := bufio.NewScanner(os.Stdin)
	var failed error
	for i := 0; in.Scan(); i++ {
		f := strings.Fields(in.Text())
		if len(f) == 1 && f[0] == "quit" {
			_ = db.Close() // fails after the cut: it must return, and close every descriptor
			return 0
		}
		if failed == nil {
			var token, v int64
			if token, v, failed = powerCutBatch(ctx, db, f[1], i, nil); failed == nil {
				fmt.Println("ok", token, v)
			}
		}
		if failed != nil {
			kind := "OTHER"
			if errors.Is(failed, state.ErrIO) {
				kind = "IO"
			}
			fmt.Println("err", kind, strings.ReplaceAll(failed.Error(), "\n", " "))
		}
	}
	return 4
}

// TestKernelPowerCutProcesses: TestKernelPowerCut with three processes on
// the file (SQLite's shared memory and locks across processes, each
// process's own background checkpoints), in batches: every process grants
// and releases a lease of its own and increments a shared counter three
// times, the test waits for all, and cuts the power after a random number
// of batches, with no verb in flight (the kernel's race, see
// TestKernelPowerCut). Each process's next batch is ErrIO; "quit" closes
// its handle and the file system unmounts. Mounted again, the file checks
// clean, every acknowledged token is there, and the counter holds every
// increment acknowledged in a batch before the last (the last batch's
// grants were called after them, and a grant's sync makes every commit
// before it durable) and no more than were called.
func TestKernelPowerCutProcesses(t *testing.T) {
	dir, dev := mountLoopExt4(t, 64, "defaults")
	if err := shutdownCheck(t, dir); err != nil {
		t.Skipf("this kernel cannot shut ext4 down: %v", err)
	}
	rng := powerCutRand(t)
	path := filepath.Join(dir, "app.state")
	ctx := t.Context()
	const procs = 3
	var n int64 // the counter as the last round found it
	for round := range 4 {
		type proc struct {
			stdin io.WriteCloser
			out   *bufio.Reader
			name  string
			token int64 // the highest acknowledged
		}
		ps := make([]*proc, procs)
		for i := range ps {
			_, stdin, out := startHelper(t, "kernel-powercut", path, nil, "")
			expectLine(t, out, "ready")
			ps[i] = &proc{stdin: stdin, out: out, name: fmt.Sprintf("r%d-p%d", round, i)}
		}
		batches := 1 + rng.IntN(20)
		var floor, acked int64 = n, n
		for b := range batches {
			floor = acked // every increment acknowledged before this batch's grants were called
			for _, p := range ps {
				_, err := fmt.Fprintln(p.stdin, "batch", p.name)
				require.NoError(t, err)
			}
			for _, p := range ps {
				var token, v int64
				_, err := fmt.Sscan(expectLine(t, p.out, "ok"), &token, &v)
				require.NoError(t, err, "round %d batch %d", round, b)
				p.token = max(p.token, token)
				acked = max(acked, v)
			}
		}
		marker := writeUnsynced(t, dir, round)
		require.NoError(t, shutdownExt4(dir))
		for _, p := range ps {
			_, err := fmt.Fprintln(p.stdin, "batch", p.name)
			require.NoError(t, err)
			line := expectLine(t, p.out, "err")
			assert.True(t, strings.HasPrefix(line, "IO "), "round %d: after the cut, ErrIO: %s", round, line)
			assert.Contains(t, line, path+": ", "round %d: the error names the file", round)
			assert.NotContains(t, line, "corrupt", "round %d: a failed read is no damage", round)
			if round == 0 {
				t.Logf("after the cut: %s", strings.TrimPrefix(line, "IO "))
			}
			_, err = fmt.Fprintln(p.stdin, "quit")
			require.NoError(t, err)
		}
		for _, p := range ps {
			_, err := p.out.ReadString('\n')
			require.ErrorIs(t, err, io.EOF, "round %d: the helper ended", round)
		}
		require.NoError(t, remountLoop(dir, dev), "round %d: every descriptor on the file system closed", round)
		unsyncedGone(t, marker, round)

		tokens, got := openAfterCut(t, ctx, path, round)
		for _, p := range ps {
			assert.GreaterOrEqual(t, tokens[p.name], p.token, "round %d: %s was granted token %d and acknowledged", round, p.name, p.token)
		}
		assert.GreaterOrEqual(t, got, floor, "round %d: a durable increment was lost", round)
		assert.LessOrEqual(t, got, n+int64(3*procs*batches), "round %d: more increments than were called", round)
		t.Logf("round %d: cut after %d batches; counter %d, %d acknowledged, durable floor %d", round, batches, got, acked, floor)
		n = got
	}
}
