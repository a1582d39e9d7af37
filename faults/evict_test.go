package faults_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/state/vfs"
)

const page = 4096

// evictScene is a file "db-wal" whose first oldPages pages ('a') are
// durable, then overwritten with 'B' and grown to newPages pages, and
// whose sync of that failed, on a disk with SetEvictFailedSyncs: f is
// process 1's descriptor, and told counts SetOnDroppedSync's calls.
type evictScene struct {
	m    *faults.MemFS
	f    vfs.File
	told *[]string
}

const oldPages, newPages = 8, 10

func newEvictScene(t *testing.T, seed uint64) evictScene {
	t.Helper()
	m := faults.NewMemFS(seed)
	m.SetEvictFailedSyncs(true)
	told := new([]string)
	m.SetOnDroppedSync(func(pid int, name string) { *told = append(*told, fmt.Sprintf("p%d %s", pid, name)) })
	f := open(t, m.Process(1), "db-wal")
	write(t, f, bytes.Repeat([]byte("a"), oldPages*page), 0)
	require.NoError(t, f.Sync())
	write(t, f, bytes.Repeat([]byte("B"), newPages*page), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	require.Empty(t, *told, "nothing is evicted by the failure itself")
	return evictScene{m, f, told}
}

// read returns the whole file through f.
func readAll(t *testing.T, f vfs.File) []byte {
	t.Helper()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	require.NoError(t, err)
	require.Equal(t, int(size), n)
	return b
}

// pageStates returns, per page of b, 'B' for a page that still reads as
// the failed sync's write, 'a' for one that reads as the durable bytes,
// '0' for zeros, and '?' for anything else.
func pageStates(b []byte) string {
	var out []byte
	for off := 0; off < len(b); off += page {
		p := b[off:min(off+page, len(b))]
		switch {
		case bytes.Equal(p, bytes.Repeat([]byte("B"), len(p))):
			out = append(out, 'B')
		case bytes.Equal(p, bytes.Repeat([]byte("a"), len(p))):
			out = append(out, 'a')
		case bytes.Equal(p, make([]byte, len(p))):
			out = append(out, '0')
		default:
			out = append(out, '?')
		}
	}
	return string(out)
}

// evictedState is what the scene's file reads as once page i is evicted.
func evictedState(i int) byte {
	if i < oldPages {
		return 'a'
	}
	return '0'
}

// checkStates checks that each page reads either as written or as its
// durable bytes, the size unchanged, and returns how many were evicted.
func checkStates(t *testing.T, states string) int {
	t.Helper()
	require.Len(t, states, newPages, "the size stays as the writes left it")
	evicted := 0
	for i := range states {
		switch states[i] {
		case 'B':
		case evictedState(i):
			evicted++
		default:
			t.Fatalf("page %d reads %q, neither the write nor the durable bytes: %s", i, states[i], states)
		}
	}
	return evicted
}

// TestEvictFailedSyncPagesStayReadable: right after a failed sync its
// pages still read as written: the first read after it sees at most the
// one page its own call may have evicted.
func TestEvictFailedSyncPagesStayReadable(t *testing.T) {
	for seed := range uint64(40) {
		s := newEvictScene(t, seed)
		b := make([]byte, newPages*page)
		_, err := s.f.ReadAt(b, 0)
		require.NoError(t, err)
		evicted := checkStates(t, pageStates(b))
		assert.LessOrEqual(t, evicted, 1, "seed %d", seed)
		assert.Len(t, *s.told, evicted, "seed %d: every eviction is told", seed)
	}
}

// TestEvictFailedSyncOnePageAtATime: the pages go one at a time, each call
// evicting at most one, each told with the process and file whose sync
// failed, and each evicted page reads as the durable bytes (zeros past
// them), until every one is gone.
func TestEvictFailedSyncOnePageAtATime(t *testing.T) {
	s := newEvictScene(t, 7)
	calls, maxAtOnce, seen := 0, 0, 0
	for len(*s.told) < newPages && calls < 5000 {
		before := len(*s.told)
		_, err := s.f.Size() // a call that reaches the disk
		require.NoError(t, err)
		calls++
		maxAtOnce = max(maxAtOnce, len(*s.told)-before)
		if len(*s.told) > before {
			seen++
			b := readAll(t, s.f) // two more calls: each may evict one more
			assert.Equal(t, len(*s.told), checkStates(t, pageStates(b)), "the pages evicted are those told")
		}
	}
	assert.Equal(t, 1, maxAtOnce, "one page at a time")
	assert.Greater(t, seen, 1, "the evictions came at different calls")
	assert.Greater(t, calls, newPages, "not at once")
	assert.Equal(t, "aaaaaaaa00", pageStates(readAll(t, s.f)))
	for _, who := range *s.told {
		assert.Equal(t, "p1 db-wal", who)
	}
	assert.EqualValues(t, newPages, s.m.Stats().EvictedPages)
}

// TestEvictFailedSyncRewrittenPageStays: a page written again after the
// failure is ordinary dirty data: never evicted, and made durable by the
// next sync that succeeds.
func TestEvictFailedSyncRewrittenPageStays(t *testing.T) {
	for seed := range uint64(20) {
		s := newEvictScene(t, seed)
		write(t, s.f, []byte("Z"), 3*page+5) // dirties page 3 (unless it was evicted just before: rewritten either way)
		for range 2000 {
			_, err := s.f.Size()
			require.NoError(t, err)
		}
		b := readAll(t, s.f)
		assert.Equal(t, byte('Z'), b[3*page+5], "seed %d", seed)
		b[3*page+5] = b[3*page+4]
		states := pageStates(b)
		assert.Equal(t, "aaa", states[:3], "seed %d", seed)
		assert.Equal(t, "aaaa00", states[4:], "seed %d", seed)
		assert.Contains(t, "Ba", states[3:4], "seed %d: page 3 kept what it read when it was written", seed)
		assert.Len(t, *s.told, newPages-1+strings01(states[3] == 'a'), "seed %d", seed)

		require.NoError(t, s.f.Sync(), "the failure was reported already")
		s.m.PowerLoss(faults.LossDrop)
		s.m.Reboot()
		assert.Equal(t, byte('Z'), contents(t, s.m, 1, "db-wal")[3*page+5], "seed %d: the rewrite is durable", seed)
	}
}

func strings01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestEvictFailedSyncSameSeedSameEvictions: the same calls with the same
// seed evict the same pages at the same calls; another seed differs.
func TestEvictFailedSyncSameSeedSameEvictions(t *testing.T) {
	run := func(seed uint64) []string {
		s := newEvictScene(t, seed)
		var trace []string
		for range 300 {
			trace = append(trace, pageStates(readAll(t, s.f)))
		}
		return trace
	}
	a, b := run(3), run(3)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, run(4))
	assert.Equal(t, "aaaaaaaa00", a[len(a)-1], "all evicted after 600 calls")
}

