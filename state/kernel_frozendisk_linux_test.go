//go:build linux

package state_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A power cut with verbs in flight, on the real kernel. The file lives on
// ext4 on a loop device whose image is a file on a second ext4 (the
// store). Freezing the store (FIFREEZE, as fsfreeze does) stops the disk
// at an instant:
// every write the loop device completed is in the image, every later one
// waits, and the file system under test keeps what it had not written
// back in its page cache, as a machine that lost power does. A copy of
// the image taken then is the disk after the cut; the store is thawed and
// the handle goes on and closes, and the copy is then written back to the
// device and mounted, as after a reboot. Unlike a shutdown of the file
// system under test (TestKernelPowerCut), nothing fails inside it: verbs
// and background checkpoints run into the cut.

const (
	inFlightRounds = 10
	// inFlightMaxVerbs bounds the verbs a round's cut comes after: the
	// background checkpoint runs every 4,000 writes, so half the rounds
	// pass one, and some cut in the middle of one.
	inFlightMaxVerbs = 8000
)

// TestKernelPowerCutInFlight: the durability promises with verbs in
// flight at the cut, on the native VFS and the default options with
// several goroutines (powerCutLoad, no gate): after a random number of
// acknowledged verbs the disk stops (see above), rounds on one file
// alternating NORMAL and SyncFull, each continuing from the disk the last
// one's cut left. Rounds grant by Lease, by Update, or both: where both
// run, each kind's syncs make the other's commits durable too, so a grant
// of one kind that is not synced is only seen in rounds of its own.
// Mounted again, the file checks clean (openAfterCut: what survived is a
// prefix of the commits), every grant acknowledged before the cut has its
// token there (the next is higher), and the counter holds every increment
// acknowledged before a grant that was acknowledged before the cut was
// called (every one acknowledged before the cut with SyncFull) and no more
// than were called. A file written just before each cut without a sync is
// gone after it, so the cut is real (some runs lose acknowledged NORMAL
// increments too; the log says how many). A seed, logged, picks where the
// rounds cut; STATEKIT_POWERCUT_SEED sets it.
func TestKernelPowerCutInFlight(t *testing.T) {
	disk := mountFreezable(t)
	rng := powerCutRand(t)
	path := filepath.Join(disk.dir, "app.state")
	ctx := t.Context()
	var n int64 // the counter as the last round's cut left it
	lost := 0
	for round := range inFlightRounds {
		var opts []state.Option
		full := round%2 == 1
		if full {
			opts = append(opts, state.WithSync(state.SyncFull))
		}
		db, err := state.Open(path, opts...)
		require.NoError(t, err, "round %d", round)
		kinds := []grantKinds{leaseGrants, updateGrants, bothGrants}[round/2%3]
		r := newPowerCutResult(n)
		var quit atomic.Bool
		errs := make(chan error, 3*powerCutWorkers)
		wait := powerCutLoad(ctx, db, round, kinds, r, noGate{}, &quit, func(err error) { errs <- err })
		cutAfter := int64(1 + rng.IntN(inFlightMaxVerbs))
		verbs := func() int64 { return r.grants.Load() + r.acked.Load() - n }
		waitUntil(t, round, "verbs", cutAfter, verbs, func() bool { return len(errs) > 0 })
		acked := r.snapshot() // every answer in it came before the cut
		disk.cut(t, round)
		called := r.called.Load() // every increment the copy can hold was called by now
		quit.Store(true)
		wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: the disk only paused: %v", round, err)
		}
		require.NoError(t, db.Close(), "round %d", round)
		disk.reboot(t, round)
		tokens, got := openAfterCut(t, ctx, path, round)
		for name, token := range acked.granted {
			assert.GreaterOrEqual(t, tokens[name], token, "round %d: %s was granted token %d and acknowledged", round, name, token)
		}
		floor := acked.durable.Load()
		if full {
			floor = acked.acked.Load()
		}
		assert.GreaterOrEqual(t, got, floor, "round %d: a durable increment was lost (full=%v)", round, full)
		assert.LessOrEqual(t, got, n+called, "round %d: more increments than were called", round)
		lost += int(max(acked.acked.Load()-got, 0))
		t.Logf("round %d (full=%v, grants by %v): cut after %d verbs, %d grants; counter %d, %d acknowledged, durable floor %d",
			round, full, kinds, cutAfter, acked.grants.Load(), got, acked.acked.Load(), floor)
		n = got
	}
	t.Logf("%d acknowledged NORMAL increments lost in all", lost)
}

