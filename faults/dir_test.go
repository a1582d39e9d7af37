package faults_test

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
)

// exists reports whether name is on m's disk, as process pid sees it.
func exists(t *testing.T, m *faults.MemFS, pid int, name string) bool {
	t.Helper()
	ok, err := m.Process(pid).Exists(name)
	require.NoError(t, err)
	return ok
}

// A file synced but whose directory was not is lost by a power loss, as on
// Linux (fsync(2): the file's fsync does not make its entry durable); a
// power loss that keeps everything keeps it.
func TestNewFileNeedsItsDirectorySynced(t *testing.T) {
	for _, mode := range []faults.LossMode{faults.LossDrop, faults.LossKeep} {
		m := faults.NewMemFS(1)
		p := m.Process(1)
		f, err := p.Open("/d/db-wal", rwCreate)
		require.NoError(t, err)
		write(t, f, []byte("synced"), 0)
		require.NoError(t, f.Sync())
		m.PowerLoss(mode)
		m.Reboot()
		if mode == faults.LossDrop {
			assert.False(t, exists(t, m, 1, "/d/db-wal"), "a new file's entry is not durable until its directory is synced")
			continue
		}
		assert.Equal(t, []byte("synced"), contents(t, m, 1, "/d/db-wal"), mode.String())
	}

	m := faults.NewMemFS(1)
	p := m.Process(1)
	f, err := p.Open("/d/db-wal", rwCreate)
	require.NoError(t, err)
	write(t, f, []byte("synced"), 0)
	require.NoError(t, f.Sync())
	require.NoError(t, p.SyncDir("/d/db-wal"))
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []byte("synced"), contents(t, m, 1, "/d/db-wal"), "durable once its directory is synced")
	assert.EqualValues(t, 1, m.Stats().DirSyncs)
}

// A deletion whose directory was not synced is undone by a power loss: the
// file is back with its durable bytes.
func TestDeleteNeedsItsDirectorySynced(t *testing.T) {
	m := faults.NewMemFS(1)
	p := m.Process(1)
	f := open(t, p, "/d/db-wal")
	write(t, f, []byte("synced"), 0)
	require.NoError(t, f.Sync())
	write(t, f, []byte("-not"), 6)
	require.NoError(t, p.Delete("/d/db-wal"))
	assert.False(t, exists(t, m, 1, "/d/db-wal"))

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []byte("synced"), contents(t, m, 1, "/d/db-wal"), "the deleted file is back, as durable as it was")

	p = m.Process(1)
	require.NoError(t, p.Delete("/d/db-wal"))
	require.NoError(t, p.SyncDir("/d/db-wal"))
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.False(t, exists(t, m, 1, "/d/db-wal"), "a deletion is durable once its directory is synced")
}

// SyncDir makes durable the entries of the directory of the name it is
// given, and only those.
func TestSyncDirSyncsOneDirectory(t *testing.T) {
	m := faults.NewMemFS(1)
	p := m.Process(1)
	for _, name := range []string{"/a/x", "/a/y", "/b/x"} {
		_, err := p.Open(name, rwCreate)
		require.NoError(t, err)
	}
	require.NoError(t, p.SyncDir("/a/x"))
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []string{"/a/x", "/a/y"}, m.Files())

	_, err := m.Process(1).Open("/a/z", rwCreate)
	require.NoError(t, err)
	m.PowerLoss(faults.LossDrop)
	err = m.Process(1).SyncDir("/a/z")
	assert.ErrorIs(t, err, faults.ErrPowerLost, "a dead view syncs nothing")
}

