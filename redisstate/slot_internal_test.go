package redisstate

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/statekit/statekit/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotMatchesTheServer: slot agrees with a cluster node's CLUSTER
// KEYSLOT on the hash tag's edges (an empty tag, a tag never closed, a
// second tag, braces inside a tag) and on seeded random keys of bytes
// braces are common in. A key sent to the wrong master is refused with
// MOVED, and a transaction's keys are grouped by this function.
func TestSlotMatchesTheServer(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"))
	keys := []string{"", "{", "}", "{}", "}{", "a{}b", "{}a", "a{}", "{}{x}", "{x}{y}", "a{b", "a}b{c}",
		"{{x}}", "{x}}", "{{}x}", "x{y", "{user1000}.following", "foo{bar}{zap}", "{\x00}", "\xff{\xfe}"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}ab\x00\xff")
	for range 300 {
		b := make([]byte, rng.IntN(9))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	ctx := t.Context()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: srv.Password()})
	defer c.Close()
	for _, k := range keys {
		want, err := c.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err, "%q", k)
		assert.Equal(t, int(want), slot(k), "slot of %s", strconv.Quote(k))
	}
}
