package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state"
)

// TestPowerLossUndoesAWALDeletion: the last handle to close a file deletes
// its WAL, and a deletion is durable only once its directory is synced
// (faults.MemFS, as on Linux), so a power loss after Close, or after the
// next Open made a new WAL, can bring the old WAL back, or take the new one
// away. Whichever it does, every SyncFull write survives and the file is
// sound.
func TestPowerLossUndoesAWALDeletion(t *testing.T) {
	ctx := t.Context()
	modes := []faults.LossMode{faults.LossDrop, faults.LossKeep, faults.LossTear}
	for seed := range uint64(30) {
		for _, mode := range modes {
			for cycles := 1; cycles <= 3; cycles++ {
				name := fmt.Sprintf("seed %d, %s, %d cycles", seed, mode, cycles)
				m := faults.NewMemFS(seed)
				clock := faults.NewClock(time.UnixMilli(1_800_000_000_000))
				want := ""
				for c := range cycles {
					db, err := state.Open("w.state", state.WithFS(m.Process(1)), state.WithClock(clock), state.WithSync(state.SyncFull))
					require.NoError(t, err, name)
					for i := range 5 {
						want = fmt.Sprintf("v%d.%d", c, i)
						require.NoError(t, db.Set(ctx, "k", []byte(want)), name)
					}
					if c < cycles-1 || seed%2 == 0 {
						require.NoError(t, db.Close(), name)
					} else {
						// Left open across the power loss, closed at the
						// end: an open handle changes when later runs'
						// connections spill pages (sim's doc).
						t.Cleanup(func() { _ = db.Close() })
					}
				}
				m.PowerLoss(mode)
				m.Reboot()
				db, err := state.Open("w.state", state.WithFS(m.Process(2)), state.WithClock(clock))
				require.NoError(t, err, name)
				v, err := db.Get(ctx, "k")
				require.NoError(t, err, name)
				require.Equal(t, want, string(v.Bytes()), name)
				problems, err := db.Check(ctx)
				require.NoError(t, err, name)
				require.Empty(t, problems, name)
				require.NoError(t, db.Close(), name)
			}
		}
	}
}

// TestCutsFindDirectoryChangesNotYetDurable: the simulator's power losses
// fall where a file's creation or deletion is not yet durable (the WAL the
// last Close deleted, the one the next Open made, before a directory sync),
// which needs mid-op cuts that can fall on creations, deletions and
// directory syncs, and the cut a restart arms as its Close begins. One
// process per seed, so that its Close is the last and deletes the WAL.
func TestCutsFindDirectoryChangesNotYetDurable(t *testing.T) {
	found := 0
	for seed := uint64(1); seed <= 8; seed++ {
		cfg := DefaultConfig(seed)
		cfg.Procs = 1
		r, err := Run(cfg)
		require.NoError(t, err)
		require.True(t, r.OK(), "seed %d: %v", seed, r.Violations)
		found += r.Stats.Faults["dir-loss"]
	}
	require.Positive(t, found, "no power loss found a file's creation or deletion not yet durable")
}

// TestPowerLossesFindWhatAFailedDirectorySyncLeft: a failed directory sync
// leaves the WAL's creation or deletion at a power loss's mercy until a
// later sync succeeds, which the next Open's first sync of the WAL does at
// once; so the simulator arms a cut within the next few disk calls once an
// Open failed on a sync, as once a handle did. The power losses then find
// such a change, and every SyncFull write survives them. One process per
// seed, so that its Close deletes the WAL and its Open makes a new one.
func TestPowerLossesFindWhatAFailedDirectorySyncLeft(t *testing.T) {
	var found int64
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := DefaultConfig(seed)
		cfg.Procs = 1
		cfg.SyncFull = true
		cfg.Rates.DirSyncError = 0.2
		cfg.Rates.Restart = 0.03
		r, err := Run(cfg)
		require.NoError(t, err)
		require.True(t, r.OK(), "seed %d: %v", seed, r.Violations)
		found += r.Stats.Disk.FailedDirSyncLosses
	}
	require.Positive(t, found, "no power loss found a change a failed directory sync had left not durable")
}