// A tearing power loss keeps, per name, a prefix of the changes since the
// directory's sync: a file deleted and made again comes back as the old
// file, as nothing, or as the new file, never as anything else, and each
// of the three happens.
func TestTearKeepsAPrefixOfANamesChanges(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(60) {
		m := faults.NewMemFS(seed)
		p := m.Process(1)
		write(t, open(t, p, "/d/db-wal"), []byte("old"), 0)
		f, err := p.Open("/d/db-wal", rwCreate)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, p.Delete("/d/db-wal"))
		g, err := p.Open("/d/db-wal", rwCreate)
		require.NoError(t, err)
		write(t, g, []byte("new"), 0)
		require.NoError(t, g.Sync())

		m.PowerLoss(faults.LossTear)
		m.Reboot()
		got := "gone"
		if exists(t, m, 1, "/d/db-wal") {
			got = string(contents(t, m, 1, "/d/db-wal"))
		}
		require.Contains(t, []string{"old", "gone", "new"}, got, "seed %d", seed)
		seen[got]++
	}
	assert.Len(t, seen, 3, "each outcome happens: %v", seen)
}

// A copy of the disk holds every file reads see, its entry durable.
func TestCopyKeepsFilesWhoseDirectoryWasNotSynced(t *testing.T) {
	m := faults.NewMemFS(1)
	f, err := m.Process(1).Open("/d/new", rwCreate)
	require.NoError(t, err)
	write(t, f, []byte("x"), 0)
	c := m.Copy(2)
	c.PowerLoss(faults.LossDrop)
	c.Reboot()
	assert.Equal(t, []byte("x"), contents(t, c, 1, "/d/new"))

	_, err = m.Process(1).Open("/d/missing", 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// PowerLossAt counts a file's creation, its deletion and a directory sync
// among the mutating calls, and cuts the power during one, as a real power
// loss can: the creation or deletion in flight meets the loss mode's fate,
// the directory sync in flight makes nothing durable. Opening a file that
// exists creates nothing, and is not counted.
func TestPowerLossAtCutsDirectoryCalls(t *testing.T) {
	setup := func() (*faults.MemFS, *faults.ProcessFS) {
		m := faults.NewMemFS(1)
		p := m.Process(1)
		write(t, open(t, p, "/d/old"), []byte("old"), 0)
		return m, p
	}
	cutAt := func(m *faults.MemFS, mode faults.LossMode, call func() error) faults.Stats {
		t.Helper()
		before := m.Stats()
		m.PowerLossAt(1, mode)
		require.ErrorIs(t, call(), faults.ErrPowerLost)
		require.False(t, m.Powered(), "the cut fell on the call")
		after := m.Stats()
		require.Equal(t, before.Mutations()+1, after.Mutations(), "the call is one mutating call")
		require.Equal(t, before.DirLosses+1, after.DirLosses, "the cut found a directory change not yet durable")
		m.Reboot()
		return after
	}

	for mode, want := range map[faults.LossMode]bool{faults.LossDrop: true, faults.LossKeep: false} {
		m, p := setup()
		st := cutAt(m, mode, func() error { return p.Delete("/d/old") })
		assert.EqualValues(t, 1, st.Deletes)
		assert.Equal(t, want, exists(t, m, 1, "/d/old"), "a deletion cut by %s", mode)
	}

	for mode, want := range map[faults.LossMode]bool{faults.LossDrop: false, faults.LossKeep: true} {
		m, p := setup()
		st := cutAt(m, mode, func() error {
			_, err := p.Open("/d/new", rwCreate)
			return err
		})
		assert.EqualValues(t, 2, st.Creates)
		assert.Equal(t, want, exists(t, m, 1, "/d/new"), "a creation cut by %s", mode)
	}

	m, p := setup()
	_, err := p.Open("/d/new", rwCreate)
	require.NoError(t, err)
	require.NoError(t, p.Delete("/d/old"))
	cutAt(m, faults.LossDrop, func() error { return p.SyncDir("/d/new") })
	assert.Equal(t, []string{"/d/old"}, m.Files(), "a directory sync cut in flight made nothing durable")

	m, p = setup()
	m.PowerLossAt(1, faults.LossDrop)
	_, err = p.Open("/d/old", rwCreate)
	require.NoError(t, err, "opening a file that exists creates nothing")
	assert.True(t, m.Powered())
}

// A failed directory sync (OpSyncDir) returns an error wrapping
// ErrInjected, counted as an injected directory-sync error, and makes
// nothing durable: a power loss still takes the file created before it
// away and brings the file deleted before it back (counted in
// FailedDirSyncLosses). The directory stays dirty: the next directory sync
// that succeeds, through another process's view too, makes both durable,
// as Linux writes a dirty directory again at its next fsync.
func TestFailedSyncDirLeavesItsChangesPendingUntilOneSucceeds(t *testing.T) {
	setup := func() (*faults.MemFS, *faults.ProcessFS) {
		m := faults.NewMemFS(1)
		p := m.Process(1)
		write(t, open(t, p, "/d/old"), []byte("old"), 0)
		f, err := p.Open("/d/new", rwCreate)
		require.NoError(t, err)
		write(t, f, []byte("new"), 0)
		require.NoError(t, f.Sync())
		require.NoError(t, p.Delete("/d/old"))
		m.FailAt(faults.OpSyncDir, 1)
		err = p.SyncDir("/d/new")
		require.ErrorIs(t, err, faults.ErrInjected)
		assert.Contains(t, err.Error(), `sync directory of "/d/new"`)
		st := m.Stats()
		assert.EqualValues(t, 1, st.InjectedErrors)
		assert.EqualValues(t, 1, st.InjectedDirSyncErrors)
		assert.Zero(t, st.InjectedSyncErrors, "a directory sync is not a file's sync")
		assert.Equal(t, []string{"/d/new"}, m.Files(), "the page cache has both changes")
		return m, p
	}

	m, _ := setup()
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []string{"/d/old"}, m.Files(), "the failed directory sync made neither change durable")
	assert.EqualValues(t, 1, m.Stats().DirLosses)
	assert.EqualValues(t, 1, m.Stats().FailedDirSyncLosses, "the power loss found what the failed sync left")

	m, _ = setup()
	require.NoError(t, m.Process(2).SyncDir("/d/other"), "the next directory sync succeeds")
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []string{"/d/new"}, m.Files(), "a later successful sync made both changes durable")
	assert.Equal(t, []byte("new"), contents(t, m, 1, "/d/new"))
	assert.Zero(t, m.Stats().DirLosses)
	assert.Zero(t, m.Stats().FailedDirSyncLosses)

	m, p := setup()
	_, err := p.Open("/e/other", rwCreate)
	require.NoError(t, err)
	require.NoError(t, p.SyncDir("/d/new"))
	m.PowerLoss(faults.LossDrop)
	assert.EqualValues(t, 1, m.Stats().DirLosses, "a change in another directory is pending")
	assert.Zero(t, m.Stats().FailedDirSyncLosses, "but no failed sync was asked to make it durable")
}

