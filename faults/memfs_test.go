package faults_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

const rwCreate = vfs.OpenReadWrite | vfs.OpenCreate

// open opens name read-write on p, creating it, and syncs its directory so
// that its entry is durable, failing the test on error.
func open(t *testing.T, p *faults.ProcessFS, name string) vfs.File {
	t.Helper()
	f, err := p.Open(name, rwCreate)
	require.NoError(t, err)
	require.NoError(t, p.SyncDir(name))
	return f
}

// write writes b at off, failing the test on error.
func write(t *testing.T, f vfs.File, b []byte, off int64) {
	t.Helper()
	n, err := f.WriteAt(b, off)
	require.NoError(t, err)
	require.Equal(t, len(b), n)
}

// contents returns the whole file as process pid sees it now.
func contents(t *testing.T, m *faults.MemFS, pid int, name string) []byte {
	t.Helper()
	f, err := m.Process(pid).Open(name, vfs.OpenReadOnly)
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if size > 0 {
		require.NoError(t, err)
	}
	require.Equal(t, int(size), n)
	return b
}

func TestDropLosesUnsyncedWrites(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("synced"), 0)
	require.NoError(t, f.Sync())
	write(t, f, []byte("SYNCED-and-more"), 0)
	assert.Equal(t, []byte("SYNCED-and-more"), contents(t, m, 2, "db"), "reads see the page cache")

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []byte("synced"), contents(t, m, 1, "db"))
}

func TestKeepKeepsUnsyncedWrites(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("abc"), 0)
	require.NoError(t, f.Truncate(2))
	write(t, f, []byte("Z"), 4)

	m.PowerLoss(faults.LossKeep)
	m.Reboot()
	assert.Equal(t, []byte("ab\x00\x00Z"), contents(t, m, 1, "db"))
}

func TestDropUndoesUnsyncedTruncate(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("0123456789"), 0)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Truncate(3))
	size, err := f.Size()
	require.NoError(t, err)
	require.EqualValues(t, 3, size)

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []byte("0123456789"), contents(t, m, 1, "db"))
}

// tearOnce writes 8 sectors of 0xff over 8 synced sectors of 0x11, cuts the
// power in tear mode and returns the result.
func tearOnce(t *testing.T, seed uint64) []byte {
	m := faults.NewMemFS(seed)
	f := open(t, m.Process(1), "db")
	write(t, f, bytes.Repeat([]byte{0x11}, 8*512), 0)
	require.NoError(t, f.Sync())
	write(t, f, bytes.Repeat([]byte{0xff}, 8*512), 0)
	m.PowerLoss(faults.LossTear)
	m.Reboot()
	return contents(t, m, 1, "db")
}

func TestTearKeepsOrDropsWholeSectors(t *testing.T) {
	var kept, dropped, torn int
	for seed := range uint64(200) {
		got := tearOnce(t, seed)
		require.Len(t, got, 8*512)
		newSectors := 0
		for s := range 8 {
			sector := got[s*512 : (s+1)*512]
			switch {
			case bytes.Equal(sector, bytes.Repeat([]byte{0xff}, 512)):
				newSectors++
			case bytes.Equal(sector, bytes.Repeat([]byte{0x11}, 512)):
			default:
				t.Fatalf("seed %d: sector %d mixes old and new bytes", seed, s)
			}
		}
		switch newSectors {
		case 8:
			kept++
		case 0:
			dropped++
		default:
			torn++
		}
	}
	assert.Positive(t, kept, "some writes survive whole")
	assert.Positive(t, dropped, "some writes vanish")
	assert.Positive(t, torn, "some writes tear")
}

func TestTearIsDeterministicPerSeed(t *testing.T) {
	differs := false
	for seed := range uint64(20) {
		assert.Equal(t, tearOnce(t, seed), tearOnce(t, seed), "seed %d", seed)
		differs = differs || !bytes.Equal(tearOnce(t, seed), tearOnce(t, seed+100))
	}
	assert.True(t, differs, "the seed decides the tearing")
}

