package ratelimit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statekit/statekit/ratelimit"
	"github.com/statekit/statekit/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLimitersOfOneKindShareKeysUnlessPrefixed: two limiters of one kind
// and one window on one file count in the same keys, whatever their
// limits, until one has a prefix of its own (WithPrefix). A login limit of
// 3 a minute beside an overall limit of 100 a minute, both keyed by the
// user, would each count the other's requests.
func TestLimitersOfOneKindShareKeysUnlessPrefixed(t *testing.T) {
	kinds := map[string]func(db *state.DB, limit int64, opts ...ratelimit.Option) (ratelimit.Limiter, error){
		"fixed": func(db *state.DB, limit int64, opts ...ratelimit.Option) (ratelimit.Limiter, error) {
			return ratelimit.NewFixedWindow(db, limit, time.Minute, opts...)
		},
		"sliding": func(db *state.DB, limit int64, opts ...ratelimit.Option) (ratelimit.Limiter, error) {
			return ratelimit.NewSlidingWindow(db, limit, time.Minute, opts...)
		},
	}
	for name, newLimiter := range kinds {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				opts []ratelimit.Option
				want int64 // what the overall limit has left after the logins and its own request
			}{
				{nil, 100 - 3 - 1},
				{[]ratelimit.Option{ratelimit.WithPrefix("login:")}, 100 - 1},
			} {
				db, _ := openDB(t)
				login, err := newLimiter(db, 3, c.opts...)
				require.NoError(t, err)
				overall, err := newLimiter(db, 100)
				require.NoError(t, err)
				for range 3 {
					require.True(t, decide(t, login, "alice", 1).Allowed)
				}
				assert.Equal(t, c.want, decide(t, overall, "alice", 1).Remaining, "prefix options %d", len(c.opts))
			}
		})
	}
}

// TestLongestPrefixLeavesRoomForAKeyOfOneByte: a limiter takes a prefix
// that leaves room for a key of one byte under the engine's
// state.MaxKeyBytes with what the limiter adds to it: 20 bytes of window
// index for a window limiter, nothing for the token bucket. So the longest
// prefix is 1,003 bytes for a window, 1,023 for the bucket; a byte more is
// ErrInvalidConfig naming the most, and under the longest a key of one
// byte is decided and one of two is ErrInvalidRequest. Before, the bucket
// was refused a prefix of 1,004 to 1,023 bytes, as if it added a window's
// index to its keys.
func TestLongestPrefixLeavesRoomForAKeyOfOneByte(t *testing.T) {
	db, _ := openDB(t)
	for _, c := range []struct {
		name    string
		longest int
		make    func(prefix string) (ratelimit.Limiter, error)
	}{
		{"fixed", 1003, func(p string) (ratelimit.Limiter, error) {
			return ratelimit.NewFixedWindow(db, 5, time.Minute, ratelimit.WithPrefix(p))
		}},
		{"sliding", 1003, func(p string) (ratelimit.Limiter, error) {
			return ratelimit.NewSlidingWindow(db, 5, time.Minute, ratelimit.WithPrefix(p))
		}},
		{"bucket", 1023, func(p string) (ratelimit.Limiter, error) {
			return ratelimit.NewTokenBucket(db, 5, time.Minute, ratelimit.WithPrefix(p))
		}},
	} {
		require.Equal(t, state.MaxKeyBytes, 1024, "the engine's longest key")
		l, err := c.make(strings.Repeat("p", c.longest+1))
		assert.ErrorIs(t, err, ratelimit.ErrInvalidConfig, "%s: a prefix of %d bytes", c.name, c.longest+1)
		assert.ErrorContains(t, err, fmt.Sprintf("is %d bytes, leaving no room for a key under the engine's 1024 (the most is %d for this limiter)",
			c.longest+1, c.longest), c.name)
		assert.Nil(t, l, c.name)

		l, err = c.make(strings.Repeat("p", c.longest))
		require.NoError(t, err, "%s: a prefix of %d bytes", c.name, c.longest)
		assert.True(t, decide(t, l, "k", 1).Allowed, "%s: a key of one byte under the longest prefix", c.name)
		_, err = l.Allow(t.Context(), "kk")
		assert.ErrorIs(t, err, ratelimit.ErrInvalidRequest, "%s: a key of two bytes under the longest prefix", c.name)
	}
}
