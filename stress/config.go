package stress

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

// Config says how hard and how long a run attacks the file, or a Redis
// server (Redis).
type Config struct {
	// Dir holds the run's files: the state file, the fenced resource, one
	// journal and one stderr log per worker, porcupine's HTML view of a
	// failure and, for a Redis run with a server of its own, the server's
	// directory (redis/). It must exist; Run leaves it as it is for
	// inspection.
	Dir string
	// Redis, when not nil, attacks a Redis server instead of a file: the
	// workers open a redis:// URL (the binary must import
	// github.com/statekit/statekit/redisstate), and the driver SIGKILLs
	// and restarts the server too. See the package doc for what the
	// checks become.
	Redis *Redis
	// Processes is how many workers run at once (DefaultProcesses if 0).
	Processes int
	// Readers is how many read-only workers run beside them, as statectl
	// runs beside an application: each opens the file with
	// state.WithReadOnly and state.WithoutBackground, and its clients only
	// Get and TTL keys. The driver kills and restarts them as it does the
	// others (0: DefaultReaders; negative: none). A Redis run and a
	// StepClock run have none, and refuse more: WithReadOnly opens a file,
	// and a reader reads on the real clock, as statectl does.
	Readers int
	// Goroutines is how many goroutines of each worker call verbs at once,
	// each its own client and lease owner (DefaultGoroutines if 0). A
	// StepClock run has one.
	Goroutines int
	// StepClock opens the workers as the first stress runs did: with
	// state.WithoutBackground, a clock that moves only between calls, and
	// one call at a time, so the engine time of each call is known before
	// it is made. By default workers open the file with the engine's
	// default options: the real clock, and the background sweeper, flusher
	// and checkpointer.
	StepClock bool
	// Duration is how long the workers attack (DefaultDuration if 0). With
	// Until set it is a cap instead (DefaultCap if 0): the run stops as
	// soon as it has done Until, and a run that reaches the cap first
	// fails, saying how much it did.
	Duration time.Duration
	// Until is the work a run must do before it stops (zero: none; the run
	// lasts Duration).
	Until Work
	// MaxOps stops the run once the workers have made this many calls, if
	// it comes first (0: no bound). It bounds the history the check holds
	// in memory.
	MaxOps int
	// KillEvery is the mean time between two SIGKILLs, each of a random
	// worker, which is restarted at once (exponentially distributed; 0:
	// DefaultKillEvery; negative: no kills).
	KillEvery time.Duration
	// Seed derives every random choice of the driver and the workers. The
	// operating system still schedules the processes, so two runs with one
	// seed differ: the seed fixes the workload, not the interleaving.
	Seed uint64
	// Bugs plants bugs in every worker's engine, to show that a check
	// catches them.
	Bugs bugs.Set
	// EpochEvery is how long the workers use one set of keys before they
	// move to the next (DefaultEpochEvery if 0): it bounds the history of
	// one key, and with it the time and memory the check takes.
	EpochEvery time.Duration
	// CheckTimeout bounds the linearizability search per partition
	// (DefaultCheckTimeout if 0). A partition that runs out is a violation.
	CheckTimeout time.Duration
	// CheckLimit bounds the whole linearizability check, every epoch and
	// partition of it (0: no bound). CheckTimeout bounds each partition
	// alone, so a run whose history has many slow partitions can check for
	// hours. A check that reaches CheckLimit stops there, and the report
	// says how far it got (a KindCheckLimit violation); the other checks
	// run all the same.
	CheckLimit time.Duration
	// Exe is the binary to re-execute as a worker (os.Executable() if
	// empty). Its main or TestMain must call WorkerMain first.
	Exe string
	// Args are extra arguments for the workers, such as "-test.run=^$".
	Args []string
	// Log receives progress lines (nothing if nil).
	Log io.Writer
}

// Work is how much a run did, or must do before it stops.
type Work struct {
	// Calls counts the calls recorded.
	Calls int
	// Kills counts the SIGKILLs sent.
	Kills int
	// Grants counts the lease grants a holder saw (alone or in an Update).
	Grants int
	// Contended counts the lease grants (Lease alone) whose call overlapped
	// a Lease call of another process on the same lease: the moments when
	// two processes' grants can interleave, which a grant made of two
	// statements gets wrong.
	Contended int
	// Swept counts the expired keys deleted by sweeps the history records:
	// on the real clock the background and inline sweeps, on the stepped
	// clock the Sweep calls. A Redis run has none: the server expires keys
	// itself.
	Swept int
	// ServerKills counts the SIGKILLs of the Redis server, each followed by
	// a restart on the same port and directory.
	ServerKills int
}