func TestTearNeverTouchesBytesOutsideTheWrite(t *testing.T) {
	for seed := range uint64(50) {
		m := faults.NewMemFS(seed)
		f := open(t, m.Process(1), "db")
		write(t, f, bytes.Repeat([]byte{0x11}, 2048), 0)
		require.NoError(t, f.Sync())
		write(t, f, bytes.Repeat([]byte{0xff}, 1000), 300) // sector-unaligned
		m.PowerLoss(faults.LossTear)
		m.Reboot()
		got := contents(t, m, 1, "db")
		assert.Equal(t, bytes.Repeat([]byte{0x11}, 300), got[:300], "seed %d", seed)
		assert.Equal(t, bytes.Repeat([]byte{0x11}, 748), got[1300:], "seed %d", seed)
	}
}

func TestPowerLossKillsEveryHandleForGood(t *testing.T) {
	m := faults.NewMemFS(1)
	old := m.Process(1)
	f := open(t, old, "db")
	write(t, f, []byte("x"), 0)
	require.NoError(t, f.Sync())

	m.PowerLoss(faults.LossDrop)
	assert.False(t, m.Powered())
	_, err := m.Process(2).Open("db", vfs.OpenReadOnly)
	assert.ErrorIs(t, err, faults.ErrPowerLost, "nothing works while the power is off")

	m.Reboot()
	assert.True(t, m.Powered())
	_, err = f.ReadAt(make([]byte, 1), 0)
	assert.ErrorIs(t, err, faults.ErrPowerLost, "an old file stays dead")
	_, err = f.WriteAt([]byte("y"), 0)
	assert.ErrorIs(t, err, faults.ErrPowerLost)
	assert.ErrorIs(t, old.Delete("db"), faults.ErrPowerLost, "an old view stays dead")
	_, err = old.Exists("db")
	assert.ErrorIs(t, err, faults.ErrPowerLost)
	assert.ErrorIs(t, f.Close(), faults.ErrPowerLost)

	assert.Equal(t, []byte("x"), contents(t, m, 1, "db"), "a new view works")
}

func TestCrashKillsOneProcessAndKeepsItsWrites(t *testing.T) {
	m := faults.NewMemFS(1)
	p1, p2 := m.Process(1), m.Process(2)
	f1 := open(t, p1, "db")
	f2 := open(t, p2, "db")
	write(t, f1, []byte("from-1"), 0)

	m.Crash(1)
	_, err := f1.WriteAt([]byte("late"), 0)
	assert.ErrorIs(t, err, faults.ErrCrashed)
	_, err = p1.Open("db", vfs.OpenReadOnly)
	assert.ErrorIs(t, err, faults.ErrCrashed)

	b := make([]byte, 6)
	_, err = f2.ReadAt(b, 0)
	require.NoError(t, err)
	assert.Equal(t, []byte("from-1"), b, "the crashed process's writes stay")
	assert.Equal(t, []byte("from-1"), contents(t, m, 1, "db"), "a restarted process sees them")
	assert.EqualValues(t, 1, m.Stats().Crashes)

	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Empty(t, contents(t, m, 2, "db"), "they were never synced")
}

// WritesBy is what lets the simulator leave out a lost call whose process
// wrote nothing: it must count every call that could have changed a byte.
func TestWritesByCountsEveryWriteAProcessTried(t *testing.T) {
	m := faults.NewMemFS(1)
	p1, p2 := m.Process(1), m.Process(2)
	f1 := open(t, p1, "db")
	f2 := open(t, p2, "db")
	write(t, f1, []byte("from-1"), 0)
	require.NoError(t, f1.Truncate(3))
	m.FailAt(faults.OpWrite, 1)
	_, err := f1.WriteAt([]byte("x"), 0)
	require.ErrorIs(t, err, faults.ErrInjected)
	m.SetWriteBudget(0)
	_, err = f1.WriteAt([]byte("y"), 0)
	require.ErrorIs(t, err, vfs.ErrNoSpace)
	m.SetWriteBudget(-1)
	assert.EqualValues(t, 4, m.WritesBy(1), "a write, a truncate, and two refused writes (failed calls may count: never fewer)")

	_, err = f2.ReadAt(make([]byte, 3), 0)
	require.NoError(t, err)
	require.NoError(t, f2.Sync())
	assert.Zero(t, m.WritesBy(2), "reads and syncs change no byte")

	m.Crash(1)
	_, err = f1.WriteAt([]byte("late"), 0)
	require.ErrorIs(t, err, faults.ErrCrashed)
	assert.EqualValues(t, 4, m.WritesBy(1), "a dead process's write reaches no file")
	write(t, open(t, m.Process(1), "db"), []byte("again"), 0)
	assert.EqualValues(t, 5, m.WritesBy(1), "a restarted process counts on")
}