// TestEvictFailedSyncLastCloseEvictsRest: closing the last descriptor of
// the file, or the crash of the process that held it, evicts every failed
// page left, each one told; closing another descriptor evicts none.
func TestEvictFailedSyncLastCloseEvictsRest(t *testing.T) {
	for _, crash := range []bool{false, true} {
		s := newEvictScene(t, 1)
		g, err := s.m.Process(2).Open("db-wal", vfs.OpenReadOnly)
		require.NoError(t, err)
		evicted := len(*s.told)
		require.LessOrEqual(t, evicted, 1)
		require.NoError(t, g.Close())
		assert.Len(t, *s.told, evicted, "close evicts nothing while another descriptor is open")
		if crash {
			s.m.Crash(1)
		} else {
			require.NoError(t, s.f.Close())
		}
		assert.Len(t, *s.told, newPages, "crash %v: the rest go at the last close", crash)
		assert.Equal(t, "aaaaaaaa00", pageStates(contents(t, s.m, 3, "db-wal")))
	}
}

// TestEvictFailedSyncDeletedFileIsNotTold: the pages of a file no name
// leads to, evicted at its last close, are told to no one: no one can
// read them again.
func TestEvictFailedSyncDeletedFileIsNotTold(t *testing.T) {
	s := newEvictScene(t, 1)
	before := len(*s.told)
	require.NoError(t, s.m.Process(1).Delete("db-wal"))
	require.NoError(t, s.f.Close())
	assert.LessOrEqual(t, len(*s.told)-before, 1, "the Delete's own call may evict one")
}

