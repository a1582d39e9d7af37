package state_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/state"
)

// A thin disk: a file system on a loop device whose image is a sparse file
// on a small tmpfs. While the tmpfs has room the disk is a disk; once it is
// full, every write to a part of the image never written before fails
// (the loop device reports no space, the kernel logs "critical space
// allocation error"), and fsync of a file whose dirty pages went there
// fails with ENOSPC, while the file system itself goes on: its journal and
// tables were written when it was made. This is a real fsync failure
// (fsyncgate): the kernel marks the failed pages clean and keeps them
// readable, never to write them again unless they are written to anew, so
// the bytes a process reads back are not the bytes a power cut leaves.
const (
	thinImageMiB = 512   // xfs needs 300 MiB at least
	thinStore    = "96m" // the tmpfs holding the image: room for the made file system and a few MiB
)

// mountThin makes a file system of kind fsType ("ext4" or "xfs") on a thin
// disk and mounts it. It returns its directory, the loop device's name and
// the tmpfs's directory.
func mountThin(t *testing.T, fsType string) (dir, dev, store string) {
	t.Helper()
	store = mountTmpfs(t, thinStore)
	mkfs := map[string][]string{
		// The journal and inode tables written now, not lazily later: a
		// write there after the tmpfs filled would fail, and the file
		// system would stop.
		"ext4": {"mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"},
		"xfs":  {"mkfs.xfs", "-q", "-f"},
	}[fsType]
	needTools(t, mkfs[0], "losetup")
	img := filepath.Join(store, "disk.img")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, thinImageMiB<<20))
	loop, err := run("losetup", "-f", "--show", img)
	if err != nil {
		t.Skipf("no loop device here: %s", loop)
	}
	t.Cleanup(func() {
		if out, err := run("losetup", "-d", loop); err != nil {
			t.Errorf("losetup -d %s: %s", loop, out)
		}
	})
	if out, err := run(mkfs[0], append(mkfs[1:], loop)...); err != nil {
		t.Skipf("%s failed here: %s", mkfs[0], out)
	}
	dir = t.TempDir()
	if out, err := run("mount", loop, dir); err != nil {
		t.Skipf("cannot mount %s on a loop device here: %s", fsType, out)
	}
	unmountAtEnd(t, dir)
	return dir, filepath.Base(loop), store
}

// fillStore fills the tmpfs under a thin disk and returns the filler's
// path: from then on writes to parts of the image not written before fail.
func fillStore(t *testing.T, store string) string {
	t.Helper()
	name := filepath.Join(store, "filler")
	f, err := os.Create(name)
	require.NoError(t, err)
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			break
		}
	}
	require.NoError(t, f.Close())
	return name
}

// TestKernelFailedSyncOnAThinDisk: on ext4 and on xfs, a sync that the
// real kernel fails (the thin disk above runs out of room) ends the handle
// with ErrIO, and every later call says so; once room is back, the file
// opens sound with everything acknowledged before the failure, grants and
// writes go on, and a power cut after that (the file system shut down
// without flushing its log) loses nothing acknowledged since: no fencing
// token is granted twice, though the failed sync's pages, which the kernel
// keeps readable but will not write, were read back by the Open after it.
func TestKernelFailedSyncOnAThinDisk(t *testing.T) {
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			dir, dev, store := mountThin(t, fsType)
			if err := shutdownCheck(t, dir); err != nil {
				t.Skipf("this kernel cannot shut %s down: %v", fsType, err)
			}
			ctx := t.Context()
			path := filepath.Join(dir, "app.state")
			db, err := state.Open(path)
			require.NoError(t, err)
			tokens := map[string]int64{} // each lease's highest acknowledged token
			// grant grants name to an owner of its own and releases it: a
			// FULL commit, which makes every commit before it durable. A
			// release a power cut took back leaves the lease held for its
			// 50 ms: grant waits that out.
			owners := 0
			grant := func(db *state.DB, name string) error {
				acked := tokens[name]
				owners++
				for {
					l, err := db.Lease(ctx, name, fmt.Sprintf("owner%d", owners), 50*time.Millisecond)
					var held *state.LeaseHeldError
					if errors.As(err, &held) {
						time.Sleep(held.Left + time.Millisecond)
						continue
					}
					if err != nil {
						return err
					}
					require.Greater(t, l.Token, acked, "%s: token %d was acknowledged and granted again", name, acked)
					tokens[name] = l.Token
					return db.Release(ctx, l)
				}
			}
			written := map[string]string{} // acknowledged sets, made durable by the grant after them
			big := strings.Repeat("v", 32<<10)
			for i := range 8 {
				k := fmt.Sprintf("before%d", i)
				require.NoError(t, db.Set(ctx, k, big))
				require.NoError(t, grant(db, fmt.Sprintf("L%d", i%3)))
				written[k] = big
			}

			filler := fillStore(t, store)
			var failed error
			for i := 0; i < 4000 && failed == nil; i++ {
				k := fmt.Sprintf("after%d", i)
				if failed = db.Set(ctx, k, big); failed == nil {
					if failed = grant(db, fmt.Sprintf("L%d", i%3)); failed == nil {
						written[k] = big
					}
				}
			}
			require.Error(t, failed, "the thin disk never failed a write")
			t.Logf("%s: the first failure: %v", fsType, failed)
			require.ErrorIs(t, failed, state.ErrIO)
			_, err = db.Get(ctx, "before0")
			require.ErrorIs(t, err, state.ErrIO, "the handle has ended")
			_ = db.Close()

			require.NoError(t, os.Remove(filler), "room back")
			db, err = state.Open(path)
			require.NoError(t, err, "the file opens once room is back")
			requireSound(t, db, written, "after the failed sync")
			require.NoError(t, db.Set(ctx, "reopened", "yes"))
			written["reopened"] = "yes"
			for _, name := range slices.Sorted(maps.Keys(tokens)) {
				require.NoError(t, grant(db, name), "a grant after the failure")
			}

			require.NoError(t, shutdownExt4(dir), "power cut")
			_ = db.Close()
			require.NoError(t, remountLoop(dir, dev))
			db, err = state.Open(path)
			require.NoError(t, err, "the file opens after the power cut")
			defer db.Close()
			requireSound(t, db, written, "after the power cut")
			for _, name := range slices.Sorted(maps.Keys(tokens)) {
				require.NoError(t, grant(db, name), "a grant after the power cut")
			}
		})
	}
}

// requireSound requires db's file to check clean and to hold every key of
// written as it was written.
func requireSound(t *testing.T, db *state.DB, written map[string]string, when string) {
	t.Helper()
	ctx := t.Context()
	findings, err := db.Check(ctx)
	require.NoError(t, err, when)
	require.Empty(t, findings, when)
	for k, want := range written {
		v, err := db.Get(ctx, k)
		if errors.Is(err, state.ErrNotFound) {
			t.Fatalf("%s: %s was acknowledged and is gone", when, k)
		}
		require.NoError(t, err, when)
		require.Equal(t, want, v.String(), "%s: %s", when, k)
	}
}
