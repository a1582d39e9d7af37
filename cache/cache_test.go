package cache_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statekit/statekit/cache"
	"github.com/statekit/statekit/faults"
	"github.com/statekit/statekit/internal/recipehooks"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// openDB opens a fresh file on a clock the test steps by hand: leases lapse
// and values expire only when the test says so.
func openDB(t *testing.T) (*state.DB, *faults.Clock) {
	t.Helper()
	clock := faults.NewClock(t0)
	db, err := state.Open(filepath.Join(t.TempDir(), "cache.state"), state.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, clock
}

// capped is the test's context with a generous cap: a caller still waiting
// when it ends fails the test rather than hanging it.
func capped(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// counting returns fn, which counts its calls and returns value.
func counting(calls *atomic.Int64, value string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		calls.Add(1)
		return []byte(value), nil
	}
}

// leaseOf returns the lease row of key's fill.
func leaseOf(t *testing.T, db *state.DB, key string) state.LeaseInfo {
	t.Helper()
	var found state.LeaseInfo
	require.NoError(t, db.Leases(t.Context(), true, func(li state.LeaseInfo) error {
		if li.Name == cache.LeasePrefix+key {
			found = li
		}
		return nil
	}))
	require.NotEmpty(t, found.Name, "no lease for %q", key)
	return found
}

func TestComputesOnMissAndCaches(t *testing.T) {
	db, clock := openDB(t)
	ctx := capped(t)
	var calls atomic.Int64
	fn := counting(&calls, "v1")

	v, err := cache.GetOrCompute(ctx, db, "k", time.Minute, fn)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(v))
	left, err := db.TTL(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, time.Minute, left, "written with the ttl")
	assert.Equal(t, state.LeaseReleased, leaseOf(t, db, "k").Status, "the fill released its lease")

	v, err = cache.GetOrCompute(ctx, db, "k", time.Minute, fn)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(v))
	assert.EqualValues(t, 1, calls.Load(), "a hit computes nothing")

	clock.Advance(time.Minute) // expired: the next call is a new fill
	v, err = cache.GetOrCompute(ctx, db, "k", time.Minute, counting(&calls, "v2"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(v))
	assert.EqualValues(t, 2, calls.Load())
}

func TestEmptyValueIsAValue(t *testing.T) {
	db, _ := openDB(t)
	ctx := capped(t)
	var calls atomic.Int64
	for range 2 {
		v, err := cache.GetOrCompute(ctx, db, "k", time.Minute, func(context.Context) ([]byte, error) {
			calls.Add(1)
			return nil, nil
		})
		require.NoError(t, err)
		assert.Equal(t, []byte{}, v, "computed or read, an empty value is an empty slice")
	}
	assert.EqualValues(t, 1, calls.Load(), "an empty value is cached too")
	v, err := cache.GetOrCompute(ctx, db, strings.Repeat("k", cache.MaxKeyBytes), time.Minute, counting(&calls, "longest"))
	require.NoError(t, err, "the longest key the cache takes")
	assert.Equal(t, "longest", string(v))
}