// SetFailRate fails directory syncs too, from the seeded fault stream, and
// FailAt(OpSyncDir) counts directory syncs only: a file's sync neither
// fails nor moves it.
func TestSyncDirFailsOnDemand(t *testing.T) {
	m := faults.NewMemFS(1)
	p := m.Process(1)
	f := open(t, p, "/d/db")
	m.FailAt(faults.OpSyncDir, 2)
	require.NoError(t, f.Sync())
	require.NoError(t, p.SyncDir("/d/db"))
	require.NoError(t, f.Sync())
	require.ErrorIs(t, p.SyncDir("/d/db"), faults.ErrInjected)
	require.NoError(t, p.SyncDir("/d/db"), "FailAt fails one call")

	m.SetFailRate(faults.OpSyncDir, 1)
	require.ErrorIs(t, p.SyncDir("/d/db"), faults.ErrInjected)
	require.NoError(t, f.Sync())
	m.SetFailRate(faults.OpSyncDir, 0)
	require.NoError(t, p.SyncDir("/d/db"))
	st := m.Stats()
	assert.EqualValues(t, 2, st.InjectedDirSyncErrors)
	assert.EqualValues(t, 2, st.InjectedErrors)
	assert.Equal(t, "syncdir", faults.OpSyncDir.String())
}
