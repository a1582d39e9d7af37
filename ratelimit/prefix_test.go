package ratelimit_test

import (
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