// TestWaitersLookTwicePerTTL holds a key's lease and has another caller
// wait for it: its pauses between looks start at 1 ms and double up to 50
// ms (DefaultPoll) and at most half the ttl, so a value that lives for ttl
// is seen before it expires; never under a millisecond, the engine's unit,
// so a ttl under 2 ms is looked at once a millisecond.
func TestWaitersLookTwicePerTTL(t *testing.T) {
	db, _ := openDB(t)
	ctx := capped(t)
	_, err := db.Lease(ctx, cache.LeasePrefix+"k", "another caller", time.Hour)
	require.NoError(t, err)
	for _, ttl := range []time.Duration{time.Millisecond, 6 * time.Millisecond, 40 * time.Millisecond, time.Hour} {
		var pauses []time.Duration
		wctx, stop := context.WithCancel(ctx)
		h := &recipehooks.Hooks{Sleep: func(ctx context.Context, d time.Duration) error {
			if pauses = append(pauses, d); len(pauses) == 12 {
				stop()
			}
			return ctx.Err()
		}}
		_, err := cache.GetOrCompute(recipehooks.With(wctx, h), db, "k", ttl, counting(new(atomic.Int64), "x"))
		require.ErrorIs(t, err, context.Canceled)
		longest := max(time.Millisecond, min(ttl/2, cache.DefaultPoll))
		for _, p := range pauses {
			assert.LessOrEqual(t, p, longest, "ttl %v: pauses %v", ttl, pauses)
		}
		assert.Equal(t, longest, pauses[len(pauses)-1], "ttl %v: the pauses grow to their bound", ttl)
		// The documented schedule: 1 ms, doubling, up to that bound.
		var want []time.Duration
		for i := range pauses {
			want = append(want, min(time.Millisecond<<i, longest))
		}
		assert.Equal(t, want, pauses, "ttl %v: 1 ms, doubling to the bound", ttl)
	}
}

// TestWaitersNeverPauseFurtherThanTheyMustWait: a waiter's pause ends no
// later than the holder's lease does, nor later than its own max wait, on
// the engine's clock: with pauses of 1, 2 and 4 ms behind it and 3 ms left
// of either, the next pause is 3 ms, not the 8 of the doubling schedule.
// The lease running out lets the waiter take it and compute; the max wait
// running out ends it with ErrWaitTimeout, having waited exactly it.
func TestWaitersNeverPauseFurtherThanTheyMustWait(t *testing.T) {
	ms := time.Millisecond
	for name, c := range map[string]struct {
		lease, maxWait time.Duration
		err            error
	}{
		"the lease ends": {10 * ms, time.Minute, nil},
		"the wait ends":  {time.Hour, 10 * ms, cache.ErrWaitTimeout},
	} {
		db, clock := openDB(t)
		ctx := capped(t)
		_, err := db.Lease(ctx, cache.LeasePrefix+"k", "another caller", c.lease)
		require.NoError(t, err, name)
		var pauses []time.Duration
		h := &recipehooks.Hooks{Sleep: func(ctx context.Context, d time.Duration) error {
			pauses = append(pauses, d)
			clock.Advance(d)
			return ctx.Err()
		}}
		calls := new(atomic.Int64)
		v, err := cache.GetOrCompute(recipehooks.With(ctx, h), db, "k", time.Hour, counting(calls, "x"),
			cache.WithMaxWait(c.maxWait), cache.WithPoll(time.Second))
		assert.Equal(t, []time.Duration{ms, 2 * ms, 4 * ms, 3 * ms}, pauses, name)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, name)
			assert.Zero(t, calls.Load(), name)
			continue
		}
		require.NoError(t, err, name)
		assert.Equal(t, "x", string(v), name)
		assert.EqualValues(t, 1, calls.Load(), name)
	}
}

// TestWaitersNeverPauseLongerThanThePoll: WithPoll is the longest pause
// between two looks, the first one included, even below the first pause's
// usual 1 ms.
func TestWaitersNeverPauseLongerThanThePoll(t *testing.T) {
	db, _ := openDB(t)
	ctx := capped(t)
	_, err := db.Lease(ctx, cache.LeasePrefix+"k", "another caller", time.Hour)
	require.NoError(t, err)
	const poll = 300 * time.Microsecond
	var pauses []time.Duration
	wctx, stop := context.WithCancel(ctx)
	h := &recipehooks.Hooks{Sleep: func(ctx context.Context, d time.Duration) error {
		if pauses = append(pauses, d); len(pauses) == 4 {
			stop()
		}
		return ctx.Err()
	}}
	_, err = cache.GetOrCompute(recipehooks.With(wctx, h), db, "k", time.Hour, counting(new(atomic.Int64), "x"), cache.WithPoll(poll))
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []time.Duration{poll, poll, poll, poll}, pauses)
}