// IsZero reports whether w asks for nothing.
func (w Work) IsZero() bool { return w == Work{} }

// covers reports whether w is at least want in every count.
func (w Work) covers(want Work) bool {
	return w.Calls >= want.Calls && w.Kills >= want.Kills && w.Grants >= want.Grants &&
		w.Contended >= want.Contended && w.Swept >= want.Swept && w.ServerKills >= want.ServerKills
}

// Asked lists the counts that are above 0, such as "5000 calls, 20
// kills": what a run with w as its Until waits for.
func (w Work) Asked() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{w.Calls, "calls"}, {w.Kills, "kills"}, {w.Grants, "grants"}, {w.Contended, "contended grants"},
		{w.Swept, "swept keys"}, {w.ServerKills, "server kills"}} {
		if c.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// String lists the counts, such as "812 calls, 2 kills, 10 grants, 3
// contended grants, 5 swept keys", and the server kills when there are
// some.
func (w Work) String() string {
	s := fmt.Sprintf("%d calls, %d kills, %d grants, %d contended grants, %d swept keys",
		w.Calls, w.Kills, w.Grants, w.Contended, w.Swept)
	if w.ServerKills > 0 {
		s += fmt.Sprintf(", %d server kills", w.ServerKills)
	}
	return s
}

// Redis says which Redis server a run attacks, and how.
type Redis struct {
	// URL names a server the caller runs, such as
	// "redis://127.0.0.1:6379/0": the workers open it with a prefix of the
	// run's own added (prefix=stress:<seed>:<time>:), and the driver never
	// kills it; when the run ends, pass or fail, it deletes every key under
	// that prefix, and no other (Report.KeysRemoved). Empty: Run starts a redis-server of its own in Dir/redis
	// (internal/redistest.Launch: appendonly yes, appendfsync always),
	// SIGKILLs and restarts it, and kills it when the run ends.
	URL string
	// KillEvery is the mean time between two SIGKILLs of the server Run
	// started, each followed at once by a restart on the same port and
	// directory (exponentially distributed; 0: DefaultServerKillEvery;
	// negative: no server kills).
	KillEvery time.Duration
	// NoPersistence starts the server with appendonly no, and the workers
	// with allow_unsafe_leases=true (Lease refuses such a server
	// otherwise): a restart loses what the server acknowledged, fencing
	// tokens included. It is the negative control: such a run must report
	// a token granted twice.
	NoPersistence bool
}

// Defaults of Config.
const (
	DefaultProcesses    = 4
	DefaultGoroutines   = 4
	DefaultDuration     = 10 * time.Second
	DefaultCap          = 5 * time.Minute
	DefaultKillEvery    = 250 * time.Millisecond
	DefaultCheckTimeout = time.Minute
	DefaultEpochEvery   = 5 * time.Second
	// DefaultServerKillEvery is Redis.KillEvery's default.
	DefaultServerKillEvery = 2 * time.Second
	// DefaultReaders is Readers' default on a file run on the real clock.
	DefaultReaders = 1
	// MaxProcesses bounds Config.Processes.
	MaxProcesses = 64
	// MaxReaders bounds Config.Readers.
	MaxReaders = 64
	// MaxGoroutines bounds Config.Goroutines.
	MaxGoroutines = 64
	// MaxDuration bounds Config.Duration.
	MaxDuration = 24 * time.Hour
)

// ErrConfig is returned by Run for a Config it cannot run.
var ErrConfig = errors.New("stress: bad config")

// Validate returns the ErrConfig Run would return for c, Dir aside (Run
// needs one; Validate lets a caller check c before it makes it), or nil.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults fills the zero fields and checks the bounds, Dir aside.
func (c Config) withDefaults() (Config, error) {
	if c.Processes == 0 {
		c.Processes = DefaultProcesses
	}
	switch {
	case c.Readers == 0 && c.Redis == nil && !c.StepClock:
		c.Readers = DefaultReaders
	case c.Readers < 0:
		c.Readers = 0
	case c.Readers > 0 && c.Redis != nil:
		return c, fmt.Errorf("%w: %d readers, but a Redis run has none: state.WithReadOnly opens a file, not a URL", ErrConfig, c.Readers)
	case c.Readers > 0 && c.StepClock:
		return c, fmt.Errorf("%w: %d readers, but a StepClock run has none: a reader reads on the real clock, as statectl does", ErrConfig, c.Readers)
	}
	if c.Goroutines == 0 && !c.StepClock {
		c.Goroutines = DefaultGoroutines
	}
	if c.Goroutines == 0 {
		c.Goroutines = 1
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
		if !c.Until.IsZero() {
			c.Duration = DefaultCap
		}
	}
	if c.KillEvery == 0 {
		c.KillEvery = DefaultKillEvery
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.EpochEvery == 0 {
		c.EpochEvery = DefaultEpochEvery
	}
	if c.Redis != nil {
		r := *c.Redis
		switch {
		case r.URL != "":
			r.KillEvery = -1 // the caller's server is never killed
		case r.KillEvery == 0:
			r.KillEvery = DefaultServerKillEvery
		}
		c.Redis = &r
	}
	switch {
	case c.Processes < 1 || c.Processes > MaxProcesses:
		return c, fmt.Errorf("%w: %d processes, want 1 to %d", ErrConfig, c.Processes, MaxProcesses)
	case c.Readers > MaxReaders:
		return c, fmt.Errorf("%w: %d readers, want 0 to %d", ErrConfig, c.Readers, MaxReaders)
	case c.Goroutines < 1 || c.Goroutines > MaxGoroutines:
		return c, fmt.Errorf("%w: %d goroutines, want 1 to %d", ErrConfig, c.Goroutines, MaxGoroutines)
	case c.StepClock && c.Goroutines != 1:
		return c, fmt.Errorf("%w: a stepped clock runs one call at a time, not %d goroutines", ErrConfig, c.Goroutines)
	case c.Duration < 0 || c.Duration > MaxDuration:
		return c, fmt.Errorf("%w: duration %v, want up to %v", ErrConfig, c.Duration, MaxDuration)
	case c.MaxOps < 0:
		return c, fmt.Errorf("%w: negative MaxOps", ErrConfig)
	case c.Until.Calls < 0 || c.Until.Kills < 0 || c.Until.Grants < 0 || c.Until.Contended < 0 || c.Until.Swept < 0 || c.Until.ServerKills < 0:
		return c, fmt.Errorf("%w: negative work in Until (%s)", ErrConfig, c.Until)
	case c.Until.Kills > 0 && c.KillEvery < 0:
		return c, fmt.Errorf("%w: Until asks for %d kills, but there are none", ErrConfig, c.Until.Kills)
	case c.MaxOps > 0 && c.Until.Calls > c.MaxOps:
		return c, fmt.Errorf("%w: Until asks for %d calls, but MaxOps stops the run at %d", ErrConfig, c.Until.Calls, c.MaxOps)
	case c.Until.Contended > 0 && c.Processes < 2:
		return c, fmt.Errorf("%w: Until asks for %d grants contended between processes, but there is one process", ErrConfig, c.Until.Contended)
	case c.Redis != nil && c.Until.Swept > 0:
		return c, fmt.Errorf("%w: Until asks for %d swept keys, but Redis expires keys itself: a Redis run records no sweep", ErrConfig, c.Until.Swept)
	case c.CheckTimeout < 0:
		return c, fmt.Errorf("%w: negative CheckTimeout", ErrConfig)
	case c.CheckLimit < 0:
		return c, fmt.Errorf("%w: negative CheckLimit", ErrConfig)
	case c.EpochEvery < 0:
		return c, fmt.Errorf("%w: negative EpochEvery", ErrConfig)
	case c.Redis == nil && c.Until.ServerKills > 0:
		return c, fmt.Errorf("%w: Until asks for %d server kills, but the run attacks a file", ErrConfig, c.Until.ServerKills)
	case c.Redis != nil && c.StepClock:
		return c, fmt.Errorf("%w: a Redis run follows the server's clock: no StepClock", ErrConfig)
	case c.Redis != nil && !c.Bugs.Empty():
		return c, fmt.Errorf("%w: planted bugs are the file engine's, not Redis's", ErrConfig)
	case c.Redis != nil && c.Redis.URL != "" && (c.Redis.NoPersistence || c.Until.ServerKills > 0):
		return c, fmt.Errorf("%w: a server the caller runs is never killed nor configured by the run", ErrConfig)
	case c.Redis != nil && c.Until.ServerKills > 0 && c.Redis.KillEvery < 0:
		return c, fmt.Errorf("%w: Until asks for %d server kills, but there are none", ErrConfig, c.Until.ServerKills)
	}
	if c.Redis != nil && c.Redis.URL != "" {
		if err := checkRedisURL(c.Redis.URL); err != nil {
			return c, err
		}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c, nil
}
