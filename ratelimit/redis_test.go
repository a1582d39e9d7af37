package ratelimit_test

import (
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate" // the workers open redis:// URLs
)

// TestProcessesAreAllowedExactlyTheLimitOnRedis is
// TestProcessesAreAllowedExactlyTheLimit over a real redis-server: the
// limiters run on the verbs alone, so they are exact on either backend.
// The sliding window and the token bucket are one Update each, optimistic
// on Redis: conflicting decisions run again, and still the limit holds.
func TestProcessesAreAllowedExactlyTheLimitOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	srv := redistest.Start(t)
	for _, kind := range []string{"fixed", "sliding", "bucket"} {
		t.Run(kind, func(t *testing.T) {
			requireExactLimit(t, kind, srv.URL("rl-"+kind+":"))
		})
	}
}