// TestGoroutinesShareOneFill starts many callers of a cold key at once; the
// computation waits until every caller has found the key missing, so all of
// them come for the lease, and must run once.
func TestGoroutinesShareOneFill(t *testing.T) {
	db, clock := openDB(t)
	ctx := capped(t)
	const callers = 32
	var misses atomic.Int64
	cache.SetMissHook(func(string) { misses.Add(1) })
	t.Cleanup(func() { cache.SetMissHook(nil) })
	for fillNo := 1; fillNo <= 2; fillNo++ {
		var calls atomic.Int64
		want := fmt.Sprintf("fill %d", fillNo)
		fn := func(ctx context.Context) ([]byte, error) {
			calls.Add(1)
			for misses.Load() < int64(callers*fillNo) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				time.Sleep(time.Millisecond)
			}
			return []byte(want), nil
		}
		var wg sync.WaitGroup
		got := make([]string, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				v, err := cache.GetOrCompute(ctx, db, "hot", time.Minute, fn, cache.WithPoll(time.Millisecond))
				got[i], errs[i] = string(v), err
			})
		}
		wg.Wait()
		for i := range callers {
			require.NoError(t, errs[i], "caller %d", i)
			assert.Equal(t, want, got[i], "caller %d", i)
		}
		assert.EqualValues(t, callers*fillNo, misses.Load(), "every caller missed")
		assert.EqualValues(t, 1, calls.Load(), "fill %d: fn ran once for %d callers", fillNo, callers)
		clock.Advance(time.Minute) // the value expires: the next round is a new fill
	}
}

// TestLapsedLeaseDoesNotWrite: a caller whose lease lapses while fn runs
// (the clock moves past it) writes nothing, whether or not another caller
// took the lease over meanwhile.
func TestLapsedLeaseDoesNotWrite(t *testing.T) {
	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprintf("takeover=%v", takeover), func(t *testing.T) {
			db, clock := openDB(t)
			ctx := capped(t)
			started, finish := make(chan struct{}), make(chan struct{})
			type result struct {
				v   string
				err error
			}
			slow := make(chan result, 1)
			go func() {
				v, err := cache.GetOrCompute(ctx, db, "k", time.Hour, func(context.Context) ([]byte, error) {
					close(started)
					<-finish
					return []byte("stale"), nil
				}, cache.WithLease(10*time.Second))
				slow <- result{string(v), err}
			}()
			<-started
			first := leaseOf(t, db, "k")
			assert.Equal(t, state.LeaseHeld, first.Status)

			clock.Advance(10 * time.Second) // the lease lapses mid-compute
			if takeover {
				v, err := cache.GetOrCompute(ctx, db, "k", time.Hour, func(context.Context) ([]byte, error) {
					return []byte("fresh"), nil
				})
				require.NoError(t, err)
				assert.Equal(t, "fresh", string(v))
				assert.Equal(t, first.Token+1, leaseOf(t, db, "k").Token, "taken over with a newer token")
			}
			close(finish)
			r := <-slow
			require.NoError(t, r.err)
			assert.Equal(t, "stale", r.v, "the late caller still gets its own value")

			v, err := db.Get(ctx, "k")
			if takeover {
				require.NoError(t, err)
				assert.Equal(t, "fresh", v.String(), "the newer holder's value stands")
			} else {
				assert.ErrorIs(t, err, state.ErrNotFound, "nothing written by a lapsed lease")
			}
		})
	}
}