// frozenDisk is an ext4 file system (dir) on a loop device (dev) whose
// image is a file on a second ext4 (store), which cut freezes to copy the
// image to snap, the disk as a power cut at that instant leaves it.
type frozenDisk struct {
	store, dir, dev, snap string
	marker                string // written just before the latest cut, never synced
	cuts                  int
}

// mountFreezable mounts a frozenDisk.
func mountFreezable(t *testing.T) *frozenDisk {
	t.Helper()
	needRoot(t)
	needTools(t, "cp")
	store, _ := mountLoopExt4(t, 320, "defaults")
	// The disk has no cache to lose: the freeze keeps every write the
	// loop device completed. So the file system under test need not send
	// it flushes (barrier=0), each of which would sync the store's file
	// through two file systems; its syncs still wait for every write and
	// order its journal the same way. 128 MiB: the WAL may grow to
	// 16,000 pages of 4 KiB before a handle checkpoints it itself.
	dir, dev := mountLoopExt4At(t, filepath.Join(store, "disk.img"), 128, "barrier=0")
	t.Cleanup(func() { _ = freeze(store, false) }) // a round that failed frozen
	return &frozenDisk{store: store, dir: dir, dev: dev, snap: filepath.Join(t.TempDir(), "cut.img")}
}

// cut copies the disk as it is at an instant: it freezes the store, copies
// the image, and thaws the store, after which the file system under test
// goes on as if it had only paused. First it syncs a file of its own, as
// another program on a busy machine would: that commits the file system's
// journal, and with it whatever the journal held, a WAL's deletion, say.
// Then it writes another without a sync, which the cut must take back
// (writeUnsynced; reboot checks). A new file each cut (auto_da_alloc).
func (d *frozenDisk) cut(t *testing.T, round int) {
	t.Helper()
	d.cuts++
	neighbour, err := os.Create(filepath.Join(d.dir, fmt.Sprintf("synced-%d", d.cuts)))
	require.NoError(t, err)
	_, err = neighbour.Write([]byte("another program's sync"))
	require.NoError(t, errors.Join(err, neighbour.Sync(), neighbour.Close()))
	d.marker = writeUnsynced(t, d.dir, d.cuts)
	require.NoError(t, freeze(d.store, true), "round %d: freeze the store", round)
	out, cpErr := run("cp", "--sparse=always", filepath.Join(d.store, "disk.img"), d.snap)
	require.NoError(t, freeze(d.store, false), "round %d: thaw the store", round)
	require.NoError(t, cpErr, "round %d: copy of the frozen disk: %s", round, out)
}

// reboot unmounts the file system under test (every descriptor on it must
// be closed), writes the copy cut made onto its loop device, and mounts it
// again: the machine comes back with the disk as the cut left it, and the
// file system replays its journal. The unsynced file must be gone.
func (d *frozenDisk) reboot(t *testing.T, round int) {
	t.Helper()
	if out, err := run("umount", d.dir); err != nil {
		t.Fatalf("round %d: umount: %s", round, out)
	}
	src, err := os.Open(d.snap)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile("/dev/"+d.dev, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, errors.Join(err, dst.Sync(), dst.Close()), "round %d: write the image to /dev/%s", round, d.dev)
	if out, err := run("mount", "/dev/"+d.dev, d.dir); err != nil {
		t.Fatalf("round %d: mount: %s", round, out)
	}
	unsyncedGone(t, d.marker, round)
}

