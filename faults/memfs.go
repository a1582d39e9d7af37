package faults

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/statekit/statekit/state/vfs"
)

// Streams of the seed, one per subsystem, so that drawing from one never
// shifts another.
const (
	streamTear uint64 = iota + 0x5eed0001
	streamFault
	streamEntropy
	streamTime
	streamEvict
)

// MemFS is the disk of one simulated machine, in memory. Each file keeps its
// durable bytes (as of its last Sync) and the writes since (the page cache):
// reads see everything written, a power loss keeps only what the loss mode
// lets through. Creating and deleting a file are durable only once its
// directory is synced (SyncDir; dir.go), as on Linux: a power loss before
// that may take a new file away, or bring a deleted one back.
//
// Processes reach the disk through views (Process): every view shares the
// files and the machine's vfs.LockManager. Crash ends one process; PowerLoss
// ends them all. Faults can be injected: I/O errors of reads, writes,
// syncs, truncates and directory syncs (FailAt, SetFailRate), failed syncs
// whose writes stay readable or, as reported of XFS, are dropped
// (SetDropFailedSyncs), or are reclaimed a page at a time at later moments
// (SetEvictFailedSyncs), a full disk (SetWriteBudget), a power cut at a
// chosen mutating call, a file's creation or deletion and a directory sync
// among them (PowerLossAt), and a no-op Sync (SetSyncNoop, a negative
// control).
//
// Everything random comes from the seed given to NewMemFS: the same calls in
// the same order give the same bytes. A MemFS is safe for concurrent use; it
// serialises every call.
type MemFS struct {
	mu          sync.Mutex
	files       map[string]*inode
	dirPending  map[string][]dirChange // changes to a name since its directory's sync
	dirDurable  map[string]dirChange   // the durable state of each name in dirPending
	dirFailed   map[string]bool        // the names in dirPending a failed SyncDir was to make durable
	locks       *vfs.LockManager
	epoch       uint64 // bumped by each power loss
	off         bool   // power is off, until Reboot
	incarnation map[int]uint64
	open        map[uint64]*memFile
	lastFileID  uint64
	writesBy    map[int]int64 // WritesBy

	tearRNG    *rand.Rand
	faultRNG   *rand.Rand
	entropyRNG *rand.Rand
	evictRNG   *rand.Rand
	evicting   []*inode // the inodes with failed pages not yet evicted, in the order of their first failure: evict.go
	plan       plan
	stats      Stats

	now    func() time.Time           // SetClock; nil: base + slept
	sleep  func(time.Duration)        // SetSleep; nil: yield only
	yield  func(pid int)              // SetYield; nil: none
	onDrop func(pid int, name string) // SetOnDroppedSync; nil: none
	base   time.Time
	slept  time.Duration
}

// Stats counts what a MemFS has done since NewMemFS. Calls are counted when
// they reach the disk: calls refused for a dead view or file are not.
type Stats struct {
	Opens                 int64 // files opened
	Reads                 int64 // ReadAt calls
	Writes                int64 // WriteAt calls
	Syncs                 int64 // Sync calls
	Truncates             int64 // Truncate calls
	Creates               int64 // files created by Open (anonymous files have no name to create)
	Deletes               int64 // files deleted
	DirSyncs              int64 // SyncDir calls
	BytesWritten          int64 // bytes of successful writes
	InjectedErrors        int64 // calls failed by FailAt or SetFailRate
	InjectedSyncErrors    int64 // the syncs of files among them
	InjectedDirSyncErrors int64 // the directory syncs among them
	NoSpaceErrors         int64 // writes refused by the write budget
	PowerLosses           int64 // PowerLoss calls and cuts from PowerLossAt
	DirLosses             int64 // of PowerLosses, those that found a file's creation or deletion its directory's sync had not made durable
	FailedDirSyncLosses   int64 // of DirLosses, those that found one a failed directory sync had been asked to make durable
	Crashes               int64 // Crash calls
	Sleeps                int64 // Sleep calls (SQLite's xSleep)
	EvictedPages          int64 // pages of failed syncs the page cache let go of while the power was on (SetEvictFailedSyncs): each reads as the disk has it since
}

// Mutations is the number of mutating calls (writes, syncs and truncates
// of files, creations and deletions of files, and directory syncs): the
// count PowerLossAt counts in.
func (s Stats) Mutations() int64 {
	return s.Writes + s.Syncs + s.Truncates + s.Creates + s.Deletes + s.DirSyncs
}