// TestWaiterTakesOverALapsedLease: a caller waiting on a computation whose
// lease lapses takes the lease over and computes itself.
func TestWaiterTakesOverALapsedLease(t *testing.T) {
	db, clock := openDB(t)
	ctx := capped(t)
	started, finish := make(chan struct{}), make(chan struct{})
	defer close(finish)
	go func() {
		_, _ = cache.GetOrCompute(ctx, db, "k", time.Hour, func(context.Context) ([]byte, error) {
			close(started)
			<-finish
			return []byte("stale"), nil
		}, cache.WithLease(10*time.Second))
	}()
	<-started

	var calls atomic.Int64
	waiter := make(chan []byte, 1)
	go func() {
		v, err := cache.GetOrCompute(ctx, db, "k", time.Hour, counting(&calls, "fresh"), cache.WithPoll(time.Millisecond))
		assert.NoError(t, err)
		waiter <- v
	}()
	// Polls that find the lease held compute nothing, however many.
	for range 50 {
		time.Sleep(time.Millisecond)
		require.Zero(t, calls.Load(), "computed while the lease was held")
	}
	clock.Advance(10 * time.Second)
	assert.Equal(t, "fresh", string(<-waiter))
	assert.EqualValues(t, 1, calls.Load())
}

func TestWaitIsBoundedOnTheEnginesClock(t *testing.T) {
	db, clock := openDB(t)
	ctx := capped(t)
	started, finish := make(chan struct{}), make(chan struct{})
	defer close(finish)
	go func() {
		_, _ = cache.GetOrCompute(ctx, db, "k", time.Hour, func(context.Context) ([]byte, error) {
			close(started)
			<-finish
			return []byte("slow"), nil
		}, cache.WithLease(time.Hour))
	}()
	<-started

	_, err := cache.GetOrCompute(ctx, db, "k", time.Hour, counting(new(atomic.Int64), "x"), cache.WithMaxWait(0))
	assert.ErrorIs(t, err, cache.ErrWaitTimeout, "no wait at all")
	assert.ErrorIs(t, err, state.ErrLeaseHeld)

	done := make(chan error, 1)
	go func() {
		_, err := cache.GetOrCompute(ctx, db, "k", time.Hour, counting(new(atomic.Int64), "x"),
			cache.WithMaxWait(5*time.Second), cache.WithPoll(time.Millisecond))
		done <- err
	}()
	// Time passes on the engine's clock only: a second per millisecond
	// until the waiter gives up, whenever it began to wait.
	for {
		select {
		case err := <-done:
			assert.ErrorIs(t, err, cache.ErrWaitTimeout)
			assert.Equal(t, state.LeaseHeld, leaseOf(t, db, "k").Status, "the holder still holds: a timeout, not a takeover")
			return
		case <-time.After(time.Millisecond):
			clock.Advance(time.Second)
		}
	}
}

func TestFailedComputationReleasesTheLease(t *testing.T) {
	db, _ := openDB(t)
	ctx := capped(t)
	boom := errors.New("backend down")
	_, err := cache.GetOrCompute(ctx, db, "k", time.Hour, func(context.Context) ([]byte, error) { return nil, boom })
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, state.LeaseReleased, leaseOf(t, db, "k").Status)

	assert.PanicsWithValue(t, "bug", func() {
		_, _ = cache.GetOrCompute(ctx, db, "p", time.Hour, func(context.Context) ([]byte, error) { panic("bug") })
	})
	assert.Equal(t, state.LeaseReleased, leaseOf(t, db, "p").Status)

	_, err = cache.GetOrCompute(ctx, db, "big", time.Hour, func(context.Context) ([]byte, error) {
		return make([]byte, state.MaxValueBytes+1), nil
	})
	assert.ErrorIs(t, err, state.ErrInvalidValue)
	assert.ErrorContains(t, err, fmt.Sprintf(`cache "big": %v: fn returned %d bytes`, state.ErrInvalidValue, state.MaxValueBytes+1))
	assert.Equal(t, state.LeaseReleased, leaseOf(t, db, "big").Status)

	// A computation the caller's context ended: the lease is released all
	// the same, with a context of its own.
	cctx, cancel := context.WithCancel(ctx)
	_, err = cache.GetOrCompute(cctx, db, "gone", time.Hour, func(ctx context.Context) ([]byte, error) {
		cancel()
		return nil, ctx.Err()
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, state.LeaseReleased, leaseOf(t, db, "gone").Status)

	// The clock never moved: without the releases these would wait.
	var calls atomic.Int64
	for _, k := range []string{"k", "p", "big", "gone"} {
		v, err := cache.GetOrCompute(ctx, db, k, time.Hour, counting(&calls, "ok"), cache.WithMaxWait(0))
		require.NoError(t, err, k)
		assert.Equal(t, "ok", string(v))
	}
}

