//go:build linux

package state_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A power cut with verbs in flight, on the real kernel. The file lives on
// ext4 on a loop device whose image is a file on a second ext4 (the
// store). Freezing the store (fsfreeze) stops the disk at an instant:
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

// unsynced is what a round writes to a file of its own just before the
// cut, without a sync.
var unsynced = make([]byte, 64<<10)

// TestKernelPowerCutInFlight: the durability promises with verbs in
// flight at the cut, on the native VFS and the default options with
// several goroutines (powerCutLoad, no gate): after a random number of
// acknowledged verbs the disk stops (see above), rounds on one file
// alternating NORMAL and SyncFull, each continuing from the disk the last
// one's cut left. Rounds grant by Lease, by Update, or both: where both
// run, each kind's syncs make the other's commits durable too, so a grant
// of one kind that is not synced is only seen in rounds of its own. Mounted again, the file checks clean, every grant
// acknowledged before the cut has its token there (the next is higher),
// and the counter holds every increment acknowledged before a grant that
// was acknowledged before the cut was called (every one acknowledged
// before the cut with SyncFull) and no more than were called. NORMAL
// rounds lose acknowledged increments (the log says how many), so the cut
// is real. A seed, logged, picks where the rounds cut;
// STATEKIT_POWERCUT_SEED sets it.
func TestKernelPowerCutInFlight(t *testing.T) {
	needRoot(t)
	needTools(t, "fsfreeze", "cp")
	store, _ := mountLoopExt4(t, 320, "defaults")
	// The disk has no cache to lose: the freeze keeps every write the
	// loop device completed. So the file system under test need not send
	// it flushes (barrier=0), each of which would sync the store's file
	// through two file systems; its syncs still wait for every write and
	// order its journal the same way.
	// 128 MiB: the WAL may grow to 16,000 pages of 4 KiB before the
	// handle checkpoints it itself.
	dir, dev := mountLoopExt4At(t, filepath.Join(store, "disk.img"), 128, "barrier=0")
	t.Cleanup(func() { _, _ = run("fsfreeze", "-u", store) }) // a round that failed frozen
	snap := filepath.Join(t.TempDir(), "cut.img")
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STATEKIT_POWERCUT_SEED"); s != "" {
		_, err := fmt.Sscan(s, &seed)
		require.NoError(t, err)
	}
	t.Logf("seed %d (STATEKIT_POWERCUT_SEED=%d cuts where this run did)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(dir, "app.state")
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
		for giveUp := time.Now().Add(time.Minute); r.grants.Load()+r.acked.Load()-n < cutAfter && len(errs) == 0; {
			if time.Now().After(giveUp) {
				t.Errorf("round %d: %d verbs in a minute, not %d", round, r.grants.Load()+r.acked.Load()-n, cutAfter)
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		acked := r.snapshot() // every answer in it came before the cut
		// Written and never synced: the cut must take it back (the
		// disk is not simply copied as the page cache holds it). A new
		// file each round: ext4 writes a file truncated and written
		// again out at its close (auto_da_alloc).
		marker := filepath.Join(dir, fmt.Sprintf("unsynced-%d", round))
		require.NoError(t, os.WriteFile(marker, unsynced, 0o600))
		if out, err := run("fsfreeze", "-f", store); err != nil {
			t.Fatalf("round %d: fsfreeze: %s", round, out)
		}
		out, cpErr := run("cp", "--sparse=always", filepath.Join(store, "disk.img"), snap)
		if out, err := run("fsfreeze", "-u", store); err != nil {
			t.Fatalf("round %d: thaw: %s", round, out)
		}
		require.NoError(t, cpErr, "round %d: copy of the frozen disk: %s", round, out)
		called := r.called.Load() // every increment the copy can hold was called by now
		quit.Store(true)
		wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: the disk only paused: %v", round, err)
		}
		require.NoError(t, db.Close(), "round %d", round)
		require.NoError(t, restoreDisk(dir, dev, snap), "round %d", round)

		if b, err := os.ReadFile(marker); err == nil {
			require.Less(t, len(b), len(unsynced), "round %d: a file written just before the cut, never synced, is there after it", round)
		}
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

// restoreDisk unmounts dir, writes the image img onto the loop device dev
// under it, and mounts dev at dir again: the machine comes back with the
// disk as the cut left it, and the file system replays its journal.
func restoreDisk(dir, dev, img string) error {
	if out, err := run("umount", dir); err != nil {
		return fmt.Errorf("umount: %s: %w", out, err)
	}
	src, err := os.Open(img)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile("/dev/"+dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	err = errors.Join(err, dst.Sync(), dst.Close())
	if err != nil {
		return fmt.Errorf("write the image to /dev/%s: %w", dev, err)
	}
	if out, err := run("mount", "/dev/"+dev, dir); err != nil {
		return fmt.Errorf("mount: %s: %w", out, err)
	}
	return nil
}
