package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/recipehooks"
	"github.com/statekit/statekit/internal/textcut"
	"github.com/statekit/statekit/state"
)

// Limiter decides whether a request under a key is allowed. Every limiter in
// this package implements it; each decision is one atomic step in the file,
// so it is exact across goroutines and processes sharing the file.
type Limiter interface {
	// Allow decides one request under key: AllowN(ctx, key, 1).
	Allow(ctx context.Context, key string) (Decision, error)
	// AllowN decides a request that costs n (1 <= n <= the limit) under
	// key: all n are allowed together, or none is, and a refused request
	// takes no room from later ones (a fixed window counts a refused
	// request of one, but only in a window already full).
	AllowN(ctx context.Context, key string, n int64) (Decision, error)
}

// Decision is a limiter's answer to one request.
type Decision struct {
	// Allowed says whether the request may go ahead.
	Allowed bool
	// Limit is the limiter's quota: the requests a window allows, or the
	// token bucket's capacity (its burst).
	Limit int64
	// Remaining is how many more requests of one would be allowed now,
	// after this one if it was allowed. It is never negative.
	Remaining int64
	// RetryAfter is how long until a request could be allowed: for a
	// refused request, the same request of n; for an allowed one, another
	// request of one (zero while Remaining > 0). It is whole milliseconds,
	// rounded up, as the engine's time moves: a caller that waits it finds
	// the request allowed, one that waits a millisecond less does not. It
	// is what Retry-After says, rounded up to whole seconds.
	RetryAfter time.Duration
	// Reset is how long until the quota is whole again (Remaining back at
	// Limit) if no other request comes: the end of a fixed window, the time
	// the sliding window stops counting the requests it counts now, the
	// time a token bucket is full again. It is whole milliseconds, rounded
	// up, as RetryAfter is. It is what RateLimit-Reset says.
	Reset time.Duration
}

// inWholeMillis returns d with RetryAfter and Reset rounded up to whole
// milliseconds. The engine's time moves in whole milliseconds, so a moment
// between two of them comes, for the engine, at the later one: a caller
// that waited the exact nanoseconds (a token every 333,333,333 ns) would
// find the engine's time short of it and be refused again.
func (d Decision) inWholeMillis() Decision {
	d.RetryAfter = ceilMillis(d.RetryAfter)
	d.Reset = ceilMillis(d.Reset)
	return d
}

// ceilMillis rounds d, never negative, up to whole milliseconds.
func ceilMillis(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}

// Errors. Returned errors wrap them with the cause.
var (
	// ErrInvalidConfig is returned by the constructors for a configuration
	// that cannot limit anything, or not as stated: a nil DB, a limit or
	// window of zero or less, a window under a millisecond or over 50
	// years, a rate past one token per nanosecond, a burst that takes over
	// 50 years to refill or holds less than a millisecond of its rate
	// (burst*window < limit*1ms: the engine's time is whole milliseconds,
	// so such a bucket allows at most its burst per millisecond; the error
	// names the smallest burst that runs at the rate), a nil Option, a
	// prefix that is not text or leaves no room for a key of one byte (with
	// a window's 20 bytes of index, for a window limiter), WithBurst on a
	// window limiter; and by Allow and AllowN of a nil or zero limiter,
	// which no constructor made.
	ErrInvalidConfig = errors.New("ratelimit: invalid configuration")
	// ErrInvalidRequest is returned by Allow and AllowN for a key the
	// limiter cannot store under (empty, not UTF-8, holding NUL, or longer
	// than the engine's state.MaxKeyBytes less the limiter's prefix and, for
	// a window, 20 bytes of window index) or a cost n outside 1..limit
	// (1..burst for a token bucket): a request of more could never be
	// allowed.
	ErrInvalidRequest = errors.New("ratelimit: invalid request")
	// ErrBadState is returned when the key a limiter keeps its state under
	// holds something it did not write (bytes, or an out-of-range number;
	// for a token bucket, a time more than a capacity ahead without a
	// deadline, or with one before it): another program wrote to the
	// limiter's prefix. A fixed window's single
	// Incr finds it by adding to it, so that key has moved by one.
	ErrBadState = errors.New("ratelimit: stored state is not a limiter's")
)

