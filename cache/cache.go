package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/statekit/statekit/internal/bugs"
	"github.com/statekit/statekit/internal/recipehooks"
	"github.com/statekit/statekit/internal/textcut"
	"github.com/statekit/statekit/state"
)

// Defaults of the options.
const (
	// DefaultLease is how long a computing caller holds the key before
	// another may take over: longer than the computation should take.
	DefaultLease = 10 * time.Second
	// DefaultMaxWait is how long a caller waits for another's computation,
	// on the engine's clock, before it gives up with ErrWaitTimeout.
	DefaultMaxWait = 30 * time.Second
	// DefaultPoll is the longest pause between two looks at the file while
	// waiting; the first pauses are shorter (1ms, doubling).
	DefaultPoll = 50 * time.Millisecond
)

// LeasePrefix starts the name of the lease a computing caller holds: the
// lease of key "k" is "cache:k". Leases and keys are separate namespaces in
// the file; the prefix keeps the cache's leases apart from an app's own.
const LeasePrefix = "cache:"

// MaxKeyBytes is the longest key the cache takes: the engine's longest key
// less LeasePrefix, since the key's lease is named after it.
const MaxKeyBytes = state.MaxKeyBytes - len(LeasePrefix)

// Errors. Returned errors wrap them with the key and cause.
var (
	// ErrInvalidArgument is returned for a nil DB, an empty key, a ttl of
	// zero or less, a nil fn, a bad option, or a key the cache cannot keep
	// (longer than MaxKeyBytes, not UTF-8, holding NUL; these wrap
	// state.ErrInvalidKey too). Nothing is computed.
	ErrInvalidArgument = errors.New("cache: invalid argument")
	// ErrWaitTimeout is returned when another caller held the key's lease
	// for longer than the wait allowed (WithMaxWait) without writing a value.
	ErrWaitTimeout = errors.New("cache: waited too long for another caller's computation")
	// ErrNotBytes is returned when the key holds an integer: a value the
	// cache did not write.
	ErrNotBytes = errors.New("cache: stored value is not bytes")
)

// Option configures one GetOrCompute call.
type Option func(*config) error

type config struct {
	lease, maxWait, poll time.Duration
}

// WithLease sets how long the computing caller holds the key (DefaultLease).
// Past it, a waiting caller takes over and computes, and the first caller's
// value is not written. It must be more than zero.
func WithLease(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease %v, want more than zero", ErrInvalidArgument, d)
		}
		c.lease = d
		return nil
	}
}

// WithMaxWait sets how long a caller waits, on the engine's clock, for
// another caller's computation (DefaultMaxWait). Zero means do not wait:
// return ErrWaitTimeout at once when another caller is computing.
func WithMaxWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("%w: max wait %v, want zero or more", ErrInvalidArgument, d)
		}
		c.maxWait = d
		return nil
	}
}

// WithPoll sets the longest pause between two looks at the file while
// waiting (DefaultPoll). It must be more than zero.
func WithPoll(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: poll %v, want more than zero", ErrInvalidArgument, d)
		}
		c.poll = d
		return nil
	}
}

// GetOrCompute returns the live value of key. On a miss, one caller (across
// every goroutine and process sharing the file) takes a lease on the key and
// runs fn; it writes fn's value with a deadline of ttl and returns it. The
// others wait, looking at the file every few milliseconds (at least twice
// per ttl, so that a short-lived value is seen; once a millisecond, the
// engine's unit, for a ttl under 2 ms), and return that value once
// it is written; if the computing caller's lease lapses first
// (it died, or fn outran the lease), one of them takes the lease over and
// runs fn itself.
//
// The write is fenced: one Update releases the lease, checking it still
// holds with the token it was granted, and writes the value, so a caller
// whose lease lapsed mid-compute writes nothing. Such a caller still returns
// the value fn gave it, with a nil error; the file keeps the newer holder's
// value, or none.
//
// A Del of key does not stop a fill already running: a fill that began
// before it writes the value it computed after it, for the whole ttl (see
// the package doc for what to do instead: a short ttl, or a version in the
// key).
//
// If fn returns an error or panics, its lease is released at once, so the
// next caller computes without waiting for it to lapse, and the error (or
// panic) goes to this caller only; waiting callers take the lease over and
// run fn themselves.
//
// A value that expires before a waiting caller looks again (a ttl shorter
// than the waiter's scheduling delays) is computed again by that caller:
// the cache never returns a value past its ttl.
//
// An empty value is returned as an empty, non-nil slice, whether computed
// or read.
//
// GetOrCompute returns ErrInvalidArgument for bad arguments, ErrWaitTimeout
// when the wait ran out, ErrNotBytes when key holds an integer,
// state.ErrInvalidValue when fn returned more than state.MaxValueBytes,
// state.ErrNotDurable on a miss on a Redis server that may lose or evict a
// lease (see the package doc; fn is not run), and the file's errors
// (ErrBusy, ErrIO, a cancelled ctx) as they come.
func GetOrCompute(ctx context.Context, db *state.DB, key string, ttl time.Duration,
	fn func(ctx context.Context) ([]byte, error), opts ...Option) ([]byte, error) {
	c := config{lease: DefaultLease, maxWait: DefaultMaxWait, poll: DefaultPoll}
	if err := check(db, key, ttl, fn, opts, &c); err != nil {
		return nil, err
	}
	name := LeasePrefix + key
	h := recipehooks.From(ctx)
	owner := newOwner()
	if h != nil && h.Owner != "" {
		owner = h.Owner
	}
	deadline := db.Now().Add(c.maxWait)
	// Look at least twice per ttl: a value written and expired between two
	// looks would be computed again.
	longest := min(c.poll, max(ttl/2, time.Millisecond))
	pause := min(time.Millisecond, longest) // a WithPoll under 1 ms bounds the first pause too
	for missed := false; ; missed = true {
		if v, ok, err := lookup(ctx, db, key); ok || err != nil {
			return v, err
		}
		if !missed && missHook != nil {
			missHook(key)
		}
		l, err := db.Lease(ctx, name, owner, c.lease)
		if err == nil {
			if h != nil && h.Granted != nil {
				h.Granted(l.Token)
			}
			return fill(ctx, db, key, ttl, fn, l)
		}
		var held *state.LeaseHeldError
		if !errors.As(err, &held) {
			return nil, fmt.Errorf("cache %q: %w", key, err)
		}
		left := deadline.Sub(db.Now())
		if left <= 0 {
			return nil, fmt.Errorf("cache %q: %w (%v): %w", key, ErrWaitTimeout, c.maxWait, err)
		}
		// Look again soon: when the holder's lease lapses at the latest.
		wait := min(pause, max(held.Left, time.Millisecond), left)
		if err := sleep(ctx, h, wait); err != nil {
			return nil, fmt.Errorf("cache %q: %w", key, err)
		}
		pause = min(2*pause, longest)
	}
}