// NewMemFS returns an empty disk whose randomness (tearing, random faults,
// SQLite's entropy, the default current time) all derives from seed. The
// power is on and no fault is armed.
func NewMemFS(seed uint64) *MemFS {
	timeRNG := rand.New(rand.NewPCG(seed, streamTime))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).
		Add(time.Duration(timeRNG.Int64N(365*24*3600*1000)) * time.Millisecond)
	return &MemFS{
		files:       map[string]*inode{},
		dirPending:  map[string][]dirChange{},
		dirDurable:  map[string]dirChange{},
		dirFailed:   map[string]bool{},
		locks:       vfs.NewLockManager(),
		incarnation: map[int]uint64{},
		open:        map[uint64]*memFile{},
		writesBy:    map[int]int64{},
		tearRNG:     rand.New(rand.NewPCG(seed, streamTear)),
		faultRNG:    rand.New(rand.NewPCG(seed, streamFault)),
		entropyRNG:  rand.New(rand.NewPCG(seed, streamEntropy)),
		evictRNG:    rand.New(rand.NewPCG(seed, streamEvict)),
		plan:        plan{budget: -1},
		base:        base,
	}
}

// WritesBy returns how many writes and truncates the views of process pid
// have attempted on a live file, failed ones included: a process whose
// count did not move over an interval changed no byte of any file in it.
func (m *MemFS) WritesBy(pid int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writesBy[pid]
}

// Process returns the view of the disk of process pid, to give to
// vfs.Register (one registration per simulated process). The view dies with
// the process: after Crash(pid), or a power loss, its calls fail, and a
// restarted process takes a new view from Process.
func (m *MemFS) Process(pid int) *ProcessFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &ProcessFS{m: m, pid: pid, epoch: m.epoch, incarnation: m.incarnation[pid]}
}

// Stats returns the counters so far.
func (m *MemFS) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Files returns the names of the files on the disk, sorted.
func (m *MemFS) Files() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files))
	for name := range m.files {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Copy returns a new MemFS whose files hold what m's reads see now, all of
// it durable, with seed for its own randomness: a disk to read without
// touching m. Nothing else is copied: the copy's power is on, no fault is
// armed, no file is open or locked, and its clock and hooks are unset.
func (m *MemFS) Copy(seed uint64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS(seed)
	for name, ino := range m.files {
		c.files[name] = &inode{durable: slices.Clone(ino.data), data: slices.Clone(ino.data)}
	}
	return c
}

// Powered reports whether the power is on.
func (m *MemFS) Powered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.off
}

// SetClock makes now the source of the views' CurrentTime (SQLite's
// xCurrentTime), e.g. a simulated wall clock. nil restores the default: a
// seed-derived instant in 2026 advanced only by Sleep. now is called without
// the MemFS lock held.
func (m *MemFS) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
}

// SetSleep makes fn the real-world part of the views' Sleep (SQLite's
// xSleep), called after simulated time advances: for tests that run
// simulated processes on goroutines, where SQLite's retry loops (its default
// busy handler, the WAL read-lock retries) need others to move while they
// wait, time.Sleep is the honest choice. nil restores the default, which only
// yields the goroutine: a simulation never waits on real time. fn is called
// without the MemFS lock held.
func (m *MemFS) SetSleep(fn func(time.Duration)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sleep = fn
}

// SetYield makes fn the views' vfs.Yielder: SQLite's VFS calls it, with
// the view's process id, before each read, write, sync, truncate and lock
// call, so that a simulator that schedules goroutines can run another
// first. nil, the default, makes Yield do nothing. fn is called without the
// MemFS lock held.
func (m *MemFS) SetYield(fn func(pid int)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.yield = fn
}

// ProcessFS is one process's view of a MemFS: the vfs.FS to register for it.
// Besides vfs.FS it implements vfs.LockSharer (the machine's lock manager),
// vfs.DirSyncer, vfs.Entropy, vfs.TimeSource, vfs.Sleeper and vfs.Yielder, so SQLite over
// it never reads the host's clock or randomness, nor sleeps, and a simulator
// can schedule around its calls.
type ProcessFS struct {
	m           *MemFS
	pid         int
	epoch       uint64
	incarnation uint64
}

var (
	_ vfs.FS         = (*ProcessFS)(nil)
	_ vfs.LockSharer = (*ProcessFS)(nil)
	_ vfs.Entropy    = (*ProcessFS)(nil)
	_ vfs.TimeSource = (*ProcessFS)(nil)
	_ vfs.Sleeper    = (*ProcessFS)(nil)
	_ vfs.Yielder    = (*ProcessFS)(nil)
	_ vfs.DirSyncer  = (*ProcessFS)(nil)
)

// PID returns the process the view belongs to.
func (p *ProcessFS) PID() int { return p.pid }