// TestEvictFailedSyncPowerLossAsBefore: a power loss leaves the durable
// bytes, as without evictions, whatever was evicted before it, and tells
// no one.
func TestEvictFailedSyncPowerLossAsBefore(t *testing.T) {
	for _, mode := range []faults.LossMode{faults.LossDrop, faults.LossKeep, faults.LossTear} {
		s := newEvictScene(t, 5)
		for range 40 {
			_, err := s.f.Size()
			require.NoError(t, err)
		}
		told := len(*s.told)
		s.m.PowerLoss(mode)
		assert.Len(t, *s.told, told, "%s: a power loss is no eviction", mode)
		s.m.Reboot()
		got := contents(t, s.m, 1, "db-wal")

		plain := faults.NewMemFS(5) // the same scene, no evictions
		f := open(t, plain.Process(1), "db-wal")
		write(t, f, bytes.Repeat([]byte("a"), oldPages*page), 0)
		require.NoError(t, f.Sync())
		write(t, f, bytes.Repeat([]byte("B"), newPages*page), 0)
		plain.FailAt(faults.OpSync, 1)
		require.ErrorIs(t, f.Sync(), faults.ErrInjected)
		plain.PowerLoss(mode)
		plain.Reboot()
		assert.Equal(t, contents(t, plain, 1, "db-wal"), got, "%s", mode)
		assert.Equal(t, "aaaaaaaa", pageStates(got), "%s", mode)
	}
}

// TestEvictFailedSyncTruncateForgetsCutPages: a truncate forgets the
// failed pages it cuts (a regrown file reads zeros there, not the durable
// bytes), and keeps those below.
func TestEvictFailedSyncTruncateForgetsCutPages(t *testing.T) {
	s := newEvictScene(t, 2)
	require.NoError(t, s.f.Truncate(2*page+10))
	require.NoError(t, s.f.Truncate(newPages*page))
	require.NoError(t, s.f.Close())
	b := contents(t, s.m, 1, "db-wal")
	assert.Equal(t, "aa", pageStates(b[:2*page]), "the pages below are evicted at the last close")
	assert.Equal(t, make([]byte, newPages*page-2*page-10), b[2*page+10:], "the cut part was forgotten")
}

// TestEvictAndDropFailedSyncsDropWins: with both on, a failed sync drops
// its writes at once, told once, and nothing is left to evict.
func TestEvictAndDropFailedSyncsDropWins(t *testing.T) {
	m := faults.NewMemFS(1)
	m.SetEvictFailedSyncs(true)
	m.SetDropFailedSyncs(true)
	var told int
	m.SetOnDroppedSync(func(int, string) { told++ })
	f := open(t, m.Process(1), "db-wal")
	write(t, f, bytes.Repeat([]byte("a"), 2*page), 0)
	require.NoError(t, f.Sync())
	write(t, f, bytes.Repeat([]byte("B"), 3*page), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	assert.Equal(t, 1, told)
	assert.Equal(t, "aa0", pageStates(readAll(t, f)))
	require.NoError(t, f.Close())
	assert.Equal(t, 1, told, "nothing left to evict")
	assert.Zero(t, m.Stats().EvictedPages)
}

// TestEvictFailedSyncsOffKeepsThem: off (the default), failed pages stay
// readable through any number of calls.
func TestEvictFailedSyncsOffKeepsThem(t *testing.T) {
	m := faults.NewMemFS(1)
	f := open(t, m.Process(1), "db-wal")
	write(t, f, bytes.Repeat([]byte("B"), 3*page), 0)
	m.FailAt(faults.OpSync, 1)
	require.ErrorIs(t, f.Sync(), faults.ErrInjected)
	for range 500 {
		_, err := f.Size()
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	assert.Equal(t, "BBB", pageStates(contents(t, m, 1, "db-wal")))
}

// TestEvictFailedPagesEvictsEveryOneNow: EvictFailedPages takes every
// page a failed sync left in the cache back to the disk's bytes at once,
// each told, the descriptor still open.
func TestEvictFailedPagesEvictsEveryOneNow(t *testing.T) {
	s := newEvictScene(t, 3)
	s.m.EvictFailedPages()
	require.Len(t, *s.told, newPages, "every failed page is evicted, and told")
	assert.Equal(t, "aaaaaaaa00", pageStates(readAll(t, s.f)))
	assert.Equal(t, int64(newPages), s.m.Stats().EvictedPages)
}