// TestReadOnlyHandleServesHitsAndRefusesMisses: on a handle opened
// read-only (WithReadOnly), a cached value is served; a miss cannot take
// the fill's lease, so it fails with ErrReadOnly, naming the key, and
// computes nothing.
func TestReadOnlyHandleServesHitsAndRefusesMisses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.state")
	ctx := capped(t)
	db, err := state.Open(path)
	require.NoError(t, err)
	_, err = cache.GetOrCompute(ctx, db, "hit", time.Hour, counting(new(atomic.Int64), "cached"))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	ro, err := state.Open(path, state.WithReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	calls := new(atomic.Int64)
	v, err := cache.GetOrCompute(ctx, ro, "hit", time.Hour, counting(calls, "x"))
	require.NoError(t, err)
	assert.Equal(t, "cached", string(v))
	v, err = cache.GetOrCompute(ctx, ro, "miss", time.Hour, counting(calls, "x"))
	assert.ErrorIs(t, err, state.ErrReadOnly)
	assert.True(t, strings.HasPrefix(err.Error(), `cache "miss": `), "%v", err)
	assert.Nil(t, v)
	assert.Zero(t, calls.Load(), "nothing computed")
}

func TestBadArguments(t *testing.T) {
	db, _ := openDB(t)
	ctx := capped(t)
	var calls atomic.Int64
	fn := counting(&calls, "v")
	for _, c := range []struct {
		name  string
		call  func() ([]byte, error)
		cause string
	}{
		{"nil db", func() ([]byte, error) { return cache.GetOrCompute(ctx, nil, "k", time.Minute, fn) }, "nil *state.DB"},
		{"empty key", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "", time.Minute, fn) }, "empty key"},
		{"zero ttl", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "k", 0, fn) }, "ttl 0s"},
		{"negative ttl", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "k", -time.Second, fn) }, "ttl -1s"},
		{"nil fn", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "k", time.Minute, nil) }, "nil fn"},
		{"nil option", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "k", time.Minute, fn, nil) }, "nil Option"},
		{"zero lease", func() ([]byte, error) {
			return cache.GetOrCompute(ctx, db, "k", time.Minute, fn, cache.WithLease(0))
		}, `key "k": cache: invalid argument: lease 0s`},
		{"negative wait", func() ([]byte, error) {
			return cache.GetOrCompute(ctx, db, "k", time.Minute, fn, cache.WithMaxWait(-1))
		}, `key "k": cache: invalid argument: max wait -1ns`},
		{"zero poll", func() ([]byte, error) {
			return cache.GetOrCompute(ctx, db, "k", time.Minute, fn, cache.WithPoll(0))
		}, `key "k": cache: invalid argument: poll 0s`},
		{"key too long for its lease", func() ([]byte, error) {
			return cache.GetOrCompute(ctx, db, strings.Repeat("k", cache.MaxKeyBytes+1), time.Minute, fn)
		}, "over the cache's 1018"},
		{"key not UTF-8", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "k\xff", time.Minute, fn) }, "not valid UTF-8"},
		{"key with NUL", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "k\x00", time.Minute, fn) }, "NUL"},
		{"key starting with NUL", func() ([]byte, error) { return cache.GetOrCompute(ctx, db, "\x00k", time.Minute, fn) }, "NUL"},
	} {
		v, err := c.call()
		assert.ErrorIs(t, err, cache.ErrInvalidArgument, c.name)
		if strings.HasPrefix(c.name, "key ") {
			assert.ErrorIs(t, err, state.ErrInvalidKey, c.name)
		}
		assert.ErrorContains(t, err, c.cause, c.name)
		assert.Nil(t, v, c.name)
	}
	assert.Zero(t, calls.Load(), "nothing computed")

	require.NoError(t, db.Set(ctx, "n", 7))
	_, err := cache.GetOrCompute(ctx, db, "n", time.Minute, fn)
	assert.ErrorIs(t, err, cache.ErrNotBytes)

	_, err = cache.GetOrCompute(ctx, db, strings.Repeat("x", state.MaxKeyBytes+1), time.Minute, fn)
	assert.ErrorIs(t, err, state.ErrInvalidKey)
	assert.Zero(t, calls.Load(), "nothing computed")
}