// check validates GetOrCompute's arguments and applies its options.
func check(db *state.DB, key string, ttl time.Duration, fn func(context.Context) ([]byte, error), opts []Option, c *config) error {
	switch {
	case db == nil:
		return fmt.Errorf("%w: nil *state.DB", ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %w: key %q... is %d bytes, over the cache's %d (the engine's %d less the lease's prefix %q)",
			ErrInvalidArgument, state.ErrInvalidKey, head(key), len(key), MaxKeyBytes, state.MaxKeyBytes, LeasePrefix)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: %w: key %q is not valid UTF-8", ErrInvalidArgument, state.ErrInvalidKey, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: %w: key %q holds a NUL byte", ErrInvalidArgument, state.ErrInvalidKey, key)
	case ttl <= 0:
		return fmt.Errorf("%w: key %q: ttl %v, want more than zero", ErrInvalidArgument, key, ttl)
	case fn == nil:
		return fmt.Errorf("%w: key %q: nil fn", ErrInvalidArgument, key)
	}
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: key %q: nil Option", ErrInvalidArgument, key)
		}
		if err := o(c); err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
	}
	return nil
}

// headBytes is how much of a key too long to keep an error quotes.
const headBytes = 32

// head returns the first headBytes of key, fewer where that would split a
// character.
func head(key string) string { return textcut.Head(key, headBytes) }

// lookup reads key: its bytes and true when live, false when absent.
func lookup(ctx context.Context, db *state.DB, key string) ([]byte, bool, error) {
	v, err := db.Get(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cache %q: %w", key, err)
	}
	if v.IsInt() {
		return nil, false, fmt.Errorf("cache %q: %w: it holds %s", key, ErrNotBytes, v)
	}
	b := v.Bytes()
	if b == nil {
		b = []byte{} // as fill returns it
	}
	return b, true, nil
}

// fill runs fn under lease l and writes its value if l still holds.
func fill(ctx context.Context, db *state.DB, key string, ttl time.Duration,
	fn func(context.Context) ([]byte, error), l *state.Lease) (val []byte, err error) {
	settled := false // the lease was released with the write, or found lost
	defer func() {
		if !settled {
			// fn failed or panicked, or the write did: let the next
			// caller compute now rather than when the lease lapses. A
			// lease already lost is fine to find lost.
			_ = db.Release(context.WithoutCancel(ctx), l)
		}
	}()
	// Another caller may have written the value and released the lease
	// between this caller's miss and its grant: then there is nothing to
	// compute.
	if v, ok, err := lookup(ctx, db, key); ok || err != nil {
		return v, err
	}
	val, err = fn(ctx)
	if err != nil {
		return nil, err
	}
	if val == nil {
		val = []byte{}
	}
	if len(val) > state.MaxValueBytes {
		return nil, fmt.Errorf("cache %q: %w: fn returned %d bytes, the most is %d", key, state.ErrInvalidValue, len(val), state.MaxValueBytes)
	}
	if recipehooks.Has(ctx, bugs.CacheWritesAfterLost) {
		// The planted bug: write, then release, unfenced.
		if err = db.Set(ctx, key, val, state.TTL(ttl)); err == nil {
			err = db.Release(ctx, l)
		}
	} else {
		err = db.Update(ctx, func(tx *state.Tx) error {
			if err := tx.Release(l); err != nil {
				return err // lost: expired, or taken over with a newer token
			}
			return tx.Set(key, val, state.TTL(ttl))
		})
	}
	if errors.Is(err, state.ErrLeaseLost) {
		settled = true // not written; and nothing to release
		return val, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache %q: %w", key, err)
	}
	settled = true
	return val, nil
}

// sleep pauses for d or until ctx ends, through the simulator's hooks if ctx
// carries them.
func sleep(ctx context.Context, h *recipehooks.Hooks, d time.Duration) error {
	if h != nil && h.Sleep != nil {
		return h.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// missHook, when set (by tests only, before any call), is called once per
// GetOrCompute call that found its key missing, before it asks for the
// lease.
var missHook func(key string)

var (
	ownerBase = ownerPrefix()
	ownerSeq  atomic.Int64
)

// ownerPrefix names this process: its pid and a random part, so that a
// later process that reuses the pid is another owner.
func ownerPrefix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather)
	return "cache:" + strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b) + ":"
}

// newOwner returns a lease owner no other call shares: a lease asked for
// again by its own owner is granted again, so each call needs its own.
func newOwner() string { return ownerBase + strconv.FormatInt(ownerSeq.Add(1), 10) }
