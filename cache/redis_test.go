package cache_test

import (
	"testing"

	"github.com/statekit/statekit/internal/redistest"
	_ "github.com/statekit/statekit/redisstate" // the workers open redis:// URLs
)

// TestProcessesShareOneFillOnRedis is TestProcessesShareOneFill over a
// real redis-server: GetOrCompute runs on the verbs alone, so each key's
// fn runs once for every caller of every process on either backend.
func TestProcessesShareOneFillOnRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	requireOneFill(t, redistest.Start(t).URL("cache:"))
}