// TestWaitersComputeAfterAFailedFill: a fill whose fn fails or panics while
// other callers wait for it releases its lease, so one waiter takes it over
// and computes at once (the engine's clock never moves here, so a lease left
// to lapse would keep them waiting); the error, or the panic, goes to the
// failed caller only, and every waiter gets the waiter's value.
func TestWaitersComputeAfterAFailedFill(t *testing.T) {
	const waiters = 6
	boom := errors.New("backend down")
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panics=%v", panics), func(t *testing.T) {
			db, _ := openDB(t)
			ctx := capped(t)
			var misses atomic.Int64
			cache.SetMissHook(func(string) { misses.Add(1) })
			t.Cleanup(func() { cache.SetMissHook(nil) })

			started := make(chan struct{})
			var failed error
			var recovered any
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { recovered = recover() }()
				_, failed = cache.GetOrCompute(ctx, db, "k", time.Hour, func(ctx context.Context) ([]byte, error) {
					close(started)
					// Fail only once every waiter has missed and so waits.
					for misses.Load() < waiters+1 {
						if err := ctx.Err(); err != nil {
							return nil, err
						}
						time.Sleep(time.Millisecond)
					}
					if panics {
						panic("bug")
					}
					return nil, boom
				})
			}()
			<-started

			var calls atomic.Int64
			var wg sync.WaitGroup
			got := make([]string, waiters)
			errs := make([]error, waiters)
			for i := range waiters {
				wg.Go(func() {
					v, err := cache.GetOrCompute(ctx, db, "k", time.Hour, counting(&calls, "fresh"), cache.WithPoll(time.Millisecond))
					got[i], errs[i] = string(v), err
				})
			}
			wg.Wait()
			<-done
			if panics {
				assert.Equal(t, "bug", recovered, "the panic goes to the failed caller")
			} else {
				assert.ErrorIs(t, failed, boom, "the error goes to the failed caller")
			}
			for i := range waiters {
				require.NoError(t, errs[i], "waiter %d", i)
				assert.Equal(t, "fresh", got[i], "waiter %d", i)
			}
			assert.EqualValues(t, 1, calls.Load(), "one waiter took the lease over and computed")
		})
	}
}

// TestTooLongKeyIsQuotedByWholeCharacters: the error for a key longer than
// MaxKeyBytes quotes its first 32 bytes, fewer where the 32nd byte falls
// inside a character, so the quote never ends in half of one. Before, it
// cut at 32 bytes whatever was there: "kéé...é\xc3"... for a key of "k"
// and "é"s.
func TestTooLongKeyIsQuotedByWholeCharacters(t *testing.T) {
	db, _ := openDB(t)
	var calls atomic.Int64
	for _, c := range []struct{ key, quoted string }{
		// The 33rd byte is the 2nd of a character (é, €), the 3rd (€), the
		// 4th (😀): the cut backs up 1, 2, 3 bytes.
		{"k" + strings.Repeat("é", 600), `"k` + strings.Repeat("é", 15) + `"...`},
		{"k" + strings.Repeat("€", 400), `"k` + strings.Repeat("€", 10) + `"...`},
		{"kkk" + strings.Repeat("€", 400), `"kkk` + strings.Repeat("€", 9) + `"...`},
		{"k" + strings.Repeat("😀", 300), `"k` + strings.Repeat("😀", 7) + `"...`},
		// On a character's start: 32 bytes.
		{strings.Repeat("é", 600), `"` + strings.Repeat("é", 16) + `"...`},
		{strings.Repeat("k", cache.MaxKeyBytes+1), `"` + strings.Repeat("k", 32) + `"...`},
	} {
		_, err := cache.GetOrCompute(capped(t), db, c.key, time.Minute, counting(&calls, "v"))
		require.ErrorIs(t, err, cache.ErrInvalidArgument)
		assert.ErrorContains(t, err, c.quoted)
		assert.ErrorContains(t, err, fmt.Sprintf("... is %d bytes, over the cache's %d", len(c.key), cache.MaxKeyBytes))
		assert.NotContains(t, err.Error(), `\x`, "no half character")
	}
	assert.Zero(t, calls.Load(), "nothing computed")
}