// freeze freezes the file system mounted at dir (FIFREEZE: it writes out
// what it holds, and every later write to it waits), or thaws it (FITHAW).
func freeze(dir string, on bool) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	req := uintptr(fiThaw)
	if on {
		req = fiFreeze
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, d.Fd(), req, 0); e != 0 {
		return e
	}
	return nil
}

// FIFREEZE and FITHAW: _IOWR('X', 119, int) and _IOWR('X', 120, int).
const (
	fiFreeze = 0xC0045877
	fiThaw   = 0xC0045878
)

// powerCutRand is the seeded source that picks where a test's rounds cut:
// STATEKIT_POWERCUT_SEED, or the time; logged.
func powerCutRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STATEKIT_POWERCUT_SEED"); s != "" {
		_, err := fmt.Sscan(s, &seed)
		require.NoError(t, err)
	}
	t.Logf("seed %d (STATEKIT_POWERCUT_SEED=%d cuts where this run did)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// TestKernelStalledDisk: the disk under a handle stalls (its store frozen,
// as a backup agent freezes a file system for a snapshot) while a lease
// grant syncs: the grant waits in the kernel, and every other verb of the
// handle with a deadline returns its context's error without waiting for
// it, reads and queued writes alike. Once the disk is back the grant
// returns and the handle works.
func TestKernelStalledDisk(t *testing.T) {
	disk := mountFreezable(t)
	db, err := state.Open(filepath.Join(disk.dir, "app.state"))
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, db.Set(ctx, "a", 1))
	require.NoError(t, freeze(disk.store, true))
	thawed := false
	defer func() {
		if !thawed {
			_ = freeze(disk.store, false)
		}
	}()
	granted := make(chan error, 1)
	go func() {
		_, err := db.Lease(ctx, "job", "o", time.Minute)
		granted <- err
	}()
	// The grant's sync waits for the disk, holding the handle's lock: a
	// read finds it held once the grant is there. A read that takes
	// microseconds is given 200 ms, so that a loaded machine does not pass
	// its deadline before the grant holds the lock; only the last probe
	// waits that long.
	for tries := 0; ; tries++ {
		require.Less(t, tries, 1000, "the grant never held the lock")
		require.Empty(t, granted, "the grant returned while the disk stalled")
		err := answerWithin(t, "a Get with a 200 ms deadline", 200*time.Millisecond, func(c context.Context) error {
			_, err := db.Get(c, "a")
			return err
		})
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	for name, verb := range map[string]func(context.Context) error{
		"Get":   func(c context.Context) error { _, err := db.Get(c, "a"); return err },
		"Set":   func(c context.Context) error { return db.Set(c, "b", 2) },
		"Incr":  func(c context.Context) error { _, err := db.Incr(c, "n"); return err },
		"Lease": func(c context.Context) error { _, err := db.Lease(c, "other", "o", time.Minute); return err },
	} {
		err := answerWithin(t, name+" with a 200 ms deadline", 200*time.Millisecond, verb)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "%s on the stalled disk", name)
	}
	assert.Empty(t, granted, "the grant returned while the disk stalled")
	require.NoError(t, freeze(disk.store, false))
	thawed = true
	require.NoError(t, <-granted)
	_, err = db.Incr(ctx, "n")
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

// answerWithin calls verb with a context that ends after d and returns its
// answer; if none comes within a minute it ends the test (what still
// waits), whose deferred calls bring the disk back.
func answerWithin(t *testing.T, what string, d time.Duration, verb func(context.Context) error) error {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	answer := make(chan error, 1)
	go func() { answer <- verb(c) }()
	select {
	case err := <-answer:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits for the stalled disk after a minute", what)
		return nil
	}
}