// alive returns nil while p's process and machine live. Called with m.mu held.
func (p *ProcessFS) alive() error {
	m := p.m
	switch {
	case m.off:
		return fmt.Errorf("process %d: power is off: %w", p.pid, ErrPowerLost)
	case p.epoch != m.epoch:
		return fmt.Errorf("process %d: view predates a power loss: %w", p.pid, ErrPowerLost)
	case p.incarnation != m.incarnation[p.pid]:
		return fmt.Errorf("process %d: %w", p.pid, ErrCrashed)
	}
	return nil
}

// Open opens the named file; an empty name makes an anonymous file. It
// returns an error wrapping fs.ErrNotExist for a missing file without
// vfs.OpenCreate, fs.ErrExist for a present one with OpenCreate|OpenExclusive,
// ErrPowerLost when the power is cut during the file's creation (the
// creation is in flight: the loss mode decides its fate, as for a deletion's),
// and ErrPowerLost or ErrCrashed when the view is dead.
func (p *ProcessFS) Open(name string, flags vfs.OpenFlag) (vfs.File, error) {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := p.alive(); err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	m.evictTick()
	ino := m.files[name]
	switch {
	case name == "":
		ino = &inode{}
	case ino == nil && flags&vfs.OpenCreate == 0:
		return nil, fmt.Errorf("open %q: %w", name, fs.ErrNotExist)
	case ino != nil && flags&vfs.OpenCreate != 0 && flags&vfs.OpenExclusive != 0:
		return nil, fmt.Errorf("open %q: %w", name, fs.ErrExist)
	case ino == nil:
		ino = &inode{}
		m.setEntry(name, ino)
		m.stats.Creates++
		if m.cutDue() {
			return nil, fmt.Errorf("open %q: create: %w", name, m.cut())
		}
	}
	m.lastFileID++
	f := &memFile{view: p, id: m.lastFileID, ino: ino, name: name, readOnly: flags&vfs.OpenReadWrite == 0, errSeen: ino.errSeq}
	m.open[f.id] = f
	m.stats.Opens++
	return f, nil
}

// Delete removes the named file, durably once its directory is synced
// (SyncDir). Open files keep their bytes. It
// returns an error wrapping fs.ErrNotExist when there is none, ErrPowerLost
// when the power is cut during this call (the deletion is in flight: the
// loss mode decides its fate: LossDrop brings the file back), and
// ErrPowerLost or ErrCrashed when the view is dead.
func (p *ProcessFS) Delete(name string) error {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := p.alive(); err != nil {
		return fmt.Errorf("delete %q: %w", name, err)
	}
	m.evictTick()
	if m.files[name] == nil {
		return fmt.Errorf("delete %q: %w", name, fs.ErrNotExist)
	}
	m.setEntry(name, nil)
	m.stats.Deletes++
	if m.cutDue() {
		return fmt.Errorf("delete %q: %w", name, m.cut())
	}
	return nil
}

// Exists reports whether the named file exists. It returns an error wrapping
// ErrPowerLost or ErrCrashed when the view is dead.
func (p *ProcessFS) Exists(name string) (bool, error) {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := p.alive(); err != nil {
		return false, fmt.Errorf("exists %q: %w", name, err)
	}
	m.evictTick()
	return m.files[name] != nil, nil
}

// LockManager returns the machine's lock manager, shared by all views.
func (p *ProcessFS) LockManager() *vfs.LockManager { return p.m.locks }

// Entropy fills b from the disk's seeded entropy stream.
func (p *ProcessFS) Entropy(b []byte) {
	m := p.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range b {
		b[i] = byte(m.entropyRNG.Uint32())
	}
}

// CurrentTime returns the clock set by SetClock, or else the seed-derived
// base time plus every Sleep so far.
func (p *ProcessFS) CurrentTime() time.Time {
	m := p.m
	m.mu.Lock()
	now, t := m.now, m.base.Add(m.slept)
	m.mu.Unlock()
	if now != nil {
		return now()
	}
	return t
}

// Sleep advances the default clock by d, then calls the function set by
// SetSleep, or by default only yields the goroutine: it never waits on real
// time unless a test asked for it.
func (p *ProcessFS) Sleep(d time.Duration) {
	m := p.m
	m.mu.Lock()
	m.slept += d
	m.stats.Sleeps++
	sleep := m.sleep
	m.mu.Unlock()
	if sleep != nil {
		sleep(d)
		return
	}
	runtime.Gosched()
}

// Yield calls the function set by SetYield, if any, with the view's
// process id.
func (p *ProcessFS) Yield() {
	m := p.m
	m.mu.Lock()
	yield := m.yield
	m.mu.Unlock()
	if yield != nil {
		yield(p.pid)
	}
}
