package state

import (
	"fmt"
	"time"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/hooks"
	"github.com/statekit/statekit/state/vfs"
)

// SyncMode is how hard a commit waits for the disk.
type SyncMode int

const (
	// SyncNormal commits with SQLite's synchronous=NORMAL in WAL mode: a
	// commit survives an application crash, but a power loss can roll back
	// the latest commits (what survives is always a prefix of them). This is
	// the default for every write except lease grants.
	SyncNormal SyncMode = iota
	// SyncFull syncs the WAL after every commit, before the verb returns:
	// the commit survives a power loss, and so does every commit before it.
	// The sync runs after COMMIT, outside the file's write lock, so other
	// processes write the file meanwhile (and may read the commit before it
	// is durable; a power loss then takes it back before anyone was
	// answered). Lease grants are always synced before they return.
	//
	// Over a Redis URL (redisstate) there is no WAL to sync: the server's
	// append-only file is what keeps a write. SyncFull then makes every
	// write verb check, as Lease does, that every server has appendonly
	// yes, appendfsync always and no eviction, and fail with ErrNotDurable
	// without writing otherwise; reads are not checked.
	SyncFull
)

// Default settings.
const (
	DefaultBusyTimeout   = 5 * time.Second
	DefaultSweepInterval = time.Second
	DefaultFlushInterval = 250 * time.Millisecond
)

// config is what the options set.
type config struct {
	clock         Clock
	fs            vfs.FS
	sync          SyncMode
	busyTimeout   time.Duration
	sweepInterval time.Duration
	flushInterval time.Duration
	background    bool
	readOnly      bool
	bugs          bugs.Set

	// Set only through internal/hooks, by statekit's own simulator and
	// stress tests.
	sched            hooks.Scheduler     // nil: real goroutines and locks
	flushes          hooks.FlushObserver // nil: none
	sweeps           hooks.SweepObserver // nil: none
	times            func(int64)         // nil: none
	nows             func(int64)         // told DB.Now's answers; nil: none
	checkpointEvery  int                 // writes between background checkpoints
	inlineSweepEvery int                 // writes between inline sweep batches
	sweepStepRows    int                 // rows a sweep step deletes at most (sweep.go)
	sqliteBusy       bool                // wait for another process's lock on SQLite's schedule (busy.go)
	keepIndex        bool                // never mark the shared index for rebuilding (indexforget.go)
	lossFound        func(string)        // nil: none (indexforget.go)
}

func defaultConfig() config {
	return config{
		sync:          SyncNormal,
		busyTimeout:   DefaultBusyTimeout,
		sweepInterval: DefaultSweepInterval,
		flushInterval: DefaultFlushInterval,
		background:    true,

		checkpointEvery:  checkpointEvery,
		inlineSweepEvery: inlineSweepEvery,
		sweepStepRows:    sweepBatchRows,
	}
}

func init() {
	hooks.Option = func(e hooks.Engine) any {
		return Option(func(cfg *config) {
			cfg.bugs, cfg.sched, cfg.flushes, cfg.sweeps, cfg.times = e.Bugs, e.Sched, e.Flushes, e.Sweeps, e.Times
			cfg.nows = e.Nows
			if e.CheckpointEvery > 0 {
				cfg.checkpointEvery = e.CheckpointEvery
			}
			if e.InlineSweepEvery > 0 {
				cfg.inlineSweepEvery = e.InlineSweepEvery
			}
			if e.SweepStepRows > 0 {
				cfg.sweepStepRows = e.SweepStepRows
			}
			cfg.sqliteBusy = e.SQLiteBusySchedule
			cfg.keepIndex = e.KeepIndexAfterFailedSync
			cfg.lossFound = e.LossFound
		})
	}
}

// Option configures Open.
type Option func(*config)

// WithClock makes the engine read time from c instead of the operating
// system. The simulator and tests inject a clock they step by hand. A nil c
// is the operating system's clock, as without the option.
func WithClock(c Clock) Option { return func(cfg *config) { cfg.clock = c } }

// WithFS makes the engine reach the file through fs, by a Go SQLite VFS,
// instead of SQLite's native unix VFS. The simulator passes a faults.MemFS
// process view (a disk that loses power); vfs.OS() runs the same Go path on
// real files. Without WithFS the engine uses the native VFS, whose locks work
// across OS processes. A nil fs is the native VFS, as without the option.
func WithFS(fs vfs.FS) Option { return func(cfg *config) { cfg.fs = fs } }