// The simulator reads what a power loss left on a Copy, so the copy must
// hold what reads see, durable, and share nothing with the original.
func TestCopyIsADurableDiskOfItsOwn(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("synced"), 0)
	require.NoError(t, f.Sync())
	write(t, f, []byte("-and-not"), 6)

	c := m.Copy(2)
	assert.Equal(t, []byte("synced-and-not"), contents(t, c, 1, "db"), "the copy holds what reads see")
	c.PowerLoss(faults.LossDrop)
	c.Reboot()
	assert.Equal(t, []byte("synced-and-not"), contents(t, c, 1, "db"), "all of it durable")

	write(t, open(t, c.Process(1), "db"), []byte("copy"), 0)
	assert.Equal(t, []byte("synced-and-not"), contents(t, m, 1, "db"), "writes to the copy stay there")
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []byte("synced"), contents(t, m, 2, "db"), "the original's unsynced writes are as unsynced as before")
}

func TestWriteBudgetFillsTheDisk(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	m.SetWriteBudget(100)
	write(t, f, make([]byte, 60), 0)
	_, err := f.WriteAt(make([]byte, 60), 60)
	require.ErrorIs(t, err, vfs.ErrNoSpace)
	size, err := f.Size()
	require.NoError(t, err)
	assert.EqualValues(t, 60, size, "a refused write writes nothing")
	write(t, f, make([]byte, 40), 60)
	_, err = f.WriteAt([]byte{1}, 0)
	require.ErrorIs(t, err, vfs.ErrNoSpace)

	m.SetWriteBudget(-1)
	write(t, f, make([]byte, 1000), 100)
	assert.EqualValues(t, 2, m.Stats().NoSpaceErrors)
}

// A write that fills the disk is short, as Linux's write(2) is: it writes
// the pages there was room for, up to a page boundary, and says how much.
func TestWriteThatFillsTheDiskIsShort(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	m.SetWriteBudget(5000)
	n, err := f.WriteAt(bytes.Repeat([]byte{7}, 10000), 100)
	require.ErrorIs(t, err, vfs.ErrNoSpace)
	assert.Equal(t, 4096-100, n, "written up to the last page boundary the room reaches")
	assert.Equal(t, append(make([]byte, 100), bytes.Repeat([]byte{7}, n)...), contents(t, m, 1, "db"))
	assert.EqualValues(t, n, m.Stats().BytesWritten)

	n, err = f.WriteAt(bytes.Repeat([]byte{8}, 8192), 4096)
	require.ErrorIs(t, err, vfs.ErrNoSpace)
	assert.Zero(t, n, "less than a page of room left: nothing is written")
	write(t, f, bytes.Repeat([]byte{9}, 1000), 4096) // what fits still goes
	assert.EqualValues(t, 2, m.Stats().NoSpaceErrors)
}

func TestFailAtFailsTheNthCall(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	m.FailAt(faults.OpWrite, 2)
	write(t, f, []byte("a"), 0)
	_, err := f.WriteAt([]byte("b"), 1)
	require.ErrorIs(t, err, faults.ErrInjected)
	write(t, f, []byte("c"), 1)
	assert.Equal(t, []byte("ac"), contents(t, m, 1, "db"))

	m.FailAt(faults.OpRead, 1)
	_, err = f.ReadAt(make([]byte, 1), 0)
	require.ErrorIs(t, err, faults.ErrInjected)
	m.FailAt(faults.OpTruncate, 1)
	require.ErrorIs(t, f.Truncate(0), faults.ErrInjected)
	assert.EqualValues(t, 3, m.Stats().InjectedErrors)
}