// Option configures a limiter.
type Option func(*config) error

type config struct {
	prefix string
	burst  int64 // token bucket only; 0: the limit
}

// WithPrefix sets the prefix of the keys a limiter keeps its state under
// (each limiter has its own default: "ratelimit:fixed:", "ratelimit:sliding:",
// "ratelimit:bucket:"). Two limiters with different policies on one file need
// different prefixes, or they count in the same keys.
func WithPrefix(p string) Option {
	return func(c *config) error {
		if p == "" {
			return fmt.Errorf("%w: empty prefix", ErrInvalidConfig)
		}
		c.prefix = p
		return nil
	}
}

// WithBurst sets a token bucket's capacity: how many requests it allows at
// once after a quiet spell (the limit by default). It applies only to
// NewTokenBucket; the window limiters refuse it.
func WithBurst(b int64) Option {
	return func(c *config) error {
		if b <= 0 {
			return fmt.Errorf("%w: burst %d, want at least 1", ErrInvalidConfig, b)
		}
		c.burst = b
		return nil
	}
}

// newConfig applies opts over the defaults and checks what every limiter
// checks; room is what the limiter of kind adds to the caller's key besides
// its prefix (windowKeyRoom for a window, bucketKeyRoom for the bucket), so
// that a prefix is refused only when it leaves no room for a key of one
// byte.
func newConfig(kind string, db *state.DB, limit int64, window time.Duration, room int, opts []Option) (config, error) {
	c := config{prefix: "ratelimit:" + kind + ":"}
	if db == nil {
		return c, fmt.Errorf("%w: nil *state.DB", ErrInvalidConfig)
	}
	if limit <= 0 {
		return c, fmt.Errorf("%w: limit %d, want at least 1", ErrInvalidConfig, limit)
	}
	if window < time.Millisecond {
		return c, fmt.Errorf("%w: window %v, want at least 1ms (the engine's deadlines are whole milliseconds)", ErrInvalidConfig, window)
	}
	if window > maxSpan {
		return c, fmt.Errorf("%w: window %v, want at most %v", ErrInvalidConfig, window, maxSpan)
	}
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("%w: nil Option", ErrInvalidConfig)
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	if err := checkText(c.prefix); err != nil {
		return c, fmt.Errorf("%w: prefix %q %v", ErrInvalidConfig, c.prefix, err)
	}
	if len(c.prefix)+room >= state.MaxKeyBytes {
		return c, fmt.Errorf("%w: prefix %q is %d bytes, leaving no room for a key under the engine's %d (the most is %d for this limiter)",
			ErrInvalidConfig, cut(c.prefix), len(c.prefix), state.MaxKeyBytes, state.MaxKeyBytes-1-room)
	}
	return c, nil
}

// maxSpan is the longest window, or token bucket capacity in time, a limiter
// takes: long enough for any quota, short enough that the engine's time plus
// a few spans never overflows int64 nanoseconds (that is the year 2262).
const maxSpan = 50 * 365 * 24 * time.Hour

// windowKeyRoom is what a window limiter adds to the caller's key besides its
// prefix: ":" and the window's index, at most 19 digits.
const windowKeyRoom = 1 + 19

// bucketKeyRoom is what the token bucket adds to the caller's key besides
// its prefix: nothing, its key is the prefix and the caller's key.
const bucketKeyRoom = 0