// check refuses option values that mean nothing.
func (cfg *config) check() error {
	switch {
	case cfg.sync != SyncNormal && cfg.sync != SyncFull:
		return fmt.Errorf("%w: WithSync(%d): want SyncNormal or SyncFull", ErrInvalidArgument, cfg.sync)
	case cfg.busyTimeout < 0:
		return fmt.Errorf("%w: WithBusyTimeout(%v): want zero (never wait) or more", ErrInvalidArgument, cfg.busyTimeout)
	}
	return nil
}

// WithSync sets the sync mode of ordinary writes (SyncNormal by default).
// Lease grants are synced before they return whatever this says. Over a
// Redis URL, SyncFull refuses every write (ErrNotDurable) unless the
// server keeps every acknowledged write (see SyncFull); the URL parameter
// allow_unsafe_leases does not lift that: it accepts repeated fencing
// tokens, not the lost writes SyncFull asked never to have.
func WithSync(m SyncMode) Option { return func(cfg *config) { cfg.sync = m } }

// WithBusyTimeout sets how long a verb may wait before it fails with
// ErrBusy (DefaultBusyTimeout by default). Zero never waits: a verb that
// finds another connection's lock on the file fails with ErrBusy at once.
// A negative d fails Open with ErrInvalidArgument. The budget covers the whole
// verb's waits, from its call: for the handle, behind other verbs, a group
// commit, a background sweep or checkpoint, and for another connection's
// lock on the file. A verb whose budget went by in the handle's queue still
// retries a lock held for a moment, for a tenth of the timeout (at most
// 100 ms), so a verb held off by a stopped writer fails within 1.1 times
// its timeout (within its timeout when nothing of the handle was ahead of
// it), plus the time its statements take to run. Over a Redis URL there is
// no file lock: it bounds a cluster's waits for a slot moving between
// masters (an Update's, a listing's).
func WithBusyTimeout(d time.Duration) Option { return func(cfg *config) { cfg.busyTimeout = d } }

// WithSweepInterval sets how often the background sweeper deletes expired
// keys (DefaultSweepInterval by default); zero or less turns it off.
func WithSweepInterval(d time.Duration) Option {
	return func(cfg *config) { cfg.sweepInterval = d }
}

// WithFlushInterval sets how often buffered increments are written
// (DefaultFlushInterval by default); zero or less turns the background flush
// off, leaving Flush and Close to write them.
func WithFlushInterval(d time.Duration) Option {
	return func(cfg *config) { cfg.flushInterval = d }
}

// WithoutBackground starts none of the engine's goroutines — no background
// sweep, no background flush, no background checkpoint (SQLite then
// checkpoints on the handle's own connection, as it does by default) — and
// turns off the small sweeps that follow writes. (database/sql keeps an
// idle goroutine of its own for each pool it opens; it runs no engine
// code.) A simulator that calls Sweep and Flush itself at virtual times
// uses it.
func WithoutBackground() Option { return func(cfg *config) { cfg.background = false } }

// WithReadOnly opens the file for reading only: it must exist and be a
// statekit file, nothing in it is created, changed or advanced (not even the
// high-water mark), and every write verb fails with ErrReadOnly.
func WithReadOnly() Option { return func(cfg *config) { cfg.readOnly = true } }

// WriteOption configures one write verb.
type WriteOption func(*writeConfig)

type writeConfig struct {
	ttl    time.Duration
	hasTTL bool
}

// TTL gives the key a deadline d from now, rounded up to whole
// milliseconds. Set applies it always; Incr, IncrBy, Decr and DecrBy only
// when they create the key. A d of zero or less makes the verb fail with
// ErrInvalidTTL.
func TTL(d time.Duration) WriteOption {
	return func(w *writeConfig) { w.ttl, w.hasTTL = d, true }
}

// writeTTLMillis applies opts and returns the TTL in milliseconds, 0 for
// none; a nil option is ErrInvalidArgument, as a nil Option is to Open.
func writeTTLMillis(opts []WriteOption) (int64, error) {
	var w writeConfig
	for _, o := range opts {
		if o == nil {
			return 0, fmt.Errorf("%w: nil WriteOption", ErrInvalidArgument)
		}
		o(&w)
	}
	if !w.hasTTL {
		return 0, nil
	}
	return ttlMillis(w.ttl)
}