// TestSparedProcessMissesInjectedErrors: a spared process's calls neither
// fail nor count toward the call FailAt armed, which the next call of
// another process then meets; the write budget and power cuts still reach
// it, and Spare(pid, false) ends it.
func TestSparedProcessMissesInjectedErrors(t *testing.T) {
	m := faults.NewMemFS(1)
	spared, other := open(t, m.Process(1), "db"), open(t, m.Process(2), "db")
	m.Spare(1, true)
	m.FailAt(faults.OpWrite, 1)
	m.FailAt(faults.OpSync, 1)
	m.SetFailRate(faults.OpRead, 1)
	write(t, spared, []byte("a"), 0)
	require.NoError(t, spared.Sync())
	_, err := spared.ReadAt(make([]byte, 1), 0)
	require.NoError(t, err)
	_, err = other.WriteAt([]byte("b"), 1)
	require.ErrorIs(t, err, faults.ErrInjected, "the armed write error waits for a process not spared")
	assert.EqualValues(t, 1, m.Stats().InjectedErrors)

	m.SetFailRate(faults.OpRead, 0)
	m.SetWriteBudget(0)
	_, err = spared.WriteAt([]byte("c"), 0)
	require.ErrorIs(t, err, vfs.ErrNoSpace, "a full disk reaches a spared process")
	m.SetWriteBudget(-1)

	m.Spare(1, false)
	m.FailAt(faults.OpWrite, 1)
	_, err = spared.WriteAt([]byte("d"), 0)
	require.ErrorIs(t, err, faults.ErrInjected, "spared no more")

	m.PowerLossAt(1, faults.LossKeep)
	m.Spare(1, true)
	_, err = spared.WriteAt([]byte("e"), 0)
	require.ErrorIs(t, err, faults.ErrPowerLost, "a power cut reaches a spared process")
}

func TestFailedSyncLosesItsWritesForGood(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("old"), 0)
	require.NoError(t, f.Sync())
	write(t, f, []byte("NEW"), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	require.NoError(t, f.Sync(), "like Linux, the next fsync reports success")
	assert.Equal(t, []byte("NEW"), contents(t, m, 1, "db"), "the page cache still has it")

	m.PowerLoss(faults.LossKeep)
	m.Reboot()
	assert.Equal(t, []byte("old"), contents(t, m, 1, "db"), "but the disk never got it")
}

// TestDroppedFailedSyncRevertsToDurable: with SetDropFailedSyncs, a failed
// sync drops the writes it was to make durable, as XFS drops a failed
// write-back's pages: reads see the durable bytes again, zeros where
// nothing durable was, at the size the writes left. Writes after the
// failure are kept, and a power loss keeps what was durable.
func TestDroppedFailedSyncRevertsToDurable(t *testing.T) {
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("old"), 0)
	require.NoError(t, f.Sync())
	write(t, f, []byte("NEWtail"), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	assert.Equal(t, []byte("old\x00\x00\x00\x00"), contents(t, m, 1, "db"), "the durable bytes, zeros past them")

	write(t, f, []byte("x"), 7)
	require.NoError(t, f.Sync(), "like Linux, the next fsync reports success")
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Equal(t, []byte("old\x00\x00\x00\x00x"), contents(t, m, 1, "db"))
}