// checkRequest checks a call's key and cost against limit (a token
// bucket's: its burst); room is what the limiter adds to the key besides
// prefix (bucketKeyRoom, nothing, for the bucket), so that every key it
// writes is one the engine takes.
func checkRequest(key string, n, limit int64, prefix string, room int) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidRequest)
	}
	if most := state.MaxKeyBytes - len(prefix) - room; len(key) > most {
		return fmt.Errorf("%w: key %q is %d bytes, over the %d this limiter takes (the engine's %d, less its prefix %q and what it adds)",
			ErrInvalidRequest, cut(key), len(key), most, state.MaxKeyBytes, prefix)
	}
	if err := checkText(key); err != nil {
		return fmt.Errorf("%w: key %q: %v", ErrInvalidRequest, key, err)
	}
	if n < 1 || n > limit {
		bound := "the limit"
		if room == bucketKeyRoom {
			bound = "the bucket's burst"
		}
		return fmt.Errorf("%w: key %q: n %d, want 1..%d (%s)", ErrInvalidRequest, key, n, limit, bound)
	}
	return nil
}

// unmade is the error of a limiter of kind that its constructor did not
// make (a nil pointer, or a zero value): it has no file and no limit.
func unmade(kind string) error {
	return fmt.Errorf("%w: a nil or zero %s; make it with New%s", ErrInvalidConfig, kind, kind)
}

// cut shortens a long key for an error message: its first 32 bytes, fewer
// where that would split a character, and "...".
func cut(key string) string {
	if len(key) <= 32 {
		return key
	}
	return textcut.Head(key, 32) + "..."
}

// checkText refuses what no key may hold: bytes that are not UTF-8, and NUL.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errors.New("holds a NUL byte")
	}
	return nil
}

// storedInt reads an integer the limiter wrote under k inside tx: 0 when
// absent.
func storedInt(tx *state.Tx, k string) (int64, error) {
	v, err := tx.Get(k)
	if errors.Is(err, state.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	i, ok := v.Int()
	if !ok {
		return 0, fmt.Errorf("%w: key %q holds %d bytes %q", ErrBadState, k, len(v.Bytes()), cut(v.String()))
	}
	if i < 0 {
		return 0, fmt.Errorf("%w: key %q holds %d", ErrBadState, k, i)
	}
	return i, nil
}

// windowKey is the key of window idx under prefix and the caller's key.
func windowKey(prefix, key string, idx int64) string {
	return prefix + key + ":" + strconv.FormatInt(idx, 10)
}

// twoStepsOn says whether ctx carries the planted bug that splits a
// decision's read from its write (internal/recipehooks).
func twoStepsOn(ctx context.Context) bool {
	return recipehooks.Has(ctx, bugs.LimiterTwoSteps)
}

// noteDecided tells the simulator's hooks, if ctx carries them, the engine
// time in unix nanoseconds a decision is made by: the time that placed the
// request in its window.
func noteDecided(ctx context.Context, now int64) {
	if h := recipehooks.From(ctx); h != nil && h.Decided != nil {
		h.Decided(now)
	}
}

// decidedAt returns the time a decision inside tx is made by, the
// transaction's own, in unix nanoseconds, and notes it. The time is read
// inside the transaction, never before it: a decision placed by a time read
// before its Update could run long after it (behind the file's lock, in a
// paused process), when the rows that time needs may have expired.
func decidedAt(ctx context.Context, tx *state.Tx) (int64, error) {
	t, err := tx.Now()
	if err != nil {
		return 0, err
	}
	now := t.UnixNano()
	noteDecided(ctx, now)
	return now, nil
}

// decide runs a decision's read and then its write in one Update, so that
// no other decision comes between them. With the planted bug twoSteps it
// runs them in two, the mistake the simulator must catch.
func decide(ctx context.Context, db *state.DB, twoSteps bool, read, write func(tx *state.Tx) error) error {
	if twoSteps {
		if err := db.Update(ctx, read); err != nil {
			return err
		}
		return db.Update(ctx, write)
	}
	return db.Update(ctx, func(tx *state.Tx) error {
		if err := read(tx); err != nil {
			return err
		}
		return write(tx)
	})
}