// requireDelDuringAFillWritesTheOldValue runs a fill of "report" on db
// whose fn reads the source ("v1") and then waits; meanwhile the app
// changes the source to "v2" and deletes the key, as an invalidation
// would. The fill then writes "v1", after the Del: a Del does not stop a
// fill already running (the fill is fenced against losing its lease, not
// against a Del), so the value from before the change is served for its
// ttl. A version in the key, bumped with the source, is never stale: the
// new version's key is a miss that computes "v2".
func requireDelDuringAFillWritesTheOldValue(t *testing.T, db *state.DB, ttl time.Duration) {
	t.Helper()
	ctx := capped(t)
	var source atomic.Value
	source.Store("v1")
	read := func(context.Context) ([]byte, error) { return []byte(source.Load().(string)), nil }
	started, finish := make(chan struct{}), make(chan struct{})
	filled := make(chan []byte, 1)
	go func() {
		v, err := cache.GetOrCompute(ctx, db, "report", ttl, func(ctx context.Context) ([]byte, error) {
			v, err := read(ctx) // the source as it was when the fill began
			close(started)
			<-finish
			return v, err
		})
		assert.NoError(t, err)
		filled <- v
	}()
	<-started
	source.Store("v2")
	_, err := db.Del(ctx, "report") // nothing to delete yet: the fill has not written
	require.NoError(t, err)
	close(finish)
	assert.Equal(t, "v1", string(<-filled), "the fill returns what it computed")

	var calls atomic.Int64
	v, err := cache.GetOrCompute(ctx, db, "report", ttl, func(ctx context.Context) ([]byte, error) {
		calls.Add(1)
		return read(ctx)
	})
	require.NoError(t, err)
	assert.Equal(t, "v1", string(v), "the value from before the change and the Del is cached")
	assert.Zero(t, calls.Load(), "a hit: nothing computed")

	// A version in the key: the change is a new key.
	v, err = cache.GetOrCompute(ctx, db, "report:"+source.Load().(string), ttl, read)
	require.NoError(t, err)
	assert.Equal(t, "v2", string(v), "a versioned key is never the old value")
}

// TestDelDuringAFillDoesNotStopIt: a fill that began before a Del of its
// key writes the value it computed after the Del, and that value is served
// for its whole ttl (requireDelDuringAFillWritesTheOldValue); a short ttl
// bounds how long, and a version in the key avoids it.
func TestDelDuringAFillDoesNotStopIt(t *testing.T) {
	db, clock := openDB(t)
	requireDelDuringAFillWritesTheOldValue(t, db, time.Minute)
	left, err := db.TTL(t.Context(), "report")
	require.NoError(t, err)
	assert.Equal(t, time.Minute, left, "the old value lives its whole ttl")
	clock.Advance(time.Minute)
	v, err := cache.GetOrCompute(capped(t), db, "report", time.Minute, counting(new(atomic.Int64), "v2"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(v), "once the ttl ends, the next call computes again")
}