// TestOnDroppedSyncIsToldOfDroppedWrites: SetOnDroppedSync's function hears
// of a failed sync that dropped writes, with the process and the file; not
// of one that had nothing to drop, nor of any while failed syncs keep their
// writes.
func TestOnDroppedSyncIsToldOfDroppedWrites(t *testing.T) {
	m := faults.NewMemFS(1)
	var told []string
	m.SetOnDroppedSync(func(pid int, name string) { told = append(told, fmt.Sprintf("p%d %s", pid, name)) })
	f := open(t, m.Process(2), "db-wal")
	write(t, f, []byte("kept"), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	assert.Empty(t, told, "the writes stay readable: nothing dropped")

	m.SetDropFailedSyncs(true)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	assert.Empty(t, told, "nothing was pending: nothing dropped")

	write(t, f, []byte("gone"), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	assert.Equal(t, []string{"p2 db-wal"}, told)
}

// TestDropFailedSyncsOffKeepsThem: SetDropFailedSyncs(false) is the
// default again: a failed sync's writes stay readable.
func TestDropFailedSyncsOffKeepsThem(t *testing.T) {
	m := faults.NewMemFS(1)
	m.SetDropFailedSyncs(true)
	m.SetDropFailedSyncs(false)
	f := open(t, m.Process(1), "db")
	write(t, f, []byte("NEW"), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	assert.Equal(t, []byte("NEW"), contents(t, m, 1, "db"))
}

func TestSetFailRateIsSeeded(t *testing.T) {
	pattern := func(seed uint64) []bool {
		m := faults.NewMemFS(seed)
		f := open(t, m.Process(1), "db")
		m.SetFailRate(faults.OpRead, 0.5)
		out := make([]bool, 1000)
		for i := range out {
			_, err := f.ReadAt(make([]byte, 1), 0)
			out[i] = errors.Is(err, faults.ErrInjected)
		}
		return out
	}
	a := pattern(7)
	assert.Equal(t, a, pattern(7))
	assert.NotEqual(t, a, pattern(8))
	failed := 0
	for _, f := range a {
		if f {
			failed++
		}
	}
	assert.InDelta(t, 500, failed, 100)
}

func TestSyncNoopLosesEverything(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db")
	m.SetSyncNoop(true)
	write(t, f, []byte("acked"), 0)
	require.NoError(t, f.Sync())
	m.PowerLoss(faults.LossDrop)
	m.Reboot()
	assert.Empty(t, contents(t, m, 1, "db"))
}

func TestPowerLossAtCutsTheNthMutation(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db") // a creation and a directory sync: two mutations
	before := m.Stats().Mutations()
	m.PowerLossAt(3, faults.LossKeep)
	write(t, f, []byte("a"), 0)
	require.NoError(t, f.Sync())
	_, err := f.WriteAt([]byte("b"), 1)
	require.ErrorIs(t, err, faults.ErrPowerLost)
	assert.False(t, m.Powered())
	s := m.Stats()
	assert.EqualValues(t, 2, before)
	assert.EqualValues(t, 3, s.Mutations()-before)
	assert.EqualValues(t, 1, s.PowerLosses)

	m.Reboot()
	assert.Equal(t, []byte("ab"), contents(t, m, 1, "db"), "keep mode keeps the write in flight")
}

func TestOpenSemantics(t *testing.T) {
	m := faults.NewMemFS(1)
	p := m.Process(1)
	_, err := p.Open("db", vfs.OpenReadWrite)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	f := open(t, p, "db")
	_, err = p.Open("db", rwCreate|vfs.OpenExclusive)
	assert.ErrorIs(t, err, fs.ErrExist)

	ro, err := p.Open("db", vfs.OpenReadOnly)
	require.NoError(t, err)
	_, err = ro.WriteAt([]byte("x"), 0)
	assert.ErrorIs(t, err, faults.ErrReadOnly)
	n, err := ro.ReadAt(make([]byte, 4), 0)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF)

	anon, err := p.Open("", rwCreate|vfs.OpenDeleteOnClose)
	require.NoError(t, err)
	write(t, anon, []byte("tmp"), 0)
	assert.Equal(t, []string{"db"}, m.Files(), "an anonymous file has no name")

	ok, err := p.Exists("db")
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, p.Delete("db"))
	assert.ErrorIs(t, p.Delete("db"), fs.ErrNotExist)
	write(t, f, []byte("still open"), 0)
	require.NoError(t, f.Close())
	assert.ErrorIs(t, f.Close(), faults.ErrClosed)
	assert.Empty(t, m.Files())
}

func TestTimeAndEntropyComeFromTheSeed(t *testing.T) {
	a, b := faults.NewMemFS(3).Process(1), faults.NewMemFS(3).Process(1)
	assert.Equal(t, a.CurrentTime(), b.CurrentTime())
	ea, eb := make([]byte, 32), make([]byte, 32)
	a.Entropy(ea)
	b.Entropy(eb)
	assert.Equal(t, ea, eb)
	c := faults.NewMemFS(4).Process(1)
	ec := make([]byte, 32)
	c.Entropy(ec)
	assert.NotEqual(t, ea, ec)

	t0 := a.CurrentTime()
	a.Sleep(250 * time.Millisecond)
	assert.Equal(t, t0.Add(250*time.Millisecond), a.CurrentTime(), "sleep advances only simulated time")

	m := faults.NewMemFS(5)
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m.SetClock(func() time.Time { return fixed })
	assert.Equal(t, fixed, m.Process(1).CurrentTime())
}
