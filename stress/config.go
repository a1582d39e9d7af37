package stress

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/statekit/statekit/internal/bugs"
)

// Config says how hard and how long a run attacks the file.
type Config struct {
	// Dir holds the run's files: the state file, the fenced resource, one
	// journal and one stderr log per worker, and porcupine's HTML view of a
	// failure. It must exist; Run leaves it as it is for inspection.
	Dir string
	// Processes is how many workers run at once (DefaultProcesses if 0).
	Processes int
	// Duration bounds the run's wall time (DefaultDuration if 0).
	Duration time.Duration
	// MaxOps stops the run once the workers have made this many calls, if
	// it comes before Duration (0: no bound but Duration).
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
	// CheckTimeout bounds porcupine's search per partition
	// (DefaultCheckTimeout if 0). A partition that runs out is a violation.
	CheckTimeout time.Duration
	// Exe is the binary to re-execute as a worker (os.Executable() if
	// empty). Its main or TestMain must call WorkerMain first.
	Exe string
	// Args are extra arguments for the workers, such as "-test.run=^$".
	Args []string
	// Log receives progress lines (nothing if nil).
	Log io.Writer
}

// Defaults of Config.
const (
	DefaultProcesses    = 4
	DefaultDuration     = 10 * time.Second
	DefaultKillEvery    = 250 * time.Millisecond
	DefaultCheckTimeout = time.Minute
	DefaultEpochEvery   = 5 * time.Second
	// MaxProcesses bounds Config.Processes.
	MaxProcesses = 64
	// MaxDuration bounds Config.Duration.
	MaxDuration = 24 * time.Hour
)

// ErrConfig is returned by Run for a Config it cannot run.
var ErrConfig = errors.New("stress: bad config")

// withDefaults fills the zero fields and checks the bounds.
func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		return c, fmt.Errorf("%w: no Dir", ErrConfig)
	}
	if c.Processes == 0 {
		c.Processes = DefaultProcesses
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
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
	switch {
	case c.Processes < 1 || c.Processes > MaxProcesses:
		return c, fmt.Errorf("%w: %d processes, want 1 to %d", ErrConfig, c.Processes, MaxProcesses)
	case c.Duration < 0 || c.Duration > MaxDuration:
		return c, fmt.Errorf("%w: duration %v, want up to %v", ErrConfig, c.Duration, MaxDuration)
	case c.MaxOps < 0:
		return c, fmt.Errorf("%w: negative MaxOps", ErrConfig)
	case c.CheckTimeout < 0:
		return c, fmt.Errorf("%w: negative CheckTimeout", ErrConfig)
	case c.EpochEvery < 0:
		return c, fmt.Errorf("%w: negative EpochEvery", ErrConfig)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c, nil
}
